//! The hierarchies of seed 004 (Linux Journal "Analysis of the HTB Queuing Discipline", tables
//! 6-8), driven by constant-bit-rate sources into a 100 Mbit/s port as on the Ixia. The expected
//! shares are derived here from the configuration and the offered loads, not copied from the
//! article's measurements (which carry the old kernel's timer errors).

mod htb_common;
use htb_common::*;
use sluice_core::htb::HtbClassConfig;
use sluice_core::{Rate, Time};

const LINK: u64 = 100_000_000;
const WARMUP: u64 = 2;
const END: u64 = 12;

/// Expected rate of each source: a leaf gets min(offered, its allotment); inside one FIFO leaf
/// that is overloaded, constant-rate sources share in proportion to their offered rates.
fn fifo_shares(allot: f64, offered: &[f64]) -> Vec<f64> {
    let total: f64 = offered.iter().sum();
    if total <= allot {
        offered.to_vec()
    } else {
        offered.iter().map(|o| allot * o / total).collect()
    }
}

/// The allotment of each child under a parent of rate `parent` when every child is backlogged:
/// its own rate, plus the excess (parent minus the children's rates) shared by quantum among
/// those that still want more, capped by ceil and demand (water-filling).
fn allot(parent: f64, kids: &[(f64 /*rate*/, f64 /*ceil*/, f64 /*demand*/, f64 /*quantum*/)]) -> Vec<f64> {
    let mut got: Vec<f64> = kids.iter().map(|k| k.0.min(k.2)).collect();
    let mut left = parent - got.iter().sum::<f64>();
    for _ in 0..kids.len() {
        let hungry: Vec<usize> =
            (0..kids.len()).filter(|&i| got[i] < kids[i].1.min(kids[i].2) - 1e-9).collect();
        if hungry.is_empty() || left <= 1e-9 {
            break;
        }
        let qsum: f64 = hungry.iter().map(|&i| kids[i].3).sum();
        let mut used = 0.0;
        for &i in &hungry {
            let want = kids[i].1.min(kids[i].2) - got[i];
            let give = (left * kids[i].3 / qsum).min(want);
            got[i] += give;
            used += give;
        }
        left -= used;
    }
    got
}

fn quantum_of(rate: Rate) -> f64 {
    (rate.bytes_per_sec() / 10).clamp(1000, 200_000) as f64
}

fn check(measured: &[f64], expected: &[f64], tol: f64) {
    for (i, (m, e)) in measured.iter().zip(expected).enumerate() {
        let err = (m - e).abs() / e;
        assert!(err < tol, "source {i}: measured {m:.0} bit/s, expected {e:.0} (error {err:.4}); all {measured:?} vs {expected:?}");
    }
}

#[test]
fn table6_one_level_of_inheritance() {
    // Class 1 (30 Mbit) with class 2 (2 Mbit) and class 3 (28 Mbit), both ceil 30 Mbit.
    // Streams: 64 B at 15 Mbit and 512 B at 20 Mbit into class 3, 512 B at 4 Mbit into class 2.
    let (r1, r2, r3) = (mbit(30.0), mbit(2.0), mbit(28.0));
    let mut q = htb(&[
        (h(1), ROOT, HtbClassConfig::new(r1).burst(18 * 1024)),
        (h(2), h(1), HtbClassConfig::new(r2).ceil(r1).burst(1024).cburst(1024)),
        (h(3), h(1), HtbClassConfig::new(r3).ceil(r1).burst(17 * 1024).cburst(17 * 1024)),
    ]);
    let offered = [15.0e6, 20.0e6, 4.0e6];
    let mut src = vec![
        Source::new(h(3), Rate::from_bps(15_000_000), 64),
        Source::new(h(3), Rate::from_bps(20_000_000), 512),
        Source::new(h(2), Rate::from_bps(4_000_000), 512),
    ];
    let out = run(&mut q, &mut src, Some(LINK), Time::from_secs(WARMUP), Time::from_secs(END));
    let secs = (END - WARMUP) as f64;
    let a = allot(
        r1.bps() as f64,
        &[
            (r2.bps() as f64, r1.bps() as f64, offered[2], quantum_of(r2)),
            (r3.bps() as f64, r1.bps() as f64, offered[0] + offered[1], quantum_of(r3)),
        ],
    );
    let mut expected = fifo_shares(a[1], &offered[..2]);
    expected.push(a[0]);
    let measured: Vec<f64> = (0..3).map(|i| out.rate(i, secs)).collect();
    // HTB's part, the split between the classes, is exact; how a tail-drop FIFO splits its
    // class's rate between constant-rate streams depends on their phases (hence 10%).
    check(&[measured[0] + measured[1], measured[2]], &[a[1], a[0]], 0.01);
    check(&measured, &expected, 0.10);
    assert_eq!(out.enqueued, out.dequeued + out.dropped + q_backlog(&q));
}

