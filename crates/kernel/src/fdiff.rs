//! Filters in the difference between the kernel's tree and a wanted one ([`crate::plan::diff_all`]).
//!
//! Every filter, wanted or held, is a [`RawFilter`]: its block (the qdisc, class or clsact hook it
//! hangs from), chain, priority, protocol, handle, kind and `TCA_OPTIONS`. A model filter becomes
//! one through the request `filters::filter_msg` builds (so what is sent is what tc sends); a
//! kernel filter is read with an `RTM_GETTFILTER` dump of each block ([`dump_filters`]), which
//! is also the snapshot a refused apply restores.
//!
//! Identity is (block, chain, priority, handle), with one exception: a u32 key node of a
//! priority's own root table (the table the kernel makes with the priority's first u32 filter,
//! numbered by a per-qdisc counter that does not restart: `800:` on a fresh qdisc, maybe `801:`
//! after a priority was deleted and made again) is identified by its bucket and node only, and is
//! added with its node number alone and no `TCA_U32_HASH` ("the root table of this priority", as
//! tc sends a filter without `ht`). Root tables themselves are never sent, compared or deleted.
//!
//! Per filter:
//! - held with the same options (compared attribute by attribute, by meaning; the actions of a
//!   kernel filter carry indices and counters, so a filter with actions is compared to the model's
//!   as "changed" and replaced in place every time — safe, not minimal): nothing;
//! - other options: replaced in place (`NLM_F_CREATE` on the existing handle; u32, fw, basic and
//!   flow swap the filter atomically, traffic keeps being classified); what the kernel cannot
//!   change in place is deleted first and added again: a matchall filter (`EEXIST`), a u32 key
//!   node's keys or flags (a replaced node keeps the old selector);
//! - another kind or protocol at that priority, another divisor for a u32 hash table, another fw
//!   mask: the kernel cannot change that in place, so the whole priority is deleted first and its
//!   filters added again (not hitless);
//! - in the kernel only: deleted; u32 hash tables last of all (after the nodes in them and the
//!   links to them, and after the class deletes);
//! - in the model only: added, in the model's order (tables before the nodes in them).
//!
//! A filter pointing at a class that is deleted to be re-created is deleted first (HTB refuses to
//! delete a class filters point at: `EBUSY`) and added again; filters of a qdisc or class that is
//! deleted go with it.

use crate::filters::{kernel_parent, TCA_CHAIN};
use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg};
use crate::plan::{Key, RawObj};
use crate::Error;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use sluice_core::Handle;
use sluice_model::kinds::filter_common::FilterNl;
use sluice_model::print::filter_parent_str;
use sluice_tc::model::{FilterNode, FilterOpts};

/// `RTM_DELTFILTER`.
const DELTFILTER: u16 = 45;
/// clsact's hooks as filter parents.
pub const CLSACT_INGRESS: u32 = 0xFFFF_FFF2;
/// clsact's egress hook.
pub const CLSACT_EGRESS: u32 = 0xFFFF_FFF3;
/// `TC_U32_ROOT`: "the root table of this priority" in an identity.
const U32_ROOT: u32 = 0xFFF0_0000;

/// A filter's identity: (block, chain, priority, handle), a root-table node's handle with the
/// table number [`U32_ROOT`].
pub type FKey = (u32, u32, u16, u32);

/// A filter, as the kernel dumped it or as a request builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFilter {
    /// Block: a qdisc handle, a class id, or clsact's hook.
    pub parent: u32,
    /// Chain.
    pub chain: u32,
    /// Priority (0 with handle 0: a whole-priority delete).
    pub prio: u16,
    /// Protocol, host order.
    pub protocol: u16,
    /// Handle (0: the priority's classifier itself, for a whole-priority delete).
    pub handle: u32,
    /// Kind.
    pub kind: String,
    /// `TCA_OPTIONS`.
    pub options: Option<Vec<u8>>,
    /// Read from the kernel (options as the kernel reports them) rather than built as a request.
    pub dumped: bool,
}

/// What the kind registry says of `kind`'s attributes (`None`: a kind Sluice does not know;
/// its options are compared whole).
fn nl(kind: &str) -> Option<&'static FilterNl> {
    FilterOpts::nl(kind)
}

/// Whether `kind`'s handles are u32's `ht:bucket:node` with hash tables ([`FilterNl::tables`]).
fn has_tables(kind: &str) -> bool {
    nl(kind).is_some_and(|n| n.tables.is_some())
}

