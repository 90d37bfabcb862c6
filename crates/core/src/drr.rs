//! DRR: Deficit Round Robin over classes (tc-drr(8), Shreedhar and Varghese).
//!
//! The kernel's semantics (sch_drr):
//! - Classes are flat (no hierarchy); each has a `quantum` in bytes (default `psched_mtu`, never
//!   zero) and a child qdisc (default `pfifo` of `txqueuelen` packets). Deleting a class's child
//!   qdisc puts a fresh default pfifo in its place, so a class never has "no" qdisc.
//! - Classification: `skb->priority` naming a class, else the filters of the DRR qdisc. There is
//!   no default class: a packet no filter sends to an existing class is dropped and counted as a
//!   drop of the qdisc.
//! - A class becomes active (tail of the round) with `deficit = quantum` when its child goes from
//!   empty to non-empty. An empty class leaves the round and keeps no credit.
//! - Dequeue looks at the head class's child: if its head packet fits the deficit it is sent and
//!   the deficit shrinks; otherwise the class gets another quantum and goes to the tail. If the
//!   head class's child has a packet but will not release it now (a shaping child such as TBF),
//!   the whole DRR waits for it, as the kernel's `drr_dequeue` does.
//!
//! Classification happens outside (the [`crate::classify::Classifier`] records the class in the
//! packet's class path); this qdisc reads it with [`Packet::class_for`].

use crate::fifo::Fifo;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::sched::FastMap;
use crate::time::Time;
use std::collections::VecDeque;

/// Counters of one DRR class as `tc -s class show` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrrClassStats {
    /// Bytes and packets sent by the class; drops, overlimits, requeues, backlog and qlen of
    /// its child qdisc (`drr_dump_class_stats` copies the child's queue counters).
    pub stats: QdiscStats,
    /// Deficit in bytes (0 while the class is idle, as the kernel reports it).
    pub deficit: u32,
}

struct DrrClass {
    id: Handle,
    quantum: u32,
    deficit: u32,
    active: bool,
    /// Listed in `touched`: its child ran since the last drain of dropped packets.
    touched: bool,
    child: Box<dyn Qdisc>,
    bytes: u64,
    packets: u64,
    /// Drops of children this class had before (a grafted qdisc replaced them).
    old_drops: u64,
}

/// The DRR qdisc.
pub struct Drr {
    handle: Handle,
    default_limit: u32,
    classes: Vec<DrrClass>,
    by_id: FastMap<Handle, usize>,
    /// Indices into `classes`, in round order. Each class is in it at most once.
    active: VecDeque<usize>,
    /// Classes whose child may hold packets it dropped on its own (each at most once), so that
    /// `take_dropped` looks only there.
    touched: Vec<usize>,
    stats: QdiscStats,
    /// Packets refused for want of a class, plus the drops of deleted classes.
    own_drops: u64,
}

impl std::fmt::Debug for Drr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drr").field("handle", &self.handle).field("classes", &self.classes.len()).finish()
    }
}

impl Drr {
    /// An empty DRR qdisc with handle `handle`; classes get a pfifo of `default_limit` packets
    /// (the device's `txqueuelen`; 0 counts as 1, as `pfifo_init` does) unless given a child.
    pub fn new(handle: Handle, default_limit: u32) -> Drr {
        Drr {
            handle: handle.qdisc(),
            default_limit: default_limit.max(1),
            classes: Vec::new(),
            by_id: FastMap::default(),
            active: VecDeque::new(),
            touched: Vec::new(),
            stats: QdiscStats::default(),
            own_drops: 0,
        }
    }

    fn check_quantum(id: Handle, quantum: u32) -> Result<(), ConfigError> {
        if quantum == 0 {
            return Err(ConfigError::invalid(
                format!("drr class {id}"),
                "quantum",
                0,
                "Specified DRR quantum cannot be zero",
            ));
        }
        Ok(())
    }

