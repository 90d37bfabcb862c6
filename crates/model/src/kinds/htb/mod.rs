//! htb: the hierarchical token bucket's own options (r2q, default class, direct queue, offload,
//! and Sluice's `textbook` sharing), its classes ([`class`]) and the build of the whole tree.
//! tc's `q_htb.c`, the kernel's `sch_htb.c`; the algorithms are `sluice_core::htb` and
//! `sluice_core::htb_fair`.

mod class;
pub use class::{auto_quantum, HtbClass, HtbClassOpts, HTB_DEFAULT_MTU};

use super::{block_at, BuildCx, ClassList, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::{set_default_class_shape, wire, BuildError};
use crate::error::TcError;
use crate::grammar::{get_hex, matches, what_is, Cur};
use crate::json::J;
use crate::model::{is_false, is_zero_u32, ClassNode, ClassOpts, Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, u32s, Attrs};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::classify::ClassShape;
use sluice_core::htb::{Htb as Core, HtbClassConfig, HtbConfig};
use sluice_core::htb_fair::{FairClassConfig, HtbFair};
use sluice_core::{Handle, Qdisc, Rate, Time};
use std::fmt::Write;

/// HTB qdisc options.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HtbOpts {
    /// Rate to quantum divisor (10).
    pub r2q: u32,
    /// Minor id of the default class (0: unclassified traffic goes to the direct queue); up to
    /// `ffffffff` like any minor (the kernel keeps only the low 16 bits).
    #[serde(with = "crate::serde_units::hex_minor")]
    pub default: u32,
    /// Direct queue length (txqueuelen when absent).
    pub direct_qlen: Option<u32>,
    /// Hardware offload requested.
    #[serde(default, skip_serializing_if = "is_false")]
    pub offload: bool,
    /// Sluice's `textbook` option: spare bandwidth shared as the HTB user guide describes
    /// (hierarchical max-min by rate, ceil, prio and quantum, `sluice_core::htb_fair`) instead of
    /// the kernel's packet-by-packet lending. The kernel has no such mode: `apply` refuses it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub textbook: bool,
    /// `debug`: 2 bits per digit, as tc packs them (the kernel ignores them; tc sends them).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub debug: u32,
}

impl Default for HtbOpts {
    fn default() -> Self {
        HtbOpts { r2q: 10, default: 0, direct_qlen: None, offload: false, textbook: false, debug: 0 }
    }
}

/// The kind.
pub struct Htb;

/// `TCA_HTB_*` (`linux/pkt_sched.h`).
mod attr {
    pub const INIT: u16 = 2;
    pub const DIRECT_QLEN: u16 = 5;
    pub const OFFLOAD: u16 = 9;
}

/// `TC_HTB_PROTOVER`, the version tc sends in `struct tc_htb_glob`.
const PROTOVER: u32 = 3;

/// q_htb.c's `explain()` (for the qdisc and for classes).
pub const USAGE: &str = "Usage: ... qdisc add ... htb [default N] [r2q N]\n                      [direct_qlen P] [offload]\n default  minor id of class to which unclassified packets are sent {0}\n r2q      DRR quantums are computed as rate in Bps/r2q {10}\n debug    string of 16 numbers each 0-3 {0}\n\n direct_qlen  Limit of the direct queue {in packets}\n offload  enable hardware offload\n... class add ... htb rate R1 [burst B1] [mpu B] [overhead O]\n                      [prio P] [slot S] [pslot PS]\n                      [ceil R2] [cburst B2] [mtu MTU] [quantum Q]\n rate     rate allocated to this class (class can still borrow)\n burst    max bytes burst which can be accumulated during idle period {computed}\n mpu      minimum packet size used in rate computations\n overhead per-packet size overhead used in rate computations\n linklay  adapting to a linklayer e.g. atm\n ceil     definite upper class rate (no borrows) {rate}\n cburst   burst but for ceil {computed}\n mtu      max packet size we create rate map for {1600}\n prio     priority of leaf; lower are served first {0}\n quantum  how much bytes to serve from leaf at once {use r2q}\n\nTC HTB version 3.3";

/// q_htb.c's `explain1`: `Illegal "KEY"` and the usage.
pub fn illegal(key: &str, at: usize) -> TcError {
    TcError::usage(format!("Illegal \"{key}\"\n{USAGE}"), Some(at))
}

/// A decimal number (`get_u32(.., 10)`/`get_u16`) no larger than `max`, else HTB's `explain1`.
pub fn num(cur: &mut Cur, key: &str, max: u32) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    v.parse::<u32>().ok().filter(|&n| n <= max).ok_or_else(|| illegal(key, i))
}

/// tc's `debug` word: up to 16 digits 0-3, two bits each from the lowest, stopping at any
/// other character.
fn parse_debug(v: &str) -> u32 {
    let mut d = 0u32;
    for (i, c) in v.bytes().take(16).enumerate() {
        if !(b'0'..=b'3').contains(&c) {
            break;
        }
        d |= ((c - b'0') as u32) << (2 * i);
    }
    d
}

