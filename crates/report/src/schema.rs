//! The results document written by `sluice simulate --json` (and, later, `sluice measure`).
//! See `docs/results.md` for field-by-field documentation.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the schema; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// One run of one scenario: one or more cases (a sweep produces one case per point).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// Scenario name.
    pub scenario: String,
    /// RNG seed of the run.
    pub seed: u64,
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Who produced it: "sim", "live-sluice", "kernel".
    pub backend: String,
    /// Free text (scenario description).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The cases, in sweep order.
    pub cases: Vec<Case>,
    /// How to plot the cases (which parameter is the x axis, which separates lines).
    #[serde(default, skip_serializing_if = "PlotHints::is_empty")]
    pub plot: PlotHints,
}

/// Plot hints carried with the results so `compare` and `report` can redraw them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PlotHints {
    /// Parameter on the x axis of target-vs-achieved plots (e.g. `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// Parameter whose values become separate lines (e.g. `variant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl PlotHints {
    /// True if no hint is set.
    pub fn is_empty(&self) -> bool {
        self.x.is_none() && self.group.is_none()
    }
}

/// One point of a sweep (or the only case).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// Case name, e.g. `rate=100mbit,variant=sluice`.
    pub name: String,
    /// Parameter values of this case, as strings.
    pub params: BTreeMap<String, String>,
    /// Seconds of (virtual) time measured, after warm-up.
    pub measured_s: f64,
    /// Shaper classes.
    pub classes: Vec<ClassResult>,
    /// Traffic flows.
    pub flows: Vec<FlowResult>,
    /// Per-qdisc (per-link queue) counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<QdiscResult>,
    /// Time series (optional extra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Series>,
    /// Scenario-specific figures (e.g. `sched_ns_per_pkt`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, f64>,
}

/// A shaper class.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassResult {
    /// tc class id, e.g. `1:10`.
    pub id: String,
    /// Configured rate (bit/s), 0 if none.
    pub rate_bps: u64,
    /// Configured ceil (bit/s), 0 if none.
    pub ceil_bps: u64,
    /// Shaper-accounted bytes × 8 / measured seconds, including configured overhead.
    pub achieved_bps: f64,
    /// Shaper-accounted bytes sent during the measurement.
    pub bytes: u64,
    /// Packets sent (GSO segments counted singly).
    pub packets: u64,
    /// Packets dropped in this class.
    pub drops: u64,
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// A traffic flow, measured at its receiver.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowResult {
    /// Flow name from the scenario.
    pub name: String,
    /// Received layer-2 bytes × 8 / measured seconds.
    pub achieved_bps: f64,
    /// One-way delay (probes: round-trip time), ms.
    pub latency_ms: Latency,
    /// RFC 3550-style jitter: mean |D| between consecutive packets, ms.
    pub jitter_ms: f64,
    /// Lost packets / sent packets, percent.
    pub loss_pct: f64,
    /// Source host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Traffic model ("cbr", "tcp-cubic", "probe", ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Packets sent.
    pub sent: u64,
    /// Packets received.
    pub received: u64,
}

/// Counters of one queue (a link's qdisc), like `tc -s qdisc`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QdiscResult {
    /// Link name the queue belongs to.
    pub link: String,
    /// Qdisc kind.
    pub kind: String,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
    /// Overlimits.
    pub overlimits: u64,
    /// Largest backlog seen at a sample point, bytes.
    pub max_backlog_bytes: u64,
}

/// Time series sampled every `step_s`, aligned at t = 0 of the run.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// Step in seconds.
    pub step_s: f64,
    /// Per-flow received throughput, bit/s, by flow name.
    pub flow_bps: BTreeMap<String, Vec<f64>>,
    /// Per-flow mean latency per step, ms (NaN-free: 0 when nothing arrived).
    pub flow_latency_ms: BTreeMap<String, Vec<f64>>,
    /// Per-class shaper-accounted throughput, bit/s.
    pub class_bps: BTreeMap<String, Vec<f64>>,
    /// Per-link queue backlog at each sample, bytes.
    pub backlog_bytes: BTreeMap<String, Vec<f64>>,
    /// Latency CDF points per flow: (ms, cumulative fraction).
    #[serde(default)]
    pub latency_cdf: BTreeMap<String, Vec<(f64, f64)>>,
    /// Per TCP flow: the sender's congestion window at each sample, segments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp_cwnd_pkts: BTreeMap<String, Vec<f64>>,
    /// Per TCP flow: the sender's smoothed RTT at each sample, ms (0 before the first sample).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tcp_srtt_ms: BTreeMap<String, Vec<f64>>,
}

impl Results {
    /// Serializes as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
    /// Parses a results document. Refuses other schema versions and documents missing a field
    /// the writer always writes, naming it (a renamed field must not read as 0).
    pub fn from_json(s: &str) -> Result<Results, serde_json::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<serde_json::Value>,
        }
        match serde_json::from_str::<Version>(s)?.schema_version {
            None => return Err(serde_json::Error::missing_field("schema_version")),
            Some(v) if v.as_u64() != Some(SCHEMA_VERSION as u64) => {
                return Err(serde_json::Error::custom(format!(
                    "schema_version {v} is not one this sluice reads (it reads {SCHEMA_VERSION})"
                )))
            }
            Some(_) => {}
        }
        serde_json::from_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_schema_fields_are_present() {
        let r = Results {
            scenario: "x".into(),
            seed: 1,
            schema_version: SCHEMA_VERSION,
            cases: vec![Case {
                name: "c".into(),
                classes: vec![ClassResult { id: "1:10".into(), ..Default::default() }],
                flows: vec![FlowResult { name: "f".into(), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for k in ["scenario", "seed", "cases"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let c = &v["cases"][0];
        for k in ["name", "params", "classes", "flows"] {
            assert!(c.get(k).is_some(), "{k}");
        }
        for k in ["id", "rate_bps", "ceil_bps", "achieved_bps", "bytes", "packets", "drops"] {
            assert!(c["classes"][0].get(k).is_some(), "{k}");
        }
        for k in ["name", "achieved_bps", "latency_ms", "jitter_ms", "loss_pct"] {
            assert!(c["flows"][0].get(k).is_some(), "{k}");
        }
        for k in ["p50", "p90", "p99", "max"] {
            assert!(c["flows"][0]["latency_ms"].get(k).is_some(), "{k}");
        }
        assert_eq!(Results::from_json(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn other_versions_and_missing_fields_are_refused_by_name() {
        let r = Results {
            scenario: "x".into(),
            schema_version: SCHEMA_VERSION,
            cases: vec![Case {
                flows: vec![FlowResult { received: 5, ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let good = r.to_json();
        assert_eq!(Results::from_json(&good).unwrap(), r);
        let err = |text: &str| Results::from_json(text).map(|_| ()).unwrap_err().to_string();
        let e = err(&good.replace("\"schema_version\": 1", "\"schema_version\": 99"));
        assert!(e.contains("schema_version 99"), "{e}");
        let e = err(&good.replace("\"schema_version\": 1,", ""));
        assert!(e.contains("missing field `schema_version`"), "{e}");
        for f in ["received", "sent", "measured_s", "backend"] {
            let e = err(&good.replace(&format!("\"{f}\""), &format!("\"{f}_renamed\"")));
            assert!(e.contains(&format!("missing field `{f}`")), "{f}: {e}");
        }
    }
}
