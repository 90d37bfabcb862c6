//! The event queue: a binary heap ordered by (time, insertion sequence).
//!
//! Ties are broken by insertion order, so a run is a pure function of its inputs and seed.

use sluice_core::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an instant. Small and `Copy` so the heap stays cache-friendly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    /// A source wants to emit (or wake up).
    Emit(u32),
    /// A hop finished serialising its current packet.
    TxDone(u32),
    /// A hop's qdisc asked to be woken (throttled until this time).
    Wake(u32),
    /// A packet (slab slot) reaches position `pos` of its route.
    Arrive { slot: u32, pos: u16 },
    /// A TCP connection's timers (retransmission, RACK reordering, delayed ACK) may be due.
    TcpTimer(u32),
    /// Sample queue occupancy.
    Sample,
}

#[derive(Debug)]
struct Entry {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.cmp(&self.time).then(o.seq.cmp(&self.seq))
    }
}

/// Min-heap of events with deterministic tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub(crate) fn push(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { time: t.as_nanos(), seq: self.seq, ev });
    }
    pub(crate) fn pop(&mut self) -> Option<(Time, Ev)> {
        self.heap.pop().map(|e| (Time::from_nanos(e.time), e.ev))
    }
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Time::from_nanos(5), Ev::Emit(1));
        q.push(Time::from_nanos(3), Ev::Emit(2));
        q.push(Time::from_nanos(5), Ev::Emit(3));
        q.push(Time::from_nanos(3), Ev::Emit(4));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, vec![Ev::Emit(2), Ev::Emit(4), Ev::Emit(1), Ev::Emit(3)]);
    }
}
