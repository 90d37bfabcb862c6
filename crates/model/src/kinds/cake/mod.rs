//! The `cake` qdisc in tc's language: iproute2 6.1's grammar (`q_cake.c`: keywords, presets and
//! which attributes tc sends), the kernel's `cake_change` (attributes not sent keep their value),
//! its `cake_dump` as `tc qdisc show` prints it, and the `-s` statistics table: [`Cake`], a
//! registry kind (the kernel's `sch_cake.c`; the algorithm is `sluice_core::cake`).

use super::{block_at, BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::helpers::*;
use crate::json::J;
use crate::model::{is_false, Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, u64_of, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::cake::{AckFilter, AtmMode, CakeConfig, CakeStats, FlowMode, TinMode};
use sluice_core::units::{format_rate, format_size, format_time, parse_rate, parse_size, parse_time};
use sluice_core::{Handle, Qdisc, Rate, Span};
use std::fmt::Write;

/// CAKE options: the attributes tc sends (`TCA_CAKE_*`), each `None` when not sent. The kernel
/// keeps what was sent before for those not sent again (`cake_change`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CakeOpts {
    /// Shaped rate, bytes/s (`Some(0)`: `unlimited`).
    pub bandwidth: Option<u64>,
    /// `autorate-ingress`.
    pub autorate: Option<bool>,
    /// Diffserv mode.
    pub diffserv: Option<sluice_core::cake::TinMode>,
    /// Isolation mode.
    pub flow_mode: Option<sluice_core::cake::FlowMode>,
    /// Cell framing.
    pub atm: Option<sluice_core::cake::AtmMode>,
    /// Per-packet overhead, bytes.
    pub overhead: Option<i32>,
    /// `TCA_CAKE_RAW` sent (`raw`): overhead compensation off.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw: bool,
    /// Minimum packet size, bytes.
    pub mpu: Option<u32>,
    /// `rtt`, µs.
    pub rtt: Option<u32>,
    /// AQM target, µs (tc derives it from `rtt`).
    pub target: Option<u32>,
    /// `memlimit`, bytes.
    pub memlimit: Option<u32>,
    /// `fwmark` mask.
    pub fwmark: Option<u32>,
    /// `nat`/`nonat`.
    pub nat: Option<bool>,
    /// `wash`/`nowash`.
    pub wash: Option<bool>,
    /// `split-gso`/`no-split-gso`.
    pub split_gso: Option<bool>,
    /// `ingress`/`egress`.
    pub ingress: Option<bool>,
    /// ACK filter mode.
    pub ack_filter: Option<sluice_core::cake::AckFilter>,
}

/// The kind.
pub struct Cake;

impl QdiscKind for Cake {
    const NAME: &'static str = "cake";
    type Opts = CakeOpts;

    fn parse(cur: &mut Cur) -> Result<CakeOpts, TcError> {
        parse(cur)
    }

    fn args(o: &CakeOpts) -> String {
        export_args(o)
    }

    fn show(o: &CakeOpts, _dev: &Device, _d: bool) -> String {
        options(o)
    }

    /// `cake_print_opt` in JSON (the xstats' per-tin tables are not printed in JSON by Sluice).
    fn json(o: &CakeOpts, dev: &Device, _d: bool) -> J {
        let c = config(o, dev.psched_mtu());
        let mut j = J::obj();
        if c.rate != 0 {
            j.put("bandwidth", c.rate);
        } else {
            j.put("bandwidth", "unlimited");
        }
        if c.autorate {
            j.put("autorate", "autorate-ingress");
        }
        j.put("diffserv", c.tin_mode.as_str()).put("flowmode", c.flow_mode.as_str());
        j.put("nat", c.nat).put("wash", c.wash).put("ingress", c.ingress);
        j.put(
            "ack-filter",
            match c.ack_filter {
                AckFilter::Aggressive => "aggressive",
                AckFilter::Filter => "enabled",
                AckFilter::None => "disabled",
            },
        );
        let raw = !c.overhead_flag;
        j.put("split_gso", c.split_gso).put("rtt", c.interval_us).put("raw", raw);
        match c.atm {
            AtmMode::Atm => {
                j.put("atm", "atm");
            }
            AtmMode::Ptm => {
                j.put("atm", "ptm");
            }
            AtmMode::Noatm if !raw => {
                j.put("atm", "noatm");
            }
            AtmMode::Noatm => {}
        }
        j.put("overhead", c.overhead);
        if c.mpu != 0 {
            j.put("mpu", c.mpu);
        }
        if c.memlimit != 0 {
            j.put("memlimit", c.memlimit);
        }
        j.put("fwmark", if c.fwmark == 0 { "0".to_string() } else { format!("{:#x}", c.fwmark) });
        j
    }

    fn xstats_text(o: &CakeOpts, dev: &Device) -> String {
        xstats(&CakeStats::idle(&config(o, dev.psched_mtu())))
    }

    /// The one check of CAKE's options, whatever wrote them (tc, a state file, the TOML form):
    /// tc's `overhead N` takes -64 to 256 and each framing keyword adds to it (`overhead 256
    /// pppoe-vcmux` is 288, which tc sends and the kernel takes); the kernel keeps the sum in
    /// 16 bits.
    fn change(_dev: &Device, n: CakeOpts, old: Option<&CakeOpts>) -> Result<CakeOpts, TcError> {
        if let Some(oh) = n.overhead.filter(|oh| !OVERHEAD_KEPT.contains(oh)) {
            return Err(TcError::usage(
                format!(
                    "Illegal \"overhead\" {oh}: CAKE keeps the per-packet overhead in 16 bits ({} to {}; \
                     tc's `overhead N` takes -64 to 256 and framing keywords add to it)",
                    OVERHEAD_KEPT.start(),
                    OVERHEAD_KEPT.end()
                ),
                None,
            ));
        }
        Ok(merge(&n, old))
    }

    /// A nest with the attributes tc sends (see [`put_attrs`]).
    fn encode(o: &CakeOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        put_attrs(o, out);
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<CakeOpts, DecodeError> {
        let mut o = CakeOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let short = || DecodeError::new("cake", format!("attribute {ty} is short"));
            if ty == attr::BASE_RATE64 {
                o.bandwidth = Some(u64_of(p).ok_or_else(short)?);
                continue;
            }
            let v = u32_of(p).ok_or_else(short)?;
            let bad = || DecodeError::new("cake", format!("attribute {ty}: no mode {v}"));
            match ty {
                attr::DIFFSERV_MODE => o.diffserv = Some(TinMode::from_u32(v).ok_or_else(bad)?),
                attr::ATM => o.atm = Some(AtmMode::from_u32(v).ok_or_else(bad)?),
                attr::FLOW_MODE => o.flow_mode = Some(FlowMode::from_u32(v).ok_or_else(bad)?),
                attr::OVERHEAD => o.overhead = Some(v as i32),
                attr::RAW => o.raw = true,
                attr::MPU => o.mpu = Some(v),
                attr::RTT => o.rtt = Some(v),
                attr::TARGET => o.target = Some(v),
                attr::AUTORATE => o.autorate = Some(v != 0),
                attr::MEMORY => o.memlimit = Some(v),
                attr::FWMARK => o.fwmark = Some(v),
                attr::NAT => o.nat = Some(v != 0),
                attr::WASH => o.wash = Some(v != 0),
                attr::SPLIT_GSO => o.split_gso = Some(v != 0),
                attr::INGRESS => o.ingress = Some(v != 0),
                attr::ACK_FILTER => o.ack_filter = Some(AckFilter::from_u32(v).ok_or_else(bad)?),
                _ => {}
            }
        }
        Ok(o)
    }

    const CLASS_OPS: bool = true;

    /// Filters go on the qdisc only.
    fn filter_block(_o: &CakeOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("Class doesn't support blocks")))
    }

    fn build(o: &CakeOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Ok(Box::new(sluice_core::cake::Cake::new(config(o, cx.dev.psched_mtu()), q.handle.major())))
    }
}

