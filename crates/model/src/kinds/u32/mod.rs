//! u32: selectors of 32-bit keys, hash tables and links between them. iproute2's f_u32.c, the
//! kernel's cls_u32.c. One classifier instance holds hash tables (its root table, made by the
//! kernel with the instance, and those made with `divisor`) and key nodes in their buckets; each
//! is one object of the dump, so one [`crate::model::FilterNode`].

mod change;
mod parse;

pub use parse::{get_u32_handle, u32_handle_str};

use super::filter_common::*;
use super::{DecodeError, FilterKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::Cur;
use crate::json::J;
use crate::model::{Device, FilterNode, Handle, ETH_P_IP};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Actions;
use sluice_core::filter::u32::{HashKey, U32Config, U32Key as CoreKey, U32Offset, U32Selector, VarOffset};
use sluice_core::filter::FilterConfig;
use std::fmt::Write;

const CLASSID: u16 = 1;
const HASH: u16 = 2;
const LINK: u16 = 3;
const DIVISOR: u16 = 4;
const SEL: u16 = 5;
const POLICE: u16 = 6;
const ACT: u16 = 7;
const INDEV: u16 = 8;
const PCNT: u16 = 9;
const FLAGS: u16 = 11;
const PAD: u16 = 12;
const TERMINAL: u8 = 1;
const OFFSET: u8 = 2;
const VAROFFSET: u8 = 4;
const EAT: u8 = 8;

/// One u32 object: a hash table or a key node. In a state file both are `"kind": "u32"`, a table
/// by its `divisor` (older files name tables `"u32_table"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum U32Filter {
    /// A hash table (`handle N: u32 divisor D`, and the automatic root table).
    Table(U32TableOpts),
    /// A key node (selector and result).
    Key(U32Opts),
}

/// A u32 hash table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32TableOpts {
    /// Buckets.
    pub divisor: u32,
}

/// One u32 key: 32-bit value/mask at a byte offset (from the network header or the next header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Key {
    /// Value (host order).
    pub val: u32,
    /// Mask (host order).
    pub mask: u32,
    /// Byte offset, multiple of 4.
    pub off: i32,
    /// Offset relative to the next (transport) header.
    #[serde(default)]
    pub nexthdr: bool,
}

/// u32 key node.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct U32Opts {
    /// Keys, all must match.
    pub keys: Vec<U32Key>,
    /// Result class.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub classid: Option<Handle>,
    /// Hash table to continue in.
    pub link: Option<u32>,
    /// Hash key (mask, offset) used with `link`.
    pub hashkey: Option<(u32, i32)>,
    /// Input device match.
    pub indev: Option<String>,
    /// `offset ...`: how the header offset moves for the linked table.
    pub offset: Option<U32OffsetOpts>,
}

/// u32's `offset [plus P] [at OFF] [mask M] [shift S] [eat]` (the kernel's selector fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32OffsetOpts {
    /// `plus P` given (TC_U32_OFFSET), and its value.
    pub plus: Option<i16>,
    /// `at`, `mask` or `shift` given (TC_U32_VAROFFSET).
    #[serde(default)]
    pub var: bool,
    /// Where the 16-bit word is read (`at`).
    #[serde(default)]
    pub at: i16,
    /// Mask on that word.
    #[serde(default)]
    pub mask: u16,
    /// Right shift after masking.
    #[serde(default)]
    pub shift: u8,
    /// `eat`.
    #[serde(default)]
    pub eat: bool,
}

/// The u32 kind.
pub struct U32;

impl FilterKind for U32 {
    const NAME: &'static str = "u32";
    const POLICE_OWN_LINE: bool = true;
    type Opts = U32Filter;
    const NL: FilterNl = FilterNl {
        classid: Some(CLASSID),
        police: Some(POLICE),
        act: Some(ACT),
        compared: Some(&[CLASSID, LINK, DIVISOR, SEL, INDEV]),
        dump_only: &[PCNT, PAD],
        flags: Some(FLAGS),
        refs: &[HASH, LINK],
        no_change: false,
        kept: &[SEL],
        remake: &[],
        tables: Some(HASH),
    };

    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<U32Filter>, TcError> {
        parse::parse_u32(cur, handle, cx)
    }

