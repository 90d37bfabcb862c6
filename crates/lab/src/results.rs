//! The results JSON shared with the simulator: `sluice-report`'s schema, plus helpers for live
//! measurements.

pub use sluice_report::{Case, ClassResult, FlowResult, Latency, QdiscResult, Results};

/// Percentiles of `samples_ms` (nearest rank); zeros when empty.
pub fn latency_from_samples(samples_ms: &[f64]) -> Latency {
    if samples_ms.is_empty() {
        return Latency::default();
    }
    let mut v = samples_ms.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Latency { p50: pick(0.5), p90: pick(0.9), p99: pick(0.99), max: v[v.len() - 1] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let l = latency_from_samples(&v);
        assert_eq!((l.p50, l.p90, l.p99, l.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(latency_from_samples(&[]), Latency::default());
    }
}
