//! tbf: the token bucket filter, with its optional peak-rate bucket and one child (a bfifo of
//! `limit` bytes unless another qdisc is grafted on `major:1`). tc's `q_tbf.c`, the kernel's
//! `sch_tbf.c`; the algorithm is `sluice_core::tbf`.

use super::{BuildCx, ClassList, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::{wire, BuildError};
use crate::error::TcError;
use crate::grammar::{illegal, linklayer_arg, rate_arg, size_arg, time_arg, what_is, Cur};
use crate::json::J;
use crate::model::{is_ethernet, is_zero_i32, is_zero_u32, Device, LinkLayer, QdiscNode, QdiscOpts};
use crate::nlattr::{attrs, u32_of, u64_of, Attrs};
use crate::print::rate;
use crate::tcmath::{l2t_ns, xmitsize, xmittime, RateSpec, TICK_IN_USEC};
use serde::{Deserialize, Serialize};
use sluice_core::tbf::{Tbf as Core, TbfConfig};
use sluice_core::units::format_size;
use sluice_core::{Handle, Qdisc, Rate, Time};
use std::fmt::Write;

/// TBF options (as the kernel keeps them: `latency` is converted to `limit` by tc).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TbfOpts {
    /// bit/s.
    #[serde(with = "crate::serde_units::rate")]
    pub rate: u64,
    /// Bucket size in bytes.
    #[serde(with = "crate::serde_units::size")]
    pub burst: u32,
    /// Queue limit in bytes.
    #[serde(with = "crate::serde_units::size")]
    pub limit: u32,
    /// Peak rate in bit/s.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_rate")]
    pub peakrate: Option<u64>,
    /// Peak bucket (minburst) in bytes; without a peak rate it only sizes the rate table's cells.
    pub mtu: Option<u32>,
    /// Per-packet overhead (tc takes 0..=65535).
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub overhead: i32,
    /// Minimum packet unit (tc sends its low 16 bits).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mpu: u32,
    /// Link layer.
    #[serde(default, skip_serializing_if = "is_ethernet")]
    pub linklayer: LinkLayer,
}

/// The kind.
pub struct Tbf;

/// `TCA_TBF_*` (`linux/pkt_sched.h`).
mod attr {
    pub const PARMS: u16 = 1;
    pub const RTAB: u16 = 2;
    pub const PTAB: u16 = 3;
    pub const RATE64: u16 = 4;
    pub const PRATE64: u16 = 5;
    pub const BURST: u16 = 6;
    pub const PBURST: u16 = 7;
}

const USAGE: &str = "Usage: ... tbf limit BYTES burst BYTES[/BYTES] rate KBPS [ mtu BYTES[/BYTES] ]\n\t[ peakrate KBPS ] [ latency TIME ] [ overhead BYTES ] [ linklayer TYPE ]";

impl QdiscKind for Tbf {
    const NAME: &'static str = "tbf";
    const CLASSFUL: bool = true;
    type Opts = TbfOpts;

