//! Which frame I/O a port uses: AF_PACKET rings ([`crate::sys`]) or AF_XDP ([`crate::xdp`]),
//! chosen per interface (`--io auto|xdp|packet`), with the reason, and falling back to
//! AF_PACKET when AF_XDP cannot be set up.
//!
//! The forwarding loop sees one receive and one transmit handle per interface ([`Rx`], [`Tx`])
//! with the same calls either way. An AF_XDP socket does both on one descriptor, so its two
//! handles share the port (single-threaded: the loop that owns the port uses both).

use crate::offload::VnetHdr;
use crate::sys::{self, Out, RxRing, RxStats, TxSock};
use crate::xdp::{self, IfFacts, XdpPort};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;
use std::str::FromStr;

/// The `--io` option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// Per driver ([`auto_choice`]).
    #[default]
    Auto,
    /// AF_XDP (zero-copy where granted, else copy mode), AF_PACKET if it cannot be set up.
    Xdp,
    /// AF_PACKET with `PACKET_VNET_HDR`.
    Packet,
}

impl FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "xdp" => Ok(IoMode::Xdp),
            "packet" => Ok(IoMode::Packet),
            _ => Err(format!("--io {s}: expected auto, xdp or packet")),
        }
    }
}

/// Why AF_XDP cannot forward correctly on this interface, if it cannot.
///
/// A veth whose peer leaves checksums to "hardware" (tx checksum offload, on with TSO/GSO)
/// hands its frames to XDP with the checksum unfilled (`CHECKSUM_PARTIAL`), and an AF_XDP
/// descriptor has no flag to say so: they would leave with wrong checksums (measured: every
/// UDP datagram of a run arrived with a checksum error and TCP did not connect). The peer sits
/// in another namespace; the lab and most setups configure both ends alike, so this end's
/// offloads stand for the peer's. Frames from a NIC's wire carry full checksums.
/// Nor can it take frames larger than its chunks ([`xdp::MAX_MTU`]).
pub fn xdp_unsafe(f: &IfFacts) -> Option<&'static str> {
    if f.mtu > xdp::MAX_MTU {
        return Some("the MTU is larger than an AF_XDP chunk holds (1770 bytes)");
    }
    (f.driver == "veth" && (f.tx_csum || f.gso)).then_some(
        "veth with checksum offload on: its frames reach XDP with checksums left unfilled, \
         which AF_XDP cannot see, so they would be forwarded broken",
    )
}

/// What `auto` does with an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// AF_PACKET, for this reason.
    Packet(&'static str),
    /// AF_XDP, kept only if the driver grants zero-copy (else AF_PACKET, saying so).
    XdpZeroCopy,
    /// AF_XDP, copy mode accepted, for this reason.
    Xdp(&'static str),
}

/// The per-driver rule of `--io auto` (the measurements behind it: BENCHMARKS.md, "AF_XDP and
/// AF_PACKET").
pub fn auto_choice(f: &IfFacts) -> Choice {
    match f.driver.as_str() {
        "veth" if f.gso => Choice::Packet(
            "veth with segmentation offload on: XDP would turn off the peer's GSO and AF_XDP cannot \
             see unfilled checksums; AF_PACKET with VNET_HDR keeps 64 KiB super-packets",
        ),
        "veth" if f.tx_csum => Choice::Packet(
            "veth with checksum offload on: frames would reach XDP with their checksums unfilled",
        ),
        "veth" => Choice::Xdp("veth with offloads off: copy-mode AF_XDP forwarded more than AF_PACKET"),
        "" => Choice::Packet("the driver is unknown (no ethtool driver information)"),
        _ => Choice::XdpZeroCopy,
    }
}

/// The receive side of a port.
pub enum Rx {
    /// AF_PACKET TPACKET_V2 ring.
    Packet(RxRing),
    /// AF_XDP RX ring(s).
    Xdp {
        /// The port, shared with its [`Tx`].
        port: Rc<RefCell<XdpPort>>,
        /// A duplicate of queue 0's descriptor, to wait on.
        poll: OwnedFd,
    },
}

/// The transmit side of a port.
pub enum Tx {
    /// AF_PACKET socket, `sendmmsg`.
    Packet(TxSock),
    /// AF_XDP TX ring.
    Xdp(Rc<RefCell<XdpPort>>),
}

impl Rx {
    /// As [`RxRing::drain`].
    pub fn drain(&mut self, max: usize, f: impl FnMut(&[u8], u64, VnetHdr)) -> usize {
        match self {
            Rx::Packet(r) => r.drain(max, f),
            Rx::Xdp { port, .. } => port.borrow_mut().drain(max, f),
        }
    }

    /// As [`RxRing::join_fanout`]; an AF_XDP port cannot join a fanout group.
    pub fn join_fanout(&self, group: u16, program: &[libc::sock_filter]) -> io::Result<()> {
        match self {
            Rx::Packet(r) => r.join_fanout(group, program),
            Rx::Xdp { .. } => Err(io::Error::new(io::ErrorKind::Unsupported, "an AF_XDP port has no fanout")),
        }
    }

    /// As [`RxRing::take_stats`].
    pub fn take_stats(&mut self) -> RxStats {
        match self {
            Rx::Packet(r) => r.take_stats(),
            Rx::Xdp { port, .. } => port.borrow_mut().take_stats(),
        }
    }
}

impl AsFd for Rx {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Rx::Packet(r) => r.as_fd(),
            Rx::Xdp { poll, .. } => poll.as_fd(),
        }
    }
}