/// The digits [`parse_debug`] reads back as `d` (trailing zeros dropped).
fn debug_digits(d: u32) -> String {
    let s: String = (0..16).map(|i| char::from(b'0' + (d >> (2 * i) & 3) as u8)).collect();
    s.trim_end_matches('0').to_string()
}

impl QdiscKind for Htb {
    const NAME: &'static str = "htb";
    const CLASSFUL: bool = true;
    type Opts = HtbOpts;

    fn parse(cur: &mut Cur) -> Result<HtbOpts, TcError> {
        let mut o = HtbOpts::default();
        while let Some((at, w)) = cur.next_word() {
            if matches(w, "r2q") {
                o.r2q = num(cur, "r2q", u32::MAX)?;
            } else if matches(w, "default") {
                let (i, v) = cur.value()?;
                o.default = get_hex(v).ok_or_else(|| illegal("default", i))?;
            } else if matches(w, "debug") {
                o.debug = parse_debug(cur.value()?.1);
            } else if matches(w, "direct_qlen") {
                o.direct_qlen = Some(num(cur, "direct_qlen", u32::MAX)?);
            } else if matches(w, "offload") {
                o.offload = true;
            } else if w == "textbook" {
                // Sluice's own (a whole word no keyword of q_htb.c starts with).
                o.textbook = true;
            } else {
                return Err(what_is(w, at, USAGE));
            }
        }
        Ok(o)
    }

    fn args(h: &HtbOpts) -> String {
        let mut s = format!(" r2q {} default {:x}", h.r2q, h.default);
        if let Some(d) = h.direct_qlen {
            let _ = write!(s, " direct_qlen {d}");
        }
        if h.debug != 0 {
            let _ = write!(s, " debug {}", debug_digits(h.debug));
        }
        if h.textbook {
            s.push_str(" textbook");
        }
        if h.offload {
            s.push_str(" offload");
        }
        s
    }

    fn show(h: &HtbOpts, dev: &Device, d: bool) -> String {
        let mut s = String::new();
        let def = if h.default == 0 { "0".to_string() } else { format!("{:#x}", h.default) };
        let _ = write!(s, "r2q {} default {} direct_packets_stat 0", h.r2q, def);
        if d {
            s.push_str(" ver 3.17");
        }
        let _ = write!(s, " direct_qlen {}", h.direct_qlen.unwrap_or(dev.txqueuelen));
        if h.offload {
            s.push_str(" offload");
        }
        if h.textbook {
            s.push_str(" textbook");
        }
        s
    }

    fn json(h: &HtbOpts, dev: &Device, d: bool) -> J {
        let mut o = J::obj();
        let def = if h.default == 0 { "0".to_string() } else { format!("{:#x}", h.default) };
        o.put("r2q", h.r2q).put("default", def).put("direct_packets_stat", 0u32);
        if d {
            o.put("ver", "3.17");
        }
        o.put("direct_qlen", h.direct_qlen.unwrap_or(dev.txqueuelen));
        if h.offload {
            o.put("offload", Value::Null);
        }
        o
    }

    /// HTB has no `change` operation: the kernel refuses to change an existing HTB qdisc.
    fn change(_dev: &Device, new: HtbOpts, old: Option<&HtbOpts>) -> Result<HtbOpts, TcError> {
        match old {
            Some(_) => Err(TcError::kernel("Change operation not supported by specified qdisc")),
            None => Ok(new),
        }
    }