/// Whether a handle of `kind` is a u32 hash table (node 0).
fn is_table(kind: &str, handle: u32) -> bool {
    has_tables(kind) && handle & 0xFFF == 0
}

/// Whether a u32 handle lies in a priority's root table (numbered from `800:` by the kernel).
fn in_root_table(kind: &str, handle: u32) -> bool {
    has_tables(kind) && handle >> 20 >= 0x800
}

impl RawFilter {
    /// The identity.
    pub fn key(&self) -> FKey {
        let h = if in_root_table(&self.kind, self.handle) {
            U32_ROOT | self.handle & 0xF_FFFF
        } else {
            self.handle
        };
        (self.parent, self.chain, self.prio, h)
    }

    fn prio_key(&self) -> (u32, u32, u16) {
        (self.parent, self.chain, self.prio)
    }

    /// A u32 root table (the kernel's own, never sent).
    fn is_root_table(&self) -> bool {
        in_root_table(&self.kind, self.handle) && is_table(&self.kind, self.handle)
    }

    /// For a person: `filter u32 prio 1 handle 800::800 on 1:`.
    pub fn label(&self) -> String {
        let h = if has_tables(&self.kind) {
            let (t, b, n) = (self.handle >> 20, self.handle >> 12 & 0xFF, self.handle & 0xFFF);
            match (b, n) {
                (0, 0) => format!("{t:x}:"),
                (0, n) => format!("{t:x}::{n:x}"),
                (b, n) => format!("{t:x}:{b:x}:{n:x}"),
            }
        } else {
            format!("{:#x}", self.handle)
        };
        let chain = if self.chain != 0 { format!(" chain {}", self.chain) } else { String::new() };
        format!(
            "filter {} prio {}{chain} handle {h} on {}",
            self.kind,
            self.prio,
            filter_parent_str(Handle::from_tc(self.parent))
        )
    }

    /// The object whose deletion takes this filter's block with it.
    fn block_key(&self) -> Key {
        block_key(self.parent)
    }

    /// The class this filter sends traffic to, if it names one.
    fn classid(&self) -> Option<u32> {
        let ty = match nl(&self.kind) {
            Some(n) => n.classid?,
            // Kinds not in the registry yet that name a class (cls_route, cls_bpf).
            None if matches!(self.kind.as_str(), "route" | "bpf") => 1,
            None => return None,
        };
        netlink::find(self.options.as_deref()?, ty).and_then(|b| netlink::u32_at(b, 0))
    }

    /// The request that adds it (`EXCL`: it must not exist) or replaces it (on `handle`, the
    /// kernel's).
    fn msg(&self, ifindex: i32, replace_handle: Option<u32>) -> Msg {
        let (fl, handle) = match replace_handle {
            Some(h) => (flags::REQUEST | flags::ACK | flags::CREATE, h),
            None => (flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE, self.add_handle()),
        };
        let info = (self.prio as u32) << 16 | self.protocol.to_be() as u32;
        let mut m = Msg::tc(rtm::NEWTFILTER, fl, TcMsg { ifindex, handle, parent: self.parent, info });
        if self.chain != 0 {
            m.attr(TCA_CHAIN, &self.chain.to_ne_bytes());
        }
        m.attr_str(tca::KIND, &self.kind);
        if let Some(o) = &self.options {
            let o = self.request_options(o, replace_handle.is_none());
            m.begin_nest(tca::OPTIONS);
            m.raw(&o);
            m.end_nest();
        }
        m
    }

    /// The handle an add names: a root-table node by its node number alone.
    fn add_handle(&self) -> u32 {
        if in_root_table(&self.kind, self.handle) && !is_table(&self.kind, self.handle) {
            self.handle & 0xFFF
        } else {
            self.handle
        }
    }

    /// `TCA_OPTIONS` as a request carries them: an add into a root table names no table; what a
    /// dump adds (counters, the kernel's "not in hardware" flags) is left out.
    fn request_options(&self, o: &[u8], add: bool) -> Vec<u8> {
        let root_node = in_root_table(&self.kind, self.handle) && !is_table(&self.kind, self.handle);
        let mut m = Msg::tc(0, 0, TcMsg::default());
        let n = nl(&self.kind);
        for a in netlink::attrs(o) {
            let keep = match n {
                None => true,
                Some(n) if n.tables == Some(a.ty) => !(add && root_node),
                Some(n) if n.dump_only.contains(&a.ty) => false,
                Some(n) if n.flags == Some(a.ty) => {
                    let f = netlink::u32_at(a.data, 0).unwrap_or(0) & CLS_FLAGS_USER;
                    if f != 0 {
                        m.attr(a.ty, &f.to_ne_bytes());
                    }
                    false
                }
                Some(_) => true,
            };
            if keep {
                m.attr(a.ty, a.data);
            }
        }
        m.bytes()[36..].to_vec()
    }

