//! Unit tests for HTB: shaping, borrowing, classification, run-time changes.

use super::*;
use crate::fifo::Fifo;
use crate::rate::Rate;

fn h(minor: u32) -> Handle {
    Handle::new(1, minor)
}

const ROOT: Handle = Handle::new(1, 0);

fn pkt_to(class: u32, len: u32, id: u64) -> Packet {
    let mut p = Packet::new(len, id);
    p.push_class(h(class));
    p
}

fn bps(b: u64) -> Rate {
    Rate::from_bps(b)
}

fn t(ms: u64) -> Time {
    Time::from_millis(ms)
}

#[test]
fn single_class_sends_burst_plus_one_then_paces_at_rate() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(8_000)).burst(1000).cburst(1000), t(0)).unwrap();
    for i in 0..5 {
        q.enqueue(pkt_to(1, 1000, i), t(0)).unwrap();
    }
    // A class may send while its tokens are >= 0: the full bucket (1000 B) lets two 1000-byte
    // packets out (the second takes it to -1000), then 1000 B/s.
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 0);
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 1);
    assert!(q.dequeue(t(0)).is_none());
    assert_eq!(q.next_event(t(0)), Some(t(1000)));
    assert!(q.dequeue(t(999)).is_none());
    assert_eq!(q.dequeue(t(1000)).unwrap().payload, 2);
    assert_eq!(q.next_event(t(1000)), Some(t(2000)));
    let s = q.class_stats(h(1)).unwrap();
    assert_eq!((s.packets, s.bytes, s.qlen, s.backlog), (3, 3000, 2, 2000));
    assert_eq!(s.lends, 3);
    // -1000 B at 1000 B/s = -1 s of tokens = -15625000 ticks.
    assert_eq!(s.tokens, -15_625_000);
    assert_eq!(s.overlimits, 2, "ceil == rate: both throttles were CANT_SEND");
    assert_eq!(q.stats().qlen, 2);
}

#[test]
fn child_borrows_from_parent_up_to_ceil() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    // Parent 16 kbit = 2000 B/s; child rate 1000 B/s, ceil 2000 B/s.
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(16_000)).burst(1000).cburst(1000), t(0)).unwrap();
    q.add_class(
        h(0x10),
        h(1),
        HtbClassConfig::new(bps(8_000)).ceil(bps(16_000)).burst(1000).cburst(1000),
        t(0),
    )
    .unwrap();
    let mut sent = 0u64;
    let mut now = t(0);
    let mut id = 0;
    for _ in 0..40 {
        q.enqueue(pkt_to(0x10, 500, id), now).unwrap();
        id += 1;
    }
    let end = Time::from_secs(10);
    let mut steps = 0;
    while now <= end {
        while let Some(p) = q.dequeue(now) {
            sent += p.len as u64;
            q.enqueue(pkt_to(0x10, 500, id), now).unwrap();
            id += 1;
            steps += 1;
            assert!(steps < 100_000, "{now:?} {sent}");
        }
        now = q.next_event(now).unwrap();
        steps += 1;
        assert!(steps < 100_000, "{now:?} {sent}");
    }
    // Bounded by ceil: 2000 B/s * 10 s + cburst + one packet.
    assert!(sent <= 20_000 + 1000 + 500, "sent {sent}");
    assert!(sent >= 20_000, "sent {sent}: the child should reach its ceil by borrowing");
    let c = q.class_stats(h(0x10)).unwrap();
    assert!(c.borrows > 0 && c.lends > 0, "{c:?}");
    let p = q.class_stats(h(1)).unwrap();
    assert_eq!(p.lends, c.borrows, "every borrowed packet was lent by the parent");
    assert_eq!(p.bytes, c.bytes);
}

