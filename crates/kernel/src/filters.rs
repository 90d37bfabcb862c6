//! Netlink encoding of filters (`RTM_NEWTFILTER`) and reading them back (`RTM_GETTFILTER` dumps).
//!
//! [`filter_msg`] builds the request iproute2 6.1's tc sends for the command Sluice prints for the
//! same filter (`sluice apply --dry-run`, `sluice export`): `tcmsg` with the handle, parent and
//! `prio << 16 | protocol`, `TCA_CHAIN` when the chain is not 0, `TCA_KIND`, then `TCA_OPTIONS`
//! with the attributes in the order tc's parsers (f_u32.c, f_flow.c, f_fw.c, f_matchall.c,
//! f_basic.c) append them for that command. `tests/filters_netlink.rs` checks every kind byte for
//! byte against requests captured from tc (`scripts/filters-netlink-capture.py`).
//!
//! u32 hash tables are sent as `handle H: u32 divisor D`; the root table of each priority is the
//! kernel's own (made with the priority's first u32 filter) and is not sent. Key nodes always
//! name their table and bucket (`TCA_U32_HASH`, tc's `ht`), so a `sample` bucket is kept.
//! Ematch trees (`basic ... match`, `flow ... match`) are sent as tc's `parse_ematch` flattens
//! them (containers' sub-sequences after the top level, in the order met); `cmp`, `u32` and
//! `nbyte` matches are encoded, `meta` and `canid` are not: [`unencoded`] names them and the plan
//! refuses them before anything is sent.

use crate::actions::{self, ActionEncodeError};
use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TcObject};
use crate::Error;
use sluice_core::filter::basic::{EmKind, Ematch, Opnd, Relation};
use sluice_tc::model::{Action, FilterNode, FilterOpts, U32Opts};

/// `TCA_CHAIN` (linux/rtnetlink.h).
pub const TCA_CHAIN: u16 = 11;

mod u32a {
    pub const CLASSID: u16 = 1;
    pub const HASH: u16 = 2;
    pub const LINK: u16 = 3;
    pub const DIVISOR: u16 = 4;
    pub const SEL: u16 = 5;
    pub const POLICE: u16 = 6;
    pub const ACT: u16 = 7;
    pub const INDEV: u16 = 8;
    pub const TERMINAL: u8 = 1;
    pub const OFFSET: u8 = 2;
    pub const VAROFFSET: u8 = 4;
    pub const EAT: u8 = 8;
}

mod fwa {
    pub const CLASSID: u16 = 1;
    pub const POLICE: u16 = 2;
    pub const ACT: u16 = 4;
    pub const MASK: u16 = 5;
}

mod flowa {
    pub const KEYS: u16 = 1;
    pub const MODE: u16 = 2;
    pub const BASECLASS: u16 = 3;
    pub const RSHIFT: u16 = 4;
    pub const ADDEND: u16 = 5;
    pub const MASK: u16 = 6;
    pub const XOR: u16 = 7;
    pub const DIVISOR: u16 = 8;
    pub const ACT: u16 = 9;
    pub const POLICE: u16 = 10;
    pub const EMATCHES: u16 = 11;
    pub const PERTURB: u16 = 12;
    pub const MODE_MAP: u32 = 0;
    pub const MODE_HASH: u32 = 1;
}

mod mall {
    pub const CLASSID: u16 = 1;
    pub const ACT: u16 = 2;
    pub const FLAGS: u16 = 3;
    pub const SKIP_HW: u32 = 1;
}

mod basica {
    pub const CLASSID: u16 = 1;
    pub const EMATCHES: u16 = 2;
    pub const ACT: u16 = 3;
    pub const POLICE: u16 = 4;
}

/// `TCA_EMATCH_TREE_*` and the ematch kinds (`/etc/iproute2/ematch_map`).
mod em {
    pub const TREE_HDR: u16 = 1;
    pub const TREE_LIST: u16 = 2;
    pub const CONTAINER: u16 = 0;
    pub const CMP: u16 = 1;
    pub const NBYTE: u16 = 2;
    pub const U32: u16 = 3;
    pub const REL_AND: u16 = 1;
    pub const REL_OR: u16 = 2;
    pub const INVERT: u16 = 4;
    pub const CMP_TRANS: u8 = 1;
}

