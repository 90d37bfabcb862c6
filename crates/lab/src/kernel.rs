//! The kernel backend: program a [`Tree`] into Linux tc over rtnetlink, print the equivalent tc
//! commands, read the result back and compare it with the model.
//!
//! ## Burst rule (shared with `sluice lint`)
//! Bursts the configuration leaves out are sized by [`sluice_config::burst::recommended_burst`]
//! with its 1 ms wake-up budget, the same rule `sluice lint` suggests: `max(mtu, rate × 1 ms)`
//! rounded up to whole KiB (see that module for why 1 ms). tc's own default is just the mtu
//! (1600 b on hrtimer kernels), which measured −19 % at 10 Gbit (DESIGN.md).
//! [`BurstPolicy::TcDefault`] keeps tc's rule for comparisons. An explicit burst is always kept
//! as written.

use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TcObject};
use crate::tree::{tc_handle, ClassSpec, Parent, QdiscKind, QdiscSpec, Tree};
use crate::LabError;
use sluice_config::burst::{auto_burst, BurstPolicy};
use sluice_core::units::{format_rate, format_size};
use sluice_core::{Handle, Rate};

/// Kernel psched ticks per microsecond (`/proc/net/psched`: 1000 ns per µs over 64 ns per tick).
const TICKS_PER_USEC: f64 = 1000.0 / 64.0;

const TC_LINKLAYER_ETHERNET: u8 = 1;

/// tc's transmit time of `size` bytes at `bytes_per_sec`, in psched ticks (truncated like tc).
pub fn xmittime_ticks(bytes_per_sec: u64, size: u64) -> u32 {
    if bytes_per_sec == 0 {
        return u32::MAX;
    }
    let t = 1e6 * size as f64 / bytes_per_sec as f64 * TICKS_PER_USEC;
    t.min(u32::MAX as f64) as u32
}

/// The bytes a bucket of `ticks` holds at `bytes_per_sec` (inverse of [`xmittime_ticks`]).
pub fn ticks_to_bytes(bytes_per_sec: u64, ticks: u32) -> u64 {
    (ticks as f64 / TICKS_PER_USEC / 1e6 * bytes_per_sec as f64).round() as u64
}

/// A `struct tc_ratespec` and its 256-slot legacy rate table (only used by the kernel to guess the
/// link layer, but tc sends it and old kernels need it).
fn ratespec(rate: Rate, mtu: u32, overhead: i32, mpu: u32) -> ([u8; 12], Vec<u8>) {
    let bps = rate.bytes_per_sec();
    let mtu = if mtu == 0 { 2047 } else { mtu };
    let mut cell_log = 0u8;
    while (mtu >> cell_log) > 255 {
        cell_log += 1;
    }
    let mut table = Vec::with_capacity(1024);
    for i in 0..256u64 {
        let sz = ((i + 1) << cell_log).max(mpu as u64);
        table.extend_from_slice(&xmittime_ticks(bps, sz).to_ne_bytes());
    }
    let mut r = [0u8; 12];
    r[0] = cell_log;
    r[1] = TC_LINKLAYER_ETHERNET;
    r[2..4].copy_from_slice(&(overhead.clamp(0, u16::MAX as i32) as u16).to_ne_bytes());
    r[4..6].copy_from_slice(&(-1i16).to_ne_bytes());
    r[6..8].copy_from_slice(&(mpu.min(u16::MAX as u32) as u16).to_ne_bytes());
    r[8..12].copy_from_slice(&(bps.min(u32::MAX as u64) as u32).to_ne_bytes());
    (r, table)
}

/// HTB class with its bursts resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedClass {
    /// The class as configured.
    pub spec: ClassSpec,
    /// Burst bytes used.
    pub burst: u64,
    /// Cburst bytes used.
    pub cburst: u64,
    /// Whether the burst came from the rule rather than the configuration.
    pub burst_auto: bool,
}

