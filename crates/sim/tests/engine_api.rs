//! Unit tests of the engine's contract: ownership, counters, reload order.

use sluice_core::fifo::Fifo;
use sluice_core::{DropReason, Packet, Span, Time};
use sluice_engine::{CopyTo, Engine, Program, ProgramOptions, Received, Verdict};
use sluice_tc::script::load_tc_script;

fn program(script: &str) -> Program {
    let state = load_tc_script("t.tc", script, &Default::default()).expect("script loads").state;
    Program::from_model(&state, "e", &ProgramOptions::default()).expect("builds")
}

fn ingress(e: &mut Engine, payload: u64, now: Time) -> Verdict {
    e.ingress(Packet::new(1000, payload), &Default::default(), &[], now)
}

fn drain(e: &mut Engine) -> Vec<(u64, DropReason)> {
    std::iter::from_fn(|| e.take_dropped()).map(|d| (d.pkt.payload, d.reason)).collect()
}

/// Serves `e` until empty, stepping to each `next_event`; returns the payloads in order.
fn serve_all(e: &mut Engine, mut now: Time) -> Vec<u64> {
    let mut out = Vec::new();
    while let Some(t) = e.next_event(now) {
        now = t.max(now);
        while let Some(p) = e.dequeue(now) {
            out.push(p.payload);
        }
        assert!(now < Time::from_secs(1000), "never drained");
    }
    out
}

#[test]
fn a_missing_device_is_named() {
    let state =
        load_tc_script("t.tc", "tc qdisc add dev eth0 root pfifo\n", &Default::default()).unwrap().state;
    let e = Program::from_model(&state, "eth1", &ProgramOptions::default()).unwrap_err();
    assert!(e.to_string().contains("eth1") && e.to_string().contains("$DEV"), "{e}");
    // What the engine cannot run is named.
    let e = Program::from_model(
        &load_tc_script(
            "t",
            "tc qdisc add dev e root handle 1: htb\n\
             tc filter add dev e parent 1: matchall action police avrate 1mbit conform-exceed drop\n",
            &Default::default(),
        )
        .unwrap()
        .state,
        "e",
        &ProgramOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("avrate"), "{e}");
}

#[test]
fn the_live_floor_raises_htb_buckets_and_says_so() {
    let script = "tc qdisc add dev e root handle 1: htb default 1\ntc class add dev e parent 1: classid 1:1 htb rate 100mbit burst 1600 cburst 1600\n";
    let exact = program(script);
    assert!(!exact.summary().contains("raised"), "{}", exact.summary());
    let state = load_tc_script("t.tc", script, &Default::default()).unwrap().state;
    let live = Program::from_model(&state, "e", &ProgramOptions::live(Span::from_millis(2))).unwrap();
    assert_eq!(
        live.summary(),
        "htb root, 1 classes (1:1 rate 100Mbit), 0 filters; 1 buckets raised to rate x max(1ms, 2000us)"
    );
    // 2 ms at 100 Mbit/s is 25 000 bytes: that much leaves at once from a full queue.
    let burst = |p: Program| {
        let mut e = Engine::new(p, Time::ZERO);
        for i in 0..100 {
            let _ = ingress(&mut e, i, Time::ZERO);
        }
        std::iter::from_fn(|| e.dequeue(Time::ZERO)).count()
    };
    assert!(burst(exact) <= 3);
    assert!(burst(live) >= 24);
}

#[test]
fn refused_packets_come_back_once_and_are_counted() {
    let mut e = Engine::new(program("tc qdisc add dev e root pfifo limit 2\n"), Time::ZERO);
    assert_eq!(ingress(&mut e, 1, Time::ZERO), Verdict::Queued);
    assert_eq!(ingress(&mut e, 2, Time::ZERO), Verdict::Queued);
    assert_eq!(ingress(&mut e, 3, Time::ZERO), Verdict::Dropped(DropReason::QueueFull));
    assert_eq!(drain(&mut e), vec![(3, DropReason::QueueFull)]);
    assert!(drain(&mut e).is_empty());
    let s = e.stats();
    assert_eq!((s.received, s.enqueue_drops, s.dropped, s.queued, s.qdisc.drops), (3, 1, 1, 2, 1));
    assert_eq!(serve_all(&mut e, Time::ZERO), vec![1, 2]);
    assert_eq!(e.stats().sent_packets, 2);
}

