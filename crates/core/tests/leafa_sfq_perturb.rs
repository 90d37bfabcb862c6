//! Seed 003, "Linux SFQ experimentation": two bulk floods saturate a link through SFQ while a
//! sparse probe flow measures latency, with `perturb` set. The probe's latency is measured per
//! packet and compared between the windows right after each perturbation and the rest.

use sluice_core::sfq::{PerturbMode, Sfq, SfqConfig};
use sluice_core::{Packet, Qdisc, Rate, Span, Time};

const FLOOD_LEN: u32 = 1514;
const PROBE_LEN: u32 = 100;

#[derive(Debug, Default)]
struct Outcome {
    /// (send time, queueing delay) of every delivered probe packet.
    probe: Vec<(Time, Span)>,
    /// Flood packets delivered after a later packet of the same flow.
    reordered: u64,
    /// Drops, and when they happened.
    drops: Vec<Time>,
    perturbations: Vec<Time>,
}

/// Flow ids: 0 and 1 are floods, 2 is the probe. `payload` = flow << 32 | sequence.
fn simulate(cfg: SfqConfig, secs: u64) -> Outcome {
    let link = Rate::from_bps(1_000_000);
    let end = Time::from_secs(secs);
    let hashes = [0x1111_0001u32, 0x2222_0002, 0x3333_0003];
    // Each flood offers the full link rate; the probe one small packet every 20 ms.
    let gaps =
        [link.time_to_send(FLOOD_LEN as u64), link.time_to_send(FLOOD_LEN as u64), Span::from_millis(20)];
    let mut next = [Time::ZERO, Time::from_micros(3_000), Time::from_micros(7_000)];
    let mut seq = [0u64; 3];
    let mut last_seen = [None::<u64>; 2];
    let mut q = Sfq::new(cfg).unwrap();
    let mut out = Outcome::default();
    let mut link_free = Time::ZERO;
    let mut seen_perturb = 0;
    let period = cfg.perturb.as_nanos();
    loop {
        let (f, t_arr) = (0..3).map(|f| (f, next[f])).min_by_key(|&(_, t)| t).unwrap();
        let busy = q.next_event(link_free).is_some();
        if t_arr >= end && !busy {
            break;
        }
        let now;
        if busy && (link_free <= t_arr || t_arr >= end) {
            now = link_free;
            let p = q.dequeue(now).expect("work conserving");
            let (flow, s) = ((p.payload >> 32) as usize, p.payload & 0xFFFF_FFFF);
            if flow == 2 {
                out.probe.push((p.enqueue_time, now - p.enqueue_time));
            } else {
                if last_seen[flow].is_some_and(|l| s < l) {
                    out.reordered += 1;
                }
                last_seen[flow] = Some(last_seen[flow].map_or(s, |l| l.max(s)));
            }
            link_free = now + link.time_to_send(p.len as u64);
        } else {
            now = t_arr;
            let mut p = Packet::new(if f == 2 { PROBE_LEN } else { FLOOD_LEN }, ((f as u64) << 32) | seq[f]);
            p.flow_hash = hashes[f];
            seq[f] += 1;
            if q.enqueue(p, now).is_err() {
                out.drops.push(now);
            }
            next[f] = now + gaps[f];
            link_free = link_free.max(now);
        }
        while q.take_dropped().is_some() {
            out.drops.push(now);
        }
        while q.perturbations() > seen_perturb {
            seen_perturb += 1;
            out.perturbations.push(Time::from_nanos(seen_perturb * period));
        }
    }
    out
}

/// Max probe delay among probes sent in [from, to).
fn max_delay(o: &Outcome, from: Time, to: Time) -> Span {
    o.probe.iter().filter(|(t, _)| *t >= from && *t < to).map(|&(_, d)| d).max().unwrap_or(Span::ZERO)
}

fn cfg(mode: PerturbMode, divisor: u32, limit: u32) -> SfqConfig {
    SfqConfig { perturb: Span::from_secs(2), perturb_mode: mode, divisor, limit, ..SfqConfig::default() }
}

