use super::*;
use crate::Span;

fn h(minor: u32) -> Handle {
    Handle::new(1, minor)
}

fn pkt(len: u32, class: u32, id: u64, now: Time) -> Packet {
    let mut p = Packet::new(len, id);
    p.push_class(h(class));
    p.enqueue_time = now;
    p
}

/// Bytes per second of a rate in bit/s, as tc sends it.
fn bps(bits: u64) -> u32 {
    (bits / 8) as u32
}

fn ls(bits: u64) -> Curves {
    Curves { ls: Some(ServiceCurve::linear(bps(bits))), ..Curves::default() }
}

/// A link of `rate` bit/s draining `q`: each packet starts when the link is free and the qdisc
/// releases it. `offer(now)` adds arrivals up to `now`. Returns the sent packets with their
/// departure times.
fn run_link(
    q: &mut Hfsc,
    rate: u64,
    until: Time,
    mut offer: impl FnMut(&mut Hfsc, Time, Time),
) -> Vec<(Packet, Time)> {
    let mut sent = Vec::new();
    let mut now = Time::ZERO;
    let mut offered_to = Time::ZERO;
    let step = Time::from_micros(50);
    while now < until {
        offer(q, offered_to, now);
        offered_to = now;
        match q.next_event(now) {
            Some(t) if t <= now => {
                if let Some(p) = q.dequeue(now) {
                    let tx = p.len as u64 * 8 * 1_000_000_000 / rate;
                    now = Time::from_nanos(now.as_nanos() + tx);
                    sent.push((p, now));
                    continue;
                }
                now = Time::from_nanos(now.as_nanos() + step.as_nanos());
            }
            Some(t) => now = t.min(Time::from_nanos(now.as_nanos() + step.as_nanos())),
            None => now = Time::from_nanos(now.as_nanos() + step.as_nanos()),
        }
    }
    sent
}

/// Keeps class `class` backlogged with `n` packets of `len` bytes.
fn keep_full(q: &mut Hfsc, class: u32, len: u32, n: u64, now: Time, ids: &mut u64) {
    let i = q.by_id[&h(class)];
    while q.classes[i].child.qlen() < n {
        *ids += 1;
        q.enqueue(pkt(len, class, *ids, now), now).unwrap();
    }
}

#[test]
fn link_share_splits_an_upper_limited_parent_by_the_curves() {
    // Parent 1:1 ls 10mbit ul 10mbit; children ls 6mbit and 4mbit, both backlogged, on a
    // 100 Mbit/s link: the parent's upper limit is the bottleneck.
    let mut q = Hfsc::new(h(0), 0, 1000);
    let parent = Curves {
        ls: Some(ServiceCurve::linear(bps(10_000_000))),
        ul: Some(ServiceCurve::linear(bps(10_000_000))),
        ..Curves::default()
    };
    q.add_class(h(1), h(0), parent).unwrap();
    q.add_class(h(10), h(1), ls(6_000_000)).unwrap();
    q.add_class(h(20), h(1), ls(4_000_000)).unwrap();
    let mut ids = 0;
    let secs = 5;
    let sent = run_link(&mut q, 100_000_000, Time::from_secs(secs), |q, _, now| {
        keep_full(q, 10, 1500, 20, now, &mut ids);
        keep_full(q, 20, 1500, 20, now, &mut ids);
    });
    let mut bytes = [0u64; 2];
    for (p, _) in &sent {
        bytes[(p.class_for(1).unwrap().minor() == 20) as usize] += p.len as u64;
    }
    let mbit = |b: u64| b as f64 * 8.0 / secs as f64 / 1e6;
    let (a, b) = (mbit(bytes[0]), mbit(bytes[1]));
    // Tolerance: 1% of the curve (one 1500-byte packet is 0.0024 Mbit over 5 s).
    assert!((a - 6.0).abs() < 0.06, "6mbit class got {a:.3} Mbit/s");
    assert!((b - 4.0).abs() < 0.04, "4mbit class got {b:.3} Mbit/s");
    let st = q.class_stats(h(1)).unwrap();
    assert_eq!(st.level, 1);
    assert_eq!(st.work, bytes[0] + bytes[1]);
    assert_eq!(st.rtwork, 0, "no real-time curve: all work is link-share");
}

