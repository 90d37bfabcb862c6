//! Time as the core sees it: integer nanoseconds on a caller-supplied clock.
//!
//! The core never reads a clock. Every state-changing call takes `now`, and time must never go
//! backwards between calls on the same object (calls with an earlier `now` are treated as `now`
//! equal to the latest seen, never as negative elapsed time).

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller
/// (the simulator starts at 0, the live shaper uses CLOCK_MONOTONIC).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Time(u64);

/// A non-negative span of time in nanoseconds.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Span(u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any real event; used as "never".
    pub const MAX: Time = Time(u64::MAX);

    /// Builds a time from nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }
    /// Builds a time from microseconds since the epoch.
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(1_000))
    }
    /// Builds a time from milliseconds since the epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }
    /// Builds a time from seconds since the epoch.
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(1_000_000_000))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the epoch as a float (for reports only, never for scheduling).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time elapsed since `earlier`, or zero if `earlier` is in the future.
    pub const fn since(self, earlier: Time) -> Span {
        Span(self.0.saturating_sub(earlier.0))
    }
}

impl Span {
    /// Zero length.
    pub const ZERO: Span = Span(0);
    /// Builds a span from nanoseconds.
    pub const fn from_nanos(ns: u64) -> Span {
        Span(ns)
    }
    /// Builds a span from microseconds.
    pub const fn from_micros(us: u64) -> Span {
        Span(us.saturating_mul(1_000))
    }
    /// Builds a span from milliseconds.
    pub const fn from_millis(ms: u64) -> Span {
        Span(ms.saturating_mul(1_000_000))
    }
    /// Builds a span from seconds.
    pub const fn from_secs(s: u64) -> Span {
        Span(s.saturating_mul(1_000_000_000))
    }
    /// Length in nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Length in microseconds, truncated.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Length in seconds as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Add<Span> for Time {
    type Output = Time;
    fn add(self, rhs: Span) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<Span> for Time {
    fn add_assign(&mut self, rhs: Span) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub<Time> for Time {
    type Output = Span;
    /// Saturating: a later `rhs` gives zero.
    fn sub(self, rhs: Time) -> Span {
        self.since(rhs)
    }
}

impl Add for Span {
    type Output = Span;
    fn add(self, rhs: Span) -> Span {
        Span(self.0.saturating_add(rhs.0))
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}ns", self.0)
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ns", self.0)
    }
}

impl fmt::Display for Span {
    /// Prints like tc: `5ms`, `100us`, `1s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::units::format_time(*self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Time::from_secs(1) - Time::from_secs(2), Span::ZERO);
        assert_eq!(Time::MAX + Span::from_secs(1), Time::MAX);
        assert_eq!((Time::from_millis(3) - Time::from_millis(1)).as_nanos(), 2_000_000);
    }
}