/// The ematch tree of `f` (basic, flow), read back from the model's canonical text.
fn ematch_tree(f: &FilterNode) -> Option<Result<Vec<Ematch>, String>> {
    let text = match &f.opts {
        FilterOpts::Basic(b) => b.ematch.as_deref(),
        FilterOpts::Flow(fl) => fl.ematch.as_deref(),
        _ => None,
    }?;
    Some(sluice_tc::tc::ematch::parse_text(text))
}

/// The first match kind of `tree` (at any depth) that is not encoded.
fn unencoded_match(tree: &[Ematch]) -> Option<&'static str> {
    tree.iter().find_map(|e| match &e.kind {
        EmKind::Container(c) => unencoded_match(c),
        EmKind::Meta(_) => Some("meta"),
        EmKind::Canid(_) => Some("canid"),
        EmKind::Cmp(_) | EmKind::U32(_) | EmKind::Nbyte(_) => None,
    })
}

/// What of `f` the encoder cannot send, if anything (checked by the plan before anything is sent).
pub fn unencoded(f: &FilterNode) -> Option<String> {
    let bad = |what: &str| Some(format!("{} filter prio {} {what}", f.opts.kind(), f.prio));
    match ematch_tree(f) {
        Some(Err(e)) => return bad(&format!("ematch ({e})")),
        Some(Ok(t)) => {
            if let Some(k) = unencoded_match(&t) {
                return bad(&format!("ematch `{k}(...)`"));
            }
        }
        None => {}
    }
    match &f.opts {
        FilterOpts::Flow(fl) if fl.keys >> sluice_tc::model::FLOW_KEYS.len() != 0 => {
            bad("tunnel keys (Sluice's own, not the kernel's)")
        }
        FilterOpts::U32(u) if u.keys.len() > 128 => bad("with more than 128 keys"),
        _ => None,
    }
}

/// The kernel's parent handle of `f` (`ingress`/`egress` are clsact's minors).
pub fn kernel_parent(f: &FilterNode) -> Option<u32> {
    f.parent.to_tc()
}

/// A model class id as the kernel's 32-bit one (the plan has refused wider ones).
fn classid(h: sluice_core::Handle) -> u32 {
    h.to_tc().unwrap_or(0)
}

/// Whether `f` is a u32 root hash table, which the kernel makes itself with its priority's first
/// u32 filter (so it is never sent).
pub fn is_implicit(f: &FilterNode) -> bool {
    matches!(f.opts, FilterOpts::U32Table { .. }) && f.handle >> 20 >= 0x800
}