const USAGE: &str = "Usage: ... cake [ bandwidth RATE | unlimited* | autorate-ingress ]\n                [ rtt TIME | datacentre | lan | metro | regional |\n                  internet* | oceanic | satellite | interplanetary ]\n                [ besteffort | diffserv8 | diffserv4 | diffserv3* ]\n                [ flowblind | srchost | dsthost | hosts | flows |\n                  dual-srchost | dual-dsthost | triple-isolate* ]\n                [ nat | nonat* ]\n                [ wash | nowash* ]\n                [ split-gso* | no-split-gso ]\n                [ ack-filter | ack-filter-aggressive | no-ack-filter* ]\n                [ memlimit LIMIT ]\n                [ fwmark MASK ]\n                [ ptm | atm | noatm* ] [ overhead N | conservative | raw* ]\n                [ mpu N ] [ ingress | egress* ]\n                (* marks defaults)";

/// RTT presets: (name, target µs, interval µs).
const PRESETS: [(&str, u32, u32); 8] = [
    ("datacentre", 5, 100),
    ("lan", 50, 1000),
    ("metro", 500, 10000),
    ("regional", 1500, 30000),
    ("internet", 5000, 100000),
    ("oceanic", 15000, 300000),
    ("satellite", 50000, 1000000),
    ("interplanetary", 50000000, 1000000000),
];

