//! Turns a finished [`Sim`] into a results [`Case`].

use crate::engine::{traffic_label, Sim};
use crate::model::{SimSpec, TrafficSpec};
use sluice_report::{Case, ClassResult, FlowResult, Latency, QdiscResult, Series};
use std::collections::BTreeMap;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Builds the results of one case from a finished simulation.
pub fn case_results(sim: &Sim, spec: &SimSpec, name: &str, params: BTreeMap<String, String>) -> Case {
    let rec = &sim.rec;
    let window = (spec.duration.as_nanos().saturating_sub(spec.warmup.as_nanos())) as f64 / 1e9;
    let window = if window > 0.0 { window } else { 1e-9 };
    let classes = spec
        .classes
        .iter()
        .zip(&rec.classes)
        .map(|(c, r)| {
            // Rate over the departures in the window: bytes of all but the last departure divided
            // by the time from the first to the last. Exact for a backlogged class, and free of
            // the one-packet edge error of bytes/window (0.1% of a 100 Mbit/s, 0.5 s window is
            // one 64 KB GSO packet).
            let achieved = match r.first {
                Some(f) if r.last > f && r.packets > 1 => {
                    (r.bytes - r.last_cost) as f64 * 8.0 / ((r.last - f).as_nanos() as f64 / 1e9)
                }
                _ => r.bytes as f64 * 8.0 / window,
            };
            ClassResult {
                id: c.id.to_string(),
                rate_bps: c.rate.bps(),
                ceil_bps: c.ceil.bps(),
                achieved_bps: achieved,
                bytes: r.bytes,
                packets: r.packets,
                drops: r.drops,
            }
        })
        .collect();
    let flows = spec
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| !matches!(f.traffic, TrafficSpec::StreamGroup { .. }))
        .map(|(i, f)| {
            let r = &rec.flows[i];
            let h = &r.hist;
            let lat = if h.is_empty() {
                Latency::default()
            } else {
                Latency {
                    p50: ms(h.value_at_quantile(0.5)),
                    p90: ms(h.value_at_quantile(0.9)),
                    p99: ms(h.value_at_quantile(0.99)),
                    max: ms(h.max()),
                }
            };
            let loss = if r.sent > 0 { r.drops as f64 * 100.0 / r.sent as f64 } else { 0.0 };
            FlowResult {
                name: f.name.clone(),
                achieved_bps: r.recv_bytes as f64 * 8.0 / window,
                latency_ms: lat,
                jitter_ms: rec.jitter_ms(i),
                loss_pct: loss,
                host: f.host.clone(),
                kind: traffic_label(&f.traffic),
                sent: r.sent,
                received: r.recv,
            }
        })
        .collect();
    let qdiscs = sim
        .hop_stats()
        .into_iter()
        .map(|(link, kind, st, maxb)| QdiscResult {
            link,
            kind: kind.to_string(),
            bytes: st.bytes,
            packets: st.packets,
            drops: st.drops,
            overlimits: st.overlimits,
            max_backlog_bytes: maxb,
        })
        .collect();
    let mut extra = BTreeMap::new();
    for (i, f) in spec.flows.iter().enumerate() {
        let unclassified = rec.flows[i].unclassified_bytes;
        if unclassified > 0 && !spec.classes.is_empty() {
            extra.insert(format!("{}.unclassified_bytes", f.name), unclassified as f64);
        }
        if let Some((retx, rto, probes, srtt)) = sim.tcp_counters(i) {
            let goodput = rec.flows[i].goodput_bytes as f64 * 8.0 / window;
            extra.insert(format!("{}.goodput_bps", f.name), goodput);
            extra.insert(format!("{}.retransmits", f.name), retx as f64);
            extra.insert(format!("{}.timeouts", f.name), rto as f64);
            extra.insert(format!("{}.probes", f.name), probes as f64);
            if let Some(s) = srtt {
                extra.insert(format!("{}.srtt_ms", f.name), s.as_nanos() as f64 / 1e6);
            }
        }
        // Named apart from the flow's own figures (`flow.key`), so the report's summary shows them.
        if let Some([sent, filtered, dropped]) = sim.ack_counters(i) {
            extra.insert(format!("{} ACKs sent up", f.name), sent as f64);
            extra.insert(format!("{} ACKs removed by the ACK filter", f.name), filtered as f64);
            extra.insert(format!("{} ACKs dropped by the shaper's AQM/limit", f.name), dropped as f64);
        }
    }
    let st = sim.engine_stats();
    if spec.profile {
        let pkts = sim.shaper_packets();
        if pkts > 0 {
            extra.insert("shaper_ns_per_pkt".into(), sim.shaper_ns as f64 / pkts as f64);
        }
    }
    extra.insert("engine.events".into(), st.events as f64);
    extra.insert("engine.transmissions".into(), st.transmissions as f64);
    let series = spec.series.then(|| {
        let step_s = spec.step.as_nanos() as f64 / 1e9;
        let mut s = Series { step_s, ..Default::default() };
        for (i, f) in spec.flows.iter().enumerate() {
            if matches!(f.traffic, TrafficSpec::StreamGroup { .. }) {
                continue;
            }
            let r = &rec.flows[i];
            s.flow_bps
                .insert(f.name.clone(), r.bins_bytes.iter().map(|b| *b as f64 * 8.0 / step_s).collect());
            s.flow_latency_ms.insert(
                f.name.clone(),
                r.bins_lat_ns
                    .iter()
                    .zip(&r.bins_lat_n)
                    .map(|(sum, n)| if *n > 0 { *sum as f64 / *n as f64 / 1e6 } else { 0.0 })
                    .collect(),
            );
            if !r.cwnd.is_empty() {
                s.tcp_cwnd_pkts.insert(f.name.clone(), r.cwnd.clone());
                s.tcp_srtt_ms.insert(f.name.clone(), r.srtt_ns.iter().map(|&n| ms(n)).collect());
            }
            if !r.hist.is_empty() {
                let mut cdf = Vec::new();
                for q in 0..=100 {
                    let q = q as f64 / 100.0;
                    cdf.push((ms(r.hist.value_at_quantile(q)), q));
                }
                s.latency_cdf.insert(f.name.clone(), cdf);
            }
        }
        for (c, r) in spec.classes.iter().zip(&rec.classes) {
            s.class_bps
                .insert(c.id.to_string(), r.bins_bytes.iter().map(|b| *b as f64 * 8.0 / step_s).collect());
        }
        for (i, h) in rec.hops.iter().enumerate() {
            s.backlog_bytes
                .insert(sim.spec_names.0[i].clone(), h.samples.iter().map(|b| *b as f64).collect());
        }
        s
    });
    Case { name: name.to_string(), params, measured_s: window, classes, flows, qdiscs, series, extra }
}
