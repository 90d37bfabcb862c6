//! pie and fq_pie in the simulator: the issue-26 goal, measured from runs.

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

fn run_src(name: &str, src: &str) -> Results {
    let sc = Scenario::parse(name, src).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions::default();
    run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0
}

/// Four CUBIC uploads and a ping through a 10 Mbit/s link (20 ms base RTT) whose queue is
/// `queue`; the backlog is sampled every 10 ms.
fn four_cubic(queue: &str) -> String {
    format!(
        r#"
name = "pie-4cubic"
description = "four CUBIC flows through {queue}"
duration = "40s"
warmup = "10s"
step = "10ms"
[[link]]
name = "eth0"
rate = "10mbit"
delay = "10ms"
queue = "{queue}"
[[reverse]]
name = "back"
rate = "100mbit"
delay = "10ms"
[[flow]]
name = "bulk"
type = "tcp"
cc = "cubic"
count = 4
[[flow]]
name = "ping"
type = "probe"
interval = "100ms"
"#
    )
}

/// The queue delay of each sample after the warm-up (backlog over the link rate), ms, sorted.
fn queue_delays_ms(r: &Results, link: &str, rate_bps: f64, warmup_s: f64) -> Vec<f64> {
    let c = &r.cases[0];
    let s = c.series.as_ref().expect("series recorded");
    let from = (warmup_s / s.step_s) as usize;
    let mut v: Vec<f64> = s.backlog_bytes[link][from..].iter().map(|b| b * 8.0 / rate_bps * 1e3).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn ping_p50(r: &Results) -> f64 {
    r.cases[0].flows.iter().find(|f| f.name == "ping").unwrap().latency_ms.p50
}

/// Issue 26's goal: pie (default target 15 ms) holds the queue delay of four CUBIC flows within
/// 20% of its target: the median of the sampled queue delay, and the ping's median RTT less the
/// 20 ms base, both in 12..18 ms, with the link kept busy.
#[test]
fn pie_holds_four_cubic_flows_near_target() {
    let r = run_src("pie.toml", &four_cubic("pie"));
    let d = queue_delays_ms(&r, "eth0", 10e6, 10.0);
    let median = d[d.len() / 2];
    let ping_q = ping_p50(&r) - 20.0;
    let tput: f64 =
        r.cases[0].flows.iter().filter(|f| f.name.starts_with("bulk")).map(|f| f.achieved_bps).sum();
    eprintln!(
        "pie: median queue delay {median:.2} ms (p10 {:.2}, p90 {:.2}), ping median {:.2} ms over base, {:.2} Mbit/s",
        d[d.len() / 10],
        d[d.len() * 9 / 10],
        ping_q,
        tput / 1e6
    );
    assert!((12.0..=18.0).contains(&median), "median queue delay {median} ms (target 15 ms)");
    assert!((12.0..=18.0).contains(&ping_q), "ping median {ping_q} ms over the base RTT");
    assert!(tput > 9.0e6, "pie must not starve the link: {tput} bit/s");
    let q = r.cases[0].qdiscs.iter().find(|q| q.link == "eth0").unwrap();
    assert!(q.drops > 20, "pie dropped {} packets", q.drops);
    // The same measure of a 1000-packet FIFO: the flows fill it.
    let r = run_src("fifo.toml", &four_cubic("pfifo 1000"));
    let d = queue_delays_ms(&r, "eth0", 10e6, 10.0);
    assert!(d[d.len() / 2] > 100.0, "fifo median queue delay {} ms", d[d.len() / 2]);
}

/// fq_pie: the same load; the ping has a queue of its own and barely waits.
#[test]
fn fq_pie_isolates_the_ping() {
    let r = run_src("fq_pie.toml", &four_cubic("fq_pie"));
    let d = queue_delays_ms(&r, "eth0", 10e6, 10.0);
    let median = d[d.len() / 2];
    let ping_q = ping_p50(&r) - 20.0;
    eprintln!("fq_pie: median queue delay {median:.2} ms, ping median {ping_q:.2} ms over base");
    assert!(median > 5.0 && median < 80.0, "median queue delay {median} ms");
    assert!(ping_q < 3.0, "ping median {ping_q} ms over the base RTT");
}