#[test]
fn lower_prio_number_gets_the_excess_first() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(80_000)), t(0)).unwrap();
    for (minor, prio) in [(0x10, 1u8), (0x20, 0u8)] {
        q.add_class(h(minor), h(1), HtbClassConfig::new(bps(8_000)).ceil(bps(80_000)).prio(prio), t(0))
            .unwrap();
    }
    let mut bytes = [0u64; 2];
    let mut now = t(0);
    let mut id = 0;
    for c in [0x10, 0x20] {
        for _ in 0..20 {
            q.enqueue(pkt_to(c, 100, id), now).unwrap();
            id += 1;
        }
    }
    while now < Time::from_secs(20) {
        while let Some(p) = q.dequeue(now) {
            let c = p.class_path[0].minor();
            bytes[(c == 0x20) as usize] += p.len as u64;
            q.enqueue(pkt_to(c, 100, id), now).unwrap();
            id += 1;
        }
        now = q.next_event(now).unwrap();
    }
    // 1:10 gets about its rate (1000 B/s), 1:20 the rest (9000 B/s).
    let total = (bytes[0] + bytes[1]) as f64;
    let share20 = bytes[1] as f64 / total;
    assert!((share20 - 0.9).abs() < 0.02, "{bytes:?}");
}

#[test]
fn classification_follows_the_kernel() {
    let mut q = Htb::new(ROOT, HtbConfig { default_class: 0x20, ..HtbConfig::default() }).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(1_000_000)), t(0)).unwrap();
    q.add_class(h(0x10), h(1), HtbClassConfig::new(bps(500_000)), t(0)).unwrap();
    let mut p = Packet::new(100, 0);
    // Nothing matched, default 1:20 does not exist yet: direct queue.
    assert_eq!(q.classify_packet(&p), None);
    assert!(q.validate().is_err());
    q.add_class(h(0x20), h(1), HtbClassConfig::new(bps(500_000)), t(0)).unwrap();
    assert!(q.validate().is_ok());
    assert_eq!(q.classify_packet(&p), Some(h(0x20)));
    // priority naming the qdisc: direct; naming a leaf: that leaf; naming an inner class: ignored.
    p.priority = ROOT.to_tc().unwrap();
    assert_eq!(q.classify_packet(&p), None);
    p.priority = h(0x10).to_tc().unwrap();
    assert_eq!(q.classify_packet(&p), Some(h(0x10)));
    p.priority = h(1).to_tc().unwrap();
    assert_eq!(q.classify_packet(&p), Some(h(0x20)));
    // A classifier result: X:0 is direct, a leaf is that leaf, an inner class falls back.
    p.priority = 0;
    p.push_class(Handle::new(1, 0));
    assert_eq!(q.classify_packet(&p), None);
    p.push_class(h(0x10));
    assert_eq!(q.classify_packet(&p), Some(h(0x10)));
    p.push_class(h(1));
    assert_eq!(q.classify_packet(&p), Some(h(0x20)));
    p.push_class(h(0x99));
    assert_eq!(q.classify_packet(&p), Some(h(0x20)));
    // Priority is looked at before the classifier's result, as in the kernel.
    p.priority = ROOT.to_tc().unwrap();
    assert_eq!(q.classify_packet(&p), None);
    // Results for another qdisc's major do not count.
    let mut other = Packet::new(100, 0);
    other.push_class(Handle::new(2, 0x10));
    assert_eq!(q.classify_packet(&other), Some(h(0x20)));
    // Default naming an inner class: direct queue, and validate says why.
    q.change_config(HtbConfig { default_class: 1, ..HtbConfig::default() }).unwrap();
    assert_eq!(q.classify_packet(&Packet::new(1, 0)), None);
    assert!(q.validate().unwrap_err().to_string().contains("inner class"));
}

#[test]
fn direct_queue_is_unshaped_first_and_limited() {
    let mut q = Htb::new(ROOT, HtbConfig { direct_qlen: 2, ..HtbConfig::default() }).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(8)), t(0)).unwrap();
    q.enqueue(pkt_to(1, 1000, 100), t(0)).unwrap();
    for i in 0..2 {
        q.enqueue(Packet::new(1500, i), t(0)).unwrap();
    }
    let e = q.enqueue(Packet::new(1500, 9), t(0)).unwrap_err();
    assert_eq!(e.reason, DropReason::QueueFull);
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 0);
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 1);
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 100);
    assert_eq!(q.direct_packets(), 2);
    let s = q.stats();
    assert_eq!((s.packets, s.drops, s.qlen), (3, 1, 0));
}

