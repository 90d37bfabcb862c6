//! Tests of `sluice_model::kinds::netem` that need the tc front end.

use sluice_model::model::State;
use sluice_tc::tc::run_tc;

fn tc(state: &mut State, line: &str) -> sluice_tc::tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(state, &argv)
}

fn show(cmd: &str) -> String {
    let mut s = sluice_tc::conform::fresh_state();
    let o = tc(&mut s, &format!("qdisc add dev dummy1 root handle 1: {cmd}"));
    assert_eq!(o.code, 0, "{cmd}: {}", o.stderr);
    let out = tc(&mut s, "qdisc show dev dummy1").stdout;
    out.lines().next().unwrap().split_once("refcnt 2 ").map(|x| x.1.to_string()).unwrap_or(out)
}

#[test]
fn prints_like_iproute2() {
    assert_eq!(show("netem"), "limit 1000");
    assert_eq!(show("netem delay 40ms 5ms loss 0.5%"), "limit 1000 delay 40ms  5ms loss 0.5%");
    assert_eq!(show("netem delay 100ms 10ms 25% distribution normal"), "limit 1000 delay 100ms  10ms 25%");
    assert_eq!(
        show(
            "netem delay 10.0ms 2.0ms distribution normal loss 0.1% duplicate 0.5% corrupt 0.01% reorder 1%"
        ),
        "limit 1000 delay 10ms  2ms loss 0.1% duplicate 0.5% reorder 1% corrupt 0.01% gap 1"
    );
    assert_eq!(
        show("netem loss gemodel 1% 10% 70% 0.1%"),
        "limit 1000 loss gemodel p 1% r 10% 1-h 70% 1-k 0.1%"
    );
    assert_eq!(show("netem loss random 2% 30%"), "limit 1000 loss 2% 30%");
    assert_eq!(show("netem loss 1% ecn"), "limit 1000 loss 1% ecn ");
    assert_eq!(
        show("netem rate 1mbit -20 48 5"),
        "limit 1000 rate 1Mbit packetoverhead -20 cellsize 48 celloverhead 5"
    );
    assert_eq!(show("netem slot 1ms 5ms packets 10"), "limit 1000 slot 1ms 5ms packets 10");
    // 10 µs is 156 ticks: the kernel keeps 9984 ns, tc prints 9 µs.
    assert_eq!(show("netem delay 10us"), "limit 1000 delay 9us");
}

#[test]
fn refuses_like_tc() {
    let mut s = sluice_tc::conform::fresh_state();
    for (cmd, msg) in [
        ("netem reorder 10%", "reordering not possible without specifying some delay"),
        ("netem delay 10ms gap 5", "gap specified without reorder probability"),
        ("netem ecn", "ecn requested without loss model"),
        ("netem distribution normal", "distribution specified but no latency and jitter values"),
        ("netem loss 1% loss 2%", "Illegal \"duplicate loss argument\n\""),
        ("netem loss 120%", "Illegal \"loss percent\""),
        ("netem loss bogus 1", "Unknown loss parameter: bogus"),
        ("netem delay 10ms 1ms distribution nosuchtable", "No distribution data for nosuchtable"),
        ("netem slot 5ms 1ms", "Illegal \"slot max_delay\""),
        ("netem bogus", "What is \"bogus\"?"),
    ] {
        let o = tc(&mut s, &format!("qdisc add dev dummy1 root handle 1: {cmd}"));
        assert_ne!(o.code, 0, "{cmd}");
        assert!(o.stderr.contains(msg), "{cmd}: {}", o.stderr);
    }
}

#[test]
fn change_keeps_what_tc_does_not_send() {
    let mut s = sluice_tc::conform::fresh_state();
    assert_eq!(
        tc(&mut s, "qdisc add dev dummy1 root handle 1: netem delay 10ms corrupt 1% rate 1mbit").code,
        0
    );
    assert_eq!(tc(&mut s, "qdisc change dev dummy1 root handle 1: netem delay 20ms loss state 1%").code, 0);
    let out = tc(&mut s, "qdisc show dev dummy1").stdout;
    assert!(
        out.contains("delay 20ms loss state p13 1% p31 99% p32 0% p23 100% p14 0% corrupt 1% rate 1Mbit"),
        "{out}"
    );
    assert_eq!(tc(&mut s, "qdisc change dev dummy1 root handle 1: netem delay 20ms").code, 0);
    let out = tc(&mut s, "qdisc show dev dummy1").stdout;
    assert!(!out.contains("loss"), "the loss model goes back to random loss: {out}");
}
