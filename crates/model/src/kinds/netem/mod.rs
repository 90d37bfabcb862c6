//! netem in the tc language: the options as iproute2 6.1's `q_netem.c` parses and prints them,
//! the kernel's checks and `change` semantics (`sch_netem.c`), and the distribution tables tc
//! would load.
//!
//! What tc does with the words, kept here: times become scheduler ticks (15.625 per µs,
//! truncated) and the kernel keeps `ticks << 6` ns; percentages become `rint(p · (2³²−1))`;
//! `loss state P13` and `loss gemodel P` fill the other transition probabilities with tc's
//! defaults; `1-h` is stored as the kernel's `h`; only the correlations of delay, loss,
//! reorder and corrupt make tc send the correlation attribute (a duplicate correlation alone
//! is not sent, as in tc). `change` keeps what tc did not send: correlations, reorder,
//! corrupt, rate, ecn, slot and the tables; the loss model falls back to random loss.
//!
//! [`Netem`] is the registry kind (the kernel's `sch_netem.c`; the algorithm is
//! `sluice_core::netem`); its netlink encoding is in `netlink.rs`, its builder in `build.rs`.

mod build;
mod netlink;

use super::{BuildCx, ClassList, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, matches, Cur};
use crate::json::J;
use crate::model::{is_false, is_zero_i32, is_zero_u32, Device, QdiscNode, QdiscOpts};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::netem::dist::{parse_dist, BuiltinDist, DIST_MAX};
use sluice_core::units::{format_g, format_rate, format_time, parse_rate, parse_size};
use sluice_core::{Handle, Qdisc, Rate, Span};
use std::fmt::Write;

/// netem options as the kernel keeps them (probabilities scaled to `u32::MAX`; times in ns
/// after tc's conversion to scheduler ticks).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetemOpts {
    /// Packets held at most (1000).
    pub limit: u32,
    /// Mean delay, ns.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub latency: u64,
    /// Jitter, ns.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub jitter: u64,
    /// Random loss probability (the legacy model).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub loss: u32,
    /// Reorder gap.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub gap: u32,
    /// Duplication probability.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub duplicate: u32,
    /// Correlations of delay, loss and duplication (kept by `change` when not sent).
    pub corr: Option<NetemCorr>,
    /// Reorder probability and correlation (kept by `change` when not sent).
    pub reorder: Option<NetemProb>,
    /// Corruption probability and correlation (kept by `change` when not sent).
    pub corrupt: Option<NetemProb>,
    /// The 4-state or Gilbert-Elliott loss model (absent: random loss).
    pub loss_model: Option<NetemLoss>,
    /// Serialisation rate (kept by `change` when not sent).
    pub rate: Option<NetemRateOpts>,
    /// Mark instead of dropping (kept by `change`: tc never sends it off).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ecn: bool,
    /// Slotting (kept by `change` when not sent).
    pub slot: Option<NetemSlotOpts>,
    /// Delay distribution (kept by `change` when not sent).
    pub distribution: Option<NetemDist>,
    /// Slot distribution (kept by `change` when not sent).
    pub slot_distribution: Option<NetemDist>,
}

impl Default for NetemOpts {
    fn default() -> Self {
        NetemOpts {
            limit: 1000,
            latency: 0,
            jitter: 0,
            loss: 0,
            gap: 0,
            duplicate: 0,
            corr: None,
            reorder: None,
            corrupt: None,
            loss_model: None,
            rate: None,
            ecn: false,
            slot: None,
            distribution: None,
            slot_distribution: None,
        }
    }
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// `struct tc_netem_corr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemCorr {
    /// Delay correlation.
    pub delay: u32,
    /// Loss correlation.
    pub loss: u32,
    /// Duplication correlation.
    pub duplicate: u32,
}

/// A probability with its correlation (`tc_netem_reorder`, `tc_netem_corrupt`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemProb {
    /// Probability.
    pub probability: u32,
    /// Correlation.
    pub correlation: u32,
}

/// netem's correlated loss models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum NetemLoss {
    /// `loss state p13 p31 p32 p23 p14` (the 4-state Markov model).
    State {
        /// Good to burst loss.
        p13: u32,
        /// Burst loss to good.
        p31: u32,
        /// Burst loss to burst reception.
        p32: u32,
        /// Burst reception to burst loss.
        p23: u32,
        /// Good to isolated loss.
        p14: u32,
    },
    /// `loss gemodel p r 1-h 1-k` with `h` as the kernel keeps it.
    Gemodel {
        /// Good to bad.
        p: u32,
        /// Bad to good.
        r: u32,
        /// Delivery probability in the bad state.
        h: u32,
        /// Loss probability in the good state.
        k1: u32,
    },
}

