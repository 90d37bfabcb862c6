//! AF_XDP ports: frames straight from the driver's receive path into user memory (UMEM) and
//! back out, without the kernel's packet-socket path, batched both ways.
//!
//! One port per interface: per receive queue one AF_XDP socket with its own UMEM (16384 chunks
//! of 2 KiB, 32 MiB), its fill, completion, RX and TX rings (8192 entries each), and the
//! redirect program of [`crate::xdp_prog`] sending queue `q`'s frames to socket `q`. The socket
//! and ring set-up is the `xdpilone` crate's (pure Rust, no libbpf); what is here is the chunk
//! bookkeeping, the batching and the choice of mode.
//!
//! - **Receive:** up to [`BATCH`] descriptors are taken from the RX ring at a time, each frame
//!   is handed to the caller (who copies it into the shaper's pool) and its chunk goes straight
//!   back to the fill ring, one commit per batch.
//! - **Transmit:** frames are copied into free TX chunks (the upper half of queue 0's UMEM),
//!   their descriptors committed to the TX ring one batch at a time, and the kernel is kicked
//!   (`sendto`) only when it asks to be (`XDP_USE_NEED_WAKEUP`). Completed chunks are reaped
//!   from the completion ring before each batch. Descriptors the ring does not take stay queued,
//!   in order, and go first next time (`TxChunks`: every chunk is free, queued or in flight). A
//!   frame that arrived elsewhere as a GSO super-packet (an AF_PACKET port on the other side) is
//!   cut into wire segments here, and a partial checksum is completed: AF_XDP has no offload
//!   metadata, so nothing leaves unfilled.
//! - **Zero-copy** (`XDP_ZEROCOPY`, driver mode) is asked for first where the driver may grant
//!   it; a refusal falls back to copy mode (`XDP_COPY`), and a driver without native XDP to the
//!   generic (skb) mode. The mode in use is reported ([`XdpPort::describe`]).
//!
//! Frames larger than a chunk (less headroom: 1792 bytes) are dropped by the kernel on receipt
//! (counted in the ring drops) and refused on transmit (`EMSGSIZE`, counted by the caller): an
//! interface with a larger MTU should use AF_PACKET.
#![allow(unsafe_code)]

use crate::offload::{self, VnetHdr};
use crate::sys::{Out, RxStats};
use crate::xdp_prog::{AttachMode, Redirect};
use std::io;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

/// Descriptors moved per ring operation (and per kick of the kernel).
pub const BATCH: usize = 64;
/// Chunk size: the smallest the kernel accepts; after the 256 bytes of headroom the kernel
/// keeps in front of a received frame, 1792 bytes hold an MTU frame with VLAN tags.
const CHUNK: u32 = 2048;
/// Chunks per socket: half for receiving, half for transmitting. The receive ring takes a TCP
/// sender's burst (veth hands frames over in softirq, faster than one thread forwards them):
/// 2048 entries lost 15% of a single flow's segments here, as AF_PACKET's 8192 slots do not.
const CHUNKS: u32 = 16384;
/// Entries of every ring (fill, completion, RX, TX): as many as the chunks of one half, so a
/// ring can never be asked to hold more than it has room for.
const RING: u32 = CHUNKS / 2;
/// Most receive queues served (one socket and 32 MiB each).
const MAX_QUEUES: u32 = 16;

/// How the UMEM's chunks are split and addressed (pure arithmetic, tested below).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    chunk: u32,
    chunks: u32,
}