    /// Adds class `id` (of this qdisc) with `quantum` bytes and the default pfifo child.
    pub fn add_class(&mut self, id: Handle, quantum: u32) -> Result<(), ConfigError> {
        Drr::check_quantum(id, quantum)?;
        if id.qdisc() != self.handle || id.minor() == 0 {
            return Err(ConfigError::Hierarchy(format!("{id} is not a class of drr {}", self.handle)));
        }
        if self.by_id.contains_key(&id) {
            return Err(ConfigError::Hierarchy(format!("drr class {id} exists")));
        }
        self.by_id.insert(id, self.classes.len());
        self.classes.push(DrrClass {
            id,
            quantum,
            deficit: 0,
            active: false,
            touched: false,
            child: Box::new(Fifo::pfifo(self.default_limit)),
            bytes: 0,
            packets: 0,
            old_drops: 0,
        });
        // Neither list holds a class twice: no allocation on the packet path.
        self.active.reserve(self.classes.len().saturating_sub(self.active.len()));
        self.touched.reserve(self.classes.len().saturating_sub(self.touched.len()));
        Ok(())
    }

    /// `tc class change ... drr quantum N`: the new quantum applies from the next round.
    pub fn set_quantum(&mut self, id: Handle, quantum: u32) -> Result<(), ConfigError> {
        Drr::check_quantum(id, quantum)?;
        let i = self.index(id)?;
        self.classes[i].quantum = quantum;
        Ok(())
    }

    fn index(&self, id: Handle) -> Result<usize, ConfigError> {
        self.by_id.get(&id).copied().ok_or_else(|| ConfigError::Hierarchy(format!("no drr class {id}")))
    }

    /// Grafts `child` on class `id`; `None` puts back the default pfifo (deleting a class's
    /// qdisc). Returns the old child with whatever it held; the class leaves the round if the
    /// new child is empty.
    pub fn set_class_qdisc(
        &mut self,
        id: Handle,
        child: Option<Box<dyn Qdisc>>,
    ) -> Result<Box<dyn Qdisc>, ConfigError> {
        let i = self.index(id)?;
        let child = child.unwrap_or_else(|| Box::new(Fifo::pfifo(self.default_limit)));
        let c = &mut self.classes[i];
        let old = std::mem::replace(&mut c.child, child);
        let o = old.stats();
        c.old_drops += o.drops;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(o.backlog_bytes);
        self.stats.qlen = self.stats.qlen.saturating_sub(o.qlen);
        if c.active && c.child.qlen() == 0 {
            c.active = false;
            self.active.retain(|&x| x != i);
        }
        Ok(old)
    }

    /// Deletes class `id`, returning the packets it held (counted as drops of the qdisc).
    pub fn delete_class(&mut self, id: Handle) -> Result<Vec<Packet>, ConfigError> {
        let i = self.index(id)?;
        self.active.retain(|&x| x != i);
        self.touched.retain(|&x| x != i);
        let mut c = self.classes.swap_remove(i);
        self.by_id.remove(&id);
        if i < self.classes.len() {
            let moved = self.classes[i].id;
            self.by_id.insert(moved, i);
            let last = self.classes.len();
            for x in self.active.iter_mut().chain(self.touched.iter_mut()) {
                if *x == last {
                    *x = i;
                }
            }
        }
        let flushed = c.child.reset();
        for p in &flushed {
            self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(p.len as u64);
            self.stats.qlen = self.stats.qlen.saturating_sub(1);
        }
        self.own_drops += c.child.stats().drops + c.old_drops + flushed.len() as u64;
        Ok(flushed)
    }

