//! HTB classes: tc's `htb_parse_class_opt` / `htb_print_opt` for classes, the kernel's
//! `htb_change_class` rules, and the `RTM_NEWTCLASS` options tc 6.1 sends.

use super::{illegal, num, Htb, HtbOpts, USAGE};
use crate::error::TcError;
use crate::grammar::{matches, tc_hz, what_is, Cur};
use crate::kinds::{
    new_classid, set_class_opts, ClassChange, ClassKind, ClassShowCx, DecodeError, Unencodable, TCA_OPTIONS,
};
use crate::model::{
    is_ethernet, is_false, is_zero_i32, is_zero_u32, ClassNode, ClassOpts, Device, LinkLayer,
};
use crate::nlattr::{attrs, u64_of, Attrs};
use crate::print::{htb_shown_burst, kernel_hex, rate};
use crate::tcmath::{xmitsize, xmittime, RateSpec};
use serde::{Deserialize, Serialize};
use sluice_core::units::format_size;
use sluice_core::units::{parse_rate, parse_size};
use sluice_core::Handle;
use std::fmt::Write;

/// HTB class options, with tc's defaults already resolved (as tc sends them).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HtbClassOpts {
    /// Guaranteed rate, bit/s.
    #[serde(with = "crate::serde_units::rate")]
    pub rate: u64,
    /// Maximum rate, bit/s.
    #[serde(with = "crate::serde_units::rate")]
    pub ceil: u64,
    /// Rate bucket, bytes.
    #[serde(with = "crate::serde_units::size")]
    pub burst: u32,
    /// Ceil bucket, bytes.
    #[serde(with = "crate::serde_units::size")]
    pub cburst: u32,
    /// `burst` was not given: it holds tc's default (`rate/HZ + mtu`), and `sluice apply` may size
    /// it by [`crate::burst::recommended_burst`] instead.
    #[serde(default, skip_serializing_if = "is_false")]
    pub burst_auto: bool,
    /// `cburst` was not given (as `burst_auto`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub cburst_auto: bool,
    /// Priority 0..7 (lower first).
    #[serde(default)]
    pub prio: u32,
    /// DRR quantum when given; otherwise rate/r2q clamped by the kernel.
    pub quantum: Option<u32>,
    /// Largest packet for the rate table (1600).
    #[serde(default = "htb_mtu")]
    pub mtu: u32,
    /// Minimum packet unit.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mpu: u32,
    /// Per-packet overhead.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub overhead: i32,
    /// Link layer.
    #[serde(default, skip_serializing_if = "is_ethernet")]
    pub linklayer: LinkLayer,
}

/// tc's default `mtu` of an HTB class.
pub const HTB_DEFAULT_MTU: u32 = 1600;

fn htb_mtu() -> u32 {
    HTB_DEFAULT_MTU
}

/// The class options' kind.
pub struct HtbClass;

/// `TCA_HTB_*` of classes.
mod attr {
    pub const PARMS: u16 = 1;
    pub const CTAB: u16 = 3;
    pub const RTAB: u16 = 4;
    pub const RATE64: u16 = 6;
    pub const CEIL64: u16 = 7;
}

/// `get_rate64`: a rate, zero refused.
fn htb_rate(v: &str) -> Option<u64> {
    parse_rate(v).ok().map(|r| r.bps()).filter(|&r| r != 0)
}

/// `get_size_and_cell`: a size with an optional `/cell`, else `Illegal "PARAM"`.
fn htb_size(cur: &mut Cur, param: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    let v = v.split('/').next().unwrap_or(v);
    parse_size(v).ok().and_then(|s| u32::try_from(s).ok()).ok_or_else(|| illegal(param, i))
}

/// The HTB tree's level of class `id` as the kernel reports it: 0 for a leaf, else 7 minus its
/// depth.
fn class_level(dev: &Device, id: Handle) -> u32 {
    if dev.child_classes(id).next().is_none() {
        return 0;
    }
    let mut level = 7;
    let mut c = dev.class(id);
    while let Some(p) = c.and_then(|c| dev.class(c.parent)) {
        level -= 1;
        c = Some(p);
        if level == 0 {
            break;
        }
    }
    level
}

fn class_depth(dev: &Device, mut classid: Handle) -> usize {
    let mut d = 0;
    while let Some(c) = dev.class(classid) {
        d += 1;
        if d > 16 {
            break;
        }
        classid = c.parent;
    }
    d
}

/// The quantum the kernel gives a class without one: rate / r2q, clamped to 1000..200000.
pub fn auto_quantum(o: &HtbClassOpts, r2q: u32) -> u32 {
    o.quantum.unwrap_or_else(|| ((o.rate / 8) / r2q.max(1) as u64).clamp(1000, 200_000) as u32)
}