impl Layout {
    /// Chunks `0..rx_chunks()` are lent to the kernel for receiving.
    fn rx_chunks(self) -> u32 {
        self.chunks / 2
    }
    /// UMEM offset of chunk `i`.
    fn addr(self, i: u32) -> u64 {
        u64::from(i) * u64::from(self.chunk)
    }
    /// The chunk an address inside it belongs to, as its base address (a received frame's
    /// address includes the headroom the kernel left in front of it).
    fn base(self, addr: u64) -> u64 {
        addr - addr % u64::from(self.chunk)
    }
    /// Bytes of the whole area.
    fn bytes(self) -> usize {
        self.chunk as usize * self.chunks as usize
    }
    /// Whether `[addr, addr + len)` lies inside one chunk of the area.
    fn holds(self, addr: u64, len: u32) -> bool {
        let end = addr + u64::from(len);
        end <= self.bytes() as u64 && self.base(addr) == self.base(end.saturating_sub(1).max(addr))
    }
}

const LAYOUT: Layout = Layout { chunk: CHUNK, chunks: CHUNKS };

/// Copy or zero-copy, as asked for at bind time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// `XDP_ZEROCOPY`: the driver DMAs into the UMEM.
    Zero,
    /// `XDP_COPY`: the kernel copies between its buffers and the UMEM.
    Copy,
}

/// An anonymous, page-aligned mapping for a UMEM.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> io::Result<Area> {
        // SAFETY: a fresh private anonymous mapping; checked below, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p as *mut u8).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Area { ptr, len })
    }

    fn slice(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    /// The bytes `[addr, addr + len)`; the caller checked them with [`Layout::holds`].
    fn bytes(&self, addr: u64, len: u32) -> &[u8] {
        // SAFETY: in bounds (checked by the caller against the layout, whose size is the
        // mapping's). The chunk belongs to user space while we read it: the kernel handed it
        // over on the RX ring and gets it back only through the fill ring, after this borrow.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(addr as usize), len as usize) }
    }

    /// A free TX chunk to write a frame into.
    #[allow(clippy::mut_from_ref)]
    fn chunk_mut(&self, addr: u64) -> &mut [u8] {
        // SAFETY: `addr` is the base of a TX chunk taken from the free list: neither the kernel
        // (it has not been put on the TX ring, or it came back on the completion ring) nor any
        // other borrow uses it until it is submitted.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(addr as usize), CHUNK as usize) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped; the sockets using it are dropped first
        // (field order of `Queue`).
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

/// One receive queue's socket. Field order is drop order: rings and sockets before the UMEM,
/// the UMEM before its memory.
struct Queue {
    rx: RingRx,
    tx: RingTx,
    fq: DeviceQueue,
    user: User,
    _sock: Socket,
    _umem: Umem,
    area: Area,
    /// Where each TX chunk is: free, written but not yet on the ring, or in flight.
    txc: TxChunks,
    /// Statistics at the last [`XdpPort::take_stats`].
    seen_drops: u64,
}

fn errno(what: &str, e: xdpilone::Errno) -> io::Error {
    let e = io::Error::from_raw_os_error(e.get_raw().abs());
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Queue {
    fn open(ifindex: u32, queue: u32, copy: CopyMode) -> io::Result<Queue> {
        let area = Area::new(LAYOUT.bytes())?;
        let cfg =
            UmemConfig { fill_size: RING, complete_size: RING, frame_size: CHUNK, headroom: 0, flags: 0 };
        // SAFETY: the area is page-aligned (mmap) and outlives the UMEM (field order).
        let umem = unsafe { Umem::new(cfg, area.slice()) }.map_err(|e| errno("UMEM", e))?;
        let mut info = IfInfo::invalid();
        info.from_ifindex(ifindex).map_err(|e| errno("interface", e))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, &umem).map_err(|e| errno("AF_XDP socket", e))?;
        let fq = umem.fq_cq(&sock).map_err(|e| errno("fill/completion rings", e))?;
        let mode = match copy {
            CopyMode::Zero => SocketConfig::XDP_BIND_ZEROCOPY,
            CopyMode::Copy => SocketConfig::XDP_BIND_COPY,
        };
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RING),
                    tx_size: NonZeroU32::new(RING),
                    bind_flags: mode | SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(|e| errno("RX/TX rings", e))?;
        let rx = user.map_rx().map_err(|e| errno("RX ring", e))?;
        let tx = user.map_tx().map_err(|e| errno("TX ring", e))?;
        umem.bind(&user).map_err(|e| errno(&format!("bind (queue {queue})"), e))?;
        let mut q = Queue {
            rx,
            tx,
            fq,
            user,
            _sock: sock,
            _umem: umem,
            area,
            txc: TxChunks::new((LAYOUT.rx_chunks()..LAYOUT.chunks).map(|i| LAYOUT.addr(i))),
            seen_drops: 0,
        };
        // Lend every receive chunk to the kernel.
        let mut w = q.fq.fill(LAYOUT.rx_chunks());
        w.insert((0..LAYOUT.rx_chunks()).map(|i| LAYOUT.addr(i)));
        w.commit();
        drop(w);
        Ok(q)
    }

    fn fd(&self) -> i32 {
        self.user.as_raw_fd()
    }

    /// The kernel's side of the transmit path: the TX and completion rings.
    fn rings(&mut self) -> (&mut TxChunks, KernelRings<'_>) {
        (&mut self.txc, KernelRings { tx: &mut self.tx, fq: &mut self.fq })
    }

    /// Takes completed TX chunks back.
    fn reap(&mut self) {
        let (txc, mut k) = self.rings();
        txc.reap(&mut k);
    }

    /// Queues `descs` behind the descriptors the ring has not taken yet, puts as many as it has
    /// room for on it, oldest first, and kicks the kernel while it asks for it. What the ring
    /// does not take stays queued (its chunks are neither free nor lost) and goes first at the
    /// next call. Copy mode sends a bounded number per kick, so it is kicked until the ring is
    /// empty (bounded tries).
    fn submit(&mut self, descs: &[XdpDesc]) {
        self.txc.queue(descs);
        let (txc, mut k) = self.rings();
        let offered = txc.unsent.len();
        txc.flush(&mut k);
        for _ in 0..(offered / 16 + 2) {
            if offered == 0 || !self.tx.needs_wakeup() {
                break;
            }
            self.tx.wake();
            if self.tx.pending() == 0 {
                break;
            }
        }
    }
}

/// The TX and completion rings of one socket, as [`TxChunks`] uses them.
struct KernelRings<'a> {
    tx: &'a mut RingTx,
    fq: &'a mut DeviceQueue,
}

