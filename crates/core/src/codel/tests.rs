use super::*;

const MS: u64 = 1_000_000;

fn pkt(len: u32, id: u64) -> Packet {
    Packet::new(len, id)
}

fn ect(len: u32, id: u64) -> Packet {
    let mut p = Packet::new(len, id);
    p.dsfield = 0b10; // ECT(0)
    p
}

fn codel(ecn: bool) -> Codel {
    let mut cfg = CodelConfig::default();
    cfg.params.ecn = ecn;
    Codel::new(cfg).unwrap()
}

/// What happened in a run of a constant-rate link.
#[derive(Default)]
struct Run {
    sent: u64,
    aqm_drops: Vec<Time>,
    marked: u64,
    max_sojourn: Span,
}

/// Feeds 1500-byte packets every `arrival` ns and serves one every `service` ns, for `dur`.
fn run_link(q: &mut Codel, arrival: u64, service: u64, dur: u64, make: fn(u32, u64) -> Packet) -> Run {
    let mut run = Run::default();
    let (mut next_arr, mut next_srv, mut id) = (0u64, 0u64, 0u64);
    while next_arr.min(next_srv) < dur {
        if next_arr <= next_srv {
            let mut p = make(1500, id);
            p.enqueue_time = Time::from_nanos(next_arr);
            let _ = q.enqueue(p, Time::from_nanos(next_arr));
            id += 1;
            next_arr += arrival;
        } else {
            let now = Time::from_nanos(next_srv);
            if let Some(p) = q.dequeue(now) {
                run.sent += 1;
                if p.ecn() == crate::packet::Ecn::Ce {
                    run.marked += 1;
                }
                run.max_sojourn = run.max_sojourn.max(now - p.enqueue_time);
            }
            while let Some(d) = q.take_dropped() {
                assert_eq!(d.reason, DropReason::Aqm);
                run.aqm_drops.push(now);
            }
            next_srv += service;
        }
    }
    run
}

#[test]
fn defaults_match_the_kernel() {
    let q = Codel::new(CodelConfig::default()).unwrap();
    let c = q.config();
    assert_eq!(c.limit, 1000);
    assert_eq!(c.params.target, Span::from_millis(5));
    assert_eq!(c.params.interval, Span::from_millis(100));
    assert!(!c.params.ecn);
    assert_eq!(c.params.ce_threshold, None);
    assert_eq!(c.params.mtu, 1514);
    assert_eq!(q.kind(), "codel");
}

#[test]
fn bad_config_is_an_error() {
    let cfg = CodelConfig { limit: 0, ..CodelConfig::default() };
    assert!(Codel::new(cfg).is_err());
    let mut cfg = CodelConfig::default();
    cfg.params.interval = Span::ZERO;
    let e = Codel::new(cfg).unwrap_err();
    assert!(e.to_string().contains("interval"), "{e}");
}

#[test]
fn queue_below_target_never_drops() {
    // Arrivals every 1.3 ms, service every 1.2 ms: the queue never exceeds one packet.
    let mut q = codel(false);
    let run = run_link(&mut q, 1_300_000, 1_200_000, 10_000 * MS, pkt);
    assert!(run.aqm_drops.is_empty());
    assert!(run.max_sojourn < Span::from_millis(5));
    // A standing 4 ms queue (below the 5 ms target) is not dropped from either.
    let mut q = codel(false);
    for i in 0..4 {
        q.enqueue(pkt(1500, i), Time::from_nanos(i * MS)).unwrap();
    }
    let mut t = 4 * MS;
    for i in 4..20_000u64 {
        q.enqueue(pkt(1500, i), Time::from_nanos(t)).unwrap();
        assert!(q.dequeue(Time::from_nanos(t)).is_some());
        assert!(q.take_dropped().is_none(), "dropped at {t}");
        t += MS;
    }
    assert!(q.vars().ldelay() < Span::from_millis(5));
}

#[test]
fn standing_queue_above_target_for_an_interval_starts_dropping() {
    // 20% overload: the queue grows without bound (up to the limit).
    let mut q = codel(false);
    let run = run_link(&mut q, 1_000_000, 1_200_000, 3_000 * MS, pkt);
    let first = *run.aqm_drops.first().expect("CoDel must drop under sustained overload");
    // The sojourn time passes 5 ms at the dequeue of the packet that arrived when the queue held
    // ~5 ms of work: arrivals outpace service by 0.2 ms per ms, so after ~30 ms; the first drop is
    // one interval (100 ms) later, never earlier.
    let above = run_first_above(1_000_000, 1_200_000);
    assert!(first.as_nanos() > above + 100 * MS, "first drop {first:?}, above since {above}");
    assert!(first.as_nanos() <= above + 100 * MS + 1_200_000, "first drop {first:?} too late");
    // And the drops keep the sojourn time in check compared with a plain FIFO (which would reach
    // 1000 packets × 1.2 ms = 1.2 s).
    assert!(run.aqm_drops.len() > 10);
}