#[test]
fn head_drops_of_queued_packets_come_back_too() {
    let mut e = Engine::new(program("tc qdisc add dev e root pfifo_head_drop limit 2\n"), Time::ZERO);
    for i in 1..=3 {
        assert_eq!(ingress(&mut e, i, Time::ZERO), Verdict::Queued);
    }
    assert_eq!(drain(&mut e), vec![(1, DropReason::HeadDrop)]);
    assert_eq!(e.stats().qdisc_drops, 1);
    assert_eq!(serve_all(&mut e, Time::ZERO), vec![2, 3]);
}

#[test]
fn filter_drops_and_runts_are_counted_and_handed_back() {
    let mut e = Engine::new(
        program("tc qdisc add dev e root handle 1: prio\ntc filter add dev e parent 1: protocol all prio 1 matchall action drop\n"),
        Time::ZERO,
    );
    assert_eq!(ingress(&mut e, 7, Time::ZERO), Verdict::Dropped(DropReason::Policed));
    assert_eq!(e.ingress_frame(&[0u8; 10], 8, Time::ZERO), Verdict::Dropped(DropReason::Malformed));
    assert_eq!(drain(&mut e), vec![(7, DropReason::Policed), (8, DropReason::Malformed)]);
    let s = e.stats();
    assert_eq!((s.classify_drops, s.runts, s.parse_errors, s.dropped, s.qdisc.drops), (1, 1, 1, 2, 1));
}

#[test]
fn reload_keeps_order_and_loses_nothing_even_during_a_reload() {
    let slow = "tc qdisc add dev e root tbf rate 1mbit burst 2000 limit 100000\n";
    let fast = "tc qdisc add dev e root tbf rate 100mbit burst 2000 limit 100000\n";
    let mut e = Engine::new(program(slow), Time::ZERO);
    let now = Time::ZERO;
    for i in 0..20 {
        assert_eq!(ingress(&mut e, i, now), Verdict::Queued);
    }
    e.reload(program(fast), now);
    for i in 20..40 {
        assert_eq!(ingress(&mut e, i, now), Verdict::Queued);
    }
    e.reload(program(slow), now);
    assert_eq!(e.stats().draining, 2);
    for i in 40..50 {
        assert_eq!(ingress(&mut e, i, now), Verdict::Queued);
    }
    assert_eq!(serve_all(&mut e, now), (0..50).collect::<Vec<u64>>());
    assert!(drain(&mut e).is_empty());
    let s = e.stats();
    assert_eq!((s.sent_packets, s.dropped, s.queued, s.reloads, s.draining), (50, 0, 0, 2, 0));
    assert_eq!((s.qdisc.packets, s.qdisc.drops, s.qdisc.qlen), (50, 0, 0));
}