impl TxRing for KernelRings<'_> {
    fn offer(&mut self, descs: &[XdpDesc]) -> usize {
        // A reservation is bounded by the ring's cached view of the kernel's consumer head, and
        // `xdpilone` refreshes that view only when it shows no room at all: a stale view takes
        // fewer descriptors than there is room for. Reserve again until the ring is really full.
        let mut done = 0;
        while done < descs.len() {
            let mut w = self.tx.transmit((descs.len() - done) as u32);
            let n = w.insert(descs[done..].iter().copied()) as usize;
            w.commit();
            drop(w);
            if n == 0 {
                break;
            }
            done += n;
        }
        done
    }

    fn complete(&mut self, out: &mut Vec<u64>) {
        let mut c = self.fq.complete(RING);
        while let Some(a) = c.read() {
            out.push(LAYOUT.base(a));
        }
        c.release();
    }
}

/// The kernel's side of the transmit path, as [`TxChunks`] sees it.
trait TxRing {
    /// Puts the longest prefix of `descs` that fits on the TX ring and returns its length.
    fn offer(&mut self, descs: &[XdpDesc]) -> usize;
    /// Appends the base addresses of the chunks the kernel has finished sending to `out`.
    fn complete(&mut self, out: &mut Vec<u64>);
}

/// Where each TX chunk is. A chunk is in exactly one place: free, unsent (a frame written into
/// it whose descriptor the TX ring has not taken yet) or in flight (on the ring, or sent and
/// not yet back on the completion ring). Nothing handed to the port is dropped or leaked when
/// the ring takes fewer descriptors than offered.
struct TxChunks {
    free: Vec<u64>,
    unsent: std::collections::VecDeque<XdpDesc>,
    in_flight: usize,
}

