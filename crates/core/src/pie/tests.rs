use super::*;

fn pkt(len: u32, ecn: bool) -> Packet {
    let mut p = Packet::new(len, 0);
    if ecn {
        p.dsfield = 2; // ECT(0)
    }
    p
}

/// A link of `rate_bps` fed `offered_bps` of `len`-byte packets for `secs`: the sojourn times
/// (ms) of the packets sent after `warm` seconds.
fn run_link(
    q: &mut dyn Qdisc,
    rate_bps: u64,
    offered_bps: u64,
    len: u32,
    ecn: bool,
    secs: u64,
    warm: u64,
) -> Vec<f64> {
    let tx = Span::from_nanos(len as u64 * 8 * 1_000_000_000 / rate_bps);
    let gap = Span::from_nanos(len as u64 * 8 * 1_000_000_000 / offered_bps);
    let end = Time::from_secs(secs);
    let (mut next_arrival, mut link_free) = (Time::ZERO, Time::ZERO);
    let mut out = Vec::new();
    loop {
        let t = next_arrival.min(link_free.max(Time::ZERO));
        if t >= end {
            break;
        }
        if next_arrival <= link_free {
            let _ = q.enqueue(pkt(len, ecn), next_arrival);
            next_arrival += gap;
        } else {
            match q.dequeue(link_free) {
                Some(p) => {
                    if link_free >= Time::from_secs(warm) {
                        out.push(link_free.since(p.enqueue_time).as_secs_f64() * 1e3);
                    }
                    link_free += tx;
                }
                None => link_free = next_arrival,
            }
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
fn kernel_units() {
    assert_eq!(usecs_to_jiffies(15_000), 4);
    assert_eq!(tupdate_shown(15_000), 16_000);
    assert_eq!(tupdate_shown(30_000), 32_000);
    assert_eq!(tupdate_shown(4_000), 4_000);
    assert_eq!(tupdate_shown(1), 4_000);
    assert_eq!(target_shown(15_000), 15_000);
    assert_eq!(target_shown(1), 0);
    assert_eq!(target_shown(1_500), 1_499);
    // (u32) of the ns: a target above 4.29 s wraps as the kernel's dump does.
    assert_eq!(target_shown(5_000_000), ((5_000_000_000u64 >> 6 << 6) as u32) / 1000);
    assert_eq!(PieParams::default().tupdate_span(), Span::from_millis(16));
}

/// RFC 8033 §5.2 auto-tuning: below 10% alpha and beta are halved, and quartered again per
/// decade below 1%, 0.1%, ... 0.0001%.
#[test]
fn gains_scale_with_the_probability_range() {
    let p = PieParams::default();
    let step = |prob: u64| {
        let mut v = PieVars { prob, qdelay: p.target + 1000, qdelay_old: p.target + 1000, ..PieVars::new() };
        v.update(&p, 100_000);
        v.prob as i128 - prob as i128
    };
    let base = ((2u64 * (MAX_PROB / TICKS_PER_SEC)) >> 4) as i128 * 1000;
    assert_eq!(step(MAX_PROB / 5), base);
    assert_eq!(step(MAX_PROB / 20), base >> 1);
    assert_eq!(step(MAX_PROB / 200), ((((2u64 * (MAX_PROB / TICKS_PER_SEC)) >> 4) >> 3) * 1000) as i128);
    assert_eq!(step(0), ((((2u64 * (MAX_PROB / TICKS_PER_SEC)) >> 4) >> 11) * 1000) as i128);
    // Past 10%, a rise is capped at 2% per update.
    let mut v = PieVars { prob: MAX_PROB / 5, qdelay: p.target * 10, qdelay_old: 0, ..PieVars::new() };
    v.update(&p, 100_000);
    assert_eq!(v.prob, MAX_PROB / 5 + (MAX_PROB / 100) * 2);
}

#[test]
fn idle_updates_decay_and_restart() {
    let p = PieParams::default();
    let mut v = PieVars { prob: MAX_PROB / 100, ..PieVars::new() };
    v.burst_time = 0;
    v.update(&p, 0);
    // The integral term pulls it down, then the idle decay takes 1/64 of what is left.
    assert!(v.prob < MAX_PROB / 100 - (MAX_PROB / 100) / 64, "{}", v.prob);
    let mut n = 0;
    while v.prob > 0 && n < 10_000 {
        v.update(&p, 0);
        n += 1;
    }
    assert_eq!(v.prob, 0);
    assert_eq!(v.burst_time, BURST_TICKS, "a quiet controller gets its burst allowance back");
}

/// An unresponsive 25% overload: PIE drops about a fifth and, once past its start-up overshoot
/// (the burst allowance, then a probability above 1 as the kernel's can be), holds the sojourn
/// time near its target.
#[test]
fn holds_delay_near_target_under_overload() {
    let mut q = Pie::new(PieConfig::default()).unwrap();
    let d = run_link(&mut q, 10_000_000, 12_500_000, 1000, false, 40, 15);
    let m = median(d);
    assert!((12.0..=18.0).contains(&m), "median sojourn {m} ms (target 15 ms)");
    let x = q.xstats();
    assert!(x.prob > 0.1 && x.prob < 0.5, "prob {}", x.prob);
    assert!(x.dropped > 1000 && x.overlimit == 0, "{x:?}");
    // A FIFO of the same limit fills to it.
    let mut f = crate::fifo::Fifo::pfifo(1000);
    let m = median(run_link(&mut f, 10_000_000, 20_000_000, 1000, false, 10, 5));
    assert!(m > 700.0, "fifo {m} ms");
}

#[test]
fn dq_rate_estimator_measures_the_link() {
    let params = PieParams { dq_rate_estimator: true, ..PieParams::default() };
    let mut q = Pie::new(PieConfig { params, ..PieConfig::default() }).unwrap();
    let d = run_link(&mut q, 10_000_000, 12_500_000, 1000, false, 40, 15);
    let x = q.xstats();
    assert!(x.dq_rate_estimating);
    let rate = x.avg_dq_rate as f64;
    assert!((rate - 1.25e6).abs() < 0.05e6, "avg_dq_rate {rate} B/s");
    let m = median(d);
    assert!((10.0..=20.0).contains(&m), "median sojourn {m} ms");
}

#[test]
fn burst_allowance_lets_the_first_150ms_through() {
    let mut q = Pie::new(PieConfig::default()).unwrap();
    // 1.5x overload for 140 ms: the queue grows, nothing is dropped early.
    run_link(&mut q, 10_000_000, 15_000_000, 1000, false, 0, 0);
    let tx = Span::from_micros(800);
    let mut t = Time::ZERO;
    let mut last_tx = Time::ZERO;
    while t < Time::from_millis(140) {
        assert!(q.enqueue(pkt(1000, false), t).is_ok());
        if t >= last_tx + tx {
            q.dequeue(t);
            last_tx = t;
        }
        t += Span::from_micros(533);
    }
    assert_eq!(q.xstats().dropped, 0);
}

#[test]
fn ecn_marks_below_ten_percent_and_drops_above() {
    let params = PieParams { ecn: true, ..PieParams::default() };
    let mut q = Pie::new(PieConfig { params, ..PieConfig::default() }).unwrap();
    q.vars.burst_time = 0;
    q.vars.qdelay = params.target;
    q.vars.prob = MAX_PROB / 20;
    q.vars.accu_prob = MAX_PROB * 9; // past 8.5: the next packet is dropped (or marked)
    q.backlog = 10_000;
    q.queue.extend((0..10).map(|_| (pkt(1000, false), Time::ZERO)));
    assert!(q.enqueue(pkt(1000, true), Time::ZERO).is_ok());
    assert_eq!(q.xstats().ecn_mark, 1);
    assert_eq!(q.queue.back().unwrap().0.ecn(), crate::packet::Ecn::Ce);
    q.vars.prob = MAX_PROB / 5;
    q.vars.accu_prob = MAX_PROB * 9;
    let e = q.enqueue(pkt(1000, true), Time::ZERO).unwrap_err();
    assert_eq!(e.reason, DropReason::Aqm);
    assert_eq!(q.xstats().dropped, 1);
    assert_eq!(q.vars.accu_prob, 0);
}

#[test]
fn bytemode_scales_by_size() {
    let p = PieParams { bytemode: true, ..PieParams::default() };
    let mut v = PieVars { burst_time: 0, qdelay: p.target, prob: MAX_PROB / 2, ..PieVars::new() };
    let mut never = || u64::MAX;
    v.drop_early(&p, 10_000, 100, 1500, &mut never);
    assert_eq!(v.accu_prob, 100 * ((MAX_PROB / 2) / 1500));
}

#[test]
fn limit_and_change() {
    let params = PieParams { limit: 5, ..PieParams::default() };
    let mut q = Pie::new(PieConfig { params, ..PieConfig::default() }).unwrap();
    for _ in 0..7 {
        let _ = q.enqueue(pkt(100, false), Time::ZERO);
    }
    let x = q.xstats();
    assert_eq!((x.packets_in, x.overlimit, x.dropped, x.maxq), (5, 2, 2, 4));
    q.change(PieParams { limit: 2, ..params });
    assert_eq!(q.qlen(), 2);
    assert_eq!(std::iter::from_fn(|| q.take_dropped()).count(), 3);
}

#[test]
fn timer_runs_lazily() {
    let mut t = PieTimer::default();
    let tu = Span::from_millis(16);
    assert_eq!(t.due(Time::from_millis(10), tu), 0);
    assert_eq!(t.due(Time::from_millis(509), tu), 0);
    assert_eq!(t.due(Time::from_millis(510), tu), 1);
    assert_eq!(t.due(Time::from_millis(510 + 16 * 3), tu), 3);
    assert_eq!(t.due(Time::from_millis(510 + 16 * 3 + 15), tu), 0);
}
