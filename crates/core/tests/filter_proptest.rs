//! Property: classification never panics, whatever the frame, keys and packet fields, and an
//! enqueued packet always has a valid class for the HTB root (a known leaf or the direct queue).

use proptest::prelude::*;
use sluice_core::classify::{ClassShape, Classifier, ClassifyOutcome, Fallback, QdiscShape, ShapeKind};
use sluice_core::filter::u32::{HashKey, U32Config, U32Offset, U32Selector, VarOffset};
use sluice_core::filter::{
    Action, Actions, DsfieldConfig, FilterConfig, FilterSpec, FlowConfig, FwConfig, Police, PoliceConfig,
    Protocol, Upsert, Verdict,
};
use sluice_core::flow_keys::{FlowKeys, HeaderKeys};
use sluice_core::{Handle, Packet, Rate, Span, Time};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn h(s: &str) -> Handle {
    Handle::parse(s).unwrap()
}

fn classifier() -> Classifier {
    let mut c = Classifier::new();
    c.set_root(Some(h("1:")));
    let leaf = |s: &str, child: Option<Handle>| ClassShape { classid: h(s), inner: false, child };
    c.set_shape(QdiscShape {
        handle: h("1:"),
        kind: ShapeKind::Htb,
        classes: vec![
            ClassShape { classid: h("1:1"), inner: true, child: None },
            leaf("1:10", Some(h("10:"))),
            leaf("1:20", None),
            leaf("1:30", None),
        ],
        fallback: Fallback::Class(h("1:30")),
    })
    .unwrap();
    c.set_shape(QdiscShape {
        handle: h("10:"),
        kind: ShapeKind::Bands,
        classes: vec![leaf("10:1", None), leaf("10:2", None), leaf("10:3", None)],
        fallback: Fallback::Priomap([h("10:2"); 16]),
    })
    .unwrap();
    // u32 with a hash table linked through a variable offset, negative offsets and nexthdr.
    let t = FilterConfig::U32(U32Config { divisor: Some(16), ..Default::default() });
    c.add_filter(h("1:"), FilterSpec { handle: Some(0x2 << 20), ..FilterSpec::new(1, t) }, Upsert::Add)
        .unwrap();
    for b in 0..16u32 {
        let mut s = U32Selector::new();
        s.l4_dst(b as u16, 0x000f).unwrap();
        s.add_u16(0x0800, 0xffff, -2, false).unwrap();
        let cls = if b % 2 == 0 { "1:1" } else { "1:77" };
        let cfg =
            U32Config { ht: Some(0x2 << 20 | b << 12), sel: s, classid: Some(h(cls)), ..Default::default() };
        c.add_filter(h("1:"), FilterSpec::new(1, FilterConfig::U32(cfg)), Upsert::Add).unwrap();
    }
    let mut s = U32Selector::new();
    s.hashkey = Some(HashKey { mask: 0x0000_0f00, at: 8 });
    s.offset =
        Some(U32Offset { plus: Some(-4), var: Some(VarOffset { at: 0, mask: 0x0f00, shift: 6 }), eat: true });
    c.add_filter(
        h("1:"),
        FilterSpec::new(
            1,
            FilterConfig::U32(U32Config { sel: s, link: Some(0x2 << 20), ..Default::default() }),
        ),
        Upsert::Add,
    )
    .unwrap();
    // Police with goto/reclassify/continue, fw, dsfield and flow at the inner class.
    let police = Police::new(PoliceConfig {
        rate: Some(Rate::from_bps(1_000_000)),
        burst: 3000,
        exceed: Verdict::Reclassify,
        conform: Verdict::GotoChain(3),
        ..Default::default()
    })
    .unwrap();
    let fw = FilterConfig::Fw(FwConfig {
        mask: Some(0xf),
        classid: Some(h("1:20")),
        actions: Actions::new(vec![Action::Police(police)]),
        indev: None,
    });
    c.add_filter(h("1:"), FilterSpec { handle: Some(3), ..FilterSpec::new(2, fw) }, Upsert::Add).unwrap();
    let ds = FilterConfig::Dsfield(DsfieldConfig {
        value: 0x20,
        mask: 0xe0,
        classid: Some(h("1:10")),
        actions: Actions::none(),
    });
    c.add_filter(h("1:"), FilterSpec { chain: 3, ..FilterSpec::new(1, ds) }, Upsert::Add).unwrap();
    let every = "src,dst,proto,proto-src,proto-dst,iif,priority,mark,nfct,nfct-src,nfct-dst,nfct-proto-src,\
                 nfct-proto-dst,rt-classid,sk-uid,sk-gid,vlan-tag,rxhash,tunnel-src,tunnel-dst,tunnel-proto,\
                 tunnel-proto-src,tunnel-proto-dst";
    let flow = FlowConfig {
        perturb: Some(Span::from_millis(3)),
        legacy_proto_ports: true,
        ..FlowConfig::hash(every, 3, Some(h("1:10"))).unwrap()
    };
    c.add_filter(
        h("1:1"),
        FilterSpec { protocol: Protocol::IP, ..FilterSpec::new(1, FilterConfig::Flow(flow)) },
        Upsert::Add,
    )
    .unwrap();
    let map = FlowConfig {
        rshift: 31,
        addend: u32::MAX,
        divisor: 7,
        ..FlowConfig::map(sluice_core::filter::FlowKey::Dst)
    };
    c.add_filter(h("10:"), FilterSpec::new(1, FilterConfig::Flow(map)), Upsert::Add).unwrap();
    c
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        any::<[u8; 16]>().prop_map(|a| IpAddr::V6(Ipv6Addr::from(a))),
    ]
}

