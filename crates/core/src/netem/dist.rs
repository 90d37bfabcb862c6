//! netem's delay distribution tables: the inverse cumulative distribution function of a
//! zero-mean, unit-deviation distribution, sampled at equal probability steps and scaled by
//! [`DIST_SCALE`], as iproute2 generates `normal.dist`, `pareto.dist` and `paretonormal.dist`
//! (its `netem/` generators) and as `tc` loads a user table (`distribution NAME` reads
//! `NAME.dist`).
//!
//! The built-in tables are computed here with the same method and floating-point steps as the
//! generators (tested against the installed tables where iproute2 is present), once per process.

use std::sync::{Arc, OnceLock};

/// The kernel's `NETEM_DIST_SCALE`: a table value of 8192 is one standard deviation.
pub const DIST_SCALE: i64 = 8192;
/// The kernel's `NETEM_DIST_MAX`: the largest table (entries).
pub const DIST_MAX: usize = 16384;

/// Resolution of the cumulative function the generators sample (`TABLESIZE`).
const TABLESIZE: usize = 16384;

/// A distribution table, shared between the qdiscs built from one configuration.
pub type DistTable = Arc<[i16]>;

/// The distributions tc ships tables for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinDist {
    /// Gaussian.
    Normal,
    /// Pareto with shape 3, shifted to mean 0.
    Pareto,
    /// A quarter normal, three quarters Pareto (NISTnet's mix).
    ParetoNormal,
}

impl BuiltinDist {
    /// The name tc takes after `distribution`.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinDist::Normal => "normal",
            BuiltinDist::Pareto => "pareto",
            BuiltinDist::ParetoNormal => "paretonormal",
        }
    }

    /// The built-in distribution called `name`, if any.
    pub fn from_name(name: &str) -> Option<BuiltinDist> {
        [BuiltinDist::Normal, BuiltinDist::Pareto, BuiltinDist::ParetoNormal]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// The table (computed on first use).
    pub fn table(self) -> DistTable {
        static NORMAL: OnceLock<DistTable> = OnceLock::new();
        static PARETO: OnceLock<DistTable> = OnceLock::new();
        static PARETONORMAL: OnceLock<DistTable> = OnceLock::new();
        match self {
            BuiltinDist::Normal => NORMAL.get_or_init(|| normal().into()).clone(),
            BuiltinDist::Pareto => PARETO.get_or_init(|| pareto().into()).clone(),
            BuiltinDist::ParetoNormal => PARETONORMAL.get_or_init(|| paretonormal().into()).clone(),
        }
    }
}

/// The normal CDF sampled the generators' way: for x from -10 in steps of 0.00005, the entry
/// at `rint(TABLESIZE·Φ(x))` is x (later x overwrite earlier ones).
fn normal_inverse_cdf() -> Vec<f64> {
    let mut table = vec![0.0f64; TABLESIZE + 1];
    let mut x = -10.0f64;
    while x < 10.05 {
        let phi = 0.5 + 0.5 * libm::erf(x / (2.0f64.sqrt()));
        let i = (TABLESIZE as f64 * phi).round_ties_even() as usize;
        table[i.min(TABLESIZE)] = x;
        x += 0.00005;
    }
    table
}

fn clamp_i16(v: i64) -> i16 {
    v.clamp(i16::MIN as i64, i16::MAX as i64) as i16
}

/// The normal table (4096 entries).
pub fn normal() -> Vec<i16> {
    let t = normal_inverse_cdf();
    (0..TABLESIZE)
        .step_by(4)
        .map(|i| clamp_i16((t[i] * DIST_SCALE as f64).round_ties_even() as i64))
        .collect()
}

/// One Pareto entry for probability `i / 65536` (shape 3, shifted by its mean 1.5, scaled so
/// that one unit of deviation is [`DIST_SCALE`]); capped at 32767 like the generator.
fn pareto_value(i: i64) -> i64 {
    let p = i as f64 / 65536.0;
    let v = (1.0 / p.powf(1.0 / 3.0) - 1.5) * (4.0 / 3.0) * DIST_SCALE as f64;
    v.min(32767.0).round_ties_even() as i64
}

/// The Pareto table (4096 entries).
pub fn pareto() -> Vec<i16> {
    (0..4096).map(|k| clamp_i16(pareto_value(65536 - 16 * k))).collect()
}