/// The largest queueing delay of the voice class's packets (VoIP-like: 200 bytes every 20 ms)
/// beside two backlogged bulk classes on a 2 Mbit/s link, with `voice_curves` for the voice class.
fn voice_delay(voice_curves: Curves) -> Span {
    let link = 2_000_000;
    let mut q = Hfsc::new(h(0), 0, 1000);
    let top = Curves {
        ls: Some(ServiceCurve::linear(bps(link))),
        ul: Some(ServiceCurve::linear(bps(link))),
        ..Curves::default()
    };
    q.add_class(h(1), h(0), top).unwrap();
    q.add_class(h(10), h(1), voice_curves).unwrap();
    // The bulk classes have real-time curves too (900 kbit/s each: with the voice class's
    // 100 kbit/s, the real-time curves add up to less than the link), so the voice class's
    // deadlines compete with theirs.
    let bulk = Curves {
        rt: Some(ServiceCurve::linear(bps(900_000))),
        ls: Some(ServiceCurve::linear(bps(900_000))),
        ul: None,
    };
    q.add_class(h(20), h(1), bulk).unwrap();
    q.add_class(h(30), h(1), bulk).unwrap();
    let mut ids = 1_000_000;
    let mut next_voice = Time::ZERO;
    let mut voice_id = 0;
    let sent = run_link(&mut q, link, Time::from_secs(10), |q, _, now| {
        keep_full(q, 20, 1500, 30, now, &mut ids);
        keep_full(q, 30, 1500, 30, now, &mut ids);
        while next_voice <= now {
            voice_id += 1;
            q.enqueue(pkt(200, 10, voice_id, next_voice), now).unwrap();
            next_voice = Time::from_nanos(next_voice.as_nanos() + 20_000_000);
        }
    });
    let delays: Vec<Span> =
        sent.iter().filter(|(p, _)| p.payload < 1_000_000).map(|(p, t)| t.since(p.enqueue_time)).collect();
    assert!(delays.len() > 400, "voice packets sent: {}", delays.len());
    delays.into_iter().max().unwrap()
}

#[test]
fn a_concave_real_time_curve_bounds_the_delay_of_a_low_rate_class() {
    // rt umax 200 dmax 5ms rate 100kbit (tc's conversion: m1 = 200 B / 5 ms = 40000 B/s).
    let rt = ServiceCurve { m1: 40_000, d: 5_000, m2: bps(100_000) };
    let with_rt =
        voice_delay(Curves { rt: Some(rt), ls: Some(ServiceCurve::linear(bps(100_000))), ul: None });
    // The bound: dmax plus one bulk packet already on the wire (1500 B at 2 Mbit/s = 6 ms) plus
    // the voice packet's own transmission (0.8 ms); the arrivals are sampled every 50 µs.
    let bound = Span::from_micros(5_000 + 6_000 + 800 + 50);
    assert!(with_rt <= bound, "voice delay {with_rt:?} above the bound {bound:?}");
    // The same rate as a linear real-time curve: the deadline of a 200-byte packet is 16 ms out.
    let linear = voice_delay(Curves {
        rt: Some(ServiceCurve::linear(bps(100_000))),
        ls: Some(ServiceCurve::linear(bps(100_000))),
        ul: None,
    });
    eprintln!("voice max delay: concave rt {with_rt:?}, linear rt {linear:?}, bound {bound:?}");
    assert!(linear > bound, "a linear 100kbit curve should not meet the 5 ms bound: {linear:?}");
}

#[test]
fn no_classes_passes_packets_through_the_root_class() {
    let mut q = Hfsc::new(h(0), 0, 10);
    q.enqueue(Packet::new(100, 1), Time::ZERO).unwrap();
    assert_eq!(q.next_event(Time::ZERO), Some(Time::ZERO));
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 1);
    assert_eq!(q.next_event(Time::ZERO), None);
}

#[test]
fn unclassified_packets_go_to_the_default_leaf_or_are_dropped() {
    let mut q = Hfsc::new(h(0), 0x20, 10);
    q.add_class(h(0x10), h(0), ls(1_000_000)).unwrap();
    let e = q.enqueue(Packet::new(100, 1), Time::ZERO).unwrap_err();
    assert_eq!(e.reason, DropReason::Unclassified, "default 1:20 does not exist");
    q.add_class(h(0x20), h(0), ls(1_000_000)).unwrap();
    q.enqueue(Packet::new(100, 2), Time::ZERO).unwrap();
    assert_eq!(q.class_stats(h(0x20)).unwrap().stats.qlen, 1);
    // A packet classified to an inner class falls back to the default too.
    q.add_class(h(0x30), h(0x10), ls(500_000)).unwrap();
    q.enqueue(pkt(100, 0x10, 3, Time::ZERO), Time::ZERO).unwrap();
    assert_eq!(q.class_stats(h(0x20)).unwrap().stats.qlen, 2);
    assert_eq!(q.stats().drops, 1);
}