impl TxChunks {
    fn new(chunks: impl Iterator<Item = u64>) -> TxChunks {
        let free: Vec<u64> = chunks.collect();
        TxChunks { unsent: std::collections::VecDeque::with_capacity(free.len()), free, in_flight: 0 }
    }

    /// A free chunk to write a frame into (it must come back through [`TxChunks::queue`] or
    /// [`TxChunks::give_back`]).
    fn take(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// A chunk taken but not used.
    fn give_back(&mut self, addr: u64) {
        self.free.push(addr);
    }

    /// Free chunks.
    fn free(&self) -> usize {
        self.free.len()
    }

    /// Queues written frames for the ring, after those still waiting.
    fn queue(&mut self, descs: &[XdpDesc]) {
        self.unsent.extend(descs.iter().copied());
    }

    /// Offers the waiting descriptors to the ring, oldest first; returns how many it took.
    fn flush(&mut self, ring: &mut impl TxRing) -> usize {
        let mut took = 0;
        while !self.unsent.is_empty() {
            let (head, _) = self.unsent.as_slices();
            let len = head.len();
            let n = ring.offer(head).min(len);
            self.unsent.drain(..n);
            self.in_flight += n;
            took += n;
            if n < len {
                break;
            }
        }
        took
    }

    /// Takes the chunks the kernel has finished with back into the free list.
    fn reap(&mut self, ring: &mut impl TxRing) {
        let before = self.free.len();
        ring.complete(&mut self.free);
        let back = self.free.len() - before;
        debug_assert!(back <= self.in_flight, "{back} chunks completed, {} in flight", self.in_flight);
        self.in_flight = self.in_flight.saturating_sub(back);
    }
}

/// An AF_XDP port on one interface (all its receive queues), and the redirect program attached
/// to it. Dropping it detaches the program and closes the sockets.
pub struct XdpPort {
    /// Dropped first, then the program is detached and the map freed.
    queues: Vec<Queue>,
    redirect: Redirect,
    copy: CopyMode,
    /// Where a super-packet's segment is built.
    seg: Vec<u8>,
    /// Descriptors of the batch being built.
    descs: Vec<XdpDesc>,
    /// With several queues: an epoll instance over all their sockets, so one descriptor
    /// wakes the loop for a frame on any queue.
    epoll: Option<OwnedFd>,
}

impl XdpPort {
    /// Opens a port on `ifindex` with `queues` receive queues, zero-copy if `zero_copy` and the
    /// driver grants it, else copy mode. Errors say which step failed.
    pub fn open(ifindex: u32, queues: u32, zero_copy: bool) -> io::Result<(XdpPort, Option<String>)> {
        let queues = queues.clamp(1, MAX_QUEUES);
        let (redirect, mut note) = match Redirect::attach(ifindex, queues, AttachMode::Driver) {
            Ok(r) => (r, None),
            Err(e) => {
                let r = Redirect::attach(ifindex, queues, AttachMode::Generic)?;
                (r, Some(format!("no native XDP ({e})")))
            }
        };
        let open_all = |copy: CopyMode| -> io::Result<Vec<Queue>> {
            (0..queues).map(|q| Queue::open(ifindex, q, copy)).collect()
        };
        let (qs, copy) = if zero_copy && redirect.mode() == AttachMode::Driver {
            match open_all(CopyMode::Zero) {
                Ok(qs) => (qs, CopyMode::Zero),
                Err(e) => {
                    // Every queue in the same mode: start over in copy mode.
                    note = Some(format!("zero-copy refused ({e})"));
                    (open_all(CopyMode::Copy)?, CopyMode::Copy)
                }
            }
        } else {
            (open_all(CopyMode::Copy)?, CopyMode::Copy)
        };
        for (q, s) in qs.iter().enumerate() {
            redirect.insert(q as u32, s.fd())?;
        }
        let epoll = if qs.len() > 1 { Some(epoll_over(qs.iter().map(|q| q.fd()))?) } else { None };
        let port = XdpPort {
            queues: qs,
            redirect,
            copy,
            seg: Vec::with_capacity(crate::sys::MAX_FRAME),
            descs: Vec::with_capacity(RING as usize),
            epoll,
        };
        Ok((port, note))
    }

