//! The classification stage: the walk through an HTB tree into a prio child, direct/default
//! fallbacks, skb->priority, police verdicts, chains, reclassify, fw, matchall and dsfield.

mod filter_support;

use filter_support::{v4, v4_opts, L4};
use sluice_core::classify::{ClassShape, Classifier, ClassifyOutcome, Fallback, QdiscShape, ShapeKind};
use sluice_core::filter::u32::{U32Config, U32Selector};
use sluice_core::filter::{
    Action, Actions, DsfieldConfig, FilterConfig, FilterSpec, FwConfig, MatchallConfig, Police, PoliceConfig,
    TcfOutcome, Upsert, Verdict,
};
use sluice_core::{Handle, Rate, Time};
use std::net::Ipv4Addr;

fn h(s: &str) -> Handle {
    Handle::parse(s).unwrap()
}

fn leaf(c: &str) -> ClassShape {
    ClassShape { classid: h(c), inner: false, child: None }
}

/// HTB 1: with inner 1:1 (children 1:10, 1:20, 1:30 default), prio 10: under 1:10.
fn tree() -> Classifier {
    let mut c = Classifier::new();
    c.set_root(Some(h("1:")));
    c.set_shape(QdiscShape {
        handle: h("1:"),
        kind: ShapeKind::Htb,
        classes: vec![
            ClassShape { classid: h("1:1"), inner: true, child: None },
            ClassShape { classid: h("1:10"), inner: false, child: Some(h("10:")) },
            leaf("1:20"),
            leaf("1:30"),
        ],
        fallback: Fallback::Class(h("1:30")),
    })
    .unwrap();
    let mut priomap = [h("10:2"); 16];
    priomap[6] = h("10:1");
    c.set_shape(QdiscShape {
        handle: h("10:"),
        kind: ShapeKind::Bands,
        classes: vec![leaf("10:1"), leaf("10:2"), leaf("10:3")],
        fallback: Fallback::Priomap(priomap),
    })
    .unwrap();
    c
}

fn u32_dst(dst: [u8; 4], len: u8, classid: &str) -> FilterConfig {
    let mut s = U32Selector::new();
    s.ip_dst(Ipv4Addr::from(dst), len).unwrap();
    FilterConfig::U32(U32Config { sel: s, classid: Some(h(classid)), ..Default::default() })
}

fn u32_sport(port: u16, classid: &str) -> FilterConfig {
    let mut s = U32Selector::new();
    s.ip_sport(port, 0xffff).unwrap();
    FilterConfig::U32(U32Config { sel: s, classid: Some(h(classid)), ..Default::default() })
}

fn outcome(c: &mut Classifier, b: &mut filter_support::Built) -> ClassifyOutcome {
    c.classify(&mut b.pkt, &b.keys, &b.frame, Time::ZERO)
}

#[test]
fn walks_inner_class_filters_then_the_child_qdisc() {
    let mut c = tree();
    // Root: everything to 198.19/16 goes to inner class 1:1.
    c.add_filter(h("1:"), FilterSpec::new(1, u32_dst([198, 19, 0, 0], 16, "1:1")), Upsert::Add).unwrap();
    // 1:1's own filters pick the leaf by source port.
    c.add_filter(h("1:1"), FilterSpec::new(1, u32_sport(1000, "1:10")), Upsert::Add).unwrap();
    c.add_filter(h("1:1"), FilterSpec::new(2, u32_sport(2000, "1:20")), Upsert::Add).unwrap();
    // prio 10: under 1:10 picks band 3 for UDP.
    let mut s = U32Selector::new();
    s.ip_protocol(17, 0xff).unwrap();
    let udp = FilterConfig::U32(U32Config { sel: s, classid: Some(h("10:3")), ..Default::default() });
    c.add_filter(h("10:"), FilterSpec::new(1, udp), Upsert::Add).unwrap();

    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(1000, 53));
    assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Enqueue);
    assert_eq!(b.pkt.class_for(1), Some(h("1:10")));
    assert_eq!(b.pkt.class_for(0x10), Some(h("10:3")));

    // TCP in 1:10: prio's filters do not match, so nothing is recorded for 10: and prio applies
    // its own priomap (with its TOS-derived priority).
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(1000, 80));
    b.pkt.priority = 6;
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:10")));
    assert_eq!(b.pkt.class_for(0x10), None);

    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(2000, 80));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
    assert_eq!(b.pkt.class_for(0x10), None, "1:20 has no child qdisc");

    // Inner class chosen but its filters do not match: HTB's default.
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(3000, 80));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB's default");
    // No root match at all: default too.
    let mut b = v4([198, 18, 0, 1], [198, 18, 0, 2], L4::Tcp(1000, 80));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB's default");
    // Stale results from an earlier pass are cleared.
    assert_eq!(b.pkt.class_for(0x10), None);
    assert!(c.references_class(h("1:20")));
    assert!(!c.references_class(h("1:30")));
}