/// `struct tc_netem_rate` (with the 64-bit rate).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemRateOpts {
    /// Bytes per second.
    pub bytes_per_sec: u64,
    /// Added to each packet.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub packet_overhead: i32,
    /// Cell size.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub cell_size: u32,
    /// Added to each cell.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub cell_overhead: i32,
}

/// `struct tc_netem_slot` (times in ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemSlotOpts {
    /// Shortest gap between slots.
    pub min_delay: i64,
    /// Longest gap.
    pub max_delay: i64,
    /// Packets per slot (0: no limit).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub max_packets: i32,
    /// Bytes per slot (0: no limit).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub max_bytes: i32,
    /// Mean gap with a table.
    #[serde(default)]
    pub dist_delay: i64,
    /// Gap deviation with a table.
    #[serde(default)]
    pub dist_jitter: i64,
}

/// A distribution table by name; `table` holds a user table's values (empty for the built-in
/// `normal`, `pareto` and `paretonormal`, which are computed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemDist {
    /// The name given to tc.
    pub name: String,
    /// The values of a table read from a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub table: Vec<i16>,
}

/// The kind (boxed in the model: its options are the largest).
pub struct Netem;

impl QdiscKind for Netem {
    const NAME: &'static str = "netem";
    const CLASSFUL: bool = true;
    type Opts = Box<NetemOpts>;

    fn parse(cur: &mut Cur) -> Result<Box<NetemOpts>, TcError> {
        parse(cur).map(Box::new)
    }

    fn args(o: &Box<NetemOpts>) -> String {
        export_args(o)
    }

    fn show(o: &Box<NetemOpts>, _dev: &Device, _d: bool) -> String {
        print_opts(o)
    }

    fn json(o: &Box<NetemOpts>, _dev: &Device, _d: bool) -> J {
        json(o)
    }

    fn change(
        _dev: &Device,
        n: Box<NetemOpts>,
        old: Option<&Box<NetemOpts>>,
    ) -> Result<Box<NetemOpts>, TcError> {
        kernel_change(*n, old.map(|o| &**o)).map(Box::new)
    }

    fn encode(o: &Box<NetemOpts>, out: &mut Attrs) -> Result<(), Unencodable> {
        netlink::encode(o, out);
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<Box<NetemOpts>, DecodeError> {
        netlink::decode(options).map(Box::new)
    }

    const CLASS_OPS: bool = true;

    /// `netem_find` answers for any minor: its one class.
    fn has_class(_o: &Box<NetemOpts>, _dev: &Device, _q: &QdiscNode, _classid: Handle) -> bool {
        true
    }

    /// `netem_dump_class`: its one class exists only while it has a child qdisc.
    fn classes(_o: &Box<NetemOpts>, dev: &Device, q: &QdiscNode) -> ClassList {
        match child(dev, q) {
            Some(_) => ClassList::Implicit(vec![(Handle::new(q.handle.major(), 1), q.handle)]),
            None => ClassList::None,
        }
    }

    /// Its one class holds its child whatever minor the child was added under.
    fn class_leaf<'d>(
        _o: &Box<NetemOpts>,
        dev: &'d Device,
        q: &QdiscNode,
        id: Handle,
    ) -> Option<&'d QdiscNode> {
        dev.qdisc_at(id).or_else(|| child(dev, q))
    }

    fn build(o: &Box<NetemOpts>, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        build::build(o, q, cx)
    }
}

/// tc's usage text (`explain()`).
pub const USAGE: &str = "Usage: ... netem [ limit PACKETS ]\n                 [ delay TIME [ JITTER [CORRELATION]]]\n                 [ distribution {uniform|normal|pareto|paretonormal} ]\n                 [ corrupt PERCENT [CORRELATION]]\n                 [ duplicate PERCENT [CORRELATION]]\n                 [ loss random PERCENT [CORRELATION]]\n                 [ loss state P13 [P31 [P32 [P23 P14]]]\n                 [ loss gemodel PERCENT [R [1-H [1-K]]]\n                 [ ecn ]\n                 [ reorder PERCENT [CORRELATION] [ gap DISTANCE ]]\n                 [ rate RATE [PACKETOVERHEAD] [CELLSIZE] [CELLOVERHEAD]]\n                 [ slot MIN_DELAY [MAX_DELAY] [packets MAX_PACKETS] [bytes MAX_BYTES]]\n                 [ slot distribution {uniform|normal|pareto|paretonormal|custom}\n                   DELAY JITTER [packets MAX_PACKETS] [bytes MAX_BYTES]]";

/// Scheduler ticks per microsecond (`/proc/net/psched` on every current kernel).
const TICK_IN_USEC: f64 = 15.625;