    /// As `htb_parse_opt` sends it: `struct tc_htb_glob` (version 3, r2q, default, debug),
    /// the direct queue length when given, the offload flag when given. `textbook` is Sluice's
    /// alone and is refused.
    fn encode(h: &HtbOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        if h.textbook {
            return Err(Unencodable {
                kind: "htb",
                option: "textbook".into(),
                why: "shares spare bandwidth the textbook way, a Sluice option the kernel's HTB does \
                      not have (it lends packet by packet); remove `textbook` to apply this tree to \
                      the kernel, or run it with `sluice shape`"
                    .into(),
            });
        }
        let mut glob = Vec::with_capacity(20);
        for v in [PROTOVER, h.r2q, h.default, h.debug, 0] {
            glob.extend_from_slice(&v.to_ne_bytes());
        }
        out.begin_nest(TCA_OPTIONS);
        out.put(attr::INIT, &glob);
        if let Some(d) = h.direct_qlen {
            out.put_u32(attr::DIRECT_QLEN, d);
        }
        if h.offload {
            out.put_flag(attr::OFFLOAD);
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<HtbOpts, DecodeError> {
        let mut o = HtbOpts::default();
        let mut init = false;
        for (ty, p) in attrs(options.unwrap_or_default()) {
            match ty {
                attr::INIT => {
                    let [_version, r2q, default, debug, _direct_pkts] =
                        u32s::<5>(p).ok_or_else(|| DecodeError::new("htb", "struct tc_htb_glob is short"))?;
                    (o.r2q, o.default, o.debug) = (r2q, default, debug);
                    init = true;
                }
                attr::DIRECT_QLEN => {
                    o.direct_qlen = Some(
                        u32_of(p).ok_or_else(|| DecodeError::new("htb", "TCA_HTB_DIRECT_QLEN is short"))?,
                    )
                }
                attr::OFFLOAD => o.offload = true,
                _ => {}
            }
        }
        if !init {
            return Err(DecodeError::new("htb", "no TCA_HTB_INIT"));
        }
        Ok(o)
    }

    fn build(h: &HtbOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        if h.textbook {
            return build_textbook(h, q, cx);
        }
        let dev = cx.dev;
        let cfg = HtbConfig {
            r2q: h.r2q,
            default_class: h.default,
            direct_qlen: h.direct_qlen.unwrap_or(dev.txqueuelen),
        };
        let mut htb = Core::new(q.handle, cfg)?;
        let classes: Vec<&ClassNode> = dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
        for c in &classes {
            let ClassOpts::Htb(x) = &c.opts else { continue };
            let mut cc = HtbClassConfig::new(Rate::from_bps(x.rate))
                .ceil(Rate::from_bps(x.ceil.max(x.rate)))
                .burst(x.burst as u64)
                .cburst(x.cburst as u64)
                .prio(x.prio.min(7) as u8);
            cc.quantum = x.quantum;
            cc.mtu = x.mtu;
            cc.wire = wire(x.overhead, x.mpu, x.linklayer);
            htb.add_class(c.classid, c.parent, cc, Time::ZERO)?;
        }
        leaves_and_shape(q, h.default, &classes, cx, |id, leaf| {
            htb.set_leaf_qdisc(id, leaf)?;
            Ok(())
        })?;
        Ok(Box::new(htb))
    }

    const CLASS_OPS: bool = true;

    fn has_class(_h: &HtbOpts, dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        dev.class(classid).is_some()
    }

    fn classes(_h: &HtbOpts, _dev: &Device, _q: &QdiscNode) -> ClassList {
        ClassList::Nodes { root_class: false }
    }

    fn class_in_use(_h: &HtbOpts, _q: &QdiscNode, _clid: Handle) -> Result<&'static str, TcError> {
        Ok("HTB class in use")
    }

    /// Each class has a block of its own.
    fn filter_block(_h: &HtbOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Ok(parent))
    }

    fn label(h: &HtbOpts) -> Option<String> {
        Some(format!("default {:x} r2q {}", h.default, h.r2q))
    }
}

/// HTB with `textbook` sharing ([`HtbFair`]): the same classes, quanta resolved as the kernel
/// does (given, or rate / r2q clamped to 1000..200000), the same classifier shape.
fn build_textbook(h: &HtbOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
    let dev = cx.dev;
    let direct_qlen = h.direct_qlen.unwrap_or(dev.txqueuelen);
    let mut htb = HtbFair::new(q.handle, h.default, direct_qlen, dev.txqueuelen);
    let classes: Vec<&ClassNode> = dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
    for c in &classes {
        let ClassOpts::Htb(x) = &c.opts else { continue };
        let quantum =
            x.quantum.unwrap_or_else(|| ((x.rate / 8) / h.r2q.max(1) as u64).clamp(1000, 200_000) as u32);
        let cfg =
            FairClassConfig { rate: x.rate, ceil: x.ceil.max(x.rate), prio: x.prio.min(7) as u8, quantum };
        htb.add_class(c.classid, c.parent, cfg)?;
    }
    leaves_and_shape(q, h.default, &classes, cx, |id, leaf| {
        htb.set_leaf_qdisc(id, leaf)?;
        Ok(())
    })?;
    Ok(Box::new(htb))
}

/// The leaves' qdiscs (handed to `set_leaf`) and the classifier's shape of an HTB tree: its
/// classes, and the `default` class as the fallback when it is a leaf.
fn leaves_and_shape(
    q: &QdiscNode,
    default: u32,
    classes: &[&ClassNode],
    cx: &mut BuildCx<'_>,
    mut set_leaf: impl FnMut(Handle, Box<dyn Qdisc>) -> Result<(), BuildError>,
) -> Result<(), BuildError> {
    let dev = cx.dev;
    let mut shapes = Vec::new();
    for c in classes {
        let leaf = dev.child_classes(c.classid).next().is_none();
        let child = dev.qdisc_at(c.classid);
        if let (true, Some(l)) = (leaf, child) {
            set_leaf(c.classid, cx.child(l)?)?;
        }
        let classful_child = child.filter(|l| l.opts.is_classful()).map(|l| l.handle);
        shapes.push(ClassShape { classid: c.classid, inner: !leaf, child: classful_child });
    }
    set_default_class_shape(cx, q, default, shapes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_digits_read_back() {
        assert_eq!(parse_debug("0123"), 0xe4);
        assert_eq!(debug_digits(0xe4), "0123");
        assert_eq!(parse_debug("31x2"), 0b0111);
        assert_eq!(debug_digits(0), "");
    }
}
