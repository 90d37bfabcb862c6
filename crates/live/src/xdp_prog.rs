//! The XDP side of an AF_XDP port: an XSKMAP, the redirect program, and its attachment to an
//! interface, through the `bpf(2)` system call (unsafe code, like [`crate::sys`]).
//!
//! Why hand-assembled: the program is five instructions (six slots), `bpf_redirect_map(&xsks,
//! ctx->rx_queue_index, XDP_PASS)`. The crates that load eBPF need either a compiled object
//! (aya: a `bpf-linker`/nightly build step this machine does not have) or libbpf built from C
//! (libelf/zlib headers); three `bpf(2)` commands are less than either.
//!
//! Why a BPF link (`BPF_LINK_CREATE`, Linux 5.9+) rather than netlink's `IFLA_XDP`: the program
//! stays attached only while the link's file descriptor is open, so it goes away when the port
//! is dropped, on an error path, and when the process dies (even by SIGKILL): an XDP program is
//! never left on an interface. A link also refuses (EBUSY) to replace a program someone else
//! attached.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s `BPF_XDP`.
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `XDP_PASS`: the verdict for a frame on a queue with no socket in the map.
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// How the program is attached (`XDP_FLAGS_*_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`): the fast path, and the only one with zero-copy.
    Driver,
    /// Generic, on the skb (`XDP_FLAGS_SKB_MODE`): any interface, copies always.
    Generic,
}

impl AttachMode {
    fn flags(self) -> u32 {
        match self {
            AttachMode::Driver => 1 << 2,
            AttachMode::Generic => 1 << 1,
        }
    }

    /// As `ip link` shows it.
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Driver => "native",
            AttachMode::Generic => "generic",
        }
    }
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn { code, regs: (src << 4) | (dst & 0xf), off, imm }
    }
}

