//! The only unsafe code in Sluice: AF_PACKET sockets with a TPACKET_V2 receive ring.
//!
//! Receive: the kernel writes each frame into the next fixed-size slot of a shared memory ring
//! and hands it over at once by setting `TP_STATUS_USER` in the slot's header (TPACKET_V3's
//! blocks are handed over only when full or when a timer of at least 1 ms expires, which added
//! that much latency to a quiet path); we copy the frame out and give the slot back
//! (`TP_STATUS_KERNEL`). A frame larger than a slot (a GSO/GRO super-packet) is queued on the
//! socket whole as well (`PACKET_COPY_THRESH`; the slot says `TP_STATUS_COPY`) and read from
//! there with `recv`. Transmit: `sendmmsg` on a bound packet socket with `PACKET_QDISC_BYPASS`
//! (the frame goes straight to the driver, as a forwarder's should).
//!
//! Both sockets use `PACKET_VNET_HDR`: every frame travels with its `virtio_net_hdr`
//! ([`crate::offload`]), so super-packets and partial checksums come in described and go out
//! with the same description, and the kernel segments and checksums them on the way out.
//! `PACKET_IGNORE_OUTGOING` keeps our own transmissions out of the receive ring.
#![allow(unsafe_code)]

use crate::offload::{VnetHdr, VNET_HDR_LEN};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_COPY: u32 = 1 << 1;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const PACKET_COPY_THRESH: libc::c_int = 7;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// `struct tpacket_req`.
#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
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

/// `PACKET_FANOUT` mode: a classic BPF program picks the socket.
const PACKET_FANOUT_CBPF: u32 = 6;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
/// Classic BPF's ancillary and network-header offsets (linux/filter.h).
const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
const SKF_AD_PROTOCOL: u32 = 0;
const SKF_NET_OFF: u32 = (-0x100000i32) as u32;

/// Which address of a frame keeps it on one worker: the subscriber's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutKey {
    /// The source address (frames coming from the subscribers).
    Source,
    /// The destination address (frames going to them).
    Destination,
}

/// The classic BPF program of a fanout group keyed on one address: IPv4 the whole address,
/// IPv6 its bits 32..63 (inside the /64 a subscriber is delegated), mixed by a multiplication so
/// that consecutive addresses spread; the kernel takes the result modulo the group's size. Other
/// frames (ARP...) go to the first socket.
pub fn fanout_program(key: FanoutKey) -> Vec<libc::sock_filter> {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter { code: code as u16, jt, jf, k };
    let (v4, v6) = match key {
        FanoutKey::Source => (12, 8 + 4),
        FanoutKey::Destination => (16, 24 + 4),
    };
    let ld_w_abs = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    vec![
        op(ld_w_abs, 0, 0, SKF_AD_OFF + SKF_AD_PROTOCOL),
        op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 2, 0, libc::ETH_P_IP as u32),
        op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 3, 0, libc::ETH_P_IPV6 as u32),
        op(libc::BPF_RET | libc::BPF_K, 0, 0, 0),
        op(ld_w_abs, 0, 0, SKF_NET_OFF + v4),
        op(libc::BPF_JMP | libc::BPF_JA, 0, 0, 1),
        op(ld_w_abs, 0, 0, SKF_NET_OFF + v6),
        op(libc::BPF_ALU | libc::BPF_MUL | libc::BPF_K, 0, 0, 0x9E37_79B1),
        op(libc::BPF_MISC | libc::BPF_TAX, 0, 0, 0),
        op(libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K, 0, 0, 16),
        op(libc::BPF_ALU | libc::BPF_XOR | libc::BPF_X, 0, 0, 0),
        op(libc::BPF_RET | libc::BPF_A, 0, 0, 0),
    ]
}

/// Counters of one receive ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames the kernel dropped because the ring (or the socket's buffer) was full, or because
    /// it could not describe a super-packet in a `virtio_net_hdr`.
    pub drops: u64,
    /// Frames that arrived cut short (larger than a slot and not queued whole): dropped here,
    /// never forwarded.
    pub truncated: u64,
}

