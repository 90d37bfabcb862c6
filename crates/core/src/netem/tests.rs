use super::dist::BuiltinDist;
use super::*;

const MS: u64 = 1_000_000;

fn pct(p: f64) -> Prob {
    (p * u32::MAX as f64).round() as u32
}

fn cfg() -> NetemConfig {
    NetemConfig { seed: 7, ..NetemConfig::default() }
}

/// Enqueues `n` packets of `len` bytes at `gap` ns intervals and drains everything, returning
/// (payload, departure ns) in departure order and the packets refused at enqueue.
fn run(q: &mut Netem, n: u64, len: u32, gap: u64) -> (Vec<(u64, u64)>, Vec<Dropped>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut now = Time::ZERO;
    let mut sent = 0;
    loop {
        // Next arrival or next departure, whichever is first.
        let arrival = (sent < n).then(|| Time::from_nanos(sent * gap));
        let ev = q.next_event(now);
        let t = match (arrival, ev) {
            (Some(a), Some(e)) => a.min(e.max(now)),
            (Some(a), None) => a,
            (None, Some(e)) => e.max(now),
            (None, None) => break,
        };
        now = t;
        if arrival == Some(now) {
            if let Err(d) = q.enqueue(Packet::new(len, sent), now) {
                refused.push(d);
            }
            sent += 1;
        }
        while let Some(p) = q.dequeue(now) {
            out.push((p.payload, now.as_nanos()));
        }
        while let Some(d) = q.take_dropped() {
            refused.push(d);
        }
    }
    (out, refused)
}

#[test]
fn fixed_delay_is_exact() {
    let mut q = Netem::new(NetemConfig { latency: Span::from_millis(50), ..cfg() }).unwrap();
    let (out, drops) = run(&mut q, 100, 1000, 3 * MS + 17);
    assert!(drops.is_empty());
    assert_eq!(out.len(), 100);
    for (i, (p, t)) in out.iter().enumerate() {
        assert_eq!(*p, i as u64);
        assert_eq!(*t, i as u64 * (3 * MS + 17) + 50 * MS);
    }
    let s = q.stats();
    assert_eq!((s.packets, s.bytes, s.qlen, s.backlog_bytes), (100, 100_000, 0, 0));
}

#[test]
fn uniform_jitter_stays_in_range_and_reorders_like_the_kernel() {
    let mut q =
        Netem::new(NetemConfig { latency: Span::from_millis(40), jitter: Span::from_millis(5), ..cfg() })
            .unwrap();
    let (out, _) = run(&mut q, 20_000, 100, MS / 10);
    let mut sum = 0i64;
    for (p, t) in &out {
        let d = *t as i64 - (*p * MS / 10) as i64;
        assert!((35 * MS as i64..45 * MS as i64).contains(&d), "delay {d}");
        sum += d;
    }
    let mean = sum as f64 / out.len() as f64;
    assert!((mean - 40e6).abs() < 0.1e6, "mean {mean}");
    // Packets 0.1 ms apart with ±5 ms jitter overtake each other (netem's tfifo is time-ordered).
    assert!(out.windows(2).any(|w| w[1].0 < w[0].0));
}

#[test]
fn normal_table_gives_the_configured_deviation() {
    let mut q = Netem::new(NetemConfig {
        latency: Span::from_millis(100),
        jitter: Span::from_millis(10),
        delay_dist: Some(BuiltinDist::Normal.table()),
        ..cfg()
    })
    .unwrap();
    let (out, _) = run(&mut q, 40_000, 100, MS / 100);
    let d: Vec<f64> = out.iter().map(|(p, t)| *t as f64 - (*p * MS / 100) as f64).collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
    assert!((mean - 100e6).abs() < 0.3e6, "mean {mean}");
    assert!((sd - 10e6).abs() < 0.5e6, "sd {sd}");
}

#[test]
fn tabledist_arithmetic_is_the_kernels() {
    let table: DistTable = vec![-8192i16, 8192, 4096, -1].into();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    // sigma 10 ms: one table unit of 8192 is one sigma; 4096 is half; -1 is -sigma/8192 rounded.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.insert(Netem::tabledist(&mut rng, 1_000_000_000, 10_000_001, None, Some(&table)));
    }
    // x = (sigma % 8192)·t ± 4096, / 8192 (truncating) + (sigma / 8192)·t + mu.
    let k = |t: i64| {
        let mut x = (10_000_001i64 % 8192) * t;
        x += if x >= 0 { 4096 } else { -4096 };
        x / 8192 + (10_000_001 / 8192) * t + 1_000_000_000
    };
    let want: std::collections::BTreeSet<i64> = [-8192, 8192, 4096, -1].into_iter().map(k).collect();
    assert_eq!(seen, want);
    assert_eq!(k(-1), 1_000_000_000 - 1221);
}

