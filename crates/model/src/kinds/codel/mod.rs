//! codel: Controlled Delay AQM (RFC 8289). tc's `q_codel.c`, the kernel's `sch_codel.c`; the
//! algorithm is `sluice_core::codel`.
//!
//! tc sends a `TCA_OPTIONS` nest (empty when nothing was given) holding, in this order, the
//! limit, interval and target when not 0, ECN when `ecn` or `noecn` was given, and the CE
//! threshold when not `~0`. A 0 (or a `~0` threshold) is therefore "not given", and the parser
//! keeps it so.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::{codel_params, BuildError};
use crate::error::TcError;
use crate::grammar::{time_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use crate::print::{codel_us, time_us};
use serde::{Deserialize, Serialize};
use sluice_core::codel::{Codel as Core, CodelConfig};
use sluice_core::Qdisc;
use std::fmt::Write;

/// CoDel options: what tc sent (`None`: not given, the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CodelOpts {
    /// Packets (1000).
    pub limit: Option<u32>,
    /// Target delay µs (5000).
    pub target: Option<u32>,
    /// Interval µs (100000).
    pub interval: Option<u32>,
    /// CE marking threshold µs.
    pub ce_threshold: Option<u32>,
    /// ECN marking (off).
    pub ecn: Option<bool>,
}

/// The kind.
pub struct Codel;

/// `TCA_CODEL_*` (`linux/pkt_sched.h`).
mod attr {
    pub const TARGET: u16 = 1;
    pub const LIMIT: u16 = 2;
    pub const INTERVAL: u16 = 3;
    pub const ECN: u16 = 4;
    pub const CE_THRESHOLD: u16 = 5;
}

const USAGE: &str = "Usage: ... codel [ limit PACKETS ] [ target TIME ]\n                 [ interval TIME ] [ ecn | noecn ]\n                 [ ce_threshold TIME ]";

/// The kernel's defaults (`codel_init`).
const LIMIT: u32 = 1000;
const TARGET_US: u32 = 5000;
const INTERVAL_US: u32 = 100_000;

/// tc's "no CE threshold" (`~0U`).
const NO_CE: u32 = u32::MAX;

impl QdiscKind for Codel {
    const NAME: &'static str = "codel";
    type Opts = CodelOpts;

    fn parse(cur: &mut Cur) -> Result<CodelOpts, TcError> {
        let mut o = CodelOpts::default();
        // tc keeps the last value of each word and sends only those it tells from "not given".
        let nonzero = |v: u32| Some(v).filter(|&v| v != 0);
        while let Some((at, w)) = cur.next_word() {
            match w {
                "limit" => o.limit = nonzero(u32_arg(cur, "limit")?),
                "target" => o.target = nonzero(time_arg(cur, "target")?),
                "interval" => o.interval = nonzero(time_arg(cur, "interval")?),
                "ce_threshold" => {
                    o.ce_threshold = Some(time_arg(cur, "ce_threshold")?).filter(|&v| v != NO_CE)
                }
                "ecn" => o.ecn = Some(true),
                "noecn" => o.ecn = Some(false),
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        Ok(o)
    }

    fn args(o: &CodelOpts) -> String {
        let mut s = String::new();
        if let Some(v) = o.limit {
            let _ = write!(s, " limit {v}");
        }
        for (k, v) in [("target", o.target), ("interval", o.interval), ("ce_threshold", o.ce_threshold)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}us");
            }
        }
        match o.ecn {
            Some(true) => s.push_str(" ecn"),
            Some(false) => s.push_str(" noecn"),
            None => {}
        }
        s
    }

    fn show(o: &CodelOpts, _dev: &Device, _d: bool) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "limit {}p target {} ",
            o.limit.unwrap_or(LIMIT),
            time_us(codel_us(o.target.unwrap_or(TARGET_US)))
        );
        if let Some(ce) = o.ce_threshold {
            let _ = write!(s, "ce_threshold {} ", time_us(codel_us(ce)));
        }
        let _ = write!(s, "interval {} ", time_us(codel_us(o.interval.unwrap_or(INTERVAL_US))));
        if o.ecn == Some(true) {
            s.push_str("ecn ");
        }
        s
    }

    fn json(o: &CodelOpts, _dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("limit", o.limit.unwrap_or(LIMIT)).put("target", codel_us(o.target.unwrap_or(TARGET_US)));
        if let Some(ce) = o.ce_threshold {
            j.put("ce_threshold", codel_us(ce));
        }
        j.put("interval", codel_us(o.interval.unwrap_or(INTERVAL_US)));
        if o.ecn == Some(true) {
            j.put("ecn", true);
        }
        j
    }

    fn xstats_text(_o: &CodelOpts, _dev: &Device) -> String {
        "  count 0 lastcount 0 ldelay 0us drop_next 0us\n  maxpacket 0 ecn_mark 0 drop_overlimit 0\n".into()
    }

    fn xstats_json(_o: &CodelOpts) -> Option<J> {
        let mut j = J::obj();
        for k in ["count", "lastcount", "ldelay", "drop_next", "maxpacket", "ecn_mark", "drop_overlimit"] {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `codel_change`: what is not sent keeps its value.
    fn change(_dev: &Device, n: CodelOpts, old: Option<&CodelOpts>) -> Result<CodelOpts, TcError> {
        let Some(o) = old else { return Ok(n) };
        Ok(CodelOpts {
            limit: n.limit.or(o.limit),
            target: n.target.or(o.target),
            interval: n.interval.or(o.interval),
            ce_threshold: n.ce_threshold.or(o.ce_threshold),
            ecn: n.ecn.or(o.ecn),
        })
    }

    /// A nest in `codel_parse_opt`'s order; the values tc takes for "not given" are not sent.
    fn encode(o: &CodelOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        let words = [
            (attr::LIMIT, o.limit.filter(|&v| v != 0)),
            (attr::INTERVAL, o.interval.filter(|&v| v != 0)),
            (attr::TARGET, o.target.filter(|&v| v != 0)),
            (attr::ECN, o.ecn.map(u32::from)),
            (attr::CE_THRESHOLD, o.ce_threshold.filter(|&v| v != NO_CE)),
        ];
        for (ty, v) in words {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<CodelOpts, DecodeError> {
        let mut o = CodelOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let v = u32_of(p).ok_or_else(|| DecodeError::new("codel", format!("attribute {ty} is short")))?;
            match ty {
                attr::LIMIT => o.limit = Some(v),
                attr::INTERVAL => o.interval = Some(v),
                attr::TARGET => o.target = Some(v),
                attr::ECN => o.ecn = Some(v != 0),
                attr::CE_THRESHOLD => o.ce_threshold = Some(v),
                _ => {}
            }
        }
        Ok(o)
    }

    fn build(o: &CodelOpts, _q: &QdiscNode, _cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Ok(Box::new(Core::new(CodelConfig {
            limit: o.limit.unwrap_or(LIMIT),
            params: codel_params(o.target, o.interval, o.ce_threshold, o.ecn.unwrap_or(false)),
        })?))
    }

    fn label(o: &CodelOpts) -> Option<String> {
        Some(format!("target {}", time_us(o.target.unwrap_or(TARGET_US))))
    }
}