#[test]
fn direct_unknown_and_priority() {
    let mut c = tree();
    c.add_filter(h("1:"), FilterSpec::new(1, u32_dst([198, 19, 0, 1], 32, "1:0")), Upsert::Add).unwrap();
    c.add_filter(h("1:"), FilterSpec::new(2, u32_dst([198, 19, 0, 2], 32, "1:77")), Upsert::Add).unwrap();
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(1, 2));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:0")), "X:0 is the direct queue");
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 2], L4::Udp(1, 2));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "unknown class: HTB applies its default");
    // skb->priority naming a leaf wins over filters; naming the qdisc means direct.
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(1, 2));
    b.pkt.priority = h("1:20").to_tc().unwrap();
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
    let mut b = v4([198, 18, 0, 1], [198, 19, 0, 2], L4::Udp(1, 2));
    b.pkt.priority = h("1:").to_tc().unwrap();
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:0")));
    // priority naming a prio band selects it inside prio.
    let mut b = v4([198, 18, 0, 1], [198, 18, 0, 9], L4::Udp(1, 2));
    b.pkt.priority = h("1:10").to_tc().unwrap();
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:10")));
    assert_eq!(b.pkt.class_for(0x10), None, "prio's own priomap decides");
}

fn police(rate_bps: u64, burst: u64, exceed: Verdict, conform: Verdict) -> Action {
    Action::Police(
        Police::new(PoliceConfig {
            rate: Some(Rate::from_bps(rate_bps)),
            burst,
            exceed,
            conform,
            ..Default::default()
        })
        .unwrap(),
    )
}

#[test]
fn police_drop_counts_exceed_and_drops_under_a_deterministic_clock() {
    let mut c = tree();
    // 80 kbit/s = 10 kB/s, burst 3000 B: three 1000-byte packets pass at once, then one per 100 ms.
    let m = FilterConfig::Matchall(MatchallConfig {
        classid: Some(h("1:20")),
        actions: Actions::new(vec![police(80_000, 3000, Verdict::Drop, Verdict::Ok)]),
    });
    c.add_filter(h("1:"), FilterSpec::new(1, m), Upsert::Add).unwrap();
    let mut passed = 0;
    let mut dropped = 0;
    // 100 packets of 1000 B (frame padded), every 10 ms for one second.
    for i in 0..100u64 {
        let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Raw(253, 1000 - 34));
        assert_eq!(b.pkt.len, 1000);
        match c.classify(&mut b.pkt, &b.keys, &b.frame, Time::from_millis(10 * i)) {
            ClassifyOutcome::Enqueue => {
                assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
                passed += 1
            }
            ClassifyOutcome::Drop => dropped += 1,
            ClassifyOutcome::Redirect(_) => panic!("no mirred here"),
        }
    }
    // Tokens: 3000 B at t=0 plus 10 B/ms for 990 ms = 12900 B: 12 packets.
    assert_eq!(passed, 12);
    assert_eq!(dropped, 88);
    let list = c.filters(h("1:")).unwrap();
    let sluice_core::filter::TpKind::Matchall(m) = &list.tps()[0].kind else { panic!() };
    let stats = m.elem.as_ref().unwrap().1.actions.slots()[0].stats;
    assert_eq!((stats.packets, stats.overlimits, stats.drops), (100, 88, 88));
    assert_eq!(m.hits, 100);
}

