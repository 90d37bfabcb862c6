//! Leaf queues. The default leaf qdisc, a pfifo, is kept inline: each leaf has the head and tail
//! of a singly-linked list threaded through one packet slab shared by all leaves, and a packet
//! costs no allocation once the slab has grown to the peak backlog. Any other leaf qdisc is a
//! boxed [`Qdisc`].
//!
//! Everything a sent packet touches in its leaf besides the class's own cache line sits in one
//! 32-byte slot: the queue ends and length, the leaf's sent-packet counter and the DRR deficits
//! of the first [`INLINE_ROWS`] rows it can be served in (its own rate and two lenders: every
//! leaf of a three-level tree). Deeper leaves keep their further deficits in a side table with
//! one entry per extra row. At a million classes each of these is a cache miss, so keeping them
//! together saves misses per packet (BENCHMARKS.md, Scale).

use super::class::NONE;
use crate::packet::Packet;
use crate::qdisc::{DropReason, Dropped, Qdisc};
use crate::sched::slab::{QueueEnds, QueueSlab};
use crate::time::Time;

/// DRR deficits kept in the leaf's slot; rows beyond go to [`Leaves::extra`].
pub(super) const INLINE_ROWS: usize = 3;

/// One leaf's queue.
#[derive(Clone, Copy, Debug)]
#[repr(align(32))]
struct LeafSlot {
    ends: QueueEnds,
    qlen: u32,
    /// The inline pfifo's limit in packets, or `BOXED | index` of a boxed qdisc.
    queue: u32,
    /// Packets (segments) sent, modulo 2³² (the caller carries wraps into the class counters).
    sent: u32,
    deficits: [i32; INLINE_ROWS],
}

const _: () = assert!(size_of::<LeafSlot>() == 32);

const BOXED: u32 = 1 << 31;

impl LeafSlot {
    /// Index into `boxed`, or `NONE` for the inline pfifo.
    #[inline]
    fn boxed(&self) -> u32 {
        if self.queue & BOXED != 0 {
            self.queue & !BOXED
        } else {
            NONE
        }
    }
}

/// All leaf queues of one HTB. See the [module docs](self).
#[derive(Default)]
pub(super) struct Leaves {
    /// Indexed by class: a leaf's slot is its class's arena index, so that it can be loaded
    /// alongside the class's cache line (an inner class keeps an idle slot).
    slots: Vec<LeafSlot>,
    slab: QueueSlab<Packet>,
    boxed: Vec<Option<Box<dyn Qdisc>>>,
    free_boxed: Vec<u32>,
    /// Deficits of rows `INLINE_ROWS..stride`, `stride - INLINE_ROWS` per leaf.
    extra: Vec<i32>,
    /// Rows a leaf can be served in (the deepest leaf's depth + 1).
    stride: usize,
}

impl Leaves {
    pub fn new() -> Leaves {
        Leaves { stride: 1, ..Default::default() }
    }

    /// (Re)sets leaf `i` (a class index, at most the number of slots) to an empty inline pfifo
    /// of `limit` packets, served in up to `rows` rows.
    pub fn alloc(&mut self, i: u32, limit: u32, rows: usize) {
        self.ensure_stride(rows);
        let slot = LeafSlot {
            ends: QueueEnds::EMPTY,
            qlen: 0,
            queue: limit.clamp(1, BOXED - 1),
            sent: 0,
            deficits: [0; INLINE_ROWS],
        };
        if i as usize == self.slots.len() {
            self.slots.push(slot);
            self.extra.resize(self.slots.len() * self.extra_stride(), 0);
        } else {
            self.slots[i as usize] = slot;
        }
        let n = self.extra_stride();
        self.extra[i as usize * n..(i as usize + 1) * n].fill(0);
    }

    fn extra_stride(&self) -> usize {
        self.stride.saturating_sub(INLINE_ROWS)
    }

    /// Makes room for `n` more leaves.
    pub fn reserve(&mut self, n: usize) {
        self.slots.reserve_exact(n);
        self.extra.reserve_exact(n * self.extra_stride());
    }

    pub fn shrink_to_fit(&mut self) {
        self.slots.shrink_to_fit();
        self.extra.shrink_to_fit();
    }

