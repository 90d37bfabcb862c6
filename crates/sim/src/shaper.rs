//! Queues the simulator can put on a link without the rest of the tree: FIFOs and an exact
//! single-rate shaper used as the reference "ideal" line in plots.

use sluice_core::fifo::Fifo;
use sluice_core::{Dropped, Packet, Qdisc, QdiscStats, Rate, Time, TokenBucket, WireSpec};

/// One token bucket in front of a FIFO: the exact shaper every Sluice qdisc is built on.
/// It charges [`WireSpec::packet_cost`] bytes per packet and releases a packet when the
/// bucket is non-negative, like HTB's leaf with rate = ceil.
pub struct ExactShaper {
    tb: TokenBucket,
    wire: WireSpec,
    q: Fifo,
    overlimits: u64,
}

impl ExactShaper {
    /// A shaper at `rate` with `burst` bytes, queue `limit` packets.
    pub fn new(rate: Rate, burst: u64, wire: WireSpec, limit: u32) -> ExactShaper {
        ExactShaper {
            tb: TokenBucket::new(rate, burst, Time::ZERO),
            wire,
            q: Fifo::pfifo(limit),
            overlimits: 0,
        }
    }
}

impl Qdisc for ExactShaper {
    fn kind(&self) -> &'static str {
        "exact"
    }
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.q.enqueue(pkt, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        if self.q.qlen() == 0 {
            return None;
        }
        if !self.tb.can_send(now) {
            self.overlimits += 1;
            return None;
        }
        let p = self.q.dequeue(now)?;
        self.tb.charge(now, self.wire.packet_cost(&p));
        Some(p)
    }
    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.tb.can_send(now) {
            self.q.peek(now)
        } else {
            None
        }
    }
    fn next_event(&self, now: Time) -> Option<Time> {
        if self.q.qlen() == 0 {
            None
        } else {
            Some(self.tb.time_until(now, 0))
        }
    }
    fn reset(&mut self) -> Vec<Packet> {
        self.q.reset()
    }
    fn stats(&self) -> QdiscStats {
        QdiscStats { overlimits: self.overlimits, ..self.q.stats() }
    }
    fn take_dropped(&mut self) -> Option<Dropped> {
        self.q.take_dropped()
    }
}
