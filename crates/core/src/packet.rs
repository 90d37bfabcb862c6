//! The packet descriptor that flows through every qdisc.
//!
//! It is a small `Copy` struct: the bytes stay with whoever owns them (the simulator keeps none,
//! the live shaper keeps them in its ring) and are referred to by `payload`.

use crate::handle::Handle;
use crate::tcp_info::TcpInfo;
use crate::time::Time;

/// The two ECN bits of the IP TOS / traffic-class byte (RFC 3168).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Not ECN-capable transport.
    NotEct = 0,
    /// ECT(1).
    Ect1 = 1,
    /// ECT(0).
    Ect0 = 2,
    /// Congestion experienced.
    Ce = 3,
}

/// What connection tracking knows of a packet whose addresses NAT rewrote: its hashes computed
/// on the original (pre-NAT) tuple, as CAKE's `nat` option looks them up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NatOrig {
    /// Hash of the original 5-tuple.
    pub flow_hash: u32,
    /// Hash of the original source address.
    pub src_host_hash: u32,
    /// Hash of the original destination address.
    pub dst_host_hash: u32,
}

/// Up to this many classification results travel with a packet (one per classful qdisc level
/// that has its own filters, e.g. HTB `1:` then a `prio 10:` below one of its leaves).
pub const MAX_CLASS_PATH: usize = 4;

/// A packet as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Bytes on the wire at layer 2 (for GSO: all segments, headers repeated), without FCS.
    pub len: u32,
    /// Number of wire segments this descriptor stands for (1 for an ordinary packet).
    pub gso_segs: u16,
    /// Layer-2 bytes of each full segment of a GSO packet (0 for an ordinary packet).
    pub gso_size: u32,
    /// Hash of the flow's 5-tuple (like `skb->hash`), filled in by the parser.
    pub flow_hash: u32,
    /// Hash of the source host (for per-host isolation).
    pub src_host_hash: u32,
    /// Hash of the destination host.
    pub dst_host_hash: u32,
    /// Firewall mark (`skb->mark`), matched by `fw`.
    pub mark: u32,
    /// `skb->priority`: also a classid when it names a class of the qdisc.
    pub priority: u32,
    /// The IP TOS / traffic-class byte: DSCP in the upper six bits, ECN in the lower two.
    pub dsfield: u8,
    /// Time the packet entered the outermost qdisc (set by the engine on enqueue).
    pub enqueue_time: Time,
    /// Opaque handle for the owner of the bytes (a ring slot, or a simulator flow/sequence id).
    pub payload: u64,
    /// Classification results, outermost first. [`Handle::UNSPEC`] marks unused slots.
    pub class_path: [Handle; MAX_CLASS_PATH],
    /// The TCP header fields CAKE's ACK filter reads (None: not TCP, or not parsed).
    pub tcp: Option<TcpInfo>,
    /// Pre-NAT hashes, when the packet went through NAT that conntrack knows of.
    pub nat_orig: Option<NatOrig>,
    /// The sending socket (`skb->sk`), 0 for none (forwarded or orphaned packets): sch_fq's flow.
    pub sock: u64,
    /// Earliest departure time (`skb->tstamp`, EDT) the sender asked for; [`Time::ZERO`]: none.
    pub tstamp: Time,
}

impl Packet {
    /// An ordinary (non-GSO) packet of `len` bytes with the given payload handle.
    pub fn new(len: u32, payload: u64) -> Packet {
        Packet {
            len,
            gso_segs: 1,
            gso_size: 0,
            flow_hash: 0,
            src_host_hash: 0,
            dst_host_hash: 0,
            mark: 0,
            priority: 0,
            dsfield: 0,
            enqueue_time: Time::ZERO,
            payload,
            class_path: [Handle::UNSPEC; MAX_CLASS_PATH],
            tcp: None,
            nat_orig: None,
            sock: 0,
            tstamp: Time::ZERO,
        }
    }

    /// The ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        match self.dsfield & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The DSCP (upper six bits of the TOS byte).
    pub fn dscp(&self) -> u8 {
        self.dsfield >> 2
    }

    /// True if the transport is ECN-capable (ECT(0), ECT(1) or already CE).
    pub fn is_ect(&self) -> bool {
        self.dsfield & 3 != 0
    }

    /// Marks Congestion Experienced if the packet is ECN-capable. Returns false (and changes
    /// nothing) for a Not-ECT packet, which the caller must then drop instead.
    /// The live path rewrites the header (and IPv4 checksum) from `dsfield` on transmit.
    pub fn set_ce(&mut self) -> bool {
        if self.is_ect() {
            self.dsfield |= 3;
            true
        } else {
            false
        }
    }

    /// The class chosen for this packet among the classes of the qdisc with handle major `major`.
    pub fn class_for(&self, major: u16) -> Option<Handle> {
        self.class_path.iter().copied().find(|h| !h.is_unspec() && h.major() == major)
    }

    /// Records a classification result, replacing one with the same major.
    pub fn push_class(&mut self, class: Handle) {
        for slot in self.class_path.iter_mut() {
            if slot.is_unspec() || slot.major() == class.major() {
                *slot = class;
                return;
            }
        }
        // Path full: keep the outermost results; deeper qdiscs fall back to their defaults.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_bits_are_the_low_two() {
        let mut p = Packet::new(100, 0);
        p.dsfield = 0b1011_1000; // EF, not-ECT
        assert_eq!(p.dscp(), 46);
        assert!(!p.set_ce());
        p.dsfield |= 2;
        assert_eq!(p.ecn(), Ecn::Ect0);
        assert!(p.set_ce());
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.dscp(), 46);
    }

    #[test]
    fn class_path_is_keyed_by_major() {
        let mut p = Packet::new(100, 0);
        p.push_class(Handle::new(1, 0x10));
        p.push_class(Handle::new(0x10, 2));
        assert_eq!(p.class_for(1), Some(Handle::new(1, 0x10)));
        assert_eq!(p.class_for(0x10), Some(Handle::new(0x10, 2)));
        assert_eq!(p.class_for(2), None);
    }
}
