//! pie: Proportional Integral controller Enhanced (RFC 8033). tc's `q_pie.c`, the kernel's
//! `sch_pie.c`; the algorithm is `sluice_core::pie`.
//!
//! tc sends a `TCA_OPTIONS` nest (empty when nothing was given) holding, in this order, the
//! limit, tupdate, target, alpha and beta when not 0, then ECN, byte mode and the rate
//! estimator when their word (or its `no` form) was given. A 0 is therefore "not given", and
//! the parser keeps it so. The kernel dumps every parameter: `show` prints the defaults for what
//! was not sent, with the target in psched ticks and `tupdate` in jiffies as it reads them back.
//!
//! The words and printing shared with fq_pie (the PIE controller's parameters) are [`PieShared`].

use super::{BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, time_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use crate::print::time_us;
use serde::{Deserialize, Serialize};
use sluice_core::pie::{
    target_shown, tupdate_shown, us_to_ticks, usecs_to_jiffies, Pie as Core, PieConfig, PieParams,
    DEFAULT_ALPHA, DEFAULT_BETA, DEFAULT_LIMIT, DEFAULT_TARGET_US, DEFAULT_TUPDATE_US,
};
use sluice_core::{Handle, Qdisc};
use std::fmt::Write;

/// The PIE controller's options, as pie and fq_pie share them: what tc sent (`None`: not given,
/// the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PieShared {
    /// Target queue delay µs (15000).
    pub target: Option<u32>,
    /// Probability update interval µs (15000; runs in jiffies).
    pub tupdate: Option<u32>,
    /// Integral gain in 1/16 (2).
    pub alpha: Option<u32>,
    /// Proportional gain in 1/16 (20).
    pub beta: Option<u32>,
    /// ECN marking (off).
    pub ecn: Option<bool>,
    /// Probability scaled by packet size (off).
    pub bytemode: Option<bool>,
    /// Queue delay from the departure rate instead of timestamps (off).
    pub dq_rate_estimator: Option<bool>,
}

/// tc's largest alpha and beta (`ALPHA_MAX`, `BETA_MAX`).
const GAIN_MAX: u32 = 32;

