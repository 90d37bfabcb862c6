//! Seed 003, "pfifo_fast and ECN", at the engine level: an ECN-capable flow and an ordinary flow,
//! both DSCP 0, share an overloaded link through pfifo_fast. With the kernel's TOS table the
//! ECT(0) flow lands in band 2 and is starved; with Sluice's DSCP mapping both share band 1.

use sluice_core::prio::{PfifoFast, PfifoFastConfig};
use sluice_core::{Packet, Qdisc, Rate, Span, Time};

/// Result per flow: (bytes delivered during the 2 s of load, mean queueing delay in µs).
fn run(cfg: PfifoFastConfig) -> [(u64, u64); 2] {
    let link = Rate::from_bps(10_000_000);
    let len = 1500u32;
    // Each flow offers 8 Mbit/s: one 1500-byte packet every 1.5 ms on average.
    let end = Time::from_secs(2);
    let mut q = PfifoFast::new(PfifoFastConfig { txqueuelen: 100, ..cfg });
    let mut next_arrival = [Time::ZERO, Time::from_micros(750)];
    let mut link_free = Time::ZERO;
    let mut bytes = [0u64; 2];
    let mut delay_sum = [0u64; 2];
    let mut count = [0u64; 2];
    let mut id = 0u64;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    loop {
        let t_arr = next_arrival[0].min(next_arrival[1]);
        let can_send = q.next_event(link_free).is_some();
        if t_arr >= end && !can_send {
            break;
        }
        if can_send && (link_free <= t_arr || t_arr >= end) {
            let now = link_free;
            let p = q.dequeue(now).expect("work-conserving");
            let f = (p.payload & 1) as usize;
            if now < end {
                bytes[f] += p.len as u64; // throughput over the loaded period only
            }
            delay_sum[f] += (now - p.enqueue_time).as_micros();
            count[f] += 1;
            link_free = now + link.time_to_send(p.len as u64);
            continue;
        }
        let f = if next_arrival[0] <= next_arrival[1] { 0 } else { 1 };
        let mut p = Packet::new(len, id * 2 + f as u64);
        id += 1;
        p.dsfield = if f == 1 { 0x02 } else { 0x00 }; // flow 1: ECT(0), DSCP 0
        let _ = q.enqueue(p, t_arr);
        // Jitter the gaps (mean 1.5 ms) so tail drops do not phase-lock onto one flow.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        next_arrival[f] = t_arr + Span::from_micros(1000 + rng % 1001);
        if link_free < t_arr {
            link_free = t_arr;
        }
    }
    [0, 1].map(|f| (bytes[f], delay_sum[f] / count[f].max(1)))
}

#[test]
fn ecn_flow_is_starved_with_legacy_tos_and_shares_fairly_with_dscp_mapping() {
    let legacy = run(PfifoFastConfig::legacy());
    let fixed = run(PfifoFastConfig::default());
    let share = |r: [(u64, u64); 2]| r[1].0 as f64 / (r[0].0 + r[1].0) as f64;
    println!("legacy: plain {:?} ect0 {:?} share {:.3}", legacy[0], legacy[1], share(legacy));
    println!("sluice: plain {:?} ect0 {:?} share {:.3}", fixed[0], fixed[1], share(fixed));
    // Legacy: the non-ECN flow gets all it asks (8 of 10 Mbit), the ECN flow the rest (~20%),
    // and waits behind a full band-2 queue.
    assert!(share(legacy) < 0.22, "legacy ECT share {}", share(legacy));
    assert!(legacy[1].1 > 10 * legacy[0].1.max(1));
    // Sluice: one FIFO band for both, so equal offered loads get equal shares and delays.
    assert!((share(fixed) - 0.5).abs() < 0.03, "sluice ECT share {}", share(fixed));
    let (d0, d1) = (fixed[0].1 as f64, fixed[1].1 as f64);
    assert!((d0 - d1).abs() <= 0.05 * d0.max(d1), "delays {d0} vs {d1}");
}