    /// "AF_XDP copy mode, native XDP, 1 queue" etc.
    pub fn describe(&self) -> String {
        format!(
            "AF_XDP {}, {} XDP, {} queue{}",
            match self.copy {
                CopyMode::Zero => "zero-copy",
                CopyMode::Copy => "copy mode",
            },
            self.redirect.mode().name(),
            self.queues.len(),
            if self.queues.len() == 1 { "" } else { "s" }
        )
    }

    /// Hands up to `max` received frames to `f` (frame, receive time in ns since the Unix
    /// epoch, no offload header), giving their chunks back to the kernel a batch at a time.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(&[u8], u64, VnetHdr)) -> usize {
        let now = realtime_ns();
        let mut total = 0;
        let mut got = [XdpDesc::default(); BATCH];
        for q in self.queues.iter_mut() {
            while total < max {
                let want = (max - total).min(BATCH);
                let mut r = q.rx.receive(want as u32);
                let mut n = 0;
                while let Some(d) = r.read() {
                    got[n] = d;
                    n += 1;
                }
                r.release();
                drop(r);
                if n == 0 {
                    break;
                }
                for d in &got[..n] {
                    if LAYOUT.holds(d.addr, d.len) {
                        f(q.area.bytes(d.addr, d.len), now, VnetHdr::default());
                    }
                }
                // The fill ring has room: it holds at most the receive chunks, and these were
                // out of it.
                let mut w = q.fq.fill(n as u32);
                w.insert(got[..n].iter().map(|d| LAYOUT.base(d.addr)));
                w.commit();
                drop(w);
                if q.fq.needs_wakeup() {
                    q.fq.wake();
                }
                total += n;
                if n < want {
                    break;
                }
            }
        }
        total
    }

    /// Sends `frames` (copied into TX chunks, a batch per ring commit). Returns how many went
    /// before the first failure and that failure, as [`crate::sys::TxSock::send_many`]. A frame
    /// the TX ring has no room for yet stays in its chunk, queued, and goes first at the next
    /// call: what is counted as sent is sent.
    pub fn send_many(&mut self, frames: &[Out<'_>]) -> (usize, Option<io::Error>) {
        let Some(q) = self.queues.first_mut() else {
            return (0, Some(io::Error::from_raw_os_error(libc::ENODEV)));
        };
        q.reap();
        self.descs.clear();
        for (k, o) in frames.iter().enumerate() {
            let need = if o.vnet.is_gso() {
                offload::check(&o.vnet, o.frame).map(|w| w.segs as usize).unwrap_or(1)
            } else {
                1
            };
            if q.txc.free() < need || self.descs.len() + need > BATCH {
                q.submit(&self.descs);
                self.descs.clear();
                q.reap();
                if q.txc.free() < need {
                    // The kernel has not finished the earlier ones: try once more after a kick.
                    q.tx.wake();
                    q.reap();
                    if q.txc.free() < need {
                        return (k, Some(io::Error::from(io::ErrorKind::WouldBlock)));
                    }
                }
            }
            if let Err(e) = put(q, o, &mut self.seg, &mut self.descs) {
                q.submit(&self.descs);
                self.descs.clear();
                return (k, Some(e));
            }
        }
        q.submit(&self.descs);
        self.descs.clear();
        (frames.len(), None)
    }

    /// Receive-side drops since the last call (the kernel's `rx_dropped` + `rx_ring_full`).
    pub fn take_stats(&mut self) -> RxStats {
        let mut drops = 0;
        for q in self.queues.iter_mut() {
            if let Ok(s) = q.user.statistics_v2() {
                let total = s.rx_dropped + s.rx_ring_full;
                drops += total.saturating_sub(q.seen_drops);
                q.seen_drops = total;
            }
        }
        RxStats { drops, truncated: 0 }
    }

    /// The descriptor to poll for received frames: the socket's, or with several queues the
    /// epoll instance over all of them.
    pub fn poll_fd(&self) -> BorrowedFd<'_> {
        if let Some(e) = &self.epoll {
            return e.as_fd();
        }
        // `open` makes at least one queue, so this is an open descriptor, never -1.
        let fd = self.queues.first().map(|q| q.fd()).unwrap_or(-1);
        // SAFETY: the descriptor belongs to a socket this port owns and outlives the borrow.
        unsafe { BorrowedFd::borrow_raw(fd) }
    }
}

