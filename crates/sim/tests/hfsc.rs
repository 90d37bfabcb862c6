//! HFSC through the one engine, measured from simulator runs.

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

fn run_src(name: &str, src: &str) -> Results {
    let sc = Scenario::parse(name, src).unwrap_or_else(|e| panic!("{e}"));
    run(&sc, &RunOptions::default(), &|_| {}).unwrap_or_else(|e| panic!("{e}")).0
}

/// Two UDP floods (12 Mbit/s each) in classes `ls m2 6mbit` and `ls m2 4mbit` under a parent
/// `ls m2 10mbit ul m2 10mbit`, on a 100 Mbit/s link: the upper limit is the bottleneck and the
/// two backlogged classes split it 6:4. Tolerance: 1% of each curve.
#[test]
fn link_share_curves_split_an_upper_limited_parent() {
    let src = r#"
name = "hfsc-share"
description = "two floods in HFSC classes ls 6mbit and 4mbit under ul 10mbit"
duration = "6s"
warmup = "1s"
[[link]]
name = "eth0"
rate = "100mbit"
queue = "shaper"
[shaper]
tc = """
tc qdisc add dev eth0 root handle 1: hfsc
tc class add dev eth0 parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit
tc class add dev eth0 parent 1:1 classid 1:10 hfsc ls m2 6mbit
tc class add dev eth0 parent 1:1 classid 1:20 hfsc ls m2 4mbit
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10
tc filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 5002 0xffff flowid 1:20
"""
[[flow]]
name = "six"
type = "cbr"
rate = "12mbit"
size = 1500
port = 5001
[[flow]]
name = "four"
type = "cbr"
rate = "12mbit"
size = 1500
port = 5002
"#;
    let r = run_src("hfsc.toml", src);
    let c = &r.cases[0];
    let bps = |n: &str| c.flows.iter().find(|f| f.name == n).unwrap().achieved_bps;
    let (six, four) = (bps("six"), bps("four"));
    assert!((six - 6e6).abs() < 0.06e6, "ls 6mbit class got {six} bit/s");
    assert!((four - 4e6).abs() < 0.04e6, "ls 4mbit class got {four} bit/s");
}

/// The built-in `hfsc-voice` scenario: the real-time class's frames (6000 bytes every 100 ms)
/// meet their curve's 10 ms bound under HFSC beside either bulk load: the largest latency is at
/// most the 10 ms link delay, the 10 ms bound, and the frame's own 4.8 ms on the 10 Mbit/s modem
/// link. HTB with the same rates (and with prio) makes them wait for tokens, beyond that bound.
#[test]
fn a_real_time_curve_bounds_the_delay_where_htb_rates_do_not() {
    let sc = Scenario::find("hfsc-voice").unwrap();
    let r = run(&sc, &RunOptions::default(), &|_| {}).unwrap().0;
    let max = |case: &str| {
        let c = r.cases.iter().find(|c| c.name == case).unwrap_or_else(|| panic!("no case {case}"));
        c.flows.iter().find(|f| f.name == "call").unwrap().latency_ms.max
    };
    let bound = 10.0 + 10.0 + 4.8;
    for load in ["tcp", "flood"] {
        let hfsc = max(&format!("load={load},shaper=hfsc"));
        let htb = max(&format!("load={load},shaper=htb"));
        let prio = max(&format!("load={load},shaper=htb-prio"));
        assert!(hfsc <= bound, "{load}: hfsc max {hfsc} ms above {bound} ms");
        assert!(htb > bound && prio > bound, "{load}: htb {htb} / htb-prio {prio} ms within {bound} ms");
    }
}
