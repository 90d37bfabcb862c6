//! fq's per-flow pacing in the simulator: one greedy CUBIC flow behind `fq maxrate 10mbit` on a
//! 100 Mbit/s link is paced to 10 Mbit/s (measured, within 1%; BBR a few percent below); and EDT packets given to the
//! engine built from a tc script leave no earlier than their time.

use sluice_core::{Packet, Span, Time};
use sluice_engine::{Engine, Program, ProgramOptions};
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;
use sluice_tc::script::load_tc_script;

const SCENARIO: &str = r#"
name = "fq-maxrate"
description = "one CUBIC flow behind fq maxrate 10mbit on a 100 Mbit/s link"
duration = "12s"
warmup = "2s"

[params]
cc = "cubic"

[[link]]
name = "host"
rate = "100mbit"
delay = "10ms"
queue = "shaper"

[[reverse]]
name = "back"
rate = "100mbit"
delay = "10ms"

[shaper]
tc = "tc qdisc add dev eth0 root handle 1: fq maxrate 10mbit"

[[flow]]
name = "bulk"
type = "tcp"
cc = "${cc}"
"#;

#[test]
fn fq_maxrate_paces_one_tcp_flow_to_ten_mbit() {
    let sc = Scenario::parse("fq-maxrate.toml", SCENARIO).unwrap_or_else(|e| panic!("{e}"));
    for cc in ["cubic", "bbr"] {
        let opts = RunOptions { overrides: vec![("cc".into(), cc.into())], ..Default::default() };
        let r = run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0;
        let bps = r.cases[0].flows[0].achieved_bps;
        eprintln!("{cc}: {bps:.0} bit/s through fq maxrate 10mbit");
        if cc == "cubic" {
            assert!((bps - 10e6).abs() / 10e6 < 0.01, "{cc}: {bps} bit/s");
        } else {
            // BBR's own gain cycle (0.75 phases) and ProbeRTT (cwnd 4 for 200 ms every 10 s)
            // leave fq's queue empty at times: never above the cap, a few percent below it.
            assert!(bps < 10.1e6 && bps > 9.5e6, "{cc}: {bps} bit/s");
        }
    }
}

#[test]
fn edt_packets_are_not_sent_before_their_time() {
    let state = load_tc_script("t.tc", "tc qdisc add dev eth0 root fq\n", &Default::default()).unwrap().state;
    let mut e =
        Engine::new(Program::from_model(&state, "eth0", &ProgramOptions::default()).unwrap(), Time::ZERO);
    let now = Time::from_millis(1);
    // One socket stamps a burst with departure times 1 ms apart, out of order for two of them.
    let times = [5u64, 3, 2, 4, 6, 9, 7, 8];
    for (i, ms) in times.iter().enumerate() {
        let mut p = Packet::new(1500, i as u64);
        p.sock = 42;
        p.tstamp = Time::from_millis(*ms);
        let _ = e.ingress(p, &Default::default(), &[], now);
    }
    let mut t = now;
    let mut out = Vec::new();
    let mut steps = 0;
    while let Some(next) = e.next_event(t) {
        steps += 1;
        assert!(steps < 100, "the engine does not advance at {t:?}");
        t = next.max(t);
        match e.dequeue(t) {
            Some(p) => {
                assert!(t >= p.tstamp, "packet due at {:?} sent at {t:?}", p.tstamp);
                out.push(p.tstamp.as_nanos() / 1_000_000);
            }
            None => t = t.max(e.next_event(t).unwrap_or(t)),
        }
        assert!(t < Time::ZERO + Span::from_secs(1));
    }
    assert_eq!(out, vec![2, 3, 4, 5, 6, 7, 8, 9]);
}

#[test]
fn the_fq_pacing_scenario_compares_fq_and_htb() {
    let sc = Scenario::find("fq-pacing").unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, &RunOptions::default(), &|_| {}).unwrap_or_else(|e| panic!("{e}")).0;
    assert_eq!(r.cases.len(), 4);
    for c in &r.cases {
        let f = &c.flows[0];
        eprintln!(
            "{}: {:.3} Mbit/s, latency p50 {:.1} ms p99 {:.1} ms, loss {:.2}%",
            c.name,
            f.achieved_bps / 1e6,
            f.latency_ms.p50,
            f.latency_ms.p99,
            f.loss_pct
        );
        // Either way the flow gets its 10 Mbit/s, give or take BBR's own cycles.
        assert!(f.achieved_bps < 10.1e6 && f.achieved_bps > 9.5e6, "{}: {}", c.name, f.achieved_bps);
    }
}