#[test]
fn police_continue_hands_excess_to_the_next_filter() {
    let mut c = tree();
    let first = FilterConfig::Matchall(MatchallConfig {
        classid: Some(h("1:20")),
        actions: Actions::new(vec![police(8_000, 1000, Verdict::Continue, Verdict::Ok)]),
    });
    c.add_filter(h("1:"), FilterSpec::new(1, first), Upsert::Add).unwrap();
    let second =
        FilterConfig::Matchall(MatchallConfig { classid: Some(h("1:10")), actions: Actions::none() });
    c.add_filter(h("1:"), FilterSpec::new(2, second), Upsert::Add).unwrap();
    let mut classes = Vec::new();
    for _ in 0..3 {
        let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Raw(253, 1000 - 34));
        assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Enqueue);
        classes.push(b.pkt.class_for(1).unwrap());
    }
    assert_eq!(classes, [h("1:20"), h("1:10"), h("1:10")]);
}

#[test]
fn reclassify_loop_is_bounded_and_drops() {
    let mut c = tree();
    let m = FilterConfig::Matchall(MatchallConfig {
        classid: Some(h("1:20")),
        actions: Actions::new(vec![police(8_000, 1000, Verdict::Reclassify, Verdict::Ok)]),
    });
    c.add_filter(h("1:"), FilterSpec::new(1, m), Upsert::Add).unwrap();
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Raw(253, 1000 - 34));
    assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Enqueue);
    // The second packet exceeds; reclassify restarts at chain 0 where it exceeds again, until the
    // loop limit drops it (kernel: "reclassify loop").
    assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Drop);
}

#[test]
fn goto_chain_continues_in_another_chain() {
    let mut c = tree();
    let jump = FilterConfig::Matchall(MatchallConfig {
        classid: None,
        actions: Actions::new(vec![Action::Gact(Verdict::GotoChain(7))]),
    });
    c.add_filter(h("1:"), FilterSpec::new(1, jump), Upsert::Add).unwrap();
    c.add_filter(
        h("1:"),
        FilterSpec { chain: 7, ..FilterSpec::new(5, u32_dst([2, 2, 2, 2], 32, "1:20")) },
        Upsert::Add,
    )
    .unwrap();
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
    let mut b = v4([1, 1, 1, 1], [3, 3, 3, 3], L4::Udp(1, 2));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "nothing matched in chain 7: default");
    // Chain-7 filters are not run from chain 0.
    c.delete_filter(h("1:"), 0, Some(1), None).unwrap();
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB's default");
}

#[test]
fn gact_drop_and_ok_and_pipe() {
    let mut c = tree();
    let drop = FilterConfig::U32(U32Config {
        sel: {
            let mut s = U32Selector::new();
            s.ip_dst(Ipv4Addr::new(9, 9, 9, 9), 32).unwrap();
            s
        },
        actions: Actions::new(vec![Action::Gact(Verdict::Drop)]),
        ..Default::default()
    });
    c.add_filter(h("1:"), FilterSpec::new(1, drop), Upsert::Add).unwrap();
    let pipe = FilterConfig::Matchall(MatchallConfig {
        classid: Some(h("1:20")),
        actions: Actions::new(vec![Action::Gact(Verdict::Pipe), Action::Gact(Verdict::Pipe)]),
    });
    c.add_filter(h("1:"), FilterSpec::new(2, pipe), Upsert::Add).unwrap();
    let mut b = v4([1, 1, 1, 1], [9, 9, 9, 9], L4::Udp(1, 2));
    assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Drop);
    let mut b = v4([1, 1, 1, 1], [9, 9, 9, 8], L4::Udp(1, 2));
    assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Enqueue);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")), "pipe at the end of the list is ok");
}