/// A TPACKET_V2 receive ring on one interface, frames with their `virtio_net_hdr`.
pub struct RxRing {
    fd: OwnedFd,
    map: *mut u8,
    frame_nr: usize,
    next: usize,
    /// Where a super-packet queued whole is read to (header + frame).
    big: Vec<u8>,
    /// Where a frame whose VLAN tag the kernel took out is rebuilt with it.
    tagged: Vec<u8>,
    truncated: u64,
}

// SAFETY: the mapping is owned by this value alone and only touched through `&mut self`.
unsafe impl Send for RxRing {}

/// Ring geometry: 8192 slots of 2 KiB (16 MiB) in blocks of 64 KiB. A slot holds a 1500-byte MTU
/// frame with VLAN tags, its `virtio_net_hdr` and the ring's headers.
const FRAME_SIZE: usize = 2048;
const RX_BLOCK_SIZE: usize = 1 << 16;
const FRAME_NR: usize = 8192;
/// Largest frame read whole from the socket (GSO/GRO super-packets are at most 64 KiB unless
/// the interface's `gso_max_size`/`gro_max_size` was raised; BIG TCP goes to 512 KiB).
pub const MAX_FRAME: usize = 512 << 10;
/// Socket buffer for super-packets queued whole (root may exceed `rmem_max`).
const RCVBUF: libc::c_int = 64 << 20;
/// Socket buffer for frames on their way out.
const SNDBUF: libc::c_int = 16 << 20;

