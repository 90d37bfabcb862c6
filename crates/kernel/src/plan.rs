//! The difference between the kernel's tc tree and a wanted one, as ordered netlink requests.
//!
//! [`dump_tree`] reads a device's qdiscs and classes with their raw `TCA_OPTIONS`. The wanted
//! tree is either a [`Plan`] (the model) or an earlier dump (a snapshot, for rollback): both
//! become [`Want`]s. [`diff`] compares them object by object, by handle:
//!
//! - same kind, same parent, same parameters: nothing is sent;
//! - same kind and parent, other parameters: a `change` in place (`NLM_F_CREATE|NLM_F_REPLACE`
//!   on an existing handle: HTB `htb_change_class`, a qdisc's `change`), queues kept;
//! - missing: an add, parents first;
//! - in the kernel only: a delete, children first (a class's own leaf qdisc and everything inside
//!   a deleted qdisc go with it, so they are not sent);
//! - the kind or the parent differs, or another qdisc holds the slot: the kernel cannot change
//!   that in place (`Invalid qdisc name`), so the old object and its subtree are deleted first
//!   and re-added. This one is not hitless and is counted apart ([`Diff::recreated`]).
//!
//! The order of the requests is: recreations' deletes, adds (parents first), changes, then
//! deletes (children first). New classes exist before anything can send traffic to them, and
//! classes go only after what pointed at them. Filters ([`crate::fdiff`]) are in the same
//! difference: those that must go before anything else (a priority re-made, a filter pointing at
//! a class deleted to be re-created) first; their adds and in-place changes after the qdisc and
//! class adds and changes (a filter's class exists before the filter), and their deletes before
//! the qdisc and class deletes (HTB refuses to delete a class a filter points at), u32 hash tables
//! last. New filters are in place before old ones go, so traffic is classified at every step,
//! except where the kernel cannot change a filter in place (see [`crate::fdiff`]).
//!
//! Parameters are compared by meaning where the kernel's dump differs from the request (HTB and
//! TBF: rates, buckets in scheduler ticks ±1, prio, explicit quantum, overhead, mpu; HTB qdisc:
//! r2q, default, direct_qlen), and otherwise by the request's `TCA_OPTIONS` attributes, each of
//! which must be in the dump with the same bytes. A kind the comparison cannot read is changed
//! in place every time (safe, just not minimal).

use crate::fdiff::{self, FilterDiff, RawFilter};
use crate::kernel::{
    burst_ticks, class_msg, drr_class_msg, hfsc_class_msg, qdisc_msg, DrrClassPlan, HfscClassPlan, Plan,
    PlannedQdisc, ResolvedClass,
};
use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TC_H_INGRESS, TC_H_ROOT};
use crate::Error;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use sluice_model::print::tc_handle_str;
use std::borrow::Cow;

/// An object's identity: (is a qdisc, kernel handle).
pub type Key = (bool, u32);

/// A qdisc or class as the kernel dumped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawObj {
    /// Qdisc (true) or class.
    pub is_qdisc: bool,
    /// Kernel handle / class id.
    pub handle: u32,
    /// Parent; a top-level class's parent is its qdisc's handle (the kernel dumps `root`).
    pub parent: u32,
    /// Kind.
    pub kind: String,
    /// `TCA_OPTIONS` payload, if the dump had one.
    pub options: Option<Vec<u8>>,
}

impl RawObj {
    /// The identity.
    pub fn key(&self) -> Key {
        (self.is_qdisc, self.handle)
    }
}

/// Qdisc kinds whose kernel qdisc has no classes to dump (no class operations, or, for ingress
/// and clsact, a walk that gives none).
const CLASSLESS: [&str; 10] =
    ["pfifo", "bfifo", "pfifo_head_drop", "pfifo_fast", "noqueue", "codel", "fq", "pie", "ingress", "clsact"];

/// Qdisc kinds whose classes are their flows with packets queued: no request creates or changes
/// them (their class operations have no `change`), they come and go with the traffic, and a
/// snapshot holding them could not be restored; they are not read.
const FLOW_CLASSES: [&str; 3] = ["fq_codel", "sfq", "cake"];

/// Up to this many qdiscs that may hold classes, the classes are dumped one qdisc at a time;
/// above it, in one dump of the device.
const CLASS_DUMPS_PER_QDISC: usize = 256;