    /// The request that deletes it (handle 0: the whole priority).
    fn delete_msg(&self, ifindex: i32) -> Msg {
        let info = (self.prio as u32) << 16 | self.protocol.to_be() as u32;
        let mut m = Msg::tc(
            DELTFILTER,
            flags::REQUEST | flags::ACK,
            TcMsg { ifindex, handle: self.handle, parent: self.parent, info },
        );
        if self.chain != 0 {
            m.attr(TCA_CHAIN, &self.chain.to_ne_bytes());
        }
        m.attr_str(tca::KIND, &self.kind);
        m
    }

    /// The request the probe sends on a scratch device's clsact egress hook: the same kind and
    /// options, with nothing that names other objects (tables, links, mirred's devices).
    pub(crate) fn probe_msg(&self) -> Msg {
        let mut p = self.clone();
        p.parent = CLSACT_EGRESS;
        p.chain = 0;
        p.handle = 0;
        p.prio = 1;
        let mirred = action_kinds(&self.kind, self.options.as_deref()).iter().any(|k| k == "mirred");
        p.options = self.options.as_deref().map(|o| {
            let mut m = Msg::tc(0, 0, TcMsg::default());
            for a in netlink::attrs(o) {
                let drop = nl(&self.kind).is_some_and(|n| n.refs.contains(&a.ty))
                    || (mirred && is_action_type(&self.kind, a.ty));
                if !drop {
                    m.attr(a.ty, a.data);
                }
            }
            m.bytes()[36..].to_vec()
        });
        if is_table(&self.kind, self.handle) && !in_root_table(&self.kind, self.handle) {
            p.handle = 0x0010_0000;
        }
        p.msg(0, None)
    }
}

/// `TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW`: the flags a request may carry.
const CLS_FLAGS_USER: u32 = 3;

/// The object a block belongs to (clsact's hooks: the ingress-slot qdisc `ffff:`).
pub fn block_key(parent: u32) -> Key {
    match parent {
        CLSACT_INGRESS | CLSACT_EGRESS => (true, 0xFFFF_0000),
        p if p & 0xFFFF == 0 => (true, p),
        p => (false, p),
    }
}

/// Whether `ty` holds actions in a `kind` filter's options.
fn is_action_type(kind: &str, ty: u16) -> bool {
    let (police, act) = police_and_act(kind);
    Some(ty) == police || Some(ty) == act
}

/// The attribute types compared by value (everything else a dump adds is the kernel's own).
fn compared_types(kind: &str) -> Option<&'static [u16]> {
    nl(kind)?.compared
}

/// The attribute types of a kind's own policer (`*_POLICE`) and action list (`*_ACT`).
fn police_and_act(kind: &str) -> (Option<u16>, Option<u16>) {
    nl(kind).map(|n| (n.police, n.act)).unwrap_or((None, None))
}

/// The kinds of the actions in a filter's options, in order (`police` for the filter's own
/// policer).
fn action_kinds(kind: &str, opts: Option<&[u8]>) -> Vec<String> {
    let Some(opts) = opts else { return Vec::new() };
    let (police, act) = police_and_act(kind);
    let mut out = Vec::new();
    for a in netlink::attrs(opts) {
        if Some(a.ty) == police {
            out.push("police".to_string());
        } else if Some(a.ty) == act {
            for one in netlink::attrs(a.data) {
                let k = netlink::find(one.data, 1)
                    .map(|b| String::from_utf8_lossy(b).trim_end_matches('\0').to_string());
                out.push(k.unwrap_or_default());
            }
        }
    }
    out
}