impl RxRing {
    /// Open a promiscuous receive ring on `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<RxRing> {
        let fd = packet_socket()?;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2)?;
        setsockopt(&fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)?;
        setsockopt(&fd, libc::SOL_PACKET, PACKET_VNET_HDR, &1 as &libc::c_int)?;
        setsockopt(&fd, libc::SOL_PACKET, PACKET_COPY_THRESH, &1 as &libc::c_int)?;
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &RCVBUF).is_err() {
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &RCVBUF)?;
        }
        let req = TpacketReq {
            block_size: RX_BLOCK_SIZE as u32,
            block_nr: (FRAME_NR * FRAME_SIZE / RX_BLOCK_SIZE) as u32,
            frame_size: FRAME_SIZE as u32,
            frame_nr: FRAME_NR as u32,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let len = FRAME_NR * FRAME_SIZE;
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
        let ring = RxRing {
            fd,
            map: map as *mut u8,
            frame_nr: FRAME_NR,
            next: 0,
            big: vec![0; VNET_HDR_LEN + MAX_FRAME],
            tagged: Vec::with_capacity(VNET_HDR_LEN + MAX_FRAME + 4),
            truncated: 0,
        };
        bind(&ring.fd, ifindex)?;
        set_promisc(&ring.fd, ifindex)?;
        Ok(ring)
    }

    fn status(&self, k: usize) -> &AtomicU32 {
        // SAFETY: slot `k < frame_nr` lies inside the mapping (blocks hold whole slots, and the
        // slot size divides the block size); `tp_status` is its first, 4-byte aligned u32. The
        // kernel writes it concurrently, hence the atomic view.
        unsafe { &*(self.map.add(k * FRAME_SIZE) as *const AtomicU32) }
    }

    /// Hand every ready frame to `f` with its receive timestamp (ns since the Unix epoch,
    /// `CLOCK_REALTIME`, as the kernel stamps it) and its `virtio_net_hdr`, oldest first, giving
    /// each slot back after it. At most `max` frames per call. Returns the number of frames.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(&[u8], u64, VnetHdr)) -> usize {
        let mut frames = 0;
        for _ in 0..max {
            let k = self.next;
            let status = self.status(k).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the slot is ours until we store TP_STATUS_KERNEL: the kernel does not write
            // it. Offsets and lengths come from the kernel and are bounds-checked against the
            // slot before any slice is made.
            let slot = unsafe { std::slice::from_raw_parts(self.map.add(k * FRAME_SIZE), FRAME_SIZE) };
            let rd =
                |off: usize| u32::from_ne_bytes([slot[off], slot[off + 1], slot[off + 2], slot[off + 3]]);
            // struct tpacket2_hdr: status, len, snaplen (u32), mac, net (u16), sec, nsec (u32).
            let (len, snaplen) = (rd(4) as usize, rd(8) as usize);
            let mac = u16::from_ne_bytes([slot[12], slot[13]]) as usize;
            let ts = rd(16) as u64 * 1_000_000_000 + rd(20) as u64;
            // A VLAN tag the kernel (or the NIC) took out of the frame: it goes back in.
            let vlan = (status & TP_STATUS_VLAN_VALID != 0).then(|| {
                let tci = u16::from_ne_bytes([slot[24], slot[25]]);
                let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                    u16::from_ne_bytes([slot[26], slot[27]])
                } else {
                    0x8100
                };
                (tpid, tci)
            });
            let got = if status & TP_STATUS_COPY != 0 {
                // The whole frame is queued on the socket, in order: read it from there.
                self.recv_big().map(|n| {
                    let (h, frame) = self.big[..n].split_at(VNET_HDR_LEN);
                    (frame, VnetHdr::from_bytes(h.try_into().unwrap_or(&[0; VNET_HDR_LEN])))
                })
            } else if snaplen < len || mac < VNET_HDR_LEN || mac + snaplen > FRAME_SIZE {
                None
            } else {
                let mut h = [0u8; VNET_HDR_LEN];
                h.copy_from_slice(&slot[mac - VNET_HDR_LEN..mac]);
                Some((&slot[mac..mac + snaplen], VnetHdr::from_bytes(&h)))
            };
            match (got, vlan) {
                (Some((frame, v)), None) => {
                    f(frame, ts, v);
                    frames += 1;
                }
                (Some((frame, mut v)), Some((tpid, tci))) => {
                    if insert_vlan(frame, &mut v, tpid, tci, &mut self.tagged) {
                        f(&self.tagged, ts, v);
                        frames += 1;
                    } else {
                        self.truncated += 1;
                    }
                }
                (None, _) => self.truncated += 1,
            }
            self.status(k).store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (k + 1) % self.frame_nr;
        }
        frames
    }

    /// Reads one frame queued whole on the socket into `big`; its length with the header, or
    /// None (nothing queued, or larger than [`MAX_FRAME`]: cut short, not used).
    fn recv_big(&mut self) -> Option<usize> {
        // SAFETY: `big` is a writable buffer of `big.len()` bytes for the duration of the call.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.big.as_mut_ptr() as *mut libc::c_void,
                self.big.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if r < VNET_HDR_LEN as isize || r as usize > self.big.len() {
            return None;
        }
        Some(r as usize)
    }

    /// Joins fanout group `group` of this ring's interface, the socket picked by `program` (see
    /// [`fanout_program`]): each frame goes to one member of the group only. Members are
    /// numbered in the order they join.
    pub fn join_fanout(&self, group: u16, program: &[libc::sock_filter]) -> io::Result<()> {
        // `PACKET_IGNORE_OUTGOING` on the socket does not reach the group's hook: the group has
        // its own flag (Linux 6.3); older kernels refuse it and join without.
        let arg: u32 = group as u32 | (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_IGNORE_OUTGOING) << 16;
        if let Err(e) = setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg) {
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e);
            }
            let arg: u32 = group as u32 | PACKET_FANOUT_CBPF << 16;
            setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)?;
        }
        let prog = libc::sock_fprog {
            len: program.len() as u16,
            filter: program.as_ptr() as *mut libc::sock_filter,
        };
        // The kernel copies the program during the call.
        setsockopt(&self.fd, libc::SOL_PACKET, PACKET_FANOUT_DATA, &prog)
    }

    /// Ring counters since the last call.
    pub fn take_stats(&mut self) -> RxStats {
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: `st` is a writable buffer of `len` bytes (tpacket_stats is two u32s).
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        let drops = if r < 0 { 0 } else { st[1] as u64 };
        RxStats { drops, truncated: std::mem::take(&mut self.truncated) }
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
            libc::munmap(self.map as *mut libc::c_void, FRAME_NR * FRAME_SIZE);
        }
    }
}

