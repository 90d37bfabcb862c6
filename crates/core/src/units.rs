//! Parsing and printing of rates, sizes and times exactly as iproute2's `tc` does.
//!
//! Parsing follows `lib/utils_math.c` and `tc/tc_util.c` semantics (suffixes are matched
//! case-insensitively, numbers may be fractional); printing follows `tc` 6.x (`100Mbit`, `1600b`,
//! `2Kb`, `5ms`). One deliberate difference: rates are kept in **bit/s**, not truncated to whole
//! bytes/s, so `100bit` stays 100 bit/s instead of tc's 96.

use crate::rate::Rate;
use crate::time::Span;
use std::fmt;

/// A value that could not be parsed, with the offending token and what would have been accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} \"{token}\": {reason}; accepted units: {accepted}")]
pub struct UnitError {
    /// What was being parsed: "rate", "size" or "time".
    pub kind: &'static str,
    /// The token as the user wrote it.
    pub token: String,
    /// What is wrong with it.
    pub reason: &'static str,
    /// The list of accepted suffixes, for the hint.
    pub accepted: &'static str,
}

const RATE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("bit", 1.0),
    ("kbit", 1e3),
    ("mbit", 1e6),
    ("gbit", 1e9),
    ("tbit", 1e12),
    ("kibit", 1024.0),
    ("mibit", 1048576.0),
    ("gibit", 1073741824.0),
    ("tibit", 1099511627776.0),
    ("bps", 8.0),
    ("kbps", 8e3),
    ("mbps", 8e6),
    ("gbps", 8e9),
    ("tbps", 8e12),
    ("kibps", 8.0 * 1024.0),
    ("mibps", 8.0 * 1048576.0),
    ("gibps", 8.0 * 1073741824.0),
    ("tibps", 8.0 * 1099511627776.0),
];
const RATE_ACCEPTED: &str = "bit, kbit, mbit, gbit, tbit (x1000), kibit, mibit, gibit, tibit (x1024), \
bps, kbps, mbps, gbps, tbps (bytes/s, x1000), kibps, mibps, gibps, tibps (bytes/s, x1024); a bare number is bit/s";

const SIZE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("b", 1.0),
    ("k", 1024.0),
    ("kb", 1024.0),
    ("m", 1048576.0),
    ("mb", 1048576.0),
    ("g", 1073741824.0),
    ("gb", 1073741824.0),
    ("kbit", 1024.0 / 8.0),
    ("mbit", 1048576.0 / 8.0),
    ("gbit", 1073741824.0 / 8.0),
];
const SIZE_ACCEPTED: &str = "b, k or kb (x1024), m or mb, g or gb, kbit, mbit, gbit; a bare number is bytes";

const TIME_UNITS: &[(&str, f64)] = &[
    ("", 1e3),
    ("s", 1e9),
    ("sec", 1e9),
    ("secs", 1e9),
    ("ms", 1e6),
    ("msec", 1e6),
    ("msecs", 1e6),
    ("us", 1e3),
    ("usec", 1e3),
    ("usecs", 1e3),
    ("ns", 1.0),
    ("nsec", 1.0),
    ("nsecs", 1.0),
];
const TIME_ACCEPTED: &str =
    "s, sec, secs, ms, msec, msecs, us, usec, usecs, ns; a bare number is microseconds";

/// Splits `"1.5mbit"` into `1.5` and `"mbit"`, then scales by the unit table.
fn parse_scaled(
    token: &str,
    kind: &'static str,
    table: &[(&str, f64)],
    accepted: &'static str,
) -> Result<f64, UnitError> {
    let err = |reason| UnitError { kind, token: token.to_string(), reason, accepted };
    let t = token.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(err("expected a number"));
    }
    let value: f64 = num.parse().map_err(|_| err("not a number"))?;
    let suffix = suffix.to_ascii_lowercase();
    let scale =
        table.iter().find(|(name, _)| *name == suffix).map(|(_, s)| *s).ok_or_else(|| err("unknown unit"))?;
    let v = value * scale;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err(err("value out of range"));
    }
    Ok(v)
}