/// The `RTM_NEWTFILTER` request for `f` on interface `ifindex` with `msg_flags` (tc's `filter add`
/// is `REQUEST | ACK | EXCL | CREATE`). `ifindex_of` names mirred's target devices.
pub fn filter_msg(
    ifindex: i32,
    f: &FilterNode,
    msg_flags: u16,
    ifindex_of: &dyn Fn(&str) -> Option<u32>,
) -> Result<Msg, ActionEncodeError> {
    let info = (f.prio as u32) << 16 | f.protocol.to_be() as u32;
    let tc = TcMsg { ifindex, handle: f.handle, parent: kernel_parent(f).unwrap_or(0), info };
    let mut m = Msg::tc(rtm::NEWTFILTER, msg_flags, tc);
    if f.chain != 0 {
        m.attr(TCA_CHAIN, &f.chain.to_ne_bytes());
    }
    m.attr_str(tca::KIND, f.opts.kind());
    let acts: Vec<(&Action, Option<&str>)> = f.actions.iter().map(|a| (a, None)).collect();
    // The filter's actions: its own `police` keyword (TCA_*_POLICE) or an action list.
    let actions = |m: &mut Msg, act: u16, police: u16| -> Result<(), ActionEncodeError> {
        match (f.police_keyword, f.actions.first()) {
            (true, Some(a)) => actions::encode_police_keyword(m, police, a),
            _ if acts.is_empty() => Ok(()),
            _ => actions::encode_actions(m, act, &acts, ifindex_of),
        }
    };
    match &f.opts {
        FilterOpts::U32Table { divisor } => {
            m.begin_nest(tca::OPTIONS);
            m.attr(u32a::DIVISOR, &divisor.to_ne_bytes());
            m.end_nest();
        }
        FilterOpts::U32(u) => {
            m.begin_nest(tca::OPTIONS);
            if let Some(l) = u.link {
                m.attr(u32a::LINK, &l.to_ne_bytes());
            }
            if let Some(d) = &u.indev {
                m.attr_str(u32a::INDEV, d);
            }
            if let Some(c) = u.classid {
                m.attr(u32a::CLASSID, &classid(c).to_ne_bytes());
            }
            actions(&mut m, u32a::ACT, u32a::POLICE)?;
            let htid = f.handle & 0xFFFF_F000;
            if htid != 0 {
                m.attr(u32a::HASH, &htid.to_ne_bytes());
            }
            if !u.keys.is_empty() {
                m.attr(u32a::SEL, &u32_selector(u, u.classid.is_some() || !f.actions.is_empty()));
            }
            m.end_nest();
        }
        FilterOpts::Flow(fl) => {
            m.begin_nest(tca::OPTIONS);
            m.attr(flowa::KEYS, &fl.keys.to_ne_bytes());
            for (ty, v) in [
                (flowa::RSHIFT, fl.rshift),
                (flowa::ADDEND, fl.addend),
                (flowa::DIVISOR, fl.divisor),
                (flowa::PERTURB, fl.perturb),
                (flowa::BASECLASS, fl.baseclass.map(classid)),
            ] {
                if let Some(v) = v {
                    m.attr(ty, &v.to_ne_bytes());
                }
            }
            if let Some(Ok(tree)) = ematch_tree(f) {
                encode_ematches(&mut m, flowa::EMATCHES, &tree);
            }
            actions(&mut m, flowa::ACT, flowa::POLICE)?;
            let mode = if fl.hash { flowa::MODE_HASH } else { flowa::MODE_MAP };
            m.attr(flowa::MODE, &mode.to_ne_bytes());
            if fl.mask != u32::MAX || fl.xor != 0 {
                m.attr(flowa::MASK, &fl.mask.to_ne_bytes());
                m.attr(flowa::XOR, &fl.xor.to_ne_bytes());
            }
            m.end_nest();
        }
        FilterOpts::Fw(fw) => {
            // tc sends no options at all for a bare `handle H[/M] fw`.
            if fw.classid.is_some() || !f.actions.is_empty() {
                m.begin_nest(tca::OPTIONS);
                if let Some(mask) = fw.mask {
                    m.attr(fwa::MASK, &mask.to_ne_bytes());
                }
                if let Some(c) = fw.classid {
                    m.attr(fwa::CLASSID, &classid(c).to_ne_bytes());
                }
                actions(&mut m, fwa::ACT, fwa::POLICE)?;
                m.end_nest();
            }
        }
        FilterOpts::Matchall(ma) => {
            if ma.classid.is_some() || !f.actions.is_empty() || ma.skip_hw {
                m.begin_nest(tca::OPTIONS);
                if let Some(c) = ma.classid {
                    m.attr(mall::CLASSID, &classid(c).to_ne_bytes());
                }
                // matchall has no TCA_MATCHALL_POLICE: its `police` keyword is tc's `action police`.
                if !acts.is_empty() {
                    actions::encode_actions(&mut m, mall::ACT, &acts, ifindex_of)?;
                }
                if ma.skip_hw {
                    m.attr(mall::FLAGS, &mall::SKIP_HW.to_ne_bytes());
                }
                m.end_nest();
            }
        }
        FilterOpts::Basic(b) => {
            if b.classid.is_some() || !f.actions.is_empty() || b.ematch.is_some() {
                m.begin_nest(tca::OPTIONS);
                if let Some(Ok(tree)) = ematch_tree(f) {
                    encode_ematches(&mut m, basica::EMATCHES, &tree);
                }
                if let Some(c) = b.classid {
                    m.attr(basica::CLASSID, &classid(c).to_ne_bytes());
                }
                actions(&mut m, basica::ACT, basica::POLICE)?;
                m.end_nest();
            }
        }
    }
    Ok(m)
}

