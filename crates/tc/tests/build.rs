//! Tests of `sluice_model::build` that need the tc front end.

use sluice_core::Packet;
use sluice_core::{Handle, Span, Time};
use sluice_model::build::*;
use sluice_model::model::*;

fn load(s: &str) -> State {
    sluice_tc::script::load_tc_script("t", s, &Default::default()).unwrap().state
}

#[test]
fn htb_textbook_is_shown_exported_and_built() {
    let script = "tc qdisc add dev e root handle 1: htb default 10 textbook\n\
                  tc class add dev e parent 1: classid 1:10 htb rate 1mbit\n";
    let s = load(script);
    let shown = sluice_tc::tc::show::qdisc_options(&s.devices[0], &s.devices[0].qdiscs[0].opts, false);
    assert!(shown.ends_with(" direct_qlen 1000 textbook"), "{shown}");
    assert!(sluice_tc::export::qdisc_args(&s.devices[0].qdiscs[0].opts).contains(" textbook"));
    let mut b = build_device(&s, "e").unwrap();
    let mut p = Packet::new(1000, 1);
    p.push_class(Handle::new(1, 10));
    b.root.enqueue(p, Time::ZERO).unwrap();
    assert_eq!(b.root.dequeue(Time::ZERO).unwrap().payload, 1);
    // Paced at the class's 1 Mbit/s: the next packet is due 8 ms later.
    let mut p = Packet::new(1000, 2);
    p.push_class(Handle::new(1, 10));
    b.root.enqueue(p, Time::ZERO).unwrap();
    assert!(b.root.dequeue(Time::ZERO).is_none());
    assert_eq!(b.root.next_event(Time::ZERO), Some(Time::ZERO + Span::from_millis(8)));
}

#[test]
fn builds_prio_with_tbf_and_fq_codel_and_passes_packets() {
    let s = load("tc qdisc add dev e root handle 1: prio\ntc qdisc add dev e parent 1:1 handle 10: tbf rate 1mbit burst 10k latency 50ms\ntc qdisc add dev e parent 1:2 handle 20: fq_codel\ntc filter add dev e parent 1: protocol all prio 1 matchall classid 1:2\ntc filter add dev e parent 1: protocol ip prio 2 u32 match ip dport 22 0xffff flowid 1:1 action drop\ntc filter add dev e parent 1: protocol ip prio 3 handle 1 flow hash keys src,dst divisor 2 baseclass 1:2\n");
    let mut b = build_device(&s, "e").unwrap();
    assert_eq!(b.root.kind(), "prio");
    let pkt = Packet::new(1000, 1);
    b.root.enqueue(pkt, Time::ZERO).unwrap();
    assert!(b.root.dequeue(Time::ZERO).is_some());
    assert!(b.classifier.filters(Handle::from_tc(0x1_0000)).is_some());
}

#[test]
fn skbedit_mark_feeds_fw_and_priority_picks_the_class_below() {
    use sluice_core::classify::ClassifyOutcome;
    // skbedit mark + continue: the next filter (fw) reads the new mark.
    let s = load("tc qdisc add dev e root handle 1: htb default 10\ntc class add dev e parent 1: classid 1:10 htb rate 1mbit\ntc class add dev e parent 1: classid 1:20 htb rate 1mbit\ntc filter add dev e parent 1: protocol all prio 1 matchall action skbedit mark 5 continue\ntc filter add dev e parent 1: protocol all prio 2 handle 5 fw classid 1:20\n");
    let mut b = build_device(&s, "e").unwrap();
    let mut p = Packet::new(1000, 1);
    assert_eq!(b.classifier.classify(&mut p, &Default::default(), &[], Time::ZERO), ClassifyOutcome::Enqueue);
    assert_eq!(p.mark, 5);
    assert_eq!(p.class_for(1), Some(Handle::new(1, 0x20)));
    // skbedit priority in the prio's filter: the HTB below takes skb->priority as its class.
    let s = load("tc qdisc add dev e root handle 1: prio\ntc qdisc add dev e parent 1:2 handle 10: htb default 1\ntc class add dev e parent 10: classid 10:1 htb rate 1mbit\ntc class add dev e parent 10: classid 10:2 htb rate 1mbit\ntc filter add dev e parent 1: protocol all prio 1 matchall classid 1:2 action skbedit priority 10:2\n");
    let mut b = build_device(&s, "e").unwrap();
    let mut p = Packet::new(1000, 2);
    assert_eq!(b.classifier.classify(&mut p, &Default::default(), &[], Time::ZERO), ClassifyOutcome::Enqueue);
    assert_eq!(p.priority, 0x0010_0002);
    assert_eq!(p.class_for(0x10), Some(Handle::new(0x10, 2)));
}

