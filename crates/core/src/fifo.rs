//! pfifo, bfifo and pfifo_head_drop (tc-pfifo(8)).
//!
//! Kernel defaults: the limit is the device's `txqueuelen` (1000) packets for pfifo and
//! pfifo_head_drop, and `txqueuelen × (mtu + hard header)` = 1000 × 1514 bytes for bfifo.

use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::Time;
use std::collections::VecDeque;

/// The default device transmit queue length (`txqueuelen`).
pub const DEFAULT_TXQUEUELEN: u32 = 1000;
/// Ethernet MTU plus the 14-byte header: the kernel's `psched_mtu()` for a 1500-byte device.
pub const ETH_PSCHED_MTU: u32 = 1514;

/// What the limit counts and what happens at the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FifoKind {
    /// Limit in packets, tail drop.
    Pfifo,
    /// Limit in bytes, tail drop.
    Bfifo,
    /// Limit in packets, drop the oldest packet to admit the new one.
    PfifoHeadDrop,
}

/// A first-in first-out queue with a packet or byte limit.
#[derive(Debug)]
pub struct Fifo {
    kind: FifoKind,
    limit: u64,
    queue: VecDeque<Packet>,
    stats: QdiscStats,
    dropped: Option<Dropped>,
}

impl Fifo {
    /// A pfifo of `limit` packets (no validation; use [`Fifo::new`] for user input).
    pub fn pfifo(limit: u32) -> Fifo {
        Fifo::build(FifoKind::Pfifo, limit as u64)
    }

    /// A bfifo of `limit` bytes (no validation).
    pub fn bfifo(limit: u64) -> Fifo {
        Fifo::build(FifoKind::Bfifo, limit)
    }

    /// A validated FIFO: `limit` is packets or bytes by kind; `None` takes the kernel default.
    pub fn new(kind: FifoKind, limit: Option<u64>) -> Result<Fifo, ConfigError> {
        let limit = limit.unwrap_or(match kind {
            FifoKind::Bfifo => DEFAULT_TXQUEUELEN as u64 * ETH_PSCHED_MTU as u64,
            _ => DEFAULT_TXQUEUELEN as u64,
        });
        if limit == 0 {
            return Err(ConfigError::invalid(
                Fifo::name(kind),
                "limit",
                0,
                "a zero limit drops every packet; give at least 1",
            ));
        }
        Ok(Fifo::build(kind, limit))
    }

    fn build(kind: FifoKind, limit: u64) -> Fifo {
        Fifo { kind, limit, queue: VecDeque::new(), stats: QdiscStats::default(), dropped: None }
    }

    fn name(kind: FifoKind) -> &'static str {
        match kind {
            FifoKind::Pfifo => "pfifo",
            FifoKind::Bfifo => "bfifo",
            FifoKind::PfifoHeadDrop => "pfifo_head_drop",
        }
    }

    /// Which variant this is.
    pub fn fifo_kind(&self) -> FifoKind {
        self.kind
    }

    /// The limit, in packets or bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Changes the limit; packets already queued beyond it stay (as in the kernel).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit.max(1);
    }

    fn fits(&self, pkt: &Packet) -> bool {
        match self.kind {
            FifoKind::Bfifo => self.stats.backlog_bytes + pkt.len as u64 <= self.limit,
            _ => (self.queue.len() as u64) < self.limit,
        }
    }
}

impl Qdisc for Fifo {
    fn kind(&self) -> &'static str {
        Fifo::name(self.kind)
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        if !self.fits(&pkt) {
            if self.kind != FifoKind::PfifoHeadDrop || self.queue.is_empty() {
                self.stats.drops += 1;
                return Err(Dropped { pkt, reason: DropReason::QueueFull });
            }
            let victim = self.queue.pop_front().expect("non-empty");
            self.stats.on_drop_queued(&victim);
            self.dropped = Some(Dropped { pkt: victim, reason: DropReason::HeadDrop });
        }
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        self.stats.on_enqueue(&pkt);
        self.queue.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        let pkt = self.queue.pop_front()?;
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, _now: Time) -> Option<&Packet> {
        self.queue.front()
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (!self.queue.is_empty()).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        self.stats.backlog_bytes = 0;
        self.stats.qlen = 0;
        self.queue.drain(..).collect()
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.take()
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        self.stats.on_enqueue(&pkt);
        self.stats.requeues += 1;
        self.queue.push_front(pkt);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: u32, id: u64) -> Packet {
        Packet::new(len, id)
    }

    #[test]
    fn defaults_match_the_kernel() {
        assert_eq!(Fifo::new(FifoKind::Pfifo, None).unwrap().limit(), 1000);
        assert_eq!(Fifo::new(FifoKind::Bfifo, None).unwrap().limit(), 1_514_000);
        assert_eq!(Fifo::new(FifoKind::PfifoHeadDrop, None).unwrap().limit(), 1000);
        assert!(Fifo::new(FifoKind::Pfifo, Some(0)).is_err());
    }

    #[test]
    fn pfifo_tail_drops_at_packet_limit() {
        let mut q = Fifo::pfifo(2);
        let t = Time::ZERO;
        q.enqueue(pkt(100, 1), t).unwrap();
        q.enqueue(pkt(100, 2), t).unwrap();
        let d = q.enqueue(pkt(100, 3), t).unwrap_err();
        assert_eq!((d.pkt.payload, d.reason), (3, DropReason::QueueFull));
        assert_eq!(q.dequeue(t).unwrap().payload, 1);
        let s = q.stats();
        assert_eq!((s.packets, s.bytes, s.drops, s.qlen, s.backlog_bytes), (1, 100, 1, 1, 100));
    }

    #[test]
    fn bfifo_counts_bytes() {
        let mut q = Fifo::bfifo(250);
        let t = Time::ZERO;
        q.enqueue(pkt(100, 1), t).unwrap();
        q.enqueue(pkt(150, 2), t).unwrap();
        assert!(q.enqueue(pkt(1, 3), t).is_err());
    }

    #[test]
    fn head_drop_keeps_the_newest() {
        let mut q = Fifo::new(FifoKind::PfifoHeadDrop, Some(2)).unwrap();
        let t = Time::ZERO;
        for id in 1..=3 {
            q.enqueue(pkt(100, id), t).unwrap();
        }
        let d = q.take_dropped().unwrap();
        assert_eq!((d.pkt.payload, d.reason), (1, DropReason::HeadDrop));
        assert_eq!(q.dequeue(t).unwrap().payload, 2);
        assert_eq!(q.dequeue(t).unwrap().payload, 3);
        assert_eq!(q.stats().drops, 1);
    }
}