/// Reads every qdisc and class of `ifindex` with its options. The kernel's default qdiscs
/// (handle 0: `noqueue`, `pfifo_fast`, `mq` and its children) are left out: they are what a device
/// has when nothing is configured.
///
/// The classes are asked for one classful qdisc at a time (`tcm_parent` set), unless there are
/// many of those or one has handle 0: the same objects as one dump of the device (the flows of
/// [`FLOW_CLASSES`] kinds aside), but the kernel's device-wide class dump walks every qdisc
/// again for each reply buffer it fills (a tree of 10 000 leaf qdiscs: all 10 000 for each of
/// ~100 buffers), while a dump by parent looks its qdisc up by handle. A tree whose 10 000
/// leaves are fq_codel or CAKE is read by parent too: only its HTB qdiscs are asked.
pub fn dump_tree(nl: &mut Netlink, ifindex: i32) -> Result<Vec<RawObj>, Error> {
    let mut out = Vec::new();
    let (mut classful, mut classful_at_0, mut flows) = (Vec::new(), false, HashSet::default());
    let mut req = Msg::tc(rtm::GETQDISC, flags::REQUEST | flags::DUMP, TcMsg { ifindex, ..TcMsg::default() });
    nl.dump_each(&mut req, |_, tc, attrs| {
        if tc.ifindex != ifindex {
            return;
        }
        let obj = raw_obj(true, tc, attrs);
        if FLOW_CLASSES.contains(&obj.kind.as_str()) && obj.handle != 0 {
            flows.insert(obj.handle);
        } else if !CLASSLESS.contains(&obj.kind.as_str()) {
            classful.push(obj.handle);
            classful_at_0 |= obj.handle == 0;
        }
        if obj.handle != 0 {
            out.push(obj);
        }
    })?;
    let parents = if classful_at_0 || classful.len() > CLASS_DUMPS_PER_QDISC { vec![0] } else { classful };
    for parent in parents {
        let tc = TcMsg { ifindex, parent, ..TcMsg::default() };
        nl.dump_each(&mut Msg::tc(rtm::GETTCLASS, flags::REQUEST | flags::DUMP, tc), |_, tc, attrs| {
            if tc.ifindex == ifindex && tc.handle != 0 && !flows.contains(&(tc.handle & 0xFFFF_0000)) {
                out.push(raw_obj(false, tc, attrs));
            }
        })?;
    }
    Ok(out)
}

/// A dumped qdisc or class (header and attributes) as a [`RawObj`].
fn raw_obj(is_qdisc: bool, tc: TcMsg, attrs: &[u8]) -> RawObj {
    let mut parent = tc.parent;
    if !is_qdisc && parent == TC_H_ROOT {
        parent = tc.handle & 0xFFFF_0000;
    }
    let (mut kind, mut options) = (String::new(), None);
    for a in netlink::attrs(attrs) {
        match a.ty {
            tca::KIND => kind = String::from_utf8_lossy(a.data).trim_end_matches('\0').to_string(),
            tca::OPTIONS => options = Some(a.data.to_vec()),
            _ => {}
        }
    }
    RawObj { is_qdisc, handle: tc.handle, parent, kind, options }
}

/// Where a wanted object's request comes from.
#[derive(Debug, Clone)]
pub enum Src<'a> {
    /// A qdisc of the model's plan.
    Qdisc(PlannedQdisc<'a>),
    /// An HTB class of the plan.
    Class(ResolvedClass<'a>),
    /// A DRR class of the plan.
    Drr(DrrClassPlan),
    /// An HFSC class of the plan.
    Hfsc(HfscClassPlan),
    /// An object of an earlier dump, re-sent with the options the kernel reported.
    Raw(RawObj),
}

/// An object of the wanted tree.
#[derive(Debug, Clone)]
pub struct Want<'a> {
    /// Qdisc (true) or class.
    pub is_qdisc: bool,
    /// Kernel handle.
    pub handle: u32,
    /// Parent (a top-level class's is its qdisc's handle).
    pub parent: u32,
    /// Kind.
    pub kind: String,
    /// The request's source.
    pub src: Src<'a>,
}

impl Want<'_> {
    /// The identity.
    pub fn key(&self) -> Key {
        (self.is_qdisc, self.handle)
    }

    /// The request that creates this object, or changes it in place when it exists.
    pub fn msg(&self, ifindex: i32) -> Msg {
        let mut m = match &self.src {
            Src::Qdisc(q) => qdisc_msg(ifindex, q, true),
            Src::Class(c) => class_msg(ifindex, c),
            Src::Drr(c) => drr_class_msg(ifindex, c, true),
            Src::Hfsc(c) => hfsc_class_msg(ifindex, c, true),
            Src::Raw(r) => raw_msg(ifindex, r),
        };
        // The parent is this object's (the probe moves objects to the root of a scratch device).
        m.set_parent(self.parent);
        m
    }

    /// What this is, for a person (`qdisc htb 1:`, `class htb 1:10`).
    pub fn label(&self) -> String {
        label(self.is_qdisc, &self.kind, self.handle)
    }
}

