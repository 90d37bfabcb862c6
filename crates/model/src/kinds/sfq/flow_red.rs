//! SFQ's RED words: tc's derivations on the way in (`sfq_parse_opt`, with RED's helpers in
//! [`crate::kinds::red`]), the words that give the same kernel values back on the way out, and
//! the probability a `max_P` came from.
//!
//! The kernel keeps `Wlog`, not the `avpkt` and `burst` tc derived it from, and so does the
//! model (`ewma`). To write options tc turns into the same `Wlog`, [`args`] adds `avpkt` and
//! `burst` when tc's defaults give another one, found by search: for a fixed `avpkt`, the
//! `Wlog` tc derives never decreases as `burst` grows (each added packet of a burst raises the
//! average less than the one before), so a binary search over `burst` finds the first one that
//! gives it, if any does.

use super::SfqRed;
use crate::error::TcError;
use crate::grammar::{illegal, size_arg, u32_arg, Cur};
use crate::kinds::red::{eval_ewma, eval_p};
use crate::kinds::Unencodable;
use crate::tcmath::c_u32;
use std::fmt::Write;

/// tc's `avpkt` when none is given.
const AVPKT: u32 = 1000;

/// 2^32: `max_P` is the probability as a Q0.32 number.
const Q32: f64 = 4_294_967_296.0;

/// The RED words of one `sfq` command, as given.
pub(super) struct Words {
    /// Any RED word was given.
    given: bool,
    flowlimit: u32,
    min: u32,
    max: u32,
    avpkt: (u32, Option<usize>),
    burst: u32,
    probability: f64,
    ecn: bool,
    harddrop: bool,
}

impl Default for Words {
    fn default() -> Self {
        Words {
            given: false,
            flowlimit: 0,
            min: 0,
            max: 0,
            avpkt: (AVPKT, None),
            burst: 0,
            probability: 0.02,
            ecn: false,
            harddrop: false,
        }
    }
}

impl Words {
    /// Reads RED word `w` (and its value); false when `w` is not one.
    pub(super) fn word(&mut self, w: &str, cur: &mut Cur) -> Result<bool, TcError> {
        match w {
            "redflowlimit" => self.flowlimit = size_arg(cur, "redflowlimit")?,
            "min" => self.min = size_arg(cur, "min")?,
            "max" => self.max = size_arg(cur, "max")?,
            "burst" => self.burst = u32_arg(cur, "burst")?,
            "avpkt" => {
                let at = cur.pos;
                self.avpkt = (size_arg(cur, "avpkt")?, Some(at));
            }
            "probability" => {
                let (i, v) = cur.value()?;
                // tc reads it with sscanf("%lg") and scales it to 32 bits; a value that is not
                // a number in [0, 1] (nan, inf, 1e309) is refused here rather than sent.
                self.probability = v
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| illegal("probability", i, None))?;
            }
            "ecn" => self.ecn = true,
            "harddrop" => self.harddrop = true,
            _ => return Ok(false),
        }
        self.given = true;
        Ok(true)
    }

    /// tc's checks and derivations once every word is read (None: no RED word was given).
    pub(super) fn derive(self) -> Result<Option<SfqRed>, TcError> {
        if !self.given {
            return Ok(None);
        }
        let Words { flowlimit, mut min, mut max, avpkt: (avpkt, avpkt_at), mut burst, probability, .. } =
            self;
        if flowlimit == 0 {
            return Err(TcError::usage("Required parameter (redflowlimit) is missing", None));
        }
        // Sally Floyd's recommendations, in C's unsigned arithmetic.
        if max == 0 {
            max = flowlimit / 4;
        }
        if min == 0 {
            min = max / 3;
        }
        if avpkt == 0 {
            // tc divides by it (and dies of SIGFPE).
            return Err(illegal("avpkt", avpkt_at.unwrap_or(0), None));
        }
        if burst == 0 {
            burst = min.wrapping_mul(2).wrapping_add(max).checked_div(avpkt.wrapping_mul(3)).unwrap_or(0);
        }
        if max > flowlimit {
            return Err(TcError::usage("\"max\" is larger than \"limit\"", None));
        }
        if min >= max {
            return Err(TcError::usage("\"min\" is not smaller than \"max\"", None));
        }
        let ewma = eval_ewma(min, burst, avpkt)
            .map_err(|m| TcError::usage(format!("{m}SFQ: failed to calculate EWMA constant."), None))?;
        if eval_p(min, max, probability).is_none() {
            return Err(TcError::usage("SFQ: failed to calculate probability.", None));
        }
        Ok(Some(SfqRed { flowlimit, min, max, probability, ewma, ecn: self.ecn, harddrop: self.harddrop }))
    }
}