fn illegal(what: &str, at: usize) -> TcError {
    TcError::usage(format!("Illegal \"{what}\""), Some(at))
}

fn with_usage(msg: &str) -> TcError {
    TcError::usage(format!("{msg}\n{USAGE}"), None)
}

/// C `strtod` for decimal numbers: the longest prefix that is a number, and the rest.
fn strtod(s: &str) -> (Option<f64>, &str) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let int_end = digits(i);
    let mut end = int_end;
    if end < b.len() && b[end] == b'.' {
        end = digits(end + 1);
    }
    if end == i || (end == i + 1 && b[i] == b'.') {
        return (None, s);
    }
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut j = end + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let k = digits(j);
        if k > j {
            end = k;
        }
    }
    (s[..end].trim_start().parse().ok(), &s[end..])
}

/// `parse_percent`: a fraction in 0..=1 from `N` or `N%`.
fn parse_percent(s: &str) -> Option<f64> {
    let (v, rest) = strtod(s);
    let v = v.unwrap_or(0.0) / 100.0;
    if !(0.0..=1.0).contains(&v) || (!rest.is_empty() && rest != "%") {
        return None;
    }
    Some(v)
}

/// `set_percent`.
pub fn scale_percent(p: f64) -> u32 {
    (p * u32::MAX as f64).round_ties_even() as u32
}

fn percent_arg(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    parse_percent(v).map(scale_percent).ok_or_else(|| illegal(what, i))
}

/// `NEXT_IS_NUMBER()`.
fn next_is_number(cur: &Cur) -> bool {
    cur.peek().is_some_and(|w| w.as_bytes().first().is_some_and(|c| c.is_ascii_digit()))
}

/// `NEXT_IS_SIGNED_NUMBER()`.
fn next_is_signed_number(cur: &Cur) -> bool {
    cur.peek().is_some_and(|w| w.as_bytes().first().is_some_and(|c| c.is_ascii_digit() || *c == b'-'))
}

/// `get_time`: µs from `N`, `Ns`, `Nms`, `Nus` (truncated like tc).
fn get_time_us(s: &str) -> Option<u32> {
    let (v, rest) = strtod(s);
    let v = v?;
    let mult = match rest.to_ascii_lowercase().as_str() {
        "" => 1.0,
        "s" | "sec" | "secs" => 1e6,
        "ms" | "msec" | "msecs" => 1e3,
        "us" | "usec" | "usecs" => 1.0,
        _ => return None,
    };
    Some((v * mult).clamp(0.0, u32::MAX as f64) as u32)
}

/// `get_ticks` then the kernel's `PSCHED_TICKS2NS`: the ns the kernel keeps.
fn ticks_arg(cur: &mut Cur, what: &str) -> Result<u64, TcError> {
    let (i, v) = cur.value()?;
    let us = get_time_us(v).ok_or_else(|| illegal(what, i))?;
    let ticks = us as f64 * TICK_IN_USEC;
    if ticks > u32::MAX as f64 {
        return Err(TcError::usage(format!("Illegal {us} time (too large)\nIllegal \"{what}\""), Some(i)));
    }
    Ok((ticks as u32 as u64) << 6)
}

/// `get_time64`: ns from `N` (ns), `Ns`, `Nms`, `Nus`, `Nns`.
fn get_time64(s: &str) -> Option<i64> {
    let (v, rest) = strtod(s);
    let v = v?;
    let mult = match rest.to_ascii_lowercase().as_str() {
        "" | "ns" | "nsec" | "nsecs" => 1.0,
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" => 1e3,
        _ => return None,
    };
    Some((v * mult) as i64)
}

fn time64_arg(cur: &mut Cur, what: &str) -> Result<i64, TcError> {
    let (i, v) = cur.value()?;
    get_time64(v).ok_or_else(|| illegal(what, i))
}

/// C `strtol(s, 0)` of a whole word as `get_s32` wants it.
fn get_s32(s: &str) -> Option<i32> {
    match s.strip_prefix('-') {
        Some(r) => get_u32(r).and_then(|v| i32::try_from(-(v as i64)).ok()),
        None => get_u32(s).and_then(|v| i32::try_from(v).ok()),
    }
}

/// Where tc looks for `NAME.dist`: `$TC_LIB_DIR`, then the usual library directories.
fn dist_dirs() -> Vec<String> {
    let mut v: Vec<String> = std::env::var("TC_LIB_DIR").into_iter().collect();
    v.extend(
        ["/usr/lib/x86_64-linux-gnu/tc", "/usr/lib/tc", "/usr/lib64/tc", "/usr/local/lib/tc"]
            .map(String::from),
    );
    v
}

