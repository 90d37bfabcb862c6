//! flow: a class from a hash or a map of packet keys. iproute2's f_flow.c, the kernel's
//! cls_flow.c (with Sluice's tunnel keys, seed 003's kernel patch).

use super::filter_common::*;
use super::{DecodeError, FilterKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, matches, what_is, Cur};
use crate::json::J;
use crate::model::{FilterNode, Handle, H_MIN_EGRESS, H_MIN_INGRESS};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Actions;
use sluice_core::filter::flow::{FlowConfig, FlowMode};
use sluice_core::filter::FilterConfig;
use sluice_core::Span;
use std::fmt::Write;

const KEYS: u16 = 1;
const MODE: u16 = 2;
const BASECLASS: u16 = 3;
const RSHIFT: u16 = 4;
const ADDEND: u16 = 5;
const MASK: u16 = 6;
const XOR: u16 = 7;
const DIVISOR: u16 = 8;
const ACT: u16 = 9;
const POLICE: u16 = 10;
const EMATCHES: u16 = 11;
const PERTURB: u16 = 12;
const MODE_MAP: u32 = 0;
const MODE_HASH: u32 = 1;

/// Flow classifier keys, in the kernel's bit order.
pub const FLOW_KEYS: [&str; 18] = [
    "src",
    "dst",
    "proto",
    "proto-src",
    "proto-dst",
    "iif",
    "priority",
    "mark",
    "nfct",
    "nfct-src",
    "nfct-dst",
    "nfct-proto-src",
    "nfct-proto-dst",
    "rt-classid",
    "sk-uid",
    "sk-gid",
    "vlan-tag",
    "rxhash",
];

/// Sluice's tunnel-aware flow keys (seed 003's kernel patch); bits above the kernel's.
pub const FLOW_TUNNEL_KEYS: [&str; 5] =
    ["tunnel-src", "tunnel-dst", "tunnel-proto", "tunnel-proto-src", "tunnel-proto-dst"];

/// Name of flow key bit `i`.
pub fn flow_key_name(i: usize) -> Option<&'static str> {
    if i < FLOW_KEYS.len() {
        Some(FLOW_KEYS[i])
    } else {
        FLOW_TUNNEL_KEYS.get(i - FLOW_KEYS.len()).copied()
    }
}

/// flow classifier options.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowOpts {
    /// `hash` (true) or `map` mode.
    pub hash: bool,
    /// Key bit mask (bit i = [`flow_key_name`]`(i)`).
    pub keys: u32,
    /// `and` mask (map mode).
    #[serde(default = "all_ones")]
    pub mask: u32,
    /// `xor` value (map mode; `or` is expressed with mask and xor).
    #[serde(default)]
    pub xor: u32,
    /// Right shift.
    pub rshift: Option<u32>,
    /// Addend.
    pub addend: Option<u32>,
    /// Divisor.
    pub divisor: Option<u32>,
    /// Base class (kernel default `qdisc:1`).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub baseclass: Option<Handle>,
    /// Perturbation period, seconds.
    pub perturb: Option<u32>,
    /// ematch tree as written (printed back in kernel form).
    pub ematch: Option<String>,
}

fn all_ones() -> u32 {
    u32::MAX
}

fn key_names(keys: u32) -> Vec<&'static str> {
    (0..32).filter(|i| keys & (1 << i) != 0).filter_map(flow_key_name).collect()
}

/// The flow kind.
pub struct Flow;