/// The overheads CAKE keeps (`rate_overhead` is 16 bits; tc writes none below -64).
pub const OVERHEAD_KEPT: std::ops::RangeInclusive<i32> = -64..=i16::MAX as i32;

/// Framing presets that add to the overhead: (name, cell mode or None to keep, bytes).
const FRAMING: [(&str, Option<AtmMode>, i32); 11] = [
    ("ipoa-vcmux", Some(AtmMode::Atm), 8),
    ("ipoa-llcsnap", Some(AtmMode::Atm), 16),
    ("bridged-vcmux", Some(AtmMode::Atm), 24),
    ("bridged-llcsnap", Some(AtmMode::Atm), 32),
    ("pppoa-vcmux", Some(AtmMode::Atm), 10),
    ("pppoa-llc", Some(AtmMode::Atm), 14),
    ("pppoe-vcmux", Some(AtmMode::Atm), 32),
    ("pppoe-llcsnap", Some(AtmMode::Atm), 40),
    ("pppoe-ptm", Some(AtmMode::Ptm), 30),
    ("bridged-ptm", Some(AtmMode::Ptm), 22),
    ("ether-vlan", None, 4),
];

/// `cake_parse_opt`: the attributes tc sends.
pub fn parse(cur: &mut Cur) -> Result<CakeOpts, TcError> {
    let mut o = CakeOpts::default();
    let mut preset: Option<&str> = None;
    let (mut overhead, mut overhead_set, mut mpu) = (0i32, false, 0u32);
    let (mut interval, mut target) = (0u32, 0u32);
    let (mut bandwidth, mut unlimited) = (0u64, false);
    let (mut memlimit, mut fwmark) = (0u32, 0u32);
    while let Some((at, w)) = cur.next_word() {
        match w {
            "bandwidth" => {
                let (i, v) = cur.value()?;
                let r = parse_rate(v).map_err(|_| illegal("bandwidth", i, None))?;
                bandwidth = r.bps() / 8;
                unlimited = false;
                o.autorate = Some(false);
            }
            "unlimited" => {
                bandwidth = 0;
                unlimited = true;
                o.autorate = Some(false);
            }
            "autorate-ingress" => o.autorate = Some(true),
            "rtt" => {
                let (i, v) = cur.value()?;
                let t = parse_time(v).map_err(|_| illegal("rtt", i, None))?;
                interval = u32::try_from(t.as_micros()).map_err(|_| illegal("rtt", i, None))?;
                target = (interval / 20).max(1);
            }
            w if PRESETS.iter().any(|p| p.0 == w) => {
                if let Some(prev) = preset {
                    return Err(TcError::duparg(w, prev, at));
                }
                let p = PRESETS.iter().find(|p| p.0 == w).copied().unwrap_or(PRESETS[4]);
                preset = Some(p.0);
                target = p.1;
                interval = p.2;
            }
            "besteffort" => o.diffserv = Some(TinMode::Besteffort),
            "precedence" => o.diffserv = Some(TinMode::Precedence),
            "diffserv8" => o.diffserv = Some(TinMode::Diffserv8),
            "diffserv4" | "diffserv" => o.diffserv = Some(TinMode::Diffserv4),
            "diffserv3" => o.diffserv = Some(TinMode::Diffserv3),
            "nowash" => o.wash = Some(false),
            "wash" => o.wash = Some(true),
            "split-gso" => o.split_gso = Some(true),
            "no-split-gso" => o.split_gso = Some(false),
            w if FlowMode::ALL.iter().any(|m| m.as_str() == w) => {
                o.flow_mode = FlowMode::ALL.iter().copied().find(|m| m.as_str() == w);
            }
            "nat" => o.nat = Some(true),
            "nonat" => o.nat = Some(false),
            "ptm" => o.atm = Some(AtmMode::Ptm),
            "atm" => o.atm = Some(AtmMode::Atm),
            "noatm" => o.atm = Some(AtmMode::Noatm),
            "raw" => {
                o.atm = Some(AtmMode::Noatm);
                overhead = 0;
                overhead_set = true;
                o.raw = true;
            }
            "conservative" => {
                o.atm = Some(AtmMode::Atm);
                overhead = 48;
                overhead_set = true;
            }
            w if FRAMING.iter().any(|f| f.0 == w) => {
                let f = FRAMING.iter().find(|f| f.0 == w).copied().unwrap_or(FRAMING[0]);
                if let Some(m) = f.1 {
                    o.atm = Some(m);
                }
                overhead += f.2;
                overhead_set = true;
            }
            "via-ethernet" => {}
            "ethernet" => {
                overhead += 38;
                overhead_set = true;
                mpu = 84;
            }
            "docsis" => {
                o.atm = Some(AtmMode::Noatm);
                overhead += 18;
                overhead_set = true;
                mpu = 64;
            }
            "overhead" => {
                let (i, v) = cur.value()?;
                overhead = v.parse::<i32>().ok().filter(|o| (-64..=256).contains(o)).ok_or_else(|| {
                    TcError::usage("Illegal \"overhead\", valid range is -64 to 256\\n", Some(i))
                })?;
                overhead_set = true;
            }
            "mpu" => {
                let (i, v) = cur.value()?;
                mpu =
                    v.parse::<u32>().ok().filter(|m| *m <= 256).ok_or_else(|| {
                        TcError::usage("Illegal \"mpu\", valid range is 0 to 256\\n", Some(i))
                    })?;
            }
            "ingress" => o.ingress = Some(true),
            "egress" => o.ingress = Some(false),
            "no-ack-filter" => o.ack_filter = Some(AckFilter::None),
            "ack-filter" => o.ack_filter = Some(AckFilter::Filter),
            "ack-filter-aggressive" => o.ack_filter = Some(AckFilter::Aggressive),
            "memlimit" => {
                let (i, v) = cur.value()?;
                memlimit = parse_size(v).ok().and_then(|s| u32::try_from(s).ok()).ok_or_else(|| {
                    TcError::usage(format!("Illegal value for \"memlimit\": \"{v}\""), Some(i))
                })?;
            }
            "fwmark" => {
                let (i, v) = cur.value()?;
                fwmark = get_u32(v).ok_or_else(|| {
                    TcError::usage(format!("Illegal value for \"fwmark\": \"{v}\""), Some(i))
                })?;
            }
            "help" => return Err(TcError::usage(USAGE, Some(at))),
            _ => return Err(what_is(w, at, USAGE)),
        }
    }
    if bandwidth != 0 || unlimited {
        o.bandwidth = Some(bandwidth);
    }
    if overhead_set {
        o.overhead = Some(overhead);
    }
    o.mpu = (mpu > 0).then_some(mpu);
    o.rtt = (interval > 0).then_some(interval);
    o.target = (target > 0).then_some(target);
    o.memlimit = (memlimit > 0).then_some(memlimit);
    o.fwmark = (fwmark > 0).then_some(fwmark);
    Ok(o)
}