/// The redirect program for the XSKMAP whose descriptor is `map_fd`:
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)      ; ctx->rx_queue_index
/// r1 = map_fd ll              ; the XSKMAP (two slots: a 64-bit immediate)
/// r3 = XDP_PASS               ; bpf_redirect_map's verdict when the queue has no socket
/// call bpf_redirect_map
/// exit                        ; r0 = XDP_REDIRECT or XDP_PASS
/// ```
pub fn redirect_program(map_fd: RawFd) -> [Insn; 6] {
    [
        // BPF_LDX | BPF_MEM | BPF_W
        Insn::new(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // BPF_LD | BPF_IMM | BPF_DW, src = BPF_PSEUDO_MAP_FD: the verifier swaps in the map.
        Insn::new(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        Insn::new(0, 0, 0, 0, 0),
        // BPF_ALU64 | BPF_MOV | BPF_K
        Insn::new(0xb7, 3, 0, 0, XDP_PASS),
        // BPF_JMP | BPF_CALL
        Insn::new(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // BPF_JMP | BPF_EXIT
        Insn::new(0x95, 0, 0, 0, 0),
    ]
}

/// A zeroed `union bpf_attr` large enough for the commands used here, written field by field
/// at the kernel's offsets (the kernel requires the bytes past a command's fields to be zero).
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(mut self, at: usize, v: u32) -> Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(mut self, at: usize, v: u64) -> Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(mut self, at: usize, s: &str) -> Attr {
        let b = s.as_bytes();
        let n = b.len().min(15);
        self.0[at..at + n].copy_from_slice(&b[..n]);
        self
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live 128-byte buffer laid out as `union bpf_attr` for `cmd`; pointers
    // stored in it point to buffers that outlive the call (see the callers).
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_of(r: libc::c_long) -> OwnedFd {
    // SAFETY: the bpf command returned a fresh descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// An XSKMAP with the redirect program attached to an interface. Dropping it detaches the
/// program (the link's descriptor closes) and frees the map.
pub struct Redirect {
    map: OwnedFd,
    /// Kept for the link's lifetime (the link holds its own reference too).
    _prog: OwnedFd,
    _link: OwnedFd,
    mode: AttachMode,
}

impl Redirect {
    /// Creates an XSKMAP of `queues` entries, loads the program and attaches it to `ifindex` in
    /// `mode`. Sockets are added with [`Redirect::insert`]; until then every frame passes to
    /// the kernel as before.
    pub fn attach(ifindex: u32, queues: u32, mode: AttachMode) -> io::Result<Redirect> {
        let ctx = |what: &str, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        let mut a = Attr::new()
            .u32(0, BPF_MAP_TYPE_XSKMAP)
            .u32(4, 4)
            .u32(8, 4)
            .u32(12, queues.max(1))
            .name(28, "sluice_xsks");
        let map = fd_of(bpf(BPF_MAP_CREATE, &mut a).map_err(|e| ctx("XSKMAP", e))?);
        let prog = redirect_program(map.as_raw_fd());
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 4096];
        let mut a = Attr::new()
            .u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, prog.len() as u32)
            .u64(8, prog.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .name(48, "sluice_xsk");
        let prog_fd = match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => fd_of(fd),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let msg = String::from_utf8_lossy(&log[..end]);
                return Err(io::Error::new(
                    e.kind(),
                    format!("loading the XDP program: {e}; {}", msg.trim()),
                ));
            }
        };
        let mut a = Attr::new()
            .u32(0, prog_fd.as_raw_fd() as u32)
            .u32(4, ifindex)
            .u32(8, BPF_XDP)
            .u32(12, mode.flags());
        let link = fd_of(
            bpf(BPF_LINK_CREATE, &mut a).map_err(|e| ctx(&format!("attaching XDP ({})", mode.name()), e))?,
        );
        Ok(Redirect { map, _prog: prog_fd, _link: link, mode })
    }

    /// Frames arriving on `queue` go to the AF_XDP socket `xsk`.
    pub fn insert(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        let key = queue;
        let value = xsk as u32;
        let mut a = Attr::new()
            .u32(0, self.map.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a)
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), format!("XSKMAP[{queue}]: {e}")))
    }

    /// How the program is attached.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redirect_program_encodes_as_the_kernel_reads_it() {
        let p = redirect_program(7);
        // struct bpf_insn is 8 bytes: code, regs, off (le16), imm (le32).
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        let bytes: Vec<u8> = p
            .iter()
            .flat_map(|i| {
                let mut b = vec![i.code, i.regs];
                b.extend_from_slice(&i.off.to_le_bytes());
                b.extend_from_slice(&i.imm.to_le_bytes());
                b
            })
            .collect();
        assert_eq!(
            bytes,
            [
                0x61, 0x12, 16, 0, 0, 0, 0, 0, // r2 = *(u32 *)(r1 + 16)
                0x18, 0x11, 0, 0, 7, 0, 0, 0, // r1 = map fd 7 (pseudo map fd)
                0, 0, 0, 0, 0, 0, 0, 0, // upper half of the 64-bit immediate
                0xb7, 0x03, 0, 0, 2, 0, 0, 0, // r3 = XDP_PASS
                0x85, 0, 0, 0, 51, 0, 0, 0, // call bpf_redirect_map
                0x95, 0, 0, 0, 0, 0, 0, 0, // exit
            ]
        );
    }

    #[test]
    fn attr_fields_land_at_their_offsets_and_names_are_cut_to_fifteen_bytes() {
        let a = Attr::new()
            .u32(4, 0x0102_0304)
            .u64(8, 0x1122_3344_5566_7788)
            .name(48, "a-very-long-program-name");
        assert_eq!(&a.0[4..8], &0x0102_0304u32.to_ne_bytes());
        assert_eq!(&a.0[8..16], &0x1122_3344_5566_7788u64.to_ne_bytes());
        assert_eq!(&a.0[48..63], b"a-very-long-pro");
        assert_eq!(a.0[63], 0);
        assert!(a.0[..4].iter().chain(&a.0[64..]).all(|&b| b == 0));
    }
}