/// Resolve bursts for every class.
pub fn resolve_classes(tree: &Tree, policy: BurstPolicy) -> Vec<ResolvedClass> {
    tree.classes
        .iter()
        .map(|c| ResolvedClass {
            burst: c.burst.unwrap_or_else(|| auto_burst(c.rate, c.mtu, policy)),
            cburst: c.cburst.unwrap_or_else(|| auto_burst(c.ceil, c.mtu, policy)),
            burst_auto: c.burst.is_none(),
            spec: c.clone(),
        })
        .collect()
}

mod htb_attr {
    pub const PARMS: u16 = 1;
    pub const INIT: u16 = 2;
    pub const CTAB: u16 = 3;
    pub const RTAB: u16 = 4;
    pub const DIRECT_QLEN: u16 = 5;
    pub const RATE64: u16 = 6;
    pub const CEIL64: u16 = 7;
}

mod tbf_attr {
    pub const PARMS: u16 = 1;
    pub const RTAB: u16 = 2;
    pub const PTAB: u16 = 3;
    pub const RATE64: u16 = 4;
    pub const PRATE64: u16 = 5;
    pub const BURST: u16 = 6;
    pub const PBURST: u16 = 7;
}

/// The netlink request that creates qdisc `q` on `ifindex`.
pub fn qdisc_msg(ifindex: i32, q: &QdiscSpec, replace: bool) -> Msg {
    let fl = flags::REQUEST | flags::ACK | flags::CREATE | if replace { flags::REPLACE } else { flags::EXCL };
    let mut m = Msg::tc(
        rtm::NEWQDISC,
        fl,
        TcMsg { ifindex, handle: tc_handle(q.handle), parent: q.parent.raw(), info: 0 },
    );
    m.attr_str(tca::KIND, q.kind.name());
    match &q.kind {
        QdiscKind::Htb { default, r2q, direct_qlen } => {
            let mut glob = Vec::with_capacity(20);
            for v in [3u32, *r2q, *default, 0, 0] {
                glob.extend_from_slice(&v.to_ne_bytes());
            }
            m.begin_nest(tca::OPTIONS);
            m.attr(htb_attr::INIT, &glob);
            if let Some(d) = direct_qlen {
                m.attr(htb_attr::DIRECT_QLEN, &d.to_ne_bytes());
            }
            m.end_nest();
        }
        QdiscKind::Tbf { rate, burst, limit, peak } => {
            let (r, rtab) = ratespec(*rate, 0, 0, 0);
            let mut opt = Vec::with_capacity(36);
            opt.extend_from_slice(&r);
            let (p, ptab, mtu_ticks) = match peak {
                Some((prate, mtu)) => {
                    let (p, t) = ratespec(*prate, *mtu, 0, 0);
                    (p, Some(t), xmittime_ticks(prate.bytes_per_sec(), *mtu as u64))
                }
                None => ([0u8; 12], None, 0),
            };
            opt.extend_from_slice(&p);
            opt.extend_from_slice(&((*limit).min(u32::MAX as u64) as u32).to_ne_bytes());
            opt.extend_from_slice(&xmittime_ticks(rate.bytes_per_sec(), *burst).to_ne_bytes());
            opt.extend_from_slice(&mtu_ticks.to_ne_bytes());
            m.begin_nest(tca::OPTIONS);
            m.attr(tbf_attr::PARMS, &opt);
            if rate.bytes_per_sec() >= 1 << 32 {
                m.attr(tbf_attr::RATE64, &rate.bytes_per_sec().to_ne_bytes());
            }
            m.attr(tbf_attr::RTAB, &rtab);
            m.attr(tbf_attr::BURST, &((*burst).min(u32::MAX as u64) as u32).to_ne_bytes());
            if let (Some((prate, mtu)), Some(ptab)) = (peak, ptab) {
                if prate.bytes_per_sec() >= 1 << 32 {
                    m.attr(tbf_attr::PRATE64, &prate.bytes_per_sec().to_ne_bytes());
                }
                m.attr(tbf_attr::PTAB, &ptab);
                m.attr(tbf_attr::PBURST, &mtu.to_ne_bytes());
            }
            m.end_nest();
        }
        QdiscKind::Pfifo(Some(l)) | QdiscKind::Bfifo(Some(l)) => {
            m.attr(tca::OPTIONS, &l.to_ne_bytes());
        }
        QdiscKind::Pfifo(None) | QdiscKind::Bfifo(None) | QdiscKind::Other { .. } => {}
    }
    m
}

