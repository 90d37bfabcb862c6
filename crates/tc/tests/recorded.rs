//! Show and state details checked against answers recorded from the real `tc` (iproute2 6.1 on
//! Linux 6.18, in a namespace of its own; `tests/recorded/`): mq classes and their default
//! qdiscs, size tables under `-d`, HTB change refused, HTB prio clamped to 7, u16 overhead/mpu,
//! protocol names (`ppp_ses`), the protocol-mismatch refusal, automatic prefs counting down
//! from 49152, unknown objects exiting 255, `qdisc ls`, `class show classid`, TBF peakrate.

use sluice_tc::model::{DevKind, Device};
use sluice_tc::{run_tc, Outcome, State};

fn rec(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn tc(s: &mut State, line: &str) -> Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(s, &argv)
}

/// The recording's devices: vx/vy with two transmit queues, vm/vn with one.
fn devices() -> State {
    let mut s = State::default();
    for (a, b, q) in [("vx", "vy", 2), ("vm", "vn", 1)] {
        for (n, p) in [(a, b), (b, a)] {
            let idx = s.next_ifindex;
            s.next_ifindex += 1;
            let mut d = Device::new(n, DevKind::Veth { peer: p.into() }, idx);
            d.num_tx_queues = q;
            s.devices.push(d);
        }
    }
    s
}

/// Runs `line`, requiring success and no output.
fn ok(s: &mut State, line: &str) {
    let o = tc(s, line);
    assert_eq!((o.code, o.stdout.as_str(), o.stderr.as_str()), (0, "", ""), "{line}");
}

/// Runs `line` and compares with the recorded `NAME.rc`/`NAME.err`.
fn fails_as(s: &mut State, line: &str, name: &str) {
    let before = s.clone();
    let o = tc(s, line);
    assert_eq!(o.code.to_string(), rec(&format!("{name}.rc")).trim(), "{line}");
    assert_eq!(o.stderr, rec(&format!("{name}.err")), "{line}");
    assert_eq!(*s, before, "a failed command changed the state: {line}");
}

#[test]
fn recorded_answers_of_tc() {
    let mut s = devices();
    ok(&mut s, "qdisc add dev vx root handle 7fff: mq");
    ok(&mut s, "qdisc add dev vx parent 0x7fff:0x1 handle 0x1: htb default 2");
    assert_eq!(tc(&mut s, "qdisc show dev vx").stdout, rec("mq_qdisc.txt"));
    assert_eq!(tc(&mut s, "class show dev vx").stdout, rec("mq_class.txt"));
    assert_eq!(tc(&mut s, "class show dev vx classid 7fff:2").stdout, rec("mq_one.txt"));
    fails_as(&mut s, "qdisc add dev vm root mq", "mq_single");
    ok(&mut s, "qdisc add dev vm root handle 1: stab overhead 44 linklayer atm htb default 12");
    assert_eq!(tc(&mut s, "-d qdisc show dev vm").stdout, rec("stab.txt"));
    fails_as(&mut s, "qdisc change dev vm root handle 1: htb default 5", "htbchange");
    ok(&mut s, "class add dev vm parent 1: classid 1:1 htb rate 1mbit prio 9");
    assert_eq!(tc(&mut s, "class show dev vm").stdout, rec("prio9.txt"));
    fails_as(&mut s, "class add dev vm parent 1: classid 1:2 htb rate 1mbit overhead -2147483648", "ovh");
    fails_as(&mut s, "class add dev vm parent 1: classid 1:2 htb rate 1mbit mpu 4294967295", "mpu");
    ok(&mut s, "filter add dev vm parent 1: protocol 0x8864 prio 3 u32 match u32 0 0 flowid 1:1");
    fails_as(
        &mut s,
        "filter add dev vm parent 1: protocol ip prio 3 u32 match u32 0 0 flowid 1:1",
        "mismatch",
    );
    ok(&mut s, "filter add dev vm parent 1: u32 match u32 0 0 flowid 1:1");
    ok(&mut s, "filter add dev vm parent 1: u32 match u32 0 0 flowid 1:1");
    assert_eq!(tc(&mut s, "filter show dev vm").stdout, rec("filters.txt"));
    fails_as(&mut s, "foo", "foo");
    assert_eq!(tc(&mut s, "qdisc ls dev vm").stdout, rec("ls.txt"));
    ok(
        &mut s,
        "qdisc add dev vn root handle 2: tbf rate 1mbit burst 10k latency 20ms peakrate 2mbit mtu 1600",
    );
    assert_eq!(tc(&mut s, "qdisc show dev vn").stdout, rec("tbfpeak.txt"));
    assert_eq!(tc(&mut s, "-d qdisc show dev vn").stdout, rec("tbfpeak_d.txt"));
}