#[test]
fn fw_marks_with_mask_and_old_method() {
    let mut c = tree();
    let fw = |cls: &str| {
        FilterConfig::Fw(FwConfig { mask: Some(0xff), classid: Some(h(cls)), ..Default::default() })
    };
    c.add_filter(h("1:"), FilterSpec { handle: Some(5), ..FilterSpec::new(1, fw("1:20")) }, Upsert::Add)
        .unwrap();
    c.add_filter(h("1:"), FilterSpec { handle: Some(6), ..FilterSpec::new(1, fw("1:10")) }, Upsert::Add)
        .unwrap();
    // Same priority, other mask: refused.
    let other =
        FilterConfig::Fw(FwConfig { mask: Some(0xf), classid: Some(h("1:20")), ..Default::default() });
    assert!(c
        .add_filter(h("1:"), FilterSpec { handle: Some(7), ..FilterSpec::new(1, other) }, Upsert::Add)
        .is_err());
    assert!(c
        .add_filter(h("1:"), FilterSpec { handle: Some(5), ..FilterSpec::new(1, fw("1:10")) }, Upsert::Add)
        .is_err());
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    b.pkt.mark = 0x1205; // masked to 5
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
    b.pkt.mark = 0x07;
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB's default");
    // Replace changes the class of mark 5.
    c.add_filter(h("1:"), FilterSpec { handle: Some(5), ..FilterSpec::new(1, fw("1:10")) }, Upsert::Replace)
        .unwrap();
    b.pkt.mark = 5;
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:10")));
    assert!(c
        .add_filter(h("1:"), FilterSpec { handle: Some(9), ..FilterSpec::new(1, fw("1:10")) }, Upsert::Change)
        .is_err());

    // Old method: an fw priority without elements uses the mark as the class id.
    let mut c = tree();
    c.add_filter(h("1:"), FilterSpec::new(1, FilterConfig::Fw(FwConfig::default())), Upsert::Add).unwrap();
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    b.pkt.mark = h("1:20").to_tc().unwrap();
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), Some(h("1:20")));
    b.pkt.mark = h("2:20").to_tc().unwrap(); // other qdisc's major: ignored
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB's default");
}

#[test]
fn dsfield_match_ignores_ecn_with_mask() {
    let mut c = tree();
    let ef = FilterConfig::Dsfield(DsfieldConfig {
        value: 0xb8,
        mask: 0xfc,
        classid: Some(h("1:10")),
        actions: Actions::none(),
    });
    c.add_filter(h("1:"), FilterSpec::new(1, ef), Upsert::Add).unwrap();
    assert!(c
        .add_filter(
            h("1:"),
            FilterSpec::new(
                2,
                FilterConfig::Dsfield(DsfieldConfig { value: 3, mask: 0xfc, ..Default::default() })
            ),
            Upsert::Add
        )
        .is_err());
    for (tos, want) in
        [(0xb8, Some("1:10")), (0xb9, Some("1:10")), (0xbb, Some("1:10")), (0x00, None), (0xa0, None)]
    {
        let mut b = v4_opts([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2), tos, 0, None);
        outcome(&mut c, &mut b);
        assert_eq!(b.pkt.class_for(1), want.map(h), "tos {tos:#x}");
    }
}

#[test]
fn matchall_is_one_per_priority_and_ingress_parent_is_standalone() {
    let mut c = Classifier::new();
    let m = |cls: &str| {
        FilterConfig::Matchall(MatchallConfig { classid: Some(h(cls)), actions: Actions::none() })
    };
    c.add_filter(Handle::INGRESS, FilterSpec::new(1, m("1:1")), Upsert::Add).unwrap();
    assert!(c.add_filter(Handle::INGRESS, FilterSpec::new(1, m("1:2")), Upsert::Add).is_err());
    let b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    assert_eq!(
        c.classify_at(Handle::INGRESS, &b.pkt, &b.keys, &b.frame, Time::ZERO),
        TcfOutcome::Classified(sluice_core::filter::FilterResult { classid: h("1:1") })
    );
    assert!(
        c.add_filter(Handle::ROOT, FilterSpec::new(1, m("1:1")), Upsert::Add).is_err(),
        "no root qdisc yet"
    );
    c.delete_filter(Handle::INGRESS, 0, Some(1), None).unwrap();
    assert!(c.filters(Handle::INGRESS).is_none());
}