/// Time of the first dequeue whose sojourn is at least 5 ms and whose remaining backlog exceeds
/// one MTU, computed independently of CoDel.
fn run_first_above(arrival: u64, service: u64) -> u64 {
    let mut queue: VecDeque<u64> = VecDeque::new();
    let (mut next_arr, mut next_srv) = (0u64, 0u64);
    loop {
        if next_arr <= next_srv {
            queue.push_back(next_arr);
            next_arr += arrival;
        } else {
            if let Some(t) = queue.pop_front() {
                if next_srv - t >= 5 * MS && queue.len() * 1500 > 1514 {
                    return next_srv;
                }
            }
            next_srv += service;
        }
    }
}

/// The absolute drop deadline in ns (a multiple of 1024 ns, the kernel's unit).
fn deadline(v: &CodelVars, now: Time) -> i64 {
    ((now.as_nanos() >> 10) << 10) as i64 + v.drop_next_from(now)
}

#[test]
fn drop_spacing_follows_interval_over_sqrt_count() {
    // A large standing queue: 1000 packets at t=0, served one per ms, no arrivals.
    let mut q = codel(false);
    for i in 0..1000 {
        q.enqueue(pkt(1500, i), Time::ZERO).unwrap();
    }
    let mut prev: Option<(u32, i64)> = None;
    let mut checked = 0;
    for ms in 1..900u64 {
        let now = Time::from_nanos(ms * MS);
        q.dequeue(now);
        let dropped_now = std::iter::from_fn(|| q.take_dropped()).count();
        let v = *q.vars();
        if !v.dropping {
            continue;
        }
        if let Some((count, next)) = prev {
            if v.count == count + 1 && dropped_now > 0 {
                // The deadline moved by interval/sqrt(count) (RFC 8289 §5.5).
                let gap = (deadline(&v, now) - next) as f64;
                // In the kernel's units: 100 ms = 97656 × 1024 ns.
                let exact = (((97656u64 * ((v.rec_inv_sqrt() as u64) << 16)) >> 32) << 10) as f64;
                assert_eq!(gap, exact);
                // The kernel's one Newton step per drop starts crude (count 2 gives 1/2, not
                // 1/sqrt 2) and is within 1.5% from count 5 on.
                let want = 100.0 * MS as f64 / (v.count as f64).sqrt();
                if v.count >= 5 {
                    assert!((gap - want).abs() / want < 0.015, "count {}: gap {gap} want {want}", v.count);
                }
                // And the drop happened at the first dequeue at or after the old deadline.
                let t = now.as_nanos() as i64;
                assert!(t >= next && t < next + MS as i64 + 1024);
                checked += 1;
            }
        }
        prev = Some((v.count, deadline(&v, now)));
    }
    assert!(checked >= 10, "only {checked} drop intervals observed");
}

#[test]
fn newton_iteration_tracks_inverse_sqrt() {
    let mut v = CodelVars::new();
    v.count = 1;
    v.rec_inv_sqrt = u16::MAX;
    let mut first = vec![];
    for count in 2..2000u32 {
        v.count = count;
        v.newton_step();
        first.push(v.rec_inv_sqrt);
        let want = 65536.0 / (count as f64).sqrt();
        let got = v.rec_inv_sqrt as f64;
        let tol = if count >= 10 {
            0.004
        } else if count >= 5 {
            0.015
        } else {
            0.3
        };
        assert!((got - want).abs() / want < tol, "count {count}: {got} vs {want}");
    }
    // The kernel's Q0.32 iteration from 1.0: 1/2, 9/16, 0.4878 for counts 2, 3, 4.
    assert_eq!(&first[..3], &[32769, 36864, 31968]);
}

#[test]
fn small_backlog_is_never_dropped() {
    // One packet waiting a whole second: far above target, but the backlog is under one MTU.
    let mut q = codel(false);
    let mut t = 0;
    for i in 0..20 {
        q.enqueue(pkt(1500, i), Time::from_nanos(t)).unwrap();
        t += 1000 * MS;
        assert!(q.dequeue(Time::from_nanos(t)).is_some());
        assert!(q.take_dropped().is_none());
    }
    assert!(q.vars().ldelay() >= Span::from_secs(1));
    assert_eq!(q.xstats(Time::from_nanos(t)).maxpacket, 1500);
}