/// An epoll instance that is readable when any of `fds` is.
fn epoll_over(fds: impl Iterator<Item = i32>) -> io::Result<OwnedFd> {
    // SAFETY: plain epoll_create1; the descriptor is checked and owned below.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for fd in fds {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: both descriptors are open; `ev` is a valid event for the call's duration.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ep)
}

/// Copies `o` into free TX chunks of `q` (cut into segments if it is a super-packet, its
/// checksum completed if partial), appending their descriptors.
fn put(q: &mut Queue, o: &Out<'_>, seg: &mut Vec<u8>, descs: &mut Vec<XdpDesc>) -> io::Result<()> {
    let too_big = || io::Error::from_raw_os_error(libc::EMSGSIZE);
    if o.vnet.is_gso() {
        let mut fits = true;
        let r = offload::segment(&o.vnet, o.frame, seg, |s| {
            if s.len() > CHUNK as usize {
                fits = false;
                return;
            }
            if let Some(a) = q.txc.take() {
                q.area.chunk_mut(a)[..s.len()].copy_from_slice(s);
                descs.push(XdpDesc { addr: a, len: s.len() as u32, options: 0 });
            }
        });
        return match (r, fits) {
            (Ok(()), true) => Ok(()),
            (Ok(()), false) => Err(too_big()),
            (Err(r), _) => Err(io::Error::new(io::ErrorKind::InvalidData, r.name())),
        };
    }
    if o.frame.len() > CHUNK as usize {
        return Err(too_big());
    }
    let Some(a) = q.txc.take() else { return Err(io::Error::from(io::ErrorKind::WouldBlock)) };
    let buf = &mut q.area.chunk_mut(a)[..o.frame.len()];
    buf.copy_from_slice(o.frame);
    if o.vnet.needs_csum() && !offload::complete_checksum(buf, o.vnet.csum_start, o.vnet.csum_offset) {
        q.txc.give_back(a);
        return Err(io::Error::new(io::ErrorKind::InvalidData, "checksum range outside the frame"));
    }
    descs.push(XdpDesc { addr: a, len: o.frame.len() as u32, options: 0 });
    Ok(())
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What `auto` needs to know about an interface (`SIOCETHTOOL`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfFacts {
    /// The driver's name (`ethtool -i`), empty if the interface does not say.
    pub driver: String,
    /// Receive queues (`ethtool -l`: rx + combined; 1 if not reported).
    pub rx_queues: u32,
    /// TCP segmentation or generic segmentation offload is on.
    pub gso: bool,
    /// Transmit checksum offload is on.
    pub tx_csum: bool,
    /// The interface's MTU (0 if unknown).
    pub mtu: u32,
}

/// Largest MTU whose frames (Ethernet header and two VLAN tags included) fit a chunk after the
/// kernel's 256 bytes of headroom.
pub const MAX_MTU: u32 = CHUNK - 256 - 14 - 8;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const SIOCGIFMTU: libc::c_ulong = 0x8921;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

fn ethtool(fd: &OwnedFd, name: &str, data: &mut [u32]) -> bool {
    // struct ifreq: 16 bytes of name, then a union whose first member here is the data pointer.
    let mut ifr = [0u8; 40];
    let n = name.len().min(15);
    ifr[..n].copy_from_slice(&name.as_bytes()[..n]);
    ifr[16..24].copy_from_slice(&(data.as_mut_ptr() as u64).to_ne_bytes());
    // SAFETY: `ifr` is a valid struct ifreq whose data pointer points to `data`, a buffer of the
    // size the command writes (the callers size it for their command); both outlive the call.
    unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL, ifr.as_mut_ptr()) == 0 }
}