/// `Plog` and `max_P` as tc derives them from `r`; an error names what tc could not derive.
pub(super) fn kernel_values(r: &SfqRed) -> Result<(u8, u32), Unencodable> {
    let refuse = |why: String| Unencodable { kind: "sfq", option: "probability".into(), why };
    if !(0.0..=1.0).contains(&r.probability) {
        return Err(refuse(format!("{} is not in [0, 1]", r.probability)));
    }
    let plog = eval_p(r.min, r.max, r.probability).ok_or_else(|| {
        refuse(format!(
            "tc derives no Plog from {} over max - min = {}",
            r.probability,
            r.max.wrapping_sub(r.min)
        ))
    })?;
    Ok((plog, max_p(r.probability)))
}

/// `max_P`: the probability in Q0.32, converted as C does (`probability 1` gives 0).
fn max_p(probability: f64) -> u32 {
    c_u32(probability * Q32)
}

/// The probability that gave `max_p`: the shortest decimal tc turns into it (the one a person
/// most likely wrote); 0 is what `probability 1` gives (tc refuses a probability of 0).
pub(super) fn probability_of(max_p: u32) -> f64 {
    if max_p == 0 {
        return 1.0;
    }
    let lo = max_p as f64 / Q32;
    for digits in 1..=17i32 {
        let k = (lo * 10f64.powi(digits)).ceil() as u64;
        for k in [k.saturating_sub(1), k, k + 1] {
            if let Ok(p) = format!("{k}e-{digits}").parse::<f64>() {
                if self::max_p(p) == max_p {
                    return p;
                }
            }
        }
    }
    lo // exact: max_p / 2^32 times 2^32 is max_p
}

/// The words after the other options: thresholds, the probability, the flags, and `avpkt` and
/// `burst` when tc's defaults would derive another `Wlog` than `r.ewma`.
pub(super) fn args(r: &SfqRed) -> String {
    let mut s = format!(" redflowlimit {} min {} max {}", r.flowlimit, r.min, r.max);
    if let Some((avpkt, burst)) = ewma_words(r.min, r.max, r.ewma) {
        if avpkt != AVPKT {
            let _ = write!(s, " avpkt {avpkt}");
        }
        let _ = write!(s, " burst {burst}");
    }
    let _ = write!(s, " probability {}", r.probability);
    if r.ecn {
        s.push_str(" ecn");
    }
    if r.harddrop {
        s.push_str(" harddrop");
    }
    s
}

/// `avpkt` and `burst` from which tc derives Wlog `ewma` for these thresholds: None when its
/// defaults do (or when no pair is found: then the defaults are all that can be written).
fn ewma_words(min: u32, max: u32, ewma: u8) -> Option<(u32, u32)> {
    let default_burst = min.wrapping_mul(2).wrapping_add(max) / (3 * AVPKT);
    if eval_ewma(min, default_burst, AVPKT) == Ok(ewma) {
        return None;
    }
    // Wlog by burst, for one avpkt: 0 below the bursts tc accepts, 32 above.
    let wlog = |burst: u32, avpkt: u32| match eval_ewma(min, burst, avpkt) {
        Ok(w) => w as u32,
        Err(m) if !m.is_empty() => 0,
        Err(_) => 32,
    };
    // tc's avpkt first (only `burst` is then written), then avpkts just below min: there the
    // EWMA weights are finely spaced in burst.
    let avpkts = std::iter::once(AVPKT).chain((1..=min).rev().take(4096));
    for avpkt in avpkts {
        let (mut lo, mut hi) = (1u32, u32::MAX);
        if wlog(hi, avpkt) < ewma as u32 {
            continue;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if wlog(mid, avpkt) >= ewma as u32 {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if wlog(lo, avpkt) == ewma as u32 {
            return Some((avpkt, lo));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probabilities_come_back_as_written() {
        for p in [0.2, 0.05, 0.02, 0.123456, 1.0, 0.999, 1e-6] {
            assert_eq!(probability_of(max_p(p)), p, "{p}");
        }
        // tc's 0.20 is 0x33333333, 0.05 is 0x0ccccccc (the captured requests).
        assert_eq!(max_p(0.2), 0x3333_3333);
        assert_eq!(max_p(0.05), 0x0ccc_cccc);
    }

    #[test]
    fn ewma_words_give_the_wlog_back() {
        // burst 10 of avpkt 1000 over min 5000: Wlog 4, which tc's default burst gives too.
        assert_eq!(ewma_words(5000, 20000, 4), None);
        for (min, max, avpkt, burst) in [(5000, 20000, 1000, 100), (8000, 60000, 300, 7), (30, 90, 7, 5000)] {
            let Ok(w) = eval_ewma(min, burst, avpkt) else { continue };
            let words = ewma_words(min, max, w);
            let (a, b) = words.unwrap_or((AVPKT, (2 * min + max) / (3 * AVPKT)));
            assert_eq!(eval_ewma(min, b, a), Ok(w), "{min} {max} {avpkt} {burst}: {words:?}");
        }
    }
}