    /// The class ids, in creation order (deletions swap the last class into the hole).
    pub fn class_ids(&self) -> impl Iterator<Item = Handle> + '_ {
        self.classes.iter().map(|c| c.id)
    }

    /// The child qdisc of class `id`.
    pub fn class_qdisc(&self, id: Handle) -> Option<&dyn Qdisc> {
        self.by_id.get(&id).map(|&i| self.classes[i].child.as_ref())
    }

    /// Counters of class `id`.
    pub fn class_stats(&self, id: Handle) -> Option<DrrClassStats> {
        let c = &self.classes[*self.by_id.get(&id)?];
        let ch = c.child.stats();
        Some(DrrClassStats {
            stats: QdiscStats {
                bytes: c.bytes,
                packets: c.packets,
                drops: ch.drops + c.old_drops,
                overlimits: ch.overlimits,
                requeues: ch.requeues,
                backlog_bytes: ch.backlog_bytes,
                qlen: ch.qlen,
            },
            deficit: if ch.qlen > 0 { c.deficit } else { 0 },
        })
    }

    fn activate(&mut self, i: usize) {
        let c = &mut self.classes[i];
        if !c.active && c.child.qlen() > 0 {
            c.active = true;
            c.deficit = c.quantum;
            self.active.push_back(i);
        }
    }

    /// Runs the round until the head class may send its head packet, and returns that class.
    /// `None` when nothing is queued or the head class's child holds its packet back.
    fn select(&mut self, now: Time) -> Option<usize> {
        loop {
            let i = *self.active.front()?;
            let c = &mut self.classes[i];
            if c.child.qlen() == 0 {
                // Emptied by its own AQM or a reset: it leaves the round (drr_qlen_notify).
                c.active = false;
                self.active.pop_front();
                continue;
            }
            self.touch(i);
            let c = &mut self.classes[i];
            let len = c.child.peek(now)?.len;
            if len <= c.deficit {
                return Some(i);
            }
            c.deficit = c.deficit.saturating_add(c.quantum);
            self.active.rotate_left(1);
        }
    }

    /// Notes that class `i`'s child ran (it may have dropped packets on its own).
    fn touch(&mut self, i: usize) {
        let c = &mut self.classes[i];
        if !c.touched {
            c.touched = true;
            self.touched.push(i);
        }
    }
}