/// Reads the driver, queue count and segmentation offloads of `name`.
pub fn if_facts(name: &str) -> IfFacts {
    // SAFETY: plain socket(2); the descriptor is checked and owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return IfFacts { rx_queues: 1, ..Default::default() };
    }
    // SAFETY: fresh descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // struct ethtool_drvinfo: cmd, then driver[32], ... (196 bytes).
    let mut drv = [0u32; 49];
    drv[0] = ETHTOOL_GDRVINFO;
    let driver = if ethtool(&fd, name, &mut drv) {
        let bytes: Vec<u8> = drv[1..9].iter().flat_map(|w| w.to_ne_bytes()).collect();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        String::from_utf8_lossy(&bytes[..end]).into_owned()
    } else {
        String::new()
    };
    // struct ethtool_channels: cmd, max_rx, max_tx, max_other, max_combined, rx_count,
    // tx_count, other_count, combined_count.
    let mut ch = [0u32; 9];
    ch[0] = ETHTOOL_GCHANNELS;
    let rx_queues = if ethtool(&fd, name, &mut ch) { (ch[5] + ch[8]).max(1) } else { 1 };
    let on = |cmd: u32| {
        let mut v = [cmd, 0];
        ethtool(&fd, name, &mut v) && v[1] != 0
    };
    let gso = on(ETHTOOL_GTSO) || on(ETHTOOL_GGSO);
    let tx_csum = on(ETHTOOL_GTXCSUM);
    // struct ifreq with ifr_mtu (an int) after the name.
    let mut ifr = [0u8; 40];
    let n = name.len().min(15);
    ifr[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: `ifr` is a valid struct ifreq the call fills in; it outlives the call.
    let mtu = if unsafe { libc::ioctl(fd.as_raw_fd(), SIOCGIFMTU, ifr.as_mut_ptr()) } == 0 {
        u32::from_ne_bytes([ifr[16], ifr[17], ifr[18], ifr[19]])
    } else {
        0
    };
    IfFacts { driver, rx_queues, gso, tx_csum, mtu }
}