#[test]
fn correlation_follows_the_kernels_formula() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut st = Crnd { last: 1000, rho: u32::MAX };
    // rho = 100%: the value never changes.
    for _ in 0..10 {
        assert_eq!(Netem::crandom(&mut rng, &mut st), 1000);
    }
    let mut a = ChaCha8Rng::seed_from_u64(4);
    let mut b = a.clone();
    let mut st = Crnd { last: 0, rho: pct(0.25) };
    let v = b.next_u32() as u64;
    let want = ((v * ((1u64 << 32) - (pct(0.25) as u64 + 1))) >> 32) as u32;
    assert_eq!(Netem::crandom(&mut a, &mut st), want);
}

#[test]
fn random_loss_rate_is_the_configured_one() {
    let mut q =
        Netem::new(NetemConfig { loss: LossModel::Random { p: pct(0.005), corr: 0 }, ..cfg() }).unwrap();
    let (out, drops) = run(&mut q, 200_000, 100, 1000);
    assert_eq!(out.len() + drops.len(), 200_000);
    let rate = drops.len() as f64 / 200_000.0;
    assert!((rate - 0.005).abs() < 0.0006, "loss {rate}");
    assert!(drops.iter().all(|d| d.reason == DropReason::Aqm));
    assert_eq!(q.stats().drops, drops.len() as u64);
}

#[test]
fn correlated_loss_comes_in_longer_runs() {
    let runs = |corr: f64| {
        let mut q =
            Netem::new(NetemConfig { loss: LossModel::Random { p: pct(0.3), corr: pct(corr) }, ..cfg() })
                .unwrap();
        let mut lost = Vec::new();
        for i in 0..100_000 {
            lost.push(q.enqueue(Packet::new(100, i), Time::ZERO).is_err());
            let _ = q.dequeue(Time::ZERO);
        }
        let changes = lost.windows(2).filter(|w| w[0] != w[1]).count();
        (lost.iter().filter(|l| **l).count(), changes)
    };
    let (_, c0) = runs(0.0);
    let (_, c9) = runs(0.9);
    assert!(c9 * 3 < c0, "correlated loss should change state less often: {c9} vs {c0}");
}

#[test]
fn four_state_model_loses_in_bursts_at_the_stationary_rate() {
    // p13 5%, p31 20%, no burst receptions, no isolated losses: loss = p13/(p13+p31) = 20%,
    // mean burst 1/p31 = 5 packets.
    let mut q = Netem::new(NetemConfig {
        loss: LossModel::FourState { p13: pct(0.05), p31: pct(0.2), p32: 0, p23: u32::MAX, p14: 0 },
        ..cfg()
    })
    .unwrap();
    let mut lost = Vec::new();
    for i in 0..200_000 {
        lost.push(q.enqueue(Packet::new(100, i), Time::ZERO).is_err());
        let _ = q.dequeue(Time::ZERO);
    }
    let n = lost.iter().filter(|l| **l).count() as f64;
    let bursts = lost.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
    assert!((n / 200_000.0 - 0.2).abs() < 0.01, "loss {}", n / 200_000.0);
    assert!((n / bursts - 5.0).abs() < 0.3, "burst {}", n / bursts);
}

#[test]
fn gilbert_elliott_loses_in_the_bad_state() {
    // tc's `loss gemodel 2% 18%`: h = 0 (every packet lost in the bad state), 1-k = 0.
    let mut q = Netem::new(NetemConfig {
        loss: LossModel::GilbertElliott { p: pct(0.02), r: pct(0.18), h: 0, k1: 0 },
        ..cfg()
    })
    .unwrap();
    let mut lost = 0;
    for i in 0..200_000 {
        lost += q.enqueue(Packet::new(100, i), Time::ZERO).is_err() as u32;
        let _ = q.dequeue(Time::ZERO);
    }
    let rate = lost as f64 / 200_000.0;
    assert!((rate - 0.1).abs() < 0.01, "loss {rate}");
}