/// Seed 003's composition at the classifier level: HTB classes chosen by
/// `flow hash keys src divisor N baseclass 1:10` on the root, with a (classless) fq_codel under
/// each class. HostA's three bulk flows share one class; HostB's flow has another.
#[test]
fn per_host_composition_picks_one_htb_class_per_host() {
    let n = 16u32;
    let mut c = Classifier::new();
    c.set_root(Some(h("1:")));
    let mut classes = vec![ClassShape { classid: h("1:1"), inner: true, child: None }];
    classes.extend((0..n).map(|i| ClassShape {
        classid: Handle::new(1, 0x10 + i),
        inner: false,
        child: None,
    }));
    c.set_shape(QdiscShape {
        handle: h("1:"),
        kind: ShapeKind::Htb,
        classes,
        fallback: Fallback::Class(h("1:10")),
    })
    .unwrap();
    let flow = sluice_core::filter::FlowConfig::hash("src", n, Some(h("1:10"))).unwrap();
    c.add_filter(h("1:"), FilterSpec::new(1, FilterConfig::Flow(flow)), Upsert::Add).unwrap();
    let mut class_of = |src: [u8; 4], l4: L4| {
        let mut b = v4(src, [198, 19, 0, 1], l4);
        assert_eq!(outcome(&mut c, &mut b), ClassifyOutcome::Enqueue);
        b.pkt.class_for(1).unwrap()
    };
    let host_a = [198, 18, 0, 10];
    let host_b = [198, 18, 0, 11];
    let a: Vec<Handle> = (0..3).map(|i| class_of(host_a, L4::Tcp(40000 + i, 22))).collect();
    let b = class_of(host_b, L4::Tcp(50000, 22));
    assert!(a.iter().all(|x| *x == a[0]), "{a:?}");
    assert!((0x10..0x10 + n).contains(&a[0].minor()) && (0x10..0x10 + n).contains(&b.minor()));
    // With 16 buckets two hosts can collide (1 in 16); these two do not, and across 16 hosts
    // the classes are spread.
    assert_ne!(a[0], b);
    let spread: std::collections::HashSet<Handle> =
        (0..16u8).map(|i| class_of([198, 18, 1, i], L4::Udp(1, 2))).collect();
    assert!(spread.len() >= 8, "16 hosts used only {} of 16 classes", spread.len());
}

/// The walk follows a fallback it does not record: HTB's default class 1:30 has a prio 30:
/// below it whose filters still run. A prio result naming no band is recorded as is (prio maps
/// it to priomap[0] itself) and the walk follows priomap[0].
#[test]
fn fallback_is_followed_but_not_recorded() {
    let mut c = Classifier::new();
    c.set_root(Some(h("1:")));
    c.set_shape(QdiscShape {
        handle: h("1:"),
        kind: ShapeKind::Htb,
        classes: vec![leaf("1:10"), ClassShape { classid: h("1:30"), inner: false, child: Some(h("30:")) }],
        fallback: Fallback::Class(h("1:30")),
    })
    .unwrap();
    let mut priomap = [h("30:2"); 16];
    priomap[0] = h("30:1");
    c.set_shape(QdiscShape {
        handle: h("30:"),
        kind: ShapeKind::Bands,
        classes: vec![ClassShape { classid: h("30:1"), inner: false, child: Some(h("40:")) }, leaf("30:2")],
        fallback: Fallback::Priomap(priomap),
    })
    .unwrap();
    c.add_filter(h("1:"), FilterSpec::new(1, u32_dst([9, 9, 9, 9], 32, "1:10")), Upsert::Add).unwrap();
    // prio's filter answers with the *other qdisc's* major and a band number: only the minor counts.
    c.add_filter(h("30:"), FilterSpec::new(1, u32_sport(7, "1:2")), Upsert::Add).unwrap();
    c.add_filter(h("30:"), FilterSpec::new(2, u32_sport(8, "30:9")), Upsert::Add).unwrap();
    let m = FilterConfig::Matchall(MatchallConfig { classid: Some(h("40:5")), actions: Actions::none() });
    c.add_filter(h("40:"), FilterSpec::new(1, m), Upsert::Add).unwrap();

    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(7, 1));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(1), None, "HTB default, applied by HTB");
    assert_eq!(b.pkt.class_for(0x30), Some(h("30:2")), "band from the minor, recorded under 30:");
    assert_eq!(b.pkt.class_for(0x40), None);

    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(8, 1));
    outcome(&mut c, &mut b);
    assert_eq!(b.pkt.class_for(0x30), Some(h("30:9")), "no such band: prio decides (priomap[0])");
    assert_eq!(b.pkt.class_for(0x40), Some(h("40:5")), "the walk followed priomap[0] = 30:1 into 40:");
}
