//! Engine throughput: 10 Gbit/s of 1514-byte frames through one exact class.
//! `cargo bench -p sluice-sim --bench engine`. The end-to-end figure for BENCHMARKS.md is
//! `sluice simulate speed --set duration=60s` (release), which prints events/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_core::{Handle, Rate, Span, WireSpec};
use sluice_sim::model::*;
use sluice_sim::shaper::ExactShaper;
use sluice_sim::Sim;

fn spec(ms: u64) -> SimSpec {
    let class = Handle::new(1, 1);
    let mut f = FlowSpec::new("cbr", "a", TrafficSpec::Cbr { rate: Rate::from_bps(9_900_000_000) });
    f.priority = class.to_tc().unwrap(); // the sending host names the class (skb->priority)
    SimSpec {
        duration: Span::from_millis(ms),
        warmup: Span::ZERO,
        step: Span::from_millis(100),
        seed: 1,
        forward: vec![LinkSpec {
            name: "nic".into(),
            rate: Some(Rate::from_bps(10_000_000_000)),
            delay: Span::ZERO,
            overhead: 0,
            queue: queue(|| {
                Box::new(ExactShaper::new(Rate::from_bps(10_000_000_000), 16000, WireSpec::default(), 1000))
            }),
            is_shaper: true,
            receive: None,
        }],
        reverse: vec![],
        classes: vec![ClassSpec {
            id: class,
            rate: Rate::from_bps(10_000_000_000),
            ceil: Rate::from_bps(10_000_000_000),
        }],
        default_class: None,
        shaper_wire: WireSpec::default(),
        flows: vec![f],
        series: false,
        profile: false,
    }
}

fn bench(c: &mut Criterion) {
    let s = spec(100);
    let mut probe = Sim::new(&s);
    probe.run(&mut |_| {});
    let events = probe.engine_stats().events;
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(events));
    g.bench_function("10gbit_cbr_100ms", |b| {
        b.iter(|| {
            let mut sim = Sim::new(&s);
            sim.run(&mut |_| {});
            sim.engine_stats().events
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