#[test]
fn drops_in_a_draining_generation_are_counted_once() {
    // The old fq_codel drops on its own while it drains behind a throttle-free new root.
    let mut e = Engine::new(
        program("tc qdisc add dev e root handle 1: htb default 1\ntc class add dev e parent 1: classid 1:1 htb rate 1mbit\ntc qdisc add dev e parent 1:1 fq_codel limit 5\n"),
        Time::ZERO,
    );
    for i in 0..8 {
        let _ = ingress(&mut e, i, Time::ZERO);
    }
    let early = drain(&mut e);
    assert_eq!(early.len(), 3, "{early:?}");
    e.reload(program("tc qdisc add dev e root pfifo limit 1\n"), Time::ZERO);
    assert_eq!(ingress(&mut e, 8, Time::ZERO), Verdict::Queued);
    assert_eq!(ingress(&mut e, 9, Time::ZERO), Verdict::Dropped(DropReason::QueueFull));
    let mut sent = serve_all(&mut e, Time::ZERO);
    let mut dropped: Vec<u64> = early.iter().map(|d| d.0).chain(drain(&mut e).iter().map(|d| d.0)).collect();
    assert_eq!(*sent.last().unwrap(), 8, "the new generation sends last");
    let s = e.stats();
    assert_eq!(s.dropped as usize, dropped.len());
    assert_eq!(s.sent_packets as usize, sent.len());
    sent.append(&mut dropped);
    sent.sort_unstable();
    assert_eq!(sent, (0..10).collect::<Vec<u64>>());
}

#[test]
fn flush_gives_back_every_queued_payload() {
    let mut e = Engine::new(Program::from_parts(Box::new(Fifo::pfifo(100)), Default::default()), Time::ZERO);
    for i in 0..5 {
        let _ = ingress(&mut e, i, Time::ZERO);
    }
    e.reload(Program::from_parts(Box::new(Fifo::pfifo(100)), Default::default()), Time::ZERO);
    for i in 5..7 {
        let _ = ingress(&mut e, i, Time::ZERO);
    }
    assert_eq!(e.flush(Time::ZERO), 7);
    let d = drain(&mut e);
    assert_eq!(d.iter().map(|d| d.0).collect::<Vec<_>>(), (0..7).collect::<Vec<u64>>());
    assert!(d.iter().all(|d| d.1 == DropReason::Flushed));
    let s = e.stats();
    assert_eq!((s.flushed, s.dropped, s.queued, s.draining), (7, 7, 0, 0));
    assert_eq!(e.next_event(Time::ZERO), None);
}

#[test]
fn the_summary_counts_filters_not_u32_tables() {
    let p = program(
        "tc qdisc add dev e root handle 1: htb default 20\n\
         tc class add dev e parent 1: classid 1:10 htb rate 5mbit\n\
         tc class add dev e parent 1: classid 1:20 htb rate 40mbit ceil 50mbit\n\
         tc filter add dev e parent 1: protocol ip prio 1 u32 match ip dport 7401 0xffff flowid 1:10\n",
    );
    assert_eq!(p.summary(), "htb root, 2 classes (1:10 rate 5Mbit, 1:20 rate 40Mbit ceil 50Mbit), 1 filters");
}

#[test]
fn a_native_configuration_with_a_wide_minor_runs_and_filters_reach_it() {
    // The TOML form takes 32-bit minors; a matchall filter sends everything to 1:12345.
    let text = include_str!("../tests/wide-minor.toml");
    let state = sluice_tc::export::from_toml(text).expect("toml loads");
    let mut e =
        Engine::new(Program::from_model(&state, "e", &ProgramOptions::default()).unwrap(), Time::ZERO);
    assert!(e.summary().contains("1:12345 rate 100Mbit"), "{}", e.summary());
    for i in 0..3 {
        assert_eq!(ingress(&mut e, i, Time::ZERO), Verdict::Queued);
    }
    let p = e.dequeue(Time::ZERO).expect("the 100 Mbit/s class sends at once");
    assert_eq!(p.class_path[0], sluice_core::Handle::new(1, 0x12345));
}

