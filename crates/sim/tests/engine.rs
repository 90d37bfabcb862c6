//! Engine-level checks built directly from the model (no scenario files).

use sluice_core::fifo::Fifo;
use sluice_core::{Handle, Rate, Span, WireSpec};
use sluice_sim::model::*;
use sluice_sim::shaper::ExactShaper;
use sluice_sim::{case_results, Sim};
use std::collections::BTreeMap;

fn link(name: &str, rate: Option<u64>, delay_ms: u64, fifo_bytes: u64) -> LinkSpec {
    LinkSpec {
        name: name.into(),
        rate: rate.map(Rate::from_bps),
        delay: Span::from_millis(delay_ms),
        overhead: 0,
        queue: queue(move || Box::new(Fifo::bfifo(fifo_bytes))),
        is_shaper: false,
        receive: None,
    }
}

fn spec(forward: Vec<LinkSpec>, reverse: Vec<LinkSpec>, flows: Vec<FlowSpec>, secs: u64) -> SimSpec {
    SimSpec {
        duration: Span::from_secs(secs),
        warmup: Span::from_secs(1),
        step: Span::from_millis(100),
        seed: 1,
        forward,
        reverse,
        classes: vec![],
        default_class: None,
        shaper_wire: WireSpec::default(),
        flows,
        series: true,
        profile: false,
    }
}

#[test]
fn cbr_below_link_rate_is_delivered_without_loss() {
    let f = FlowSpec::new("cbr", "a", TrafficSpec::Cbr { rate: Rate::from_bps(4_000_000) });
    let s = spec(vec![link("l", Some(10_000_000), 10, 100_000)], vec![], vec![f], 5);
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    let fl = &c.flows[0];
    assert_eq!(fl.loss_pct, 0.0);
    assert!((fl.achieved_bps - 4e6).abs() / 4e6 < 0.01, "{}", fl.achieved_bps);
    // 10 ms propagation + 1514 B at 10 Mbit/s = 1.2112 ms serialisation.
    assert!((fl.latency_ms.p50 - 11.211).abs() < 0.01, "{:?}", fl.latency_ms);
    assert!(fl.jitter_ms < 0.001);
}

#[test]
fn overload_fills_the_fifo_and_drops_the_excess() {
    let f = FlowSpec::new("flood", "a", TrafficSpec::Cbr { rate: Rate::from_bps(8_000_000) });
    let s = spec(vec![link("modem", Some(5_000_000), 10, 128 * 1024)], vec![], vec![f], 10);
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    let fl = &c.flows[0];
    assert!((fl.loss_pct - 37.5).abs() < 1.0, "loss {}", fl.loss_pct);
    // Queueing delay of a full 128 KB buffer at 5 Mbit/s is ~210 ms.
    assert!(fl.latency_ms.p50 > 200.0 && fl.latency_ms.p50 < 225.0, "{:?}", fl.latency_ms);
}

#[test]
fn tcp_fills_the_pipe_and_bloats_the_buffer() {
    let mut f = FlowSpec::new(
        "bulk",
        "a",
        TrafficSpec::Tcp { cc: CongestionControl::Cubic, bytes: None, rwnd: 4000 },
    );
    f.size = 1514;
    let s = spec(
        vec![link("modem", Some(5_000_000), 10, 128 * 1024)],
        vec![link("down", Some(20_000_000), 10, 1_000_000)],
        vec![f],
        20,
    );
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    let fl = &c.flows[0];
    // Within one packet of the link rate (arrivals in the window, whenever sent).
    assert!(fl.achieved_bps > 4.5e6 && fl.achieved_bps <= 5.0e6 + 1514.0 * 8.0, "{}", fl.achieved_bps);
    let goodput = c.extra["bulk.goodput_bps"];
    assert!(goodput > 4.5e6 && goodput <= fl.achieved_bps + 1514.0 * 8.0, "goodput {goodput}");
    assert!(fl.latency_ms.p90 > 100.0, "bufferbloat expected: {:?}", fl.latency_ms);
}

#[test]
fn two_reno_flows_share_fairly() {
    let mk = |n: &str| {
        FlowSpec::new(n, n, TrafficSpec::Tcp { cc: CongestionControl::Reno, bytes: None, rwnd: 4000 })
    };
    let s = spec(
        vec![link("bn", Some(10_000_000), 10, 64 * 1024)],
        vec![link("rev", Some(100_000_000), 10, 1_000_000)],
        vec![mk("a"), mk("b")],
        30,
    );
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    let (a, b) = (c.flows[0].achieved_bps, c.flows[1].achieved_bps);
    assert!(a + b > 9.0e6, "{a} {b}");
    assert!(a / b > 0.6 && a / b < 1.66, "unfair: {a} {b}");
}

#[test]
fn exact_shaper_class_is_within_a_tenth_of_a_percent() {
    let class = Handle::new(1, 1);
    let mut f = FlowSpec::new("g", "a", TrafficSpec::Backlog { depth: 4 });
    f.priority = class.to_tc().unwrap(); // the sending host names the class (skb->priority)
    f.size = 1514;
    f.gso_segs = 44;
    let shaper = LinkSpec {
        name: "shaper".into(),
        rate: None,
        delay: Span::ZERO,
        overhead: 0,
        queue: queue(|| {
            Box::new(ExactShaper::new(Rate::from_bps(100_000_000), 66616, WireSpec::default(), 100))
        }),
        is_shaper: true,
        receive: None,
    };
    let mut s = spec(vec![shaper], vec![], vec![f], 2);
    s.classes =
        vec![ClassSpec { id: class, rate: Rate::from_bps(100_000_000), ceil: Rate::from_bps(100_000_000) }];
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    let err = (c.classes[0].achieved_bps - 1e8) / 1e8;
    assert!(err.abs() < 0.001, "error {err}");
}

#[test]
fn same_seed_same_result() {
    let run = || {
        let f = FlowSpec::new("p", "a", TrafficSpec::Poisson { rate: Rate::from_bps(4_000_000) });
        let s = spec(vec![link("l", Some(5_000_000), 5, 30_000)], vec![], vec![f], 3);
        let mut sim = Sim::new(&s);
        sim.run(&mut |_| {});
        case_results(&sim, &s, "c", BTreeMap::new())
    };
    assert_eq!(run(), run());
}

#[test]
fn max_backlog_is_reported_without_time_series() {
    let f = FlowSpec::new("flood", "a", TrafficSpec::Cbr { rate: Rate::from_bps(8_000_000) });
    let mut s = spec(vec![link("modem", Some(5_000_000), 10, 128 * 1024)], vec![], vec![f], 5);
    s.series = false;
    let mut sim = Sim::new(&s);
    sim.run(&mut |_| {});
    let c = case_results(&sim, &s, "c", BTreeMap::new());
    assert!(c.qdiscs[0].drops > 1000);
    assert!(c.qdiscs[0].max_backlog_bytes > 100 * 1024, "{:?}", c.qdiscs[0]);
    assert!(c.series.is_none());
}
