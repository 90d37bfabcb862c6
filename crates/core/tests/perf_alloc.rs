//! Proof that the per-packet path of HTB (enqueue, dequeue, next_event) does not allocate at
//! steady state: a counting global allocator watches a long run after a warm-up.
//!
//! One `#[test]` only, so that no other test thread allocates while the counter is read.

use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::{Handle, Packet, Qdisc, Rate, Span, Time};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Root 1:1, `sites` inner classes, `per_site` leaves each; leaves have rate `leaf_bps` and
/// ceil `leaf_ceil`, and minors `2 + sites + k * minor_step` (32-bit minors: one qdisc).
/// Returns the qdisc and one packet template per leaf.
fn tree(sites: u32, per_site: u32, leaf_bps: u64, leaf_ceil: u64, minor_step: u32) -> (Htb, Vec<Packet>) {
    let h = |m: u32| Handle::new(1, m);
    let cfg = |r: u64, c: u64| {
        HtbClassConfig::new(Rate::from_bps(r)).ceil(Rate::from_bps(c)).burst(1600).cburst(1600).quantum(1500)
    };
    let link = 10_000_000_000;
    let mut q = Htb::new(h(0), HtbConfig::default()).unwrap();
    q.add_class(h(1), h(0), cfg(link, link), Time::ZERO).unwrap();
    let mut templates = Vec::new();
    let mut next = 2 + sites;
    for s in 0..sites {
        q.add_class(h(2 + s), h(1), cfg(link / sites as u64, link), Time::ZERO).unwrap();
        for _ in 0..per_site {
            q.add_class(h(next), h(2 + s), cfg(leaf_bps, leaf_ceil), Time::ZERO).unwrap();
            let mut p = Packet::new(1000, templates.len() as u64);
            p.push_class(h(next));
            templates.push(p);
            next += minor_step;
        }
    }
    (q, templates)
}

/// Keeps every `stride`-th leaf backlogged with 2 packets and sends `n` packets on a virtual
/// clock (8 ns per packet, or a jump to `next_event` when everything waits).
fn drive(q: &mut Htb, templates: &[Packet], now: &mut Time, n: usize) {
    let mut sent = 0;
    while sent < n {
        match q.dequeue(*now) {
            Some(p) => {
                q.enqueue(templates[p.payload as usize], *now).unwrap();
                *now += Span::from_nanos(800);
                sent += 1;
            }
            None => *now = q.next_event(*now).unwrap().max(*now + Span::from_nanos(1)),
        }
    }
}

fn steady_state_allocations(name: &str, mut q: Htb, templates: Vec<Packet>, stride: usize) -> usize {
    let mut now = Time::ZERO;
    for _ in 0..2 {
        for p in templates.iter().step_by(stride) {
            q.enqueue(*p, now).unwrap();
        }
    }
    // Warm-up: every active class is served, throttled and woken several times, so that every
    // vector has reached its working size.
    drive(&mut q, &templates, &mut now, 200_000);
    let region = Region::new(GLOBAL);
    drive(&mut q, &templates, &mut now, 200_000);
    let s = region.change();
    let n = s.allocations + s.reallocations;
    eprintln!("{name}: {n} allocations ({} bytes) in 200000 packets", s.bytes_allocated);
    n
}

#[test]
fn htb_per_packet_path_does_not_allocate_at_steady_state() {
    // The counter does see allocations (so a zero below means something).
    let r = Region::new(GLOBAL);
    std::hint::black_box(vec![0u8; 64]);
    assert!(r.change().allocations > 0, "counting allocator not active");
    // 1000 leaves, 10% backlogged, borrowing from their sites.
    let (q, t) = tree(32, 32, 1_000_000, 300_000_000, 1);
    let borrowing = steady_state_allocations("borrowing", q, t, 10);
    // The worst case: 100% backlogged, rate = ceil so low that nearly all wait for tokens.
    let (q, t) = tree(32, 32, 8_000_000, 8_000_000, 1);
    let throttled = steady_state_allocations("throttled", q, t, 1);
    // 90 000 leaves in one qdisc (minors past ffff, a direct table), and 20 000 with minors
    // spread over 2·10⁹ (a hash-mapped index), 10% backlogged.
    let (q, t) = tree(300, 300, 1_000, 300_000_000, 1);
    let wide = steady_state_allocations("90 000 leaves", q, t, 10);
    let (q, t) = tree(20, 1000, 10_000, 300_000_000, 100_000);
    let sparse = steady_state_allocations("scattered minors", q, t, 10);
    assert_eq!((borrowing, throttled, wide, sparse), (0, 0, 0, 0), "allocations on the per-packet path");
}