/// `cake_change` on top of the options in force (`old`; `None` on creation).
pub fn merge(new: &CakeOpts, old: Option<&CakeOpts>) -> CakeOpts {
    let Some(old) = old else { return new.clone() };
    CakeOpts {
        bandwidth: new.bandwidth.or(old.bandwidth),
        autorate: new.autorate.or(old.autorate),
        diffserv: new.diffserv.or(old.diffserv),
        flow_mode: new.flow_mode.or(old.flow_mode),
        atm: new.atm.or(old.atm),
        overhead: new.overhead.or(old.overhead),
        // RAW is applied after OVERHEAD: sent, compensation goes; an overhead alone brings it back.
        raw: new.raw || (new.overhead.is_none() && old.raw),
        mpu: new.mpu.or(old.mpu),
        rtt: new.rtt.or(old.rtt),
        target: new.target.or(old.target),
        memlimit: new.memlimit.or(old.memlimit),
        fwmark: new.fwmark.or(old.fwmark),
        nat: new.nat.or(old.nat),
        wash: new.wash.or(old.wash),
        split_gso: new.split_gso.or(old.split_gso),
        ingress: new.ingress.or(old.ingress),
        ack_filter: new.ack_filter.or(old.ack_filter),
    }
}

/// The kernel's state for these options on a device whose `psched_mtu` is `mtu`.
pub fn config(o: &CakeOpts, mtu: u32) -> CakeConfig {
    let d = CakeConfig::default();
    CakeConfig {
        rate: o.bandwidth.unwrap_or(d.rate),
        tin_mode: o.diffserv.unwrap_or(d.tin_mode),
        flow_mode: o.flow_mode.unwrap_or(d.flow_mode),
        nat: o.nat.unwrap_or(false),
        wash: o.wash.unwrap_or(false),
        ingress: o.ingress.unwrap_or(false),
        autorate: o.autorate.unwrap_or(false),
        ack_filter: o.ack_filter.unwrap_or_default(),
        atm: o.atm.unwrap_or_default(),
        overhead: o.overhead.unwrap_or(0),
        overhead_flag: o.overhead.is_some() && !o.raw,
        mpu: o.mpu.unwrap_or(0),
        interval_us: o.rtt.unwrap_or(d.interval_us).max(1),
        target_us: o.target.unwrap_or(d.target_us).max(1),
        memlimit: o.memlimit.unwrap_or(0),
        split_gso: o.split_gso.unwrap_or(true),
        fwmark: o.fwmark.unwrap_or(0),
        mtu,
    }
}

