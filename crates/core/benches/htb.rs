//! HTB enqueue+dequeue cost per packet with 1, 100 and 10 000 backlogged leaves.
//!
//! Two levels: one root class of 10 Gbit/s and N leaves, each guaranteed half its fair share
//! (rate = root / 2N) and allowed to borrow up to the root (ceil = root), so the scheduler
//! switches between own-rate sends, borrowing and throttling. Every leaf holds 8 packets of
//! 1000 bytes; each iteration dequeues one packet at the current virtual time and enqueues it
//! again into its class, and the clock advances by one packet time at the root rate (jumping to
//! `next_event` when everything is throttled).
//!
//! Run: `cargo bench -p sluice-core --bench htb -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::{Handle, Packet, Qdisc, Rate, Span, Time};
use std::hint::black_box;

const ROOT_BPS: u64 = 10_000_000_000;
const PKT: u32 = 1000;

fn setup(n: u32) -> (Htb, Time) {
    let root = Handle::new(1, 0);
    let mut q = Htb::new(root, HtbConfig::default()).unwrap();
    let t0 = Time::ZERO;
    q.add_class(Handle::new(1, 1), root, HtbClassConfig::new(Rate::from_bps(ROOT_BPS)), t0).unwrap();
    // Minors 2.. (32-bit minors).
    let leaf_rate = Rate::from_bps((ROOT_BPS / 2 / n as u64).max(8));
    for i in 0..n {
        let id = Handle::new(1, 2 + i);
        let cfg = HtbClassConfig::new(leaf_rate).ceil(Rate::from_bps(ROOT_BPS));
        q.add_class(id, Handle::new(1, 1), cfg, t0).unwrap();
        for k in 0..8 {
            let mut p = Packet::new(PKT, k);
            p.push_class(id);
            q.enqueue(p, t0).unwrap();
        }
    }
    (q, t0)
}

/// One packet: dequeue (waiting on the virtual clock if throttled), enqueue it again, and move
/// the clock on by one packet time.
#[inline]
fn step(q: &mut Htb, now: &mut Time, tick: Span) {
    let p = loop {
        match q.dequeue(*now) {
            Some(p) => break p,
            None => *now = q.next_event(*now).expect("backlogged"),
        }
    };
    q.enqueue(black_box(p), *now).unwrap();
    *now += tick;
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("htb_enqueue_dequeue");
    g.throughput(Throughput::Elements(1));
    let tick = Rate::from_bps(ROOT_BPS).time_to_send(PKT as u64);
    for n in [1u32, 100, 10_000] {
        let (mut q, mut now) = setup(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| step(&mut q, &mut now, tick))
        });
    }
    g.finish();
}

/// Runs `iters` packets through an N-leaf setup without criterion, for instruction counting:
/// `HTB_BENCH_LEAVES=N HTB_BENCH_ITERS=K perf stat -e instructions:u target/release/deps/htb-*`
/// twice with different K; the difference divided by the difference in K is instructions/packet.
fn fixed_run(n: u32, iters: u64) {
    let (mut q, mut now) = setup(n);
    let tick = Rate::from_bps(ROOT_BPS).time_to_send(PKT as u64);
    for _ in 0..iters {
        step(&mut q, &mut now, tick);
    }
    black_box(q.stats());
}

criterion_group!(benches, bench);

fn main() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    if let (Some(n), Some(iters)) = (env("HTB_BENCH_LEAVES"), env("HTB_BENCH_ITERS")) {
        fixed_run(n as u32, iters);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
