//! police: a token-bucket (or rate-estimator, or packet-rate) policer with a verdict for what
//! exceeds and one for what conforms. iproute2's m_police.c, the kernel's act_police.c. The
//! same options follow a filter's own `police` keyword (`TCA_*_POLICE`).

use super::action_common::*;
use super::{ActEncodeCx, ActionKind, DecodeError, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{matches, Cur};
use crate::json::J;
use crate::model::{Device, LinkLayer, Verdict};
use crate::nlattr::{self, Attrs};
use crate::print::{xmitsize, xmittime};
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Action as CoreAction;
use sluice_core::filter::police::{Police as CorePolice, PoliceConfig};
use sluice_core::units::{format_rate, format_size, parse_rate, parse_size};
use sluice_core::Rate;
use std::fmt::Write;

const POLICE_USAGE: &str = "Usage: ... police [ rate BPS burst BYTES[/BYTES] ] \n\t\t[ pkts_rate RATE pkts_burst PACKETS ] [ mtu BYTES[/BYTES] ]\n\t\t[ peakrate BPS ] [ avrate BPS ] [ overhead BYTES ]\n\t\t[ linklayer TYPE ] [ CONTROL ]\nWhere: CONTROL := conform-exceed <EXCEEDACT>[/NOTEXCEEDACT]\n\t\t  Define how to handle packets which exceed (<EXCEEDACT>)\n\t\t  or conform (<NOTEXCEEDACT>) the configured bandwidth limit.\n       EXCEEDACT/NOTEXCEEDACT := { pipe | ok | reclassify | drop | continue |\n\t\t\t\t   goto chain <CHAIN_INDEX> }";

const TCA_POLICE_TBF: u16 = 1;
const TCA_POLICE_RATE: u16 = 2;
const TCA_POLICE_PEAKRATE: u16 = 3;
const TCA_POLICE_AVRATE: u16 = 4;
const TCA_POLICE_RESULT: u16 = 5;
const TCA_POLICE_RATE64: u16 = 8;
const TCA_POLICE_PEAKRATE64: u16 = 9;
const TCA_POLICE_PKTRATE64: u16 = 10;
const TCA_POLICE_PKTBURST64: u16 = 11;
const TC_LINKLAYER_ETHERNET: u8 = 1;

/// Police action options.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoliceOpts {
    /// bit/s (0: no byte rate).
    #[serde(with = "crate::serde_units::rate")]
    pub rate: u64,
    /// Bucket bytes.
    #[serde(with = "crate::serde_units::size")]
    pub burst: u32,
    /// Largest packet (bytes).
    pub mtu: Option<u32>,
    /// Peak rate bit/s.
    pub peakrate: Option<u64>,
    /// Average rate bit/s (`avrate`: police the rate estimator instead of a bucket).
    pub avrate: Option<u64>,
    /// Packets per second (`pkts_rate`).
    pub pkts_rate: Option<u64>,
    /// Packet bucket (`pkts_burst`).
    pub pkts_burst: Option<u64>,
    /// Per-packet overhead for the rate table.
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub overhead: u16,
    /// Minimum packet unit.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mpu: u32,
    /// Link layer of the rate table.
    #[serde(default, skip_serializing_if = "is_ethernet")]
    pub linklayer: LinkLayer,
    /// Verdict above the rate (`reclassify` by default in tc; `drop` usual).
    pub exceed: Verdict,
    /// Verdict within the rate.
    pub conform: Verdict,
    /// Action index.
    pub index: u32,
}

fn is_zero_u16(v: &u16) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_ethernet(l: &LinkLayer) -> bool {
    *l == LinkLayer::Ethernet
}

/// The police kind.
pub struct Police;

fn size_value(v: &str, what: &str, at: usize) -> Result<u32, TcError> {
    let s = v.split('/').next().unwrap_or(v);
    parse_size(s).ok().and_then(|b| u32::try_from(b).ok()).ok_or_else(|| TcError::invarg(what, v, at))
}

fn rate_value(v: &str, what: &str, at: usize) -> Result<u64, TcError> {
    parse_rate(v).map(Rate::bps).map_err(|_| TcError::invarg(what, v, at))
}