/// An ematch tree as tc's `parse_ematch` sends it: `TCA_EMATCH_TREE_HDR` (match count, program
/// 0), then `TCA_EMATCH_TREE_LIST` with one nest per match, numbered from 1 in flattened order
/// (the top-level sequence, then each container's sub-sequence appended as it is met); each is
/// `struct tcf_ematch_hdr` (kind, relation and invert flags) and the match's own struct, a
/// container's being the index of its sub-sequence's first match.
fn encode_ematches(m: &mut Msg, nest: u16, tree: &[Ematch]) {
    fn flatten<'a>(seq: &'a [Ematch], base: usize, list: &mut Vec<(&'a Ematch, u32)>) {
        for (k, e) in seq.iter().enumerate() {
            if let EmKind::Container(child) = &e.kind {
                let start = list.len();
                list[base + k].1 = start as u32;
                list.extend(child.iter().map(|c| (c, 0)));
                flatten(child, start, list);
            }
        }
    }
    let mut list: Vec<(&Ematch, u32)> = tree.iter().map(|e| (e, 0)).collect();
    flatten(tree, 0, &mut list);
    m.begin_nest(nest);
    let mut hdr = Vec::with_capacity(4);
    hdr.extend_from_slice(&(list.len() as u16).to_ne_bytes());
    hdr.extend_from_slice(&0u16.to_ne_bytes());
    m.attr(em::TREE_HDR, &hdr);
    m.begin_nest(em::TREE_LIST);
    for (i, (e, child)) in list.iter().enumerate() {
        let mut flags = match e.rel {
            Relation::End => 0,
            Relation::And => em::REL_AND,
            Relation::Or => em::REL_OR,
        };
        if e.invert {
            flags |= em::INVERT;
        }
        let mut b = Vec::with_capacity(24);
        let kind = match &e.kind {
            EmKind::Container(_) => em::CONTAINER,
            EmKind::Cmp(_) => em::CMP,
            EmKind::Nbyte(_) => em::NBYTE,
            EmKind::U32(_) => em::U32,
            // Refused by the plan (`unencoded`).
            EmKind::Meta(_) | EmKind::Canid(_) => u16::MAX,
        };
        b.extend_from_slice(&0u16.to_ne_bytes()); // matchid
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        match &e.kind {
            EmKind::Container(_) => b.extend_from_slice(&child.to_ne_bytes()),
            EmKind::Cmp(c) => {
                b.extend_from_slice(&c.val.to_ne_bytes());
                b.extend_from_slice(&c.mask.to_ne_bytes());
                b.extend_from_slice(&c.off.to_ne_bytes());
                let trans = if c.trans { em::CMP_TRANS } else { 0 };
                b.push((c.align & 0xF) | trans << 4);
                let opnd = match c.opnd {
                    Opnd::Eq => 0u8,
                    Opnd::Gt => 1,
                    Opnd::Lt => 2,
                };
                b.push((c.layer & 0xF) | opnd << 4);
            }
            EmKind::Nbyte(n) => {
                b.extend_from_slice(&n.off.to_ne_bytes());
                let len_layer = (n.needle.len() as u16 & 0xFFF) | (n.layer as u16 & 0xF) << 12;
                b.extend_from_slice(&len_layer.to_ne_bytes());
                b.extend_from_slice(&n.needle);
            }
            EmKind::U32(k) => {
                b.extend_from_slice(&k.mask.to_be_bytes());
                b.extend_from_slice(&(k.val & k.mask).to_be_bytes());
                b.extend_from_slice(&k.off.to_ne_bytes());
                b.extend_from_slice(&(if k.nexthdr { -1i32 } else { 0 }).to_ne_bytes());
            }
            EmKind::Meta(_) | EmKind::Canid(_) => {}
        }
        // tc appends each part with its padding (`addraw_l`), and the nest's length counts it.
        b.resize(b.len().next_multiple_of(4), 0);
        m.attr(i as u16 + 1, &b);
    }
    m.end_nest();
    m.end_nest();
}