    fn args(o: &U32Filter, f: &FilterNode) -> String {
        let u = match o {
            U32Filter::Table(t) => {
                return format!(" handle {} u32 divisor {}", u32_handle_str(f.handle), t.divisor)
            }
            U32Filter::Key(u) => u,
        };
        let ht = f.handle & 0xFFFF_F000;
        let mut s =
            format!(" handle {} u32 ht {:x}:{:x}", u32_handle_str(f.handle), ht >> 20, (ht >> 12) & 0xFF);
        for k in &u.keys {
            let _ = write!(
                s,
                " match u32 0x{:08x} 0x{:08x} at {}{}",
                k.val,
                k.mask,
                if k.nexthdr { "nexthdr+" } else { "" },
                k.off
            );
        }
        if let Some(l) = u.link {
            let _ = write!(s, " link {}", u32_handle_str(l));
        }
        if let Some(o) = u.offset {
            s.push_str(" offset");
            if let Some(p) = o.plus {
                let _ = write!(s, " plus {p}");
            }
            if o.var {
                let _ = write!(s, " at {} mask {:04x} shift {}", o.at, o.mask, o.shift);
            }
            if o.eat {
                s.push_str(" eat");
            }
        }
        if let Some((m, o)) = u.hashkey {
            let _ = write!(s, " hashkey mask 0x{m:08x} at {o}");
        }
        if let Some(i) = &u.indev {
            let _ = write!(s, " indev {}", super::basic::shell_word(i));
        }
        if let Some(c) = u.classid {
            let _ = write!(s, " classid {}", classid_str(c));
        }
        s
    }

    fn show(o: &U32Filter, f: &FilterNode, pretty: bool) -> String {
        let u = match o {
            U32Filter::Table(t) => {
                return format!("fh {} ht divisor {} ", u32_handle_str(f.handle), t.divisor)
            }
            U32Filter::Key(u) => u,
        };
        let mut s = format!(
            "fh {} order {} key ht {:x} bkt {:x} ",
            u32_handle_str(f.handle),
            f.handle & 0xFFF,
            f.handle >> 20,
            (f.handle >> 12) & 0xFF
        );
        // tc 6.1 marks a selector TC_U32_TERMINAL when it has a classid or actions, and
        // prints that as `*flowid` (or `terminal flowid` without a classid).
        if let Some(c) = u.classid {
            let _ = write!(s, "*flowid {} ", classid_str(c));
        } else if !f.actions.is_empty() {
            s.push_str("terminal flowid ");
        }
        if let Some(l) = u.link {
            let _ = write!(s, "link {} ", u32_handle_str(l));
        }
        s.push_str("not_in_hw ");
        for k in &u.keys {
            match f.protocol {
                ETH_P_IP | 0x86DD if pretty => s.push_str(&u32_key_pretty(k, f.protocol == ETH_P_IP)),
                _ => {
                    let _ = write!(
                        s,
                        "\n  match {:08x}/{:08x} at {}{}",
                        k.val,
                        k.mask,
                        if k.nexthdr { "nexthdr+" } else { "" },
                        k.off
                    );
                }
            }
        }
        if let Some(o) = u.offset.filter(|o| o.var || o.plus.is_some()) {
            s.push_str("\n    offset ");
            if o.var {
                let _ = write!(s, "{:04x}>>{} at {} ", o.mask, o.shift, o.at);
            }
            if let Some(p) = o.plus.filter(|&p| p != 0) {
                let _ = write!(s, "plus {p} ");
            }
        }
        if u.offset.is_some_and(|o| o.eat) {
            s.push_str(" eat ");
        }
        if let Some((m, off)) = u.hashkey {
            let _ = write!(s, "\n    hash mask {m:08x} at {off} ");
        }
        if let Some(i) = &u.indev {
            let _ = write!(s, "\n  input dev {i}\n");
        }
        s
    }

