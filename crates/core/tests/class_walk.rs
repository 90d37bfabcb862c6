//! `Qdisc::for_each_class`: every classful kind reports its classes, their counters and the
//! qdiscs attached to them, so that a caller walks any tree without knowing the kinds.

use sluice_core::drr::Drr;
use sluice_core::ets::{Ets, EtsConfig};
use sluice_core::fifo::Fifo;
use sluice_core::fq_codel::{FqCodel, FqCodelConfig};
use sluice_core::hfsc::{Curves, Hfsc, ServiceCurve};
use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::htb_fair::{FairClassConfig, HtbFair};
use sluice_core::netem::{Netem, NetemConfig};
use sluice_core::prio::{PfifoFast, PfifoFastConfig, Prio, PrioConfig, DEFAULT_PRIOMAP};
use sluice_core::sfq::{Sfq, SfqConfig};
use sluice_core::tbf::{Tbf, TbfConfig};
use sluice_core::{Handle, Packet, Qdisc, QdiscStats, Rate, Span, Time};
use std::collections::BTreeMap;

const N: u64 = 30;

fn h(minor: u32) -> Handle {
    Handle::new(1, minor)
}

/// Offers `N` 1000-byte packets classified round robin to classes `1:1`..`1:3`, then dequeues
/// until the qdisc is empty.
fn run(q: &mut dyn Qdisc) {
    let mut now = Time::ZERO;
    for i in 0..N {
        let mut p = Packet::new(1000, i);
        p.push_class(h(i as u32 % 3 + 1));
        q.enqueue(p, now).unwrap();
    }
    let mut sent = 0;
    for _ in 0..100_000 {
        let Some(t) = q.next_event(now) else { break };
        now = now.max(t);
        match q.dequeue(now) {
            Some(_) => sent += 1,
            None => now += Span::from_millis(1),
        }
        while q.take_dropped().is_some() {}
    }
    assert_eq!(sent, N, "{} did not send everything", q.kind());
}

/// Each class by minor: its counters and its qdisc's.
fn classes(q: &dyn Qdisc) -> BTreeMap<u32, (Option<QdiscStats>, Option<QdiscStats>)> {
    let mut out = BTreeMap::new();
    q.for_each_class(&mut |c| {
        assert!(out.insert(c.minor, (c.stats, c.child.map(|q| q.stats()))).is_none(), "{c:?} twice");
    });
    out
}

/// Classes 1..=3 each sent a third through their own qdisc, and the class counts what its
/// qdisc counts; together they sent what the root sent.
fn check_leaves(q: &dyn Qdisc) -> BTreeMap<u32, (Option<QdiscStats>, Option<QdiscStats>)> {
    let c = classes(q);
    let mut sum = 0;
    for minor in 1..=3 {
        let (stats, child) = c[&minor];
        let (stats, child) = (stats.unwrap(), child.unwrap());
        assert_eq!((stats.packets, stats.bytes), (N / 3, N / 3 * 1000), "{} class {minor}", q.kind());
        assert_eq!((child.packets, child.bytes), (stats.packets, stats.bytes), "{} class {minor}", q.kind());
        sum += child.packets;
    }
    assert_eq!(sum, q.stats().packets, "{}", q.kind());
    c
}