#[test]
fn builds_the_home_example_and_shapes() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/home-003.tc")).unwrap();
    let s = load(&text);
    let mut b = build_device(&s, "ppp0").unwrap();
    assert_eq!(b.root.kind(), "htb");
    // Unclassified packets take the default path 1:20 -> 20:1 (fq_codel); 10 packets queue.
    for i in 0..10 {
        let mut p = Packet::new(1000, i);
        assert_eq!(
            b.classifier.classify(&mut p, &Default::default(), &[], Time::ZERO),
            sluice_core::classify::ClassifyOutcome::Enqueue
        );
        b.root.enqueue(p, Time::ZERO).unwrap();
    }
    assert_eq!(b.root.qlen(), 10);
    // 900 kbit/s with 1600-byte buckets: the first packets go at once, the rest are throttled.
    let mut sent = 0;
    while b.root.dequeue(Time::ZERO).is_some() {
        sent += 1;
    }
    assert!((1..10).contains(&sent), "sent {sent} at t=0");
    assert!(b.root.next_event(Time::ZERO).is_some_and(|t| t > Time::ZERO));
}

#[test]
fn builds_sfq_with_its_options() {
    let s = load("tc qdisc add dev e root handle 1: sfq perturb 10 headdrop\n");
    assert_eq!(build_device(&s, "e").unwrap().root.kind(), "sfq");
}

#[test]
fn drr_classes_take_filter_results_and_drop_the_unclassified() {
    let s = load("tc qdisc add dev e root handle 1: drr\ntc class add dev e parent 1: classid 1:1 drr quantum 1500\ntc class add dev e parent 1: classid 1:2 drr quantum 3000\ntc qdisc add dev e parent 1:2 handle 20: bfifo limit 100000\ntc filter add dev e parent 1: protocol all prio 1 handle 1 fw classid 1:1\ntc filter add dev e parent 1: protocol all prio 1 handle 2 fw classid 1:2\n");
    let mut b = build_device(&s, "e").unwrap();
    assert_eq!(b.root.kind(), "drr");
    let mut queued = 0;
    for i in 0..40u64 {
        let mut p = Packet::new(1500, i);
        p.mark = (i % 3) as u32; // fw: mark 1 -> 1:1, mark 2 -> 1:2, mark 0 -> no class
        let out = b.classifier.classify(&mut p, &Default::default(), &[], Time::ZERO);
        assert_eq!(out, sluice_core::classify::ClassifyOutcome::Enqueue);
        match b.root.enqueue(p, Time::ZERO) {
            Ok(()) => queued += 1,
            Err(d) => assert_eq!((d.reason, i % 3), (sluice_core::DropReason::Unclassified, 0)),
        }
    }
    assert_eq!(b.root.stats().drops, 14);
    // Backlogged: class 1:2 (quantum 3000) sends two packets per round, 1:1 one.
    let mut n = [0; 3];
    for _ in 0..9 {
        n[(b.root.dequeue(Time::ZERO).unwrap().payload % 3) as usize] += 1;
    }
    assert_eq!((n[1], n[2], queued), (3, 6, 26));
}