    fn json(o: &U32Filter, f: &FilterNode, _pretty: bool) -> J {
        let mut j = J::obj();
        let u = match o {
            U32Filter::Table(t) => {
                j.put("fh", u32_handle_str(f.handle)).put("ht_divisor", t.divisor);
                return j;
            }
            U32Filter::Key(u) => u,
        };
        j.put("fh", u32_handle_str(f.handle));
        if f.handle & 0xFFF != 0 {
            j.put("order", f.handle & 0xFFF);
        }
        j.put("key_ht", format!("{:x}", f.handle >> 20)).put("bkt", format!("{:x}", (f.handle >> 12) & 0xFF));
        if let Some(c) = u.classid {
            j.put("flowid", classid_str(c));
        }
        if let Some(l) = u.link {
            j.put("link", u32_handle_str(l));
        }
        j.put("not_in_hw", true);
        for k in &u.keys {
            let mut m = J::obj();
            m.put("value", format!("{:x}", k.val))
                .put("mask", format!("{:x}", k.mask))
                .put("offmask", if k.nexthdr { "nexthdr+" } else { "" })
                .put("off", k.off);
            j.put("match", m);
        }
        if let Some(off) = u.offset.filter(|o| o.var || o.plus.is_some()) {
            j.bare("    offset ");
            if off.var {
                j.put("offset_mask", format!("{:x}", off.mask))
                    .put("offset_shift", off.shift)
                    .put("offset_off", off.at);
            }
            if let Some(p) = off.plus.filter(|&p| p != 0) {
                j.put("plus", p);
            }
        }
        if u.offset.is_some_and(|o| o.eat) {
            j.bare(" eat ");
        }
        if let Some((m, off)) = u.hashkey {
            j.put("hash_mask", format!("{m:x}")).put("hash_off", off);
        }
        if let Some(i) = &u.indev {
            j.put("input_dev", i.as_str());
        }
        j
    }

    fn classid(o: &U32Filter) -> Option<Handle> {
        match o {
            U32Filter::Key(u) => u.classid,
            U32Filter::Table(_) => None,
        }
    }

    fn is_table(o: &U32Filter) -> bool {
        matches!(o, U32Filter::Table(_))
    }

    /// The root table of each priority (`800:` and up) comes with the classifier instance.
    fn implicit(o: &U32Filter, handle: u32) -> bool {
        matches!(o, U32Filter::Table(_)) && handle >> 20 >= 0x800
    }

    fn change(cx: &mut FilterChange<'_>, o: U32Filter, reg: &FilterReg<U32Filter>) -> Result<(), TcError> {
        change::change(cx, o, reg)
    }

    /// A table goes with its key nodes.
    fn delete(o: &U32Filter, removed: &FilterNode, dev: &mut Device) {
        if let U32Filter::Table(_) = o {
            let ht = removed.handle & 0xFFF0_0000;
            dev.filters.retain(|f| {
                !(f.parent == removed.parent
                    && f.opts.kind() == Self::NAME
                    && !f.opts.is_table()
                    && f.handle & 0xFFF0_0000 == ht)
            });
        }
    }