#[test]
fn ecn_marks_capable_packets_instead_of_dropping() {
    let mut q =
        Netem::new(NetemConfig { loss: LossModel::Random { p: u32::MAX, corr: 0 }, ecn: true, ..cfg() })
            .unwrap();
    let mut ect = Packet::new(100, 1);
    ect.dsfield = 2;
    q.enqueue(ect, Time::ZERO).unwrap();
    assert!(q.enqueue(Packet::new(100, 2), Time::ZERO).is_err());
    let p = q.dequeue(Time::ZERO).unwrap();
    assert_eq!(p.ecn(), crate::Ecn::Ce);
    assert_eq!(q.stats().drops, 2, "the kernel counts the mark as a drop");
    assert!(Netem::new(NetemConfig { ecn: true, ..cfg() }).is_err());
}

#[test]
fn duplicates_are_flagged_copies_and_not_duplicated_again() {
    let mut q = Netem::new(NetemConfig { duplicate: u32::MAX, ..cfg() }).unwrap();
    let (out, drops) = run(&mut q, 10, 100, MS);
    assert!(drops.is_empty());
    assert_eq!(out.len(), 20);
    for i in 0..10u64 {
        assert_eq!(out[2 * i as usize].0, i | DUPLICATE_FLAG, "the duplicate enters first");
        assert_eq!(out[2 * i as usize + 1].0, i);
    }
}

#[test]
fn corruption_is_counted_and_flagged() {
    let mut q = Netem::new(NetemConfig { corrupt: pct(0.5), ..cfg() }).unwrap();
    let (out, _) = run(&mut q, 10_000, 100, 1000);
    let flagged = out.iter().filter(|(p, _)| p & CORRUPT_FLAG != 0).count() as u64;
    assert_eq!(flagged, q.corrupted());
    assert!((4500..5500).contains(&flagged), "{flagged}");
}

#[test]
fn reorder_with_gap_sends_every_gapth_packet_at_once() {
    let mut q =
        Netem::new(NetemConfig { latency: Span::from_millis(10), reorder: u32::MAX, gap: 5, ..cfg() })
            .unwrap();
    let (out, _) = run(&mut q, 20, 100, MS / 10);
    let immediate: Vec<u64> = out.iter().filter(|(p, t)| *t == *p * MS / 10).map(|(p, _)| *p).collect();
    assert_eq!(immediate, vec![4, 9, 14, 19]);
    assert_eq!(q.stats().requeues, 4);
}

#[test]
fn rate_serialises_after_the_delay() {
    // 1 Mbit/s = 125 000 B/s: 1250 bytes take 10 ms.
    let mut q = Netem::new(NetemConfig {
        latency: Span::from_millis(5),
        rate: Some(NetemRate { bytes_per_sec: 125_000, ..NetemRate::default() }),
        ..cfg()
    })
    .unwrap();
    let (out, _) = run(&mut q, 4, 1250, 0);
    let t: Vec<u64> = out.iter().map(|x| x.1 / MS).collect();
    assert_eq!(t, vec![15, 25, 35, 45]);
    // A packet arriving after the queue drained waits only its own delay and serialisation.
    let mut q = Netem::new(NetemConfig {
        rate: Some(NetemRate { bytes_per_sec: 125_000, ..NetemRate::default() }),
        ..cfg()
    })
    .unwrap();
    let (out, _) = run(&mut q, 3, 1250, 30 * MS);
    assert_eq!(out.iter().map(|x| x.1 / MS).collect::<Vec<_>>(), vec![10, 40, 70]);
}

#[test]
fn rate_counts_packet_and_cell_overhead() {
    let r = NetemRate { bytes_per_sec: 1_000_000, packet_overhead: 10, cell_size: 48, cell_overhead: 5 };
    // 100 + 10 = 110 bytes: 3 cells of 48 + 5 = 159 bytes = 159 µs.
    assert_eq!(Netem::packet_time(&r, 100), 159_000);
    let r = NetemRate { bytes_per_sec: 1_000_000, packet_overhead: -200, ..NetemRate::default() };
    assert_eq!(Netem::packet_time(&r, 100), 0);
}

#[test]
fn limit_counts_every_held_packet() {
    let mut q = Netem::new(NetemConfig { limit: 3, latency: Span::from_millis(1), ..cfg() }).unwrap();
    for i in 0..3 {
        q.enqueue(Packet::new(100, i), Time::ZERO).unwrap();
    }
    let d = q.enqueue(Packet::new(100, 3), Time::ZERO).unwrap_err();
    assert_eq!(d.reason, DropReason::QueueFull);
    assert_eq!(q.stats().drops, 1);
    assert_eq!(q.stats().qlen, 3);
    assert_eq!(q.next_event(Time::ZERO), Some(Time::from_millis(1)));
    assert!(q.dequeue(Time::ZERO).is_none());
}

