//! `tc [-s] [-d] qdisc|class|filter show` output, as iproute2 6.x prints it, including the
//! round trips through the kernel's units (psched ticks, CoDel's 1024 ns) that shape what tc shows.

use super::args::proto_name;
use crate::model::*;
use sluice_core::units::format_size;
use sluice_core::QdiscStats;
use sluice_model::kinds::{ClassList, ClassShowCx};
pub use sluice_model::print::*;
use std::fmt::Write;

/// Printing options (`-s`, `-d`, `-j`, `-p`, `-o`, `-g`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ShowOpts {
    /// `-s`: statistics.
    pub stats: bool,
    /// `-d`: details.
    pub details: bool,
    /// `-j`: JSON.
    pub json: bool,
    /// `-p`: pretty JSON (and u32's decoded selectors).
    pub pretty: bool,
    /// `-o`: one line per object.
    pub oneline: bool,
    /// `-g`: the class graph.
    pub graph: bool,
}

/// Options of a qdisc as tc prints them after `refcnt N `.
pub fn qdisc_options(dev: &Device, q: &QdiscOpts, d: bool) -> String {
    q.show(dev, d)
}

fn stats_lines(out: &mut String, st: &QdiscStats) {
    let _ = writeln!(
        out,
        " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues {}) ",
        st.bytes, st.packets, st.drops, st.overlimits, st.requeues
    );
    let _ = writeln!(out, " backlog {} {}p requeues {}", format_size(st.backlog_bytes), st.qlen, st.requeues);
}

/// The kinds' own statistics (`print_xstats`) as an idle qdisc reports them (Sluice's emulated
/// qdiscs carry no packet history).
fn qdisc_xstats(out: &mut String, dev: &Device, q: &QdiscOpts) {
    out.push_str(&q.xstats_text(dev));
}

/// The kernel's `hash_32(val, 4)` (GOLDEN_RATIO_32), the bucket of a qdisc in `qdisc_hash`.
fn qdisc_bucket(handle: Handle) -> u32 {
    handle.to_tc().unwrap_or(0).wrapping_mul(0x61C8_8647) >> 28
}

/// The default qdisc of an mq class that holds no other (pfifo_fast, handle 0).
fn mq_default(parent: Handle) -> QdiscNode {
    QdiscNode {
        handle: Handle::UNSPEC,
        parent,
        opts: QdiscOpts::PfifoFast(Default::default()),
        stab: None,
        stats: Default::default(),
    }
}

/// Qdiscs in the order the kernel dumps them: the root, then the device's 16-bucket qdisc hash
/// (bucket by bucket, the newest first in each), then ingress/clsact. An mq root's default
/// children (made with it, one per queue) are hashed like the others.
fn qdisc_order(dev: &Device) -> Vec<std::borrow::Cow<'_, QdiscNode>> {
    use std::borrow::Cow;
    let mut v: Vec<Cow<QdiscNode>> =
        dev.qdiscs.iter().filter(|q| q.parent == H_ROOT).map(Cow::Borrowed).collect();
    let mut hashed: Vec<(u32, (usize, u32), Cow<QdiscNode>)> = Vec::new();
    for (i, q) in dev.qdiscs.iter().enumerate() {
        if let QdiscOpts::Mq(m) = &q.opts {
            for n in 1..=dev.num_tx_queues {
                let slot = Handle::new(q.handle.major(), n);
                if dev.qdisc_at(slot).is_none() && !m.emptied.contains(&n) {
                    hashed.push((qdisc_bucket(Handle::UNSPEC), (i, n), Cow::Owned(mq_default(slot))));
                }
            }
        }
        if q.parent != H_ROOT && q.parent != H_INGRESS {
            hashed.push((qdisc_bucket(q.handle), (i, u32::MAX), Cow::Borrowed(q)));
        }
    }
    hashed.sort_by_key(|(b, created, _)| (*b, std::cmp::Reverse(*created)));
    v.extend(hashed.into_iter().map(|(_, _, q)| q));
    v.extend(dev.qdiscs.iter().filter(|q| q.parent == H_INGRESS).map(Cow::Borrowed));
    v
}