/// Whether the kernel's filter `have` (same identity) holds what `want` asks for.
pub fn holds(want: &RawFilter, have: &RawFilter) -> bool {
    if want.kind != have.kind || want.protocol != have.protocol {
        return false;
    }
    let (w, h) = (want.options.as_deref().unwrap_or(&[]), have.options.as_deref().unwrap_or(&[]));
    let Some(types) = compared_types(&want.kind) else { return w == h };
    let get = |o: &[u8], ty: u16| netlink::find(o, ty).map(<[u8]>::to_vec);
    let user_flags = |o: &[u8], ty: u16| {
        netlink::find(o, ty).and_then(|b| netlink::u32_at(b, 0)).unwrap_or(0) & CLS_FLAGS_USER
    };
    let n = nl(&want.kind);
    let same = types.iter().all(|&ty| get(w, ty) == get(h, ty))
        && n.and_then(|n| n.flags).is_none_or(|ty| user_flags(w, ty) == user_flags(h, ty))
        && !remake_differs(want, have);
    if !same {
        return false;
    }
    let acts = |o: &[u8]| -> Vec<(u16, Vec<u8>)> {
        netlink::attrs(o)
            .filter(|a| is_action_type(&want.kind, a.ty))
            .map(|a| (a.ty, a.data.to_vec()))
            .collect()
    };
    let (wa, ha) = (acts(w), acts(h));
    match (want.dumped, have.dumped) {
        _ if wa.is_empty() && ha.is_empty() => true,
        (false, false) => wa == ha,
        // Both read from the kernel (a restore's check): the same actions in the same order.
        (true, true) => action_kinds(&want.kind, Some(w)) == action_kinds(&have.kind, Some(h)),
        // A request against a dump: not comparable byte for byte; replaced.
        _ => false,
    }
}

/// Whether `want` and `have` differ in an attribute whose change needs the filter made again
/// ([`FilterNl::remake`]: fw's mask, `0xffffffff` when the options name none).
fn remake_differs(want: &RawFilter, have: &RawFilter) -> bool {
    let Some(n) = nl(&want.kind) else { return false };
    let value = |r: &RawFilter, ty: u16, absent: u32| {
        r.options
            .as_deref()
            .and_then(|o| netlink::find(o, ty))
            .and_then(|b| netlink::u32_at(b, 0))
            .unwrap_or(absent)
    };
    n.remake.iter().any(|&(ty, absent)| value(want, ty, absent) != value(have, ty, absent))
}

/// Whether the kernel can replace `have` by `want` in place: not matchall (one filter per
/// priority, `EEXIST`), and for a u32 key node not its keys or flags (a replaced node keeps the
/// old node's selector: `u32_init_knode` copies it; other flags are `EINVAL`).
fn changeable_in_place(want: &RawFilter, have: &RawFilter) -> bool {
    let opt =
        |r: &RawFilter, ty: u16| r.options.as_deref().and_then(|o| netlink::find(o, ty)).map(<[u8]>::to_vec);
    let Some(n) = nl(&want.kind) else { return true };
    let flags = |r: &RawFilter, ty: u16| {
        opt(r, ty).and_then(|b| netlink::u32_at(&b, 0)).unwrap_or(0) & CLS_FLAGS_USER
    };
    !n.no_change
        && n.kept.iter().all(|&ty| opt(want, ty) == opt(have, ty))
        && n.flags.is_none_or(|ty| flags(want, ty) == flags(have, ty))
}

/// The filters of a plan as requests (ifindex 0), u32 root tables left out. `ifindex_of` names
/// mirred's target devices.
pub fn wants_of_plan<'a>(
    filters: impl Iterator<Item = &'a FilterNode>,
    ifindex_of: &dyn Fn(&str) -> Option<u32>,
) -> Result<Vec<RawFilter>, String> {
    let mut out = Vec::new();
    for f in filters.filter(|f| !crate::filters::is_implicit(f)) {
        let fl = flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE;
        let m = crate::filters::filter_msg(0, f, fl, ifindex_of)
            .map_err(|e| format!("{} filter prio {} handle {:#x}: {e}", f.opts.kind(), f.prio, f.handle))?;
        out.push(RawFilter {
            parent: kernel_parent(f).unwrap_or(0),
            chain: f.chain,
            prio: f.prio,
            protocol: f.protocol,
            handle: f.handle,
            kind: f.opts.kind().to_string(),
            options: m.bytes().get(36..).and_then(|a| netlink::find(a, tca::OPTIONS)).map(<[u8]>::to_vec),
            dumped: false,
        });
    }
    Ok(out)
}