/// The bytes of a bucket tc sent as `ticks` at `rate` bytes/s: the smallest that gives the same
/// ticks again, searched above `tc_calc_xmitsize`'s answer (which truncates to whole microseconds
/// and bytes: up to a microsecond's bytes and one short); that answer when none does.
fn bucket(rate: u64, ticks: u32) -> u32 {
    let b = xmitsize(rate, ticks);
    let (mut lo, mut hi) = (b, b.saturating_add(u32::try_from(rate / 1_000_000 + 2).unwrap_or(u32::MAX)));
    // xmittime grows with the size: the first size that reaches `ticks`.
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if xmittime(rate, mid) < ticks {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if xmittime(rate, lo) == ticks {
        lo
    } else {
        b
    }
}

impl ClassKind for HtbClass {
    type Qdisc = Htb;
    type Opts = HtbClassOpts;

    /// `htb_parse_class_opt`, filling tc's defaults (ceil = rate, burst = rate/HZ + mtu).
    fn parse(cur: &mut Cur) -> Result<HtbClassOpts, TcError> {
        let (mut rate, mut ceil) = (0u64, 0u64);
        let (mut burst, mut cburst) = (0u32, 0u32);
        let mut o = HtbClassOpts {
            rate: 0,
            ceil: 0,
            burst: 0,
            cburst: 0,
            burst_auto: false,
            cburst_auto: false,
            prio: 0,
            quantum: None,
            mtu: HTB_DEFAULT_MTU,
            mpu: 0,
            overhead: 0,
            linklayer: LinkLayer::Ethernet,
        };
        while let Some((at, w)) = cur.next_word() {
            // q_htb.c: most keys by prefix, in this order; rate, ceil, buffer and help exactly.
            if matches(w, "prio") {
                o.prio = num(cur, "prio", u32::MAX)?;
            } else if matches(w, "mtu") {
                o.mtu = num(cur, "mtu", u32::MAX)?;
            } else if matches(w, "mpu") {
                o.mpu = num(cur, "mpu", u16::MAX as u32)?;
            } else if matches(w, "overhead") {
                // An unsigned short in tc: a negative overhead is refused.
                o.overhead = num(cur, "overhead", u16::MAX as u32)? as i32;
            } else if matches(w, "linklayer") {
                let (i, v) = cur.value()?;
                o.linklayer = match v {
                    "ethernet" | "eth" => LinkLayer::Ethernet,
                    "atm" | "adsl" => LinkLayer::Atm,
                    _ => return Err(illegal("linklayer", i)),
                };
            } else if matches(w, "quantum") {
                o.quantum = Some(num(cur, "quantum", u32::MAX)?);
            } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
                burst = htb_size(cur, w)?;
            } else if matches(w, "cburst") || w == "cbuffer" || w == "cmaxburst" {
                cburst = htb_size(cur, w)?;
            } else if w == "ceil" {
                let (i, v) = cur.value()?;
                if ceil != 0 {
                    return Err(TcError::usage("Double \"ceil\" spec", Some(at)));
                }
                ceil = htb_rate(v).ok_or_else(|| illegal("ceil", i))?;
            } else if w == "rate" {
                let (i, v) = cur.value()?;
                if rate != 0 {
                    return Err(TcError::usage("Double \"rate\" spec", Some(at)));
                }
                rate = htb_rate(v).ok_or_else(|| illegal("rate", i))?;
            } else if w == "help" {
                return Err(TcError::usage(USAGE, Some(at)));
            } else {
                return Err(what_is(w, at, USAGE));
            }
        }
        if rate == 0 {
            return Err(TcError::usage("\"rate\" is required.", None));
        }
        if ceil == 0 {
            ceil = rate;
        }
        let hz = tc_hz();
        o.burst_auto = burst == 0;
        o.cburst_auto = cburst == 0;
        if burst == 0 {
            burst = ((rate / 8) / hz + o.mtu as u64).min(u32::MAX as u64) as u32;
        }
        if cburst == 0 {
            cburst = ((ceil / 8) / hz + o.mtu as u64).min(u32::MAX as u64) as u32;
        }
        o.rate = rate;
        o.ceil = ceil;
        o.burst = burst;
        o.cburst = cburst;
        Ok(o)
    }

    fn args(h: &HtbClassOpts) -> String {
        // A burst that was not given is left out so the reader fills its default again (and
        // knows it was not given).
        let mut s = format!(" rate {}bit ceil {}bit", h.rate, h.ceil);
        if !h.burst_auto {
            let _ = write!(s, " burst {}", h.burst);
        }
        if !h.cburst_auto {
            let _ = write!(s, " cburst {}", h.cburst);
        }
        let _ = write!(s, " prio {}", h.prio);
        if let Some(qn) = h.quantum {
            let _ = write!(s, " quantum {qn}");
        }
        if h.mtu != HTB_DEFAULT_MTU {
            let _ = write!(s, " mtu {}", h.mtu);
        }
        if h.mpu != 0 {
            let _ = write!(s, " mpu {}", h.mpu);
        }
        if h.overhead != 0 {
            let _ = write!(s, " overhead {}", h.overhead);
        }
        if h.linklayer == LinkLayer::Atm {
            s.push_str(" linklayer atm");
        }
        s
    }

    fn show(h: Option<&HtbClassOpts>, q: &HtbOpts, cx: &ClassShowCx<'_>) -> (String, String) {
        let (mut s, mut xstats) = (String::new(), String::new());
        let Some(h) = h else { return (s, xstats) };
        let (dev, id, d) = (cx.dev, cx.id, cx.details);
        if dev.child_classes(id).next().is_none() {
            let _ = write!(s, "prio {} ", h.prio);
            if d {
                let _ = write!(s, "quantum {} ", auto_quantum(h, q.r2q));
            }
        }
        let _ = write!(s, "rate {} ", rate(h.rate));
        if h.overhead != 0 {
            let _ = write!(s, "overhead {} ", h.overhead);
        }
        let _ = write!(s, "ceil {} ", rate(h.ceil));
        let b = htb_shown_burst(h.rate, h.burst);
        let cb = htb_shown_burst(h.ceil, h.cburst);
        if h.linklayer == LinkLayer::Atm || d {
            let _ =
                write!(s, "linklayer {} ", if h.linklayer == LinkLayer::Atm { "atm" } else { "ethernet" });
        }
        if d {
            let _ = write!(
                s,
                "burst {}/1 mpu {} cburst {}/1 mpu {} level {} ",
                format_size(b as u64),
                format_size(h.mpu as u64),
                format_size(cb as u64),
                format_size(h.mpu as u64),
                class_level(dev, id)
            );
        } else {
            let _ = write!(s, "burst {} cburst {} ", format_size(b as u64), format_size(cb as u64));
        }
        // Kinds with class xstats print them, then an empty line.
        let _ = writeln!(xstats, " lended: 0 borrowed: 0 giants: 0");
        let _ = writeln!(
            xstats,
            " tokens: {} ctokens: {}",
            xmittime(h.rate / 8, h.burst) as i32,
            xmittime(h.ceil / 8, h.cburst) as i32
        );
        xstats.push('\n');
        (s, xstats)
    }

    /// `htb_change_class`: rates must not be 0; a quantum computed from r2q out of 1000..200000
    /// is warned about; a priority above 7 is kept as 7; a new class under a leaf makes the
    /// leaf an inner class (its qdisc goes away), at most 8 levels deep; an unknown parent makes
    /// a top class.
    fn change(mut o: HtbClassOpts, cx: ClassChange<'_>) -> Result<Vec<String>, TcError> {
        let ClassChange { dev, q, clid, parent, exists } = cx;
        let crate::model::QdiscOpts::Htb(h) = &q.opts else {
            return Err(TcError::errno("Operation not supported"));
        };
        o.prio = o.prio.min(7);
        if o.rate == 0 || o.ceil == 0 {
            return Err(TcError::errno("Invalid argument"));
        }
        let mut warnings = Vec::new();
        if o.quantum.is_none() {
            let qn = (o.rate / 8) / h.r2q.max(1) as u64;
            let what = if qn < 1000 {
                Some("small")
            } else if qn > 200_000 {
                Some("big")
            } else {
                None
            };
            if let Some(what) = what {
                warnings.push(format!(
                    "Warning: sch_htb: quantum of class {} is {what}. Consider r2q change.",
                    kernel_hex(clid)
                ));
            }
        }
        if exists {
            set_class_opts(dev, clid, ClassOpts::Htb(o));
            return Ok(warnings);
        }
        new_classid(clid)?;
        let pclass = if parent == crate::model::H_ROOT { None } else { dev.class(parent).cloned() };
        let parent_id = pclass.as_ref().map(|p| p.classid).unwrap_or(q.handle);
        if let Some(p) = &pclass {
            if class_depth(dev, p.classid) >= 7 {
                return Err(TcError::kernel("sch_htb: tree is too deep"));
            }
            // The parent becomes an inner class: its leaf qdisc goes away.
            if let Some(leaf) = dev.qdisc_at(p.classid).map(|l| l.handle) {
                dev.remove_qdisc_tree(leaf);
            }
        }
        dev.classes.push(ClassNode {
            classid: clid,
            parent: parent_id,
            opts: ClassOpts::Htb(o),
            stats: Default::default(),
        });
        Ok(warnings)
    }

    /// As `htb_parse_class_opt` sends it: the 64-bit rates first when they do not fit in 32
    /// bits, `struct tc_htb_opt` (rate and ceil specs, buckets in ticks at the 64-bit rates,
    /// quantum, prio), then the rate and ceil tables (at the 32-bit rates, as tc computes them).
    fn encode(h: &HtbClassOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        let (rate, ceil) = (h.rate / 8, h.ceil / 8);
        let overhead = u16::try_from(h.overhead).map_err(|_| Unencodable {
            kind: "htb",
            option: format!("overhead {}", h.overhead),
            why: "tc sends an overhead of 0 to 65535 bytes".into(),
        })?;
        let mpu = h.mpu as u16;
        let mut r = RateSpec::new(rate, overhead, mpu, h.linklayer);
        let rtab = r.table(r.rate as u64, h.mtu);
        let mut c = RateSpec::new(ceil, overhead, mpu, h.linklayer);
        let ctab = c.table(c.rate as u64, h.mtu);
        let mut parms = Vec::with_capacity(44);
        parms.extend_from_slice(&r.bytes());
        parms.extend_from_slice(&c.bytes());
        for v in [xmittime(rate, h.burst), xmittime(ceil, h.cburst), h.quantum.unwrap_or(0), 0, h.prio] {
            parms.extend_from_slice(&v.to_ne_bytes());
        }
        out.begin_nest(TCA_OPTIONS);
        if rate >= 1 << 32 {
            out.put_u64(attr::RATE64, rate);
        }
        if ceil >= 1 << 32 {
            out.put_u64(attr::CEIL64, ceil);
        }
        out.put(attr::PARMS, &parms);
        out.put(attr::RTAB, &rtab);
        out.put(attr::CTAB, &ctab);
        out.end_nest();
        Ok(())
    }

    /// The options back from what [`HtbClass::encode`] sends. The buckets come back through
    /// tc's ticks (`tc_calc_xmitsize`), the mtu only as the tables' cell size (1600 for cell
    /// log 3, else the largest mtu of that cell size), and `burst_auto`/`cburst_auto` as false:
    /// what is sent encodes again to the same bytes.
    fn decode(options: Option<&[u8]>) -> Result<HtbClassOpts, DecodeError> {
        let err = |why: &str| DecodeError::new("htb", why);
        let (mut rate64, mut ceil64, mut parms) = (None, None, None);
        for (ty, p) in attrs(options.unwrap_or_default()) {
            match ty {
                attr::RATE64 => rate64 = Some(u64_of(p).ok_or_else(|| err("TCA_HTB_RATE64 is short"))?),
                attr::CEIL64 => ceil64 = Some(u64_of(p).ok_or_else(|| err("TCA_HTB_CEIL64 is short"))?),
                attr::PARMS => parms = Some(p),
                _ => {}
            }
        }
        let p = parms.filter(|p| p.len() >= 44).ok_or_else(|| err("no struct tc_htb_opt"))?;
        let r = RateSpec::parse(&p[0..12]).ok_or_else(|| err("short rate"))?;
        let c = RateSpec::parse(&p[12..24]).ok_or_else(|| err("short ceil"))?;
        let word = |i: usize| u32::from_ne_bytes(p[24 + 4 * i..28 + 4 * i].try_into().unwrap());
        let rate = rate64.unwrap_or(r.rate as u64);
        let ceil = ceil64.unwrap_or(c.rate as u64);
        let mtu = if r.cell_log == 3 { HTB_DEFAULT_MTU } else { 255 << r.cell_log };
        Ok(HtbClassOpts {
            rate: rate * 8,
            ceil: ceil * 8,
            burst: bucket(rate, word(0)),
            cburst: bucket(ceil, word(1)),
            burst_auto: false,
            cburst_auto: false,
            prio: word(4),
            quantum: Some(word(2)).filter(|&q| q != 0),
            mtu,
            mpu: r.mpu as u32,
            overhead: r.overhead as i32,
            linklayer: r.linklayer,
        })
    }

    fn label(h: &HtbClassOpts) -> Vec<String> {
        vec![
            format!("rate {} ceil {}", rate(h.rate), rate(h.ceil)),
            format!("burst {}b prio {}", h.burst, h.prio),
        ]
    }

    fn rates(h: &HtbClassOpts) -> (f64, f64) {
        (h.rate as f64, h.ceil.max(h.rate) as f64)
    }
}
