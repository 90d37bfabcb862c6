//! fq: the Fair Queue scheduler with per-flow pacing. tc's `q_fq.c` (iproute2 6.1), the kernel's
//! `sch_fq.c`; the algorithm is `sluice_core::fq`.
//!
//! tc 6.1 knows neither `priomap`/`weights` nor `offload_horizon` (later releases): the model
//! holds what tc 6.1 can send, and the running qdisc has the kernel's default bands.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{illegal, time_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use crate::print::{rate, time_us};
use serde::{Deserialize, Serialize};
use sluice_core::fq::{Fq as Core, FqConfig};
use sluice_core::units::{format_size, format_time, parse_rate, parse_time};
use sluice_core::{Qdisc, Span};
use std::fmt::Write;

/// fq options: what tc sent (`None`: not given, the kernel's default or the old value applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FqOpts {
    /// Packets per band (10000).
    pub limit: Option<u32>,
    /// Packets per flow (100).
    pub flow_limit: Option<u32>,
    /// log2 of the flow buckets tc sends for `buckets N` (10).
    pub buckets_log: Option<u32>,
    /// DRR quantum bytes (2 × psched_mtu).
    pub quantum: Option<u32>,
    /// A new flow's credit in bytes (10 × psched_mtu).
    pub initial_quantum: Option<u32>,
    /// `pacing` / `nopacing` (on).
    pub pacing: Option<bool>,
    /// Per-flow rate cap, bytes/s (`~0`: none).
    pub maxrate: Option<u32>,
    /// Bytes/s below which every packet is paced (68750).
    pub low_rate_threshold: Option<u32>,
    /// Obsolete default rate, bytes/s: tc sends it, the kernel ignores it.
    pub defrate: Option<u32>,
    /// Credit refill delay, µs (40 ms).
    pub refill_delay: Option<u32>,
    /// Mask on orphaned packets' hash (1023).
    pub orphan_mask: Option<u32>,
    /// CE threshold, µs (`~0`: none).
    pub ce_threshold: Option<u32>,
    /// Watchdog slack, ns (10 µs).
    pub timer_slack: Option<u32>,
    /// EDT horizon, µs (10 s).
    pub horizon: Option<u32>,
    /// `horizon_drop` (true) or `horizon_cap` (false).
    pub horizon_drop: Option<bool>,
}

/// The kind.
pub struct Fq;

/// `TCA_FQ_*` (`linux/pkt_sched.h`).
mod attr {
    pub const PLIMIT: u16 = 1;
    pub const FLOW_PLIMIT: u16 = 2;
    pub const QUANTUM: u16 = 3;
    pub const INITIAL_QUANTUM: u16 = 4;
    pub const RATE_ENABLE: u16 = 5;
    pub const FLOW_DEFAULT_RATE: u16 = 6;
    pub const FLOW_MAX_RATE: u16 = 7;
    pub const BUCKETS_LOG: u16 = 8;
    pub const FLOW_REFILL_DELAY: u16 = 9;
    pub const ORPHAN_MASK: u16 = 10;
    pub const LOW_RATE_THRESHOLD: u16 = 11;
    pub const CE_THRESHOLD: u16 = 12;
    pub const TIMER_SLACK: u16 = 13;
    pub const HORIZON: u16 = 14;
    pub const HORIZON_DROP: u16 = 15;
}

const USAGE: &str = "Usage: ... fq\t[ limit PACKETS ] [ flow_limit PACKETS ]\n\t\t[ quantum BYTES ] [ initial_quantum BYTES ]\n\t\t[ maxrate RATE  ] [ buckets NUMBER ]\n\t\t[ [no]pacing ] [ refill_delay TIME ]\n\t\t[ low_rate_threshold RATE ]\n\t\t[ orphan_mask MASK]\n\t\t[ timer_slack TIME]\n\t\t[ ce_threshold TIME ]\n\t\t[ horizon TIME ]\n\t\t[ horizon_{cap|drop} ]";

