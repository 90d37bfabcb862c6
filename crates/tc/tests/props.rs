//! Properties over random tc command sequences: no panics, failures change nothing, and every
//! reachable configuration exports to a tc script and a TOML file that load back identical.

use proptest::prelude::*;
use sluice_tc::export::{from_toml, normalized, to_tc_script, to_toml};
use sluice_tc::script::load_tc_script;
use sluice_tc::{run_ip, run_tc, State};

const WORDS: &[&str] = &[
    "qdisc",
    "class",
    "filter",
    "add",
    "del",
    "change",
    "replace",
    "show",
    "dev",
    "eth0",
    "root",
    "parent",
    "handle",
    "1:",
    "1:1",
    "1:10",
    "10:",
    "2:",
    "htb",
    "prio",
    "tbf",
    "rate",
    "1mbit",
    "10gbit",
    "burst",
    "10k",
    "limit",
    "100",
    "bands",
    "3",
    "u32",
    "match",
    "ip",
    "src",
    "1.2.3.4/32",
    "flowid",
    "classid",
    "flow",
    "hash",
    "keys",
    "src,dst",
    "ingress",
    "fq_codel",
    "sfq",
    "codel",
    "default",
    "10",
    "ceil",
    "priomap",
    "0",
    "1",
    "2",
    "latency",
    "50ms",
    "0xffff",
    "dport",
    "22",
    "divisor",
    "256",
    "ht",
    "800:",
    "prio",
    "protocol",
    "all",
    "action",
    "drop",
    "pfifo",
    "perturb",
    "ecn",
    "target",
    "5ms",
    "quantum",
    "1514",
    "drr",
    "hfsc",
    "sc",
    "ls",
    "ul",
    "m2",
    "10mbit",
    "dmax",
    "umax",
    "matchall",
    "fw",
    "r2q",
    "mtu",
    "9000",
];

fn command() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(prop::sample::select(WORDS), 1..16)
        .prop_map(|v| v.into_iter().map(String::from).collect())
}

/// A few structured commands so that sequences reach deep trees, mixed with random ones.
fn structured() -> impl Strategy<Value = Vec<String>> {
    let fixed = prop::sample::select(vec![
        "qdisc add dev eth0 root handle 1: htb default 10",
        "qdisc add dev eth0 root handle 1: prio",
        "class add dev eth0 parent 1: classid 1:1 htb rate 10mbit",
        "class add dev eth0 parent 1:1 classid 1:10 htb rate 1mbit ceil 10mbit",
        "qdisc add dev eth0 parent 1:10 handle 10: fq_codel",
        "qdisc add dev eth0 parent 1:1 handle 10: tbf rate 1mbit burst 10k latency 50ms",
        "qdisc add dev eth0 ingress",
        "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10",
        "filter add dev eth0 ingress prio 99 handle 42: u32 divisor 256",
        "filter add dev eth0 ingress prio 99 u32 ht 42: sample u32 0x10203040 0xff match u8 0 0 classid 1:1",
        "filter add dev eth0 parent 1: prio 2 handle 3 flow hash keys src,dst divisor 8",
        "qdisc del dev eth0 root",
        "qdisc add dev eth0 root handle 1: hfsc default 10",
        "class add dev eth0 parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit",
        "class add dev eth0 parent 1:1 classid 1:10 hfsc rt umax 1500 dmax 5ms rate 1mbit ls m2 1mbit",
        "class add dev eth0 parent 1:10 classid 1:11 hfsc rt m2 1mbit",
    ])
    .prop_map(|s: &str| s.split(' ').map(String::from).collect());
    prop_oneof![3 => fixed, 1 => command()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants(cmds in prop::collection::vec(structured(), 1..12)) {
        let mut s = State::default();
        run_ip(&mut s, &["link".into(), "add".into(), "dev".into(), "eth0".into(), "type".into(), "dummy".into()]);
        for c in &cmds {
            let before = s.clone();
            let out = run_tc(&mut s, c);
            if out.code != 0 {
                prop_assert_eq!(&s, &before, "failed command {:?} changed the state", c);
                prop_assert!(!out.stderr.is_empty(), "failure without a message: {:?}", c);
            }
        }
        let script = to_tc_script(&s);
        let back = load_tc_script("export", &script, &Default::default());
        prop_assert!(back.is_ok(), "export does not load: {:?}\n{}", back.err(), script);
        prop_assert_eq!(normalized(&back.unwrap().state), normalized(&s), "tc round trip:\n{}", script);
        let t = to_toml(&s).unwrap();
        prop_assert_eq!(from_toml(&t).unwrap(), s);
    }
}