fn label(is_qdisc: bool, kind: &str, handle: u32) -> String {
    format!("{} {kind} {}", if is_qdisc { "qdisc" } else { "class" }, tc_handle_str(handle))
}

/// The wanted tree of a plan (its qdiscs and classes; parents before children).
pub fn wants_of_plan<'a>(plan: &Plan<'a>) -> Vec<Want<'a>> {
    let mut out = Vec::new();
    for q in plan.qdiscs() {
        out.push(Want {
            is_qdisc: true,
            handle: q.handle,
            parent: q.parent,
            kind: q.kind().to_string(),
            src: Src::Qdisc(q.clone()),
        });
    }
    for c in plan.classes() {
        out.push(Want {
            is_qdisc: false,
            handle: c.classid,
            parent: c.parent,
            kind: "htb".into(),
            src: Src::Class(c.clone()),
        });
    }
    for c in plan.drr_classes() {
        out.push(Want {
            is_qdisc: false,
            handle: c.classid,
            parent: c.parent,
            kind: "drr".into(),
            src: Src::Drr(*c),
        });
    }
    out
}

/// The wanted tree of a snapshot (to restore it).
pub fn wants_of_snapshot(snapshot: &[RawObj]) -> Vec<Want<'static>> {
    snapshot
        .iter()
        .map(|r| Want {
            is_qdisc: r.is_qdisc,
            handle: r.handle,
            parent: r.parent,
            kind: r.kind.clone(),
            src: Src::Raw(r.clone()),
        })
        .collect()
}

/// `TCA_HTB_INIT`'s version as a request must carry it (a dump reports `HTB_VER`, 0x30011).
const HTB_REQUEST_VERSION: u32 = 3;
const HTB_PARMS: u16 = 1;
const HTB_INIT: u16 = 2;
const HTB_DIRECT_QLEN: u16 = 5;
const HTB_RATE64: u16 = 6;
const HTB_CEIL64: u16 = 7;
const TBF_PARMS: u16 = 1;
const TBF_RATE64: u16 = 4;
const TBF_PRATE64: u16 = 5;

/// A dumped object as a request: its kind and options as the kernel reported them.
fn raw_msg(ifindex: i32, r: &RawObj) -> Msg {
    let kind = if r.is_qdisc { rtm::NEWQDISC } else { rtm::NEWTCLASS };
    let fl = flags::REQUEST | flags::ACK | flags::CREATE | flags::REPLACE;
    let mut m = Msg::tc(kind, fl, TcMsg { ifindex, handle: r.handle, parent: r.parent, info: 0 });
    m.attr_str(tca::KIND, &r.kind);
    if let Some(opts) = &r.options {
        if r.is_qdisc && r.kind == "htb" {
            m.begin_nest(tca::OPTIONS);
            for a in netlink::attrs(opts) {
                if a.ty == HTB_INIT && a.data.len() >= 4 {
                    let mut g = a.data.to_vec();
                    g[0..4].copy_from_slice(&HTB_REQUEST_VERSION.to_ne_bytes());
                    m.attr(a.ty, &g);
                } else {
                    m.attr(a.ty, a.data);
                }
            }
            m.end_nest();
        } else {
            m.attr(tca::OPTIONS, opts);
        }
    }
    m
}

/// The request that deletes `r`.
pub fn delete_msg(ifindex: i32, r: &RawObj) -> Msg {
    let kind = if r.is_qdisc { rtm::DELQDISC } else { rtm::DELTCLASS };
    Msg::tc(kind, flags::REQUEST | flags::ACK, TcMsg { ifindex, handle: r.handle, parent: r.parent, info: 0 })
}

/// The parameters of an HTB class that the kernel keeps, from a `tc_htb_opt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HtbClassKey {
    rate: u64,
    ceil: u64,
    buffer: u32,
    cbuffer: u32,
    /// 0: automatic (rate / r2q).
    quantum: u32,
    prio: u32,
    overhead: u16,
    mpu: u16,
}

impl HtbClassKey {
    fn from_options(opts: &[u8]) -> Option<HtbClassKey> {
        let p = netlink::find(opts, HTB_PARMS)?;
        let u16_at = |o: usize| p.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
        let wide = |ty: u16| netlink::find(opts, ty).and_then(|b| netlink::u64_at(b, 0));
        Some(HtbClassKey {
            rate: wide(HTB_RATE64).unwrap_or(netlink::u32_at(p, 8)? as u64),
            ceil: wide(HTB_CEIL64).unwrap_or(netlink::u32_at(p, 20)? as u64),
            buffer: netlink::u32_at(p, 24)?,
            cbuffer: netlink::u32_at(p, 28)?,
            quantum: netlink::u32_at(p, 32)?,
            prio: netlink::u32_at(p, 40)?,
            overhead: u16_at(2)?,
            mpu: u16_at(6)?,
        })
    }