/// The options line (`cake_print_opt` of what `cake_dump` sends), after `refcnt N `.
pub fn options(o: &CakeOpts) -> String {
    let c = config(o, 1514);
    let mut s = String::new();
    if c.rate != 0 {
        let _ = write!(s, "bandwidth {} ", format_rate(Rate::from_bps(c.rate.saturating_mul(8))));
    } else {
        s.push_str("bandwidth unlimited ");
    }
    if c.autorate {
        s.push_str("autorate-ingress ");
    }
    let _ = write!(s, "{} {} ", c.tin_mode.as_str(), c.flow_mode.as_str());
    s.push_str(if c.nat { "nat " } else { "nonat " });
    s.push_str(if c.wash { "wash " } else { "nowash " });
    if c.ingress {
        s.push_str("ingress ");
    }
    s.push_str(match c.ack_filter {
        AckFilter::Aggressive => "ack-filter-aggressive ",
        AckFilter::Filter => "ack-filter ",
        AckFilter::None => "no-ack-filter ",
    });
    s.push_str(if c.split_gso { "split-gso " } else { "no-split-gso " });
    let _ = write!(s, "rtt {} ", format_time(Span::from_micros(c.interval_us as u64)));
    let raw = !c.overhead_flag;
    if raw {
        s.push_str("raw ");
    }
    match c.atm {
        AtmMode::Atm => s.push_str("atm "),
        AtmMode::Ptm => s.push_str("ptm "),
        AtmMode::Noatm if !raw => s.push_str("noatm "),
        AtmMode::Noatm => {}
    }
    let _ = write!(s, "overhead {} ", c.overhead);
    if c.mpu != 0 {
        let _ = write!(s, "mpu {} ", c.mpu);
    }
    if c.memlimit != 0 {
        let _ = write!(s, "memlimit {} ", format_size(c.memlimit as u64));
    }
    if c.fwmark != 0 {
        let _ = write!(s, "fwmark {:#x} ", c.fwmark);
    }
    s.truncate(s.trim_end().len());
    s
}