/// `get_distribution`: a built-in table by name, or `NAME.dist` read like tc reads it.
pub fn load_distribution(name: &str) -> Result<NetemDist, TcError> {
    if BuiltinDist::from_name(name).is_some() {
        return Ok(NetemDist { name: name.to_string(), table: Vec::new() });
    }
    let dirs = dist_dirs();
    for d in &dirs {
        let path = format!("{d}/{name}.dist");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let table = parse_dist(&path, &text).map_err(|e| TcError::usage(e.to_string(), None))?;
            return Ok(NetemDist { name: name.to_string(), table });
        }
    }
    Err(TcError::usage(
        format!("No distribution data for {name} ({}/{name}.dist: No such file or directory)", dirs[0]),
        None,
    ))
}

/// The values of a distribution (computed for the built-ins).
pub fn dist_table(d: &NetemDist) -> Vec<i16> {
    match BuiltinDist::from_name(&d.name) {
        Some(b) if d.table.is_empty() => b.table().to_vec(),
        _ => d.table.clone(),
    }
}

/// `netem_parse_opt`.
pub fn parse(cur: &mut Cur) -> Result<NetemOpts, TcError> {
    let mut o = NetemOpts::default();
    let mut cor = NetemCorr::default();
    let mut cor_present = false;
    let mut reorder: Option<NetemProb> = None;
    let mut corrupt: Option<NetemProb> = None;
    while let Some((at, w)) = cur.next_word() {
        if matches(w, "limit") {
            let (i, v) = cur.value()?;
            let v = v.split('/').next().unwrap_or(v);
            o.limit =
                parse_size(v).ok().and_then(|s| u32::try_from(s).ok()).ok_or_else(|| illegal("limit", i))?;
        } else if matches(w, "latency") || matches(w, "delay") {
            o.latency = ticks_arg(cur, "latency")?;
            if next_is_number(cur) {
                o.jitter = ticks_arg(cur, "latency")?;
                if next_is_number(cur) {
                    cor_present = true;
                    cor.delay = percent_arg(cur, "latency")?;
                }
            }
        } else if matches(w, "loss") || matches(w, "drop") {
            if o.loss > 0 || o.loss_model.is_some() {
                return Err(illegal("duplicate loss argument\n", at));
            }
            let (i, v) = cur.value()?;
            let random = v.as_bytes().first().is_some_and(|c| c.is_ascii_digit());
            if random || v == "random" {
                let (i, v) = if random { (i, v) } else { cur.value()? };
                o.loss = parse_percent(v).map(scale_percent).ok_or_else(|| illegal("loss percent", i))?;
                if next_is_number(cur) {
                    cor_present = true;
                    cor.loss = percent_arg(cur, "loss correlation")?;
                }
            } else if v == "state" {
                let (i, v) = cur.value()?;
                let p13 = parse_percent(v).ok_or_else(|| illegal("loss p13", i))?;
                let mut m = [scale_percent(p13), scale_percent(1.0 - p13), 0, u32::MAX, 0];
                for (k, name) in ["loss p31", "loss p32", "loss p23", "loss p14"].iter().enumerate() {
                    if !next_is_number(cur) {
                        break;
                    }
                    m[k + 1] = percent_arg(cur, name)?;
                }
                o.loss_model =
                    Some(NetemLoss::State { p13: m[0], p31: m[1], p32: m[2], p23: m[3], p14: m[4] });
            } else if v == "gemodel" {
                let (i, v) = cur.value()?;
                let p = parse_percent(v).ok_or_else(|| illegal("loss gemodel p", i))?;
                let (mut r, mut h, mut k1) = (scale_percent(1.0 - p), 0, 0);
                if next_is_number(cur) {
                    r = percent_arg(cur, "loss gemodel r")?;
                    if next_is_number(cur) {
                        h = u32::MAX - percent_arg(cur, "loss gemodel h")?;
                        if next_is_number(cur) {
                            k1 = percent_arg(cur, "loss gemodel k")?;
                        }
                    }
                }
                o.loss_model = Some(NetemLoss::Gemodel { p: scale_percent(p), r, h, k1 });
            } else {
                return Err(TcError::usage(format!("Unknown loss parameter: {v}"), Some(i)));
            }
        } else if matches(w, "ecn") {
            o.ecn = true;
        } else if matches(w, "reorder") {
            let p = percent_arg(cur, "reorder")?;
            let mut r = NetemProb { probability: p, correlation: 0 };
            if next_is_number(cur) {
                cor_present = true;
                r.correlation = percent_arg(cur, "reorder")?;
            }
            reorder = Some(r);
        } else if matches(w, "corrupt") {
            let p = percent_arg(cur, "corrupt")?;
            let mut c = NetemProb { probability: p, correlation: 0 };
            if next_is_number(cur) {
                cor_present = true;
                c.correlation = percent_arg(cur, "corrupt")?;
            }
            corrupt = Some(c);
        } else if matches(w, "gap") {
            let (i, v) = cur.value()?;
            o.gap = get_u32(v).ok_or_else(|| illegal("gap", i))?;
        } else if matches(w, "duplicate") {
            o.duplicate = percent_arg(cur, "duplicate")?;
            if next_is_number(cur) {
                cor.duplicate = percent_arg(cur, "duplicate")?;
            }
        } else if matches(w, "distribution") {
            let (_, v) = cur.value()?;
            o.distribution = Some(load_distribution(v)?);
        } else if matches(w, "rate") {
            let (i, v) = cur.value()?;
            if v.contains('%') {
                return Err(TcError::usage(
                    format!(
                        "Illegal \"rate\"\n(a rate in percent of the device speed is not supported: {v})"
                    ),
                    Some(i),
                ));
            }
            let bits = parse_rate(v).map_err(|_| illegal("rate", i))?.bps();
            let mut r = NetemRateOpts { bytes_per_sec: bits / 8, ..NetemRateOpts::default() };
            if next_is_signed_number(cur) {
                let (i, v) = cur.value()?;
                r.packet_overhead = get_s32(v).ok_or_else(|| illegal("rate", i))?;
            }
            if next_is_number(cur) {
                let (i, v) = cur.value()?;
                r.cell_size = get_u32(v).ok_or_else(|| illegal("rate", i))?;
            }
            if next_is_signed_number(cur) {
                let (i, v) = cur.value()?;
                r.cell_overhead = get_s32(v).ok_or_else(|| illegal("rate", i))?;
            }
            o.rate = Some(r);
        } else if matches(w, "slot") {
            let mut s = NetemSlotOpts::default();
            if next_is_number(cur) {
                s.min_delay = time64_arg(cur, "slot min_delay")?;
                if next_is_number(cur) {
                    let (i, v) = cur.value()?;
                    s.max_delay = get_time64(v)
                        .filter(|m| *m >= s.min_delay)
                        .ok_or_else(|| illegal("slot max_delay", i))?;
                } else {
                    s.max_delay = s.min_delay;
                }
            } else {
                let (i, v) = cur.value()?;
                if v != "distribution" {
                    return Err(TcError::usage(format!("Unknown slot parameter: {v}"), Some(i)));
                }
                let (_, name) = cur.value()?;
                o.slot_distribution = Some(load_distribution(name)?);
                s.dist_delay = time64_arg(cur, "slot delay")?;
                s.dist_jitter = time64_arg(cur, "slot jitter")?;
                if s.dist_jitter <= 0 {
                    return Err(TcError::usage("Non-positive jitter", None));
                }
            }
            if cur.peek().is_some_and(|w| matches(w, "packets")) {
                cur.next_word();
                let (i, v) = cur.value().map_err(|_| illegal("slot packets", cur.pos))?;
                s.max_packets = get_s32(v).ok_or_else(|| illegal("slot packets", i))?;
            }
            if cur.peek().is_some_and(|w| matches(w, "bytes")) {
                cur.next_word();
                let (i, v) = cur.value().map_err(|_| illegal("slot bytes", cur.pos))?;
                let b = parse_size(v)
                    .ok()
                    .and_then(|b| u32::try_from(b).ok())
                    .ok_or_else(|| illegal("slot bytes", i))?;
                s.max_bytes = b as i32;
            }
            o.slot = Some(s);
        } else {
            let msg = if w == "help" { USAGE.to_string() } else { format!("What is \"{w}\"?\n{USAGE}") };
            return Err(TcError::usage(msg, Some(at)));
        }
    }
    if reorder.is_some_and(|r| r.probability != 0) {
        if o.latency == 0 {
            return Err(with_usage("reordering not possible without specifying some delay"));
        }
        if o.gap == 0 {
            o.gap = 1;
        }
    } else if o.gap > 0 {
        return Err(with_usage("gap specified without reorder probability"));
    }
    if o.ecn && o.loss == 0 && o.loss_model.is_none() {
        return Err(with_usage("ecn requested without loss model"));
    }
    if o.distribution.is_some() && (o.latency == 0 || o.jitter == 0) {
        return Err(with_usage("distribution specified but no latency and jitter values"));
    }
    o.corr = cor_present.then_some(cor);
    o.reorder = reorder;
    o.corrupt = corrupt;
    Ok(o)
}