    fn from_plan(c: &ResolvedClass<'_>) -> HtbClassKey {
        let (rate, ceil) = (c.rate().bytes_per_sec(), c.ceil().bytes_per_sec());
        HtbClassKey {
            rate,
            ceil,
            buffer: burst_ticks(rate, c.burst),
            cbuffer: burst_ticks(ceil, c.cburst),
            quantum: c.htb.quantum.unwrap_or(0),
            prio: c.htb.prio,
            overhead: c.htb.overhead.clamp(0, u16::MAX as i32) as u16,
            mpu: c.htb.mpu.min(u16::MAX as u32) as u16,
        }
    }

    /// `TCA_OPTIONS` as a dump gives them (`tc_htb_opt`, then the 64-bit rates when needed).
    fn options(&self) -> Vec<u8> {
        let spec = |rate: u64| {
            let mut r = [0u8; 12];
            r[1] = 1; // TC_LINKLAYER_ETHERNET
            r[2..4].copy_from_slice(&self.overhead.to_ne_bytes());
            r[6..8].copy_from_slice(&self.mpu.to_ne_bytes());
            r[8..12].copy_from_slice(&(rate.min(u32::MAX as u64) as u32).to_ne_bytes());
            r
        };
        let mut parms = Vec::with_capacity(44);
        parms.extend_from_slice(&spec(self.rate));
        parms.extend_from_slice(&spec(self.ceil));
        for v in [self.buffer, self.cbuffer, self.quantum, 0, self.prio] {
            parms.extend_from_slice(&v.to_ne_bytes());
        }
        let mut m = Msg::tc(0, 0, TcMsg::default());
        m.attr(HTB_PARMS, &parms);
        if self.rate >= 1 << 32 {
            m.attr(HTB_RATE64, &self.rate.to_ne_bytes());
        }
        if self.ceil >= 1 << 32 {
            m.attr(HTB_CEIL64, &self.ceil.to_ne_bytes());
        }
        m.bytes()[36..].to_vec()
    }

    /// Whether a class dumped as `have` holds what `self` asks for.
    fn held_by(&self, have: &HtbClassKey) -> bool {
        self.rate == have.rate
            && self.ceil == have.ceil
            && self.buffer.abs_diff(have.buffer) <= 1
            && self.cbuffer.abs_diff(have.cbuffer) <= 1
            && self.prio.min(7) == have.prio.min(7)
            && (self.quantum == 0 || self.quantum == have.quantum)
            && self.overhead == have.overhead
            && self.mpu == have.mpu
    }
}

/// The `TCA_OPTIONS` payload of a request built by [`Msg::tc`].
fn request_options(m: &Msg) -> Option<Vec<u8>> {
    // nlmsghdr (16) + tcmsg (20), then the attributes.
    m.bytes().get(36..).and_then(|a| netlink::find(a, tca::OPTIONS)).map(<[u8]>::to_vec)
}

/// Whether `b` is a well-formed attribute list to its end.
fn whole_attrs(b: &[u8]) -> bool {
    let used: usize = netlink::attrs(b).map(|a| (a.data.len() + 4 + 3) & !3).sum();
    used >= b.len() && !b.is_empty()
}

/// Whether the kernel's object `have` (same kind and parent) already holds what `want` asks for.
pub fn holds(want: &Want<'_>, have: &RawObj) -> bool {
    let have_opts = have.options.as_deref().unwrap_or(&[]);
    if !want.is_qdisc && want.kind == "htb" {
        let want_key = match &want.src {
            Src::Class(c) => Some(HtbClassKey::from_plan(c)),
            Src::Raw(r) => r.options.as_deref().and_then(HtbClassKey::from_options),
            _ => None,
        };
        return match (want_key, HtbClassKey::from_options(have_opts)) {
            (Some(w), Some(h)) => w.held_by(&h),
            _ => false,
        };
    }
    let want_opts = match &want.src {
        Src::Raw(r) => r.options.clone(),
        _ => request_options(&want.msg(0)),
    };
    let want_opts = want_opts.unwrap_or_default();
    if want.is_qdisc && want.kind == "htb" {
        let init =
            |o: &[u8]| netlink::find(o, HTB_INIT).map(|g| (netlink::u32_at(g, 4), netlink::u32_at(g, 8)));
        let qlen = |o: &[u8]| netlink::find(o, HTB_DIRECT_QLEN).and_then(|b| netlink::u32_at(b, 0));
        return init(&want_opts) == init(have_opts)
            && (qlen(&want_opts).is_none() || qlen(&want_opts) == qlen(have_opts));
    }
    if want.is_qdisc && want.kind == "tbf" {
        let key = |o: &[u8]| {
            let p = netlink::find(o, TBF_PARMS)?;
            let wide = |ty: u16| netlink::find(o, ty).and_then(|b| netlink::u64_at(b, 0));
            Some((
                wide(TBF_RATE64).unwrap_or(netlink::u32_at(p, 8)? as u64),
                wide(TBF_PRATE64).unwrap_or(netlink::u32_at(p, 20)? as u64),
                netlink::u32_at(p, 24)?,
                netlink::u32_at(p, 28)?,
                netlink::u32_at(p, 32)?,
            ))
        };
        return match (key(&want_opts), key(have_opts)) {
            (Some(w), Some(h)) => {
                (w.0, w.1, w.2) == (h.0, h.1, h.2) && w.3.abs_diff(h.3) <= 1 && w.4.abs_diff(h.4) <= 1
            }
            _ => false,
        };
    }
    if want_opts == have_opts {
        return true;
    }
    whole_attrs(&want_opts)
        && netlink::attrs(&want_opts)
            .all(|w| netlink::attrs(have_opts).any(|h| h.ty == w.ty && h.data == w.data))
}

