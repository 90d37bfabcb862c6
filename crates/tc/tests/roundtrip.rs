//! export --to tc and --to toml convert without loss.

use sluice_tc::export::{from_toml, to_tc_script, to_toml};
use sluice_tc::script::load_tc_script;
use sluice_tc::shell::Vars;

fn example(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

const MIXED: &str = "ip link add dev v0 type veth peer name v1
tc qdisc add dev v0 root handle 1: prio bands 4 priomap 1 1 2 2 3 3 0 0 1 2 3 0 0 0 0 0
tc qdisc add dev v0 parent 1:1 handle 10: tbf rate 20mbit burst 15k latency 50ms peakrate 30mbit mtu 1600 overhead 14
tc qdisc add dev v0 parent 1:2 handle 20: sfq perturb 10 headdrop redflowlimit 100000 min 8000 max 60000 probability 0.2 ecn
tc qdisc add dev v0 parent 1:3 handle 30: codel target 2ms ecn
tc qdisc add dev v0 parent 1:4 handle 40: pfifo limit 50
tc qdisc add dev v1 ingress
tc filter add dev v1 ingress prio 99 handle 43: u32 divisor 256
tc filter add dev v1 ingress protocol ip prio 98 u32 link 43: hashkey mask 0x0000ff00 at 12 match ip src 192.168.0.0/16
tc filter add dev v1 ingress protocol ip prio 1 u32 match ip src 127.0.0.1/32 match tcp dst 80 0xffff flowid 1:1 action drop
tc filter add dev v1 ingress protocol ip prio 2 handle 7 flow map key dst or 0xff rshift 3 addend 0x10
tc filter add dev v1 ingress protocol ip prio 3 handle 5/0xff fw classid 1:5 police rate 1mbit burst 10k drop
tc filter add dev v0 parent 1: protocol all prio 5 matchall classid 1:2
tc actions add action skbedit priority 1:3 mark 0x10/0xff index 4 cookie 0a0b
tc actions add action police rate 2mbit burst 20k mtu 2k peakrate 3mbit conform-exceed drop/continue overhead 8 linklayer atm index 9 action police avrate 1mbit conform-exceed pass index 10
tc filter add dev v0 parent 1: protocol ip prio 6 u32 match u32 0 0 classid 1:1 action skbedit index 4 action drop random determ pass 5 action mirred egress mirror dev v1 continue
";

const NETEM: &str = "ip link add dev v0 type veth peer name v1
tc qdisc add dev v0 root handle 1: netem limit 500 delay 40ms 5ms 25% distribution paretonormal loss 0.5% 10% reorder 1% gap 3 corrupt 0.01% rate 10mbit -4 48 5 slot 1ms 3ms packets 4 bytes 9000
tc qdisc add dev v0 parent 1:1 handle 10: netem delay 10us loss gemodel 1% 10% 70% 0.1% ecn slot distribution pareto 1ms 100us
tc qdisc add dev v1 root handle 2: netem delay 1s 100ms loss state 1% 20% 3% 40% 0.5% duplicate 0.5%
";

#[test]
fn tc_and_toml_round_trip() {
    for (name, text) in
        [("home-003.tc", example("home-003.tc")), ("mixed", MIXED.to_string()), ("netem", NETEM.to_string())]
    {
        let a = load_tc_script(name, &text, &Vars::new()).unwrap_or_else(|e| panic!("{e}"));
        let script = to_tc_script(&a.state);
        let b = load_tc_script("exported", &script, &Vars::new()).unwrap_or_else(|e| panic!("{e}\n{script}"));
        assert_eq!(a.state, b.state, "tc round trip of {name}:\n{script}");
        let t = to_toml(&a.state).unwrap();
        let c = from_toml(&t).unwrap_or_else(|e| panic!("{e}\n{t}"));
        assert_eq!(a.state, c, "toml round trip of {name}:\n{t}");
    }
}

/// Rates above `i64::MAX` bit/s (accepted by tc's grammar) survive TOML, whose integers are
/// 64-bit signed.
#[test]
fn toml_holds_rates_beyond_its_integers() {
    let text = "tc qdisc add dev eth0 root handle 1: htb default 10\n\
                tc class add dev eth0 parent 1: classid 1:10 htb rate 10000000000000000000bit\n";
    let a = load_tc_script("big", text, &Vars::new()).unwrap_or_else(|e| panic!("{e}"));
    let t = to_toml(&a.state).unwrap_or_else(|e| panic!("{e}"));
    assert!(t.contains("\"10000000000000000000bit\""), "{t}");
    assert_eq!(from_toml(&t).unwrap_or_else(|e| panic!("{e}\n{t}")), a.state);
}

/// A qdisc grafted on an HFSC class that later got a child class stays (the kernel keeps it);
/// the export must graft it before the child comes (found by the random-sequence property).
#[test]
fn a_qdisc_on_a_class_that_became_inner_is_exported_before_the_child_class() {
    let text = "tc qdisc add dev eth0 root handle 1: hfsc default 10\n\
                tc class add dev eth0 parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit\n\
                tc qdisc add dev eth0 parent 1:1 handle 10: tbf rate 1mbit burst 10k latency 50ms\n\
                tc class add dev eth0 parent 1:1 classid 1:10 hfsc rt umax 1500 dmax 5ms rate 1mbit ls m2 1mbit\n";
    let a = load_tc_script("inner", text, &Vars::new()).unwrap_or_else(|e| panic!("{e}"));
    let script = to_tc_script(&a.state);
    let b = load_tc_script("exported", &script, &Vars::new()).unwrap_or_else(|e| panic!("{e}\n{script}"));
    assert_eq!(a.state, b.state, "{script}");
}

#[test]
fn toml_accepts_tc_units_and_rejects_invalid_trees() {
    let t = r#"
[[devices]]
name = "eth0"
type = "dummy"
ifindex = 2

[[devices.qdiscs]]
handle = "1:"
parent = "root"
opts = { kind = "htb", r2q = 10, default = "10" }

[[devices.classes]]
classid = "1:10"
parent = "1:"
opts = { kind = "htb", rate = "100mbit", ceil = "1gbit", burst = "15k", cburst = 1600 }
"#;
    let s = from_toml(t).unwrap();
    let sluice_tc::model::ClassOpts::Htb(h) = &s.devices[0].classes[0].opts else { panic!() };
    assert_eq!((h.rate, h.ceil, h.burst), (100_000_000, 1_000_000_000, 15 * 1024));
    let bad = t.replace("kind = \"htb\", r2q", "kind = \"prio\", bands = 1, priomap = [0], r2q");
    assert!(from_toml(&bad).is_err());
}

/// The native form takes 32-bit class minors (one HTB with a million classes); the tc grammar
/// keeps tc's 16-bit minors and its error, and `build` makes one core HTB of it.
#[test]
fn toml_takes_wide_minors_and_tc_does_not() {
    let t = r#"
[[devices]]
name = "eth0"
type = "dummy"
ifindex = 2

[[devices.qdiscs]]
handle = "1:"
parent = "root"
opts = { kind = "htb", r2q = 10, default = "0xf4240" }

[[devices.classes]]
classid = "1:1"
parent = "1:"
opts = { kind = "htb", rate = "1gbit", ceil = "1gbit", burst = "15k", cburst = "15k" }

[[devices.classes]]
classid = "1:f4240"
parent = "1:1"
opts = { kind = "htb", rate = "1mbit", ceil = "1gbit", burst = "15k", cburst = "15k" }

[[devices.classes]]
classid = "1:ffffffff"
parent = "1:1"
opts = { kind = "htb", rate = "1mbit", ceil = "1gbit", burst = "15k", cburst = "15k" }

[[devices.filters]]
parent = "1:"
prio = 1
protocol = 3
handle = 1
opts = { kind = "matchall", classid = "1:ffffffff" }
"#;
    let s = from_toml(t).unwrap_or_else(|e| panic!("{e}"));
    let d = &s.devices[0];
    assert_eq!(d.classes[1].classid, sluice_core::Handle::new(1, 1_000_000));
    assert_eq!(d.classes[2].classid.minor(), u32::MAX);
    let again = from_toml(&to_toml(&s).unwrap()).unwrap();
    assert_eq!(again, s);
    assert!(to_toml(&s).unwrap().contains("\"1:f4240\""));
    let (dev, h) = sluice_tc::export::first_wide_handle(&s).unwrap();
    assert_eq!((dev, h.minor()), ("eth0", 1_000_000));
    // tc's grammar refuses what it cannot express, with tc's message.
    let e = load_tc_script("x.tc", &to_tc_script(&s), &Vars::new()).unwrap_err();
    assert!(e.message.contains("invalid class ID"), "{e}");
    // A minor past 32 bits is refused in TOML too.
    assert!(from_toml(&t.replace("1:ffffffff\"\nparent", "1:100000000\"\nparent")).is_err());
    // One core HTB holds them (its class index turns sparse for such scattered minors).
    let built = sluice_tc::build::build_device(&s, "eth0").unwrap();
    assert_eq!(built.root.kind(), "htb");
}