impl Tx {
    /// As [`TxSock::send_many`].
    pub fn send_many(&self, frames: &[Out<'_>]) -> (usize, Option<io::Error>) {
        match self {
            Tx::Packet(s) => s.send_many(frames),
            Tx::Xdp(p) => p.borrow_mut().send_many(frames),
        }
    }

    /// Sends one frame.
    pub fn send(&self, out: Out<'_>) -> io::Result<()> {
        match self.send_many(&[out]) {
            (_, Some(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

/// Opens interface `name` for `mode`. Returns its handles and a line saying what was chosen
/// and why (a fallback says what failed).
pub fn open(name: &str, mode: IoMode) -> io::Result<(Rx, Tx, String)> {
    let idx = sys::ifindex(name)?;
    let packet = |why: String| -> io::Result<(Rx, Tx, String)> {
        Ok((
            Rx::Packet(RxRing::open(idx)?),
            Tx::Packet(TxSock::open(idx)?),
            format!("{name}: AF_PACKET ({why})"),
        ))
    };
    let facts = xdp::if_facts(name);
    let driver = if facts.driver.is_empty() { "unknown driver".to_string() } else { facts.driver.clone() };
    let mut reason = None;
    let want_zero = match mode {
        IoMode::Packet => return packet("asked for".into()),
        IoMode::Xdp => match xdp_unsafe(&facts) {
            Some(why) => return packet(format!("AF_XDP refused, {driver}: {why}")),
            None => false,
        },
        IoMode::Auto => match (auto_choice(&facts), xdp_unsafe(&facts)) {
            (Choice::Packet(why), _) | (_, Some(why)) => return packet(format!("auto, {driver}: {why}")),
            (Choice::XdpZeroCopy, None) => true,
            (Choice::Xdp(why), None) => {
                reason = Some(why);
                false
            }
        },
    };
    // `--io xdp` asks for zero-copy too (it falls back to copy mode); `auto` keeps only a
    // zero-copy port.
    match XdpPort::open(idx, facts.rx_queues, true) {
        Ok((port, note)) => {
            let what = port.describe();
            if want_zero && !what.contains("zero-copy") {
                drop(port);
                return packet(format!(
                    "auto, {driver}: {}; copy-mode AF_XDP is not measured to beat AF_PACKET",
                    note.unwrap_or_else(|| "no zero-copy".into())
                ));
            }
            let poll = port.as_fd().try_clone_to_owned()?;
            let port = Rc::new(RefCell::new(port));
            let mut line = format!("{name}: {what} (");
            line += &match reason {
                Some(why) => format!("auto, {driver}: {why}"),
                None => driver,
            };
            if let Some(n) = note {
                line += &format!("; {n}");
            }
            line.push(')');
            Ok((Rx::Xdp { port: port.clone(), poll }, Tx::Xdp(port), line))
        }
        Err(e) => packet(format!("AF_XDP failed on {driver}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(driver: &str, gso: bool) -> IfFacts {
        IfFacts { driver: driver.into(), rx_queues: 1, gso, tx_csum: gso, mtu: 1500 }
    }

    #[test]
    fn af_xdp_is_refused_on_a_veth_whose_checksums_may_arrive_unfilled() {
        assert!(xdp_unsafe(&facts("veth", true)).is_some());
        let csum_only = IfFacts { tx_csum: true, ..facts("veth", false) };
        assert!(xdp_unsafe(&csum_only).is_some());
        assert_eq!(xdp_unsafe(&facts("veth", false)), None);
        assert_eq!(xdp_unsafe(&facts("ice", true)), None);
        assert_eq!(xdp::MAX_MTU, 1770);
        let jumbo = IfFacts { mtu: 9000, ..facts("ice", false) };
        assert!(xdp_unsafe(&jumbo).is_some_and(|w| w.contains("MTU")));
        assert!(xdp_unsafe(&IfFacts { mtu: 1770, ..jumbo }).is_none());
    }

    #[test]
    fn auto_takes_af_xdp_on_veth_only_with_offloads_off_and_zero_copy_elsewhere() {
        assert!(matches!(auto_choice(&facts("veth", true)), Choice::Packet(w) if w.contains("GSO")));
        assert!(matches!(auto_choice(&facts("veth", false)), Choice::Xdp(w) if w.contains("offloads off")));
        let csum_only = IfFacts { tx_csum: true, ..facts("veth", false) };
        assert!(matches!(auto_choice(&csum_only), Choice::Packet(w) if w.contains("checksum")));
        assert!(matches!(auto_choice(&facts("", false)), Choice::Packet(_)));
        assert_eq!(auto_choice(&facts("ice", true)), Choice::XdpZeroCopy);
        assert_eq!(auto_choice(&facts("mlx5_core", false)), Choice::XdpZeroCopy);
    }

    #[test]
    fn io_modes_parse_and_a_bad_one_says_what_is_expected() {
        assert_eq!("auto".parse::<IoMode>(), Ok(IoMode::Auto));
        assert_eq!("xdp".parse::<IoMode>(), Ok(IoMode::Xdp));
        assert_eq!("packet".parse::<IoMode>(), Ok(IoMode::Packet));
        assert_eq!("dpdk".parse::<IoMode>().unwrap_err(), "--io dpdk: expected auto, xdp or packet");
    }
}
