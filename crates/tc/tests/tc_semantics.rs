//! tc grammar and kernel semantics on emulated devices: exit codes, messages, show output.

use sluice_tc::{run_ip, run_tc, State};

fn tc(s: &mut State, line: &str) -> sluice_tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(s, &argv)
}

fn setup() -> State {
    let mut s = State::default();
    let argv: Vec<String> = "link add dev eth0 type dummy".split(' ').map(String::from).collect();
    assert_eq!(run_ip(&mut s, &argv).code, 0);
    s
}

#[test]
fn exit_codes_follow_iproute2() {
    let mut s = setup();
    assert_eq!(tc(&mut s, "qdisc add dev eth0 root handle 1: prio foo").code, 1);
    assert_eq!(tc(&mut s, "qdisc add dev eth0 root handle 10000: prio").code, 255);
    assert_eq!(
        tc(&mut s, "qdisc add dev eth0 root handle 1: prio bands 1 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
            .code,
        2
    );
    assert_eq!(tc(&mut s, "qdisc add dev nope root prio").code, 1);
    assert_eq!(tc(&mut s, "qdisc add dev eth0 root handle 1: htb default 10").code, 0);
    let dup = tc(&mut s, "qdisc add dev eth0 root handle 1: htb");
    assert_eq!(dup.code, 2);
    assert_eq!(dup.stderr, "Error: Exclusivity flag on, cannot modify.\n");
    assert_eq!(tc(&mut s, "class add dev eth0 parent 1: classid 1:1 htb").code, 1, "rate is required");
    assert_eq!(tc(&mut s, "qdisc add dev eth0 parent 1:5 handle 5: pfifo").code, 2, "unknown parent class");
}

#[test]
fn failed_commands_leave_state_untouched() {
    let mut s = setup();
    tc(&mut s, "qdisc add dev eth0 root handle 1: htb");
    let before = s.clone();
    assert_ne!(tc(&mut s, "qdisc replace dev eth0 root handle 1: htb r2q foo").code, 0);
    assert_eq!(s, before);
}

#[test]
fn htb_show_matches_tc() {
    let mut s = setup();
    tc(&mut s, "qdisc add dev eth0 root handle 1: htb default 10");
    let o = tc(&mut s, "class add dev eth0 parent 1: classid 1:1 htb rate 20kbit burst 1000");
    assert!(o.stderr.contains("quantum of class 10001 is small"), "{o:?}");
    tc(&mut s, "class add dev eth0 parent 1:1 classid 1:10 htb rate 10kbit ceil 20kbit");
    let show = tc(&mut s, "class show dev eth0").stdout;
    assert!(
        show.contains("class htb 1:1 root rate 20Kbit ceil 20Kbit burst 1000b cburst 1600b \n"),
        "{show}"
    );
    assert!(
        show.contains("class htb 1:10 parent 1:1 prio 0 rate 10Kbit ceil 20Kbit burst 1600b cburst 1600b"),
        "{show}"
    );
    let q = tc(&mut s, "-s qdisc show dev eth0").stdout;
    assert!(q.starts_with("qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"), "{q}");
    // A class with children cannot be deleted, nor one a filter points at.
    assert_eq!(tc(&mut s, "class del dev eth0 classid 1:1").code, 2);
    tc(&mut s, "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10");
    assert_eq!(tc(&mut s, "class del dev eth0 classid 1:10").code, 2);
    assert_eq!(tc(&mut s, "filter del dev eth0 parent 1: prio 1").code, 0);
    assert_eq!(tc(&mut s, "class del dev eth0 classid 1:10").code, 0);
}

#[test]
fn tbf_latency_becomes_limit() {
    let mut s = setup();
    assert_eq!(
        tc(&mut s, "qdisc add dev eth0 root handle 1: tbf rate 20000 burst 1500 latency 100ms").code,
        0
    );
    let show = tc(&mut s, "qdisc show dev eth0").stdout;
    assert!(show.contains("rate 20Kbit burst 1500b lat 100ms"), "{show}");
    assert_eq!(
        tc(&mut s, "qdisc add dev eth0 root handle 2: tbf rate 1mbit burst 10k").code,
        1,
        "limit or latency is mandatory"
    );
}

#[test]
fn non_finite_probability_is_refused_before_it_reaches_the_state() {
    let mut s = setup();
    for p in ["nan", "inf", "1e309", "-0.5", "1.5"] {
        let before = s.clone();
        let o = tc(&mut s, &format!("qdisc add dev eth0 root sfq redflowlimit 100000 probability {p}"));
        assert_eq!((o.code, o.stderr.as_str()), (1, "Illegal \"probability\"\n"), "{p}");
        assert_eq!(s, before);
    }
    assert_eq!(tc(&mut s, "qdisc add dev eth0 root sfq redflowlimit 100000 probability 0.5").code, 0);
}

#[test]
fn hfsc_root_class_takes_curves_as_the_kernel_does() {
    // hfsc_change_class: the root class (the qdisc's handle) keeps the curves sent and the
    // others; a parent, if named, must be `root`; `tc qdisc change` keeps them.
    let mut s = setup();
    assert_eq!(tc(&mut s, "qdisc add dev eth0 root handle 1: hfsc default 10").code, 0);
    assert_eq!(tc(&mut s, "class add dev eth0 parent 1: classid 1:10 hfsc ls m2 5mbit").code, 0);
    assert_eq!(tc(&mut s, "class change dev eth0 classid 1: hfsc ls m2 10mbit ul m2 10mbit").code, 0);
    assert_eq!(tc(&mut s, "class change dev eth0 parent root classid 1: hfsc rt m2 1mbit").code, 0);
    let bad = tc(&mut s, "class change dev eth0 parent 1:10 classid 1: hfsc ls m2 1mbit");
    assert_eq!((bad.code, bad.stderr.trim()), (2, "RTNETLINK answers: Invalid argument"));
    assert_eq!(tc(&mut s, "qdisc change dev eth0 root handle 1: hfsc default 20").code, 0);
    let show = tc(&mut s, "class show dev eth0").stdout;
    assert!(
        show.contains(
            "class hfsc 1: root rt m1 0bit d 0us m2 1Mbit ls m1 0bit d 0us m2 10Mbit ul m1 0bit d 0us m2 10Mbit \n"
        ),
        "{show}"
    );
}
