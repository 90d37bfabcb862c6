//! netem in the simulator, through the engine: the delay a probe measures is the configured one,
//! the loss the flows see is the configured one, and a run repeats under its seed.

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

/// One fast link whose queue is `wan`, an unlimited reverse path without delay, a probe every
/// 10 ms and a 2 Mbit/s CBR flow of 500-byte packets.
fn scenario(wan: &str) -> Scenario {
    let src = format!(
        r#"
name = "netem-probe"
description = "a probe across one netem hop"
duration = "20s"
warmup = "1s"
seed = 5

[[link]]
name = "wan"
rate = "1gbit"
queue = "{wan}"

[[reverse]]
name = "back"
rate = "1gbit"

[[flow]]
name = "ping"
host = "A"
type = "probe"
interval = "10ms"

[[flow]]
name = "cbr"
host = "A"
type = "cbr"
rate = "2mbit"
size = 500
"#
    );
    Scenario::parse("netem-probe.toml", &src).unwrap_or_else(|e| panic!("{e}"))
}

fn sim(wan: &str, seed: Option<u64>) -> Results {
    let opts = RunOptions { overrides: Vec::new(), seed, force: false };
    run(&scenario(wan), &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0
}

fn flow<'a>(r: &'a Results, name: &str) -> &'a sluice_report::FlowResult {
    r.cases[0].flows.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn a_50ms_netem_delay_gives_a_50ms_probe_rtt() {
    let plain = sim("pfifo 1000", None);
    let base = flow(&plain, "ping").latency_ms;
    let r = sim("netem delay 50ms", None);
    let ping = flow(&r, "ping");
    eprintln!(
        "probe RTT with netem delay 50ms: p50 {} ms, max {} ms; without: p50 {} ms ({} probes)",
        ping.latency_ms.p50, ping.latency_ms.max, base.p50, ping.received
    );
    assert!(ping.received > 1000, "{} probes", ping.received);
    // Every probe waits exactly 50 ms more than on the plain link (whose RTT is serialisation only).
    for (name, with, without) in
        [("p50", ping.latency_ms.p50, base.p50), ("max", ping.latency_ms.max, base.max)]
    {
        assert!((with - without - 50.0).abs() < 0.05, "{name}: {with} ms vs {without} ms without netem");
    }
    assert!(base.max < 0.05, "the plain link adds only serialisation: {} ms", base.max);
    assert_eq!(ping.loss_pct, 0.0);
}

#[test]
fn netem_loss_and_jitter_are_what_was_configured_and_repeat_under_the_seed() {
    let a = sim("netem delay 40ms 5ms loss 2%", None);
    let cbr = flow(&a, "cbr");
    // 2 Mbit/s of 500-byte packets for 19 s: 9500 packets; 2% loss within sampling error.
    assert!((cbr.loss_pct - 2.0).abs() < 0.6, "loss {}%", cbr.loss_pct);
    let p = flow(&a, "ping").latency_ms;
    eprintln!(
        "netem delay 40ms 5ms loss 2%: cbr loss {}%, probe p50 {} ms, max {} ms",
        cbr.loss_pct, p.p50, p.max
    );
    assert!(p.p50 > 38.0 && p.p50 < 42.0, "p50 {}", p.p50);
    assert!(p.max <= 45.05 && p.max > 43.0, "uniform jitter of ±5 ms: max {}", p.max);
    let b = sim("netem delay 40ms 5ms loss 2%", None);
    assert_eq!(flow(&b, "cbr").received, cbr.received);
    assert_eq!(flow(&b, "ping").latency_ms, p);
    let c = sim("netem delay 40ms 5ms loss 2%", Some(6));
    assert_ne!(flow(&c, "cbr").received, cbr.received, "another seed, another loss pattern");
}

#[test]
fn corrupted_packets_are_lost_at_the_receiver() {
    let r = sim("netem corrupt 5%", None);
    let cbr = flow(&r, "cbr");
    eprintln!("netem corrupt 5%: cbr loss {}%", cbr.loss_pct);
    assert!((cbr.loss_pct - 5.0).abs() < 1.0, "loss {}%", cbr.loss_pct);
    // The hop sent them: netem counts no drop for a corruption.
    let q = r.cases[0].qdiscs.iter().find(|q| q.link == "wan").unwrap();
    assert_eq!(q.drops, 0);
}

#[test]
fn netem_duplicate_delivers_that_many_extra_packets_and_repeats_under_the_seed() {
    let a = sim("netem duplicate 10%", None);
    let cbr = flow(&a, "cbr");
    let extra = (cbr.received as f64 - cbr.sent as f64) * 100.0 / cbr.sent as f64;
    eprintln!("netem duplicate 10%: cbr sent {}, received {} (+{extra:.2}%)", cbr.sent, cbr.received);
    // 9500 packets: 10% duplicated within sampling error (sd about 0.3%).
    assert!((extra - 10.0).abs() < 1.2, "{extra}% extra");
    assert_eq!(cbr.loss_pct, 0.0, "a duplicate costs nothing of the original");
    let q = a.cases[0].qdiscs.iter().find(|q| q.link == "wan").unwrap();
    assert_eq!(q.drops, 0);
    let b = sim("netem duplicate 10%", None);
    assert_eq!(flow(&b, "cbr").received, cbr.received, "the same seed, the same duplicates");
    let c = sim("netem duplicate 10%", Some(6));
    assert_ne!(flow(&c, "cbr").received, cbr.received, "another seed, other duplicates");
}

/// The first `Sent B bytes P pkt (dropped D` after `line_start` in `tc -s` text.
fn sent_after(text: &str, line_start: &str) -> (u64, u64, u64) {
    let at = text.find(line_start).unwrap_or_else(|| panic!("no `{line_start}` in\n{text}"));
    let w: Vec<&str> = text[at..].lines().nth(1).unwrap().split_whitespace().collect();
    let n = |i: usize| w[i].trim_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().unwrap();
    assert_eq!((w[0], w[2], w[4]), ("Sent", "bytes", "pkt"), "{w:?}");
    (n(1), n(3), n(6))
}

#[test]
fn tc_stats_after_a_run_are_the_engines_counters() {
    let opts = RunOptions { overrides: Vec::new(), seed: None, force: false };
    let (r, _, tc) =
        sluice_sim::run::run_with_tc_stats(&scenario("netem delay 10ms loss 2%"), &opts, &|_| {})
            .unwrap_or_else(|e| panic!("{e}"));
    let (case, text) = &tc[0];
    assert_eq!(case, &r.cases[0].name);
    eprintln!("{text}");
    let q = r.cases[0].qdiscs.iter().find(|q| q.link == "wan").unwrap();
    assert!(q.drops > 100, "{q:?}");
    assert_eq!(sent_after(text, "qdisc netem 1: dev wan0 root"), (q.bytes, q.packets, q.drops));
}