fn header() -> impl Strategy<Value = HeaderKeys> {
    (ip(), ip(), any::<u8>(), any::<u16>(), any::<u16>(), any::<u8>()).prop_map(
        |(src, dst, proto, src_port, dst_port, dsfield)| HeaderKeys {
            src,
            dst,
            proto,
            src_port,
            dst_port,
            dsfield,
        },
    )
}

fn keys() -> impl Strategy<Value = FlowKeys> {
    (
        prop_oneof![Just(0x0800u16), Just(0x86DD), any::<u16>()],
        proptest::option::of(any::<u16>()),
        proptest::option::of(header()),
        proptest::option::of(header()),
        any::<u16>(),
        proptest::option::of(any::<u16>()),
        any::<u32>(),
    )
        .prop_map(|(ethertype, vlan_tci, outer, inner, network_offset, transport_offset, iif)| {
            FlowKeys {
                ethertype,
                vlan_tci,
                outer,
                inner,
                network_offset: network_offset % 80,
                transport_offset,
                iif,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn classify_never_panics(
        packets in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..120), keys(), any::<u32>(), any::<u32>(), any::<u8>(), 1u32..70_000, 0u64..5_000_000),
            1..12,
        )
    ) {
        let mut c = classifier();
        let mut now = Time::ZERO;
        for (mut frame, keys, mark, priority, dsfield, len, dt) in packets {
            // Make the link-table branch reachable often: an IPv4 EtherType before the header.
            let off = keys.network_offset as usize;
            if off >= 2 && frame.len() >= off {
                frame[off - 2] = 0x08;
                frame[off - 1] = 0x00;
            }
            let mut pkt = Packet::new(len, 0);
            pkt.mark = mark;
            pkt.priority = priority;
            pkt.dsfield = dsfield;
            now += Span::from_nanos(dt);
            match c.classify(&mut pkt, &keys, &frame, now) {
                ClassifyOutcome::Drop => {}
                ClassifyOutcome::Redirect(_) => panic!("no mirred here"),
                ClassifyOutcome::Enqueue => {
                    // No result means "the qdisc's own fallback"; a result is always a class
                    // the qdisc has (or 1:, its direct queue), and only 1: and 10: get results.
                    let root = pkt.class_for(1);
                    let known = ["1:", "1:10", "1:20", "1:30"].map(h);
                    prop_assert!(root.is_none_or(|r| known.contains(&r)), "{:?}", root);
                    let band = pkt.class_for(0x10);
                    prop_assert!(band.is_none() || root == Some(h("1:10")), "{:?} {:?}", root, band);
                    for c in pkt.class_path.iter().filter(|c| !c.is_unspec()) {
                        prop_assert!(c.major() == 1 || c.major() == 0x10, "{:?}", c);
                    }
                }
            }
        }
    }
}