/// Classes of one qdisc in the order its `Qdisc_class_hash` walk returns them: the table starts
/// with 4 buckets and doubles when more than 3/4 full; each insert goes to the head of bucket
/// `id ^ id>>8 ^ ...` (qdisc_class_hash). Replayed in creation order (deleted classes are gone,
/// so a history with deletes may grow the table at other moments than the kernel did).
fn class_hash_order(classes: Vec<&ClassNode>) -> Vec<&ClassNode> {
    class_hash_order_by(classes, |c| c.classid)
}

/// [`class_hash_order`] of anything with a class id (HFSC lists its root class too).
fn class_hash_order_by<T: Copy>(classes: Vec<T>, classid: impl Fn(T) -> Handle) -> Vec<T> {
    let hash = |c: T, mask: u32| {
        let mut id = classid(c).to_tc().unwrap_or(0);
        id ^= id >> 8;
        id ^= id >> 4;
        (id & mask) as usize
    };
    let mut buckets: Vec<Vec<T>> = vec![Vec::new(); 4];
    let mut n = 0;
    for c in classes {
        let mask = buckets.len() as u32 - 1;
        buckets[hash(c, mask)].insert(0, c);
        n += 1;
        if n * 4 > buckets.len() * 3 {
            let size = buckets.len() * 2;
            let mut grown: Vec<Vec<T>> = vec![Vec::new(); size];
            for b in &buckets {
                for &c in b {
                    grown[hash(c, size as u32 - 1)].insert(0, c);
                }
            }
            buckets = grown;
        }
    }
    buckets.into_iter().flatten().collect()
}

/// The kernel's default root qdisc shown when the device has none of its own: its kind.
pub(crate) fn default_root(dev: &Device, only: Option<Handle>) -> Option<&'static str> {
    if dev.root().is_some() || only.is_some_and(|p| p != H_ROOT) {
        return None;
    }
    // An IFB has a transmit queue (qlen 32): the kernel's default qdisc, not noqueue.
    Some(if dev.kind == DevKind::Ifb { "pfifo_fast" } else { "noqueue" })
}

/// The qdiscs `qdisc show` lists, in dump order (`only`: a handle or parent given to show).
pub(crate) fn qdisc_rows(dev: &Device, only: Option<Handle>) -> Vec<std::borrow::Cow<'_, QdiscNode>> {
    let mut v = qdisc_order(dev);
    if let Some(p) = only {
        v.retain(|q| q.parent == p || q.handle == p);
    }
    v
}

/// The reference count tc prints (when not 1): every transmit queue holds the root (mq's queues
/// hold its children instead).
pub(crate) fn qdisc_refcnt(dev: &Device, q: &QdiscNode) -> u32 {
    match q.parent {
        H_ROOT if matches!(q.opts, QdiscOpts::Mq(_)) => 1,
        H_ROOT => dev.num_tx_queues + 1,
        _ => 1,
    }
}

/// `tc qdisc show [dev D]`.
pub fn show_qdiscs(out: &mut String, dev: &Device, with_dev: bool, o: ShowOpts, only: Option<Handle>) {
    let devs = if with_dev { format!("dev {} ", dev.name) } else { String::new() };
    if let Some(kind) = default_root(dev, only) {
        if kind == "pfifo_fast" {
            let opts = qdisc_options(dev, &QdiscOpts::PfifoFast(Default::default()), o.details);
            let _ = writeln!(out, "qdisc pfifo_fast 0: {devs}root refcnt 2 {opts}");
        } else {
            let _ = writeln!(out, "qdisc noqueue 0: {devs}root refcnt 2 ");
        }
        if o.stats {
            stats_lines(out, &QdiscStats::default());
        }
    }
    for q in qdisc_rows(dev, only) {
        let mut parent = match q.parent {
            H_ROOT => "root ".to_string(),
            p => format!("parent {} ", classid_str(p)),
        };
        let refcnt = qdisc_refcnt(dev, &q);
        if refcnt != 1 {
            let _ = write!(parent, "refcnt {refcnt} ");
        }
        let _ = writeln!(
            out,
            "qdisc {} {} {devs}{parent}{}",
            q.opts.kind(),
            qdisc_handle_str(q.handle),
            qdisc_options(dev, &q.opts, o.details)
        );
        if let Some(t) = q.stab.filter(|_| o.details) {
            out.push(' ');
            if let Some(l) = t.linklayer {
                let _ = write!(out, "linklayer {} ", if l == LinkLayer::Atm { "atm" } else { "ethernet" });
            }
            if t.overhead != 0 {
                let _ = write!(out, "overhead {} ", t.overhead);
            }
            for (k, v) in [("mpu", t.mpu), ("mtu", t.mtu), ("tsize", t.tsize)] {
                if v != 0 {
                    let _ = write!(out, "{k} {v} ");
                }
            }
            out.push('\n');
        }
        if o.stats {
            stats_lines(out, &q.stats);
            qdisc_xstats(out, dev, &q.opts);
        }
    }
}

