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

use crate::error::TcError;
use crate::grammar::helpers::*;
use crate::model::RedOpts;
use sluice_core::red::{RedConfig, RED_STAB_SIZE};
use sluice_core::units::{format_g, format_size};
use std::fmt::Write;

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
    let xmit_time = crate::tcmath::xmittime(rate as u64, avpkt) as f64;
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
    o.max_p = crate::tcmath::c_u32(probability * 4_294_967_296.0);
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