fn rate_str(bps: u64) -> String {
    format_rate(Rate::from_bps(bps / 8 * 8))
}

/// The options after the word `police` (the filter's `police` keyword and `action police`), and
/// whether only an index was given. Stops at the first word it does not know, as tc does.
pub fn parse_opts(cur: &mut Cur) -> Result<(PoliceOpts, bool), ActErr> {
    let mut p = PoliceOpts { exceed: Verdict::Reclassify, conform: Verdict::Pass, ..Default::default() };
    let mut ok = 0;
    let (mut rate, mut burst, mut mtu, mut peak, mut avrate) = (None, None, None, None, None);
    let (mut mpu, mut pps, mut ppsburst) = (None, None, None);
    let mut conform = None;
    while let Some(w) = cur.peek() {
        let at = cur.pos;
        if matches(w, "index") {
            let v = next_arg(cur)?;
            p.index = dec_u32(v).ok_or_else(|| TcError::invarg("index", v, at + 1))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            let v = next_arg(cur)?;
            if burst.is_some() {
                return Err(TcError::duparg("buffer/burst", v, at + 1).into());
            }
            burst = Some(size_value(v, "buffer", at + 1)?);
        } else if w == "mtu" || w == "minburst" {
            let v = next_arg(cur)?;
            if mtu.is_some() {
                return Err(TcError::duparg("mtu/minburst", v, at + 1).into());
            }
            mtu = Some(size_value(v, "mtu", at + 1)?);
        } else if w == "mpu" {
            let v = next_arg(cur)?;
            if mpu.is_some() {
                return Err(TcError::duparg("mpu", v, at + 1).into());
            }
            mpu = Some(size_value(v, "mpu", at + 1)?);
        } else if w == "rate" {
            let v = next_arg(cur)?;
            if rate.is_some() {
                return Err(TcError::duparg("rate", v, at + 1).into());
            }
            rate = Some(rate_value(v, "rate", at + 1)?);
        } else if w == "avrate" {
            let v = next_arg(cur)?;
            if avrate.is_some() {
                return Err(TcError::duparg("avrate", v, at + 1).into());
            }
            avrate = Some(rate_value(v, "avrate", at + 1)?);
        } else if matches(w, "peakrate") {
            let v = next_arg(cur)?;
            if peak.is_some() {
                return Err(TcError::duparg("peakrate", v, at + 1).into());
            }
            peak = Some(rate_value(v, "peakrate", at + 1)?);
        } else if ["reclassify", "drop", "shot", "continue", "pass", "ok", "pipe", "goto"]
            .iter()
            .any(|k| matches(w, k))
        {
            match parse_control(cur, false)? {
                Some(v) => p.exceed = v,
                None => return Err(ActErr::Fail(String::new())),
            }
            ok += 1;
            continue;
        } else if w == "conform-exceed" {
            let v = next_arg(cur)?;
            match v.split_once('/') {
                Some((e, c)) => {
                    let one = |s: &str| -> Result<Verdict, ActErr> {
                        match a2n(s, true) {
                            Some(A2n::V(v)) => Ok(v),
                            Some(A2n::Num(n)) => Ok(verdict_of_code(n)?),
                            // `goto`/`jump` in the one-word form have no chain or count.
                            Some(_) => Ok(Verdict::Goto(0)),
                            None => Err(ActErr::Fail(String::new())),
                        }
                    };
                    p.exceed = one(e)?;
                    conform = Some(one(c)?);
                    cur.pos += 1;
                }
                None => {
                    p.exceed = parse_control(cur, true)?.ok_or(ActErr::Fail(String::new()))?;
                    if cur.peek() == Some("/") {
                        next_arg(cur)?;
                        conform = Some(parse_control(cur, true)?.ok_or(ActErr::Fail(String::new()))?);
                    }
                }
            }
            ok += 1;
            continue;
        } else if matches(w, "overhead") {
            let v = next_arg(cur)?;
            p.overhead = v.parse().map_err(|_| TcError::invarg("overhead", v, at + 1))?;
        } else if matches(w, "linklayer") {
            let v = next_arg(cur)?;
            p.linklayer = if matches(v, "ethernet") {
                LinkLayer::Ethernet
            } else if matches(v, "atm") || matches(v, "adsl") {
                LinkLayer::Atm
            } else {
                return Err(TcError::invarg("linklayer", v, at + 1).into());
            };
        } else if matches(w, "pkts_rate") {
            let v = next_arg(cur)?;
            if pps.is_some() {
                return Err(TcError::duparg("pkts_rate", v, at + 1).into());
            }
            pps = Some(v.parse::<u64>().map_err(|_| TcError::invarg("pkts_rate", v, at + 1))?);
        } else if matches(w, "pkts_burst") {
            let v = next_arg(cur)?;
            if ppsburst.is_some() {
                return Err(TcError::duparg("pkts_burst", v, at + 1).into());
            }
            ppsburst = Some(v.parse::<u64>().map_err(|_| TcError::invarg("pkts_burst", v, at + 1))?);
        } else if w == "help" {
            return Err(TcError::fatal(POLICE_USAGE, Some(at)).into());
        } else {
            break;
        }
        cur.pos += 1;
        ok += 1;
    }
    if ok == 0 {
        return Err(ActErr::Fail(String::new()));
    }
    let rate = rate.filter(|&r| r > 0);
    if rate.is_some() && avrate.is_some() {
        return Err(ActErr::Fail(String::new()));
    }
    if rate.is_none() && avrate.is_none() && p.index == 0 && mtu.is_none() && pps.is_none() {
        return Err(ActErr::Fail("'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.".into()));
    }
    if rate.is_some() && burst.is_none() && avrate.is_none() {
        return Err(ActErr::Fail("'burst' requires 'rate'.".into()));
    }
    if pps.is_some() && ppsburst.is_none() {
        return Err(ActErr::Fail("'pkts_burst' requires 'pkts_rate'.".into()));
    }
    if pps.is_some() && rate.is_some() {
        return Err(ActErr::Fail("'rate' and 'pkts_rate' are not allowed in same action.".into()));
    }
    if peak.is_some() {
        if rate.is_none() {
            return Err(ActErr::Fail("'peakrate' requires 'rate'.".into()));
        }
        if mtu.is_none() {
            return Err(ActErr::Fail("'mtu' is required, if 'peakrate' is requested.".into()));
        }
    }
    p.rate = rate.unwrap_or(0);
    p.burst = burst.unwrap_or(0);
    p.mtu = mtu;
    p.peakrate = peak;
    p.avrate = avrate;
    p.mpu = mpu.unwrap_or(0);
    p.pkts_rate = pps;
    p.pkts_burst = ppsburst;
    if let Some(c) = conform {
        p.conform = c;
    }
    let bare = p.rate == 0 && avrate.is_none() && mtu.is_none() && pps.is_none();
    Ok((p, bare))
}

