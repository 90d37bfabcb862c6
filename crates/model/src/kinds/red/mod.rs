//! The `red` qdisc in tc's language: iproute2 6.1's grammar and derivations (`q_red.c`,
//! `tc_red.c`), its `show` output, and the kernel's checks (`red_check_params`,
//! `red_validate_flags`).
//!
//! tc turns `limit`, `min`, `max`, `avpkt`, `burst`, `probability` and `bandwidth` into what the
//! kernel keeps: `Wlog` (the EWMA weight that lets `burst` packets of `avpkt` bytes into an idle
//! queue before the average reaches `min`), `Plog` (from the probability over `max - min`),
//! `Scell_log` and the 256-byte idle-damping table (from the time one `avpkt` takes at
//! `bandwidth`), and `max_P` (the probability as a Q0.32 number, converted the way C converts a
//! `double` to `__u32` on x86-64).
//!
//! [`Red`] is the registry kind (the kernel's `sch_red.c`; the algorithm is `sluice_core::red`).
//! Its request carries what tc derived, not tc's inputs: decoding one finds an `avpkt`, a
//! `bandwidth` and a `burst` that derive the same bytes (see [`QdiscKind::decode`] below).

use super::{BuildCx, ClassList, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::helpers::*;
use crate::json::J;
use crate::model::{is_false, Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use crate::tcmath::{c_u32, xmittime, TICK_IN_USEC};
use serde::{Deserialize, Serialize};
use sluice_core::red::{Red as Core, RedConfig, RED_STAB_SIZE};
use sluice_core::units::{format_g, format_size};
use sluice_core::{Handle, Qdisc};
use std::fmt::Write;

/// RED options as tc derives and sends them (`tc_red_qopt`, the idle table's inputs, `max_P`
/// and the flags).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RedOpts {
    /// Bytes the child bfifo holds.
    pub limit: u32,
    /// Lower threshold, bytes.
    pub min: u32,
    /// Upper threshold, bytes.
    pub max: u32,
    /// Average packet size, bytes (input of the EWMA weight and of the idle table).
    pub avpkt: u32,
    /// Burst in packets (input of the EWMA weight).
    pub burst: u32,
    /// Link bandwidth, bit/s (input of the idle table; tc's default 10Mbit).
    #[serde(with = "crate::serde_units::rate")]
    pub bandwidth: u64,
    /// log2(1/W).
    pub wlog: u8,
    /// log2 of the random range.
    pub plog: u8,
    /// Idle-table cell log.
    pub scell_log: u8,
    /// `TCA_RED_MAX_P` as tc sends it: the probability as a Q0.32 number (0: derive from plog).
    pub max_p: u32,
    /// Mark ECN-capable packets.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ecn: bool,
    /// Drop above max even with ECN.
    #[serde(default, skip_serializing_if = "is_false")]
    pub harddrop: bool,
    /// Adaptive RED flag.
    #[serde(default, skip_serializing_if = "is_false")]
    pub adaptive: bool,
    /// With ECN, queue packets that cannot be marked.
    #[serde(default, skip_serializing_if = "is_false")]
    pub nodrop: bool,
}

/// The kind.
pub struct Red;

/// `TCA_RED_*` (`linux/pkt_sched.h`).
mod attr {
    pub const PARMS: u16 = 1;
    pub const STAB: u16 = 2;
    pub const MAX_P: u16 = 3;
    pub const FLAGS: u16 = 4;
    /// `TC_RED_ECN | TC_RED_HARDDROP | TC_RED_ADAPTATIVE | TC_RED_NODROP`: the selector tc sends.
    pub const SUPPORTED_FLAGS: u32 = 0x0F;
}

/// The flags by their `TC_RED_*` bits.
fn flag_bits(o: &RedOpts) -> [(bool, u32); 4] {
    [(o.ecn, 1), (o.harddrop, 2), (o.adaptive, 4), (o.nodrop, 8)]
}

impl QdiscKind for Red {
    const NAME: &'static str = "red";
    const CLASSFUL: bool = true;
    type Opts = RedOpts;

    fn parse(cur: &mut Cur) -> Result<RedOpts, TcError> {
        parse(cur).map(|(o, _)| o)
    }

    fn parse_warned(cur: &mut Cur) -> Result<(RedOpts, Vec<String>), TcError> {
        parse(cur)
    }

    /// Inputs that make tc derive the same Wlog, Plog, table and max_P (max_P 0 came from
    /// `probability 1`, which C converts to 0).
    fn args(r: &RedOpts) -> String {
        let prob = if r.max_p == 0 { 1.0 } else { r.max_p as f64 / 4_294_967_296.0 };
        let mut s = format!(
            " limit {} min {} max {} avpkt {} burst {} probability {prob} bandwidth {}bit",
            r.limit, r.min, r.max, r.avpkt, r.burst, r.bandwidth
        );
        for (on, name) in
            [(r.ecn, " ecn"), (r.harddrop, " harddrop"), (r.adaptive, " adaptive"), (r.nodrop, " nodrop")]
        {
            if on {
                s.push_str(name);
            }
        }
        s
    }

    fn show(o: &RedOpts, _dev: &Device, d: bool) -> String {
        options(o, d)
    }

    /// `red_print_opt` in JSON.
    fn json(r: &RedOpts, _dev: &Device, d: bool) -> J {
        let mut o = J::obj();
        o.put("limit", r.limit).put("min", r.min).put("max", r.max);
        o.put("ecn", r.ecn).put("harddrop", r.harddrop).put("adaptive", r.adaptive).put("nodrop", r.nodrop);
        if d {
            o.put("ewma", r.wlog);
            let max_p = kernel_max_p(r);
            if max_p != 0 {
                o.put("probability", max_p as f64 / 4_294_967_296.0);
            } else {
                o.put("Plog", r.plog);
            }
            o.put("Scell_log", r.scell_log);
        }
        o
    }

    fn xstats_text(_o: &RedOpts, _dev: &Device) -> String {
        xstats(0, 0, 0, 0) + "\n"
    }

    fn xstats_json(_o: &RedOpts) -> Option<J> {
        let mut j = J::obj();
        for k in ["marked", "early", "pdrop", "other"] {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `red_change` sets everything anew, after its checks.
    fn change(_dev: &Device, n: RedOpts, _old: Option<&RedOpts>) -> Result<RedOpts, TcError> {
        kernel_check(&n)?;
        Ok(n)
    }

    /// As tc 6.1 writes it: `struct tc_red_qopt` with the flags left 0, the 256-byte idle table,
    /// `max_P`, and the flags as a bitfield.
    fn encode(r: &RedOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        let mut qopt = Vec::with_capacity(16);
        for v in [r.limit, r.min, r.max] {
            qopt.extend_from_slice(&v.to_ne_bytes());
        }
        qopt.extend_from_slice(&[r.wlog, r.plog, r.scell_log, 0]);
        let flags = flag_bits(r).iter().filter(|(on, _)| *on).fold(0, |f, (_, bit)| f | bit);
        let mut bitfield = flags.to_ne_bytes().to_vec();
        bitfield.extend_from_slice(&attr::SUPPORTED_FLAGS.to_ne_bytes());
        out.begin_nest(TCA_OPTIONS);
        out.put(attr::PARMS, &qopt);
        out.put(attr::STAB, &stab(r));
        out.put_u32(attr::MAX_P, r.max_p);
        out.put(attr::FLAGS, &bitfield);
        out.end_nest();
        Ok(())
    }

    /// What was sent, and tc's inputs that were not (`avpkt`, `bandwidth`, `burst`): the first
    /// `avpkt` at 8388608bit (2^20 bytes/s) that derives the same idle table and Scell_log, and
    /// the smallest `burst` that then derives the same Wlog (0 when none does). Encoding the
    /// result sends the same bytes.
    fn decode(options: Option<&[u8]>) -> Result<RedOpts, DecodeError> {
        let err = |why: &str| DecodeError::new("red", why);
        let mut o = RedOpts::default();
        let mut table = None;
        let mut parms = false;
        for (ty, p) in attrs(options.unwrap_or_default()) {
            match ty {
                attr::PARMS => {
                    let b = p.get(..16).ok_or_else(|| err("tc_red_qopt is short"))?;
                    let word = |i: usize| u32_of(&b[i * 4..]).unwrap_or_default();
                    (o.limit, o.min, o.max) = (word(0), word(1), word(2));
                    (o.wlog, o.plog, o.scell_log) = (b[12], b[13], b[14]);
                    parms = true;
                }
                attr::STAB => {
                    let t: [u8; RED_STAB_SIZE] = p
                        .get(..RED_STAB_SIZE)
                        .and_then(|t| t.try_into().ok())
                        .ok_or_else(|| err("the idle table is short"))?;
                    table = Some(t);
                }
                attr::MAX_P => o.max_p = u32_of(p).ok_or_else(|| err("max_P is short"))?,
                attr::FLAGS => {
                    let v = u32_of(p).ok_or_else(|| err("the flags are short"))?;
                    (o.ecn, o.harddrop, o.adaptive, o.nodrop) =
                        (v & 1 != 0, v & 2 != 0, v & 4 != 0, v & 8 != 0);
                }
                _ => {}
            }
        }
        if !parms {
            return Err(err("no tc_red_qopt"));
        }
        if let Some(t) = table {
            let (avpkt, rate) = idle_inputs(o.wlog, o.scell_log, &t)
                .ok_or_else(|| err("no avpkt and bandwidth derive this idle table"))?;
            o.avpkt = avpkt;
            o.bandwidth = rate as u64 * 8;
            o.burst = burst_for(o.wlog, o.min, avpkt).unwrap_or(0);
        }
        Ok(o)
    }

    const CLASS_OPS: bool = true;

    /// `*_find` answers for any minor: its one class.
    fn has_class(_o: &RedOpts, _dev: &Device, _q: &QdiscNode, _classid: Handle) -> bool {
        true
    }

    fn classes(_o: &RedOpts, _dev: &Device, q: &QdiscNode) -> ClassList {
        ClassList::Implicit(vec![(Handle::new(q.handle.major(), 1), q.handle)])
    }

    fn build(o: &RedOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let major = q.handle.major();
        let mut red = Core::new(RedConfig {
            seed: cx.seed ^ (major as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ..core_config(o)
        })?;
        if let Some(c) = cx.dev.qdisc_at(Handle::new(major, 1)) {
            red.set_child(cx.child(c)?);
        }
        Ok(Box::new(red))
    }
}

/// The bandwidth [`QdiscKind::decode`] gives (bytes/s): a power of two, so that tc's
/// `avpkt / rate` is exact and every µs count is some `avpkt`'s.
const DECODED_RATE: u32 = 1 << 20;

/// An `avpkt` that derives `table` and `scell_log` with `wlog` at [`DECODED_RATE`].
fn idle_inputs(wlog: u8, scell_log: u8, table: &[u8; RED_STAB_SIZE]) -> Option<(u32, u32)> {
    let want = Some((scell_log, *table));
    let rate = DECODED_RATE;
    let fits = |avpkt: u32| idle_damping(wlog, xmittime(rate as u64, avpkt)) == want;
    // An avpkt that takes no whole µs gives the table of time 0.
    if idle_damping(wlog, 0) == want {
        return Some((1, rate));
    }
    // From time 1 on, Scell_log grows with the time and each entry shrinks while it stays: the
    // times that give this table are one interval, starting at the first that is not below it.
    let below = |x: u32| match idle_damping(wlog, x) {
        None => false,
        Some((c, t)) => c < scell_log || (c == scell_log && t.iter().zip(table).any(|(a, b)| a > b)),
    };
    let (mut lo, mut hi) = (1u32, u32::MAX);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    // The first whole µs at or after that time, then the avpkt that takes it.
    let us = (lo as f64 / TICK_IN_USEC).ceil();
    let guess = (us * rate as f64 / 1e6).ceil() as u64;
    (guess.saturating_sub(2)..=guess + 2)
        .filter_map(|a| u32::try_from(a).ok())
        .find(|&a| a > 0 && fits(a))
        .map(|a| (a, rate))
}

/// The smallest `burst` for which tc derives `wlog` from `min` and `avpkt` (Wlog grows with the
/// burst).
fn burst_for(wlog: u8, min: u32, avpkt: u32) -> Option<u32> {
    let w = |b: u32| match eval_ewma(min, b, avpkt) {
        Ok(w) => w,
        Err(m) if m.is_empty() => 32,
        Err(_) => 0,
    };
    let (mut lo, mut hi) = (1u32, u32::MAX / 2);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if w(mid) < wlog {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (w(lo) == wlog).then_some(lo)
}

const USAGE: &str = "Usage: ... red\tlimit BYTES [min BYTES] [max BYTES] avpkt BYTES [burst PACKETS]\n\t\t[adaptive] [probability PROBABILITY] [bandwidth KBPS]\n\t\t[ecn] [harddrop] [nodrop]\n\t\t[qevent early_drop block IDX] [qevent mark block IDX]";

/// tc's default bandwidth when none is given (10Mbit, in bytes/s).
const DEFAULT_RATE_BYTES: u32 = 1_250_000;

/// A `double` converted to an integer type of at most 32 bits the way gcc does on x86-64
/// (`cvttsd2si` into a 32-bit register: out of range or NaN gives `0x80000000`), then truncated.
fn c_to_i32(v: f64) -> i32 {
    if v.is_nan() || v >= 2_147_483_648.0 || v <= -2_147_483_649.0 {
        i32::MIN
    } else {
        v as i32
    }
}

/// `tc_red_eval_ewma`: the smallest Wlog for which `burst` back-to-back packets of `avpkt`
/// bytes reach the average `qmin`. Err holds tc's message lines.
pub fn eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> Result<u8, String> {
    let a = burst as f64 + 1.0 - (qmin as f64 / avpkt as f64);
    if a < 1.0 {
        return Err(format!(
            "tc_red_eval_ewma() burst {burst} is too small ? Try burst {}\n",
            1u32.wrapping_add(qmin.checked_div(avpkt).unwrap_or(0))
        ));
    }
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powf(burst as f64)) / w {
            return Ok(wlog);
        }
        w /= 2.0;
    }
    Err(String::new())
}

/// `tc_red_eval_P`: Plog such that `probability / (qmax - qmin) * 2^Plog` first exceeds 1.
pub fn eval_p(qmin: u32, qmax: u32, probability: f64) -> Option<u8> {
    let i = qmax.wrapping_sub(qmin) as i32;
    if i == 0 {
        return Some(0);
    }
    if i < 0 {
        return None;
    }
    let mut prob = probability / i as f64;
    for i in 0..32u8 {
        if prob > 1.0 {
            return Some(i);
        }
        prob *= 2.0;
    }
    None
}

/// `tc_red_eval_idle_damping`: Scell_log and the table of right shifts by idle time.
pub fn eval_idle_damping(wlog: u8, avpkt: u32, rate: u32) -> Option<(u8, [u8; RED_STAB_SIZE])> {
    idle_damping(wlog, xmittime(rate as u64, avpkt))
}

/// [`eval_idle_damping`] for a packet that takes `xmit_time` ticks.
fn idle_damping(wlog: u8, xmit_time: u32) -> Option<(u8, [u8; RED_STAB_SIZE])> {
    let xmit_time = xmit_time as f64;
    let lw = -(1.0 - 1.0 / (1u64 << wlog) as f64).ln() / xmit_time;
    let maxtime = 31.0 / lw;
    let clog = (0..32u32).find(|&c| maxtime / ((1u64 << c) as f64) < 512.0)?;
    let mut stab = [0u8; RED_STAB_SIZE];
    for (i, s) in stab.iter_mut().enumerate().take(255).skip(1) {
        let v = c_to_i32(((i as u64) << clog) as f64 * lw) as u8;
        *s = v.min(31);
    }
    stab[255] = 31;
    Some((clog as u8, stab))
}

/// The idle table tc sent for these options.
pub fn stab(o: &RedOpts) -> [u8; RED_STAB_SIZE] {
    eval_idle_damping(o.wlog, o.avpkt, (o.bandwidth / 8) as u32).map(|(_, s)| s).unwrap_or([0; RED_STAB_SIZE])
}

/// The kernel's `max_P`: what tc sent, or `(max - min) >> Plog` when that was 0.
pub fn kernel_max_p(o: &RedOpts) -> u32 {
    if o.max_p != 0 {
        return o.max_p;
    }
    let delta = o.max.wrapping_sub(o.min) as i32;
    let delta = if delta <= 0 { 1 } else { delta as u32 };
    let maxp = if o.plog < 32 { u32::MAX >> o.plog } else { u32::MAX };
    maxp.wrapping_mul(delta)
}

/// The core configuration for these options (`adapt` as the kernel arms its timer: never, since
/// tc 6.1 sends the flags outside `tc_red_qopt`).
pub fn core_config(o: &RedOpts) -> RedConfig {
    RedConfig {
        limit: o.limit,
        qth_min: o.min,
        qth_max: o.max,
        wlog: o.wlog,
        plog: o.plog,
        scell_log: o.scell_log,
        stab: stab(o),
        max_p: o.max_p,
        ecn: o.ecn,
        harddrop: o.harddrop,
        nodrop: o.nodrop,
        adapt: false,
        ..RedConfig::default()
    }
}

/// `red_parse_opt`. Returns the options and the lines tc prints on stderr while parsing.
pub fn parse(cur: &mut Cur) -> Result<(RedOpts, Vec<String>), TcError> {
    let mut o = RedOpts::default();
    let (mut burst, mut avpkt, mut rate) = (0u32, 0u32, 0u32);
    let mut probability = 0.02f64;
    while let Some((at, w)) = cur.next_word() {
        match w {
            "limit" => o.limit = size_arg(cur, "limit")?,
            "min" => o.min = size_arg(cur, "min")?,
            "max" => o.max = size_arg(cur, "max")?,
            "burst" => {
                let (i, v) = cur.value()?;
                burst = get_u32(v).ok_or_else(|| illegal("burst", i, None))?;
            }
            "avpkt" => avpkt = size_arg(cur, "avpkt")?,
            "probability" => {
                let (i, v) = cur.value()?;
                probability = v.parse().map_err(|_| illegal("probability", i, None))?;
            }
            "bandwidth" => {
                let (i, v) = cur.value()?;
                if v.contains('%') {
                    return Err(TcError::usage(
                        "Illegal \"bandwidth\"\n(a percentage of the device speed needs a device with a known speed; Sluice's devices have none)",
                        Some(i),
                    ));
                }
                cur.pos -= 1;
                let bps = rate_arg(cur, "bandwidth")?;
                rate = u32::try_from(bps / 8).map_err(|_| illegal("bandwidth", i, None))?;
            }
            "ecn" => o.ecn = true,
            "harddrop" => o.harddrop = true,
            "nodrop" => o.nodrop = true,
            "adaptive" | "adaptative" => o.adaptive = true,
            w if matches(w, "qevent") => {
                return Err(TcError::usage(
                    "RED qevents (early_drop/mark blocks) are not supported by Sluice",
                    Some(at),
                ))
            }
            "help" => return Err(TcError::usage(USAGE, Some(at))),
            _ => return Err(what_is(w, at, USAGE)),
        }
    }
    if o.limit == 0 || avpkt == 0 {
        return Err(TcError::usage("RED: Required parameter (limit, avpkt) is missing", None));
    }
    // Sally Floyd's recommendations, as tc applies them (C's unsigned arithmetic).
    if o.max == 0 {
        o.max = if o.min != 0 { o.min.wrapping_mul(3) } else { o.limit / 4 };
    }
    if o.min == 0 {
        o.min = o.max / 3;
    }
    if burst == 0 {
        let d = avpkt.wrapping_mul(3);
        burst = o.min.wrapping_mul(2).wrapping_add(o.max).checked_div(d).unwrap_or(0);
    }
    let mut stderr = String::new();
    if rate == 0 {
        rate = DEFAULT_RATE_BYTES;
        stderr.push_str("RED: set bandwidth to 10Mbit\n");
    }
    let fail = |mut stderr: String, msg: &str| {
        stderr.push_str(msg);
        TcError::usage(stderr, None)
    };
    o.wlog = match eval_ewma(o.min, burst, avpkt) {
        Ok(w) => w,
        Err(m) => {
            stderr.push_str(&m);
            return Err(fail(stderr, "RED: failed to calculate EWMA constant."));
        }
    };
    if o.wlog >= 10 {
        let _ = writeln!(stderr, "RED: WARNING. Burst {burst} seems to be too large.");
    }
    o.plog = eval_p(o.min, o.max, probability)
        .ok_or_else(|| fail(stderr.clone(), "RED: failed to calculate probability."))?;
    o.scell_log = eval_idle_damping(o.wlog, avpkt, rate)
        .ok_or_else(|| fail(stderr.clone(), "RED: failed to calculate idle damping table."))?
        .0;
    o.max_p = c_u32(probability * 4_294_967_296.0);
    o.avpkt = avpkt;
    o.burst = burst;
    o.bandwidth = rate as u64 * 8;
    let warnings = stderr.lines().map(str::to_string).collect();
    Ok((o, warnings))
}

/// The kernel's checks on a new or changed RED.
pub fn kernel_check(o: &RedOpts) -> Result<(), TcError> {
    let mut cfg = core_config(o);
    // The flags are checked after the parameters, with their own message.
    let nodrop = std::mem::replace(&mut cfg.nodrop, false);
    cfg.limit = cfg.limit.max(1); // limit 0 is legal: the child stays the noop qdisc.
    cfg.validate().map_err(|_| TcError::errno("Invalid argument"))?;
    if nodrop && !o.ecn {
        return Err(TcError::kernel("sch_red: nodrop mode is only meaningful with ECN"));
    }
    Ok(())
}

/// `red_print_opt` (after `refcnt N `).
pub fn options(o: &RedOpts, details: bool) -> String {
    let mut s = format!(
        "limit {} min {} max {} ",
        format_size(o.limit as u64),
        format_size(o.min as u64),
        format_size(o.max as u64)
    );
    for (on, name) in
        [(o.ecn, "ecn "), (o.harddrop, "harddrop "), (o.adaptive, "adaptive "), (o.nodrop, "nodrop ")]
    {
        if on {
            s.push_str(name);
        }
    }
    if details {
        let _ = write!(s, "ewma {} ", o.wlog);
        let max_p = kernel_max_p(o);
        if max_p != 0 {
            let _ = write!(s, "probability {} ", format_g(max_p as f64 / 4_294_967_296.0, 6));
        } else {
            let _ = write!(s, "Plog {} ", o.plog);
        }
        let _ = write!(s, "Scell_log {}", o.scell_log);
    }
    s
}

/// `red_print_xstats` for a qdisc with these counters.
pub fn xstats(marked: u32, early: u32, pdrop: u32, other: u32) -> String {
    format!("  marked {marked} early {early} pdrop {pdrop} other {other} ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(s: &str) -> Result<(RedOpts, Vec<String>), TcError> {
        let argv: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
        parse(&mut cur)
    }

    #[test]
    fn man_page_example_derives_what_tc_sends() {
        let (o, w) =
            parse_words("limit 400000 min 30000 max 90000 avpkt 1000 burst 55 ecn adaptive bandwidth 10Mbit")
                .unwrap();
        assert!(w.is_empty());
        // 55 + 1 - 30 = 26 packets must fit: Wlog 5 is the first W with (1-(1-W)^55)/W >= 26.
        assert_eq!(o.wlog, 5);
        // 0.02 / 60000 doubled until above 1: 2^22 * 3.33e-7 = 1.398.
        assert_eq!(o.plog, 22);
        // 1000 B at 1.25 MB/s is 800 µs = 12500 ticks; 31 / lW = 12500 * 31 / 0.03175 = 12.2e6,
        // under 512 after 2^15.
        assert_eq!(o.scell_log, 15);
        assert_eq!(o.max_p, (0.02 * 4294967296.0f64) as u32);
        assert!(o.ecn && o.adaptive && !o.harddrop && !o.nodrop);
    }

    #[test]
    fn defaults_and_warnings() {
        let (o, w) = parse_words("limit 1M avpkt 1500 min 100K max 300K").unwrap();
        assert_eq!(w, vec!["RED: set bandwidth to 10Mbit".to_string()]);
        // burst (2 * 100K + 300K) / 4500 = 113.
        assert_eq!(o.burst, 113);
        let (o, _) = parse_words("limit 400000 avpkt 1000").unwrap();
        assert_eq!((o.min, o.max), (33333, 100000));
        let e = parse_words("limit 400000").unwrap_err();
        assert_eq!(e.message, "RED: Required parameter (limit, avpkt) is missing");
        let e = parse_words("limit 400000 avpkt 1000 min 30000 burst 2").unwrap_err();
        assert_eq!(e.message, "RED: set bandwidth to 10Mbit\ntc_red_eval_ewma() burst 2 is too small ? Try burst 31\nRED: failed to calculate EWMA constant.");
        let e = parse_words("limit 400000 avpkt 1000 min 3000 max 2000 burst 5 bandwidth 1mbit").unwrap_err();
        assert_eq!(e.message, "RED: failed to calculate probability.");
    }

    #[test]
    fn probability_one_is_sent_as_zero() {
        let (o, _) = parse_words(
            "limit 1000000 min 30000 max 35000 avpkt 1500 burst 20 bandwidth 10.000000mbit probability 1",
        )
        .unwrap();
        assert_eq!(o.max_p, 0);
        // Then the kernel derives it from Plog: 1/5000 doubled 13 times exceeds 1.
        assert_eq!(o.plog, 13);
        assert_eq!(kernel_max_p(&o), (u32::MAX >> 13) * 5000);
    }

    #[test]
    fn kernel_refuses_nodrop_without_ecn() {
        let (o, _) = parse_words("limit 1M avpkt 1500 min 100K max 300K nodrop").unwrap();
        assert_eq!(
            kernel_check(&o).unwrap_err().message,
            "Error: sch_red: nodrop mode is only meaningful with ECN."
        );
        let (o, _) = parse_words("limit 1M avpkt 1500 min 100K max 300K nodrop ecn").unwrap();
        kernel_check(&o).unwrap();
    }
}
