//! The queueing-discipline contract shared by every qdisc, and its statistics.
//!
//! # Calling order
//!
//! The caller owns the clock. For each call, `now` is the current time and must not go backwards.
//!
//! 1. [`Qdisc::enqueue`] offers a packet. It is either accepted or handed back as [`Dropped`].
//!    Some qdiscs drop *other* packets to make room (head drop, fq_codel's fattest flow); those
//!    come out of [`Qdisc::take_dropped`], which the caller drains after every enqueue and dequeue.
//! 2. [`Qdisc::dequeue`] returns the next packet to transmit, or `None` if nothing may be sent at
//!    `now` (empty, or every backlogged class is throttled).
//! 3. [`Qdisc::next_event`] says when to call `dequeue` again: `Some(t <= now)` means now,
//!    `Some(t > now)` means the qdisc is throttled until `t`, `None` means it is empty.
//!    Calling `dequeue` early is harmless (it returns `None`); calling it late only delays packets.
//!
//! ```
//! use sluice_core::{fifo::Fifo, Packet, Qdisc, Time};
//! let mut q = Fifo::pfifo(10);
//! let now = Time::ZERO;
//! q.enqueue(Packet::new(1500, 1), now).unwrap();
//! assert_eq!(q.next_event(now), Some(now));
//! assert_eq!(q.dequeue(now).unwrap().payload, 1);
//! assert_eq!(q.next_event(now), None);
//! ```

use crate::packet::Packet;
use crate::time::Time;
use std::fmt;

/// Why a packet was dropped. A drop is an outcome, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue was at its packet or byte limit.
    QueueFull,
    /// Dropped from the head to make room for a newer packet (pfifo_head_drop, SFQ headdrop).
    HeadDrop,
    /// fq_codel/SFQ overflow: dropped from the flow with the largest backlog.
    FattestFlow,
    /// fq_codel's memory limit.
    MemoryLimit,
    /// CoDel's control law (RFC 8289).
    Aqm,
    /// Larger than the shaper can ever send (e.g. TBF `max_size`) and not segmentable.
    TooBig,
    /// A police action or filter verdict of `drop`.
    Policed,
    /// No class accepted it (classification failed and there is no fallback).
    Unclassified,
    /// Removed by `reset` or by deleting the class that held it.
    Flushed,
    /// A frame too short to be forwarded (shorter than its link-layer header).
    Malformed,
    /// A TCP ACK made redundant by a newer one (CAKE's ACK filter).
    AckFilter,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DropReason::QueueFull => "queue full",
            DropReason::HeadDrop => "head drop",
            DropReason::FattestFlow => "fattest-flow drop",
            DropReason::MemoryLimit => "memory limit",
            DropReason::Aqm => "AQM drop",
            DropReason::TooBig => "packet too big",
            DropReason::Policed => "policed",
            DropReason::Unclassified => "unclassified",
            DropReason::Flushed => "flushed",
            DropReason::Malformed => "malformed frame",
            DropReason::AckFilter => "ACK filter",
        };
        f.write_str(s)
    }
}

/// A packet that a qdisc did not keep, with the reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The dropped packet (its payload handle lets the owner free the bytes).
    pub pkt: Packet,
    /// Why.
    pub reason: DropReason,
}

/// Counters as `tc -s qdisc show` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QdiscStats {
    /// Bytes dequeued ("Sent N bytes").
    pub bytes: u64,
    /// Packets dequeued (GSO packets count their segments, as the kernel's `gso_segs` does).
    pub packets: u64,
    /// Packets dropped, by this qdisc or its children.
    pub drops: u64,
    /// Times a packet could not be sent because of the rate limit.
    pub overlimits: u64,
    /// Packets put back at the head (a dequeued packet the device refused).
    pub requeues: u64,
    /// Bytes queued now.
    pub backlog_bytes: u64,
    /// Packets queued now.
    pub qlen: u64,
}

impl QdiscStats {
    /// Adds a child's or an earlier generation's counters (requeues excepted: whether those
    /// count is the caller's choice, as prio leaves its bands' requeues out).
    pub fn add_counts(&mut self, other: &QdiscStats) {
        self.bytes += other.bytes;
        self.packets += other.packets;
        self.drops += other.drops;
        self.overlimits += other.overlimits;
        self.backlog_bytes += other.backlog_bytes;
        self.qlen += other.qlen;
    }
    /// Records a dequeued packet.
    pub fn on_dequeue(&mut self, pkt: &Packet) {
        self.bytes += pkt.len as u64;
        self.packets += pkt.gso_segs.max(1) as u64;
        self.backlog_bytes = self.backlog_bytes.saturating_sub(pkt.len as u64);
        self.qlen = self.qlen.saturating_sub(1);
    }
    /// Records an accepted packet.
    pub fn on_enqueue(&mut self, pkt: &Packet) {
        self.backlog_bytes += pkt.len as u64;
        self.qlen += 1;
    }
    /// Records a drop of a packet that was queued.
    pub fn on_drop_queued(&mut self, pkt: &Packet) {
        self.drops += 1;
        self.backlog_bytes = self.backlog_bytes.saturating_sub(pkt.len as u64);
        self.qlen = self.qlen.saturating_sub(1);
    }
}