/// The tree a kernel holds after `wants` were applied, as a dump would give it (options as the
/// requests carry them), for a diff between two models without reading the kernel.
pub fn as_dump(wants: &[Want<'_>]) -> Vec<RawObj> {
    wants
        .iter()
        .map(|w| RawObj {
            is_qdisc: w.is_qdisc,
            handle: w.handle,
            parent: w.parent,
            kind: w.kind.clone(),
            options: match &w.src {
                Src::Raw(r) => r.options.clone(),
                // What the comparison reads, without the rate tables (256 divisions each).
                Src::Class(c) => Some(HtbClassKey::from_plan(c).options()),
                _ => request_options(&w.msg(0)),
            },
        })
        .collect()
}

/// What changes, and how.
#[derive(Debug, Default)]
pub struct Diff<'a> {
    /// Objects to add, parents first.
    pub adds: Vec<Want<'a>>,
    /// Objects changed in place.
    pub changes: Vec<Want<'a>>,
    /// Kernel objects to delete, children first (subtrees that go with their owner left out).
    pub deletes: Vec<RawObj>,
    /// Kernel objects deleted first because they cannot be changed in place (kind, parent or
    /// handle differs); their wanted versions are among the adds.
    pub recreated: Vec<RawObj>,
    /// The filters' part ([`crate::fdiff`]).
    pub filters: FilterDiff,
}

impl Diff<'_> {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.adds.is_empty()
            && self.changes.is_empty()
            && self.deletes.is_empty()
            && self.recreated.is_empty()
            && self.filters.is_empty()
    }

    /// The requests in order: filters deleted first, recreations' deletes, adds, changes, filter
    /// adds and changes, filter deletes, deletes, u32 hash-table deletes (see [`Diff::offsets`],
    /// [`Diff::retried_tail`]). Each comes with whether
    /// it is a delete (a delete of something already gone is not an error).
    pub fn messages(&self, ifindex: i32) -> Vec<(Msg, bool, String)> {
        let mut out = Vec::with_capacity(self.adds.len() + self.changes.len() + self.deletes.len());
        out.extend(self.filters.first_messages(ifindex));
        for r in &self.recreated {
            out.push((
                delete_msg(ifindex, r),
                true,
                format!("delete {} (to re-create it)", label(r.is_qdisc, &r.kind, r.handle)),
            ));
        }
        for w in &self.adds {
            out.push((w.msg(ifindex), false, format!("add {}", w.label())));
        }
        for w in &self.changes {
            out.push((w.msg(ifindex), false, format!("change {}", w.label())));
        }
        out.extend(self.filters.add_messages(ifindex));
        out.extend(self.filters.delete_messages(ifindex));
        for r in &self.deletes {
            out.push((
                delete_msg(ifindex, r),
                true,
                format!("delete {}", label(r.is_qdisc, &r.kind, r.handle)),
            ));
        }
        out.extend(self.filters.table_delete_messages(ifindex));
        out
    }

    /// How many requests at the end of [`Diff::messages`] may be refused with `EBUSY` for a
    /// moment and are to be retried (u32 hash tables whose links were just deleted).
    pub fn retried_tail(&self) -> usize {
        self.filters.table_deletes.len()
    }

    /// Where the object adds and the filter adds start in [`Diff::messages`].
    pub fn offsets(&self) -> (usize, usize) {
        let adds = self.filters.first.len() + self.recreated.len();
        (adds, adds + self.adds.len() + self.changes.len())
    }

    /// `N added, N changed, N deleted, N re-created` (objects, then filters).
    pub fn summary(&self) -> String {
        let f = &self.filters;
        format!(
            "{} added, {} changed in place, {} deleted, {} re-created; filters: {} added, {} changed in place, {} deleted, {} deleted first",
            self.adds.len(),
            self.changes.len(),
            self.deletes.len(),
            self.recreated.len(),
            f.adds.len(),
            f.changes.len(),
            f.deletes.len() + f.table_deletes.len(),
            f.first.len()
        )
    }
}