#[test]
fn errors_are_typed_and_say_where() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    let r = HtbClassConfig::new(bps(1000));
    q.add_class(h(1), ROOT, r.clone(), t(0)).unwrap();
    let e = q.add_class(h(1), ROOT, r.clone(), t(0)).unwrap_err();
    assert!(e.to_string().contains("1:1 already exists"), "{e}");
    let e = q.add_class(h(2), h(7), r.clone(), t(0)).unwrap_err();
    assert!(e.to_string().contains("parent 1:7 does not exist"), "{e}");
    let e = q.add_class(Handle::new(2, 1), ROOT, r.clone(), t(0)).unwrap_err();
    assert!(e.to_string().contains("invalid classid 2:1"), "{e}");
    let e = q.add_class(h(3), ROOT, HtbClassConfig::new(bps(0)), t(0)).unwrap_err();
    assert!(matches!(e, ConfigError::Invalid { param: "rate", .. }));
    q.add_class(h(0x10), h(1), r.clone(), t(0)).unwrap();
    let e = q.delete_class(h(1), t(0)).unwrap_err();
    assert!(e.to_string().starts_with("HTB class in use"), "{e}");
    assert!(Htb::new(ROOT, HtbConfig { direct_qlen: 0, ..HtbConfig::default() }).is_err());
    assert!(Htb::new(h(1), HtbConfig::default()).is_err());
    let e = q.set_leaf_qdisc(h(1), Box::new(Fifo::pfifo(5))).unwrap_err();
    assert!(e.to_string().contains("inner class"));
}

#[test]
fn build_reports_cycles_unknown_parents_and_inner_default() {
    let c = |minor, parent| (h(minor), parent, HtbClassConfig::new(bps(1000)));
    // Out of order is fine.
    let (q, w) = Htb::build(ROOT, HtbConfig::default(), &[c(0x10, h(1)), c(1, ROOT)], t(0)).unwrap();
    assert_eq!(q.class_count(), 2);
    assert!(w.iter().all(|w| w.contains("quantum")), "{w:?}");
    let e = Htb::build(ROOT, HtbConfig::default(), &[c(0x10, h(0x20)), c(0x20, h(0x10)), c(1, ROOT)], t(0))
        .unwrap_err();
    assert!(e.to_string().contains("cycle"), "{e}");
    let e = Htb::build(ROOT, HtbConfig::default(), &[c(0x10, h(0x30))], t(0)).unwrap_err();
    assert!(e.to_string().contains("parent 1:30 does not exist"), "{e}");
    let e = Htb::build(ROOT, HtbConfig::default(), &[c(1, ROOT), c(1, ROOT)], t(0)).unwrap_err();
    assert!(e.to_string().contains("defined twice"), "{e}");
    let cfg = HtbConfig { default_class: 1, ..HtbConfig::default() };
    let e = Htb::build(ROOT, cfg, &[c(1, ROOT), c(0x10, h(1))], t(0)).unwrap_err();
    assert!(e.to_string().contains("inner class"), "{e}");
    let cfg = HtbConfig { default_class: 0x40, ..HtbConfig::default() };
    let (_, w) = Htb::build(ROOT, cfg, &[c(1, ROOT)], t(0)).unwrap();
    assert!(w.iter().any(|w| w.contains("does not exist")), "{w:?}");
}

#[test]
fn run_time_changes_keep_other_queues() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    let r = HtbClassConfig::new(bps(8_000_000));
    q.add_class(h(1), ROOT, r.clone(), t(0)).unwrap();
    q.add_class(h(0x10), h(1), r.clone(), t(0)).unwrap();
    q.add_class(h(0x20), h(1), r.clone(), t(0)).unwrap();
    for i in 0..10 {
        q.enqueue(pkt_to(0x10, 100, i), t(0)).unwrap();
        q.enqueue(pkt_to(0x20, 100, 100 + i), t(0)).unwrap();
    }
    // Adding a class under a backlogged leaf flushes that leaf only.
    let w = q.add_class(h(0x21), h(0x20), r.clone(), t(1)).unwrap();
    assert!(w.iter().any(|w| w.contains("flushed")), "{w:?}");
    let mut flushed = 0;
    while let Some(d) = q.take_dropped() {
        assert_eq!(d.reason, DropReason::Flushed);
        flushed += 1;
    }
    assert_eq!(flushed, 10);
    assert_eq!(q.stats().qlen, 10);
    // Changing and adding classes does not lose 1:10's packets.
    q.change_class(h(0x10), HtbClassConfig::new(bps(4_000_000)).prio(3), t(2)).unwrap();
    q.add_class(h(0x30), h(1), r.clone(), t(2)).unwrap();
    q.enqueue(pkt_to(0x21, 100, 999), t(2)).unwrap();
    // Deleting 1:21 returns its packet and makes 1:20 a leaf again.
    let back = q.delete_class(h(0x21), t(3)).unwrap();
    assert_eq!(back.len(), 1);
    assert!(q.classes().any(|c| c.classid == h(0x20) && c.is_leaf));
    let mut got = 0;
    let mut now = t(3);
    while q.stats().qlen > 0 {
        while q.dequeue(now).is_some() {
            got += 1;
        }
        if let Some(n) = q.next_event(now) {
            now = n;
        }
    }
    assert_eq!(got, 10);
    assert_eq!(q.stats().packets, 10);
}