#[test]
fn prio_and_ets_report_their_bands_with_the_bands_qdiscs_counters() {
    let mut p = Prio::new(PrioConfig { major: 1, ..PrioConfig::default() }).unwrap();
    p.set_band_qdisc(1, Box::new(Sfq::new(SfqConfig::default()).unwrap())).unwrap();
    p.set_band_qdisc(2, Box::new(FqCodel::new(FqCodelConfig::default()).unwrap())).unwrap();
    run(&mut p);
    let c = check_leaves(&p);
    assert_eq!(c.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    for (stats, child) in c.values() {
        assert_eq!(stats, child, "a band's class is its qdisc's counters");
    }

    let mut e = Ets::new(EtsConfig {
        nbands: 3,
        nstrict: 1,
        quanta: vec![0, 1500, 3000],
        priomap: DEFAULT_PRIOMAP,
        major: 1,
        tos_mapping: Default::default(),
        default_limit: 1000,
    })
    .unwrap();
    e.set_band_qdisc(2, Some(Box::new(Sfq::new(SfqConfig::default()).unwrap()))).unwrap();
    run(&mut e);
    let c = check_leaves(&e);
    assert_eq!(c.len(), 3);
    for (stats, child) in c.values() {
        assert_eq!(stats, child);
    }
}

#[test]
fn drr_reports_its_classes_with_their_childs_queue_counters() {
    let mut d = Drr::new(h(0), 1000);
    for m in 1..=3 {
        d.add_class(h(m), 1500).unwrap();
    }
    d.set_class_qdisc(h(2), Some(Box::new(FqCodel::new(FqCodelConfig::default()).unwrap()))).unwrap();
    run(&mut d);
    let c = check_leaves(&d);
    assert_eq!(c.len(), 3);
    for (stats, child) in c.values() {
        assert_eq!(stats, child, "drr_dump_class_stats copies the child's queue counters");
    }
}

#[test]
fn htb_reports_inner_and_leaf_classes() {
    let mut q = Htb::new(h(0), HtbConfig::default()).unwrap();
    let rate = Rate::from_bps(10_000_000);
    q.add_class(h(0x10), h(0), HtbClassConfig::new(rate), Time::ZERO).unwrap();
    for m in 1..=3 {
        q.add_class(h(m), h(0x10), HtbClassConfig::new(rate), Time::ZERO).unwrap();
        q.set_leaf_qdisc(h(m), Box::new(Fifo::pfifo(100))).unwrap();
    }
    run(&mut q);
    let c = check_leaves(&q);
    let (inner, child) = c[&0x10];
    assert_eq!((inner.unwrap().packets, child), (N, None), "an inner class counts its descendants");

    let mut f = HtbFair::new(h(0), 0, 1000, 1000);
    let cfg = FairClassConfig { rate: 10_000_000, ceil: 10_000_000, prio: 0, quantum: 1500 };
    f.add_class(h(0x10), h(0), cfg).unwrap();
    for m in 1..=3 {
        f.add_class(h(m), h(0x10), cfg).unwrap();
    }
    run(&mut f);
    let c = check_leaves(&f);
    let (inner, child) = c[&0x10];
    assert_eq!((inner.unwrap().packets, child.is_none()), (N, true));
}

#[test]
fn hfsc_reports_its_root_class_and_only_leaves_have_qdiscs() {
    let mut q = Hfsc::new(h(0), 0, 1000);
    let sc = Some(ServiceCurve::linear(1_250_000));
    let curves = Curves { rt: None, ls: sc, ul: None };
    q.add_class(h(0x10), h(0), curves).unwrap();
    for m in 1..=3 {
        q.add_class(h(m), h(0x10), curves).unwrap();
    }
    run(&mut q);
    let c = check_leaves(&q);
    assert_eq!(c.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 0x10]);
    for inner in [0, 0x10] {
        let (stats, child) = c[&inner];
        // As the kernel: only a leaf's bstats count what it sends.
        assert_eq!((stats.unwrap().packets, child.is_none()), (0, true), "class {inner:x}");
    }
}

#[test]
fn single_class_kinds_report_class_1_without_counters() {
    let mut t = Tbf::new(TbfConfig::new(Rate::from_bps(8_000_000), 10_000, 100_000)).unwrap();
    t.set_child(Box::new(Sfq::new(SfqConfig::default()).unwrap()), Time::ZERO);
    let mut n = Netem::new(NetemConfig::default()).unwrap();
    assert!(classes(&n).is_empty(), "netem has its class only while it has a child");
    n.set_child(Box::new(Fifo::pfifo(100)));
    for q in [&mut t as &mut dyn Qdisc, &mut n] {
        run(q);
        let c = classes(q);
        assert_eq!(c.keys().copied().collect::<Vec<_>>(), [1], "{}", q.kind());
        let (stats, child) = c[&1];
        assert_eq!((stats, child.unwrap().packets), (None, q.stats().packets), "{}", q.kind());
    }
}

#[test]
fn classless_kinds_report_no_class() {
    let mut p = PfifoFast::new(PfifoFastConfig::default());
    run(&mut p);
    assert!(classes(&p).is_empty(), "pfifo_fast's bands are no classes in the kernel");
    let mut f = Fifo::pfifo(100);
    run(&mut f);
    assert!(classes(&f).is_empty());
}