/// The kernel's `netem_change` on top of the previous options (`None` for a new qdisc): what
/// was not sent is kept, the jitter is capped at `INT_MAX` ns.
pub fn kernel_change(mut n: NetemOpts, old: Option<&NetemOpts>) -> Result<NetemOpts, TcError> {
    let einval = || TcError::errno("Invalid argument");
    for d in [&n.distribution, &n.slot_distribution].into_iter().flatten() {
        if d.table.len() > DIST_MAX {
            return Err(einval());
        }
    }
    if let Some(s) = &n.slot {
        if s.min_delay < 0 || s.max_delay < 0 {
            return Err(TcError::kernel("negative slot delay"));
        }
        if s.min_delay > s.max_delay {
            return Err(TcError::kernel("slot min delay greater than max delay"));
        }
        if s.dist_delay < 0 || s.dist_jitter < 0 {
            return Err(TcError::kernel("negative dist delay"));
        }
        if s.max_packets < 0 || s.max_bytes < 0 {
            return Err(TcError::kernel("negative slot limit"));
        }
    }
    if let Some(o) = old {
        n.corr = n.corr.or(o.corr);
        n.reorder = n.reorder.or(o.reorder);
        n.corrupt = n.corrupt.or(o.corrupt);
        n.rate = n.rate.or(o.rate);
        n.ecn |= o.ecn;
        n.slot = n.slot.or(o.slot);
        n.distribution = n.distribution.or_else(|| o.distribution.clone());
        n.slot_distribution = n.slot_distribution.or_else(|| o.slot_distribution.clone());
    }
    n.jitter = n.jitter.min(i32::MAX as u64);
    if let Some(s) = &mut n.slot {
        s.dist_jitter = s.dist_jitter.min(i32::MAX as i64);
    }
    Ok(n)
}