impl Qdisc for Drr {
    fn kind(&self) -> &'static str {
        "drr"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let Some(&i) = pkt.class_for(self.handle.major()).and_then(|id| self.by_id.get(&id)) else {
            self.own_drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        self.touch(i);
        let len = pkt.len as u64;
        self.classes[i].child.enqueue(pkt, now)?;
        // Packets the child drops to make room come out of take_dropped, which takes them off.
        self.stats.backlog_bytes += len;
        self.stats.qlen += 1;
        self.activate(i);
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let i = self.select(now)?;
        self.touch(i);
        let c = &mut self.classes[i];
        let pkt = c.child.dequeue(now)?;
        let after = c.child.qlen();
        c.deficit -= pkt.len.min(c.deficit);
        c.bytes += pkt.len as u64;
        c.packets += pkt.gso_segs.max(1) as u64;
        if after == 0 {
            c.active = false;
            self.active.pop_front();
        }
        self.stats.bytes += pkt.len as u64;
        self.stats.packets += pkt.gso_segs.max(1) as u64;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(pkt.len as u64);
        self.stats.qlen = self.stats.qlen.saturating_sub(1);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        let i = self.select(now)?;
        self.classes[i].child.peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        self.active.iter().map(|&i| &self.classes[i].child).find(|c| c.qlen() > 0)?.next_event(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out = Vec::new();
        for c in &mut self.classes {
            out.extend(c.child.reset());
            c.active = false;
            c.deficit = 0;
        }
        self.active.clear();
        self.stats.backlog_bytes = 0;
        self.stats.qlen = 0;
        out
    }

    fn qlen(&self) -> u64 {
        self.stats.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.stats.backlog_bytes
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        s.drops = self.own_drops;
        for c in &self.classes {
            let ch = c.child.stats();
            s.drops += ch.drops + c.old_drops;
            s.overlimits += ch.overlimits;
        }
        s
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        while let Some(&i) = self.touched.last() {
            if let Some(d) = self.classes[i].child.take_dropped() {
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                return Some(d);
            }
            self.classes[i].touched = false;
            self.touched.pop();
        }
        None
    }

    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        for c in &self.classes {
            let stats = self.class_stats(c.id).map(|s| s.stats);
            f(ClassView { minor: c.id.minor(), stats, child: Some(c.child.as_ref()) });
        }
    }

    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.stats.requeues += 1;
        let Some(&i) = pkt.class_for(self.handle.major()).and_then(|id| self.by_id.get(&id)) else {
            self.own_drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        self.touch(i);
        let c = &mut self.classes[i];
        c.bytes = c.bytes.saturating_sub(pkt.len as u64);
        c.packets = c.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        self.stats.bytes = self.stats.bytes.saturating_sub(pkt.len as u64);
        self.stats.packets = self.stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        let len = pkt.len;
        c.child.requeue(pkt, now)?;
        self.stats.backlog_bytes += len as u64;
        self.stats.qlen += 1;
        if !c.active {
            // Back at the head of the round with the credit it just spent.
            c.active = true;
            c.deficit = len.max(c.quantum);
            self.active.push_front(i);
        } else {
            c.deficit = c.deficit.saturating_add(len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(minor: u32) -> Handle {
        Handle::new(1, minor)
    }

    fn pkt(len: u32, class: u32, id: u64) -> Packet {
        let mut p = Packet::new(len, id);
        p.push_class(h(class));
        p
    }

    fn two_classes(q1: u32, q2: u32) -> Drr {
        let mut d = Drr::new(h(0), 1000);
        d.add_class(h(1), q1).unwrap();
        d.add_class(h(2), q2).unwrap();
        d
    }

    #[test]
    fn backlogged_classes_share_bytes_by_quantum() {
        let mut d = two_classes(1500, 3000);
        for i in 0..300 {
            d.enqueue(pkt(1500, 1, i), Time::ZERO).unwrap();
            d.enqueue(pkt(1500, 2, 1000 + i), Time::ZERO).unwrap();
        }
        let mut sent = [0u64; 2];
        for _ in 0..300 {
            let p = d.dequeue(Time::ZERO).unwrap();
            sent[(p.payload >= 1000) as usize] += p.len as u64;
        }
        assert_eq!(sent[0] * 2, sent[1], "1500 vs 3000 quanta share 1:2: {sent:?}");
    }

    #[test]
    fn deficit_carries_over_for_packets_larger_than_the_quantum() {
        let mut d = two_classes(500, 500);
        d.enqueue(pkt(1200, 1, 1), Time::ZERO).unwrap();
        d.enqueue(pkt(300, 2, 2), Time::ZERO).unwrap();
        d.enqueue(pkt(300, 2, 3), Time::ZERO).unwrap();
        // Class 1 (first active) needs three quanta: class 2 sends its 500 bytes worth meanwhile.
        let order: Vec<u64> = std::iter::from_fn(|| d.dequeue(Time::ZERO).map(|p| p.payload)).collect();
        assert_eq!(order, vec![2, 3, 1]);
        assert_eq!(d.stats().qlen, 0);
    }

    #[test]
    fn an_emptied_class_leaves_the_round_without_credit() {
        let mut d = two_classes(3000, 3000);
        d.enqueue(pkt(1000, 1, 1), Time::ZERO).unwrap();
        assert_eq!(d.class_stats(h(1)).unwrap().deficit, 3000);
        d.dequeue(Time::ZERO).unwrap();
        let s = d.class_stats(h(1)).unwrap();
        assert_eq!((s.deficit, s.stats.packets, s.stats.bytes), (0, 1, 1000));
        // Coming back, it starts with a fresh quantum, not the 2000 left over.
        d.enqueue(pkt(1000, 1, 2), Time::ZERO).unwrap();
        assert_eq!(d.class_stats(h(1)).unwrap().deficit, 3000);
    }

    #[test]
    fn unclassified_packets_are_dropped_and_counted() {
        let mut d = two_classes(1514, 1514);
        let e = d.enqueue(Packet::new(100, 1), Time::ZERO).unwrap_err();
        assert_eq!(e.reason, DropReason::Unclassified);
        let e = d.enqueue(pkt(100, 9, 2), Time::ZERO).unwrap_err();
        assert_eq!(e.reason, DropReason::Unclassified);
        assert_eq!(d.stats().drops, 2);
        assert_eq!(d.next_event(Time::ZERO), None);
    }

    #[test]
    fn child_overflow_counts_on_the_class_and_the_qdisc() {
        let mut d = Drr::new(h(0), 2);
        d.add_class(h(1), 1514).unwrap();
        for i in 0..3 {
            let _ = d.enqueue(pkt(100, 1, i), Time::ZERO);
        }
        assert_eq!(d.class_stats(h(1)).unwrap().stats.drops, 1);
        assert_eq!(d.stats().drops, 1);
        assert_eq!(d.stats().qlen, 2);
    }

    #[test]
    fn a_deleted_child_qdisc_becomes_a_default_pfifo() {
        let mut d = two_classes(1514, 1514);
        d.enqueue(pkt(100, 1, 1), Time::ZERO).unwrap();
        let mut old = d.set_class_qdisc(h(1), Some(Box::new(Fifo::bfifo(50)))).unwrap();
        assert_eq!(old.reset().len(), 1, "the old child keeps what it held");
        assert_eq!(d.stats().qlen, 0);
        assert_eq!(d.next_event(Time::ZERO), None, "the class left the round");
        assert!(d.enqueue(pkt(100, 1, 2), Time::ZERO).is_err(), "bfifo 50 refuses 100 bytes");
        d.set_class_qdisc(h(1), None).unwrap();
        assert_eq!(d.class_qdisc(h(1)).unwrap().kind(), "pfifo");
        d.enqueue(pkt(100, 1, 3), Time::ZERO).unwrap();
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 3);
    }

    #[test]
    fn delete_class_flushes_and_keeps_the_rest_consistent() {
        let mut d = two_classes(1514, 1514);
        d.add_class(h(3), 1514).unwrap();
        d.enqueue(pkt(100, 1, 1), Time::ZERO).unwrap();
        d.enqueue(pkt(100, 3, 3), Time::ZERO).unwrap();
        assert_eq!(d.delete_class(h(1)).unwrap().len(), 1);
        assert_eq!(d.stats().drops, 1);
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 3);
        assert!(d.dequeue(Time::ZERO).is_none());
        assert!(d.add_class(h(3), 0).is_err(), "zero quantum");
    }

    #[test]
    fn a_throttled_head_class_holds_the_round() {
        let mut d = two_classes(1514, 1514);
        let tbf = crate::tbf::holding_child();
        d.set_class_qdisc(h(1), Some(Box::new(tbf))).unwrap();
        for i in 0..2 {
            d.enqueue(pkt(1500, 1, i), Time::ZERO).unwrap();
        }
        d.enqueue(pkt(1500, 2, 9), Time::ZERO).unwrap();
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 0);
        // Class 1 stays at the head with packet 1 held back by its TBF: the whole round waits,
        // class 2's packet included, as drr_dequeue does when the head class's peek is empty.
        assert!(d.dequeue(Time::ZERO).is_none());
        let t = d.next_event(Time::ZERO).unwrap();
        assert!(t > Time::ZERO);
        // Released, packet 1 does not fit class 1's 14 bytes of deficit: class 2 goes first.
        assert_eq!(d.dequeue(t).unwrap().payload, 9);
        assert_eq!(d.dequeue(t).unwrap().payload, 1);
    }

