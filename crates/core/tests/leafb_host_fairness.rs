//! Seed 003, "three scp from HostA": with per-host fairness, a host with three bulk uploads and a
//! host with one share the link equally; with plain flow fairness the first host gets 3/4.
//!
//! The link is a deterministic loop in virtual time: it takes one packet from fq_codel and is busy
//! for `len × 8 / rate` seconds. Each bulk flow is a greedy sender that keeps 8 packets queued
//! (refilling after every departure or drop), so every flow is always backlogged and CoDel's
//! drops are replaced at once.

use sluice_core::fq_codel::{FlowIsolation, FqCodel, FqCodelConfig};
use sluice_core::{Packet, Qdisc, Time};

const RATE_BPS: u64 = 10_000_000;
const WINDOW: u32 = 8;

struct Sender {
    host: usize,
    flow_hash: u32,
    src_host_hash: u32,
    dst_host_hash: u32,
    len: u32,
    queued: u32,
}

/// Runs the four senders for `secs` seconds and returns each host's delivered bytes after a one
/// second warm-up.
fn run(isolation: FlowIsolation, secs: u64) -> [u64; 2] {
    let host_hash = [0x1111_0000u32, 0x9999_0000u32];
    let mut senders: Vec<Sender> = (0..4)
        .map(|i| Sender {
            host: if i < 3 { 0 } else { 1 },
            flow_hash: 0x0100_0000u32.wrapping_mul(i as u32 * 37 + 5),
            src_host_hash: host_hash[if i < 3 { 0 } else { 1 }],
            // Each upload goes to a different server.
            dst_host_hash: 0x2000_0000u32.wrapping_add(0x1000_0000 * i as u32),
            // Mixed packet sizes, so that equal shares mean equal bytes, not equal packets.
            len: [1500, 600, 1200, 900][i],
            queued: 0,
        })
        .collect();
    // Distinct buckets, or the test would measure hash collisions.
    let q = FqCodel::new(FqCodelConfig { isolation, ..Default::default() }).unwrap();
    let buckets: std::collections::HashSet<u32> =
        senders.iter().map(|s| q.bucket_of(&packet(s, 0)).unwrap()).collect();
    assert_eq!(buckets.len(), if isolation == FlowIsolation::SrcHost { 2 } else { 4 });

    let mut q = q;
    let mut bytes = [0u64; 2];
    let mut id = 0u64;
    let mut now = 0u64;
    let mut aqm_drops = 0;
    while now < secs * 1_000_000_000 {
        for (i, s) in senders.iter_mut().enumerate() {
            while s.queued < WINDOW {
                q.enqueue(packet(s, (id << 2) | i as u64), Time::from_nanos(now)).unwrap();
                id += 1;
                s.queued += 1;
            }
        }
        let t = Time::from_nanos(now);
        let mut tx_time = 1_000;
        if let Some(p) = q.dequeue(t) {
            tx_time = p.len as u64 * 8 * 1_000_000_000 / RATE_BPS;
            let s = &mut senders[(p.payload & 3) as usize];
            s.queued -= 1;
            if now >= 1_000_000_000 {
                bytes[s.host] += p.len as u64;
            }
        }
        while let Some(d) = q.take_dropped() {
            senders[(d.pkt.payload & 3) as usize].queued -= 1;
            aqm_drops += 1;
        }
        now += tx_time;
    }
    assert!(aqm_drops > 0, "the standing queue should have made CoDel act");
    bytes
}

fn packet(s: &Sender, payload: u64) -> Packet {
    let mut p = Packet::new(s.len, payload);
    p.flow_hash = s.flow_hash;
    p.src_host_hash = s.src_host_hash;
    p.dst_host_hash = s.dst_host_hash;
    p
}

fn share_of_host_a(bytes: [u64; 2]) -> f64 {
    bytes[0] as f64 / (bytes[0] + bytes[1]) as f64
}

#[test]
fn plain_flow_fairness_gives_the_three_flow_host_three_quarters() {
    let a = share_of_host_a(run(FlowIsolation::Flows, 20));
    eprintln!("flows: host A share {a:.4}");
    assert!((a - 0.75).abs() < 0.02, "host A share {a}");
}

#[test]
fn per_host_isolation_gives_both_hosts_half() {
    for mode in [FlowIsolation::DualSrcHost, FlowIsolation::SrcHost, FlowIsolation::TripleIsolate] {
        let bytes = run(mode, 20);
        let a = share_of_host_a(bytes);
        eprintln!("{mode}: host A share {a:.6} {bytes:?}");
        assert!((a - 0.5).abs() < 0.02, "{mode}: host A share {a} ({bytes:?})");
    }
}

#[test]
fn destination_isolation_does_not_group_by_source() {
    // All four flows go to different servers, so dual-dsthost is plain flow fairness here.
    let a = share_of_host_a(run(FlowIsolation::DualDstHost, 20));
    assert!((a - 0.75).abs() < 0.02, "host A share {a}");
}