#[test]
fn class_listing_has_kernel_levels() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    let r = HtbClassConfig::new(bps(8_000_000));
    q.add_class(h(1), ROOT, r.clone(), t(0)).unwrap();
    q.add_class(h(0x10), h(1), r.clone(), t(0)).unwrap();
    q.add_class(h(0x11), h(0x10), r.clone(), t(0)).unwrap();
    let l: Vec<(Handle, Handle, u32, bool)> =
        q.classes().map(|c| (c.classid, c.parent, c.level, c.is_leaf)).collect();
    assert_eq!(l, vec![(h(1), ROOT, 7, false), (h(0x10), h(1), 6, false), (h(0x11), h(0x10), 0, true)]);
    // Deeper than the kernel's 8 levels works.
    let mut parent = h(0x11);
    for m in 0x100..0x110u32 {
        q.add_class(h(m), parent, r.clone(), t(0)).unwrap();
        parent = h(m);
    }
    q.enqueue(pkt_to(0x10f, 100, 1), t(0)).unwrap();
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 1);
    assert_eq!(q.classes().find(|c| c.classid == h(1)).unwrap().level, 18);
}

#[test]
fn leaf_qdisc_can_be_replaced() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(8)), t(0)).unwrap();
    q.enqueue(pkt_to(1, 100, 1), t(0)).unwrap();
    let old = q.set_leaf_qdisc(h(1), Box::new(Fifo::pfifo(1))).unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(q.stats().qlen, 0);
    q.enqueue(pkt_to(1, 100, 2), t(0)).unwrap();
    assert_eq!(q.enqueue(pkt_to(1, 100, 3), t(0)).unwrap_err().reason, DropReason::QueueFull);
    assert_eq!(q.class_stats(h(1)).unwrap().drops, 1);
    assert_eq!(q.leaf_qdisc(h(1)).unwrap().kind(), "pfifo");
}

#[test]
fn peek_and_requeue_keep_counts() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(8_000_000)), t(0)).unwrap();
    q.enqueue(pkt_to(1, 100, 1), t(0)).unwrap();
    q.enqueue(pkt_to(1, 100, 2), t(0)).unwrap();
    assert_eq!(q.peek(t(0)).unwrap().payload, 1);
    assert_eq!(q.stats().qlen, 2);
    let p = q.dequeue(t(0)).unwrap();
    assert_eq!(p.payload, 1);
    q.requeue(p, t(0)).unwrap();
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 1);
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 2);
    assert_eq!(q.stats().requeues, 1);
    assert_eq!(q.reset().len(), 0);
}