/// The parent of an object as a key (None at the root or ingress).
fn parent_key(is_qdisc: bool, parent: u32) -> Option<Key> {
    if is_qdisc {
        (parent != TC_H_ROOT && parent != TC_H_INGRESS).then_some((false, parent))
    } else if parent & 0xFFFF == 0 {
        Some((true, parent))
    } else {
        Some((false, parent))
    }
}

/// Depth of every object of a tree given as (key, parent key) pairs (0 at the root).
fn depths(tree: &HashMap<Key, Option<Key>>) -> HashMap<Key, usize> {
    let mut out: HashMap<Key, usize> = HashMap::with_capacity_and_hasher(tree.len(), Default::default());
    for &k in tree.keys() {
        let mut chain = vec![k];
        let mut base = 0;
        while let Some(&cur) = chain.last() {
            if let Some(&d) = out.get(&cur) {
                base = d + 1;
                chain.pop();
                break;
            }
            match tree.get(&cur).copied().flatten() {
                Some(p) if tree.contains_key(&p) && chain.len() <= tree.len() => chain.push(p),
                _ => break,
            }
        }
        for (i, c) in chain.iter().rev().enumerate() {
            out.insert(*c, base + i);
        }
    }
    out
}

/// The kernel objects that disappear when the objects of `roots` are deleted: each root and
/// everything below it.
fn subtrees(roots: &HashSet<Key>, have: &[RawObj]) -> HashSet<Key> {
    if roots.is_empty() {
        return HashSet::default();
    }
    let tree: HashMap<Key, Option<Key>> =
        have.iter().map(|r| (r.key(), parent_key(r.is_qdisc, r.parent))).collect();
    let mut gone = HashSet::default();
    for &k in tree.keys() {
        let mut cur = Some(k);
        let mut steps = 0;
        while let Some(c) = cur {
            if roots.contains(&c) {
                gone.insert(k);
                break;
            }
            steps += 1;
            cur = tree.get(&c).copied().flatten().filter(|_| steps <= tree.len());
        }
    }
    gone
}

/// The deletes that remove every object of `set` (closed under subtrees or not), children first,
/// leaving out what goes with its owner: anything inside a deleted qdisc, and a deleted class's
/// own leaf qdisc.
fn delete_order(set: &HashSet<Key>, have: &[RawObj]) -> Vec<RawObj> {
    if set.is_empty() {
        return Vec::new();
    }
    let by_key: HashMap<Key, &RawObj> = have.iter().map(|r| (r.key(), r)).collect();
    let tree: HashMap<Key, Option<Key>> =
        have.iter().map(|r| (r.key(), parent_key(r.is_qdisc, r.parent))).collect();
    let depth = depths(&tree);
    let goes_with_owner = |k: Key| {
        let r = by_key[&k];
        if r.is_qdisc && parent_key(true, r.parent).is_some_and(|p| set.contains(&p)) {
            return true;
        }
        let mut cur = tree.get(&k).copied().flatten();
        let mut steps = 0;
        while let Some(c) = cur {
            if c.0 && set.contains(&c) {
                return true;
            }
            steps += 1;
            cur = tree.get(&c).copied().flatten().filter(|_| steps <= tree.len());
        }
        false
    };
    let mut out: Vec<RawObj> =
        have.iter().filter(|r| set.contains(&r.key()) && !goes_with_owner(r.key())).cloned().collect();
    out.sort_by_key(|r| std::cmp::Reverse(depth.get(&r.key()).copied().unwrap_or(0)));
    out
}

/// Whether the kernel's qdisc of this kind has a `change` operation (`Qdisc_ops.change`):
/// sch_htb, sch_drr, sch_mq, sch_ingress (ingress and clsact) have none.
fn changeable_in_place(kind: &str) -> bool {
    !matches!(kind, "htb" | "drr" | "mq" | "ingress" | "clsact")
}

/// The requests that turn `have` (a dump) into `want`, filters aside. Kernel objects on the
/// ingress side are left alone unless `want` has an ingress qdisc.
pub fn diff<'a>(want: Vec<Want<'a>>, have: &[RawObj]) -> Diff<'a> {
    diff_all(want, Vec::new(), have, &[])
}