/// The netlink request that creates HTB class `c` on `ifindex`.
pub fn class_msg(ifindex: i32, c: &ResolvedClass) -> Msg {
    let s = &c.spec;
    let fl = flags::REQUEST | flags::ACK | flags::CREATE | flags::REPLACE;
    let mut m = Msg::tc(
        rtm::NEWTCLASS,
        fl,
        TcMsg { ifindex, handle: tc_handle(s.classid), parent: tc_handle(s.parent), info: 0 },
    );
    m.attr_str(tca::KIND, "htb");
    let (r, rtab) = ratespec(s.rate, s.mtu, s.overhead, s.mpu);
    let (cr, ctab) = ratespec(s.ceil, s.mtu, s.overhead, s.mpu);
    let mut opt = Vec::with_capacity(44);
    opt.extend_from_slice(&r);
    opt.extend_from_slice(&cr);
    for v in [
        xmittime_ticks(s.rate.bytes_per_sec(), c.burst),
        xmittime_ticks(s.ceil.bytes_per_sec(), c.cburst),
        s.quantum.unwrap_or(0),
        0,
        s.prio,
    ] {
        opt.extend_from_slice(&v.to_ne_bytes());
    }
    m.begin_nest(tca::OPTIONS);
    m.attr(htb_attr::PARMS, &opt);
    if s.rate.bytes_per_sec() >= 1 << 32 {
        m.attr(htb_attr::RATE64, &s.rate.bytes_per_sec().to_ne_bytes());
    }
    if s.ceil.bytes_per_sec() >= 1 << 32 {
        m.attr(htb_attr::CEIL64, &s.ceil.bytes_per_sec().to_ne_bytes());
    }
    m.attr(htb_attr::RTAB, &rtab);
    m.attr(htb_attr::CTAB, &ctab);
    m.end_nest();
    m
}

fn handle_str(h: Handle) -> String {
    format!("{:x}:{}", h.major(), if h.minor() == 0 { String::new() } else { format!("{:x}", h.minor()) })
}

fn parent_str(p: Parent) -> String {
    match p {
        Parent::Root => "root".into(),
        Parent::Handle(h) => format!("parent {}", handle_str(h)),
    }
}