    /// Hash tables newest first, each followed by its key nodes in handle order. u32's walk
    /// lists every table of its qdisc with this prio: on clsact, the other hook's too.
    fn dump<'a>(dev: &'a Device, first: &'a FilterNode, _tp: Vec<&'a FilterNode>) -> Vec<&'a FilterNode> {
        let block = first.parent;
        let sibling = change::sibling_hook(dev, block);
        let tp: Vec<&FilterNode> = dev
            .filters
            .iter()
            .filter(|f| {
                (f.parent == block || Some(f.parent) == sibling)
                    && f.chain == first.chain
                    && f.prio == first.prio
            })
            .filter(|f| f.opts.kind() == Self::NAME)
            .collect();
        let mut rows = Vec::new();
        for t in tp.iter().filter(|f| f.opts.is_table()).rev() {
            rows.push(*t);
            let mut keys: Vec<&FilterNode> = tp
                .iter()
                .filter(|f| !f.opts.is_table() && f.handle >> 20 == t.handle >> 20)
                .copied()
                .collect();
            keys.sort_by_key(|f| f.handle);
            rows.extend(keys);
        }
        rows
    }

    fn encode(
        o: &U32Filter,
        f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable> {
        let u = match o {
            U32Filter::Table(t) => {
                out.begin_nest(TCA_OPTIONS);
                out.put_u32(DIVISOR, t.divisor);
                out.end_nest();
                return Ok(());
            }
            U32Filter::Key(u) => u,
        };
        if u.keys.len() > 128 {
            return Err(Unencodable {
                kind: "u32",
                option: "with more than 128 keys".into(),
                why: "the selector holds 128".into(),
            });
        }
        out.begin_nest(TCA_OPTIONS);
        if let Some(l) = u.link {
            out.put_u32(LINK, l);
        }
        if let Some(d) = &u.indev {
            out.put_str(INDEV, d);
        }
        if let Some(c) = u.classid {
            out.put_u32(CLASSID, kernel_classid(c));
        }
        (cx.actions)(out, ACT, Some(POLICE))?;
        let htid = f.handle & 0xFFFF_F000;
        if htid != 0 {
            out.put_u32(HASH, htid);
        }
        if !u.keys.is_empty() {
            out.put(SEL, &selector(u, u.classid.is_some() || !f.actions.is_empty()));
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<U32Filter, DecodeError> {
        let bad = |why: &str| DecodeError::new("u32", why);
        let Some(p) = options else { return Ok(U32Filter::Key(U32Opts::default())) };
        let u = |ty| nlattr::find(p, ty).and_then(nlattr::u32_of);
        if let Some(divisor) = u(DIVISOR) {
            return Ok(U32Filter::Table(U32TableOpts { divisor }));
        }
        let mut o = U32Opts {
            classid: u(CLASSID).map(model_classid),
            link: u(LINK),
            indev: nlattr::find(p, INDEV)
                .map(|b| String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap_or(b)).into_owned()),
            ..U32Opts::default()
        };
        if let Some(sel) = nlattr::find(p, SEL) {
            if sel.len() < 16 {
                return Err(bad("short TCA_U32_SEL"));
            }
            let (flags, shift, n) = (sel[0], sel[1], sel[2] as usize);
            let be16 = |at: usize| u16::from_be_bytes([sel[at], sel[at + 1]]);
            let ne16 = |at: usize| u16::from_ne_bytes([sel[at], sel[at + 1]]);
            let ne32 = |at: usize| u32::from_ne_bytes([sel[at], sel[at + 1], sel[at + 2], sel[at + 3]]);
            if flags & (OFFSET | VAROFFSET | EAT) != 0 {
                o.offset = Some(U32OffsetOpts {
                    plus: (flags & OFFSET != 0).then_some(ne16(6) as i16),
                    var: flags & VAROFFSET != 0,
                    at: ne16(8) as i16,
                    mask: be16(4),
                    shift,
                    eat: flags & EAT != 0,
                });
            }
            let (hoff, hmask) = (ne16(10) as i16, u32::from_be(ne32(12)));
            if hmask != 0 || hoff != 0 {
                o.hashkey = Some((hmask, hoff as i32));
            }
            if sel.len() < 16 + 16 * n {
                return Err(bad("short TCA_U32_SEL keys"));
            }
            for i in 0..n {
                let at = 16 + 16 * i;
                o.keys.push(U32Key {
                    mask: u32::from_be(ne32(at)),
                    val: u32::from_be(ne32(at + 4)),
                    off: ne32(at + 8) as i32,
                    nexthdr: ne32(at + 12) != 0,
                });
            }
        }
        Ok(U32Filter::Key(o))
    }

    fn build(o: &U32Filter, f: &FilterNode, acts: Actions) -> Result<Option<FilterConfig>, BuildError> {
        Ok(Some(FilterConfig::U32(match o {
            // The root table of each priority is created by the core itself.
            U32Filter::Table(_) if Self::implicit(o, f.handle) => return Ok(None),
            U32Filter::Table(t) => U32Config {
                ht: None,
                order: None,
                divisor: Some(t.divisor),
                sel: U32Selector::default(),
                link: None,
                classid: None,
                actions: acts,
                indev: None,
                mark: None,
            },
            U32Filter::Key(u) => U32Config {
                ht: Some(f.handle & 0xFFFF_F000),
                order: Some(f.handle & 0xFFF),
                divisor: None,
                sel: U32Selector {
                    keys: u
                        .keys
                        .iter()
                        .map(|k| CoreKey { val: k.val, mask: k.mask, off: k.off, nexthdr: k.nexthdr })
                        .collect(),
                    offset: u.offset.map(|o| U32Offset {
                        plus: o.plus,
                        var: o.var.then_some(VarOffset { at: o.at, mask: o.mask, shift: o.shift }),
                        eat: o.eat,
                    }),
                    hashkey: u.hashkey.map(|(mask, at)| HashKey { mask, at }),
                },
                link: u.link,
                classid: u.classid,
                actions: acts,
                indev: None,
                mark: None,
            },
        })))
    }

    /// A table's divisor, a node's keys (as the kernel stores them: values masked) and link.
    fn differs(o: &U32Filter, k: &U32Filter) -> Vec<String> {
        let mut d = Vec::new();
        match (o, k) {
            (U32Filter::Table(t), U32Filter::Table(kt)) if t.divisor != kt.divisor => {
                d.push(format!("divisor {} (model {})", kt.divisor, t.divisor))
            }
            (U32Filter::Table(_), U32Filter::Table(_)) => {}
            (U32Filter::Key(u), U32Filter::Key(ku)) => {
                let masked = |x: &U32Key| U32Key { val: x.val & x.mask, ..*x };
                let want: Vec<U32Key> = u.keys.iter().map(masked).collect();
                let have: Vec<U32Key> = ku.keys.iter().map(masked).collect();
                if have != want {
                    d.push(format!("keys {have:x?} (model {want:x?})"));
                }
                if ku.link != u.link {
                    d.push(format!("link {:?} (model {:?})", ku.link, u.link));
                }
            }
            (U32Filter::Table(t), _) => d.push(format!("a key node (model a table of {})", t.divisor)),
            (U32Filter::Key(_), _) => d.push("a hash table (model a key node)".into()),
        }
        d
    }

    fn label(o: &U32Filter, _f: &FilterNode) -> String {
        let u = match o {
            U32Filter::Table(t) => return format!("u32 table /{}", t.divisor),
            U32Filter::Key(u) => u,
        };
        let keys: Vec<String> = u
            .keys
            .iter()
            .map(|k| match (k.off, k.nexthdr, k.mask) {
                (12, false, _) => format!("src {}/{}", std::net::Ipv4Addr::from(k.val), k.mask.count_ones()),
                (16, false, _) => format!("dst {}/{}", std::net::Ipv4Addr::from(k.val), k.mask.count_ones()),
                (20, false, 0xFFFF_0000) => format!("sport {}", k.val >> 16),
                (20, false, 0x0000_FFFF) => format!("dport {}", k.val & 0xFFFF),
                (0, true, 0xFFFF_0000) => format!("sport {}", k.val >> 16),
                (0, true, 0x0000_FFFF) => format!("dport {}", k.val & 0xFFFF),
                (0, false, 0x00FF_0000) => format!("tos {:#x}", (k.val >> 16) & 0xFF),
                (0, false, 0x00FC_0000) => format!("dscp {}", (k.val >> 18) & 0x3F),
                _ => format!("{:08x}/{:08x}@{}{}", k.val, k.mask, if k.nexthdr { "nh+" } else { "" }, k.off),
            })
            .collect();
        format!("u32 {}", keys.join(" "))
    }
}

/// `struct tc_u32_sel` followed by its keys (`struct tc_u32_key`), values and masks in network
/// order as tc packs them.
fn selector(u: &U32Opts, terminal: bool) -> Vec<u8> {
    let mut flags = if terminal { TERMINAL } else { 0 };
    let o = u.offset.unwrap_or_default();
    if o.plus.is_some() {
        flags |= OFFSET;
    }
    if o.var {
        flags |= VAROFFSET;
    }
    if o.eat {
        flags |= EAT;
    }
    let (hmask, hoff) = u.hashkey.unwrap_or((0, 0));
    let mut b = Vec::with_capacity(16 + 16 * u.keys.len());
    b.push(flags);
    b.push(o.shift);
    b.push(u.keys.len() as u8);
    b.push(0);
    b.extend_from_slice(&o.mask.to_be_bytes());
    b.extend_from_slice(&(o.plus.unwrap_or(0) as u16).to_ne_bytes());
    b.extend_from_slice(&o.at.to_ne_bytes());
    b.extend_from_slice(&(hoff as i16).to_ne_bytes());
    b.extend_from_slice(&hmask.to_be_bytes());
    for k in &u.keys {
        b.extend_from_slice(&k.mask.to_be_bytes());
        b.extend_from_slice(&(k.val & k.mask).to_be_bytes());
        b.extend_from_slice(&k.off.to_ne_bytes());
        b.extend_from_slice(&(if k.nexthdr { -1i32 } else { 0 }).to_ne_bytes());
    }
    b
}

/// A u32 key as `tc -p` decodes it for IPv4 and IPv6 filters (f_u32.c's print_ipv4 and
/// print_ipv6 in iproute2 6.1): header fields it knows, IPv4-style addresses even for IPv6, a
/// missing line break before `match dport`, and nothing at all for any other key.
fn u32_key_pretty(k: &U32Key, ipv4: bool) -> String {
    let bits = (k.mask.leading_ones() + k.mask.trailing_zeros() == 32).then(|| k.mask.leading_ones());
    match (k.off, k.mask) {
        (0, 0x0f00_0000) => format!("\n  match IP ihl {}", k.val >> 24),
        (0, 0x00ff_0000) => match k.val >> 16 {
            0 => "\n  match IP dsfield 0".into(),
            v => format!("\n  match IP dsfield {v:#x}"),
        },
        (8, 0x00ff_0000) => format!("\n  match IP protocol {}", k.val >> 16),
        (12 | 16, _) if bits.is_some() => format!(
            "\n  match IP {} {}/{}",
            if k.off == 12 { "src" } else { "dst" },
            std::net::Ipv4Addr::from(k.val),
            bits.unwrap_or(0)
        ),
        (20, 0x0000_ffff) if ipv4 => format!("match dport {}", k.val & 0xffff),
        (20, 0xffff_0000) if ipv4 => format!("\n  match sport {}", k.val >> 16),
        (20, 0xffff_ffff) if ipv4 => {
            format!("\n  match dport {}, match sport {}", k.val & 0xffff, k.val >> 16)
        }
        (20, 0x0000_ffff) => format!("\n  match sport {}", k.val & 0xffff),
        (20, 0xffff_0000) => format!("match dport {}", k.val >> 16),
        (20, 0xffff_ffff) => format!("\n  match sport {}, match dport {}", k.val & 0xffff, k.val >> 16),
        _ => String::new(),
    }
}
