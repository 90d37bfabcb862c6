//! The results JSON shared with the simulator: `sluice-report`'s schema, plus helpers for live
//! measurements.

pub use sluice_report::{Case, ClassResult, FlowResult, Latency, QdiscResult, Results, Series};

/// Most points kept per latency CDF (plots need no more; the JSON stays small).
const CDF_POINTS: usize = 200;

/// The empirical CDF of `samples_ms`: (ms, fraction of samples at or below it), at most
/// `CDF_POINTS` points, always ending at the maximum with fraction 1.
pub fn latency_cdf(samples_ms: &[f64]) -> Vec<(f64, f64)> {
    let mut v = samples_ms.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut out: Vec<(f64, f64)> =
        (step - 1..n).step_by(step).map(|i| (v[i], (i + 1) as f64 / n as f64)).collect();
    if n > 0 && out.last().is_some_and(|p| p.1 < 1.0) {
        out.push((v[n - 1], 1.0));
    }
    out
}

/// A series holding only latency CDFs (for sluice-report's latency-CDF plot) of named probes;
/// `None` when no probe got an answer.
pub fn probe_cdf_series(probes: &[(&str, &[f64])]) -> Option<Series> {
    let mut s = Series::default();
    for (name, rtts) in probes {
        if !rtts.is_empty() {
            s.latency_cdf.insert(name.to_string(), latency_cdf(rtts));
        }
    }
    (!s.latency_cdf.is_empty()).then_some(s)
}

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

    #[test]
    fn cdf_is_monotone_bounded_and_agrees_with_percentiles() {
        let samples: Vec<f64> = (0..1000).map(|i| ((i * 7919) % 1000) as f64 / 10.0).collect();
        let cdf = latency_cdf(&samples);
        assert!(cdf.len() <= CDF_POINTS + 1);
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
        assert_eq!(cdf.last().map(|p| p.1), Some(1.0));
        let p50 = latency_from_samples(&samples).p50;
        let at = cdf.iter().find(|p| p.1 >= 0.5).unwrap().0;
        assert!((at - p50).abs() <= 0.5, "{at} vs {p50}");
        assert!(latency_cdf(&[]).is_empty());
        assert!(probe_cdf_series(&[("p", &[])]).is_none());
        assert_eq!(latency_cdf(&[3.0]), vec![(3.0, 1.0)]);
    }
}