/// The kernel's rule against duplicating netems in a tree with other netems (`check_netem_in_tree`):
/// `this` is the handle of the qdisc being changed (`None` when adding).
pub fn check_in_tree(dev: &Device, this: Option<sluice_core::Handle>, n: &NetemOpts) -> Result<(), TcError> {
    let clash = dev.qdiscs.iter().filter(|q| Some(q.handle) != this).any(|q| match &q.opts {
        QdiscOpts::Netem(o) => n.duplicate != 0 || o.duplicate != 0,
        _ => false,
    });
    if clash {
        return Err(TcError::kernel("netem: cannot mix duplicating netems with any other netems in tree"));
    }
    Ok(())
}

/// What the kernel reports as the delay: ns → ticks (capped at `u32`), as tc reads it back.
fn ticks_of(ns: u64) -> u32 {
    (ns >> 6).min(u32::MAX as u64) as u32
}

/// `sprint_ticks`: ticks → µs (truncated) → `print_time`.
fn sprint_ticks(ticks: u32) -> String {
    let us = (ticks as f64 / TICK_IN_USEC) as u32;
    format_time(Span::from_micros(us as u64))
}

/// `print_time64`.
fn sprint_time64(ns: i64) -> String {
    if ns < 1000 {
        format!("{ns}ns")
    } else {
        format_time(Span::from_nanos(ns as u64))
    }
}

fn pct(v: u32) -> String {
    format!("{}%", format_g(100.0 * v as f64 / u32::MAX as f64, 6))
}