/// tc's `tc_calc_rtable` for police: the transmit time of `(i + 1) << cell_log` bytes (at least
/// `mpu`) for each of 256 slots, in psched ticks computed as tc does; and the `struct
/// tc_ratespec` beside it.
fn ratespec(rate: Rate, mtu: u32, overhead: i32, mpu: u32) -> ([u8; 12], Vec<u8>) {
    let bps = rate.bytes_per_sec();
    let mtu = if mtu == 0 { 2047 } else { mtu };
    let mut cell_log = 0u8;
    while (mtu >> cell_log) > 255 {
        cell_log += 1;
    }
    let mut t = Vec::with_capacity(1024);
    for i in 0..256u32 {
        let sz = ((i + 1) << cell_log).max(mpu);
        t.extend_from_slice(&xmittime(bps, sz).to_ne_bytes());
    }
    let mut r = [0u8; 12];
    r[0] = cell_log;
    r[1] = TC_LINKLAYER_ETHERNET;
    r[2..4].copy_from_slice(&(overhead.clamp(0, u16::MAX as i32) as u16).to_ne_bytes());
    r[4..6].copy_from_slice(&(-1i16).to_ne_bytes());
    r[6..8].copy_from_slice(&(mpu.min(u16::MAX as u32) as u16).to_ne_bytes());
    r[8..12].copy_from_slice(&(bps.min(u32::MAX as u64) as u32).to_ne_bytes());
    (r, t)
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap_or([0; 4]))
}