/// `struct tc_u32_sel` followed by its keys (`struct tc_u32_key`), values and masks in network
/// order as tc packs them.
fn u32_selector(u: &U32Opts, terminal: bool) -> Vec<u8> {
    let mut flags = if terminal { u32a::TERMINAL } else { 0 };
    let o = u.offset.unwrap_or_default();
    if o.plus.is_some() {
        flags |= u32a::OFFSET;
    }
    if o.var {
        flags |= u32a::VAROFFSET;
    }
    if o.eat {
        flags |= u32a::EAT;
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

/// A filter as the kernel dumps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KFilter {
    /// Parent (block) handle.
    pub parent: u32,
    /// Priority.
    pub prio: u16,
    /// Protocol (host order).
    pub protocol: u16,
    /// Chain.
    pub chain: u32,
    /// Handle (0 for the classifier instance itself, which the kernel dumps first).
    pub handle: u32,
    /// Kind.
    pub kind: String,
    /// The class it names (`*_CLASSID`), as the kernel holds it.
    pub classid: Option<u32>,
    /// u32: hash-table divisor (tables only).
    pub divisor: Option<u32>,
    /// u32: `link`.
    pub link: Option<u32>,
    /// u32: keys as (value, mask, offset, offmask), value and mask in host order.
    pub keys: Vec<(u32, u32, i32, i32)>,
    /// fw: mask.
    pub mask: Option<u32>,
}

fn decode_filter(o: &TcObject) -> KFilter {
    let kind = o.kind_str();
    let opts = o.options();
    let u = |ty: u16| netlink::find(opts, ty).and_then(|b| netlink::u32_at(b, 0));
    let mut k = KFilter {
        parent: o.tc.parent,
        prio: (o.tc.info >> 16) as u16,
        protocol: u16::from_be(o.tc.info as u16),
        chain: netlink::find(&o.attrs, TCA_CHAIN).and_then(|b| netlink::u32_at(b, 0)).unwrap_or(0),
        handle: o.tc.handle,
        kind: kind.clone(),
        classid: None,
        divisor: None,
        link: None,
        keys: Vec::new(),
        mask: None,
    };
    match kind.as_str() {
        "u32" => {
            k.classid = u(u32a::CLASSID);
            k.divisor = u(u32a::DIVISOR);
            k.link = u(u32a::LINK);
            if let Some(sel) = netlink::find(opts, u32a::SEL) {
                let n = sel.get(2).copied().unwrap_or(0) as usize;
                for i in 0..n {
                    let at = 16 + 16 * i;
                    let be = |off| netlink::u32_at(sel, off).map(u32::from_be);
                    if let (Some(mask), Some(val), Some(off), Some(om)) =
                        (be(at), be(at + 4), netlink::u32_at(sel, at + 8), netlink::u32_at(sel, at + 12))
                    {
                        k.keys.push((val, mask, off as i32, om as i32));
                    }
                }
            }
        }
        "fw" => {
            k.classid = u(fwa::CLASSID);
            k.mask = u(fwa::MASK);
        }
        "matchall" => k.classid = u(mall::CLASSID),
        "basic" => k.classid = u(basica::CLASSID),
        "flow" => k.classid = u(flowa::BASECLASS),
        _ => {}
    }
    k
}

/// Every filter the kernel holds on `parent` (a qdisc, a class, or clsact's ingress/egress) of
/// interface `ifindex`, every chain, in dump order; the classifier instances themselves (handle 0)
/// are left out.
pub fn dump_filters(nl: &mut Netlink, ifindex: i32, parent: u32) -> Result<Vec<KFilter>, Error> {
    let mut m =
        Msg::tc(rtm::GETTFILTER, flags::REQUEST | flags::DUMP, TcMsg { ifindex, handle: 0, parent, info: 0 });
    let objs = nl.dump(&mut m)?;
    Ok(objs
        .iter()
        .filter(|o| o.kind == rtm::NEWTFILTER && o.tc.ifindex == ifindex && o.tc.handle != 0)
        .map(decode_filter)
        .collect())
}

/// Every filter of `dev` (calling thread's namespace): on each qdisc and class the kernel reports,
/// and on clsact's two hooks.
pub fn read_filters(dev: &str) -> Result<Vec<KFilter>, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    let mut parents = Vec::new();
    for ty in [rtm::GETQDISC, rtm::GETTCLASS] {
        let objs =
            nl.dump(&mut Msg::tc(ty, flags::REQUEST | flags::DUMP, TcMsg { ifindex, ..TcMsg::default() }))?;
        for o in objs.iter().filter(|o| o.tc.ifindex == ifindex && o.tc.handle != 0) {
            match o.kind_str().as_str() {
                "clsact" => parents.extend([0xFFFF_FFF2, 0xFFFF_FFF3]),
                _ => parents.push(o.tc.handle),
            }
        }
    }
    parents.dedup();
    let mut out = Vec::new();
    for p in parents {
        out.extend(dump_filters(&mut nl, ifindex, p)?);
    }
    Ok(out)
}