impl AsFd for XdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.poll_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_in_halves_and_addresses_map_back_to_their_chunk() {
        let l = Layout { chunk: 4096, chunks: 8 };
        assert_eq!(l.rx_chunks(), 4);
        assert_eq!(l.bytes(), 32768);
        assert_eq!((l.addr(0), l.addr(3), l.addr(4)), (0, 12288, 16384));
        // A received frame starts after the kernel's headroom inside its chunk.
        assert_eq!(l.base(12288 + 256), 12288);
        assert_eq!(l.base(4095), 0);
        assert_eq!(l.base(4096), 4096);
        assert!(l.holds(4096 + 256, 1500));
        assert!(l.holds(4096, 4096));
        assert!(!l.holds(4096 + 256, 4096), "crosses into the next chunk");
        assert!(!l.holds(28672 + 100, 4000), "past the end");
        assert!(!l.holds(32768, 1));
        assert!(l.holds(0, 0));
    }

    #[test]
    fn the_rings_are_as_large_as_the_chunks_that_can_be_in_them() {
        assert_eq!(RING, LAYOUT.rx_chunks());
        assert_eq!(RING, LAYOUT.chunks - LAYOUT.rx_chunks());
        assert!(RING.is_power_of_two());
        assert!(CHUNK.is_power_of_two() && CHUNK - 256 >= 1514 + 8);
    }

    /// A TX ring that takes fewer descriptors than offered (as many as the next of `accept`
    /// says, never more than it has room for) and a kernel that finishes them when told.
    struct ShortRing {
        cap: usize,
        accept: Vec<usize>,
        turn: usize,
        ring: std::collections::VecDeque<XdpDesc>,
        done: Vec<u64>,
        /// Frame numbers (carried in `len`) in the order they were sent.
        sent: Vec<u32>,
    }

    impl TxRing for ShortRing {
        fn offer(&mut self, descs: &[XdpDesc]) -> usize {
            let limit = self.accept[self.turn % self.accept.len()];
            self.turn += 1;
            let n = descs.len().min(limit).min(self.cap - self.ring.len());
            self.ring.extend(&descs[..n]);
            n
        }
        fn complete(&mut self, out: &mut Vec<u64>) {
            out.append(&mut self.done);
        }
    }

    impl ShortRing {
        /// The kernel sends up to `n` descriptors from the ring.
        fn send(&mut self, n: usize) {
            for _ in 0..n.min(self.ring.len()) {
                let d = self.ring.pop_front().unwrap();
                self.sent.push(d.len);
                self.done.push(d.addr);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Write up to n frames into free chunks and submit them.
        Write(usize),
        /// The kernel sends up to n.
        Send(usize),
        Reap,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![(0usize..40).prop_map(Op::Write), (0usize..40).prop_map(Op::Send), Just(Op::Reap)]
    }

    /// Every chunk is in exactly one place, and nothing written is lost or reordered.
    fn check(t: &TxChunks, r: &ShortRing, chunks: &[u64], written: u32) {
        let mut seen: Vec<u64> = t.free.clone();
        seen.extend(t.unsent.iter().map(|d| d.addr));
        seen.extend(r.ring.iter().map(|d| d.addr));
        seen.extend(&r.done);
        seen.sort_unstable();
        assert_eq!(seen, chunks, "a chunk is lost or in two places");
        assert_eq!(t.in_flight, r.ring.len() + r.done.len());
        let mut order: Vec<u32> = r.sent.clone();
        order.extend(r.ring.iter().map(|d| d.len));
        order.extend(t.unsent.iter().map(|d| d.len));
        assert_eq!(order, (0..written).collect::<Vec<_>>(), "a frame was dropped or reordered");
    }

    proptest::proptest! {
        #[test]
        fn a_ring_that_takes_fewer_than_offered_loses_no_chunk_and_no_frame(
            chunks in 1usize..48,
            cap in 1usize..48,
            accept in proptest::collection::vec(0usize..8, 1..6),
            ops in proptest::collection::vec(op(), 0..80),
        ) {
            let all: Vec<u64> = (0..chunks as u32).map(|i| LAYOUT.addr(i)).collect();
            let mut t = TxChunks::new(all.iter().copied());
            let mut r =
                ShortRing { cap, accept, turn: 0, ring: Default::default(), done: vec![], sent: vec![] };
            let mut written = 0u32;
            for op in ops {
                match op {
                    Op::Write(n) => {
                        let mut descs = vec![];
                        for _ in 0..n {
                            let Some(a) = t.take() else { break };
                            descs.push(XdpDesc { addr: a, len: written, options: 0 });
                            written += 1;
                        }
                        t.queue(&descs);
                        t.flush(&mut r);
                    }
                    Op::Send(n) => r.send(n),
                    Op::Reap => t.reap(&mut r),
                }
                check(&t, &r, &all, written);
            }
            // Once the ring takes descriptors again, everything goes and every chunk comes back.
            r.accept = vec![8];
            for _ in 0..2 * chunks + 2 {
                t.flush(&mut r);
                r.send(cap);
                t.reap(&mut r);
            }
            check(&t, &r, &all, written);
            proptest::prop_assert!(t.unsent.is_empty() && r.ring.is_empty());
            proptest::prop_assert_eq!(t.free(), chunks);
            proptest::prop_assert_eq!(r.sent.len(), written as usize);
        }
    }
}