/// One class as `class show` prints it.
struct ClassRow {
    id: Handle,
    /// The kind of its qdisc.
    kind: &'static str,
    /// `tcm_parent`: `root` for the top classes of HTB, DRR and mq, else the parent class (HTB)
    /// or the qdisc (the implicit classes of prio, TBF, ...).
    tcm_parent: Handle,
    /// The parent a `parent` selector compares with.
    filter_parent: Handle,
    /// `leaf N: ` when a qdisc hangs below.
    leaf: String,
    /// The kind's options (`print_copt`).
    opts: String,
    stats: QdiscStats,
    /// The kind's statistics (`print_xstats`), each line ending in a newline.
    xstats: String,
}

/// The classes of a device in dump order.
fn class_rows(dev: &Device, o: ShowOpts) -> Vec<ClassRow> {
    let mut rows = Vec::new();
    for q in qdisc_order(dev) {
        let mut lines: Vec<(Handle, Handle, Option<&ClassNode>)> = Vec::new();
        match q.opts.classes(dev, &q) {
            ClassList::None => {}
            ClassList::Implicit(ids) => lines.extend(ids.into_iter().map(|(id, p)| (id, p, None))),
            ClassList::Nodes { root_class: false } => {
                let cls: Vec<&ClassNode> =
                    dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
                for c in class_hash_order(cls) {
                    let p = if c.parent == q.handle { H_ROOT } else { c.parent };
                    lines.push((c.classid, p, Some(c)));
                }
            }
            ClassList::Nodes { root_class: true } => {
                // The root class (`X:`) first in the hash, then the others; a class whose parent
                // is the root class shows it as `parent X:`.
                let mut all: Vec<Option<&ClassNode>> = vec![None];
                all.extend(dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).map(Some));
                for c in class_hash_order_by(all, |c| c.map_or(q.handle, |c| c.classid)) {
                    match c {
                        None => lines.push((q.handle, H_ROOT, None)),
                        Some(c) => lines.push((c.classid, c.parent, Some(c))),
                    }
                }
            }
        }
        for (id, tcm_parent, node) in lines {
            let leaf = q
                .opts
                .class_leaf(dev, &q, id)
                .map(|l| format!("leaf {} ", qdisc_handle_str(l.handle)))
                .unwrap_or_default();
            let cx = ClassShowCx { dev, q: &q, id, details: o.details };
            let (s, xstats) = q.opts.show_class(node.map(|n| &n.opts), &cx);
            rows.push(ClassRow {
                id,
                kind: q.opts.kind(),
                tcm_parent,
                filter_parent: node.map(|n| n.parent).unwrap_or(q.handle),
                leaf,
                opts: s,
                stats: node
                    .map(|n| n.stats)
                    .or_else(|| dev.implicit_class_stats.get(&id).copied())
                    .unwrap_or_default(),
                xstats,
            });
        }
    }
    rows
}

/// `tc class show dev D [parent P | root] [classid C]`.
pub fn show_classes(
    out: &mut String,
    dev: &Device,
    o: ShowOpts,
    only_parent: Option<Handle>,
    only_classid: Option<Handle>,
) {
    for r in class_rows(dev, o) {
        if only_classid.is_some_and(|c| c != r.id) {
            continue;
        }
        if let Some(p) = only_parent {
            let cp = r.filter_parent;
            if cp != p && !(p == H_ROOT && cp == r.id.qdisc()) {
                continue;
            }
        }
        let parent = match r.tcm_parent {
            H_ROOT => "root ".to_string(),
            p => format!("parent {} ", classid_str(p)),
        };
        let _ = writeln!(out, "class {} {} {parent}{}{}", r.kind, classid_str(r.id), r.leaf, r.opts);
        if o.stats {
            stats_lines(out, &r.stats);
            out.push_str(&r.xstats);
        }
    }
}