    #[test]
    fn drops_a_child_makes_on_its_own_leave_the_backlog() {
        use crate::fifo::FifoKind;
        let mut d = two_classes(1514, 1514);
        let hd = Fifo::new(FifoKind::PfifoHeadDrop, Some(2)).unwrap();
        d.set_class_qdisc(h(1), Some(Box::new(hd))).unwrap();
        for i in 0..3 {
            d.enqueue(pkt(100, 1, i), Time::ZERO).unwrap();
        }
        let dropped = d.take_dropped().unwrap();
        assert_eq!((dropped.pkt.payload, dropped.reason), (0, DropReason::HeadDrop));
        assert!(d.take_dropped().is_none());
        let s = d.stats();
        assert_eq!((s.qlen, s.backlog_bytes, s.drops), (2, 200, 1));
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 1);
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 2);
        assert_eq!((d.qlen(), d.backlog_bytes()), (0, 0));
    }

    #[test]
    fn requeue_puts_the_packet_back_first() {
        let mut d = two_classes(1514, 1514);
        d.enqueue(pkt(1000, 1, 1), Time::ZERO).unwrap();
        d.enqueue(pkt(1000, 2, 2), Time::ZERO).unwrap();
        let p = d.dequeue(Time::ZERO).unwrap();
        d.requeue(p, Time::ZERO).unwrap();
        assert_eq!(d.dequeue(Time::ZERO).unwrap().payload, 1);
        assert_eq!(d.stats().requeues, 1);
        assert_eq!(d.stats().packets, 1);
    }
}