    fn parse(cur: &mut Cur) -> Result<TbfOpts, TcError> {
        let mut o = TbfOpts::default();
        let mut latency: u32 = 0;
        let mut limit: u32 = 0;
        while let Some((at, w)) = cur.next_word() {
            match w {
                "limit" => {
                    if latency != 0 {
                        return Err(TcError::usage(
                            "tbf: you can specify either \"limit\" or \"latency\", not both.",
                            Some(at),
                        ));
                    }
                    limit = size_arg(cur, "limit")?;
                }
                "latency" => {
                    if limit != 0 {
                        return Err(TcError::usage(
                            "tbf: you can specify either \"limit\" or \"latency\", not both.",
                            Some(at),
                        ));
                    }
                    latency = time_arg(cur, "latency")?;
                }
                "burst" | "buffer" | "maxburst" => {
                    if o.burst != 0 {
                        return Err(TcError::usage(
                            "tbf: duplicate \"buffer/burst/maxburst\" specification",
                            Some(at),
                        ));
                    }
                    o.burst = size_arg(cur, "buffer")?;
                }
                "mtu" | "minburst" => {
                    if o.mtu.is_some() {
                        return Err(TcError::usage(
                            "tbf: duplicate \"mtu/minburst\" specification",
                            Some(at),
                        ));
                    }
                    o.mtu = Some(size_arg(cur, "mtu")?);
                }
                "mpu" => o.mpu = size_arg(cur, "mpu")?,
                "rate" => {
                    if o.rate != 0 {
                        return Err(TcError::usage("tbf: duplicate \"rate\" specification", Some(at)));
                    }
                    o.rate = rate_arg(cur, "rate")?;
                }
                "peakrate" => {
                    if o.peakrate.is_some() {
                        return Err(TcError::usage("tbf: duplicate \"peakrate\" specification", Some(at)));
                    }
                    o.peakrate = Some(rate_arg(cur, "peakrate")?);
                }
                // `get_u16`: tc refuses a negative overhead.
                "overhead" => {
                    let (i, v) = cur.value()?;
                    o.overhead = v.parse::<u16>().map_err(|_| illegal("overhead", i, None))? as i32;
                }
                "linklayer" => o.linklayer = linklayer_arg(cur)?,
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        // q_tbf.c reports every missing parameter, then the usage.
        let mut verdict = String::new();
        if o.rate == 0 {
            verdict.push_str("tbf: the \"rate\" parameter is mandatory.\n");
        }
        if o.burst == 0 {
            verdict.push_str("tbf: the \"burst\" parameter is mandatory.\n");
        }
        if o.peakrate.is_some() && o.mtu.is_none() {
            verdict.push_str("tbf: when \"peakrate\" is specified, \"mtu\" must also be specified.\n");
        }
        if limit == 0 && latency == 0 {
            verdict.push_str("tbf: either \"limit\" or \"latency\" is required.\n");
        }
        if !verdict.is_empty() {
            return Err(TcError::usage(format!("{verdict}{USAGE}"), None));
        }
        if latency != 0 {
            // tc: limit = rate * latency + burst, or the peak-rate equivalent when smaller.
            let mut lim = (o.rate / 8) as f64 * latency as f64 / 1e6 + o.burst as f64;
            if let (Some(p), Some(m)) = (o.peakrate, o.mtu) {
                let lim2 = (p / 8) as f64 * latency as f64 / 1e6 + m as f64;
                if lim2 < lim {
                    lim = lim2;
                }
            }
            limit = lim as u32;
        }
        o.limit = limit;
        Ok(o)
    }

    fn args(t: &TbfOpts) -> String {
        let mut s = format!(" rate {}bit burst {} limit {}", t.rate, t.burst, t.limit);
        if let Some(p) = t.peakrate {
            let _ = write!(s, " peakrate {p}bit");
        }
        if let Some(m) = t.mtu {
            let _ = write!(s, " mtu {m}");
        }
        if t.overhead != 0 {
            let _ = write!(s, " overhead {}", t.overhead);
        }
        if t.mpu != 0 {
            let _ = write!(s, " mpu {}", t.mpu);
        }
        if t.linklayer == LinkLayer::Atm {
            s.push_str(" linklayer atm");
        }
        s
    }

    fn show(t: &TbfOpts, _dev: &Device, d: bool) -> String {
        let mut s = String::new();
        let atm = t.linklayer == LinkLayer::Atm;
        let Shown { buffer, mtu, latency } = shown(t);
        let _ = write!(s, "rate {} ", rate(t.rate));
        if d {
            // The kernel reports rates through psched_ratecfg_getrate: cell_log 0, printed as /1.
            let _ = write!(s, "burst {}/1 mpu {} ", format_size(buffer as u64), format_size(t.mpu as u64));
        } else {
            let _ = write!(s, "burst {} ", format_size(buffer as u64));
        }
        if let (Some(p), Some(mtu)) = (t.peakrate, mtu) {
            let _ = write!(s, "peakrate {} ", rate(p));
            let mtu = format_size(mtu as u64);
            if d {
                let _ = write!(s, "mtu {mtu}/1 mpu {} ", format_size(t.mpu as u64));
            } else {
                let _ = write!(s, "minburst {mtu} ");
            }
        }
        if latency >= 0.0 {
            let _ = write!(s, "lat {} ", crate::print::time_us(latency as u32));
        }
        if latency < 0.0 {
            let _ = write!(s, "limit {} ", format_size(t.limit as u64));
        }
        if t.overhead != 0 {
            let _ = write!(s, "overhead {} ", t.overhead);
        }
        if atm || d {
            let _ = write!(s, "linklayer {} ", if atm { "atm" } else { "ethernet" });
        }
        s
    }

    fn json(t: &TbfOpts, _dev: &Device, d: bool) -> J {
        let size_cell = |bytes: u32| format!("{}/1", format_size(bytes as u64));
        let s = shown(t);
        let mut o = J::obj();
        o.put("rate", t.rate / 8);
        if d {
            o.put("burst", size_cell(s.buffer)).put("mpu", t.mpu);
        } else {
            o.put("burst", s.buffer);
        }
        if let Some(mtu) = s.mtu {
            if d {
                o.put("mtu", size_cell(mtu)).put("mpu", t.mpu);
            } else {
                o.put("minburst", mtu);
            }
        }
        if s.latency >= 0.0 {
            o.put("lat", s.latency as u64);
        } else {
            o.put("limit", t.limit);
        }
        if t.overhead != 0 {
            o.put("overhead", t.overhead);
        }
        if t.linklayer == LinkLayer::Atm || d {
            o.put("linklayer", if t.linklayer == LinkLayer::Atm { "atm" } else { "ethernet" });
        }
        o
    }

    /// `tbf_change`: a peak rate must exceed the rate.
    fn change(_dev: &Device, t: TbfOpts, _old: Option<&TbfOpts>) -> Result<TbfOpts, TcError> {
        if t.peakrate.is_some_and(|pk| pk <= t.rate) {
            return Err(TcError::errno("Invalid argument"));
        }
        Ok(t)
    }

    /// As `tbf_parse_opt` sends it: `struct tc_tbf_qopt` (ratespecs with overhead, mpu and link
    /// layer; bucket and peak bucket in ticks at the 32-bit rates), the burst, the 64-bit rate
    /// when it does not fit, the rate table, then the peak rate's attributes and table. Both
    /// tables are sized by `mtu` (2047 when not given).
    fn encode(t: &TbfOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        let overhead = u16::try_from(t.overhead).map_err(|_| Unencodable {
            kind: "tbf",
            option: format!("overhead {}", t.overhead),
            why: "tc sends an overhead of 0 to 65535 bytes".into(),
        })?;
        // tc keeps the mpu in the ratespec's 16 bits.
        let mpu = t.mpu as u16;
        let mtu = t.mtu.unwrap_or(0);
        let rate = t.rate / 8;
        let mut r = RateSpec::new(rate, overhead, mpu, t.linklayer);
        let rtab = r.table(r.rate as u64, mtu);
        let prate = t.peakrate.map_or(0, |p| p / 8);
        let mut p = RateSpec::default();
        let mut ptab = None;
        let mut mtu_ticks = 0;
        if prate != 0 {
            p = RateSpec::new(prate, overhead, mpu, t.linklayer);
            ptab = Some(p.table(p.rate as u64, mtu));
            mtu_ticks = xmittime(p.rate as u64, mtu);
        }
        let mut parms = Vec::with_capacity(36);
        parms.extend_from_slice(&r.bytes());
        parms.extend_from_slice(&if prate != 0 { p.bytes() } else { [0; 12] });
        for v in [t.limit, xmittime(r.rate as u64, t.burst), mtu_ticks] {
            parms.extend_from_slice(&v.to_ne_bytes());
        }
        out.begin_nest(TCA_OPTIONS);
        out.put(attr::PARMS, &parms);
        out.put_u32(attr::BURST, t.burst);
        if rate >= 1 << 32 {
            out.put_u64(attr::RATE64, rate);
        }
        out.put(attr::RTAB, &rtab);
        if let Some(ptab) = ptab {
            if prate >= 1 << 32 {
                out.put_u64(attr::PRATE64, prate);
            }
            out.put_u32(attr::PBURST, mtu);
            out.put(attr::PTAB, &ptab);
        }
        out.end_nest();
        Ok(())
    }

    /// The options back from what [`Tbf::encode`] sends: rates (64-bit when sent), overhead,
    /// mpu and link layer from the ratespec, the bucket from `TCA_TBF_BURST`, the peak bucket
    /// from `TCA_TBF_PBURST`. A `mtu` sent without a peak rate shows only in the table's cell
    /// size and is not read back.
    fn decode(options: Option<&[u8]>) -> Result<TbfOpts, DecodeError> {
        let err = |why: &str| DecodeError::new("tbf", why);
        let mut parms = None;
        let (mut rate64, mut prate64, mut burst, mut pburst) = (None, None, None, None);
        for (ty, p) in attrs(options.unwrap_or_default()) {
            match ty {
                attr::PARMS => parms = Some(p),
                attr::RATE64 => rate64 = Some(u64_of(p).ok_or_else(|| err("TCA_TBF_RATE64 is short"))?),
                attr::PRATE64 => prate64 = Some(u64_of(p).ok_or_else(|| err("TCA_TBF_PRATE64 is short"))?),
                attr::BURST => burst = Some(u32_of(p).ok_or_else(|| err("TCA_TBF_BURST is short"))?),
                attr::PBURST => pburst = Some(u32_of(p).ok_or_else(|| err("TCA_TBF_PBURST is short"))?),
                _ => {}
            }
        }
        let parms = parms.filter(|p| p.len() >= 36).ok_or_else(|| err("no struct tc_tbf_qopt"))?;
        let r = RateSpec::parse(&parms[0..12]).ok_or_else(|| err("short ratespec"))?;
        let p = RateSpec::parse(&parms[12..24]).ok_or_else(|| err("short peak ratespec"))?;
        let limit = u32_of(&parms[24..28]).unwrap_or(0);
        let prate = prate64.unwrap_or(p.rate as u64);
        Ok(TbfOpts {
            rate: rate64.unwrap_or(r.rate as u64) * 8,
            burst: burst.ok_or_else(|| err("no TCA_TBF_BURST"))?,
            limit,
            peakrate: (prate != 0).then_some(prate * 8),
            mtu: pburst,
            overhead: r.overhead as i32,
            mpu: r.mpu as u32,
            linklayer: r.linklayer,
        })
    }

    const CLASS_OPS: bool = true;

    /// `*_find` answers for any minor: its one class.
    fn has_class(_o: &TbfOpts, _dev: &Device, _q: &QdiscNode, _classid: Handle) -> bool {
        true
    }

    fn classes(_o: &TbfOpts, _dev: &Device, q: &QdiscNode) -> ClassList {
        ClassList::Implicit(vec![(Handle::new(q.handle.major(), 1), q.handle)])
    }

    fn build(t: &TbfOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let mut tbf = Core::new(TbfConfig {
            rate: Rate::from_bps(t.rate),
            burst: t.burst as u64,
            limit: Some(t.limit as u64),
            latency: None,
            peakrate: t.peakrate.map(Rate::from_bps),
            mtu: t.mtu.map(|m| m as u64),
            wire: wire(t.overhead, t.mpu, t.linklayer),
        })?;
        if let Some(c) = cx.dev.qdisc_at(Handle::new(q.handle.major(), 1)) {
            tbf.set_child(cx.child(c)?, Time::ZERO);
        }
        Ok(Box::new(tbf))
    }

    fn label(t: &TbfOpts) -> Option<String> {
        Some(format!("rate {} burst {}b", rate(t.rate), t.burst))
    }
}

/// What TBF reports back: its bucket and peak bucket in bytes (through the kernel's ticks) and
/// tc's latency in µs (negative: tc prints the limit instead).
struct Shown {
    buffer: u32,
    mtu: Option<u32>,
    latency: f64,
}

fn shown(t: &TbfOpts) -> Shown {
    let rb = t.rate / 8;
    let atm = t.linklayer == LinkLayer::Atm;
    let buffer_ticks = (l2t_ns(rb, t.burst, t.overhead, t.mpu, atm) >> 6) as u32;
    let buffer = xmitsize(rb, buffer_ticks);
    let mut latency =
        1e6 * (t.limit as f64 / rb.max(1) as f64) - (buffer_ticks as f64 / TICK_IN_USEC).trunc();
    let mtu = t.peakrate.map(|p| {
        let pb = p / 8;
        let mtu_ticks = (l2t_ns(pb, t.mtu.unwrap_or(0), t.overhead, t.mpu, atm) >> 6) as u32;
        let lat2 = 1e6 * (t.limit as f64 / pb.max(1) as f64) - (mtu_ticks as f64 / TICK_IN_USEC).trunc();
        if lat2 > latency {
            latency = lat2;
        }
        xmitsize(pb, mtu_ticks)
    });
    Shown { buffer, mtu, latency }
}

/// The limit `tbf_change` passes on to a fifo child (`fifo_set_limit`), when `o` is a TBF.
pub fn child_fifo_limit(o: &QdiscOpts) -> Option<u32> {
    match o {
        QdiscOpts::Tbf(t) => Some(t.limit),
        _ => None,
    }
}