impl FilterKind for Flow {
    const NAME: &'static str = "flow";
    type Opts = FlowOpts;
    const NL: FilterNl = FilterNl {
        classid: Some(BASECLASS),
        police: Some(POLICE),
        act: Some(ACT),
        compared: Some(&[KEYS, MODE, BASECLASS, RSHIFT, ADDEND, MASK, XOR, DIVISOR, EMATCHES, PERTURB]),
        dump_only: &[],
        flags: None,
        refs: &[],
        no_change: false,
        kept: &[],
        remake: &[],
        tables: None,
    };

    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<FlowOpts>, TcError> {
        let h = plain_handle(handle)?;
        let mut o = FlowOpts { mask: u32::MAX, ..Default::default() };
        let mut nkeys = 0;
        let mut given: Vec<&'static str> = Vec::new();
        let usage = "Usage: ... flow ...\n\n [mapping mode]: map key KEY [ OPS ] ...\n [hashing mode]: hash keys KEY-LIST ... [ perturb SECS ]\n\n                 [ divisor NUM ] [ baseclass ID ] [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ]";
        while let Some((at, w)) = cur.next_word() {
            if matches(w, "map") {
                o.hash = false;
            } else if matches(w, "hash") {
                o.hash = true;
            } else if matches(w, "keys") || w == "key" {
                let (_, v) = cur.value()?;
                o.keys = 0;
                nkeys = 0;
                for k in v.split(',') {
                    let bit = (0..FLOW_KEYS.len() + FLOW_TUNNEL_KEYS.len())
                        .find(|&i| flow_key_name(i).is_some_and(|n| n == k))
                        .or_else(|| (0..FLOW_KEYS.len()).find(|&i| matches(k, FLOW_KEYS[i])));
                    match bit {
                        Some(b) => {
                            o.keys |= 1 << b;
                            nkeys += 1;
                        }
                        None => {
                            return Err(TcError::usage(format!("Unknown flow key \"{k}\""), Some(at + 1)))
                        }
                    }
                }
                given.push("keys");
            } else if matches(w, "and") || matches(w, "or") || matches(w, "xor") {
                let (i, v) = cur.value()?;
                let t = get_u32(v)
                    .ok_or_else(|| illegal(if w.starts_with('a') { "mask" } else { w }, i, None))?;
                let (m, x) = if matches(w, "and") {
                    (t, 0)
                } else if matches(w, "or") {
                    (!t, t)
                } else {
                    (u32::MAX, t)
                };
                o.xor = x ^ (o.xor & m);
                o.mask &= m;
                given.push("mask");
            } else if matches(w, "rshift") {
                o.rshift = Some(num(cur, "rshift")?);
                given.push("rshift");
            } else if matches(w, "addend") {
                let (i, v) = cur.value()?;
                let (neg, s) = match v.strip_prefix('-') {
                    Some(s) => (true, s),
                    None => (false, v),
                };
                let a = get_u32(s)
                    .or_else(|| s.parse::<std::net::Ipv4Addr>().ok().map(u32::from))
                    .ok_or_else(|| illegal("addend", i, None))?;
                o.addend = Some(if neg { a.wrapping_neg() } else { a });
                given.push("addend");
            } else if matches(w, "divisor") {
                o.divisor = Some(num(cur, "divisor")?);
                given.push("divisor");
            } else if matches(w, "baseclass") {
                let (i, v) = cur.value()?;
                let b =
                    cur.classid(v).filter(|b| b.minor() != 0).ok_or_else(|| illegal("baseclass", i, None))?;
                o.baseclass = Some(b);
                given.push("baseclass");
            } else if matches(w, "perturb") {
                o.perturb = Some(num(cur, "perturb")?);
                given.push("perturb");
            } else if matches(w, "police") {
                cx.police(cur)?;
            } else if matches(w, "action") {
                cx.action(cur)?;
            } else if matches(w, "match") {
                o.ematch = Some(parse_ematch(cur)?);
                given.push("ematch");
            } else if matches(w, "help") {
                return Err(TcError::usage(usage, Some(at)));
            } else {
                return Err(what_is(w, at, usage));
            }
        }
        if nkeys > 1 && !o.hash {
            return Err(TcError::usage("Invalid mode \"map\" for multiple keys", None));
        }
        given.push("mode");
        Ok(FilterParsed { opts: o, handle: h, table: None, given })
    }