/// How the kernel's filters differ from the model's (`filters`): one line per model filter the
/// kernel lacks or holds differently. u32 root tables are the kernel's own and not compared.
pub fn compare(filters: &[&FilterNode], kernel: &[KFilter]) -> Vec<String> {
    let mut out = Vec::new();
    for f in filters.iter().filter(|f| !is_implicit(f)) {
        let parent = kernel_parent(f).unwrap_or(0);
        let what = format!("{} filter prio {} handle {:#x} on {parent:#x}", f.opts.kind(), f.prio, f.handle);
        // A node of a priority's root table: the kernel numbers the table (see `fdiff`).
        let root_node = |h: u32| matches!(f.opts, FilterOpts::U32(_)) && h >> 20 >= 0x800;
        let same_handle = |h: u32| {
            h == f.handle || (root_node(h) && root_node(f.handle) && h & 0xF_FFFF == f.handle & 0xF_FFFF)
        };
        let Some(k) = kernel.iter().find(|k| {
            k.parent == parent
                && same_handle(k.handle)
                && k.kind == f.opts.kind()
                && k.chain == f.chain
                && k.prio == f.prio
        }) else {
            out.push(format!("{what}: missing in the kernel"));
            continue;
        };
        let mut diffs = Vec::new();
        if k.prio != f.prio {
            diffs.push(format!("prio {} (model {})", k.prio, f.prio));
        }
        if k.protocol != f.protocol {
            diffs.push(format!("protocol {:#06x} (model {:#06x})", k.protocol, f.protocol));
        }
        let want_class = match &f.opts {
            FilterOpts::Flow(fl) => fl.baseclass.map(classid),
            o => o.classid().map(classid),
        };
        if k.classid != want_class {
            diffs.push(format!("class {:?} (model {:?})", k.classid, want_class));
        }
        match &f.opts {
            FilterOpts::U32Table { divisor } if k.divisor != Some(*divisor) => {
                diffs.push(format!("divisor {:?} (model {divisor})", k.divisor))
            }
            FilterOpts::U32(u) => {
                let want: Vec<(u32, u32, i32, i32)> = u
                    .keys
                    .iter()
                    .map(|x| (x.val & x.mask, x.mask, x.off, if x.nexthdr { -1 } else { 0 }))
                    .collect();
                if k.keys != want {
                    diffs.push(format!("keys {:x?} (model {want:x?})", k.keys));
                }
                if k.link != u.link {
                    diffs.push(format!("link {:?} (model {:?})", k.link, u.link));
                }
            }
            FilterOpts::Fw(fw) if fw.mask.is_some() && k.mask != fw.mask => {
                diffs.push(format!("mask {:?} (model {:?})", k.mask, fw.mask))
            }
            _ => {}
        }
        if !diffs.is_empty() {
            out.push(format!("{what}: {}", diffs.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::kernel::{script_state, Plan};
    use sluice_tc::burst::BurstPolicy;

    #[test]
    fn ematches_are_refused_before_anything_is_sent() {
        let st = script_state(
            "tc qdisc add dev $DEV root handle 1: htb default 1\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
             tc filter add dev $DEV parent 1: prio 3 handle 1 basic match 'meta(priority eq 1)' classid 1:1\n",
            &[("DEV", "eth0")],
        )
        .unwrap();
        let e = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap_err().to_string();
        assert!(e.contains("basic filter prio 3 ematch `meta(...)`") && e.contains("not encoded"), "{e}");
    }
}