/// `cake_print_xstats`: the lines after the qdisc's counters.
pub fn xstats(st: &CakeStats) -> String {
    let mut s = String::new();
    let us = |v: u32| format_time(Span::from_micros(v as u64));
    let _ = writeln!(
        s,
        " memory used: {} of {}",
        format_size(st.memory_used as u64),
        format_size(st.memory_limit as u64)
    );
    let _ = writeln!(
        s,
        " capacity estimate: {}",
        format_rate(Rate::from_bps(st.capacity_estimate.saturating_mul(8)))
    );
    let _ = writeln!(s, " min/max network layer size: {:>12} /{:>8}", st.min_netlen, st.max_netlen);
    let _ = writeln!(s, " min/max overhead-adjusted size: {:>8} /{:>8}", st.min_adjlen, st.max_adjlen);
    let _ = writeln!(s, " average network hdr offset: {:>12}\n", st.avg_netoff);
    let n = st.tins.len();
    match n {
        3 => s.push_str("                   Bulk  Best Effort        Voice\n"),
        4 => s.push_str("                   Bulk  Best Effort        Video        Voice\n"),
        _ => {
            s.push_str("          ");
            for i in 0..n {
                let _ = write!(s, "        Tin {i}");
            }
            s.push('\n');
        }
    }
    let mut row = |name: &str, f: &dyn Fn(&sluice_core::cake::TinStats) -> String| {
        s.push_str(name);
        for t in &st.tins {
            let _ = write!(s, " {:>12}", f(t));
        }
        s.push('\n');
    };
    row("  thresh  ", &|t| format_rate(Rate::from_bps(t.threshold_rate.saturating_mul(8))));
    row("  target  ", &|t| us(t.target_us));
    row("  interval", &|t| us(t.interval_us));
    row("  pk_delay", &|t| us(t.peak_delay_us));
    row("  av_delay", &|t| us(t.avg_delay_us));
    row("  sp_delay", &|t| us(t.base_delay_us));
    row("  backlog ", &|t| format_size(t.backlog_bytes as u64));
    row("  pkts    ", &|t| t.sent_packets.to_string());
    row("  bytes   ", &|t| t.sent_bytes.to_string());
    row("  way_inds", &|t| t.way_indirect_hits.to_string());
    row("  way_miss", &|t| t.way_misses.to_string());
    row("  way_cols", &|t| t.way_collisions.to_string());
    row("  drops   ", &|t| t.drops.to_string());
    row("  marks   ", &|t| t.ecn_marked.to_string());
    row("  ack_drop", &|t| t.ack_drops.to_string());
    row("  sp_flows", &|t| t.sparse_flows.to_string());
    row("  bk_flows", &|t| t.bulk_flows.to_string());
    row("  un_flows", &|t| t.unresponsive_flows.to_string());
    row("  max_len ", &|t| t.max_skblen.to_string());
    row("  quantum ", &|t| t.flow_quantum.to_string());
    s
}

/// The options in tc syntax (after `cake`), parsing back to the same attributes.
pub fn export_args(o: &CakeOpts) -> String {
    let mut w: Vec<String> = Vec::new();
    match o.bandwidth {
        Some(0) => w.push("unlimited".into()),
        Some(b) => w.push(format!("bandwidth {}bit", b.saturating_mul(8))),
        None => {}
    }
    if o.autorate == Some(true) {
        w.push("autorate-ingress".into());
    }
    if let Some(r) = o.rtt {
        w.push(format!("rtt {r}us"));
    }
    if let Some(d) = o.diffserv {
        w.push(d.as_str().into());
    }
    if let Some(f) = o.flow_mode {
        w.push(f.as_str().into());
    }
    for (v, on, off) in [
        (o.nat, "nat", "nonat"),
        (o.wash, "wash", "nowash"),
        (o.split_gso, "split-gso", "no-split-gso"),
        (o.ingress, "ingress", "egress"),
    ] {
        if let Some(b) = v {
            w.push(if b { on } else { off }.into());
        }
    }
    if let Some(a) = o.ack_filter {
        w.push(["no-ack-filter", "ack-filter", "ack-filter-aggressive"][a as usize].into());
    }
    if let Some(m) = o.memlimit {
        w.push(format!("memlimit {m}"));
    }
    if let Some(f) = o.fwmark {
        w.push(format!("fwmark {f:#x}"));
    }
    if o.raw {
        w.push("raw".into());
    }
    if let Some(oh) = o.overhead.filter(|&oh| !(o.raw && oh == 0)) {
        // Above the 256 `overhead N` takes, `ether-vlan` adds 4 each without touching the cell
        // mode (tc reads `overhead 256 ether-vlan ...` back to the same sum).
        let vlans = ((oh - 256).max(0) + 3) / 4;
        w.push(format!("overhead {}", oh - 4 * vlans));
        w.extend((0..vlans).map(|_| "ether-vlan".to_string()));
    }
    if let Some(a) = o.atm {
        w.push(["noatm", "atm", "ptm"][a as usize].into());
    }
    if let Some(m) = o.mpu {
        w.push(format!("mpu {m}"));
    }
    w.iter().map(|x| format!(" {x}")).collect()
}

