//! DRR and RED through the one engine, measured from simulator runs.

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

fn run_src(name: &str, src: &str, set: &[(&str, &str)]) -> Results {
    let sc = Scenario::parse(name, src).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions {
        overrides: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        seed: None,
        force: false,
    };
    run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0
}

/// Two UDP floods, each alone able to fill the 10 Mbit/s link, classified by u32 on the
/// destination port into DRR classes of quantum 1500 and 3000: the backlogged link is shared 1:2.
#[test]
fn drr_shares_a_backlogged_link_by_quantum() {
    let src = r#"
name = "drr-share"
description = "two floods in DRR classes of quantum 1500 and 3000"
duration = "6s"
warmup = "1s"
[[link]]
name = "eth0"
rate = "10mbit"
queue = "shaper"
[shaper]
tc = """
tc qdisc add dev eth0 root handle 1: drr
tc class add dev eth0 parent 1: classid 1:1 drr quantum 1500
tc class add dev eth0 parent 1: classid 1:2 drr quantum 3000
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:1
tc filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 5002 0xffff flowid 1:2
"""
[[flow]]
name = "small"
type = "cbr"
rate = "12mbit"
size = 1500
port = 5001
[[flow]]
name = "big"
type = "cbr"
rate = "12mbit"
size = 1500
port = 5002
"#;
    let r = run_src("drr.toml", src, &[]);
    let c = &r.cases[0];
    let bps = |n: &str| c.flows.iter().find(|f| f.name == n).unwrap().achieved_bps;
    let (small, big) = (bps("small"), bps("big"));
    assert!((small + big - 10e6).abs() < 0.3e6, "link not full: {small} + {big}");
    let ratio = big / small;
    assert!((ratio - 2.0).abs() < 0.05, "quanta 1500:3000 gave {small} vs {big} bit/s (ratio {ratio})");
    // Unclassified traffic has no class to go to: a third port is dropped entirely.
    let src3 = src.replace("port = 5002\n", "port = 5002\n[[flow]]\nname = \"stray\"\ntype = \"cbr\"\nrate = \"1mbit\"\nsize = 1000\nport = 6000\n");
    let r = run_src("drr3.toml", &src3, &[]);
    let stray = r.cases[0].flows.iter().find(|f| f.name == "stray").unwrap();
    assert_eq!((stray.achieved_bps, stray.loss_pct), (0.0, 100.0), "{stray:?}");
}

fn mean_backlog_after_warmup(r: &Results, case: &str, link: &str, warmup_s: f64) -> f64 {
    let c = r.cases.iter().find(|c| c.name == case).unwrap();
    let s = c.series.as_ref().expect("series recorded");
    let v = &s.backlog_bytes[link];
    let from = (warmup_s / s.step_s) as usize;
    v[from..].iter().sum::<f64>() / (v.len() - from) as f64
}

/// The built-in `mininet-red` scenario with the tc-red(8) example's thresholds (min 30000, max
/// 90000, probability 0.02): four TCP uploads keep the RED queue, averaged over the run (sampled
/// every 20 ms after the warm-up), between min and max, with early drops doing it; the FIFO
/// without RED fills to tens of times that.
#[test]
fn red_holds_the_average_queue_between_min_and_max_under_tcp() {
    let sc = Scenario::find("mininet-red").unwrap();
    let opts = RunOptions {
        overrides: [("min", "30000"), ("max", "90000"), ("probability", "0.02"), ("duration", "15s")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        seed: None,
        force: false,
    };
    let r = run(&sc, &opts, &|_| {}).unwrap().0;
    let red = mean_backlog_after_warmup(&r, "aqm=red", "eth0", 5.0);
    let fifo = mean_backlog_after_warmup(&r, "aqm=none", "eth0", 5.0);
    assert!((30_000.0..=90_000.0).contains(&red), "RED average queue {red} bytes");
    assert!(fifo > 10.0 * 90_000.0, "FIFO average queue {fifo} bytes");
    let c = r.cases.iter().find(|c| c.name == "aqm=red").unwrap();
    let q = c.qdiscs.iter().find(|q| q.link == "eth0").unwrap();
    assert!(q.drops > 50, "RED dropped {} packets", q.drops);
    let tput: f64 = c.flows.iter().filter(|f| f.name.starts_with("bulk")).map(|f| f.achieved_bps).sum();
    assert!(tput > 9.5e6, "RED must not starve the link: {tput} bit/s");
    let ping = |case: &str| {
        r.cases
            .iter()
            .find(|c| c.name == case)
            .unwrap()
            .flows
            .iter()
            .find(|f| f.name == "ping")
            .unwrap()
            .latency_ms
            .p50
    };
    assert!(ping("aqm=red") * 5.0 < ping("aqm=none"), "ping {} vs {} ms", ping("aqm=red"), ping("aqm=none"));
}