/// [`diff`] with the filters: `fwant` the wanted ones, `fhave` the kernel's (read from the blocks
/// of [`crate::fdiff::blocks`]).
pub fn diff_all<'a>(
    want: Vec<Want<'a>>,
    fwant: Vec<RawFilter>,
    have: &[RawObj],
    fhave: &[RawFilter],
) -> Diff<'a> {
    let touches_ingress = want.iter().any(|w| w.is_qdisc && w.parent == TC_H_INGRESS);
    let ingress_side: HashSet<Key> = if touches_ingress {
        HashSet::default()
    } else {
        let roots = have.iter().filter(|r| r.is_qdisc && r.parent == TC_H_INGRESS).map(RawObj::key).collect();
        subtrees(&roots, have)
    };
    // Copied only when the ingress side is left out (a 20 000-object tree is not copied).
    let have: Cow<'_, [RawObj]> = if ingress_side.is_empty() {
        Cow::Borrowed(have)
    } else {
        Cow::Owned(have.iter().filter(|r| !ingress_side.contains(&r.key())).cloned().collect())
    };
    let fhave: Vec<RawFilter> =
        fhave.iter().filter(|f| !ingress_side.contains(&fdiff::block_key(f.parent))).cloned().collect();
    let by_key: HashMap<Key, &RawObj> = have.iter().map(|r| (r.key(), r)).collect();
    // A qdisc slot (root, ingress, or a class's leaf) holds one qdisc.
    let qdisc_at: HashMap<u32, &RawObj> = have.iter().filter(|r| r.is_qdisc).map(|r| (r.parent, r)).collect();
    let mut redo: HashSet<Key> = HashSet::default();
    for w in &want {
        match by_key.get(&w.key()) {
            Some(h) if h.kind != w.kind || h.parent != w.parent => {
                redo.insert(h.key());
            }
            // Kinds the kernel cannot change in place ("Change operation not supported by
            // specified qdisc"): other options mean a new qdisc.
            Some(h) if w.is_qdisc && !changeable_in_place(&w.kind) && !holds(w, h) => {
                redo.insert(h.key());
            }
            Some(_) => {}
            None if w.is_qdisc => {
                if let Some(h) = qdisc_at.get(&w.parent) {
                    redo.insert(h.key());
                }
            }
            None => {}
        }
    }
    let gone = subtrees(&redo, &have);
    let wanted: HashSet<Key> = want.iter().map(Want::key).collect();
    let mut d = Diff { recreated: delete_order(&redo, &have), ..Diff::default() };
    let want_tree: HashMap<Key, Option<Key>> =
        want.iter().map(|w| (w.key(), parent_key(w.is_qdisc, w.parent))).collect();
    for w in want {
        match by_key.get(&w.key()) {
            Some(h) if !gone.contains(&w.key()) => {
                if !holds(&w, h) {
                    d.changes.push(w);
                }
            }
            _ => d.adds.push(w),
        }
    }
    if !d.adds.is_empty() {
        let want_depth = depths(&want_tree);
        d.adds.sort_by_key(|w| want_depth.get(&w.key()).copied().unwrap_or(0));
    }
    // Classes a qdisc makes by itself (prio and ETS bands, mq's queues) are not deleted.
    let kind_of: HashMap<u32, &str> =
        have.iter().filter(|r| r.is_qdisc).map(|r| (r.handle, r.kind.as_str())).collect();
    let own_class = |r: &RawObj| {
        r.is_qdisc
            || matches!(
                kind_of.get(&(r.handle & 0xFFFF_0000)).copied(),
                Some("htb" | "hfsc" | "drr" | "qfq" | "cbq")
            )
    };
    let stale: HashSet<Key> = have
        .iter()
        .filter(|r| own_class(r))
        .map(RawObj::key)
        .filter(|k| !wanted.contains(k) && !gone.contains(k))
        .collect();
    d.deletes = delete_order(&stale, &have);
    if !fwant.is_empty() || !fhave.is_empty() {
        let recreated: HashSet<u32> =
            gone.iter().filter(|k| !k.0 && wanted.contains(k)).map(|k| k.1).collect();
        let mut all_gone = gone;
        if !stale.is_empty() {
            all_gone.extend(subtrees(&stale, &have));
        }
        d.filters = fdiff::diff(fwant, &fhave, &all_gone, &recreated);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::script_state;
    use sluice_tc::burst::BurstPolicy;

    const TREE: &str = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
        tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
        tc class add dev $DEV parent 1:1 classid 1:10 htb rate 3mbit ceil 10mbit\n\
        tc class add dev $DEV parent 1:1 classid 1:20 htb rate 7mbit ceil 10mbit\n\
        tc qdisc add dev $DEV parent 1:10 handle 10: pfifo limit 50\n";

    #[test]
    fn an_identical_tree_needs_nothing_and_a_rate_is_changed_in_place() {
        let s = script_state(TREE, &[("DEV", "eth0")]).unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        let have = as_dump(&wants_of_plan(&plan));
        assert!(diff(wants_of_plan(&plan), &have).is_empty());
        let s2 = script_state(&TREE.replace("rate 3mbit", "rate 4mbit"), &[("DEV", "eth0")]).unwrap();
        let plan2 = Plan::new(&s2, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan2), &have);
        assert_eq!(d.changes.iter().map(|w| w.handle).collect::<Vec<_>>(), vec![0x1_0010]);
        assert!(d.adds.is_empty() && d.deletes.is_empty() && d.recreated.is_empty(), "{}", d.summary());
    }

    #[test]
    fn removed_objects_go_children_first_and_leaf_qdiscs_go_with_their_class() {
        let s = script_state(TREE, &[("DEV", "eth0")]).unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        let have = as_dump(&wants_of_plan(&plan));
        let small = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
            tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n";
        let s2 = script_state(small, &[("DEV", "eth0")]).unwrap();
        let plan2 = Plan::new(&s2, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan2), &have);
        let dels: Vec<u32> = d.deletes.iter().map(|r| r.handle).collect();
        assert_eq!(dels.len(), 2, "the pfifo goes with 1:10: {dels:x?}");
        assert!(dels.contains(&0x1_0010) && dels.contains(&0x1_0020));
        // Adding them back: parents first.
        let d = diff(wants_of_plan(&plan), &as_dump(&wants_of_plan(&plan2)));
        let adds: Vec<u32> = d.adds.iter().map(|w| w.handle).collect();
        let pos = |h: u32| adds.iter().position(|&a| a == h).unwrap();
        assert!(pos(0x1_0010) < pos(0x10_0000), "{adds:x?}");
    }

    #[test]
    fn the_compact_options_of_a_class_read_back_as_the_request() {
        let s = script_state(
            &TREE.replace("rate 3mbit ceil 10mbit", "rate 3mbit ceil 40gbit prio 3 quantum 3000"),
            &[("DEV", "eth0")],
        )
        .unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        for w in wants_of_plan(&plan).iter().filter(|w| !w.is_qdisc) {
            let Src::Class(c) = &w.src else { continue };
            let key = HtbClassKey::from_plan(c);
            let full = HtbClassKey::from_options(&request_options(&w.msg(1)).unwrap()).unwrap();
            assert_eq!(HtbClassKey::from_options(&key.options()), Some(key));
            assert_eq!(full, key);
        }
    }

    #[test]
    fn a_kind_change_is_a_delete_then_an_add_of_the_subtree() {
        let s = script_state(TREE, &[("DEV", "eth0")]).unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        let have = as_dump(&wants_of_plan(&plan));
        let s2 = script_state(
            &TREE.replace("handle 10: pfifo limit 50", "handle 10: bfifo limit 5000"),
            &[("DEV", "eth0")],
        )
        .unwrap();
        let plan2 = Plan::new(&s2, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan2), &have);
        assert_eq!(d.recreated.len(), 1);
        assert_eq!(d.adds.len(), 1);
        assert!(d.changes.is_empty() && d.deletes.is_empty());
        // Another root handle replaces the whole tree.
        let s3 = script_state(&TREE.replace("1:", "2:"), &[("DEV", "eth0")]).unwrap();
        let plan3 = Plan::new(&s3, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan3), &have);
        assert_eq!((d.recreated.len(), d.adds.len(), d.deletes.len()), (1, 5, 0), "{}", d.summary());
    }

    #[test]
    fn htb_options_are_not_changed_in_place_the_kernel_cannot() {
        let s = script_state(TREE, &[("DEV", "eth0")]).unwrap();
        let plan = Plan::new(&s, "eth0", BurstPolicy::Sluice).unwrap();
        let have = as_dump(&wants_of_plan(&plan));
        // The kernel's HTB has no qdisc `change`: another `default` re-creates the tree.
        let s2 = script_state(&TREE.replace("htb default 20", "htb default 10"), &[("DEV", "eth0")]).unwrap();
        let plan2 = Plan::new(&s2, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan2), &have);
        assert_eq!((d.recreated.len(), d.adds.len(), d.changes.len()), (1, 5, 0), "{}", d.summary());
        // A pfifo leaf's limit is changed in place.
        let s3 = script_state(&TREE.replace("limit 50", "limit 60"), &[("DEV", "eth0")]).unwrap();
        let plan3 = Plan::new(&s3, "eth0", BurstPolicy::Sluice).unwrap();
        let d = diff(wants_of_plan(&plan3), &have);
        assert_eq!((d.recreated.len(), d.changes.len()), (0, 1), "{}", d.summary());
    }
}