impl ActionKind for Police {
    const NAME: &'static str = "police";
    type Opts = PoliceOpts;

    fn index(o: &PoliceOpts) -> u32 {
        o.index
    }

    fn set_index(o: &mut PoliceOpts, index: u32) {
        o.index = index;
    }

    fn parse(cur: &mut Cur) -> Result<(PoliceOpts, bool), ActErr> {
        cur.pos += 1;
        if cur.peek().is_none() {
            return Err(incomplete(cur).into());
        }
        parse_opts(cur)
    }

    fn args(p: &PoliceOpts) -> String {
        let mut s = String::from("police");
        if p.rate > 0 {
            let _ = write!(s, " rate {}bit burst {}", p.rate, p.burst);
        }
        if let Some(av) = p.avrate {
            let _ = write!(s, " avrate {av}bit");
        }
        if let (Some(r), Some(b)) = (p.pkts_rate, p.pkts_burst) {
            let _ = write!(s, " pkts_rate {r} pkts_burst {b}");
        }
        if let Some(m) = p.mtu {
            let _ = write!(s, " mtu {m}");
        }
        if let Some(pk) = p.peakrate {
            let _ = write!(s, " peakrate {pk}bit");
        }
        if p.mpu != 0 {
            let _ = write!(s, " mpu {}", p.mpu);
        }
        if p.overhead != 0 {
            let _ = write!(s, " overhead {}", p.overhead);
        }
        if p.linklayer == LinkLayer::Atm {
            s.push_str(" linklayer atm");
        }
        let _ = write!(s, " conform-exceed {}", p.exceed.text());
        if p.conform != Verdict::Pass {
            let _ = write!(s, " / {}", p.conform.text());
        }
        let _ = write!(s, " index {}", p.index);
        s
    }

    fn show(p: &PoliceOpts, out: &mut String, refs: u32, bind: u32, tm: &str, d: bool) {
        let rb = p.rate / 8;
        let burst = if rb == 0 { 0 } else { xmitsize(rb, xmittime(rb, p.burst)) };
        let mtu = p.mtu.unwrap_or(if p.rate > 0 { 2040 } else { u32::MAX });
        let _ = write!(
            out,
            " police {:#x} rate {} burst {} mtu {} ",
            p.index,
            rate_str(p.rate),
            format_size(burst as u64),
            format_size(mtu as u64)
        );
        if let Some(pk) = p.peakrate {
            let _ = write!(out, "peakrate {} ", rate_str(pk));
        }
        if let Some(av) = p.avrate {
            let _ = write!(out, "avrate {} ", rate_str(av));
        }
        if let (Some(pps), Some(b)) = (p.pkts_rate, p.pkts_burst) {
            let _ = write!(out, "pkts_rate {pps} pkts_burst {} ", shown_pkts_burst(pps, b));
        }
        let _ = write!(out, "action {}", p.exceed.text());
        if p.conform != Verdict::Pass {
            let _ = write!(out, "/{} ", p.conform.text());
        } else {
            out.push(' ');
        }
        let _ = write!(out, "overhead {} ", format_size(p.overhead as u64));
        if p.linklayer == LinkLayer::Atm {
            out.push_str("linklayer atm ");
        } else if d {
            out.push_str("linklayer ethernet ");
        }
        let _ = writeln!(out, "\n\tref {refs} bind {bind} {tm}");
    }