#[test]
fn hfsc_classes_follow_filters_down_inner_classes_and_fall_back_to_the_default() {
    let s = load("tc qdisc add dev e root handle 1: hfsc default 30\ntc class add dev e parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit\ntc class add dev e parent 1:1 classid 1:10 hfsc ls m2 6mbit\ntc class add dev e parent 1:1 classid 1:20 hfsc ls m2 3mbit\ntc class add dev e parent 1:1 classid 1:30 hfsc ls m2 1mbit\ntc qdisc add dev e parent 1:20 handle 20: bfifo limit 100000\ntc filter add dev e parent 1: protocol all prio 1 handle 1 fw classid 1:1\ntc filter add dev e parent 1:1 protocol all prio 1 handle 1 fw classid 1:10\ntc filter add dev e parent 1: protocol all prio 2 handle 2 fw classid 1:20\n");
    let mut b = build_device(&s, "e").unwrap();
    assert_eq!(b.root.kind(), "hfsc");
    for i in 0..30u64 {
        let mut p = Packet::new(1000, i);
        p.mark = (i % 3) as u32; // 1 -> 1:1 then its filter -> 1:10; 2 -> 1:20; 0 -> default 1:30
        b.classifier.classify(&mut p, &Default::default(), &[], Time::ZERO);
        let want = [None, Some(Handle::new(1, 0x10)), Some(Handle::new(1, 0x20))][(i % 3) as usize];
        assert_eq!(p.class_for(1), want);
        // The unclassified go to the default class, not dropped.
        b.root.enqueue(p, Time::ZERO).unwrap();
    }
    // The parent's 10mbit upper limit paces the dequeues: each at the next event.
    let mut n = [0; 3];
    let mut now = Time::ZERO;
    while let Some(t) = b.root.next_event(now) {
        now = now.max(t);
        if let Some(p) = b.root.dequeue(now) {
            n[(p.payload % 3) as usize] += 1;
        }
    }
    assert_eq!(n, [10, 10, 10]);
    // 30 000 bytes at 10 Mbit/s: the last leaves about 23.2 ms in (the first goes at once).
    assert!((23_000_000..24_500_000).contains(&now.as_nanos()), "{now:?}");
}

#[test]
fn red_builds_with_the_derived_parameters_and_a_grafted_child() {
    let s = load("tc qdisc add dev e root handle 1: red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 ecn bandwidth 10Mbit\n");
    let mut b = build_device(&s, "e").unwrap();
    assert_eq!(b.root.kind(), "red");
    b.root.enqueue(Packet::new(1000, 1), Time::ZERO).unwrap();
    assert_eq!(b.root.dequeue(Time::ZERO).unwrap().payload, 1);
    let s = load("tc qdisc add dev e root handle 1: red limit 400000 avpkt 1000\ntc qdisc add dev e parent 1:1 handle 10: pfifo limit 2\n");
    let mut b = build_device(&s, "e").unwrap();
    for i in 0..3 {
        let _ = b.root.enqueue(Packet::new(1000, i), Time::ZERO);
    }
    assert_eq!(b.root.stats().qlen, 2, "the grafted pfifo's limit applies");
}

/// A chain of qdiscs nested deeper than the builder allows is refused with the limit named,
/// not a stack overflow (found by a garbage-input run: 2 000 nested HTB qdiscs).
#[test]
fn qdiscs_nested_too_deep_are_refused_without_recursion() {
    let mut s = String::from("tc qdisc add dev eth0 root handle 1: htb default 1\n");
    for i in 1..=2000u32 {
        s += &format!("tc class add dev eth0 parent {i:x}: classid {i:x}:1 htb rate 1mbit\n");
        s += &format!("tc qdisc add dev eth0 parent {i:x}:1 handle {:x}: htb default 1\n", i + 1);
    }
    let st = load(&s);
    assert_eq!(st.devices[0].qdisc_depth(usize::MAX), 2001);
    let e = build_device(&st, "eth0").err().expect("refused").to_string();
    assert!(e.contains("nested more than 256 deep"), "{e}");
    let shallow = load("tc qdisc add dev eth0 root handle 1: htb default 1\ntc class add dev eth0 parent 1: classid 1:1 htb rate 1mbit\ntc qdisc add dev eth0 parent 1:1 handle 2: pfifo\n");
    assert_eq!(shallow.devices[0].qdisc_depth(usize::MAX), 2);
    assert!(build_device(&shallow, "eth0").is_ok());
}