/// Rebuilds in `out` `frame` with a VLAN tag after its MAC addresses, moving `v`'s offsets to
/// match. False (nothing built) for a frame shorter than an Ethernet header.
fn insert_vlan(frame: &[u8], v: &mut VnetHdr, tpid: u16, tci: u16, out: &mut Vec<u8>) -> bool {
    if frame.len() < 14 {
        return false;
    }
    out.clear();
    out.extend_from_slice(&frame[..12]);
    out.extend_from_slice(&tpid.to_be_bytes());
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    if v.needs_csum() {
        v.csum_start += 4;
    }
    if v.hdr_len > 0 {
        v.hdr_len += 4;
    }
    true
}

/// Most frames per `sendmmsg` call.
pub const MAX_BATCH: usize = 64;

/// A frame to send and the `virtio_net_hdr` that describes it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Out<'a> {
    /// Segmentation and checksum offload, as received ([`VnetHdr::for_send`]).
    pub vnet: VnetHdr,
    /// The frame, from its Ethernet header.
    pub frame: &'a [u8],
}

/// A transmit socket bound to one interface, bypassing that interface's qdisc.
pub struct TxSock {
    fd: OwnedFd,
}

impl TxSock {
    /// Open on `ifindex`.
    pub fn open(ifindex: u32) -> io::Result<TxSock> {
        let fd = packet_socket()?;
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1 as &libc::c_int)?;
        setsockopt(&fd, libc::SOL_PACKET, PACKET_VNET_HDR, &1 as &libc::c_int)?;
        // A batch of 64 super-packets is 4 MiB: room for several (root may exceed `wmem_max`).
        if setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &SNDBUF).is_err() {
            setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &SNDBUF)?;
        }
        bind(&fd, ifindex)?;
        Ok(TxSock { fd })
    }

    /// Send `frames` with one `sendmmsg` per [`MAX_BATCH`]. Returns how many went before the
    /// first failure and that failure (the caller counts that frame lost and goes on after it).
    pub fn send_many(&self, frames: &[Out<'_>]) -> (usize, Option<io::Error>) {
        let mut done = 0;
        while done < frames.len() {
            let chunk = &frames[done..frames.len().min(done + MAX_BATCH)];
            let mut hdrs = [[0u8; VNET_HDR_LEN]; MAX_BATCH];
            // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value (null
            // pointers, zero lengths) that is filled in below.
            let mut iov: [[libc::iovec; 2]; MAX_BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
            for (k, o) in chunk.iter().enumerate() {
                hdrs[k] = o.vnet.for_send().to_bytes();
                iov[k] = [
                    libc::iovec {
                        iov_base: hdrs[k].as_mut_ptr() as *mut libc::c_void,
                        iov_len: VNET_HDR_LEN,
                    },
                    libc::iovec { iov_base: o.frame.as_ptr() as *mut libc::c_void, iov_len: o.frame.len() },
                ];
                msgs[k].msg_hdr.msg_iov = iov[k].as_mut_ptr();
                msgs[k].msg_hdr.msg_iovlen = 2;
            }
            // SAFETY: `msgs[..chunk.len()]` each point to two iovecs in `iov`, which point into
            // `hdrs` and a frame of `frames`; all of them outlive the call, and the kernel only
            // reads them (it writes `msg_len`, inside `msgs`). The socket is bound: no address.
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
    pub fn send(&self, out: Out<'_>) -> io::Result<()> {
        match self.send_many(&[out]) {
            (_, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vlan_tag_taken_out_by_the_kernel_goes_back_in_with_the_offsets() {
        let frame: Vec<u8> = (0..60).collect();
        let mut v = VnetHdr {
            flags: VnetHdr::NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 6,
            hdr_len: 42,
            ..Default::default()
        };
        let mut out = Vec::new();
        assert!(insert_vlan(&frame, &mut v, 0x8100, 0x2064, &mut out));
        assert_eq!(out.len(), 64);
        assert_eq!(&out[..12], &frame[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&out[16..], &frame[12..]);
        assert_eq!((v.csum_start, v.hdr_len), (38, 46));
        assert!(!insert_vlan(&frame[..10], &mut v, 0x8100, 1, &mut out));
    }
}
