//! mirred on the download path of the simulator: a mirror's copy is shaped on the IFB while the
//! original is delivered; `mirred ingress redirect` receives the packet on the target device
//! (past the IFB's queue); a redirect into its own ingress loops until the nesting limit drops it.

use sluice_report::{Case, FlowResult, Results};
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

/// A 20 Mbit/s line into eth0, whose ingress filters are `ingress`; ifb0 shapes at 2 Mbit/s with
/// a 100-packet FIFO. Load: 4 Mbit/s of CBR on port 80 and a 200 kbit/s "voip" flow on 5060.
fn sim(ingress: &str) -> Results {
    let src = sim_src(ingress);
    let sc = Scenario::parse("mirred.toml", &src).unwrap_or_else(|e| panic!("{e}"));
    run(&sc, &RunOptions { overrides: Vec::new(), seed: None, force: false }, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

fn sim_src(ingress: &str) -> String {
    format!(
        r#"
name = "mirred-download"
description = "ingress filters of eth0 and an IFB shaper"
duration = "10s"
warmup = "1s"
seed = 3

[[link]]
name = "line"
rate = "20mbit"
delay = "5ms"

[[link]]
name = "ifb0"
rate = "1gbit"
queue = "shaper-download"

[[reverse]]
name = "back"
rate = "20mbit"

[shaper]
tc = """
ip link add ifb0 type ifb
ip link add eth0 type veth peer name lan0
tc qdisc add dev ifb0 root handle 1: htb default 1
tc class add dev ifb0 parent 1: classid 1:1 htb rate 2mbit
tc qdisc add dev ifb0 parent 1:1 handle 10: pfifo limit 100
tc qdisc add dev eth0 handle ffff: ingress
{ingress}
"""

[[flow]]
name = "bulk"
host = "A"
type = "cbr"
rate = "4mbit"
size = 1000
port = 80

[[flow]]
name = "voip"
host = "B"
type = "cbr"
rate = "200kbit"
size = 200
port = 5060
"#
    )
}

fn flow<'a>(c: &'a Case, n: &str) -> &'a FlowResult {
    c.flows.iter().find(|f| f.name == n).unwrap()
}

const TO_IFB: &str =
    "tc filter add dev eth0 parent ffff: prio 20 matchall action mirred egress redirect dev ifb0";

#[test]
fn a_mirror_delivers_the_original_and_shapes_the_copy() {
    let r = sim("tc filter add dev eth0 parent ffff: prio 20 matchall action mirred egress mirror dev ifb0");
    let c = &r.cases[0];
    let bulk = flow(c, "bulk");
    // Every original arrives at once; about 2 Mbit/s of copies get through the IFB on top.
    let extra_bps = bulk.achieved_bps - 4e6;
    eprintln!(
        "mirror: bulk sent {} received {}, {:.0} bit/s over the originals",
        bulk.sent, bulk.received, extra_bps
    );
    assert!(bulk.received > bulk.sent, "{} of {}", bulk.received, bulk.sent);
    assert!((extra_bps - 1.8e6).abs() < 0.3e6, "copies at {extra_bps} bit/s through a 2 Mbit/s IFB");
    assert_eq!(bulk.loss_pct, 0.0, "a lost copy is not the flow's loss");
    let ifb = c.qdiscs.iter().find(|q| q.link == "ifb0").unwrap();
    assert!(ifb.drops > 0, "the IFB overflows with the copies of 4.2 Mbit/s");
}

#[test]
fn mirred_ingress_redirect_receives_the_packet_past_the_ifb_queue() {
    let shaped = sim(TO_IFB);
    let bypass = sim(&format!(
        "tc filter add dev eth0 parent ffff: prio 10 protocol ip u32 match ip dport 5060 0xffff \
         action mirred ingress redirect dev ifb0\n{TO_IFB}"
    ));
    let (a, b) = (flow(&shaped.cases[0], "voip"), flow(&bypass.cases[0], "voip"));
    eprintln!(
        "voip behind the 2 Mbit/s IFB: p50 {} ms, loss {}%; received on ifb0 directly: p50 {} ms, loss {}%",
        a.latency_ms.p50, a.loss_pct, b.latency_ms.p50, b.loss_pct
    );
    assert!(a.latency_ms.p50 > 100.0 && a.loss_pct > 10.0, "{:?} {}", a.latency_ms, a.loss_pct);
    assert!(b.latency_ms.p50 < 6.0 && b.loss_pct == 0.0, "{:?} {}", b.latency_ms, b.loss_pct);
    // The bulk flow still goes through the IFB queue.
    assert!(flow(&bypass.cases[0], "bulk").loss_pct > 40.0);
}

#[test]
fn a_redirect_into_its_own_ingress_is_dropped_at_the_nesting_limit() {
    let r = sim(&format!(
        "tc filter add dev eth0 parent ffff: prio 10 protocol ip u32 match ip dport 5060 0xffff \
         action mirred ingress redirect dev eth0\n{TO_IFB}"
    ));
    assert_eq!(flow(&r.cases[0], "voip").loss_pct, 100.0);
}

#[test]
fn tc_stats_of_the_ifb_and_the_receive_path_add_up() {
    let src = sim_src(TO_IFB);
    let sc = Scenario::parse("mirred.toml", &src).unwrap();
    let opts = RunOptions { overrides: Vec::new(), seed: None, force: false };
    let (r, _, tc) =
        sluice_sim::run::run_with_tc_stats(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}"));
    let text = &tc[0].1;
    eprintln!("{text}");
    let sent = |start: &str| -> (u64, u64, u64) {
        let at = text.find(start).unwrap_or_else(|| panic!("no `{start}`"));
        let w: Vec<u64> = text[at..]
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .filter_map(|x| x.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok())
            .collect();
        (w[0], w[1], w[2])
    };
    let q = r.cases[0].qdiscs.iter().find(|q| q.link == "ifb0").unwrap();
    let root = sent("qdisc htb 1: dev ifb0 root");
    assert_eq!(root, (q.bytes, q.packets, q.drops));
    // One class, one leaf: the class sent what its pfifo sent, and the pfifo dropped the rest.
    let (class, leaf) = (sent("class htb 1:1 root"), sent("qdisc pfifo 10: dev ifb0 parent 1:1"));
    assert_eq!((class.0, class.1), (leaf.0, leaf.1));
    assert_eq!((root.0, root.2), (leaf.0, leaf.2));
    assert!(leaf.2 > 1000, "a 2 Mbit/s IFB under 4.2 Mbit/s drops: {leaf:?}");
    // The ingress qdisc saw every packet that came in (the line's last 5 ms are still on the
    // wire when the run ends: a few packets).
    let ingress = sent("qdisc ingress ffff: dev eth0");
    let line = r.cases[0].qdiscs.iter().find(|q| q.link == "line").unwrap();
    assert!(ingress.1 <= line.packets && line.packets - ingress.1 <= 5, "{ingress:?} {line:?}");
}