#[test]
fn ecn_marks_instead_of_dropping() {
    let mut q = codel(true);
    let run = run_link(&mut q, 1_000_000, 1_200_000, 2_000 * MS, ect);
    assert!(run.aqm_drops.is_empty(), "ECT packets must be marked, not dropped");
    assert!(run.marked > 0);
    let x = q.xstats(Time::from_millis(2000));
    assert_eq!(x.ecn_mark, run.marked);
    // With ECN on, Not-ECT packets are still dropped.
    let mut q = codel(true);
    let run = run_link(&mut q, 1_000_000, 1_200_000, 2_000 * MS, pkt);
    assert!(!run.aqm_drops.is_empty());
    assert_eq!(run.marked, 0);
    // With ECN off, ECT packets are dropped.
    let mut q = codel(false);
    let run = run_link(&mut q, 1_000_000, 1_200_000, 2_000 * MS, ect);
    assert!(!run.aqm_drops.is_empty());
    assert_eq!(run.marked, 0);
}

#[test]
fn ce_threshold_marks_above_threshold_only() {
    // A standing 2 ms queue: below the 5 ms target (no AQM) but above a 1 ms ce_threshold.
    let mut cfg = CodelConfig::default();
    cfg.params.ce_threshold = Some(Span::from_millis(1));
    let mut q = Codel::new(cfg).unwrap();
    let mut marked = 0;
    for i in 0..1000u64 {
        let mut p = if i % 2 == 0 { ect(1500, i) } else { pkt(1500, i) };
        p.enqueue_time = Time::from_nanos(i * MS);
        q.enqueue(p, Time::from_nanos(i * MS)).unwrap();
        if i >= 2 {
            let out = q.dequeue(Time::from_nanos(i * MS)).unwrap();
            assert_eq!(Time::from_nanos(i * MS) - out.enqueue_time, Span::from_millis(2));
            if out.ecn() == crate::packet::Ecn::Ce {
                assert_eq!(out.payload % 2, 0, "a Not-ECT packet cannot be marked");
                marked += 1;
            }
        }
        assert!(q.take_dropped().is_none());
    }
    assert_eq!(marked, 499);
    assert_eq!(q.xstats(Time::ZERO).ce_mark, 499);
    assert_eq!(q.xstats(Time::ZERO).ecn_mark, 0);

    // At 0.5 ms sojourn nothing is marked.
    let mut q = Codel::new(cfg).unwrap();
    for i in 0..100u64 {
        q.enqueue(ect(1500, i), Time::from_nanos(i * MS)).unwrap();
        let out = q.dequeue(Time::from_nanos(i * MS + MS / 2)).unwrap();
        assert_ne!(out.ecn(), crate::packet::Ecn::Ce);
    }
}

#[test]
fn ce_threshold_selector_limits_marking() {
    let mut cfg = CodelConfig::default();
    cfg.params.ce_threshold = Some(Span::from_millis(1));
    cfg.params.ce_threshold_selector = Some((0x01, 0x01)); // ECT(1) only, as for L4S
    let mut q = Codel::new(cfg).unwrap();
    let mut p0 = ect(1500, 0); // ECT(0)
    let mut p1 = Packet::new(1500, 1);
    p1.dsfield = 0b01; // ECT(1)
    p0.enqueue_time = Time::ZERO;
    p1.enqueue_time = Time::ZERO;
    q.enqueue(p0, Time::ZERO).unwrap();
    q.enqueue(p1, Time::ZERO).unwrap();
    let a = q.dequeue(Time::from_millis(2)).unwrap();
    let b = q.dequeue(Time::from_millis(2)).unwrap();
    assert_eq!(a.ecn(), crate::packet::Ecn::Ect0);
    assert_eq!(b.ecn(), crate::packet::Ecn::Ce);
}

/// Drives an overload until at least `min_count` drops, then drains the queue completely.
fn overload_then_drain(q: &mut Codel, start: u64, min_count: u32) -> u64 {
    let mut t = start;
    let mut id = 0;
    let mut next_srv = start;
    while !(q.vars().dropping && q.vars().count >= min_count) {
        q.enqueue(pkt(1500, id), Time::from_nanos(t)).unwrap_or(());
        id += 1;
        t += MS;
        while next_srv <= t {
            q.dequeue(Time::from_nanos(next_srv));
            next_srv += 1_500_000;
        }
        while q.take_dropped().is_some() {}
        assert!(t < start + 60_000 * MS, "never reached count {min_count}");
    }
    while q.dequeue(Time::from_nanos(t)).is_some() {}
    q.dequeue(Time::from_nanos(t)); // empty queue: leaves the dropping state
    while q.take_dropped().is_some() {}
    assert!(!q.vars().dropping);
    t
}

