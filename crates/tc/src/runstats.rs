//! Counters of a run in the model: what a device's running qdisc tree (built by
//! [`crate::build`]) counted is written into the [`Device`]'s qdisc and class nodes, so that
//! `tc -s qdisc show` and `tc -s class show` print them as the kernel's `tc -s` would after the
//! same traffic ([`tc_stats`]).
//!
//! The running tree is walked through the [`Qdisc`] trait alone ([`Qdisc::for_each_class`]), so
//! every classful kind is covered the same way: each class a qdisc reports gets its counters
//! (`Sent`, `dropped`, `overlimits`, `requeues`, backlog) in its [`ClassNode`], or, for the
//! classes the model leaves implicit (prio's and ETS's bands, HFSC's root class), in
//! [`Device::implicit_class_stats`]; each qdisc attached to a class gets the counters of the
//! running qdisc there, and is walked in turn. A class the kernel dumps no counters for (TBF's,
//! RED's and netem's one class) keeps none. The kinds' own statistics (HTB's
//! lended/borrowed/tokens, fq_codel's and CAKE's xstats) stay the idle values `show` prints for a
//! configuration.
//!
//! [`ClassNode`]: crate::model::ClassNode

use crate::model::{Device, H_INGRESS, H_ROOT};
use crate::tc::show::{show_classes, show_qdiscs, ShowOpts};
use sluice_core::{ClassView, Handle, Qdisc, QdiscStats};
use std::collections::HashMap;

/// Writes the counters of `root` (the running tree of `dev`'s root qdisc) into `dev`'s nodes;
/// `root_stats` is what the root reports as a whole (an engine adds its filters' drops there).
pub fn import(dev: &mut Device, root: &dyn Qdisc, root_stats: QdiscStats) {
    let Some(i) = dev.qdiscs.iter().position(|q| q.parent == H_ROOT) else { return };
    dev.qdiscs[i].stats = root_stats;
    dev.implicit_class_stats.clear();
    let mut w = Walk {
        classes: dev.classes.iter().enumerate().map(|(k, c)| (c.classid, k)).collect(),
        attached: HashMap::new(),
        dev,
    };
    // The first qdisc added under a parent, as `Device::qdisc_at` finds it.
    for (k, q) in w.dev.qdiscs.iter().enumerate().rev() {
        if q.parent != H_ROOT && q.parent != H_INGRESS {
            w.attached.insert(q.parent, k);
        }
    }
    let handle = w.dev.qdiscs[i].handle;
    w.qdisc(handle, root);
}

/// The ingress (or clsact) qdisc's counters: what the receive path saw (`Sent`) and what its
/// filters dropped.
pub fn import_ingress(dev: &mut Device, rx_bytes: u64, rx_packets: u64, drops: u64) {
    if let Some(q) = dev.qdiscs.iter_mut().find(|q| q.parent == H_INGRESS) {
        q.stats = QdiscStats { bytes: rx_bytes, packets: rx_packets, drops, ..Default::default() };
    }
}

/// A walk of a running tree alongside the model's nodes.
struct Walk<'d> {
    dev: &'d mut Device,
    /// Class node of each classid.
    classes: HashMap<Handle, usize>,
    /// Qdisc node attached to each class.
    attached: HashMap<Handle, usize>,
}

impl Walk<'_> {
    /// The classes of the qdisc `handle`, running as `q`, and the qdiscs attached to them.
    fn qdisc(&mut self, handle: Handle, q: &dyn Qdisc) {
        let mut classes: Vec<ClassView<'_>> = Vec::new();
        q.for_each_class(&mut |c| classes.push(c));
        let only = classes.len() == 1;
        for c in classes {
            let id = Handle::new(handle.major(), c.minor);
            if let Some(s) = c.stats {
                match self.classes.get(&id) {
                    Some(&k) => self.dev.classes[k].stats = s,
                    None => {
                        self.dev.implicit_class_stats.insert(id, s);
                    }
                }
            }
            let Some(child) = c.child else { continue };
            // A qdisc with one class takes a child under any minor (`tbf_find`, `netem_find`...).
            let node = self.attached.get(&id).copied().or_else(|| {
                only.then(|| {
                    self.dev.qdiscs.iter().position(|n| {
                        n.parent != H_ROOT && n.parent != H_INGRESS && n.parent.qdisc() == handle.qdisc()
                    })
                })
                .flatten()
            });
            if let Some(k) = node {
                self.dev.qdiscs[k].stats = child.stats();
                let h = self.dev.qdiscs[k].handle;
                self.qdisc(h, child);
            }
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

/// `tc -s qdisc show dev DEV` then `tc -s class show dev DEV` (when it has classes, implicit
/// ones such as prio's bands included), as text.
pub fn tc_stats(dev: &Device) -> String {
    let o = ShowOpts { stats: true, ..Default::default() };
    let mut out = format!("$ tc -s qdisc show dev {}\n", dev.name);
    show_qdiscs(&mut out, dev, true, o, None);
    let mut classes = String::new();
    show_classes(&mut classes, dev, o, None, None);
    if !classes.is_empty() {
        out += &format!("$ tc -s class show dev {}\n", dev.name);
        out += &classes;
    }
    out
}