    /// Empties leaf `i` and drops its boxed qdisc (its class became inner or was deleted);
    /// returns its packets.
    pub fn release(&mut self, i: u32) -> Vec<Packet> {
        self.replace(i, None, 1)
    }

    /// Makes every leaf hold deficits for `rows` rows.
    fn ensure_stride(&mut self, rows: usize) {
        if rows <= self.stride {
            return;
        }
        let (old, new) = (self.extra_stride(), rows.saturating_sub(INLINE_ROWS));
        if new > old {
            let mut d = Vec::with_capacity(self.slots.capacity() * new);
            d.resize(self.slots.len() * new, 0);
            if old > 0 {
                for (i, chunk) in self.extra.chunks(old).enumerate() {
                    d[i * new..i * new + old].copy_from_slice(chunk);
                }
            }
            self.extra = d;
        }
        self.stride = rows;
    }

    /// The DRR deficit of leaf `i` in row `row` (rows past the deepest leaf's share the last).
    #[inline]
    pub fn deficit(&mut self, i: u32, row: u32) -> &mut i32 {
        let r = (row as usize).min(self.stride - 1);
        if r < INLINE_ROWS {
            &mut self.slots[i as usize].deficits[r]
        } else {
            let n = self.extra_stride();
            &mut self.extra[i as usize * n + r - INLINE_ROWS]
        }
    }

    /// Counts `segs` packets sent by leaf `i`; returns the wraps of its 32-bit counter (0 or 1).
    #[inline]
    pub fn count_sent(&mut self, i: u32, segs: u32) -> u64 {
        let s = &mut self.slots[i as usize];
        let (v, wrapped) = s.sent.overflowing_add(segs);
        s.sent = v;
        wrapped as u64
    }

    /// Packets sent by leaf `i`, modulo 2³².
    pub fn sent(&self, i: u32) -> u32 {
        self.slots[i as usize].sent
    }

    #[inline]
    pub fn qlen(&self, i: u32) -> u32 {
        let s = &self.slots[i as usize];
        match s.boxed() {
            NONE => s.qlen,
            b => self.boxed[b as usize].as_ref().map_or(0, |q| q.qlen() as u32),
        }
    }