#[test]
fn re_entry_resumes_the_previous_drop_rate() {
    let mut q = codel(false);
    let end = overload_then_drain(&mut q, 0, 8);
    let (count, last) = (q.vars().count, q.vars().lastcount);
    assert!(count - last > 1);
    // Overload again soon after: the new count starts at count - lastcount (RFC 8289 §5.4).
    overload_then_drain(&mut q, end + 10 * MS, 1);
    assert_eq!(q.vars().lastcount, count - last);

    // After more than 16 intervals below target, the count restarts from 1.
    let mut q = codel(false);
    let end = overload_then_drain(&mut q, 0, 8);
    overload_then_drain(&mut q, end + 2_000 * MS, 1);
    assert_eq!(q.vars().lastcount, 1);
}

#[test]
fn limit_tail_drops_and_counts_overlimit() {
    let cfg = CodelConfig { limit: 3, ..CodelConfig::default() };
    let mut q = Codel::new(cfg).unwrap();
    for i in 0..3 {
        q.enqueue(pkt(100, i), Time::ZERO).unwrap();
    }
    let d = q.enqueue(pkt(100, 3), Time::ZERO).unwrap_err();
    assert_eq!((d.pkt.payload, d.reason), (3, DropReason::QueueFull));
    assert_eq!(q.xstats(Time::ZERO).drop_overlimit, 1);
    let s = q.stats();
    assert_eq!((s.drops, s.qlen, s.backlog_bytes), (1, 3, 300));
    // Lowering the limit drops from the head.
    q.change(CodelConfig { limit: 1, ..cfg }).unwrap();
    let gone: Vec<u64> = std::iter::from_fn(|| q.take_dropped()).map(|d| d.pkt.payload).collect();
    assert_eq!(gone, vec![0, 1]);
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 2);
}

#[test]
fn peek_and_requeue_keep_order_and_counts() {
    let mut q = codel(false);
    for i in 0..3 {
        q.enqueue(pkt(100, i), Time::ZERO).unwrap();
    }
    assert_eq!(q.peek(Time::ZERO).unwrap().payload, 0);
    assert_eq!(q.stats().qlen, 3);
    let p = q.dequeue(Time::ZERO).unwrap();
    q.requeue(p, Time::ZERO).unwrap();
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 0);
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 1);
    let s = q.stats();
    assert_eq!((s.packets, s.bytes, s.requeues, s.qlen), (2, 200, 1, 1));
    assert_eq!(q.reset().len(), 1);
    assert_eq!(q.next_event(Time::ZERO), None);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Enqueue { len: u32, ecn: u8 },
        Dequeue,
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (40u32..=1514, 0u8..4).prop_map(|(len, ecn)| Op::Enqueue { len, ecn }),
            3 => Just(Op::Dequeue),
            2 => (0u64..50_000_000).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn conservation_and_limits(ops in proptest::collection::vec(op(), 1..400),
                                   limit in 1u32..50, ecn: bool) {
            let mut cfg = CodelConfig { limit, ..CodelConfig::default() };
            cfg.params.ecn = ecn;
            cfg.params.ce_threshold = Some(Span::from_millis(2));
            let mut q = Codel::new(cfg).unwrap();
            let (mut now, mut id) = (0u64, 0u64);
            let (mut accepted, mut refused, mut sent, mut aqm) = (0u64, 0u64, 0u64, 0u64);
            for op in ops {
                match op {
                    Op::Enqueue { len, ecn } => {
                        let mut p = Packet::new(len, id);
                        p.dsfield = ecn;
                        id += 1;
                        match q.enqueue(p, Time::from_nanos(now)) {
                            Ok(()) => accepted += 1,
                            Err(d) => { prop_assert_eq!(d.reason, DropReason::QueueFull); refused += 1 }
                        }
                    }
                    Op::Dequeue => { if q.dequeue(Time::from_nanos(now)).is_some() { sent += 1 } }
                    Op::Advance(dt) => now += dt,
                }
                while let Some(d) = q.take_dropped() {
                    prop_assert_eq!(d.reason, DropReason::Aqm);
                    if ecn { prop_assert!(!d.pkt.is_ect()) }
                    aqm += 1;
                }
                let s = q.stats();
                prop_assert!(s.qlen <= limit as u64);
                prop_assert_eq!(accepted, sent + aqm + s.qlen);
                prop_assert_eq!(s.drops, refused + aqm);
                prop_assert_eq!(s.packets, sent);
            }
        }
    }
}