#[test]
fn an_rt_only_parent_is_upgraded_and_classes_need_a_curve() {
    let mut q = Hfsc::new(h(0), 0, 10);
    let rt = Curves { rt: Some(ServiceCurve::linear(1000)), ..Curves::default() };
    assert_eq!(q.add_class(h(1), h(0), rt).unwrap(), None);
    assert_eq!(
        q.add_class(h(2), h(1), ls(8000)).unwrap(),
        Some("Forced curve change on parent 'rt' to 'sc'")
    );
    assert!(q.add_class(h(3), h(1), Curves::default()).is_err());
    assert!(q.add_class(h(2), h(1), ls(8000)).is_err(), "exists");
    assert!(q.delete_class(h(1)).is_err(), "inner class");
    q.delete_class(h(2)).unwrap();
    assert_eq!(q.class_stats(h(1)).unwrap().level, 0);
    assert_eq!(q.class_stats(h(0)).unwrap().level, 1);
}

#[test]
fn upper_limit_holds_a_lone_class_to_its_rate() {
    let mut q = Hfsc::new(h(0), 0, 1000);
    let c = Curves {
        ls: Some(ServiceCurve::linear(bps(1_000_000))),
        ul: Some(ServiceCurve::linear(bps(3_000_000))),
        ..Curves::default()
    };
    q.add_class(h(1), h(0), c).unwrap();
    let mut ids = 0;
    let sent = run_link(&mut q, 100_000_000, Time::from_secs(2), |q, _, now| {
        keep_full(q, 1, 1000, 10, now, &mut ids);
    });
    let mbit = sent.iter().map(|(p, _)| p.len as u64).sum::<u64>() as f64 * 8.0 / 2.0 / 1e6;
    assert!((mbit - 3.0).abs() < 0.03, "ul 3mbit gave {mbit:.3} Mbit/s");
    // Throttled between packets: the next event is in the future.
    let now = sent.last().unwrap().1;
    if let Some(t) = q.next_event(now) {
        assert!(q.dequeue(now).is_none() || t <= now);
    }
}

#[test]
fn reset_and_requeue_keep_the_counts() {
    let mut q = Hfsc::new(h(0), 1, 10);
    q.add_class(h(1), h(0), ls(8000)).unwrap();
    for i in 0..3 {
        q.enqueue(Packet::new(100, i), Time::ZERO).unwrap();
    }
    let p = q.dequeue(Time::ZERO).unwrap();
    q.requeue(p, Time::ZERO).unwrap();
    assert_eq!((q.qlen(), q.stats().requeues, q.stats().packets), (3, 1, 0));
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 0);
    assert_eq!(q.reset().len(), 2);
    assert_eq!(q.next_event(Time::ZERO), None);
    q.enqueue(Packet::new(100, 9), Time::ZERO).unwrap();
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 9);
}

#[test]
fn a_changed_real_time_curve_applies_to_a_backlogged_class() {
    let mut q = Hfsc::new(h(0), 0, 1000);
    let rt = |bits| Curves { rt: Some(ServiceCurve::linear(bps(bits))), ..Curves::default() };
    q.add_class(h(1), h(0), rt(1_000_000)).unwrap();
    let mut ids = 0;
    let mbit = |sent: &[(Packet, Time)], from: Time, to: Time| {
        let b: u64 = sent.iter().filter(|(_, t)| *t > from && *t <= to).map(|(p, _)| p.len as u64).sum();
        b as f64 * 8.0 / to.since(from).as_secs_f64() / 1e6
    };
    let mut changed = false;
    let sent = run_link(&mut q, 100_000_000, Time::from_secs(4), |q, _, now| {
        keep_full(q, 1, 1000, 10, now, &mut ids);
        if !changed && now >= Time::from_secs(2) {
            q.change_class(h(1), rt(2_000_000), now).unwrap();
            changed = true;
        }
    });
    let (before, after) =
        (mbit(&sent, Time::ZERO, Time::from_secs(2)), mbit(&sent, Time::from_secs(2), Time::from_secs(4)));
    assert!((before - 1.0).abs() < 0.02 && (after - 2.0).abs() < 0.04, "{before} then {after} Mbit/s");
    assert_eq!(q.class_stats(h(1)).unwrap().rtwork, q.class_stats(h(1)).unwrap().stats.bytes);
}

#[test]
fn a_child_that_holds_packets_back_makes_the_qdisc_wait_not_spin() {
    let mut q = Hfsc::new(h(0), 1, 1000);
    q.add_class(h(1), h(0), ls(10_000_000)).unwrap();
    let tbf = crate::tbf::holding_child();
    q.set_class_qdisc(h(1), Some(Box::new(tbf))).unwrap();
    for i in 0..3 {
        q.enqueue(Packet::new(1500, i), Time::ZERO).unwrap();
    }
    assert_eq!(q.dequeue(Time::ZERO).unwrap().payload, 0);
    assert!(q.dequeue(Time::ZERO).is_none(), "the TBF holds packet 1");
    let t = q.next_event(Time::ZERO).unwrap();
    assert!(t > Time::ZERO, "next event {t:?}");
    assert_eq!(q.dequeue(t).unwrap().payload, 1);
    assert_eq!(q.qlen(), 1);
}
