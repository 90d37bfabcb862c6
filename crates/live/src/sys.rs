//! The only unsafe code in Sluice: AF_PACKET sockets with a TPACKET_V3 receive ring.
//!
//! Receive: the kernel fills fixed-size blocks of a shared memory ring with frames and hands a
//! block to user space by setting `TP_STATUS_USER` in its header; we copy the frames out and give
//! the block back (`TP_STATUS_KERNEL`). Transmit: plain `send` on a bound packet socket with
//! `PACKET_QDISC_BYPASS` (the frame goes straight to the driver, as a forwarder's should).
//! `PACKET_IGNORE_OUTGOING` keeps our own transmissions out of the receive ring.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// The interface index of `name`, or an error if there is none.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the returned descriptor is checked and owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            ETH_P_ALL_BE as libc::c_int,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of the given size for the duration of the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn bind(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn set_promisc(fd: &OwnedFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: packet_mreq is plain old data; all-zero is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex as i32;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)
}

/// A TPACKET_V3 receive ring on one interface.
pub struct RxRing {
    fd: OwnedFd,
    map: *mut u8,
    block_size: usize,
    block_nr: usize,
    next_block: usize,
}

// SAFETY: the mapping is owned by this value alone and only touched through `&mut self`.
unsafe impl Send for RxRing {}

/// Ring geometry: 64 blocks of 256 KiB (16 MiB), blocks retired after 1 ms even if not full.
const BLOCK_SIZE: usize = 1 << 18;
const BLOCK_NR: usize = 64;

impl RxRing {
    /// Open a promiscuous receive ring on `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<RxRing> {
        let fd = packet_socket()?;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)?;
        setsockopt(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)?;
        let req = TpacketReq3 {
            block_size: BLOCK_SIZE as u32,
            block_nr: BLOCK_NR as u32,
            frame_size: 2048,
            frame_nr: (BLOCK_SIZE / 2048 * BLOCK_NR) as u32,
            retire_blk_tov: 1,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = BLOCK_SIZE * BLOCK_NR;
        // SAFETY: mapping the ring the kernel just allocated for this socket, length as requested.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring =
            RxRing { fd, map: map as *mut u8, block_size: BLOCK_SIZE, block_nr: BLOCK_NR, next_block: 0 };
        bind(&ring.fd, ifindex)?;
        set_promisc(&ring.fd, ifindex)?;
        Ok(ring)
    }

    fn block_status(&self, b: usize) -> &AtomicU32 {
        // SAFETY: block `b < block_nr` lies inside the mapping; its header starts with
        // version (u32), offset_to_priv (u32), then block_status (u32) at byte 8, which is 4-byte
        // aligned. The kernel writes it concurrently, hence the atomic view.
        unsafe { &*(self.map.add(b * self.block_size + 8) as *const AtomicU32) }
    }

    /// Hand every frame of every ready block to `f` with its receive timestamp (ns since the Unix
    /// epoch, `CLOCK_REALTIME`, as the kernel stamps it), oldest first, then return the blocks to
    /// the kernel. At most `max_blocks` blocks per call. Returns the number of frames.
    pub fn drain(&mut self, max_blocks: usize, mut f: impl FnMut(&[u8], u64)) -> usize {
        let mut frames = 0;
        for _ in 0..max_blocks.min(self.block_nr) {
            let b = self.next_block;
            let status = self.block_status(b);
            if status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let base = b * self.block_size;
            // SAFETY: the block is ours until we store TP_STATUS_KERNEL: the kernel does not write
            // it. Header fields are read within the block; frame offsets and lengths come from the
            // kernel and are bounds-checked against the block before any slice is made.
            let block = unsafe { std::slice::from_raw_parts(self.map.add(base), self.block_size) };
            let rd = |off: usize| -> usize {
                block
                    .get(off..off + 4)
                    .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]) as usize)
                    .unwrap_or(0)
            };
            let num = rd(12);
            let mut off = rd(16);
            for _ in 0..num {
                if off + 28 > block.len() {
                    break;
                }
                // struct tpacket3_hdr: next_offset, sec, nsec, snaplen, len, status (u32), mac (u16).
                let next = rd(off);
                let ts = rd(off + 4) as u64 * 1_000_000_000 + rd(off + 8) as u64;
                let snaplen = rd(off + 12);
                let mac = u16::from_ne_bytes([block[off + 24], block[off + 25]]) as usize;
                if let Some(frame) = block.get(off + mac..off + mac + snaplen) {
                    f(frame, ts);
                    frames += 1;
                }
                if next == 0 {
                    break;
                }
                off += next;
            }
            status.store(TP_STATUS_KERNEL, Ordering::Release);
            self.next_block = (b + 1) % self.block_nr;
        }
        frames
    }

    /// (frames seen, frames dropped because the ring was full) since the last call.
    pub fn take_stats(&self) -> (u64, u64) {
        let mut st = [0u32; 3];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: `st` is a writable buffer of `len` bytes (tpacket_stats_v3 is three u32s).
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            (0, 0)
        } else {
            (st[0] as u64, st[1] as u64)
        }
    }
}

impl AsFd for RxRing {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `open`; no slice into it outlives `drain`.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.block_size * self.block_nr);
        }
    }
}

/// Most frames per `sendmmsg` call.
pub const MAX_BATCH: usize = 64;

/// A transmit socket bound to one interface, bypassing that interface's qdisc.
pub struct TxSock {
    fd: OwnedFd,
}

impl TxSock {
    /// Open on `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<TxSock> {
        let fd = packet_socket()?;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1 as &libc::c_int)?;
        setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &(4 << 20) as &libc::c_int)?;
        bind(&fd, ifindex)?;
        Ok(TxSock { fd })
    }

    /// Send `frames` with one `sendmmsg` per [`MAX_BATCH`]. Returns how many went before the
    /// first failure and that failure (the caller counts that frame lost and goes on after it).
    pub fn send_many(&self, frames: &[&[u8]]) -> (usize, Option<io::Error>) {
        let mut done = 0;
        while done < frames.len() {
            let chunk = &frames[done..frames.len().min(done + MAX_BATCH)];
            // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value (null
            // pointers, zero lengths) that is filled in below.
            let mut iov: [libc::iovec; MAX_BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
            for (k, f) in chunk.iter().enumerate() {
                iov[k] = libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() };
                msgs[k].msg_hdr.msg_iov = &mut iov[k];
                msgs[k].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: `msgs[..chunk.len()]` each point to one iovec in `iov`, which points into a
            // frame of `frames`; all of them outlive the call, and the kernel only reads the
            // frames (it writes `msg_len`, inside `msgs`). The socket is bound, so no address.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr(),
                    chunk.len() as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r < 0 {
                return (done, Some(io::Error::last_os_error()));
            }
            if r == 0 {
                return (done, Some(io::Error::from(io::ErrorKind::WouldBlock)));
            }
            // A partial batch goes on at the frame that did not go: if it fails again, the
            // next call returns its error.
            done += r as usize;
        }
        (done, None)
    }

    /// Send one frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is a valid readable buffer of `frame.len()` bytes.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}