#[test]
fn slot_releases_bursts() {
    let mut q = Netem::new(NetemConfig {
        slot: Some(NetemSlot {
            min_delay: Span::from_millis(10),
            max_delay: Span::from_millis(10),
            max_packets: 2,
            ..NetemSlot::default()
        }),
        ..cfg()
    })
    .unwrap();
    let (out, _) = run(&mut q, 6, 100, 0);
    assert_eq!(out.iter().map(|x| x.1 / MS).collect::<Vec<_>>(), vec![0, 0, 10, 10, 20, 20]);
}

#[test]
fn a_child_decides_when_due_packets_leave() {
    use crate::tbf::{Tbf, TbfConfig};
    let mut q = Netem::new(NetemConfig { latency: Span::from_millis(20), ..cfg() }).unwrap();
    // 1 Mbit/s, one-packet bucket: 1250-byte packets leave 10 ms apart after the delay.
    q.set_child(Box::new(Tbf::new(TbfConfig::new(crate::Rate::from_bps(1_000_000), 1250, 100_000)).unwrap()));
    let (out, _) = run(&mut q, 3, 1250, 0);
    assert_eq!(out.iter().map(|x| x.1 / MS).collect::<Vec<_>>(), vec![20, 30, 40]);
    assert_eq!(q.stats().qlen, 0);
}

#[test]
fn the_same_seed_repeats_and_another_differs() {
    let c = |seed| NetemConfig {
        latency: Span::from_millis(30),
        jitter: Span::from_millis(8),
        delay_dist: Some(BuiltinDist::ParetoNormal.table()),
        loss: LossModel::Random { p: pct(0.02), corr: pct(0.25) },
        seed,
        ..NetemConfig::default()
    };
    let a = run(&mut Netem::new(c(1)).unwrap(), 2000, 100, MS);
    let b = run(&mut Netem::new(c(1)).unwrap(), 2000, 100, MS);
    let d = run(&mut Netem::new(c(2)).unwrap(), 2000, 100, MS);
    assert_eq!(a.0, b.0);
    assert_ne!(a.0, d.0);
}

#[test]
fn reset_returns_everything() {
    let mut q = Netem::new(NetemConfig { latency: Span::from_millis(5), reorder: u32::MAX, gap: 2, ..cfg() })
        .unwrap();
    for i in 0..5 {
        q.enqueue(Packet::new(100, i), Time::ZERO).unwrap();
    }
    let _ = q.peek(Time::ZERO);
    let mut got: Vec<u64> = q.reset().iter().map(|p| p.payload).collect();
    got.sort();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert_eq!((q.stats().qlen, q.stats().backlog_bytes), (0, 0));
    assert_eq!(q.next_event(Time::ZERO), None);
}

#[test]
fn with_an_outbox_duplicates_leave_for_the_root_and_come_back_once() {
    let out = Duplicates::new();
    let mut q = Netem::new(NetemConfig { duplicate: u32::MAX, ..cfg() }).unwrap();
    q.set_duplicates(out.clone());
    q.enqueue(Packet::new(100, 7), Time::ZERO).unwrap();
    assert_eq!(q.qlen(), 1, "only the original stays here");
    let copy = out.pop().expect("a copy in the outbox");
    assert_eq!((copy.payload, copy.len), (7, 100), "the copy carries its original's handle");
    assert!(out.pop().is_none());
    // The owner gives the copy a handle of its own, marked: it is not duplicated again.
    q.enqueue(Packet::new(100, 8 | DUPLICATE_FLAG), Time::ZERO).unwrap();
    assert!(out.pop().is_none());
    assert_eq!(q.qlen(), 2);
    // Over the limit, the copy is freed without a trace (nothing to hand back).
    let mut small = Netem::new(NetemConfig { duplicate: u32::MAX, limit: 1, ..cfg() }).unwrap();
    small.set_duplicates(out.clone());
    small.enqueue(Packet::new(100, 1), Time::ZERO).unwrap();
    let _ = out.pop();
    assert!(small.enqueue(Packet::new(100, 2), Time::ZERO).is_err());
    assert!(out.pop().is_none() && small.take_dropped().is_none());
}