/// One qdisc holds 32-bit minors: scattered ones (a hash-mapped index) and a dense million
/// (a direct table); lookups, the default class, deletion and the sorted listing all work.
#[test]
fn wide_minors_in_one_qdisc() {
    let cfg = HtbConfig { default_class: 0xffff_ffff, ..HtbConfig::default() };
    let mut q = Htb::new(ROOT, cfg).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(1_000_000)), t(0)).unwrap();
    for m in [0xffff_ffff, 0x1_0000, 0x8000_0000, 0x10] {
        q.add_class(h(m), h(1), HtbClassConfig::new(bps(100_000)), t(0)).unwrap();
    }
    assert!(q.by_minor.is_sparse());
    let ids: Vec<u32> = q.classes().map(|c| c.classid.minor()).collect();
    assert_eq!(ids, vec![1, 0x10, 0x1_0000, 0x8000_0000, 0xffff_ffff]);
    assert_eq!(q.classify_packet(&pkt_to(0x8000_0000, 100, 0)), Some(h(0x8000_0000)));
    assert_eq!(q.classify_packet(&Packet::new(100, 0)), Some(h(0xffff_ffff)), "default");
    assert_eq!(q.classify_packet(&pkt_to(0x7fff_ffff, 100, 0)), Some(h(0xffff_ffff)));
    q.enqueue(pkt_to(0x1_0000, 100, 7), t(0)).unwrap();
    assert_eq!(q.dequeue(t(0)).unwrap().payload, 7);
    q.delete_class(h(0x8000_0000), t(0)).unwrap();
    assert!(q.class_stats(h(0x8000_0000)).is_none());
    assert_eq!(q.classify_packet(&pkt_to(0x8000_0000, 100, 0)), Some(h(0xffff_ffff)));

    let n = 1_000_000u32;
    let classes: Vec<_> = std::iter::once((h(1), ROOT, HtbClassConfig::new(bps(1_000_000_000))))
        .chain((2..n + 2).map(|m| (h(m), h(1), HtbClassConfig::new(bps(1_000)).ceil(bps(1_000_000_000)))))
        .collect();
    let (mut big, _) = Htb::build(ROOT, HtbConfig::default(), &classes, t(0)).unwrap();
    assert!(!big.by_minor.is_sparse());
    assert!(big.by_minor.heap_bytes() <= 4 * (n as usize + 2) + 64);
    assert_eq!(big.class_count(), n as usize + 1);
    big.enqueue(pkt_to(n + 1, 100, 9), t(0)).unwrap();
    assert_eq!(big.class_stats(h(n + 1)).unwrap().qlen, 1);
    assert_eq!(big.dequeue(t(0)).unwrap().payload, 9);
}

#[test]
fn children_keep_consecutive_indices_as_a_run() {
    let mut c = sched::Children::default();
    assert_eq!((c.push(7), c.push(8), c.push(9)), (0, 1, 2));
    assert_eq!((c.get(0), c.get(2), c.len(), c.room()), (7, 9, 3, 4));
    assert_eq!(c.push(20), 3, "out of order: an explicit list");
    assert_eq!((c.get(1), c.get(3)), (8, 20));
    assert_eq!(c.swap_remove(0), Some(20));
    assert_eq!((c.get(0), c.get(1), c.get(2), c.len()), (20, 8, 9, 3));
    let mut d = sched::Children::default();
    (0..5).for_each(|i| {
        d.push(i);
    });
    assert_eq!(d.swap_remove(4), None, "the last one leaves no hole");
    assert_eq!((d.len(), d.get(3)), (4, 3));
}

#[test]
fn active_leaves_follow_the_backlog() {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    q.add_class(h(1), ROOT, HtbClassConfig::new(bps(8_000_000)), t(0)).unwrap();
    q.add_class(h(10), h(1), HtbClassConfig::new(bps(1_000_000)).quantum(3000), t(0)).unwrap();
    q.add_class(h(20), h(1), HtbClassConfig::new(bps(2_000_000)).quantum(5000), t(0)).unwrap();
    assert_eq!(q.active_leaves(), ActiveLeaves::default());
    q.enqueue(pkt_to(10, 1000, 0), t(0)).unwrap();
    q.enqueue(pkt_to(20, 1000, 1), t(0)).unwrap();
    q.enqueue(pkt_to(20, 1000, 2), t(0)).unwrap();
    assert_eq!(q.active_leaves(), ActiveLeaves { leaves: 2, rate_bps: 3_000_000, quantum: 8000 });
    // A rate change keeps the count right (the leaf leaves and comes back with its new plan).
    q.change_class(h(20), HtbClassConfig::new(bps(4_000_000)).quantum(6000), t(0)).unwrap();
    assert_eq!(q.active_leaves(), ActiveLeaves { leaves: 2, rate_bps: 5_000_000, quantum: 9000 });
    while q.dequeue(t(10)).is_some() {}
    assert_eq!(q.qlen(), 0);
    assert_eq!(q.active_leaves(), ActiveLeaves::default());
    q.enqueue(pkt_to(10, 1000, 3), t(10)).unwrap();
    assert_eq!(q.reset().len(), 1);
    assert_eq!(q.active_leaves(), ActiveLeaves::default());
}