/// Qdisc kinds without filters (no `tcf_block`): their blocks are not read.
fn holds_no_filters(kind: &str) -> bool {
    matches!(
        kind,
        "pfifo"
            | "bfifo"
            | "pfifo_head_drop"
            | "pfifo_fast"
            | "tbf"
            | "codel"
            | "netem"
            | "fq"
            | "red"
            | "pie"
            | "fq_pie"
            | "gred"
            | "mq"
            | "mqprio"
            | "noqueue"
            | "plug"
            | "skbprio"
            | "taprio"
            | "etf"
            | "cbs"
            | "choke"
    )
}

/// The blocks whose filters are read: every qdisc that can hold filters, every class with
/// children (HTB and HFSC consult an inner class's filters; a leaf class's are never consulted
/// and are not read), and `also` (the blocks the model puts filters on).
pub fn blocks(tree: &[RawObj], also: &[u32]) -> Vec<u32> {
    let inner: HashSet<u32> = tree.iter().filter(|r| !r.is_qdisc).map(|r| r.parent).collect();
    let mut out: Vec<u32> = Vec::new();
    for r in tree {
        match (r.is_qdisc, r.kind.as_str()) {
            (true, "clsact") => out.extend([CLSACT_INGRESS, CLSACT_EGRESS]),
            (true, k) if !holds_no_filters(k) => out.push(r.handle),
            (false, _) if inner.contains(&r.handle) => out.push(r.handle),
            _ => {}
        }
    }
    // A set: `also` has one entry per model filter (10 000 on a large tree).
    let held: HashSet<Key> = tree.iter().map(RawObj::key).collect();
    out.extend(also.iter().copied().filter(|p| held.contains(&block_key(*p))));
    let mut seen = HashSet::default();
    out.retain(|p| seen.insert(*p));
    out
}

/// Every filter the kernel holds on `blocks` of interface `ifindex` (every chain), u32 root
/// tables left out.
pub fn dump_filters(nl: &mut Netlink, ifindex: i32, blocks: &[u32]) -> Result<Vec<RawFilter>, Error> {
    let mut out = Vec::new();
    for &parent in blocks {
        let mut m = Msg::tc(
            rtm::GETTFILTER,
            flags::REQUEST | flags::DUMP,
            TcMsg { ifindex, handle: 0, parent, info: 0 },
        );
        for o in nl
            .dump(&mut m)?
            .iter()
            .filter(|o| o.kind == rtm::NEWTFILTER && o.tc.ifindex == ifindex && o.tc.handle != 0)
        {
            let r = RawFilter {
                parent,
                chain: netlink::find(&o.attrs, TCA_CHAIN).and_then(|b| netlink::u32_at(b, 0)).unwrap_or(0),
                prio: (o.tc.info >> 16) as u16,
                protocol: u16::from_be(o.tc.info as u16),
                handle: o.tc.handle,
                kind: o.kind_str(),
                options: netlink::find(&o.attrs, tca::OPTIONS).map(<[u8]>::to_vec),
                dumped: true,
            };
            if !r.is_root_table() {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// What changes among the filters, and how.
#[derive(Debug, Default, Clone)]
pub struct FilterDiff {
    /// Deleted before anything else: whole priorities re-made (handle 0), matchall filters
    /// changed, filters pointing at classes deleted to be re-created.
    pub first: Vec<RawFilter>,
    /// Added (after the qdisc and class adds), in the model's order.
    pub adds: Vec<RawFilter>,
    /// Replaced in place: (wanted, the kernel's handle).
    pub changes: Vec<(RawFilter, u32)>,
    /// Deleted (before the qdisc and class deletes): every filter but u32 hash tables.
    pub deletes: Vec<RawFilter>,
    /// u32 hash tables deleted, last of all. The kernel drops a table's link count only when
    /// the deleted link's memory is freed after an RCU grace period, so a table deleted right
    /// after its last link is refused with `EBUSY` for a moment: these are retried (see
    /// `txn`).
    pub table_deletes: Vec<RawFilter>,
}

impl FilterDiff {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
            && self.adds.is_empty()
            && self.changes.is_empty()
            && self.deletes.is_empty()
            && self.table_deletes.is_empty()
    }

    /// The requests that delete first.
    pub fn first_messages(&self, ifindex: i32) -> impl Iterator<Item = (Msg, bool, String)> + '_ {
        self.first.iter().map(move |r| {
            let what = if r.handle == 0 {
                format!(
                    "delete filter prio {} on {} (to re-create it)",
                    r.prio,
                    filter_parent_str(Handle::from_tc(r.parent))
                )
            } else {
                format!("delete {} (to re-create it)", r.label())
            };
            (r.delete_msg(ifindex), true, what)
        })
    }

    /// The adds and the changes in place.
    pub fn add_messages(&self, ifindex: i32) -> impl Iterator<Item = (Msg, bool, String)> + '_ {
        let adds = self.adds.iter().map(move |r| (r.msg(ifindex, None), false, format!("add {}", r.label())));
        let changes = self
            .changes
            .iter()
            .map(move |(r, h)| (r.msg(ifindex, Some(*h)), false, format!("change {}", r.label())));
        adds.chain(changes)
    }

    /// The deletes, u32 hash tables aside.
    pub fn delete_messages(&self, ifindex: i32) -> impl Iterator<Item = (Msg, bool, String)> + '_ {
        self.deletes.iter().map(move |r| (r.delete_msg(ifindex), true, format!("delete {}", r.label())))
    }

    /// The u32 hash tables' deletes.
    pub fn table_delete_messages(&self, ifindex: i32) -> impl Iterator<Item = (Msg, bool, String)> + '_ {
        self.table_deletes.iter().map(move |r| (r.delete_msg(ifindex), true, format!("delete {}", r.label())))
    }
}

