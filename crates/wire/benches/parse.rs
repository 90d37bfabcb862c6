//! Parser throughput: a minimum-size UDP frame and an IPIP-tunnelled TCP frame.
//!
//! Run: `cargo bench -p sluice-wire --bench parse`

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_wire::{parse_frame, FrameSpec, GreOptions, ParseOptions, Tunnel, TunnelKind, L4};
use std::net::{IpAddr, Ipv4Addr};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, last))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse_frame");
    g.throughput(Throughput::Elements(1));

    // 14 Ethernet + 20 IPv4 + 8 UDP + 22 payload = 64 bytes (a minimum frame without FCS is 60).
    let udp = FrameSpec::udp(v4(1), v4(2), 40_000, 53, 22).build().unwrap();
    assert_eq!(udp.len(), 64);
    g.bench_function("udp_64B", |b| b.iter(|| parse_frame(black_box(&udp), ParseOptions::default())));

    let mut spec = FrameSpec::udp(v4(1), v4(2), 40_000, 22, 1400);
    spec.proto = L4::Tcp;
    spec.tunnel =
        Some(Tunnel { kind: TunnelKind::Ipip, src: v4(101), dst: v4(102), gre: GreOptions::default() });
    let ipip = spec.build().unwrap();
    assert!(parse_frame(&ipip, ParseOptions::default()).unwrap().keys.inner.is_some());
    g.bench_function("ipip_tcp_1474B", |b| b.iter(|| parse_frame(black_box(&ipip), ParseOptions::default())));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