/// The Pareto-normal table (4096 entries): `(normal + 3·pareto) / 4` in integers.
pub fn paretonormal() -> Vec<i16> {
    let t = normal_inverse_cdf();
    (0..TABLESIZE)
        .step_by(4)
        .map(|i| {
            let norm = (t[i] * DIST_SCALE as f64).round_ties_even() as i64;
            let par = pareto_value(65536 - 4 * i as i64);
            // C integer division truncates toward zero, as Rust's does.
            clamp_i16((norm + 3 * par) / 4)
        })
        .collect()
}

/// Why a distribution file was refused (tc's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistError {
    /// More than [`DIST_MAX`] values.
    #[error("{0}: too much data")]
    TooMuchData(String),
    /// No values at all.
    #[error("{0}: no distribution data")]
    Empty(String),
}

/// Parses a `.dist` file as tc does: lines starting with `#` and empty lines are skipped, every
/// other line holds integers (C `strtol` base 0: decimal, `0x` hex, leading-0 octal), each
/// kept as a signed 16-bit value (truncated like tc's cast); parsing of a line stops at the
/// first word that is not a number. `name` is for messages.
pub fn parse_dist(name: &str, text: &str) -> Result<Vec<i16>, DistError> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for word in line.split_whitespace() {
            let Some(v) = strtol(word) else { break };
            if out.len() >= DIST_MAX {
                return Err(DistError::TooMuchData(name.to_string()));
            }
            out.push(v as i16);
        }
    }
    if out.is_empty() {
        return Err(DistError::Empty(name.to_string()));
    }
    Ok(out)
}

/// `strtol(word, 0)` for a whole word (a word with trailing garbage ends the line, as tc's
/// loop stops there after taking the number's prefix: the prefix is taken).
fn strtol(word: &str) -> Option<i64> {
    let (neg, rest) = match word.as_bytes().first() {
        Some(b'-') => (true, &word[1..]),
        Some(b'+') => (false, &word[1..]),
        _ => (false, word),
    };
    let (radix, digits) = if let Some(h) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
        (16, h)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    if end == 0 {
        return if radix == 8 { Some(0) } else { None };
    }
    let v = i64::from_str_radix(&digits[..end], radix).unwrap_or(i64::MAX);
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// iproute2's installed tables, where this machine has them.
    fn installed(name: &str) -> Option<Vec<i16>> {
        for dir in ["/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc", "/usr/local/lib/tc"] {
            if let Ok(text) = std::fs::read_to_string(format!("{dir}/{name}.dist")) {
                return parse_dist(name, &text).ok();
            }
        }
        None
    }

    #[test]
    fn builtin_tables_match_iproute2s_generated_tables() {
        for d in [BuiltinDist::Normal, BuiltinDist::Pareto, BuiltinDist::ParetoNormal] {
            let ours = d.table();
            assert_eq!(ours.len(), 4096, "{}", d.name());
            let Some(theirs) = installed(d.name()) else {
                eprintln!("SKIPPED comparison: no installed {}.dist", d.name());
                continue;
            };
            let differ = ours.iter().zip(&theirs).filter(|(a, b)| a != b).count();
            assert_eq!(theirs.len(), ours.len(), "{}", d.name());
            assert_eq!(differ, 0, "{}: {differ} of 4096 entries differ", d.name());
        }
    }

    #[test]
    fn tables_have_the_expected_shape() {
        let n = normal();
        // Symmetric around the middle, monotone, one deviation = 8192 at about 84%.
        assert!(n.windows(2).all(|w| w[0] <= w[1]));
        assert!(n[2048].abs() <= 2);
        assert!((n[(4096.0 * 0.8413) as usize] as i64 - DIST_SCALE).abs() < 40);
        let p = pareto();
        assert!(p.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(p[0], (-0.5f64 * 4.0 / 3.0 * 8192.0).round() as i16);
    }

    #[test]
    fn dist_files_parse_like_tc() {
        assert_eq!(
            parse_dist("x", "# c\n\n 1 -2 0x10 010\n70000 junk 5\n").unwrap(),
            vec![1, -2, 16, 8, 70000u32 as i16]
        );
        assert!(matches!(parse_dist("x", "# only\n"), Err(DistError::Empty(_))));
        let big = "1 ".repeat(DIST_MAX + 1);
        assert!(matches!(parse_dist("x", &big), Err(DistError::TooMuchData(_))));
    }
}