/// `tc -g class show`: the class tree as tc_class.c's graph_cls_show draws it. tc links the
/// classes whose parent is `root` into one list and the others into a second, both newest
/// first, and moves each class's children out of the second as it reaches it. A class's
/// prefix depends on whether the classes on its path have a next sibling; tc frees each
/// class after drawing it and later reads that freed node's link, which glibc has by then
/// overwritten with a non-null pointer: a freed class counts as having a next sibling. Classes
/// whose parent is a qdisc (prio's, TBF's) are never reached. `parent`/`classid` selectors do
/// not apply (tc collects the graph before it filters).
pub fn show_class_graph(out: &mut String, dev: &Device, o: ShowOpts) {
    struct Node {
        row: ClassRow,
        parent: Option<usize>,
        right: Option<usize>,
        next: Option<usize>,
        children: usize,
        freed: bool,
    }
    let mut nodes: Vec<Node> = class_rows(dev, o)
        .into_iter()
        .map(|row| Node { row, parent: None, right: None, next: None, children: 0, freed: false })
        .collect();
    let link = |nodes: &mut Vec<Node>, list: &[usize]| {
        for (k, &n) in list.iter().enumerate() {
            nodes[n].next = list.get(k + 1).copied();
        }
    };
    let roots: Vec<usize> = (0..nodes.len()).rev().filter(|&n| nodes[n].row.tcm_parent == H_ROOT).collect();
    let mut others: Vec<usize> =
        (0..nodes.len()).rev().filter(|&n| nodes[n].row.tcm_parent != H_ROOT).collect();
    link(&mut nodes, &roots);

    fn has_next(nodes: &[Node], n: usize) -> bool {
        nodes[n].freed || nodes[n].next.is_some()
    }
    fn indent(nodes: &mut [Node], node: usize, newline: bool, spaces: usize) -> String {
        let mut s = String::new();
        let mut n = node;
        while let Some(p) = nodes[n].parent {
            nodes[p].right = Some(n);
            n = p;
        }
        while let Some(r) = nodes[n].right {
            s.push_str(if has_next(nodes, n) { "|    " } else { "     " });
            n = r;
        }
        if newline {
            s.push_str(match (has_next(nodes, n), nodes[n].children > 0) {
                (true, true) => "|    |",
                (true, false) => "|     ",
                (false, true) => "     |",
                (false, false) => "      ",
            });
        }
        s.push_str(&" ".repeat(spaces));
        s
    }
    fn draw(out: &mut String, nodes: &mut Vec<Node>, others: &mut Vec<usize>, list: &[usize], o: ShowOpts) {
        for &c in list {
            let id = nodes[c].row.id;
            let mut children = Vec::new();
            others.retain(|&x| {
                if nodes[x].row.tcm_parent == id {
                    children.insert(0, x);
                    false
                } else {
                    true
                }
            });
            for (k, &x) in children.iter().enumerate() {
                nodes[x].parent = Some(c);
                nodes[x].next = children.get(k + 1).copied();
            }
            nodes[c].children = children.len();
            let idstr = classid_str(id);
            let kind = nodes[c].row.kind;
            out.push_str(&indent(nodes, c, false, 0));
            let _ = write!(out, "+---({idstr}) {kind} {}", nodes[c].row.opts);
            let mut buf = String::new();
            if o.stats {
                let prefix = indent(nodes, c, true, (kind.len() + idstr.len()).saturating_sub(2));
                let st = nodes[c].row.stats;
                let _ = write!(
                    out,
                    "\n{prefix}Sent {} bytes {} pkt (dropped {}, overlimits {} requeues {}) \n{prefix}backlog {} {}p requeues {}",
                    st.bytes,
                    st.packets,
                    st.drops,
                    st.overlimits,
                    st.requeues,
                    format_size(st.backlog_bytes),
                    st.qlen,
                    st.requeues
                );
                if has_next(nodes, c) || nodes[c].children > 0 {
                    buf.push('\n');
                    buf.push_str(&indent(nodes, c, true, 0));
                }
            }
            out.push_str(&buf);
            out.push('\n');
            draw(out, nodes, others, &children, o);
            if !has_next(nodes, c) {
                out.push_str(&indent(nodes, c, false, 0));
                out.push('\n');
            }
            nodes[c].freed = true;
        }
    }
    draw(out, &mut nodes, &mut others, &roots, o);
}