/// `TCA_CAKE_*` attribute numbers (`linux/pkt_sched.h`).
pub mod attr {
    #![allow(missing_docs)]
    pub const BASE_RATE64: u16 = 2;
    pub const DIFFSERV_MODE: u16 = 3;
    pub const ATM: u16 = 4;
    pub const FLOW_MODE: u16 = 5;
    pub const OVERHEAD: u16 = 6;
    pub const RTT: u16 = 7;
    pub const TARGET: u16 = 8;
    pub const AUTORATE: u16 = 9;
    pub const MEMORY: u16 = 10;
    pub const NAT: u16 = 11;
    pub const RAW: u16 = 12;
    pub const WASH: u16 = 13;
    pub const MPU: u16 = 14;
    pub const INGRESS: u16 = 15;
    pub const ACK_FILTER: u16 = 16;
    pub const SPLIT_GSO: u16 = 17;
    pub const FWMARK: u16 = 18;
}

/// The attributes inside `TCA_OPTIONS`, in the order tc 6.1 writes them, each only when tc
/// would send it (the options as parsed; after a merge, everything sent so far).
fn put_attrs(o: &CakeOpts, out: &mut Attrs) {
    if let Some(b) = o.bandwidth {
        out.put_u64(attr::BASE_RATE64, b);
    }
    let modes = [
        (attr::DIFFSERV_MODE, o.diffserv.map(|d| d as u32)),
        (attr::ATM, o.atm.map(|a| a as u32)),
        (attr::FLOW_MODE, o.flow_mode.map(|f| f as u32)),
        (attr::OVERHEAD, o.overhead.map(|oh| oh as u32)),
    ];
    for (ty, v) in modes {
        if let Some(v) = v {
            out.put_u32(ty, v);
        }
    }
    if o.raw {
        out.put_u32(attr::RAW, 0);
    }
    let rest = [
        (attr::MPU, o.mpu),
        (attr::RTT, o.rtt),
        (attr::TARGET, o.target),
        (attr::AUTORATE, o.autorate.map(u32::from)),
        (attr::MEMORY, o.memlimit),
        (attr::FWMARK, o.fwmark),
        (attr::NAT, o.nat.map(u32::from)),
        (attr::WASH, o.wash.map(u32::from)),
        (attr::SPLIT_GSO, o.split_gso.map(u32::from)),
        (attr::INGRESS, o.ingress.map(u32::from)),
        (attr::ACK_FILTER, o.ack_filter.map(|a| a as u32)),
    ];
    for (ty, v) in rest {
        if let Some(v) = v {
            out.put_u32(ty, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::cake::CakeStats;

    fn p(s: &str) -> Result<CakeOpts, TcError> {
        let argv: Vec<String> = s.split_whitespace().map(str::to_string).collect();
        let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
        parse(&mut cur)
    }

    #[test]
    fn defaults_print_as_the_kernel_dumps_them() {
        assert_eq!(
            options(&p("").unwrap()),
            "bandwidth unlimited diffserv3 triple-isolate nonat nowash no-ack-filter split-gso rtt 100ms raw overhead 0"
        );
        assert_eq!(
            options(&p("bandwidth 20Mbit diffserv4 dual-srchost nat ethernet").unwrap()),
            "bandwidth 20Mbit autorate-ingress diffserv4 dual-srchost nat nowash no-ack-filter split-gso rtt 100ms noatm overhead 38 mpu 84"
                .replace("autorate-ingress ", "")
        );
        assert_eq!(
            options(&p("pppoe-ptm ether-vlan lan fwmark 0xf0 memlimit 1M").unwrap()),
            "bandwidth unlimited diffserv3 triple-isolate nonat nowash no-ack-filter split-gso rtt 1ms ptm overhead 34 memlimit 1Mb fwmark 0xf0"
        );
    }

    #[test]
    fn presets_and_errors() {
        let o = p("satellite").unwrap();
        assert_eq!((o.rtt, o.target), (Some(1_000_000), Some(50_000)));
        let o = p("rtt 50ms").unwrap();
        assert_eq!((o.rtt, o.target), (Some(50_000), Some(2_500)));
        assert_eq!(
            p("lan metro").unwrap_err().message,
            "Error: duplicate \"metro\": \"lan\" is the second value."
        );
        assert!(p("overhead 300").unwrap_err().message.starts_with("Illegal \"overhead\""));
        assert!(p("mpu -1").is_err());
        assert!(p("bogus").unwrap_err().message.starts_with("What is \"bogus\"?"));
        // bandwidth 0 is not sent at all.
        assert_eq!(p("bandwidth 0").unwrap().bandwidth, None);
        assert_eq!(p("unlimited").unwrap().bandwidth, Some(0));
    }

    #[test]
    fn change_keeps_what_was_not_sent_and_raw_undoes_overhead() {
        let a = p("overhead 128 mpu 256").unwrap();
        let b = merge(&p("mpu 128").unwrap(), Some(&a));
        assert_eq!((b.overhead, b.mpu), (Some(128), Some(128)));
        let c = merge(&p("raw").unwrap(), Some(&b));
        assert!(options(&c).contains("raw overhead 0"));
        let d = merge(&p("overhead 10").unwrap(), Some(&c));
        assert!(options(&d).contains("noatm overhead 10"), "{}", options(&d));
    }

    #[test]
    fn export_parses_back() {
        for cmd in [
            "",
            "bandwidth 20Mbit diffserv4 dual-srchost nat ethernet",
            "unlimited raw overhead 12 atm lan ingress ack-filter-aggressive memlimit 123456 fwmark 0xff",
            "autorate-ingress conservative wash no-split-gso precedence flowblind egress no-ack-filter",
            "raw",
            "docsis nonat nowash",
            // Framing keywords add to `overhead N`: 288 here, beyond what `overhead N` takes.
            "overhead 256 pppoe-vcmux",
            "overhead 255 bridged-ptm ether-vlan",
            "overhead -64 ether-vlan",
        ] {
            let o = p(cmd).unwrap();
            let back = p(&export_args(&o)).unwrap();
            assert_eq!(back, o, "{cmd} -> {}", export_args(&o));
        }
    }

    #[test]
    fn the_sum_of_overhead_and_framing_is_kept_and_checked_in_one_place() {
        let dev = Device::new("e", crate::model::DevKind::Dummy, 1);
        let o = p("overhead 256 pppoe-vcmux").unwrap();
        assert_eq!((o.overhead, o.atm), (Some(288), Some(AtmMode::Atm)));
        assert_eq!(Cake::change(&dev, o.clone(), None).unwrap(), o);
        assert!(export_args(&o).contains("overhead 256 ether-vlan"), "{}", export_args(&o));
        let top = CakeOpts { overhead: Some(i16::MAX as i32), ..Default::default() };
        assert_eq!(p(&export_args(&top)).unwrap(), top);
        for bad in [i16::MAX as i32 + 1, -65, i32::MIN] {
            let e =
                Cake::change(&dev, CakeOpts { overhead: Some(bad), ..Default::default() }, None).unwrap_err();
            assert!(
                e.message.contains("Illegal \"overhead\"") && e.message.contains(&bad.to_string()),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn idle_statistics_table() {
        let o = p("bandwidth 100Mbit diffserv4").unwrap();
        let x = xstats(&CakeStats::idle(&config(&o, 1514)));
        let lines: Vec<&str> = x.lines().collect();
        assert_eq!(lines[0], " memory used: 0b of 5000000b");
        assert_eq!(lines[1], " capacity estimate: 100Mbit");
        assert_eq!(lines[2], " min/max network layer size:        65535 /       0");
        assert_eq!(lines[6], "                   Bulk  Best Effort        Video        Voice");
        assert_eq!(lines[7], "  thresh       6250Kbit      100Mbit       50Mbit       25Mbit");
        assert_eq!(lines[8], format!("  target  {}", "          5ms".repeat(4)));
        assert_eq!(lines[26], "  quantum           300         1514         1514          762");
        assert_eq!(lines.len(), 27);
    }
}