#[test]
fn table7_two_levels_of_inheritance() {
    // Class 1 (30 Mbit): class 2 (2 Mbit leaf) and class 3 (28 Mbit) with leaves 4 (10 Mbit),
    // 5 (5 Mbit) and 6 (13 Mbit), ceil = parent's rate.
    let r = |m| mbit(m);
    let mut q = htb(&[
        (h(1), ROOT, HtbClassConfig::new(r(30.0)).burst(18 * 1024)),
        (h(2), h(1), HtbClassConfig::new(r(2.0)).ceil(r(30.0)).burst(1024).cburst(1024)),
        (h(3), h(1), HtbClassConfig::new(r(28.0)).ceil(r(30.0)).burst(17 * 1024)),
        (h(4), h(3), HtbClassConfig::new(r(10.0)).ceil(r(28.0)).burst(6 * 1024).cburst(6 * 1024)),
        (h(5), h(3), HtbClassConfig::new(r(5.0)).ceil(r(28.0)).burst(3 * 1024).cburst(3 * 1024)),
        (h(6), h(3), HtbClassConfig::new(r(13.0)).ceil(r(28.0)).burst(7987).cburst(7987)),
    ]);
    let offered = [5.0e6, 15.0e6, 10.0e6, 20.0e6];
    let mut src = vec![
        Source::new(h(2), Rate::from_bps(5_000_000), 512),
        Source::new(h(4), Rate::from_bps(15_000_000), 1514),
        Source::new(h(5), Rate::from_bps(10_000_000), 64),
        Source::new(h(6), Rate::from_bps(20_000_000), 512),
    ];
    let out = run(&mut q, &mut src, Some(LINK), Time::from_secs(WARMUP), Time::from_secs(END));
    let secs = (END - WARMUP) as f64;
    let b = |m: f64| m * 1e6;
    let top = allot(
        b(30.0),
        &[
            (b(2.0), b(30.0), offered[0], quantum_of(r(2.0))),
            (b(28.0), b(30.0), offered[1] + offered[2] + offered[3], quantum_of(r(28.0))),
        ],
    );
    let inner = allot(
        top[1],
        &[
            (b(10.0), b(28.0), offered[1], quantum_of(r(10.0))),
            (b(5.0), b(28.0), offered[2], quantum_of(r(5.0))),
            (b(13.0), b(28.0), offered[3], quantum_of(r(13.0))),
        ],
    );
    let expected = [top[0], inner[0], inner[1], inner[2]];
    let measured: Vec<f64> = (0..4).map(|i| out.rate(i, secs)).collect();
    check(&measured, &expected, 0.01);
}

#[test]
fn table8_streams_sharing_one_class() {
    // Three equal 512-byte streams of 5 Mbit into one class of 1.8 Mbit (ceil = rate).
    let mut q = htb(&[
        (h(1), ROOT, HtbClassConfig::new(mbit(30.0)).burst(18 * 1024)),
        (h(2), h(1), HtbClassConfig::new(mbit(1.8)).burst(1024).cburst(1024)),
    ]);
    // 512 B at 5 Mbit/s is one packet every 819.2 us; spread the three phases over it.
    let mut src: Vec<Source> =
        (0..3).map(|i| Source::new(h(2), Rate::from_bps(5_000_000), 512).phase(i * 273_067)).collect();
    let out = run(&mut q, &mut src, Some(LINK), Time::from_secs(WARMUP), Time::from_secs(END));
    let secs = (END - WARMUP) as f64;
    let expected = fifo_shares(1.8e6, &[5e6, 5e6, 5e6]);
    let measured: Vec<f64> = (0..3).map(|i| out.rate(i, secs)).collect();
    check(&[measured.iter().sum()], &[1.8e6], 0.01);
    check(&measured, &expected, 0.10);
}

#[test]
fn table6_variant_with_excess_shared_by_quantum() {
    // Same tree, but the children's rates leave 20 Mbit of excess, and both are greedy: the excess
    // goes 1:1 by quantum when the quanta are equal, 3:1 when one is three times the other.
    for (q2, q3) in [(3000u32, 3000u32), (9000, 3000)] {
        let mut q = htb(&[
            (h(1), ROOT, HtbClassConfig::new(mbit(30.0)).burst(18 * 1024)),
            (h(2), h(1), HtbClassConfig::new(mbit(4.0)).ceil(mbit(30.0)).quantum(q2)),
            (h(3), h(1), HtbClassConfig::new(mbit(6.0)).ceil(mbit(30.0)).quantum(q3)),
        ]);
        let mut src = vec![Source::new(h(2), mbit(40.0), 500), Source::new(h(3), mbit(40.0), 500)];
        let out = run(&mut q, &mut src, Some(LINK), Time::from_secs(WARMUP), Time::from_secs(END));
        let secs = (END - WARMUP) as f64;
        let expected = allot(30e6, &[(4e6, 30e6, 40e6, q2 as f64), (6e6, 30e6, 40e6, q3 as f64)]);
        let measured: Vec<f64> = (0..2).map(|i| out.rate(i, secs)).collect();
        check(&measured, &expected, 0.03);
    }
}

fn q_backlog(q: &sluice_core::htb::Htb) -> u64 {
    use sluice_core::Qdisc;
    q.stats().qlen
}