impl PieShared {
    /// One of the shared words, `w`; `false` if `w` is not one of them.
    pub(crate) fn parse_word(&mut self, w: &str, cur: &mut Cur) -> Result<bool, TcError> {
        // tc sends none of the numbers when zero: the kernel's default.
        let nonzero = |v: u32| Some(v).filter(|&v| v != 0);
        let gain = |cur: &mut Cur, what: &str| -> Result<Option<u32>, TcError> {
            let (i, v) = cur.value()?;
            let v = get_u32(v).filter(|&v| v <= GAIN_MAX).ok_or_else(|| illegal(what, i, None))?;
            Ok(nonzero(v))
        };
        match w {
            "target" => self.target = nonzero(time_arg(cur, "target")?),
            "tupdate" => self.tupdate = nonzero(time_arg(cur, "tupdate")?),
            "alpha" => self.alpha = gain(cur, "alpha")?,
            "beta" => self.beta = gain(cur, "beta")?,
            "ecn" => self.ecn = Some(true),
            "noecn" => self.ecn = Some(false),
            "bytemode" => self.bytemode = Some(true),
            "nobytemode" => self.bytemode = Some(false),
            "dq_rate_estimator" => self.dq_rate_estimator = Some(true),
            "no_dq_rate_estimator" => self.dq_rate_estimator = Some(false),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Export words of the gains and times (each with a leading space).
    pub(crate) fn args_gains(&self, s: &mut String) {
        for (k, v) in [("target", self.target), ("tupdate", self.tupdate)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}us");
            }
        }
        for (k, v) in [("alpha", self.alpha), ("beta", self.beta)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
    }

    /// Export words of the switches.
    pub(crate) fn args_flags(&self, s: &mut String) {
        for (on, off, v) in [
            ("ecn", "noecn", self.ecn),
            ("bytemode", "nobytemode", self.bytemode),
            ("dq_rate_estimator", "no_dq_rate_estimator", self.dq_rate_estimator),
        ] {
            match v {
                Some(true) => {
                    s.push(' ');
                    s.push_str(on);
                }
                Some(false) => {
                    s.push(' ');
                    s.push_str(off);
                }
                None => {}
            }
        }
    }

    /// The target as the kernel dumps it, µs.
    pub(crate) fn target_shown(&self) -> u32 {
        target_shown(self.target.unwrap_or(DEFAULT_TARGET_US))
    }

    /// `tupdate` as the kernel dumps it (whole jiffies), µs.
    pub(crate) fn tupdate_shown(&self) -> u32 {
        tupdate_shown(self.tupdate.unwrap_or(DEFAULT_TUPDATE_US))
    }

    /// `target T tupdate T alpha A beta B ` as tc prints the dump.
    pub(crate) fn show_gains(&self, s: &mut String) {
        let _ = write!(
            s,
            "target {} tupdate {} alpha {} beta {} ",
            time_us(self.target_shown()),
            time_us(self.tupdate_shown()),
            self.alpha.unwrap_or(DEFAULT_ALPHA),
            self.beta.unwrap_or(DEFAULT_BETA)
        );
    }

    /// The switches that are on, as tc prints them.
    pub(crate) fn show_flags(&self, s: &mut String) {
        for (k, v) in
            [("ecn", self.ecn), ("bytemode", self.bytemode), ("dq_rate_estimator", self.dq_rate_estimator)]
        {
            if v == Some(true) {
                s.push_str(k);
                s.push(' ');
            }
        }
    }

    /// [`PieShared::show_gains`] for `-j`.
    pub(crate) fn json_gains(&self, j: &mut J) {
        j.put("target", self.target_shown())
            .put("tupdate", self.tupdate_shown())
            .put("alpha", self.alpha.unwrap_or(DEFAULT_ALPHA))
            .put("beta", self.beta.unwrap_or(DEFAULT_BETA));
    }

    /// [`PieShared::show_flags`] for `-j`.
    pub(crate) fn json_flags(&self, j: &mut J) {
        for (k, v) in
            [("ecn", self.ecn), ("bytemode", self.bytemode), ("dq_rate_estimator", self.dq_rate_estimator)]
        {
            if v == Some(true) {
                j.put(k, true);
            }
        }
    }

    /// What a change keeps: the kernel overwrites only what was sent.
    pub(crate) fn merge(self, old: &PieShared) -> PieShared {
        PieShared {
            target: self.target.or(old.target),
            tupdate: self.tupdate.or(old.tupdate),
            alpha: self.alpha.or(old.alpha),
            beta: self.beta.or(old.beta),
            ecn: self.ecn.or(old.ecn),
            bytemode: self.bytemode.or(old.bytemode),
            dq_rate_estimator: self.dq_rate_estimator.or(old.dq_rate_estimator),
        }
    }

    /// The controller's parameters in the kernel's units, with `limit` packets.
    pub(crate) fn params(&self, limit: u32) -> PieParams {
        PieParams {
            target: us_to_ticks(self.target.unwrap_or(DEFAULT_TARGET_US)),
            tupdate: usecs_to_jiffies(self.tupdate.unwrap_or(DEFAULT_TUPDATE_US)),
            limit,
            alpha: self.alpha.unwrap_or(DEFAULT_ALPHA),
            beta: self.beta.unwrap_or(DEFAULT_BETA),
            ecn: self.ecn.unwrap_or(false),
            bytemode: self.bytemode.unwrap_or(false),
            dq_rate_estimator: self.dq_rate_estimator.unwrap_or(false),
        }
    }

    /// A seed for the qdisc with handle `h` from the run's seed.
    pub(crate) fn seed(run: u64, h: Handle) -> u64 {
        run ^ (h.major() as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

/// pie options: what tc sent (`None`: not given, the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PieOpts {
    /// Packets (1000).
    pub limit: Option<u32>,
    /// The controller's options.
    #[serde(flatten)]
    pub pie: PieShared,
}

/// The kind.
pub struct Pie;

/// `TCA_PIE_*` (`linux/pkt_sched.h`).
mod attr {
    pub const TARGET: u16 = 1;
    pub const LIMIT: u16 = 2;
    pub const TUPDATE: u16 = 3;
    pub const ALPHA: u16 = 4;
    pub const BETA: u16 = 5;
    pub const ECN: u16 = 6;
    pub const BYTEMODE: u16 = 7;
    pub const DQ_RATE_ESTIMATOR: u16 = 8;
}

const USAGE: &str = "Usage: ... pie [ limit PACKETS ] [ target TIME ]\n               [ tupdate TIME ] [ alpha ALPHA ] [ beta BETA ]\n               [ bytemode | nobytemode ] [ ecn | noecn ]\n               [ dq_rate_estimator | no_dq_rate_estimator ]";

impl QdiscKind for Pie {
    const NAME: &'static str = "pie";
    type Opts = PieOpts;

    fn parse(cur: &mut Cur) -> Result<PieOpts, TcError> {
        let mut o = PieOpts::default();
        while let Some((at, w)) = cur.next_word() {
            if o.pie.parse_word(w, cur)? {
                continue;
            }
            match w {
                "limit" => o.limit = Some(u32_arg(cur, "limit")?).filter(|&v| v != 0),
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        Ok(o)
    }

    fn args(o: &PieOpts) -> String {
        let mut s = String::new();
        if let Some(v) = o.limit {
            let _ = write!(s, " limit {v}");
        }
        o.pie.args_gains(&mut s);
        o.pie.args_flags(&mut s);
        s
    }

    fn show(o: &PieOpts, _dev: &Device, _d: bool) -> String {
        let mut s = format!("limit {}p ", o.limit.unwrap_or(DEFAULT_LIMIT));
        o.pie.show_gains(&mut s);
        o.pie.show_flags(&mut s);
        s
    }

    fn json(o: &PieOpts, _dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("limit", o.limit.unwrap_or(DEFAULT_LIMIT));
        o.pie.json_gains(&mut j);
        o.pie.json_flags(&mut j);
        j
    }

    fn xstats_text(o: &PieOpts, _dev: &Device) -> String {
        let rate = if o.pie.dq_rate_estimator == Some(true) { " avg_dq_rate 0" } else { "" };
        format!("  prob 0 delay 0us{rate}\n  pkts_in 0 overlimit 0 dropped 0 maxq 0 ecn_mark 0\n")
    }

    fn xstats_json(o: &PieOpts) -> Option<J> {
        let mut j = J::obj();
        j.put("prob", 0u32).put("delay", 0u32);
        if o.pie.dq_rate_estimator == Some(true) {
            j.put("avg_dq_rate", 0u32);
        }
        for k in ["pkts_in", "overlimit", "dropped", "maxq", "ecn_mark"] {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `pie_change`: no checks beyond the attribute types; what is not sent keeps its value.
    fn change(_dev: &Device, n: PieOpts, old: Option<&PieOpts>) -> Result<PieOpts, TcError> {
        let Some(o) = old else { return Ok(n) };
        Ok(PieOpts { limit: n.limit.or(o.limit), pie: n.pie.merge(&o.pie) })
    }

    /// A nest with what was given, in `pie_parse_opt`'s order (an empty nest when nothing was).
    fn encode(o: &PieOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        let p = &o.pie;
        out.begin_nest(TCA_OPTIONS);
        let words = [
            (attr::LIMIT, o.limit),
            (attr::TUPDATE, p.tupdate),
            (attr::TARGET, p.target),
            (attr::ALPHA, p.alpha),
            (attr::BETA, p.beta),
            (attr::ECN, p.ecn.map(u32::from)),
            (attr::BYTEMODE, p.bytemode.map(u32::from)),
            (attr::DQ_RATE_ESTIMATOR, p.dq_rate_estimator.map(u32::from)),
        ];
        for (ty, v) in words {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<PieOpts, DecodeError> {
        let mut o = PieOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let v = u32_of(p).ok_or_else(|| DecodeError::new("pie", format!("attribute {ty} is short")))?;
            let q = &mut o.pie;
            match ty {
                attr::LIMIT => o.limit = Some(v),
                attr::TUPDATE => q.tupdate = Some(v),
                attr::TARGET => q.target = Some(v),
                attr::ALPHA => q.alpha = Some(v),
                attr::BETA => q.beta = Some(v),
                attr::ECN => q.ecn = Some(v != 0),
                attr::BYTEMODE => q.bytemode = Some(v != 0),
                attr::DQ_RATE_ESTIMATOR => q.dq_rate_estimator = Some(v != 0),
                _ => {}
            }
        }
        Ok(o)
    }

    fn build(o: &PieOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Ok(Box::new(Core::new(PieConfig {
            params: o.pie.params(o.limit.unwrap_or(DEFAULT_LIMIT)),
            mtu: cx.dev.psched_mtu(),
            seed: PieShared::seed(cx.seed, q.handle),
        })?))
    }

    fn label(o: &PieOpts) -> Option<String> {
        Some(format!("target {}", time_us(o.pie.target_shown())))
    }
}