/// `netem_print_opt` (text form): the options after `refcnt N `.
pub fn print_opts(o: &NetemOpts) -> String {
    let cor = o.corr.unwrap_or_default();
    let mut s = format!("limit {}", o.limit);
    let (lat, jit) = (ticks_of(o.latency), ticks_of(o.jitter));
    if lat != 0 {
        let _ = write!(s, " delay {}", sprint_ticks(lat));
        if jit != 0 {
            let _ = write!(s, "  {}", sprint_ticks(jit));
            if cor.delay != 0 {
                let _ = write!(s, " {}", pct(cor.delay));
            }
        }
    }
    if o.loss != 0 {
        let _ = write!(s, " loss {}", pct(o.loss));
        if cor.loss != 0 {
            let _ = write!(s, " {}", pct(cor.loss));
        }
    }
    match o.loss_model {
        Some(NetemLoss::State { p13, p31, p32, p23, p14 }) => {
            let _ = write!(
                s,
                " loss state p13 {} p31 {} p32 {} p23 {} p14 {}",
                pct(p13),
                pct(p31),
                pct(p32),
                pct(p23),
                pct(p14)
            );
        }
        Some(NetemLoss::Gemodel { p, r, h, k1 }) => {
            let _ = write!(
                s,
                " loss gemodel p {} r {} 1-h {} 1-k {}",
                pct(p),
                pct(r),
                pct(u32::MAX - h),
                pct(k1)
            );
        }
        None => {}
    }
    if o.duplicate != 0 {
        let _ = write!(s, " duplicate {}", pct(o.duplicate));
        if cor.duplicate != 0 {
            let _ = write!(s, " {}", pct(cor.duplicate));
        }
    }
    for (name, p) in [("reorder", o.reorder), ("corrupt", o.corrupt)] {
        if let Some(p) = p.filter(|p| p.probability != 0) {
            let _ = write!(s, " {name} {}", pct(p.probability));
            if p.correlation != 0 {
                let _ = write!(s, " {}", pct(p.correlation));
            }
        }
    }
    if let Some(r) = o.rate.filter(|r| r.bytes_per_sec != 0) {
        let _ = write!(s, " rate {}", format_rate(Rate::from_bps(r.bytes_per_sec.saturating_mul(8))));
        if r.packet_overhead != 0 {
            let _ = write!(s, " packetoverhead {}", r.packet_overhead);
        }
        if r.cell_size != 0 {
            let _ = write!(s, " cellsize {}", r.cell_size);
        }
        if r.cell_overhead != 0 {
            let _ = write!(s, " celloverhead {}", r.cell_overhead);
        }
    }
    if let Some(sl) = o.slot.filter(|sl| sl.min_delay != 0 || sl.max_delay != 0 || sl.dist_jitter != 0) {
        if sl.dist_jitter > 0 {
            let _ = write!(
                s,
                " slot distribution {} {}",
                sprint_time64(sl.dist_delay),
                sprint_time64(sl.dist_jitter)
            );
        } else {
            let _ = write!(s, " slot {} {}", sprint_time64(sl.min_delay), sprint_time64(sl.max_delay));
        }
        if sl.max_packets != 0 {
            let _ = write!(s, " packets {}", sl.max_packets);
        }
        if sl.max_bytes != 0 {
            let _ = write!(s, " bytes {}", sl.max_bytes);
        }
    }
    if o.ecn {
        s.push_str(" ecn ");
    }
    if o.gap != 0 {
        let _ = write!(s, " gap {}", o.gap);
    }
    s
}

/// The options in tc syntax that load back to the same [`NetemOpts`] (for `export`).
pub fn export_args(o: &NetemOpts) -> String {
    // A percentage that `set_percent` turns back into the same scaled value.
    let p = |v: u32| format!("{}%", v as f64 / u32::MAX as f64 * 100.0);
    // The smallest µs whose ticks are the kernel's: tc truncates µs·15.625.
    let us = |ns: u64| ((ns >> 6) as f64 / TICK_IN_USEC).ceil() as u64;
    // tc sends the correlations when one of delay, loss, reorder or corrupt was given one: each
    // is written only when they were sent, and at least one of them then.
    let cor = o.corr.unwrap_or_default();
    let corr = |v: u32| if o.corr.is_some() { format!(" {}", p(v)) } else { String::new() };
    let loss_random = o.loss_model.is_none() && (o.loss != 0 || cor.loss != 0);
    let corr_elsewhere = loss_random || o.reorder.is_some() || o.corrupt.is_some();
    let delay_corr = o.corr.is_some() && (o.jitter != 0 || cor.delay != 0 || !corr_elsewhere);
    let mut s = format!(" limit {}", o.limit);
    if o.latency != 0 || o.jitter != 0 || delay_corr {
        let _ = write!(s, " delay {}us", us(o.latency));
        if o.jitter != 0 || delay_corr {
            let _ = write!(s, " {}us{}", us(o.jitter), corr(cor.delay));
        }
    }
    match o.loss_model {
        Some(NetemLoss::State { p13, p31, p32, p23, p14 }) => {
            let _ = write!(s, " loss state {} {} {} {} {}", p(p13), p(p31), p(p32), p(p23), p(p14));
        }
        Some(NetemLoss::Gemodel { p: gp, r, h, k1 }) => {
            let _ = write!(s, " loss gemodel {} {} {} {}", p(gp), p(r), p(u32::MAX - h), p(k1));
        }
        None if loss_random => {
            let _ = write!(s, " loss random {}{}", p(o.loss), corr(cor.loss));
        }
        None => {}
    }
    // A duplicate correlation alone is not sent (tc's rule), so it is always written.
    if o.duplicate != 0 || cor.duplicate != 0 {
        let _ = write!(s, " duplicate {} {}", p(o.duplicate), p(cor.duplicate));
    }
    if let Some(r) = o.reorder {
        let _ = write!(s, " reorder {}{}", p(r.probability), corr(r.correlation));
    }
    if let Some(c) = o.corrupt {
        let _ = write!(s, " corrupt {}{}", p(c.probability), corr(c.correlation));
    }
    if o.gap != 0 {
        let _ = write!(s, " gap {}", o.gap);
    }
    if let Some(d) = &o.distribution {
        let _ = write!(s, " distribution {}", d.name);
    }
    if let Some(r) = o.rate {
        let _ = write!(
            s,
            " rate {}bit {} {} {}",
            r.bytes_per_sec * 8,
            r.packet_overhead,
            r.cell_size,
            r.cell_overhead
        );
    }
    if let Some(sl) = o.slot {
        match &o.slot_distribution {
            Some(d) if sl.dist_jitter > 0 => {
                let _ = write!(s, " slot distribution {} {}ns {}ns", d.name, sl.dist_delay, sl.dist_jitter);
            }
            _ => {
                let _ = write!(s, " slot {}ns {}ns", sl.min_delay, sl.max_delay);
            }
        }
        let _ = write!(s, " packets {} bytes {}", sl.max_packets, sl.max_bytes);
    }
    if o.ecn {
        s.push_str(" ecn");
    }
    s
}