/// The tc commands equivalent to what [`apply`] sends (for `--dry-run`).
pub fn tc_commands(dev: &str, tree: &Tree, policy: BurstPolicy) -> Vec<String> {
    let mut out = vec![format!("tc qdisc del dev {dev} root 2>/dev/null")];
    let push_q = |q: &QdiscSpec, out: &mut Vec<String>| {
        let head = format!(
            "tc qdisc replace dev {dev} {} handle {} {}",
            parent_str(q.parent),
            handle_str(q.handle),
            q.kind.name()
        );
        let opts = match &q.kind {
            QdiscKind::Htb { default, r2q, direct_qlen } => {
                let mut s = format!(" default 0x{default:x} r2q {r2q}");
                if let Some(d) = direct_qlen {
                    s += &format!(" direct_qlen {d}");
                }
                s
            }
            QdiscKind::Tbf { rate, burst, limit, peak } => {
                let mut s = format!(" rate {} burst {burst}b limit {limit}b", format_rate(*rate));
                if let Some((p, mtu)) = peak {
                    s += &format!(" peakrate {} mtu {mtu}", format_rate(*p));
                }
                s
            }
            QdiscKind::Pfifo(Some(l)) => format!(" limit {l}"),
            QdiscKind::Bfifo(Some(l)) => format!(" limit {l}b"),
            QdiscKind::Other { args, .. } if !args.is_empty() => format!(" {}", args.join(" ")),
            _ => String::new(),
        };
        out.push(head + &opts);
    };
    for q in tree.qdiscs.iter().filter(|q| q.parent == Parent::Root) {
        push_q(q, &mut out);
    }
    for c in resolve_classes(tree, policy) {
        let s = &c.spec;
        let mut line = format!(
            "tc class replace dev {dev} parent {} classid {} htb rate {} ceil {} burst {}b cburst {}b",
            handle_str(s.parent),
            handle_str(s.classid),
            format_rate(s.rate),
            format_rate(s.ceil),
            c.burst,
            c.cburst
        );
        if s.prio != 0 {
            line += &format!(" prio {}", s.prio);
        }
        if let Some(q) = s.quantum {
            line += &format!(" quantum {q}");
        }
        if s.mtu != crate::tree::HTB_DEFAULT_MTU {
            line += &format!(" mtu {}", s.mtu);
        }
        if s.overhead != 0 {
            line += &format!(" overhead {}", s.overhead);
        }
        if s.mpu != 0 {
            line += &format!(" mpu {}", s.mpu);
        }
        if c.burst_auto {
            line += &format!("   # burst from the jitter rule ({})", format_size(c.burst));
        }
        out.push(line);
    }
    for q in tree.qdiscs.iter().filter(|q| q.parent != Parent::Root) {
        push_q(q, &mut out);
    }
    for f in &tree.filters {
        out.push(format!(
            "# not programmed by sluice apply yet: tc filter add dev {dev} {}",
            f.args.join(" ")
        ));
    }
    out
}

/// What happened to each object during [`apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyReport {
    /// One line per object that the kernel accepted.
    pub applied: Vec<String>,
    /// Objects the kernel refused (kind, handle, the kernel's error).
    pub refused: Vec<String>,
    /// Notes (defaults used, filters not programmed).
    pub notes: Vec<String>,
}

/// Replace `dev`'s root qdisc with `tree`, in the calling thread's namespace.
///
/// Every object is attempted; a refusal (for example a qdisc kind this kernel lacks) is recorded
/// with the kernel's own error in [`ApplyReport::refused`] and makes the overall result an error
/// only when the caller checks `refused`. The objects below a refused one are then refused too.
pub fn apply(dev: &str, tree: &Tree, policy: BurstPolicy) -> Result<ApplyReport, LabError> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    let mut rep = ApplyReport { applied: vec![], refused: vec![], notes: vec![] };
    if tree.root().is_none() {
        return Err(LabError::Config("the configuration has no root qdisc".into()));
    }
    clear_root(&mut nl, ifindex)?;
    let try_req = |nl: &mut Netlink, what: String, mut m: Msg, rep: &mut ApplyReport| match nl.request(&mut m)
    {
        Ok(()) => rep.applied.push(what),
        Err(LabError::Kernel { errno, message, strerror }) => rep.refused.push(format!(
            "{what}: kernel said: {} ({strerror}, errno {errno})",
            if message.is_empty() { "no message".to_string() } else { message }
        )),
        Err(e) => rep.refused.push(format!("{what}: {e}")),
    };
    for q in tree.qdiscs.iter().filter(|q| q.parent == Parent::Root) {
        note_unencoded_options(q, &mut rep.notes);
        try_req(
            &mut nl,
            format!("qdisc {} {}", q.kind.name(), handle_str(q.handle)),
            qdisc_msg(ifindex, q, true),
            &mut rep,
        );
    }
    for c in resolve_classes(tree, policy) {
        let what = format!(
            "class htb {} rate {} ceil {} burst {}b cburst {}b",
            handle_str(c.spec.classid),
            format_rate(c.spec.rate),
            format_rate(c.spec.ceil),
            c.burst,
            c.cburst
        );
        try_req(&mut nl, what, class_msg(ifindex, &c), &mut rep);
    }
    for q in tree.qdiscs.iter().filter(|q| q.parent != Parent::Root) {
        note_unencoded_options(q, &mut rep.notes);
        try_req(
            &mut nl,
            format!("qdisc {} {} {}", q.kind.name(), handle_str(q.handle), parent_str(q.parent)),
            qdisc_msg(ifindex, q, true),
            &mut rep,
        );
    }
    for f in &tree.filters {
        rep.refused
            .push(format!("filter `{}`: the kernel backend does not program filters yet", f.args.join(" ")));
    }
    Ok(rep)
}