/// The sqm setup: eth0's ingress redirects everything to ifb0, whose HTB shapes it.
#[test]
fn ingress_redirect_to_an_ifb_is_shaped_there() {
    let script = "ip link add ifb0 type ifb\n\
                  ip link add eth0 type veth peer name eth1\n\
                  tc qdisc add dev ifb0 root handle 1: htb default 11\n\
                  tc class add dev ifb0 parent 1: classid 1:1 htb rate 8mbit\n\
                  tc class add dev ifb0 parent 1:1 classid 1:11 htb rate 8mbit\n\
                  tc qdisc add dev eth0 handle ffff: ingress\n\
                  tc filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 \
                  action mirred egress redirect dev ifb0\n";
    let state = sluice_tc::script::load_tc_script("sqm.tc", script, &Default::default()).unwrap().state;
    let opts = ProgramOptions::default();
    let wan = Program::from_model(&state, "eth0", &opts).unwrap();
    assert!(wan.has_ingress_hook());
    let mut wan = Engine::new(wan, Time::ZERO);
    let mut ifb = Engine::new(Program::from_model(&state, "ifb0", &opts).unwrap(), Time::ZERO);
    let now = Time::ZERO;
    for payload in 0..100 {
        // u32 reads the frame: a zeroed one matches `match u32 0 0`.
        match wan.receive(Packet::new(1000, payload), &Default::default(), &[0u8; 64], now) {
            Received::Taken(Verdict::Redirected) => {}
            other => panic!("not redirected: {other:?}"),
        }
        let r = wan.take_redirected().expect("redirected");
        assert_eq!(wan.device_name(r.target.dev), Some("ifb0"));
        assert!(!r.target.ingress);
        assert_eq!(ifb.ingress(r.pkt, &Default::default(), &[], now), Verdict::Queued);
    }
    let s = wan.stats();
    assert_eq!((s.received, s.rx_packets, s.redirected, s.delivered, s.dropped), (100, 100, 100, 0, 0));
    // 8 Mbit/s is 1000 bytes per ms: over 50 ms the IFB sends about 50 packets plus its burst.
    let mut sent = 0;
    let mut t = now;
    while t < Time::from_millis(50) {
        while ifb.dequeue(t).is_some() {
            sent += 1;
        }
        t += sluice_core::Span::from_micros(100);
    }
    assert!((45..=60).contains(&sent), "{sent} packets in 50 ms at 8 Mbit/s");
    let s = ifb.stats();
    assert_eq!(s.received, s.sent_packets + s.queued + s.dropped);
}

#[test]
fn a_device_without_ingress_filters_delivers_what_it_receives() {
    let script = "tc qdisc add dev eth0 root handle 1: pfifo\n";
    let state = sluice_tc::script::load_tc_script("x.tc", script, &Default::default()).unwrap().state;
    let mut e =
        Engine::new(Program::from_model(&state, "eth0", &ProgramOptions::default()).unwrap(), Time::ZERO);
    match e.receive(Packet::new(100, 7), &Default::default(), &[], Time::ZERO) {
        Received::Pass(p) => assert_eq!(p.payload, 7),
        other => panic!("{other:?}"),
    }
    let s = e.stats();
    assert_eq!((s.received, s.delivered), (1, 1));
}

/// Offers `n` packets (payloads 0..n) and re-offers every netem duplicate under a new payload
/// (1000 + original); returns the payloads served and the engine.
fn with_duplicates(script: &str, n: u64) -> (Vec<u64>, Engine) {
    let mut e = Engine::new(program(script), Time::ZERO);
    let mut out = Vec::new();
    for i in 0..n {
        // One packet every 100 us: under 100 Mbit/s, nothing waits long.
        let now = Time::from_micros(100 * i);
        let _ = ingress(&mut e, i, now);
        while let Some(c) = e.take_copy() {
            assert_eq!(c.to, CopyTo::Root);
            assert_eq!(c.pkt.payload, i, "the copy names its original");
            let mut p = c.pkt;
            p.payload = 1000 + i;
            let _ = e.ingress_copy(p, &Default::default(), &[], now);
            assert!(e.take_copy().is_none(), "a duplicate is not duplicated again");
        }
        while let Some(p) = e.dequeue(now) {
            out.push(p.payload);
        }
    }
    out.extend(serve_all(&mut e, Time::from_micros(100 * n)));
    assert!(e.take_dropped().is_none());
    (out, e)
}

