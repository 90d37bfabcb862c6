//! Proof that the engine's per-packet path (frame ingress with parse and classification, drops
//! handed back, dequeue, next_event) does not allocate at steady state: a counting global
//! allocator watches a long run after a warm-up. The configuration has u32 filters, a policer
//! that drops, and fq_codel leaves that drop on their own.
//!
//! One `#[test]` only, so that no other test thread allocates while the counter is read.

use sluice_core::{Span, Time};
use sluice_engine::{Engine, Program, ProgramOptions};
use sluice_tc::script::load_tc_script;
use sluice_wire::FrameSpec;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::net::{IpAddr, Ipv4Addr};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SCRIPT: &str = "\
tc qdisc add dev e root handle 1: htb default 20
tc class add dev e parent 1: classid 1:1 htb rate 50mbit
tc class add dev e parent 1:1 classid 1:10 htb rate 10mbit ceil 50mbit
tc class add dev e parent 1:1 classid 1:20 htb rate 10mbit ceil 50mbit
tc qdisc add dev e parent 1:10 fq_codel limit 50
tc qdisc add dev e parent 1:20 fq_codel limit 50
tc filter add dev e parent 1: protocol ip prio 1 u32 match ip dport 53 0xffff flowid 1:10 action police rate 5mbit burst 10k drop
";

/// Offers 2 frames per served one (so queues overflow and the policer drops) for `n` rounds.
fn drive(e: &mut Engine, frames: &[Vec<u8>], now: &mut Time, n: usize) -> (u64, u64) {
    let (mut sent, mut dropped) = (0, 0);
    for k in 0..n {
        for j in 0..2 {
            let f = &frames[(2 * k + j) % frames.len()];
            let _ = e.ingress_frame(f, k as u64, *now);
        }
        while e.take_dropped().is_some() {
            dropped += 1;
        }
        while e.dequeue(*now).is_some() {
            sent += 1;
        }
        while e.take_dropped().is_some() {
            dropped += 1;
        }
        *now = e.next_event(*now).unwrap_or(*now).max(*now + Span::from_micros(20));
    }
    (sent, dropped)
}

#[test]
fn the_per_packet_path_does_not_allocate() {
    let state = load_tc_script("t.tc", SCRIPT, &Default::default()).unwrap().state;
    let mut e =
        Engine::new(Program::from_model(&state, "e", &ProgramOptions::default()).unwrap(), Time::ZERO);
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| {
            let src = IpAddr::V4(Ipv4Addr::new(198, 18, 0, i as u8));
            let dst = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1));
            FrameSpec::udp(src, dst, 1000 + i, if i % 2 == 0 { 53 } else { 80 }, 1200).build().unwrap()
        })
        .collect();
    let mut now = Time::ZERO;
    drive(&mut e, &frames, &mut now, 50_000);
    let region = Region::new(GLOBAL);
    let (sent, dropped) = drive(&mut e, &frames, &mut now, 200_000);
    let stats = region.change();
    let s = e.stats();
    assert!(sent > 100_000 && dropped > 50_000, "sent {sent} dropped {dropped}");
    assert!(s.classify_drops > 0 && s.qdisc_drops + s.enqueue_drops > 0, "{s:?}");
    assert_eq!(stats.allocations + stats.reallocations, 0, "{stats:?}");
}