/// Notes that options of a kind this backend does not encode are left to the kernel's defaults.
fn note_unencoded_options(q: &QdiscSpec, notes: &mut Vec<String>) {
    if let QdiscKind::Other { args, .. } = &q.kind {
        if !args.is_empty() {
            notes.push(format!(
                "{} options `{}` are not encoded; kernel defaults apply if it accepts the kind",
                q.kind.name(),
                args.join(" ")
            ));
        }
    }
}

/// Delete the root qdisc of `dev` (idempotent).
pub fn clear(dev: &str) -> Result<(), LabError> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    clear_root(&mut nl, ifindex)
}

fn clear_root(nl: &mut Netlink, ifindex: i32) -> Result<(), LabError> {
    let mut m = Msg::tc(
        rtm::DELQDISC,
        flags::REQUEST | flags::ACK,
        TcMsg { ifindex, handle: 0, parent: netlink::TC_H_ROOT, info: 0 },
    );
    match nl.request(&mut m) {
        Ok(()) => Ok(()),
        // ENOENT / EINVAL: nothing to delete (the default qdisc cannot be deleted).
        Err(LabError::Kernel { errno: 2 | 22, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Counters of one qdisc or class (`tc -s`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KStats {
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
    /// Overlimits.
    pub overlimits: u64,
    /// Current backlog bytes.
    pub backlog: u64,
    /// Current queue length.
    pub qlen: u64,
}

/// An object read back from the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KObject {
    /// Qdisc (true) or class (false).
    pub is_qdisc: bool,
    /// Handle or classid.
    pub handle: Handle,
    /// Parent (raw).
    pub parent: u32,
    /// Kind.
    pub kind: String,
    /// HTB class rate / TBF rate.
    pub rate: Option<Rate>,
    /// HTB ceil.
    pub ceil: Option<Rate>,
    /// Buffer / cbuffer in ticks as dumped.
    pub buffer_ticks: Option<(u32, u32)>,
    /// HTB class prio and quantum.
    pub prio_quantum: Option<(u32, u32)>,
    /// FIFO limit, TBF limit.
    pub limit: Option<u32>,
    /// HTB default class.
    pub htb_default: Option<u32>,
    /// Counters.
    pub stats: KStats,
}

fn parse_stats(attrs: &[u8]) -> KStats {
    let mut s = KStats::default();
    if let Some(st) = netlink::find(attrs, tca::STATS2) {
        if let Some(b) = netlink::find(st, 1) {
            s.bytes = netlink::u64_at(b, 0).unwrap_or(0);
            s.packets = netlink::u32_at(b, 8).unwrap_or(0) as u64;
        }
        if let Some(q) = netlink::find(st, 3) {
            s.qlen = netlink::u32_at(q, 0).unwrap_or(0) as u64;
            s.backlog = netlink::u32_at(q, 4).unwrap_or(0) as u64;
            s.drops = netlink::u32_at(q, 8).unwrap_or(0) as u64;
            s.overlimits = netlink::u32_at(q, 16).unwrap_or(0) as u64;
        }
    }
    s
}

fn ratespec_rate(b: &[u8], off: usize, rate64: Option<&[u8]>) -> Option<Rate> {
    let r32 = netlink::u32_at(b, off + 8)? as u64;
    let bps = rate64.and_then(|r| netlink::u64_at(r, 0)).unwrap_or(r32);
    Some(Rate::from_bytes_per_sec(bps))
}

fn decode(o: &TcObject, is_qdisc: bool) -> KObject {
    let kind = o.kind_str();
    let opts = o.options();
    let mut k = KObject {
        is_qdisc,
        handle: Handle::from_tc(o.tc.handle),
        parent: o.tc.parent,
        kind: kind.clone(),
        rate: None,
        ceil: None,
        buffer_ticks: None,
        prio_quantum: None,
        limit: None,
        htb_default: None,
        stats: parse_stats(&o.attrs),
    };
    match (kind.as_str(), is_qdisc) {
        ("htb", false) => {
            if let Some(p) = netlink::find(opts, htb_attr::PARMS) {
                k.rate = ratespec_rate(p, 0, netlink::find(opts, htb_attr::RATE64));
                k.ceil = ratespec_rate(p, 12, netlink::find(opts, htb_attr::CEIL64));
                k.buffer_ticks = netlink::u32_at(p, 24).zip(netlink::u32_at(p, 28));
                k.prio_quantum = netlink::u32_at(p, 40).zip(netlink::u32_at(p, 32));
            }
        }
        ("htb", true) => {
            k.htb_default = netlink::find(opts, htb_attr::INIT).and_then(|g| netlink::u32_at(g, 8));
        }
        ("tbf", true) => {
            if let Some(p) = netlink::find(opts, tbf_attr::PARMS) {
                k.rate = ratespec_rate(p, 0, netlink::find(opts, tbf_attr::RATE64));
                k.limit = netlink::u32_at(p, 24);
                k.buffer_ticks = netlink::u32_at(p, 28).map(|b| (b, 0));
            }
        }
        ("pfifo" | "bfifo", true) => k.limit = netlink::u32_at(opts, 0),
        _ => {}
    }
    k
}

/// Read back every qdisc and class of `dev` (calling thread's namespace).
pub fn read_back(dev: &str) -> Result<Vec<KObject>, LabError> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    let mut out = Vec::new();
    let qd = nl.dump(&mut Msg::tc(
        rtm::GETQDISC,
        flags::REQUEST | flags::DUMP,
        TcMsg { ifindex, ..TcMsg::default() },
    ))?;
    out.extend(qd.iter().filter(|o| o.tc.ifindex == ifindex).map(|o| decode(o, true)));
    let cl = nl.dump(&mut Msg::tc(
        rtm::GETTCLASS,
        flags::REQUEST | flags::DUMP,
        TcMsg { ifindex, ..TcMsg::default() },
    ))?;
    out.extend(cl.iter().filter(|o| o.tc.ifindex == ifindex).map(|o| decode(o, false)));
    Ok(out)
}

/// Differences between the model and what the kernel reports (empty: they match).
pub fn compare(tree: &Tree, policy: BurstPolicy, kernel: &[KObject]) -> Vec<String> {
    let mut diffs = Vec::new();
    for q in &tree.qdiscs {
        let Some(k) = kernel.iter().find(|k| k.is_qdisc && k.handle == q.handle) else {
            diffs.push(format!(
                "qdisc {} ({}) is missing in the kernel",
                handle_str(q.handle),
                q.kind.name()
            ));
            continue;
        };
        if k.kind != q.kind.name() {
            diffs.push(format!(
                "qdisc {}: kind {} in the kernel, {} in the model",
                handle_str(q.handle),
                k.kind,
                q.kind.name()
            ));
        }
        if k.parent != q.parent.raw() {
            diffs.push(format!(
                "qdisc {}: parent {:#x} in the kernel, {:#x} in the model",
                handle_str(q.handle),
                k.parent,
                q.parent.raw()
            ));
        }
        match &q.kind {
            QdiscKind::Htb { default, .. } if k.htb_default != Some(*default) => diffs.push(format!(
                "qdisc {}: default {:?} in the kernel, {default:#x} in the model",
                handle_str(q.handle),
                k.htb_default
            )),
            QdiscKind::Tbf { rate, limit, .. } => {
                if k.rate != Some(*rate) {
                    diffs.push(format!(
                        "tbf {}: rate {:?} in the kernel, {rate} in the model",
                        handle_str(q.handle),
                        k.rate
                    ));
                }
                if k.limit != Some((*limit).min(u32::MAX as u64) as u32) {
                    diffs.push(format!(
                        "tbf {}: limit {:?} in the kernel, {limit} in the model",
                        handle_str(q.handle),
                        k.limit
                    ));
                }
            }
            QdiscKind::Pfifo(Some(l)) | QdiscKind::Bfifo(Some(l)) if k.limit != Some(*l) => {
                diffs.push(format!(
                    "{} {}: limit {:?} in the kernel, {l} in the model",
                    q.kind.name(),
                    handle_str(q.handle),
                    k.limit
                ))
            }
            _ => {}
        }
    }
    for c in resolve_classes(tree, policy) {
        let s = &c.spec;
        let Some(k) = kernel.iter().find(|k| !k.is_qdisc && k.handle == s.classid) else {
            diffs.push(format!("class {} is missing in the kernel", handle_str(s.classid)));
            continue;
        };
        if k.rate != Some(s.rate) || k.ceil != Some(s.ceil) {
            diffs.push(format!(
                "class {}: rate/ceil {:?}/{:?} in the kernel, {}/{} in the model",
                handle_str(s.classid),
                k.rate,
                k.ceil,
                s.rate,
                s.ceil
            ));
        }
        let want = (
            xmittime_ticks(s.rate.bytes_per_sec(), c.burst),
            xmittime_ticks(s.ceil.bytes_per_sec(), c.cburst),
        );
        if let Some(got) = k.buffer_ticks {
            // The kernel stores ns and dumps ns >> 6: equal up to one tick.
            if got.0.abs_diff(want.0) > 1 || got.1.abs_diff(want.1) > 1 {
                diffs.push(format!(
                    "class {}: buffer/cbuffer {got:?} ticks in the kernel, {want:?} in the model",
                    handle_str(s.classid)
                ));
            }
        }
        if let Some((prio, _)) = k.prio_quantum {
            if prio != s.prio.min(7) {
                diffs.push(format!(
                    "class {}: prio {prio} in the kernel, {} in the model",
                    handle_str(s.classid),
                    s.prio
                ));
            }
        }
        // The kernel reports a top-level class's parent as the root, not the qdisc handle.
        let parent_ok =
            k.parent == tc_handle(s.parent) || (s.parent.minor() == 0 && k.parent == netlink::TC_H_ROOT);
        if !parent_ok {
            diffs.push(format!(
                "class {}: parent {:#x} in the kernel, {:#x} in the model",
                handle_str(s.classid),
                k.parent,
                tc_handle(s.parent)
            ));
        }
    }
    diffs
}

/// `tc -s`-like lines for what the kernel reports.
pub fn format_objects(objs: &[KObject]) -> Vec<String> {
    objs.iter()
        .map(|k| {
            let mut s =
                format!("{} {} {}", if k.is_qdisc { "qdisc" } else { "class" }, k.kind, handle_str(k.handle));
            if let Some(r) = k.rate {
                s += &format!(" rate {}", format_rate(r));
            }
            if let Some(c) = k.ceil {
                s += &format!(" ceil {}", format_rate(c));
            }
            if let (Some((b, cb)), Some(r), Some(c)) = (k.buffer_ticks, k.rate, k.ceil) {
                s += &format!(
                    " burst {}b cburst {}b",
                    ticks_to_bytes(r.bytes_per_sec(), b),
                    ticks_to_bytes(c.bytes_per_sec(), cb)
                );
            }
            if let Some(l) = k.limit {
                s += &format!(" limit {l}");
            }
            if let Some(d) = k.htb_default {
                s += &format!(" default {d:#x}");
            }
            s += &format!(
                "\n Sent {} bytes {} pkt (dropped {}, overlimits {}) backlog {}b {}p",
                k.stats.bytes,
                k.stats.packets,
                k.stats.drops,
                k.stats.overlimits,
                k.stats.backlog,
                k.stats.qlen
            );
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_rule_covers_a_millisecond_and_never_goes_below_mtu() {
        // Sluice's policy is the shared rule: rate × budget at high rates, one mtu at low ones.
        use sluice_config::burst::{recommended_burst, JITTER_BUDGET_US};
        for (rate, mtu) in [(10_000_000_000u64, 1600u32), (1_000_000, 1600), (100_000_000, 9000)] {
            let b = auto_burst(Rate::from_bps(rate), mtu, BurstPolicy::Sluice);
            assert_eq!(b, recommended_burst(rate, mtu, JITTER_BUDGET_US));
            let cover = rate as f64 / 8.0 * JITTER_BUDGET_US * 1e-6;
            assert!(b as f64 >= cover.max(mtu as f64));
        }
        assert_eq!(auto_burst(Rate::from_bps(10_000_000_000), 1600, BurstPolicy::TcDefault), 1600);
    }

    #[test]
    fn xmittime_matches_tc_for_known_values() {
        // 1 Mbit (125000 B/s), 1600 b: 12.8 ms = 12800 µs = 200000 ticks.
        assert_eq!(xmittime_ticks(125_000, 1600), 200_000);
        assert_eq!(ticks_to_bytes(125_000, 200_000), 1600);
    }

    #[test]
    fn high_rates_use_the_64_bit_attributes() {
        let opts_of = |rate: u64| {
            let t = Tree::single_htb(Rate::from_bps(rate), 100);
            let m = class_msg(1, &resolve_classes(&t, BurstPolicy::Sluice)[0]);
            netlink::find(&m.bytes()[36..], tca::OPTIONS).unwrap().to_vec()
        };
        // 40 Gbit = 5e9 B/s does not fit the u32 ratespec.
        let big = opts_of(40_000_000_000);
        assert_eq!(
            netlink::find(&big, htb_attr::RATE64).and_then(|b| netlink::u64_at(b, 0)),
            Some(5_000_000_000)
        );
        assert_eq!(netlink::find(&big, htb_attr::RTAB).map(|t| t.len()), Some(1024));
        let parms = netlink::find(&big, htb_attr::PARMS).unwrap();
        assert_eq!(parms.len(), 44);
        assert_eq!(netlink::u32_at(parms, 8), Some(u32::MAX));
        let small = opts_of(1_000_000_000);
        assert!(netlink::find(&small, htb_attr::RATE64).is_none());
        assert_eq!(netlink::u32_at(netlink::find(&small, htb_attr::PARMS).unwrap(), 8), Some(125_000_000));
    }

    #[test]
    fn dry_run_names_burst_source_and_unprogrammed_filters() {
        let mut t = Tree::single_htb(Rate::from_bps(100_000_000), 100);
        t.filters.push(crate::tree::FilterSpec { args: vec!["parent".into(), "1:".into(), "u32".into()] });
        let lines = tc_commands("eth0", &t, BurstPolicy::Sluice);
        let b = auto_burst(Rate::from_bps(100_000_000), crate::tree::HTB_DEFAULT_MTU, BurstPolicy::Sluice);
        let shown = format!("burst {b}b");
        assert!(
            lines.iter().any(|l| l.contains(&shown) && l.contains("jitter rule")),
            "{shown} in {lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("not programmed") && l.contains("dev eth0 parent 1: u32")),
            "{lines:?}"
        );
    }
}