/// Per perturbation: (max probe delay in the 1 s after it, max in the 1 s before it), in ms.
fn per_perturbation(o: &Outcome) -> Vec<(f64, f64)> {
    let ms = |s: Span| s.as_nanos() as f64 / 1e6;
    let last_probe = o.probe.last().map_or(Time::ZERO, |p| p.0);
    o.perturbations
        .iter()
        .filter(|&&t| t + Span::from_secs(1) <= last_probe)
        .map(|&t| {
            let before = Time::from_nanos(t.as_nanos() - 1_000_000_000);
            (ms(max_delay(o, t, t + Span::from_secs(1))), ms(max_delay(o, before, t)))
        })
        .collect()
}

fn report(name: &str, o: &Outcome) {
    let pp = per_perturbation(o);
    let drops_near: usize = o
        .perturbations
        .iter()
        .map(|&t| o.drops.iter().filter(|&&d| d >= t && d < t + Span::from_millis(1)).count())
        .sum();
    println!(
        "{name}: {} perturbations, reordered {}, drops {} ({} at a perturbation instant)",
        o.perturbations.len(),
        o.reordered,
        o.drops.len(),
        drops_near
    );
    for (i, (after, before)) in pp.iter().enumerate() {
        println!("  perturb {i}: probe max delay before {before:.1} ms, after {after:.1} ms");
    }
}

#[test]
fn seed_era_key_change_spikes_at_every_perturbation_and_sticky_never_does() {
    // The seed's configuration: "sfq limit 10", two MTU-sized floods, a sparse probe.
    let sticky = simulate(cfg(PerturbMode::Sticky, 1024, 10), 21);
    let key_only = simulate(cfg(PerturbMode::KeyOnly, 1024, 10), 21);
    report("sticky", &sticky);
    report("key-only (Linux < 3.9)", &key_only);
    // Perturbations at 2, 4, ..., 18 s have a full second of probes after them.
    assert_eq!(per_perturbation(&sticky).len(), 9);
    assert_eq!(per_perturbation(&key_only).len(), 9);

    // Baseline: a probe waits for at most one quantum of each flood plus the packet on the wire,
    // 3 × 1514 bytes at 1 Mbit/s = 36.3 ms.
    let bound_ms = 3.0 * 1514.0 * 8.0 / 1e6 * 1e3 + 1.0;
    for (i, (after, before)) in per_perturbation(&sticky).into_iter().enumerate() {
        assert!(after <= bound_ms && before <= bound_ms, "sticky perturb {i}: {before} -> {after} ms");
    }
    assert_eq!(sticky.reordered, 0);
    for (i, (after, before)) in per_perturbation(&key_only).into_iter().enumerate() {
        assert!(after > 1.3 * before.max(1.0), "key-only perturb {i}: no spike ({before} -> {after} ms)");
    }
    assert!(key_only.reordered > 0, "a flood split over two slots is reordered");
}

/// Linux >= 3.9 rehashes every queued packet. That keeps each flow in order, but a perturbation
/// that makes the probe collide with a flood moves the probe's queued packets, and all its later
/// ones, behind the flood's whole backlog until the next perturbation. With the default divisor
/// (1024) and three flows that happens on about 0.3% of perturbations (none in this run's
/// window), so the test uses `divisor 16` to see it within 20 perturbations. Sticky keeps the
/// backlogged floods in their slots and out of the new key's table, so the probe cannot be
/// merged into them.
#[test]
fn kernel_rehash_merges_the_probe_into_a_flood_and_sticky_does_not() {
    let sticky = simulate(cfg(PerturbMode::Sticky, 16, 127), 41);
    let rehash = simulate(cfg(PerturbMode::Rehash, 16, 127), 41);
    report("sticky, divisor 16", &sticky);
    report("rehash (Linux >= 3.9), divisor 16", &rehash);
    let worst = |o: &Outcome| per_perturbation(o).into_iter().map(|(a, _)| a).fold(0.0, f64::max);
    let bound_ms = 3.0 * 1514.0 * 8.0 / 1e6 * 1e3 + 1.0;
    assert!(worst(&sticky) <= bound_ms, "sticky worst {}", worst(&sticky));
    assert!(worst(&rehash) > 2.0 * bound_ms, "rehash worst {}", worst(&rehash));
}
