//! Counters of a run in the model: what a device's running qdisc tree (built by
//! [`crate::build`]) counted is written into the [`Device`]'s qdisc and class nodes, so that
//! `tc -s qdisc show` and `tc -s class show` print them as the kernel's `tc -s` would after the
//! same traffic ([`tc_stats`]).
//!
//! Covered: every qdisc's and class's `Sent`, `dropped`, `overlimits`, `requeues` and backlog,
//! through HTB's and DRR's classes and leaves and the child qdisc of netem, TBF and RED. A qdisc
//! under another classful kind (prio's bands, CAKE, HFSC...) keeps zeros. The kinds' own
//! statistics (HTB's lended/borrowed/tokens, fq_codel's and CAKE's xstats) stay the idle
//! values `show` prints for a configuration.

use crate::model::{Device, QdiscNode, H_INGRESS};
use crate::tc::show::{show_classes, show_qdiscs, ShowOpts};
use sluice_core::drr::Drr;
use sluice_core::htb::Htb;
use sluice_core::netem::Netem;
use sluice_core::red::Red;
use sluice_core::tbf::Tbf;
use sluice_core::{Handle, Qdisc, QdiscStats};

/// Writes the counters of `root` (the running tree of `dev`'s root qdisc) into `dev`'s nodes;
/// `root_stats` is what the root reports as a whole (an engine adds its filters' drops there).
pub fn import(dev: &mut Device, root: &dyn Qdisc, root_stats: QdiscStats) {
    let Some(i) = dev.qdiscs.iter().position(|q| q.parent == crate::model::H_ROOT) else { return };
    dev.qdiscs[i].stats = root_stats;
    children(dev, dev.qdiscs[i].handle, root);
}

/// The ingress (or clsact) qdisc's counters: what the receive path saw (`Sent`) and what its
/// filters dropped.
pub fn import_ingress(dev: &mut Device, rx_bytes: u64, rx_packets: u64, drops: u64) {
    if let Some(q) = dev.qdiscs.iter_mut().find(|q| q.parent == H_INGRESS) {
        q.stats = QdiscStats { bytes: rx_bytes, packets: rx_packets, drops, ..Default::default() };
    }
}

/// The qdisc node whose parent is `parent` (a class, or any minor of a qdisc handle with
/// `any_minor`).
fn child_node(dev: &Device, parent: Handle, any_minor: bool) -> Option<usize> {
    dev.qdiscs.iter().position(|q| {
        q.parent != crate::model::H_ROOT
            && q.parent != H_INGRESS
            && if any_minor { q.parent.major() == parent.major() } else { q.parent == parent }
    })
}

fn set_node(dev: &mut Device, i: usize, q: &dyn Qdisc) {
    let handle = {
        let n: &mut QdiscNode = &mut dev.qdiscs[i];
        n.stats = q.stats();
        n.handle
    };
    children(dev, handle, q);
}

/// The classes and child qdiscs of the qdisc `handle`, running as `q`.
fn children(dev: &mut Device, handle: Handle, q: &dyn Qdisc) {
    let Some(any) = q.as_any() else { return };
    if let Some(h) = any.downcast_ref::<Htb>() {
        let ids: Vec<Handle> =
            dev.classes.iter().map(|c| c.classid).filter(|c| c.major() == handle.major()).collect();
        for id in ids {
            if let (Some(cs), Some(c)) = (h.class_stats(id), dev.classes.iter_mut().find(|c| c.classid == id))
            {
                c.stats = QdiscStats {
                    bytes: cs.bytes,
                    packets: cs.packets,
                    drops: cs.drops,
                    overlimits: cs.overlimits,
                    backlog_bytes: cs.backlog,
                    qlen: cs.qlen,
                    requeues: 0,
                };
            }
            if let (Some(leaf), Some(i)) = (h.leaf_qdisc(id), child_node(dev, id, false)) {
                set_node(dev, i, leaf);
            }
        }
    } else if let Some(d) = any.downcast_ref::<Drr>() {
        let ids: Vec<Handle> = d.class_ids().collect();
        for id in ids {
            if let (Some(cs), Some(c)) = (d.class_stats(id), dev.classes.iter_mut().find(|c| c.classid == id))
            {
                c.stats = cs.stats;
            }
            if let (Some(leaf), Some(i)) = (d.class_qdisc(id), child_node(dev, id, false)) {
                set_node(dev, i, leaf);
            }
        }
    } else {
        let child = if let Some(n) = any.downcast_ref::<Netem>() {
            n.child()
        } else if let Some(t) = any.downcast_ref::<Tbf>() {
            Some(t.child())
        } else {
            any.downcast_ref::<Red>().map(|r| r.child())
        };
        if let (Some(c), Some(i)) = (child, child_node(dev, handle, true)) {
            set_node(dev, i, c);
        }
    }
}

/// `tc -s qdisc show dev DEV ingress`: the receive path's qdisc only.
pub fn tc_stats_ingress(dev: &Device) -> String {
    let o = ShowOpts { stats: true, ..Default::default() };
    let mut out = format!("$ tc -s qdisc show dev {} ingress\n", dev.name);
    show_qdiscs(&mut out, dev, true, o, Some(H_INGRESS));
    out
}

/// `tc -s qdisc show dev DEV` then `tc -s class show dev DEV` (when it has classes), as text.
pub fn tc_stats(dev: &Device) -> String {
    let o = ShowOpts { stats: true, ..Default::default() };
    let mut out = format!("$ tc -s qdisc show dev {}\n", dev.name);
    show_qdiscs(&mut out, dev, true, o, None);
    if !dev.classes.is_empty() {
        out += &format!("$ tc -s class show dev {}\n", dev.name);
        show_classes(&mut out, dev, o, None, None);
    }
    out
}