/// The filter requests that turn `have` into `want`. `gone`: qdiscs and classes the object diff
/// deletes (their blocks' filters go with them); `recreated`: the classes among them that are
/// added again (filters elsewhere pointing at them are deleted first and added again).
pub fn diff(
    want: Vec<RawFilter>,
    have: &[RawFilter],
    gone: &HashSet<Key>,
    recreated: &HashSet<u32>,
) -> FilterDiff {
    let mut d = FilterDiff::default();
    let mut have: Vec<&RawFilter> = have.iter().filter(|r| !gone.contains(&r.block_key())).collect();
    // A priority holds one kind and protocol; a u32 table's divisor cannot change.
    let kind_at: HashMap<(u32, u32, u16), (&str, u16)> =
        have.iter().map(|r| (r.prio_key(), (r.kind.as_str(), r.protocol))).collect();
    let by_key: HashMap<FKey, &RawFilter> = have.iter().map(|r| (r.key(), *r)).collect();
    let mut redo: Vec<(u32, u32, u16)> = Vec::new();
    for w in &want {
        let kind_differs = kind_at.get(&w.prio_key()).is_some_and(|&(k, p)| k != w.kind || p != w.protocol);
        // fw's mask is the priority's (`EINVAL` on another one).
        let table_differs = by_key
            .get(&w.key())
            .is_some_and(|h| (is_table(&w.kind, w.handle) && !holds(w, h)) || remake_differs(w, h));
        if (kind_differs || table_differs) && !redo.contains(&w.prio_key()) {
            redo.push(w.prio_key());
        }
    }
    for p in &redo {
        let (kind, protocol) = kind_at[p];
        d.first.push(RawFilter {
            parent: p.0,
            chain: p.1,
            prio: p.2,
            protocol,
            handle: 0,
            kind: kind.to_string(),
            options: None,
            dumped: true,
        });
    }
    have.retain(|r| !redo.contains(&r.prio_key()));
    for r in have.iter().filter(|r| r.classid().is_some_and(|c| recreated.contains(&c))) {
        d.first.push((*r).clone());
    }
    have.retain(|r| !r.classid().is_some_and(|c| recreated.contains(&c)));
    let by_key: HashMap<FKey, &RawFilter> = have.iter().map(|r| (r.key(), *r)).collect();
    let wanted: HashSet<FKey> = want.iter().map(RawFilter::key).collect();
    for w in want {
        match by_key.get(&w.key()) {
            Some(h) if holds(&w, h) => {}
            Some(h) if !changeable_in_place(&w, h) => {
                d.first.push((*h).clone());
                d.adds.push(w);
            }
            Some(h) => d.changes.push((w, h.handle)),
            None => d.adds.push(w),
        }
    }
    for r in have.into_iter().filter(|r| !wanted.contains(&r.key())) {
        // Nodes in a table that goes are deleted too: their classes may go before the table.
        if is_table(&r.kind, r.handle) {
            d.table_deletes.push(r.clone());
        } else {
            d.deletes.push(r.clone());
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{script_state, Plan};
    use sluice_tc::burst::BurstPolicy;

    const TREE: &str = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
        tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
        tc class add dev $DEV parent 1:1 classid 1:10 htb rate 3mbit ceil 10mbit\n\
        tc class add dev $DEV parent 1:1 classid 1:20 htb rate 7mbit ceil 10mbit\n\
        tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.0.1 flowid 1:10\n\
        tc filter add dev $DEV parent 1: protocol ip prio 2 handle 2: u32 divisor 16\n\
        tc filter add dev $DEV parent 1: protocol ip prio 2 u32 ht 2:3: match ip dst 198.18.0.3 flowid 1:20\n";

    fn wants(text: &str) -> Vec<RawFilter> {
        let s = script_state(text, &[("DEV", "eth0")]).unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        wants_of_plan(plan.filter_nodes().map(|(_, f)| f), &|_| None).unwrap()
    }

    #[test]
    fn a_root_table_node_is_the_same_whatever_the_kernel_numbered_the_table() {
        let w = wants(TREE);
        assert_eq!(w.len(), 3, "root tables are not wanted: {w:?}");
        // The kernel made prio 1's root table 801: (a counter that does not restart).
        let have: Vec<RawFilter> = w
            .iter()
            .cloned()
            .map(|mut r| {
                if r.handle >> 20 == 0x800 {
                    r.handle = 0x801 << 20 | r.handle & 0xF_FFFF;
                }
                r
            })
            .collect();
        assert!(diff(w.clone(), &have, &HashSet::default(), &HashSet::default()).is_empty());
        // An add names the node alone and no table.
        let m = w[0].msg(7, None);
        let tc_handle = u32::from_ne_bytes(m.bytes()[24..28].try_into().unwrap());
        assert_eq!(tc_handle, 0x800);
        let opts = netlink::find(&m.bytes()[36..], tca::OPTIONS).unwrap();
        assert!(netlink::find(opts, 2 /* TCA_U32_HASH */).is_none());
        // A node in another table keeps its table.
        let m = w[2].msg(7, None);
        assert_eq!(u32::from_ne_bytes(m.bytes()[24..28].try_into().unwrap()), w[2].handle);
    }

    #[test]
    fn removed_tables_go_last_and_a_new_kind_at_a_priority_remakes_it_first() {
        let have = wants(TREE);
        let only_prio1: String =
            TREE.lines().filter(|l| !l.contains("prio 2")).map(|l| format!("{l}\n")).collect();
        let d = diff(wants(&only_prio1), &have, &HashSet::default(), &HashSet::default());
        assert!(d.first.is_empty() && d.adds.is_empty() && d.changes.is_empty());
        assert_eq!(d.deletes.iter().map(|r| r.handle).collect::<Vec<_>>(), vec![0x0020_3800]);
        assert_eq!(d.table_deletes.iter().map(|r| r.handle).collect::<Vec<_>>(), vec![0x0020_0000]);
        // Another class for the node: in place; other keys: deleted first, then added.
        let d = diff(
            wants(&TREE.replace("0.1 flowid 1:10", "0.1 flowid 1:20")),
            &have,
            &HashSet::default(),
            &HashSet::default(),
        );
        assert_eq!((d.changes.len(), d.first.len(), d.adds.len()), (1, 0, 0));
        let d = diff(
            wants(&TREE.replace("198.18.0.1", "198.18.0.9")),
            &have,
            &HashSet::default(),
            &HashSet::default(),
        );
        assert_eq!((d.changes.len(), d.first.len(), d.adds.len()), (0, 1, 1));
        // prio 1 becomes a basic filter: the whole priority is deleted first.
        let basic = TREE.replace(
            "protocol ip prio 1 u32 match ip dst 198.18.0.1 flowid 1:10",
            "protocol ip prio 1 handle 1 basic classid 1:10",
        );
        let d = diff(wants(&basic), &have, &HashSet::default(), &HashSet::default());
        assert_eq!(d.first.len(), 1);
        assert_eq!((d.first[0].handle, d.first[0].prio, d.first[0].kind.as_str()), (0, 1, "u32"));
        assert_eq!(d.adds.len(), 1);
        // A filter pointing at a class deleted to be re-created goes first and comes back.
        let d = diff(wants(TREE), &have, &HashSet::default(), &[0x1_0020].into_iter().collect());
        assert_eq!((d.first.len(), d.adds.len()), (1, 1));
    }
}