/// The filter header `filter [parent P] protocol X pref N KIND chain C `.
fn filter_head(f: &FilterNode, parent_shown: Option<Handle>, o: &FilterShowCtx) -> String {
    let mut s = String::from("filter ");
    if let Some(p) = parent_shown {
        match p {
            H_ROOT => s.push_str("root "),
            H_MIN_INGRESS => s.push_str("ingress "),
            H_MIN_EGRESS => s.push_str("egress "),
            p => {
                let _ = write!(s, "parent {} ", classid_str(p));
            }
        }
    }
    if o.protocol.is_none_or(|p| p != f.protocol) {
        let _ = write!(s, "protocol {} ", proto_name(f.protocol));
    }
    if o.prio.is_none_or(|p| p != f.prio) {
        let _ = write!(s, "pref {} ", f.prio);
    }
    let _ = write!(s, "{} chain {} ", f.opts.kind(), f.chain);
    s
}

/// What the user restricted `filter show` to (tc omits those fields).
#[derive(Clone, Copy, Debug, Default)]
pub struct FilterShowCtx {
    /// `protocol` given to show.
    pub protocol: Option<u16>,
    /// `prio` given to show.
    pub prio: Option<u16>,
    /// `-s`/`-d`.
    pub opts: ShowOpts,
}

/// Body of one filter after the header.
pub fn filter_body(state: &State, f: &FilterNode, opts: ShowOpts) -> String {
    let mut s = filter_opts_text(f, opts.pretty);
    s.push_str(&super::actions::filter_actions_text(state, f, opts));
    s
}

/// The kind's options of one filter, without its actions (`pretty`: `-p`, u32's keys decoded).
pub fn filter_opts_text(f: &FilterNode, pretty: bool) -> String {
    f.opts.show(f, pretty)
}

/// The rows `filter show` prints for one block in dump order: each classifier instance (prio)
/// led by its header alone (`true`), then its filters.
pub(crate) fn filter_rows<'a>(
    dev: &'a Device,
    block: Handle,
    ctx: &FilterShowCtx,
) -> Vec<(&'a FilterNode, bool)> {
    let mut rows = Vec::new();
    let mut prios: Vec<(u32, u16)> =
        dev.filters.iter().filter(|f| f.parent == block).map(|f| (f.chain, f.prio)).collect();
    prios.sort();
    prios.dedup();
    for (chain, prio) in prios {
        if ctx.prio.is_some_and(|p| p != prio) {
            continue;
        }
        let tp: Vec<&FilterNode> =
            dev.filters.iter().filter(|f| f.parent == block && f.chain == chain && f.prio == prio).collect();
        let Some(first) = tp.first() else { continue };
        if ctx.protocol.is_some_and(|p| p != first.protocol && first.protocol != ETH_P_ALL) {
            continue;
        }
        let first: &FilterNode = first;
        rows.push((first, true));
        rows.extend(FilterOpts::dump(dev, first, tp).into_iter().map(|f| (f, false)));
    }
    rows
}

/// Filters of one block in dump order, each classifier instance (prio) led by its header line.
pub fn show_filters(
    out: &mut String,
    state: &State,
    dev: &Device,
    block: Handle,
    parent_shown: Option<Handle>,
    ctx: FilterShowCtx,
) {
    for (f, head_only) in filter_rows(dev, block, &ctx) {
        let _ = write!(out, "{}", filter_head(f, parent_shown, &ctx));
        if !head_only {
            out.push_str(&filter_body(state, f, ctx.opts));
        }
        out.push('\n');
    }
}

/// `tc filter get`: one filter with its parent.
pub fn show_one_filter(out: &mut String, state: &State, f: &FilterNode, parent: Handle, opts: ShowOpts) {
    let ctx = FilterShowCtx { opts, ..Default::default() };
    let _ = writeln!(out, "{}{}", filter_head(f, Some(parent), &ctx), filter_body(state, f, opts));
}