/// The kernel's defaults (`fq_init`).
const LIMIT: u32 = 10000;
const FLOW_LIMIT: u32 = 100;
const BUCKETS_LOG: u32 = 10;
const ORPHAN_MASK: u32 = 1023;
const LOW_RATE: u32 = 550_000 / 8;
const REFILL_US: u32 = 40_000;
const TIMER_SLACK_NS: u32 = 10_000;
const HORIZON_US: u32 = 10_000_000;
/// The tick of the kernel Sluice emulates (this host's `CONFIG_HZ`): the refill delay is kept
/// in jiffies.
const HZ: u32 = 250;

/// tc's `ilog2`: the log of `val` rounded up.
fn ilog2(val: u32) -> u32 {
    32 - (val - 1).leading_zeros()
}

/// `usecs_to_jiffies` then `jiffies_to_usecs` (the value the kernel dumps, in its unsigned int).
fn refill_kept(us: u32) -> u32 {
    let tick = 1_000_000 / HZ;
    let jiffies = (us as u64).div_ceil(tick as u64);
    (jiffies as u32).wrapping_mul(tick)
}

/// `get_rate`: bits/s to bytes/s in a u32, or `Illegal "WHAT"`.
fn rate_bytes(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    if v.contains('%') {
        return Err(TcError::usage(
            format!("Illegal \"{what}\"\n(a percentage of the device speed needs a device with a known speed; Sluice's devices have none)"),
            Some(i),
        ));
    }
    let bps = parse_rate(v).map_err(|e| illegal(what, i, Some(e.to_string())))?.bps();
    u32::try_from(bps / 8).map_err(|_| illegal(what, i, None))
}

/// `get_time64` (a bare number is ns) into the u32 tc sends for `timer_slack`.
fn slack_arg(cur: &mut Cur) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    let ns = match v.parse::<f64>() {
        Ok(n) if n >= 0.0 => n as u64,
        Ok(_) => return Err(TcError::usage("Illegal (out of range) \"timer_slack\"", Some(i))),
        Err(_) => parse_time(v).map_err(|_| illegal("timer_slack", i, None))?.as_nanos(),
    };
    u32::try_from(ns).map_err(|_| TcError::usage("Illegal (out of range) \"timer_slack\"", Some(i)))
}

/// `sprint_time64`.
fn time_ns(ns: u32) -> String {
    if ns == 0 {
        "0ns".into()
    } else {
        format_time(Span::from_nanos(ns as u64))
    }
}

/// The options as the kernel holds them: what was sent over its defaults.
struct Kept {
    limit: u32,
    flow_limit: u32,
    buckets_log: u32,
    orphan_mask: u32,
    pacing: bool,
    quantum: u32,
    initial_quantum: u32,
    maxrate: u32,
    low_rate: u32,
    refill_us: u32,
    ce_threshold: u32,
    timer_slack: u32,
    horizon: u32,
    horizon_drop: bool,
}

fn kept(o: &FqOpts, dev: &Device) -> Kept {
    Kept {
        limit: o.limit.unwrap_or(LIMIT),
        flow_limit: o.flow_limit.unwrap_or(FLOW_LIMIT),
        buckets_log: o.buckets_log.unwrap_or(BUCKETS_LOG),
        orphan_mask: o.orphan_mask.unwrap_or(ORPHAN_MASK),
        pacing: o.pacing.unwrap_or(true),
        quantum: o.quantum.unwrap_or(2 * dev.psched_mtu()),
        initial_quantum: o.initial_quantum.unwrap_or(10 * dev.psched_mtu()),
        maxrate: o.maxrate.unwrap_or(u32::MAX),
        low_rate: o.low_rate_threshold.unwrap_or(LOW_RATE),
        refill_us: refill_kept(o.refill_delay.unwrap_or(REFILL_US)),
        ce_threshold: o.ce_threshold.unwrap_or(u32::MAX),
        timer_slack: o.timer_slack.unwrap_or(TIMER_SLACK_NS),
        horizon: o.horizon.unwrap_or(HORIZON_US),
        horizon_drop: o.horizon_drop.unwrap_or(true),
    }
}

impl QdiscKind for Fq {
    const NAME: &'static str = "fq";
    type Opts = FqOpts;

