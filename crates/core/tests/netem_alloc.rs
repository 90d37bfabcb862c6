//! netem's per-packet path (enqueue with loss, jitter, reorder and rate; dequeue; next_event)
//! does not allocate at steady state. One `#[test]` only, so no other test thread allocates
//! while the counter is read.

use sluice_core::netem::{dist::BuiltinDist, LossModel, Netem, NetemConfig, NetemRate};
use sluice_core::{Packet, Qdisc, Span, Time};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Offers one packet every 10 µs for `n` packets and serves whatever is due.
fn drive(q: &mut Netem, now: &mut Time, n: u64) -> u64 {
    let mut out = 0;
    for i in 0..n {
        let _ = q.enqueue(Packet::new(1000, i), *now);
        while let Some(d) = q.take_dropped() {
            std::hint::black_box(d);
        }
        while q.next_event(*now).is_some_and(|t| t <= *now) {
            match q.dequeue(*now) {
                Some(_) => out += 1,
                None => break,
            }
        }
        *now += Span::from_micros(10);
    }
    out
}

#[test]
fn netem_steady_state_does_not_allocate() {
    let r = Region::new(GLOBAL);
    let v = std::hint::black_box(vec![1u8; 64]);
    drop(v);
    assert!(r.change().allocations > 0, "counting allocator not active");

    let mut q = Netem::new(NetemConfig {
        limit: 10_000,
        latency: Span::from_millis(40),
        jitter: Span::from_millis(5),
        delay_dist: Some(BuiltinDist::Normal.table()),
        loss: LossModel::Random { p: u32::MAX / 200, corr: u32::MAX / 4 },
        reorder: u32::MAX / 100,
        gap: 5,
        rate: Some(NetemRate { bytes_per_sec: 125_000_000, ..NetemRate::default() }),
        seed: 1,
        ..NetemConfig::default()
    })
    .unwrap();
    let mut now = Time::ZERO;
    // Warm-up: the time queue reaches its working size (about 4000 packets in 40 ms).
    drive(&mut q, &mut now, 50_000);
    let region = Region::new(GLOBAL);
    let sent = drive(&mut q, &mut now, 200_000);
    let s = region.change();
    eprintln!(
        "netem: {} allocations ({} bytes) in 200000 packets, {sent} sent",
        s.allocations + s.reallocations,
        s.bytes_allocated
    );
    assert!(sent > 190_000);
    assert_eq!(s.allocations + s.reallocations, 0);
}
