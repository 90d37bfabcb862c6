//! Classification cost per packet: u32 through a linked hash table, flow hash over five keys,
//! and the full tree walk (HTB root → inner class → per-host flow filter).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_core::classify::{ClassShape, Classifier, Fallback, QdiscShape, ShapeKind};
use sluice_core::filter::u32::{HashKey, U32Config, U32Selector};
use sluice_core::filter::{ClassifyInput, FilterConfig, FilterList, FilterSpec, FlowConfig, Upsert};
use sluice_core::flow_keys::{FlowKeys, HeaderKeys};
use sluice_core::{Handle, Packet, Time};
use std::net::{IpAddr, Ipv4Addr};

fn frame() -> (Vec<u8>, FlowKeys, Packet) {
    let mut f = vec![0u8; 14 + 20 + 20];
    f[12] = 0x08;
    f[14] = 0x45;
    f[14 + 9] = 6;
    f[14 + 12..14 + 16].copy_from_slice(&[198, 18, 0, 1]);
    f[14 + 16..14 + 20].copy_from_slice(&[198, 19, 0, 1]);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&22u16.to_be_bytes());
    let hk = HeaderKeys {
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)),
        proto: 6,
        src_port: 40000,
        dst_port: 22,
        dsfield: 0,
    };
    let keys = FlowKeys {
        ethertype: 0x0800,
        outer: Some(hk),
        network_offset: 14,
        transport_offset: Some(34),
        ..Default::default()
    };
    let pkt = Packet::new(f.len() as u32, 0);
    (f, keys, pkt)
}

fn h(s: &str) -> Handle {
    Handle::parse(s).unwrap()
}

fn u32_list() -> FilterList {
    let mut l = FilterList::new();
    let t = FilterConfig::U32(U32Config { divisor: Some(256), ..Default::default() });
    l.apply(FilterSpec { handle: Some(2 << 20), ..FilterSpec::new(1, t) }, Upsert::Add, 1).unwrap();
    for port in [21u16, 22, 25, 80, 443] {
        let mut s = U32Selector::new();
        s.l4_dst(port, 0xffff).unwrap();
        let c =
            U32Config { ht: Some(2 << 20 | 6 << 12), sel: s, classid: Some(h("1:10")), ..Default::default() };
        l.apply(FilterSpec::new(1, FilterConfig::U32(c)), Upsert::Add, 1).unwrap();
    }
    let mut s = U32Selector::new();
    s.hashkey = Some(HashKey { mask: 0x00ff_0000, at: 8 });
    s.ipv4_nexthdr_offset(false);
    let link = U32Config { sel: s, link: Some(2 << 20), ..Default::default() };
    l.apply(FilterSpec::new(1, FilterConfig::U32(link)), Upsert::Add, 1).unwrap();
    l
}

fn bench(c: &mut Criterion) {
    let (f, keys, pkt) = frame();
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(1));
    let mut l = u32_list();
    g.bench_function("u32_linked_table", |b| {
        b.iter(|| l.classify(black_box(&ClassifyInput::new(&pkt, &keys, &f)), Time::ZERO))
    });
    let mut fl = FilterList::new();
    let cfg = FlowConfig::hash("src,dst,proto,proto-src,proto-dst", 1024, None).unwrap();
    fl.apply(FilterSpec::new(1, FilterConfig::Flow(cfg)), Upsert::Add, 1).unwrap();
    g.bench_function("flow_hash_5_keys", |b| {
        b.iter(|| fl.classify(black_box(&ClassifyInput::new(&pkt, &keys, &f)), Time::ZERO))
    });
    let mut cl = Classifier::new();
    cl.set_root(Some(h("1:")));
    let mut classes = vec![ClassShape { classid: h("1:1"), inner: true, child: None }];
    classes.extend((0..1024u32).map(|i| ClassShape {
        classid: Handle::new(1, 0x10 + i),
        inner: false,
        child: None,
    }));
    cl.set_shape(QdiscShape {
        handle: h("1:"),
        kind: ShapeKind::Htb,
        classes,
        fallback: Fallback::Class(h("1:0")),
    })
    .unwrap();
    // Root sends everything to inner 1:1, whose flow filter picks one of 1024 per-host leaves.
    let to_inner = FilterConfig::Matchall(sluice_core::filter::MatchallConfig {
        classid: Some(h("1:1")),
        actions: Default::default(),
    });
    cl.add_filter(h("1:"), FilterSpec::new(1, to_inner), Upsert::Add).unwrap();
    let per_host = FlowConfig::hash("src", 1024, Some(h("1:10"))).unwrap();
    cl.add_filter(h("1:1"), FilterSpec::new(1, FilterConfig::Flow(per_host)), Upsert::Add).unwrap();
    g.bench_function("tree_walk_per_host", |b| {
        b.iter(|| {
            let mut p = pkt;
            cl.classify(black_box(&mut p), &keys, &f, Time::ZERO);
            p.class_for(1)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
