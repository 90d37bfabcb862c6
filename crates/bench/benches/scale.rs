//! Criterion benches of the per-packet cost at scale: HTB with 1k/10k/100k leaves at 10%
//! backlogged (Sluice and the naive reference), the throttled worst case, fq_codel and the full
//! frame path. `sluice bench` prints the same cases with p50/p99 and memory per class.
//!
//! Run: `cargo bench -p sluice-bench --bench scale`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice_bench::cases::FullPath;
use sluice_bench::driver::{Driver, Traffic};
use sluice_bench::{Scheduler, TreeSpec};
use sluice_core::fq_codel::{FqCodel, FqCodelConfig};
use sluice_core::{Packet, Span};

fn htb(c: &mut Criterion) {
    let mut g = c.benchmark_group("htb_pkt");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    for &(n, which, throttled) in &[
        (1_000usize, Scheduler::Sluice, false),
        (10_000, Scheduler::Sluice, false),
        (100_000, Scheduler::Sluice, false),
        (100_000, Scheduler::Sluice, true),
        (1_000, Scheduler::Reference, false),
        (10_000, Scheduler::Reference, false),
    ] {
        let n_active = n / 10;
        let spec = TreeSpec::new(n, n_active, throttled);
        let mut q = spec.build(which).unwrap();
        let active = spec.active_leaves(n_active);
        let pkt_time = spec.link.time_to_send(spec.pkt_len as u64);
        let packet = |i| spec.packet(i);
        let mut d = Driver::new(q.as_mut(), Traffic { packet: &packet, pkt_time }, &active, 2);
        d.run(2 * n_active + 1024);
        let name = format!("{}{}", which.name(), if throttled { "-throttled" } else { "" });
        g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| b.iter(|| d.step()));
    }
    g.finish();
}

fn fq_codel(c: &mut Criterion) {
    let mut g = c.benchmark_group("fq_codel_pkt");
    g.throughput(Throughput::Elements(1));
    for flows in [1024usize, 65_536] {
        let cfg = FqCodelConfig {
            flows: flows as u32,
            limit: 1 << 22,
            memory_limit: u32::MAX,
            ..Default::default()
        };
        let mut q = FqCodel::new(cfg).unwrap();
        let packet = |i: usize| {
            let mut p = Packet::new(1000, i as u64);
            p.flow_hash = (i as u32).wrapping_mul(0x9E37_79B9);
            p
        };
        let active: Vec<usize> = (0..flows / 10).map(|k| k * 10).collect();
        let mut d =
            Driver::new(&mut q, Traffic { packet: &packet, pkt_time: Span::from_nanos(10) }, &active, 2);
        d.run(2 * active.len() + 1024);
        g.bench_with_input(BenchmarkId::from_parameter(flows), &flows, |b, _| b.iter(|| d.step()));
    }
    g.finish();
}

fn full_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("full_path_64B");
    g.throughput(Throughput::Elements(1));
    let mut fp = FullPath::new(16, 16);
    fp.run(0, fp.frames() + 1024);
    let mut at = 0;
    g.bench_function("parse_classify_enqueue_dequeue", |b| {
        b.iter(|| {
            at += 1;
            fp.run(at, 1)
        })
    });
    g.finish();
}

/// Re-keying one of N waiting timers and taking the next due one: the per-packet work of a
/// shaper's wait queue. Timing wheel (O(1)) against a binary heap with lazy deletion (O(log N)).
fn wait_queue(c: &mut Criterion) {
    use sluice_core::sched::wheel::TimerWheel;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut g = c.benchmark_group("wait_queue_rekey_pop");
    g.throughput(Throughput::Elements(1));
    for n in [1_000u32, 100_000, 1_000_000] {
        let spread = 10_000_000u64; // deadlines within 10 ms
        let mut w = TimerWheel::new();
        w.reserve(n as usize);
        for i in 0..n {
            w.insert(i, (i as u64 * 7919) % spread);
        }
        let mut now = 0u64;
        g.bench_with_input(BenchmarkId::new("wheel", n), &n, |b, _| {
            b.iter(|| {
                now += spread / n as u64;
                while let Some((d, id)) = w.pop_expired(now) {
                    w.insert(id, d + spread);
                }
            })
        });
        let mut h: BinaryHeap<Reverse<(u64, u32)>> =
            (0..n).map(|i| Reverse(((i as u64 * 7919) % spread, i))).collect();
        let mut now = 0u64;
        g.bench_with_input(BenchmarkId::new("binary_heap", n), &n, |b, _| {
            b.iter(|| {
                now += spread / n as u64;
                while let Some(&Reverse((d, id))) = h.peek() {
                    if d > now {
                        break;
                    }
                    h.pop();
                    h.push(Reverse((d + spread, id)));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, htb, fq_codel, full_path, wait_queue);
criterion_main!(benches);