/// Parses a tc rate (`100mbit`, `1.5Gbit`, `10MBps`, `8000`) into a [`Rate`].
pub fn parse_rate(token: &str) -> Result<Rate, UnitError> {
    let bits = parse_scaled(token, "rate", RATE_UNITS, RATE_ACCEPTED)?;
    Ok(Rate::from_bps(bits.round() as u64))
}

/// Parses a tc size (`1600`, `1600b`, `10k`, `2mb`, `64kbit`) into bytes.
pub fn parse_size(token: &str) -> Result<u64, UnitError> {
    let bytes = parse_scaled(token, "size", SIZE_UNITS, SIZE_ACCEPTED)?;
    Ok(bytes.round() as u64)
}

/// Parses a tc time (`5ms`, `1s`, `100us`; a bare number is µs) into a [`Span`].
pub fn parse_time(token: &str) -> Result<Span, UnitError> {
    let ns = parse_scaled(token, "time", TIME_UNITS, TIME_ACCEPTED)?;
    Ok(Span::from_nanos(ns.round() as u64))
}

/// Prints a rate like tc: the largest decimal unit that divides it or leaves ≥1000 of the next.
/// `100000000` → `100Mbit`, `1500000` → `1500Kbit`, `8` → `8bit`.
pub fn format_rate(rate: Rate) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut r = rate.bps();
    let mut i = 0;
    while i < UNITS.len() - 1 {
        if r < 1000 || (!r.is_multiple_of(1000) && r < 1_000_000) {
            break;
        }
        if !r.is_multiple_of(1000) {
            // tc prints "%.0f" of the scaled double: round to nearest.
            r = (r + 500) / 1000;
        } else {
            r /= 1000;
        }
        i += 1;
    }
    format!("{r}{}bit", UNITS[i])
}

/// Prints a size like tc: `1600b`, `2Kb`, `32Mb`.
pub fn format_size(bytes: u64) -> String {
    let sz = bytes as f64;
    let mb = (sz / 1048576.0).round();
    let kb = (sz / 1024.0).round();
    if bytes >= 1048576 && (mb * 1048576.0 - sz).abs() < 1024.0 {
        format!("{}Mb", format_g(mb, 6))
    } else if bytes >= 1024 && (kb * 1024.0 - sz).abs() < 16.0 {
        format!("{}Kb", format_g(kb, 6))
    } else {
        format!("{bytes}b")
    }
}

/// Prints a time like tc: `5ms`, `100ms`, `1.02s`, `200us`.
pub fn format_time(span: Span) -> String {
    let ns = span.as_nanos() as f64;
    if ns >= 1e9 {
        format!("{}s", format_g(ns / 1e9, 3))
    } else if ns >= 1e6 {
        format!("{}ms", format_g(ns / 1e6, 3))
    } else if ns >= 1e3 || ns == 0.0 {
        format!("{}us", format_g(ns / 1e3, 3))
    } else {
        format!("{}ns", span.as_nanos())
    }
}

