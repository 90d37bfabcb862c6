//! Timer calibration: how late does a wake-up come on this machine?
//!
//! The shaper sleeps in `ppoll` until its next deadline. Late wake-ups are caught up by replaying
//! the missed deadlines ([`crate::pacing`]); the bucket still matters when a queue starts from
//! idle, so at start-up we measure the overshoot of short sleeps and raise every bucket to hold
//! at least that much credit (the burst floor). With busy polling, deadlines closer than
//! [`SPIN_BELOW`] are spun for instead of slept for.

use sluice_core::Span;
use std::time::{Duration, Instant};

/// Deadlines nearer than this are spun for instead of slept for.
pub const SPIN_BELOW: Span = Span::from_micros(50);

/// Measured wake-up lateness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Samples taken.
    pub samples: usize,
    /// Mean overshoot.
    pub mean: Span,
    /// 99th percentile overshoot.
    pub p99: Span,
    /// Worst overshoot.
    pub max: Span,
    /// The burst floor in time: buckets hold at least `rate × floor`.
    pub floor: Span,
}

impl Calibration {
    /// Sleep `n` times for 200 µs and record how late each wake-up was.
    pub fn measure(n: usize) -> Calibration {
        let want = Duration::from_micros(200);
        let mut over: Vec<u64> = (0..n.max(1))
            .map(|_| {
                let t = Instant::now();
                let _ = nix::poll::ppoll(&mut [], Some(nix::sys::time::TimeSpec::from_duration(want)), None);
                t.elapsed().saturating_sub(want).as_nanos() as u64
            })
            .collect();
        Calibration::from_overshoots(&mut over)
    }

    /// Derive the floor from overshoots in ns: the p99 lateness, at least 4× the mean and at
    /// least 250 µs, at most 10 ms (beyond that a bucket would defeat shaping).
    pub fn from_overshoots(over: &mut [u64]) -> Calibration {
        over.sort_unstable();
        let n = over.len().max(1);
        let mean = over.iter().sum::<u64>() / n as u64;
        let p99 = over.get((n * 99).div_ceil(100).saturating_sub(1)).copied().unwrap_or(0);
        let max = over.last().copied().unwrap_or(0);
        let floor = p99.max(4 * mean).clamp(250_000, 10_000_000);
        Calibration {
            samples: over.len(),
            mean: Span::from_nanos(mean),
            p99: Span::from_nanos(p99),
            max: Span::from_nanos(max),
            floor: Span::from_nanos(floor),
        }
    }
}

impl std::fmt::Display for Calibration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timer calibration: {} sleeps of 200us overshot by mean {}us, p99 {}us, max {}us -> burst floor {}us of rate",
            self.samples,
            self.mean.as_micros(),
            self.p99.as_micros(),
            self.max.as_micros(),
            self.floor.as_micros()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_follows_the_tail_within_bounds() {
        let mut v: Vec<u64> = (0..100).map(|i| if i == 99 { 3_000_000 } else { 80_000 }).collect();
        let c = Calibration::from_overshoots(&mut v);
        assert_eq!(c.p99, Span::from_micros(80));
        assert_eq!(c.max, Span::from_millis(3));
        // One 3 ms outlier lifts the mean to 109.2 us: 4 × mean beats the p99.
        assert_eq!(c.floor, Span::from_nanos(4 * 109_200));
        let mut calm: Vec<u64> = vec![20_000; 100];
        assert_eq!(Calibration::from_overshoots(&mut calm).floor, Span::from_micros(250));
        let mut slow: Vec<u64> = vec![2_000_000; 10];
        assert_eq!(Calibration::from_overshoots(&mut slow).floor, Span::from_millis(8));
        let mut awful: Vec<u64> = vec![50_000_000; 10];
        assert_eq!(Calibration::from_overshoots(&mut awful).floor, Span::from_millis(10));
    }
}