/// netem's percentages in JSON: a fraction of `u32::MAX` (`%g`).
fn frac(v: u32) -> J {
    J::from(v as f64 / u32::MAX as f64)
}

/// `netem_print_opt` in JSON: delays in seconds, probabilities as fractions, every
/// correlation printed (0 when not set).
fn json(n: &NetemOpts) -> J {
    let mut o = J::obj();
    let cor = n.corr.unwrap_or_default();
    o.put("limit", n.limit);
    // tc_core_tick2time truncates to whole µs.
    let secs = |ns: u64| J::from(((ns >> 6).min(u32::MAX as u64) as f64 / TICK_IN_USEC).trunc() / 1e6);
    if n.latency >> 6 != 0 {
        let mut d = J::obj();
        d.put("delay", secs(n.latency)).put("jitter", secs(n.jitter)).put("correlation", frac(cor.delay));
        o.put("delay", d);
    }
    if n.loss != 0 {
        let mut d = J::obj();
        d.put("loss", frac(n.loss)).put("correlation", frac(cor.loss));
        o.put("loss-random", d);
    }
    match n.loss_model {
        Some(NetemLoss::State { p13, p31, p32, p23, p14 }) => {
            let mut d = J::obj();
            for (k, v) in [("p13", p13), ("p31", p31), ("p32", p32), ("p23", p23), ("p14", p14)] {
                d.put(k, frac(v));
            }
            o.put("loss-state", d);
        }
        Some(NetemLoss::Gemodel { p, r, h, k1 }) => {
            let mut d = J::obj();
            d.put("p", frac(p)).put("r", frac(r)).put("1-h", frac(u32::MAX - h)).put("1-k", frac(k1));
            o.put("loss-gemodel", d);
        }
        None => {}
    }
    if n.duplicate != 0 {
        let mut d = J::obj();
        d.put("duplicate", frac(n.duplicate)).put("correlation", frac(cor.duplicate));
        o.put("duplicate", d);
    }
    for (name, p) in [("reorder", n.reorder), ("corrupt", n.corrupt)] {
        if let Some(p) = p.filter(|p| p.probability != 0) {
            let mut d = J::obj();
            d.put(name, frac(p.probability)).put("correlation", frac(p.correlation));
            o.put(name, d);
        }
    }
    if let Some(r) = n.rate.filter(|r| r.bytes_per_sec != 0) {
        let mut d = J::obj();
        d.put("rate", r.bytes_per_sec)
            .put("packetoverhead", r.packet_overhead)
            .put("cellsize", r.cell_size)
            .put("celloverhead", r.cell_overhead);
        o.put("rate", d);
    }
    if let Some(sl) = n.slot.filter(|sl| sl.min_delay != 0 || sl.max_delay != 0 || sl.dist_jitter != 0) {
        let mut d = J::obj();
        let secs = |ns: i64| J::from(ns as f64 / 1e9);
        if sl.dist_jitter > 0 {
            d.put("distribution", secs(sl.dist_delay)).put("jitter", secs(sl.dist_jitter));
        } else {
            d.put("min-delay", secs(sl.min_delay)).put("max-delay", secs(sl.max_delay));
        }
        d.put("packets", sl.max_packets).put("bytes", sl.max_bytes);
        o.put("slot", d);
    }
    o.put("ecn", n.ecn).put("gap", n.gap);
    o
}

/// The qdisc grafted on netem `q` (on its one class, whatever the minor).
fn child<'d>(dev: &'d Device, q: &QdiscNode) -> Option<&'d QdiscNode> {
    dev.qdiscs.iter().find(|c| c.parent != crate::model::H_ROOT && c.parent.qdisc() == q.handle)
}
