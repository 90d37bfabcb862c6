//! The results JSON (the schema the simulator writes too), so `compare` can line up runs from the
//! simulator, the live shaper and the kernel.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One experiment run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// Scenario name (`rate-sweep`, `rrul`, `home-uplink`).
    pub scenario: String,
    /// Seed (live runs record 0: real traffic is not seeded).
    pub seed: u64,
    /// One entry per case (a target rate, a load scenario).
    pub cases: Vec<Case>,
}

/// One case of an experiment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// Case name.
    pub name: String,
    /// Parameters as strings (backend, target, duration, ...).
    pub params: BTreeMap<String, String>,
    /// Per-class figures.
    pub classes: Vec<ClassResult>,
    /// Per-flow figures.
    pub flows: Vec<FlowResult>,
}

/// What one class achieved.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassResult {
    /// Class id (`1:10`).
    pub id: String,
    /// Configured rate.
    pub rate_bps: u64,
    /// Configured ceil.
    pub ceil_bps: u64,
    /// Achieved rate.
    pub achieved_bps: f64,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
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

/// What one flow achieved.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FlowResult {
    /// Flow name.
    pub name: String,
    /// Goodput.
    pub achieved_bps: f64,
    /// Latency (probes: RTT).
    pub latency_ms: Latency,
    /// Mean absolute difference of consecutive RTTs (RFC 3550 style, un-smoothed).
    pub jitter_ms: f64,
    /// Loss percentage.
    pub loss_pct: f64,
}

impl Latency {
    /// Percentiles of `samples_ms` (nearest rank); zeros when empty.
    pub fn from_samples(samples_ms: &[f64]) -> Latency {
        if samples_ms.is_empty() {
            return Latency::default();
        }
        let mut v = samples_ms.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let pick = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Latency { p50: pick(0.5), p90: pick(0.9), p99: pick(0.99), max: v[v.len() - 1] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let l = Latency::from_samples(&v);
        assert_eq!((l.p50, l.p90, l.p99, l.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(Latency::from_samples(&[]), Latency::default());
    }

    #[test]
    fn schema_field_names_are_stable() {
        let r = Results {
            scenario: "rate-sweep".into(),
            seed: 0,
            cases: vec![Case { name: "x".into(), ..Default::default() }],
        };
        let j = serde_json::to_string(&r).unwrap();
        for k in ["\"scenario\"", "\"seed\"", "\"cases\"", "\"params\"", "\"classes\"", "\"flows\""] {
            assert!(j.contains(k), "{j}");
        }
        let back: Results = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }
}