/// One class of a classful qdisc, as [`Qdisc::for_each_class`] reports it: what the kernel's
/// class walk and class dump give `tc -s class show`.
#[derive(Clone, Copy)]
pub struct ClassView<'a> {
    /// The class's minor. Its classid is `major:minor` with the major of the qdisc that reports
    /// it (the qdisc may not know its own handle); HFSC's root class is minor 0.
    pub minor: u32,
    /// Its counters as the kernel dumps them, or `None` where the kernel dumps none (the one
    /// class of TBF, RED and netem has no `dump_stats`).
    pub stats: Option<QdiscStats>,
    /// The qdisc attached to the class, if it is a leaf that has one as an object (not HTB's
    /// built-in pfifo).
    pub child: Option<&'a dyn Qdisc>,
}

impl fmt::Debug for ClassView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassView")
            .field("minor", &self.minor)
            .field("stats", &self.stats)
            .field("child", &self.child.map(|c| c.kind()))
            .finish()
    }
}

/// A queueing discipline. See the [module docs](self) for the calling order.
pub trait Qdisc: Send {
    /// The tc kind name ("pfifo", "htb", "fq_codel", ...).
    fn kind(&self) -> &'static str;

    /// Offers a packet. `Err` hands the same packet back with the reason it was refused.
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped>;

    /// Takes the next packet to send at `now`, if any may be sent.
    fn dequeue(&mut self, now: Time) -> Option<Packet>;

    /// The packet `dequeue(now)` would return, without removing it.
    fn peek(&mut self, now: Time) -> Option<&Packet>;

    /// When `dequeue` should next be called: `None` if empty, `Some(t)` otherwise
    /// (`t <= now` means a packet can go now).
    fn next_event(&self, now: Time) -> Option<Time>;

    /// Drops everything queued and returns it; counters other than backlog are kept.
    fn reset(&mut self) -> Vec<Packet>;

    /// Counters, including those of children.
    fn stats(&self) -> QdiscStats;

    /// Packets this qdisc dropped on its own initiative since the last call (head drops, AQM,
    /// overflow of another flow). Drain it after every enqueue and dequeue.
    fn take_dropped(&mut self) -> Option<Dropped> {
        None
    }

    /// Packets queued.
    fn qlen(&self) -> u64 {
        self.stats().qlen
    }

    /// Bytes queued.
    fn backlog_bytes(&self) -> u64 {
        self.stats().backlog_bytes
    }

    /// Calls `f` for each class, in no particular order: its counters and the qdisc attached to
    /// it, so that a caller can walk a whole tree (`tc -s class show`, `tc -s qdisc show` of
    /// every child) without knowing the kinds. Classless qdiscs (the default) have none; so have
    /// pfifo_fast (its bands are no classes in the kernel) and CAKE (whose "classes" are its
    /// flows, listed by the kernel only while they hold packets).
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        let _ = f;
    }

    /// The qdisc itself, for a caller that reads a kind's own parts beyond what the trait
    /// offers (an HTB class's mode). Kinds that allow it return `Some`.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// [`Qdisc::as_any`], mutable: for a caller that changes a kind's own parts while it runs
    /// (an HTB class's rate). Classful kinds that allow it return `Some`.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }

    /// Puts a packet that the device refused back at the head, counting a requeue.
    /// The default re-enqueues it at the tail, which is correct for single-queue qdiscs only.
    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.enqueue(pkt, now)
    }
}

/// A configuration that a qdisc rejected: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A parameter is out of range.
    #[error("{qdisc}: invalid {param} {value}: {reason}")]
    Invalid {
        /// The qdisc kind or object ("htb class 1:10").
        qdisc: String,
        /// The parameter name as tc spells it.
        param: &'static str,
        /// The offending value, printed.
        value: String,
        /// What would be valid.
        reason: String,
    },
    /// The hierarchy is inconsistent.
    #[error("{0}")]
    Hierarchy(String),
}

impl ConfigError {
    /// Shorthand for [`ConfigError::Invalid`].
    pub fn invalid(
        qdisc: impl Into<String>,
        param: &'static str,
        value: impl fmt::Display,
        reason: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid { qdisc: qdisc.into(), param, value: value.to_string(), reason: reason.into() }
    }
}