#[test]
fn netem_duplicates_come_back_once_under_their_own_handle() {
    let (out, e) = with_duplicates("tc qdisc add dev e root netem delay 1ms duplicate 100%\n", 5);
    let mut sorted = out.clone();
    sorted.sort();
    assert_eq!(sorted, [0, 1, 2, 3, 4, 1000, 1001, 1002, 1003, 1004]);
    let s = e.stats();
    assert_eq!((s.duplicated, s.received, s.sent_packets, s.dropped, s.queued), (5, 10, 10, 0, 0));
    assert_eq!(s.qdisc.packets, 10);
}

/// Under HTB the copy goes through the root and is classified again (the kernel's
/// `rootq->enqueue`), so HTB counts both packets and nothing is stranded in the leaf.
#[test]
fn a_duplicating_netem_leaf_keeps_its_parents_counts() {
    let script = "tc qdisc add dev e root handle 1: htb default 10\n\
                  tc class add dev e parent 1: classid 1:10 htb rate 100mbit\n\
                  tc qdisc add dev e parent 1:10 handle 10: netem duplicate 50%\n";
    let (out, e) = with_duplicates(script, 2000);
    let s = e.stats();
    assert!((850..1150).contains(&s.duplicated), "{} duplicates of 2000 at 50%", s.duplicated);
    assert_eq!(out.len() as u64, 2000 + s.duplicated);
    assert_eq!((s.queued, s.qdisc.qlen, s.qdisc.backlog_bytes), (0, 0, 0));
    // The same seed gives the same duplicates.
    assert_eq!(with_duplicates(script, 2000).0, out);
}

#[test]
fn a_mirror_copies_and_the_original_goes_on() {
    let script = "ip link add mon0 type dummy\n\
                  tc qdisc add dev e root handle 1: htb default 10\n\
                  tc class add dev e parent 1: classid 1:10 htb rate 100mbit\n\
                  tc qdisc add dev e handle ffff: ingress\n\
                  tc filter add dev e parent ffff: matchall action mirred ingress mirror dev mon0\n\
                  tc filter add dev e parent 1: matchall action mirred egress mirror dev mon0 \
                  action mirred egress mirror dev mon0\n";
    let mut e = Engine::new(program(script), Time::ZERO);
    let mon0 = (0..4).find(|&i| e.device_name(i) == Some("mon0")).expect("mon0 in the table");
    // Receive side: delivered, and an ingress copy for mon0.
    match e.receive(Packet::new(100, 1), &Default::default(), &[], Time::ZERO) {
        Received::Pass(p) => assert_eq!(p.payload, 1),
        other => panic!("{other:?}"),
    }
    let c = e.take_copy().expect("a mirror copy");
    assert_eq!(
        (c.pkt.payload, c.to),
        (1, CopyTo::Device(sluice_core::filter::MirredTarget { dev: mon0, ingress: true }))
    );
    // Egress: two mirrors, two copies; the original is queued.
    assert_eq!(ingress(&mut e, 2, Time::ZERO), Verdict::Queued);
    let copies: Vec<_> = std::iter::from_fn(|| e.take_copy()).collect();
    assert_eq!(copies.len(), 2);
    assert!(copies.iter().all(|c| c.pkt.payload == 2
        && c.to == CopyTo::Device(sluice_core::filter::MirredTarget { dev: mon0, ingress: false })));
    assert_eq!(e.dequeue(Time::ZERO).map(|p| p.payload), Some(2));
    let s = e.stats();
    assert_eq!((s.mirrored, s.redirected, s.received, s.sent_packets, s.delivered), (3, 0, 2, 1, 1));
}