    fn parse(cur: &mut Cur) -> Result<FqOpts, TcError> {
        let mut o = FqOpts::default();
        while let Some((at, w)) = cur.next_word() {
            match w {
                "limit" => o.limit = Some(u32_arg(cur, "limit")?),
                "flow_limit" => o.flow_limit = Some(u32_arg(cur, "flow_limit")?),
                // tc sends the log of a non-zero count, rounded up.
                "buckets" => o.buckets_log = Some(u32_arg(cur, "buckets")?).filter(|&b| b != 0).map(ilog2),
                "maxrate" => o.maxrate = Some(rate_bytes(cur, "maxrate")?),
                "low_rate_threshold" => o.low_rate_threshold = Some(rate_bytes(cur, "low_rate_threshold")?),
                "defrate" => o.defrate = Some(rate_bytes(cur, "defrate")?),
                "ce_threshold" => o.ce_threshold = Some(time_arg(cur, "ce_threshold")?),
                "timer_slack" => o.timer_slack = Some(slack_arg(cur)?),
                "horizon_drop" => o.horizon_drop = Some(true),
                "horizon_cap" => o.horizon_drop = Some(false),
                "horizon" => o.horizon = Some(time_arg(cur, "horizon")?),
                "quantum" => o.quantum = Some(u32_arg(cur, "quantum")?),
                "initial_quantum" => o.initial_quantum = Some(u32_arg(cur, "initial_quantum")?),
                // tc 6.1 names the wrong option when the mask is bad.
                "orphan_mask" => o.orphan_mask = Some(u32_arg(cur, "initial_quantum")?),
                "refill_delay" => o.refill_delay = Some(time_arg(cur, "refill_delay")?),
                "pacing" => o.pacing = Some(true),
                "nopacing" => o.pacing = Some(false),
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        Ok(o)
    }

    fn args(o: &FqOpts) -> String {
        let mut s = String::new();
        let counts = [
            ("limit", o.limit),
            ("flow_limit", o.flow_limit),
            ("buckets", o.buckets_log.filter(|&l| l < 32).map(|l| 1u32 << l)),
            ("quantum", o.quantum),
            ("initial_quantum", o.initial_quantum),
            ("orphan_mask", o.orphan_mask),
        ];
        for (k, v) in counts {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        for (k, v) in
            [("maxrate", o.maxrate), ("low_rate_threshold", o.low_rate_threshold), ("defrate", o.defrate)]
        {
            if let Some(v) = v {
                let _ = write!(s, " {k} {}bit", v as u64 * 8);
            }
        }
        for (k, v) in
            [("refill_delay", o.refill_delay), ("ce_threshold", o.ce_threshold), ("horizon", o.horizon)]
        {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}us");
            }
        }
        if let Some(v) = o.timer_slack {
            let _ = write!(s, " timer_slack {v}ns");
        }
        match o.pacing {
            Some(true) => s.push_str(" pacing"),
            Some(false) => s.push_str(" nopacing"),
            None => {}
        }
        match o.horizon_drop {
            Some(true) => s.push_str(" horizon_drop"),
            Some(false) => s.push_str(" horizon_cap"),
            None => {}
        }
        s
    }

    fn show(o: &FqOpts, dev: &Device, _d: bool) -> String {
        let k = kept(o, dev);
        let mut s = String::new();
        let _ = write!(
            s,
            "limit {}p flow_limit {}p buckets {} orphan_mask {} ",
            k.limit,
            k.flow_limit,
            1u32.wrapping_shl(k.buckets_log),
            k.orphan_mask
        );
        if !k.pacing {
            s.push_str("nopacing ");
        }
        let _ = write!(
            s,
            "quantum {} initial_quantum {} ",
            format_size(k.quantum as u64),
            format_size(k.initial_quantum as u64)
        );
        if k.maxrate != u32::MAX {
            let _ = write!(s, "maxrate {} ", rate(k.maxrate as u64 * 8));
        }
        if k.low_rate != 0 {
            let _ = write!(s, "low_rate_threshold {} ", rate(k.low_rate as u64 * 8));
        }
        let _ = write!(s, "refill_delay {} ", time_us(k.refill_us));
        if k.ce_threshold != u32::MAX {
            let _ = write!(s, "ce_threshold {} ", time_us(k.ce_threshold));
        }
        let _ = write!(s, "timer_slack {} horizon {} ", time_ns(k.timer_slack), time_us(k.horizon));
        s.push_str(if k.horizon_drop { "horizon_drop " } else { "horizon_cap " });
        s
    }

    fn json(o: &FqOpts, dev: &Device, _d: bool) -> J {
        let k = kept(o, dev);
        let mut j = J::obj();
        j.put("limit", k.limit)
            .put("flow_limit", k.flow_limit)
            .put("buckets", 1u32.wrapping_shl(k.buckets_log))
            .put("orphan_mask", k.orphan_mask);
        if !k.pacing {
            j.put("pacing", false);
        }
        j.put("quantum", k.quantum).put("initial_quantum", k.initial_quantum);
        if k.maxrate != u32::MAX {
            j.put("maxrate", k.maxrate);
        }
        if k.low_rate != 0 {
            j.put("low_rate_threshold", k.low_rate);
        }
        j.put("refill_delay", k.refill_us);
        if k.ce_threshold != u32::MAX {
            j.put("ce_threshold", k.ce_threshold);
        }
        j.put("timer_slack", k.timer_slack).put("horizon", k.horizon);
        j.put(if k.horizon_drop { "horizon_drop" } else { "horizon_cap" }, serde_json::Value::Null);
        j
    }

    fn xstats_text(_o: &FqOpts, _dev: &Device) -> String {
        "  flows 0 (inactive 0 throttled 0)\n  gc 0 highprio 0 throttled 0\n".into()
    }

    fn xstats_json(_o: &FqOpts) -> Option<J> {
        let mut j = J::obj();
        for k in ["flows", "inactive", "throttled", "gc", "highprio", "throttled"] {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `fq_change`: what is not sent keeps its value; a bad bucket count, quantum or initial
    /// quantum refuses the request.
    fn change(_dev: &Device, n: FqOpts, old: Option<&FqOpts>) -> Result<FqOpts, TcError> {
        if n.initial_quantum.is_some_and(|q| q > i32::MAX as u32) {
            // The attribute policy's range, checked before `fq_change` runs (no extack).
            return Err(TcError::errno("Numerical result out of range"));
        }
        if n.quantum.is_some_and(|q| q == 0 || q > 1 << 20) {
            return Err(TcError::kernel("sch_fq: invalid quantum"));
        }
        if n.buckets_log.is_some_and(|l| !(1..=18).contains(&l)) {
            return Err(TcError::errno("Invalid argument"));
        }
        let Some(o) = old else { return Ok(n) };
        Ok(FqOpts {
            limit: n.limit.or(o.limit),
            flow_limit: n.flow_limit.or(o.flow_limit),
            buckets_log: n.buckets_log.or(o.buckets_log),
            quantum: n.quantum.or(o.quantum),
            initial_quantum: n.initial_quantum.or(o.initial_quantum),
            pacing: n.pacing.or(o.pacing),
            maxrate: n.maxrate.or(o.maxrate),
            low_rate_threshold: n.low_rate_threshold.or(o.low_rate_threshold),
            defrate: n.defrate.or(o.defrate),
            refill_delay: n.refill_delay.or(o.refill_delay),
            orphan_mask: n.orphan_mask.or(o.orphan_mask),
            ce_threshold: n.ce_threshold.or(o.ce_threshold),
            timer_slack: n.timer_slack.or(o.timer_slack),
            horizon: n.horizon.or(o.horizon),
            horizon_drop: n.horizon_drop.or(o.horizon_drop),
        })
    }

    /// A nest with what was given, in `fq_parse_opt`'s order (an empty nest when nothing was).
    fn encode(o: &FqOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        let words = [
            (attr::BUCKETS_LOG, o.buckets_log),
            (attr::PLIMIT, o.limit),
            (attr::FLOW_PLIMIT, o.flow_limit),
            (attr::QUANTUM, o.quantum),
            (attr::INITIAL_QUANTUM, o.initial_quantum),
            (attr::RATE_ENABLE, o.pacing.map(u32::from)),
            (attr::FLOW_MAX_RATE, o.maxrate),
            (attr::LOW_RATE_THRESHOLD, o.low_rate_threshold),
            (attr::FLOW_DEFAULT_RATE, o.defrate),
            (attr::FLOW_REFILL_DELAY, o.refill_delay),
            (attr::ORPHAN_MASK, o.orphan_mask),
            (attr::CE_THRESHOLD, o.ce_threshold),
            (attr::TIMER_SLACK, o.timer_slack),
            (attr::HORIZON, o.horizon),
        ];
        for (ty, v) in words {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        if let Some(d) = o.horizon_drop {
            out.put_u8(attr::HORIZON_DROP, u8::from(d));
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<FqOpts, DecodeError> {
        let mut o = FqOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            if ty == attr::HORIZON_DROP {
                let v = p.first().ok_or_else(|| DecodeError::new("fq", "horizon_drop is empty"))?;
                o.horizon_drop = Some(*v != 0);
                continue;
            }
            let v = u32_of(p).ok_or_else(|| DecodeError::new("fq", format!("attribute {ty} is short")))?;
            let slot = match ty {
                attr::BUCKETS_LOG => &mut o.buckets_log,
                attr::PLIMIT => &mut o.limit,
                attr::FLOW_PLIMIT => &mut o.flow_limit,
                attr::QUANTUM => &mut o.quantum,
                attr::INITIAL_QUANTUM => &mut o.initial_quantum,
                attr::RATE_ENABLE => {
                    o.pacing = Some(v != 0);
                    continue;
                }
                attr::FLOW_MAX_RATE => &mut o.maxrate,
                attr::LOW_RATE_THRESHOLD => &mut o.low_rate_threshold,
                attr::FLOW_DEFAULT_RATE => &mut o.defrate,
                attr::FLOW_REFILL_DELAY => &mut o.refill_delay,
                attr::ORPHAN_MASK => &mut o.orphan_mask,
                attr::CE_THRESHOLD => &mut o.ce_threshold,
                attr::TIMER_SLACK => &mut o.timer_slack,
                attr::HORIZON => &mut o.horizon,
                _ => continue,
            };
            *slot = Some(v);
        }
        Ok(o)
    }

    fn build(o: &FqOpts, _q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let k = kept(o, cx.dev);
        let d = FqConfig::for_mtu(cx.dev.psched_mtu());
        Ok(Box::new(Core::new(FqConfig {
            limit: k.limit,
            flow_limit: k.flow_limit,
            quantum: k.quantum,
            initial_quantum: k.initial_quantum,
            maxrate: (k.maxrate != u32::MAX).then_some(k.maxrate as u64),
            buckets_log: k.buckets_log,
            pacing: k.pacing,
            refill_delay: Span::from_micros(k.refill_us as u64),
            orphan_mask: k.orphan_mask,
            low_rate_threshold: k.low_rate as u64,
            ce_threshold: (k.ce_threshold != u32::MAX).then(|| Span::from_micros(k.ce_threshold as u64)),
            timer_slack: Span::from_nanos(k.timer_slack as u64),
            horizon: Span::from_micros(k.horizon as u64),
            horizon_drop: k.horizon_drop,
            ..d
        })?))
    }

    fn label(o: &FqOpts) -> Option<String> {
        o.maxrate.filter(|&r| r != u32::MAX).map(|r| format!("maxrate {}", rate(r as u64 * 8)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ilog2_rounds_up_as_tc_does() {
        assert_eq!([1, 2, 3, 1000, 1024, 1025].map(ilog2), [0, 1, 2, 10, 10, 11]);
    }

    #[test]
    fn the_refill_delay_is_kept_in_jiffies() {
        assert_eq!(refill_kept(40_000), 40_000);
        assert_eq!(refill_kept(1), 4_000);
        assert_eq!(refill_kept(0), 0);
    }
}