    fn args(o: &FlowOpts, f: &FilterNode) -> String {
        let mut s = format!(
            " handle {:#x} flow {} keys {}",
            f.handle,
            if o.hash { "hash" } else { "map" },
            key_names(o.keys).join(",")
        );
        if o.mask != u32::MAX {
            let _ = write!(s, " and {:#x}", o.mask);
        }
        if o.xor != 0 {
            let _ = write!(s, " xor {:#x}", o.xor);
        }
        for (k, v) in
            [("rshift", o.rshift), ("addend", o.addend), ("divisor", o.divisor), ("perturb", o.perturb)]
        {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        // tc refuses a tree that ends the command (iproute2 steps back onto its last word), and
        // reads a following `and`/`or` as the tree's: the base class, which a made flow filter
        // always has, follows it.
        if let Some(e) = &o.ematch {
            let _ = write!(s, " match {}", super::basic::shell_word(e));
        }
        if let Some(b) = o.baseclass {
            let _ = write!(s, " baseclass {}", classid_str(b));
        }
        s
    }

    fn show(o: &FlowOpts, f: &FilterNode, _pretty: bool) -> String {
        let mut s = format!("handle {:#x} {}", f.handle, if o.hash { "hash " } else { "map " });
        let _ = write!(s, "keys {} ", key_names(o.keys).join(","));
        if o.mask != u32::MAX || o.xor != 0 {
            let or = (o.mask & o.xor) ^ o.xor;
            let xor = o.mask & o.xor;
            if o.mask != u32::MAX {
                let _ = write!(s, "and 0x{:08x} ", o.mask);
            }
            if xor != 0 {
                let _ = write!(s, "xor 0x{xor:08x} ");
            }
            if or != 0 {
                let _ = write!(s, "or 0x{or:08x} ");
            }
        }
        if let Some(r) = o.rshift {
            let _ = write!(s, "rshift {r} ");
        }
        if let Some(a) = o.addend {
            let _ = write!(s, "addend {a:#x} ");
        }
        if let Some(d) = o.divisor {
            let _ = write!(s, "divisor {d} ");
        }
        if let Some(b) = o.baseclass {
            let _ = write!(s, "baseclass {} ", classid_str(b));
        }
        if let Some(p) = o.perturb {
            let _ = write!(s, "perturb {p}sec ");
        }
        if let Some(e) = &o.ematch {
            s.push_str(&super::ematch::show_text(e));
        }
        s
    }

    /// f_flow.c prints its options with fprintf, in the middle of the JSON.
    fn json(o: &FlowOpts, f: &FilterNode, pretty: bool) -> J {
        let mut j = J::obj();
        j.raw(Self::show(o, f, pretty));
        if !f.actions.is_empty() {
            j.raw("\n");
        }
        j
    }

    fn target(o: &FlowOpts) -> Option<Handle> {
        o.baseclass
    }

    fn spread(o: &FlowOpts) -> u32 {
        o.divisor.unwrap_or(1)
    }

    fn create(mut o: FlowOpts, cx: &FilterChange<'_>, _tp_exists: bool) -> Result<FlowOpts, TcError> {
        if o.keys == 0 {
            return Err(TcError::errno("Invalid argument"));
        }
        // Kernel default base class: the qdisc's minor 1.
        let q = if cx.block == H_MIN_INGRESS || cx.block == H_MIN_EGRESS {
            Handle::new(0xFFFF, 0)
        } else {
            cx.block.qdisc()
        };
        let b = o.baseclass.unwrap_or(Handle::UNSPEC);
        let b = if b.major() == 0 { Handle::new(q.major(), b.minor()) } else { b };
        o.baseclass = Some(if b.minor() == 0 { Handle::new(b.major(), 1) } else { b });
        Ok(o)
    }

    fn merge(n: FlowOpts, o: &FlowOpts, given: &[&'static str]) -> FlowOpts {
        let g = |k: &str| given.contains(&k);
        FlowOpts {
            hash: n.hash,
            keys: if g("keys") { n.keys } else { o.keys },
            mask: if g("mask") { n.mask } else { o.mask },
            xor: if g("mask") { n.xor } else { o.xor },
            rshift: n.rshift.or(o.rshift),
            addend: n.addend.or(o.addend),
            divisor: n.divisor.or(o.divisor),
            baseclass: n.baseclass.or(o.baseclass),
            perturb: n.perturb.or(o.perturb),
            ematch: n.ematch.or(o.ematch.clone()),
        }
    }

    fn encode(
        o: &FlowOpts,
        _f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable> {
        if o.keys >> FLOW_KEYS.len() != 0 {
            return Err(Unencodable {
                kind: "flow",
                option: "tunnel keys (Sluice's own, not the kernel's)".into(),
                why: "not in the kernel".into(),
            });
        }
        out.begin_nest(TCA_OPTIONS);
        out.put_u32(KEYS, o.keys);
        for (ty, v) in [
            (RSHIFT, o.rshift),
            (ADDEND, o.addend),
            (DIVISOR, o.divisor),
            (PERTURB, o.perturb),
            (BASECLASS, o.baseclass.map(kernel_classid)),
        ] {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        if let Some(e) = &o.ematch {
            super::ematch::encode_text(out, EMATCHES, e).map_err(|why| Unencodable {
                kind: "flow",
                option: why,
                why: "not encoded".into(),
            })?;
        }
        (cx.actions)(out, ACT, Some(POLICE))?;
        out.put_u32(MODE, if o.hash { MODE_HASH } else { MODE_MAP });
        if o.mask != u32::MAX || o.xor != 0 {
            out.put_u32(MASK, o.mask);
            out.put_u32(XOR, o.xor);
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<FlowOpts, DecodeError> {
        let p = options.ok_or_else(|| DecodeError::new("flow", "no options"))?;
        let u = |ty| nlattr::find(p, ty).and_then(nlattr::u32_of);
        let ematch = match nlattr::find(p, EMATCHES) {
            Some(e) => Some(super::ematch::canonical(
                &super::ematch::decode(e).map_err(|w| DecodeError::new("flow", w))?,
            )),
            None => None,
        };
        Ok(FlowOpts {
            hash: u(MODE) == Some(MODE_HASH),
            keys: u(KEYS).unwrap_or(0),
            mask: u(MASK).unwrap_or(u32::MAX),
            xor: u(XOR).unwrap_or(0),
            rshift: u(RSHIFT),
            addend: u(ADDEND),
            divisor: u(DIVISOR),
            baseclass: u(BASECLASS).map(model_classid),
            perturb: u(PERTURB),
            ematch,
        })
    }

    fn build(o: &FlowOpts, _f: &FilterNode, acts: Actions) -> Result<Option<FilterConfig>, BuildError> {
        Ok(Some(FilterConfig::Flow(FlowConfig {
            mode: if o.hash { FlowMode::Hash } else { FlowMode::Map },
            keys: o.keys,
            and: o.mask,
            xor: o.xor,
            rshift: o.rshift.unwrap_or(0).min(31) as u8,
            addend: o.addend.unwrap_or(0),
            divisor: o.divisor.unwrap_or(0),
            baseclass: o.baseclass,
            perturb: o.perturb.filter(|&p| p > 0).map(|p| Span::from_secs(p as u64)),
            actions: acts,
            ..FlowConfig::default()
        })))
    }

    fn label(o: &FlowOpts, _f: &FilterNode) -> String {
        format!(
            "flow {} {}{}",
            if o.hash { "hash" } else { "map" },
            key_names(o.keys).join(","),
            o.divisor.map(|d| format!(" /{d}")).unwrap_or_default()
        )
    }
}