/// Keeps `e` backlogged with 1000-byte packets from `t0` to `t1`, sending what it lets out;
/// returns the bytes sent in that window.
fn saturate(e: &mut Engine, t0: Time, t1: Time, next: &mut u64) -> u64 {
    let mut now = t0;
    let mut bytes = 0;
    while now < t1 {
        while e.qlen() < 50 {
            ingress(e, *next, now);
            *next += 1;
        }
        while let Some(p) = e.dequeue(now) {
            bytes += p.len as u64;
        }
        drain(e);
        now = e.next_event(now).map_or(t1, |t| t.max(now + Span::from_micros(1))).min(t1);
    }
    bytes
}

#[test]
fn a_running_class_changes_rate_and_keeps_its_queue() {
    use sluice_core::{Handle, Rate};
    let mut e = Engine::new(
        program(
            "tc qdisc add dev e root handle 1: htb default 10\n\
             tc class add dev e parent 1: classid 1:1 htb rate 8mbit\n\
             tc class add dev e parent 1:1 classid 1:10 htb rate 1mbit ceil 8mbit\n",
        ),
        Time::ZERO,
    );
    let mut next = 0;
    let s = Time::from_secs;
    let b1 = saturate(&mut e, s(0), s(1), &mut next);
    // Halve the parent while 50 packets are queued: none is lost.
    let queued = e.qlen();
    e.set_class_rate(Handle::new(1, 1), Rate::from_bps(4_000_000), Rate::from_bps(4_000_000), s(1)).unwrap();
    assert_eq!((e.qlen(), e.stats().dropped), (queued, 0));
    let b2 = saturate(&mut e, s(1), s(3), &mut next) / 2;
    // Raise it again, ceil above rate for the root class: the root class cannot borrow, so its
    // rate is the limit.
    e.set_class_rate(Handle::new(1, 1), Rate::from_bps(16_000_000), Rate::from_bps(32_000_000), s(3))
        .unwrap();
    let b3 = saturate(&mut e, s(3), s(4), &mut next);
    let near = |got: u64, want: u64| (got as f64 / want as f64 - 1.0).abs() < 0.01;
    assert!(near(b1, 1_000_000), "8 Mbit/s: {b1} B/s");
    assert!(near(b2, 500_000), "4 Mbit/s: {b2} B/s");
    // The leaf's ceil (8 Mbit/s) now limits.
    assert!(near(b3, 1_000_000), "leaf ceil 8 Mbit/s: {b3} B/s");
    assert_eq!(e.class_bytes(Handle::new(1, 1)), Some(e.stats().sent_bytes));
    assert_eq!(e.class_bytes(Handle::new(1, 99)), None);
}

#[test]
fn a_rate_change_the_tree_cannot_take_is_refused() {
    use sluice_core::{Handle, Rate};
    let r = Rate::from_bps;
    let mut e = Engine::new(
        program("tc qdisc add dev e root handle 1: htb default 1\ntc class add dev e parent 1: classid 1:1 htb rate 8mbit\n"),
        Time::ZERO,
    );
    let err = e.set_class_rate(Handle::new(1, 2), r(1000), r(1000), Time::ZERO).unwrap_err();
    assert!(err.to_string().contains("1:2 does not exist"), "{err}");
    let err = e.set_class_rate(Handle::new(1, 1), r(0), r(1000), Time::ZERO).unwrap_err();
    assert!(err.to_string().contains("rate"), "{err}");
    let err = e.set_class_rate(Handle::new(1, 1), r(2000), r(1000), Time::ZERO).unwrap_err();
    assert!(err.to_string().contains("ceil"), "{err}");
    // Nothing changed: the class still runs at 8 Mbit/s.
    let mut next = 0;
    let b = saturate(&mut e, Time::ZERO, Time::from_secs(1), &mut next);
    assert!((b as f64 / 1e6 - 1.0).abs() < 0.01, "{b}");
    let mut f = Engine::new(program("tc qdisc add dev e root pfifo\n"), Time::ZERO);
    let err = f.set_class_rate(Handle::new(1, 1), r(1000), r(1000), Time::ZERO).unwrap_err();
    assert!(err.to_string().contains("not htb"), "{err}");
}