/// C's `%.{precision}g`: `precision` significant digits, trailing zeros removed, exponent form
/// when the exponent is below -4 or at least `precision`.
pub fn format_g(value: f64, precision: usize) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let p = precision.max(1);
    let exp = value.abs().log10().floor() as i32;
    // Rounding may carry into the next power of ten; recompute the exponent from the rounded form.
    let sci = format!("{:.*e}", p - 1, value);
    let (mantissa, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(exp);
    if e < -4 || e >= p as i32 {
        let m = trim_zeros(mantissa);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", e.abs())
    } else {
        let decimals = (p as i32 - 1 - e).max(0) as usize;
        trim_zeros(&format!("{value:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Wrapper that prints a byte count like tc (`Display`).
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_like_iproute2() {
        assert_eq!(parse_rate("100mbit").unwrap().bps(), 100_000_000);
        assert_eq!(parse_rate("100Mbit").unwrap().bps(), 100_000_000);
        assert_eq!(parse_rate("1.5gbit").unwrap().bps(), 1_500_000_000);
        assert_eq!(parse_rate("1kibit").unwrap().bps(), 1024);
        assert_eq!(parse_rate("1mibit").unwrap().bps(), 1_048_576);
        assert_eq!(parse_rate("10mbps").unwrap().bps(), 80_000_000);
        assert_eq!(parse_rate("1kibps").unwrap().bps(), 8192);
        assert_eq!(parse_rate("8000").unwrap().bps(), 8000);
        assert_eq!(parse_rate("800gbit").unwrap().bps(), 800_000_000_000);
        assert_eq!(parse_rate("40gbps").unwrap().bytes_per_sec(), 40_000_000_000);
    }

    #[test]
    fn sizes_parse_like_iproute2() {
        assert_eq!(parse_size("1600").unwrap(), 1600);
        assert_eq!(parse_size("1600b").unwrap(), 1600);
        assert_eq!(parse_size("10k").unwrap(), 10240);
        assert_eq!(parse_size("10kb").unwrap(), 10240);
        assert_eq!(parse_size("2m").unwrap(), 2 * 1048576);
        assert_eq!(parse_size("1g").unwrap(), 1073741824);
        assert_eq!(parse_size("8kbit").unwrap(), 1024);
        assert_eq!(parse_size("1mbit").unwrap(), 131072);
    }

    #[test]
    fn times_parse_like_iproute2() {
        assert_eq!(parse_time("5ms").unwrap(), Span::from_millis(5));
        assert_eq!(parse_time("1s").unwrap(), Span::from_secs(1));
        assert_eq!(parse_time("10sec").unwrap(), Span::from_secs(10));
        assert_eq!(parse_time("100us").unwrap(), Span::from_micros(100));
        assert_eq!(parse_time("250").unwrap(), Span::from_micros(250));
        assert_eq!(parse_time("1.5ms").unwrap(), Span::from_micros(1500));
    }

    #[test]
    fn malformed_values_name_the_token_and_units() {
        let e = parse_rate("10mbits").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"10mbits\""), "{msg}");
        assert!(msg.contains("kbit") && msg.contains("gibit"), "{msg}");
        assert!(parse_rate("").is_err());
        assert!(parse_rate("mbit").is_err());
        assert!(parse_size("1.2.3k").is_err());
        assert!(parse_time("5 parsecs").is_err());
        assert!(parse_rate("1e999").is_err());
        assert!(parse_size("99999999999999999999999g").is_err());
    }

    #[test]
    fn printing_follows_tc() {
        assert_eq!(format_rate(Rate::from_bps(100_000_000)), "100Mbit");
        assert_eq!(format_rate(Rate::from_bps(20_000)), "20Kbit");
        assert_eq!(format_rate(Rate::from_bps(1_500_000)), "1500Kbit");
        assert_eq!(format_rate(Rate::from_bps(10_000_000_000)), "10Gbit");
        assert_eq!(format_rate(Rate::from_bps(8)), "8bit");
        assert_eq!(format_rate(Rate::from_bps(800_000_000_000)), "800Gbit");
        assert_eq!(format_size(1600), "1600b");
        assert_eq!(format_size(2048), "2Kb");
        assert_eq!(format_size(1514), "1514b");
        assert_eq!(format_size(32 * 1048576), "32Mb");
        assert_eq!(format_size(100_000), "100000b");
        assert_eq!(format_time(Span::from_millis(5)), "5ms");
        assert_eq!(format_time(Span::from_millis(100)), "100ms");
        assert_eq!(format_time(Span::from_micros(1_024_000)), "1.02s");
        assert_eq!(format_time(Span::from_micros(200)), "200us");
    }

    #[test]
    fn format_g_matches_c() {
        assert_eq!(format_g(1.024, 3), "1.02");
        assert_eq!(format_g(100.0, 3), "100");
        assert_eq!(format_g(5000.0, 3), "5e+03");
        assert_eq!(format_g(0.5, 3), "0.5");
        assert_eq!(format_g(32.0, 6), "32");
    }
}