    fn json(p: &PoliceOpts, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), d: bool) {
        j.put("kind", "police").put("index", p.index);
        if let (Some(pps), Some(b)) = (p.pkts_rate, p.pkts_burst) {
            j.put("pkts_rate", pps).put("pkts_burst", shown_pkts_burst(pps, b));
        }
        j.put("control_action", control_json(p.exceed));
        if p.conform != Verdict::Pass {
            j.put("control_action", control_json(p.conform));
        }
        j.put("overhead", p.overhead);
        if p.linklayer == LinkLayer::Atm || d {
            j.put("linklayer", if p.linklayer == LinkLayer::Atm { "atm" } else { "ethernet" });
        }
        j.put("ref", refs).put("bind", bind);
        tm(j);
    }

    fn check(p: &PoliceOpts, _bare: bool, in_filter: bool) -> Result<(), TcError> {
        goto_ok(p.exceed, in_filter)?;
        if matches!(p.conform, Verdict::Goto(_)) {
            return Err(kernel_err("goto chain not allowed on fallback"));
        }
        Ok(())
    }

    fn encode(p: &PoliceOpts, out: &mut Attrs, _cx: &ActEncodeCx<'_>) -> Result<(), Unencodable> {
        if p.linklayer == LinkLayer::Atm {
            return Err(Unencodable {
                kind: "police",
                option: "linklayer atm".into(),
                why: "its rate table is not built".into(),
            });
        }
        let mtu = p.mtu.unwrap_or(0);
        let rate = (p.rate > 0).then(|| Rate::from_bps(p.rate));
        let peak = p.peakrate.map(Rate::from_bps);
        let overhead = p.overhead as i32;
        let mut tbf = Vec::with_capacity(56);
        tbf.extend_from_slice(&p.index.to_ne_bytes());
        tbf.extend_from_slice(&p.exceed.code().to_ne_bytes());
        tbf.extend_from_slice(&0u32.to_ne_bytes()); // limit
        let burst = rate.map(|r| xmittime(r.bytes_per_sec(), p.burst)).unwrap_or(0);
        tbf.extend_from_slice(&burst.to_ne_bytes());
        tbf.extend_from_slice(&mtu.to_ne_bytes());
        let rt = rate.map(|r| ratespec(r, mtu, overhead, p.mpu));
        let pt = peak.map(|r| ratespec(r, mtu, overhead, p.mpu));
        tbf.extend_from_slice(&rt.as_ref().map(|r| r.0).unwrap_or([0; 12]));
        tbf.extend_from_slice(&pt.as_ref().map(|r| r.0).unwrap_or([0; 12]));
        tbf.extend_from_slice(&[0u8; 12]); // refcnt, bindcnt, capab
        out.put(TCA_POLICE_TBF, &tbf);
        if let (Some(r), Some((_, table))) = (rate, &rt) {
            out.put(TCA_POLICE_RATE, table);
            if r.bytes_per_sec() >= 1 << 32 {
                out.put(TCA_POLICE_RATE64, &r.bytes_per_sec().to_ne_bytes());
            }
        }
        if let (Some(r), Some((_, table))) = (peak, &pt) {
            out.put(TCA_POLICE_PEAKRATE, table);
            if r.bytes_per_sec() >= 1 << 32 {
                out.put(TCA_POLICE_PEAKRATE64, &r.bytes_per_sec().to_ne_bytes());
            }
        }
        if let Some(av) = p.avrate {
            out.put(TCA_POLICE_AVRATE, &((av / 8).min(u32::MAX as u64) as u32).to_ne_bytes());
        }
        if p.conform != Verdict::Pass {
            out.put(TCA_POLICE_RESULT, &p.conform.code().to_ne_bytes());
        }
        if let (Some(pps), Some(b)) = (p.pkts_rate, p.pkts_burst) {
            out.put(TCA_POLICE_PKTRATE64, &pps.to_ne_bytes());
            let ticks = xmittime(pps, u32::try_from(b).unwrap_or(u32::MAX)) as u64;
            out.put(TCA_POLICE_PKTBURST64, &ticks.to_ne_bytes());
        }
        Ok(())
    }

    /// The inverse of [`Police::encode`]; bursts come back as the bytes (packets) their ticks
    /// hold, which is the burst itself where the tick count is exact.
    fn decode(options: &[u8]) -> Result<PoliceOpts, DecodeError> {
        let bad = |why: &str| DecodeError::new("police", why);
        let tbf = nlattr::find(options, TCA_POLICE_TBF).ok_or_else(|| bad("no TCA_POLICE_TBF"))?;
        if tbf.len() < 44 {
            return Err(bad("short TCA_POLICE_TBF"));
        }
        let index = u32_at(tbf, 0);
        let exceed = verdict_of_kernel(u32_at(tbf, 4) as i32).ok_or_else(|| bad("bad exceed verdict"))?;
        let burst_ticks = u32_at(tbf, 12);
        let mtu = u32_at(tbf, 16);
        let (rs, ps) = (&tbf[20..32], &tbf[32..44]);
        let bytes = |spec: &[u8], r64: u16| -> u64 {
            nlattr::find(options, r64).and_then(nlattr::u64_of).unwrap_or(u32_at(spec, 8) as u64)
        };
        let rate =
            if nlattr::find(options, TCA_POLICE_RATE).is_some() { bytes(rs, TCA_POLICE_RATE64) } else { 0 };
        let peak = nlattr::find(options, TCA_POLICE_PEAKRATE).map(|_| bytes(ps, TCA_POLICE_PEAKRATE64));
        let spec = if rate > 0 { Some(rs) } else { peak.map(|_| ps) };
        let overhead = spec.map(|s| u16::from_ne_bytes([s[2], s[3]])).unwrap_or(0);
        let mpu = spec.map(|s| u16::from_ne_bytes([s[6], s[7]]) as u32).unwrap_or(0);
        let conform = match nlattr::find(options, TCA_POLICE_RESULT).and_then(nlattr::u32_of) {
            Some(c) => verdict_of_kernel(c as i32).ok_or_else(|| bad("bad conform verdict"))?,
            None => Verdict::Pass,
        };
        let avrate = nlattr::find(options, TCA_POLICE_AVRATE).and_then(nlattr::u32_of).map(|b| b as u64 * 8);
        let pkts_rate = nlattr::find(options, TCA_POLICE_PKTRATE64).and_then(nlattr::u64_of);
        let pkts_burst =
            match (pkts_rate, nlattr::find(options, TCA_POLICE_PKTBURST64).and_then(nlattr::u64_of)) {
                (Some(pps), Some(t)) => Some(burst_of(pps, t.min(u32::MAX as u64) as u32) as u64),
                _ => None,
            };
        Ok(PoliceOpts {
            rate: rate * 8,
            burst: if rate > 0 { burst_of(rate, burst_ticks) } else { 0 },
            mtu: (mtu != 0).then_some(mtu),
            peakrate: peak.map(|b| b * 8),
            avrate,
            pkts_rate,
            pkts_burst,
            overhead,
            mpu,
            linklayer: LinkLayer::Ethernet,
            exceed,
            conform,
            index,
        })
    }

    fn build(p: &PoliceOpts, _devices: &[Device]) -> Result<CoreAction, BuildError> {
        if p.avrate.is_some() || p.pkts_rate.is_some() {
            return Err(BuildError::Unsupported(
                "police avrate and pkts_rate (the core polices bytes with a token bucket)".into(),
            ));
        }
        Ok(CoreAction::Police(CorePolice::new(PoliceConfig {
            rate: (p.rate > 0).then(|| Rate::from_bps(p.rate)),
            burst: p.burst as u64,
            // Without a rate and an mtu the kernel's policer lets every packet conform.
            mtu: p.mtu.unwrap_or(if p.rate > 0 {
                sluice_core::filter::police::DEFAULT_MTU
            } else {
                u32::MAX
            }),
            peakrate: p.peakrate.map(Rate::from_bps),
            wire: crate::build::wire(p.overhead as i32, p.mpu, p.linklayer),
            exceed: core_verdict(p.exceed)?,
            conform: core_verdict(p.conform)?,
        })?))
    }

    fn label(p: &PoliceOpts) -> String {
        format!(" police {}", crate::print::rate(p.rate))
    }
}

/// The smallest burst that tc sends as `ticks` at `rate` (per second); tc's own `xmitsize`
/// can fall short of it (transmit times are rounded down).
fn burst_of(rate: u64, ticks: u32) -> u32 {
    // xmittime grows with the size: the first size whose time reaches `ticks`.
    let (mut lo, mut hi) = (0u32, u32::MAX);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if xmittime(rate, mid) >= ticks {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    if xmittime(rate, lo) == ticks {
        lo
    } else {
        xmitsize(rate, ticks)
    }
}

/// The packet burst tc prints: the packets the sent ticks hold.
fn shown_pkts_burst(pps: u64, b: u64) -> u64 {
    if pps == 0 || b > u32::MAX as u64 {
        b
    } else {
        xmitsize(pps, xmittime(pps, b as u32)) as u64
    }
}