    /// Queues a packet; a refusal comes back as the drop.
    #[inline]
    pub fn push(&mut self, i: u32, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let s = self.slots[i as usize];
        if s.boxed() != NONE {
            return self.boxed[s.boxed() as usize].as_mut().expect("boxed leaf qdisc").enqueue(pkt, now);
        }
        if s.qlen >= s.queue {
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        let s = &mut self.slots[i as usize];
        self.slab.push_back(&mut s.ends, pkt);
        s.qlen += 1;
        Ok(())
    }

    /// Takes the next packet of leaf `i`.
    #[inline]
    pub fn pop(&mut self, i: u32, now: Time) -> Option<Packet> {
        let s = &mut self.slots[i as usize];
        if s.boxed() != NONE {
            return self.boxed[s.boxed() as usize].as_mut().expect("boxed leaf qdisc").dequeue(now);
        }
        let (_, pkt) = self.slab.pop_front(&mut s.ends)?;
        s.qlen -= 1;
        Some(pkt)
    }

    /// True if leaf `i` has a boxed qdisc.
    #[inline]
    pub fn is_boxed(&self, i: u32) -> bool {
        self.slots[i as usize].queue & BOXED != 0
    }

    /// A drop the leaf's qdisc made on its own (boxed qdiscs only: a pfifo only refuses).
    #[inline]
    pub fn take_dropped(&mut self, i: u32) -> Option<Dropped> {
        match self.slots[i as usize].boxed() {
            NONE => None,
            b => self.boxed[b as usize].as_mut().and_then(|q| q.take_dropped()),
        }
    }

    /// When a throttled boxed qdisc wants to run again.
    pub fn next_event(&self, i: u32, now: Time) -> Option<Time> {
        match self.slots[i as usize].boxed() {
            NONE => (self.slots[i as usize].qlen > 0).then_some(now),
            b => self.boxed[b as usize].as_ref().and_then(|q| q.next_event(now)),
        }
    }

    /// Empties leaf `i`'s queue.
    pub fn flush(&mut self, i: u32) -> Vec<Packet> {
        match self.slots[i as usize].boxed() {
            NONE => {
                let mut out = Vec::with_capacity(self.slots[i as usize].qlen as usize);
                while let Some(p) = self.pop(i, Time::ZERO) {
                    out.push(p);
                }
                out
            }
            b => self.boxed[b as usize].as_mut().map(|q| q.reset()).unwrap_or_default(),
        }
    }

    /// Replaces leaf `i`'s queue by `q` (a boxed qdisc) or an inline pfifo of `limit` packets;
    /// returns the old queue's packets.
    pub fn replace(&mut self, i: u32, q: Option<Box<dyn Qdisc>>, limit: u32) -> Vec<Packet> {
        let pkts = self.flush(i);
        let old = self.slots[i as usize].boxed();
        if old != NONE {
            self.boxed[old as usize] = None;
            self.free_boxed.push(old);
        }
        self.slots[i as usize].queue = limit.clamp(1, BOXED - 1);
        if let Some(q) = q {
            let b = match self.free_boxed.pop() {
                Some(b) => {
                    self.boxed[b as usize] = Some(q);
                    b
                }
                None => {
                    self.boxed.push(Some(q));
                    (self.boxed.len() - 1) as u32
                }
            };
            self.slots[i as usize].queue = BOXED | b;
        }
        pkts
    }

    /// The boxed qdisc of leaf `i` (`None` for the inline pfifo).
    pub fn qdisc(&self, i: u32) -> Option<&dyn Qdisc> {
        match self.slots[i as usize].boxed() {
            NONE => None,
            b => self.boxed[b as usize].as_deref(),
        }
    }

    /// Packets and bytes queued in leaf `i`.
    pub fn backlog(&self, i: u32) -> (u64, u64) {
        let s = &self.slots[i as usize];
        if s.boxed() != NONE {
            let st = self.boxed[s.boxed() as usize].as_ref().map(|q| q.stats()).unwrap_or_default();
            return (st.qlen, st.backlog_bytes);
        }
        (s.qlen as u64, self.slab.iter(&s.ends).map(|p| p.len as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_fifos_share_the_slab_in_order() {
        let mut l = Leaves::new();
        let (a, b, c) = (0, 1, 2);
        l.alloc(a, 2, 1);
        l.alloc(b, 10, 3);
        for k in 0..3 {
            let r = l.push(a, Packet::new(100, k), Time::ZERO);
            assert_eq!(r.is_ok(), k < 2, "limit 2");
            l.push(b, Packet::new(50, 10 + k), Time::ZERO).unwrap();
        }
        assert_eq!(l.backlog(a), (2, 200));
        assert_eq!(l.pop(a, Time::ZERO).unwrap().payload, 0);
        l.push(a, Packet::new(100, 7), Time::ZERO).unwrap();
        let got: Vec<u64> = std::iter::from_fn(|| l.pop(a, Time::ZERO)).map(|p| p.payload).collect();
        assert_eq!(got, vec![1, 7]);
        assert_eq!(l.flush(b).iter().map(|p| p.payload).collect::<Vec<_>>(), vec![10, 11, 12]);
        *l.deficit(b, 2) = -5;
        assert_eq!(*l.deficit(b, 9), -5, "rows past the stride share the last entry");
        assert_eq!(*l.deficit(a, 0), 0);
        // Deeper leaves keep rows past the inline ones in the side table, which grows in place.
        *l.deficit(a, 1) = 3;
        l.alloc(c, 5, 6);
        *l.deficit(c, 4) = 7;
        *l.deficit(b, 5) = 9;
        assert_eq!((*l.deficit(a, 1), *l.deficit(b, 2), *l.deficit(c, 4), *l.deficit(b, 5)), (3, -5, 7, 9));
        assert_eq!(*l.deficit(c, 3), 0);
        assert_eq!(l.count_sent(a, u32::MAX), 0);
        assert_eq!(l.count_sent(a, 2), 1, "wrap");
        assert_eq!(l.sent(a), 1);
    }
}
