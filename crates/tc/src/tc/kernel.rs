//! What the kernel checks and does with a tc request, applied to the emulated [`State`].
//!
//! Messages are the kernel's extack strings (`Error: ...`), or `RTNETLINK answers: ...` where the
//! kernel gives none. Every request is all-or-nothing: callers keep a copy and restore it on error.

use super::args::{ClassCmd, FilterCmd, QdiscCmd, Verb};
use super::error::TcError;
use crate::model::*;
use sluice_model::kinds::filter_common::FilterChange;
use sluice_model::kinds::ClassChange;

/// Finds a device or fails like tc (`Cannot find device "X"`, exit 1).
pub fn device_mut<'a>(
    state: &'a mut State,
    dev: &Option<(String, usize)>,
) -> Result<&'a mut Device, TcError> {
    let Some((name, i)) = dev else {
        return Err(TcError::usage("Must specify device.", None));
    };
    state
        .devices
        .iter_mut()
        .find(|d| &d.name == name)
        .ok_or_else(|| TcError::usage(format!("Cannot find device \"{name}\""), Some(*i)))
}

/// True when `classid` names an existing class of qdisc `q` (the kind's `find`).
pub fn class_exists(dev: &Device, q: &QdiscNode, classid: Handle) -> bool {
    classid.qdisc() == q.handle && q.opts.has_class(dev, q, classid)
}

/// Removes qdisc `handle` and everything below it (classes, child qdiscs, filters).
pub fn remove_qdisc_tree(dev: &mut Device, handle: Handle) {
    dev.remove_qdisc_tree(handle)
}

/// `ffff:`, the handle of the ingress/clsact qdisc.
const INGRESS_QDISC: Handle = Handle::new(0xFFFF, 0);

fn flags(verb: Verb) -> (bool, bool, bool) {
    // (create, excl, replace)
    match verb {
        Verb::Add => (true, true, false),
        Verb::Replace => (true, false, true),
        _ => (false, false, false),
    }
}

/// `tc qdisc add|change|replace|delete`. Automatic handles come from the state's one counter
/// (the kernel's is global), advanced only when the request succeeds.
pub fn qdisc_modify(state: &mut State, c: &QdiscCmd) -> Result<Vec<String>, TcError> {
    let global = state.next_auto_handle;
    let dev = device_mut(state, &c.dev)?;
    let own = dev.next_auto_handle;
    dev.next_auto_handle = global;
    let r = qdisc_modify_dev(dev, c);
    let next = std::mem::replace(&mut dev.next_auto_handle, own);
    if r.is_ok() {
        state.next_auto_handle = next;
    }
    r
}

fn qdisc_modify_dev(dev: &mut Device, c: &QdiscCmd) -> Result<Vec<String>, TcError> {
    if c.unknown_kind {
        return Err(TcError::kernel("Specified qdisc kind is unknown"));
    }
    if c.verb == Verb::Delete {
        return qdisc_delete(dev, c).map(|_| Vec::new());
    }
    let (create, excl, replace) = flags(c.verb);
    let kind = c.kind.as_ref().map(|k| k.0.as_str());
    let handle = c.handle.unwrap_or(Handle::UNSPEC);
    let mut existing: Option<Handle> = None; // handle of the qdisc to change
    let mut graft_old: Option<Handle> = None; // qdisc in the slot being replaced
    let slot = match c.parent {
        Some(parent) => {
            let q = if parent == H_ROOT || parent == H_INGRESS {
                dev.qdisc_at(parent).map(|q| q.handle)
            } else {
                let p = dev
                    .qdisc(parent)
                    .ok_or_else(|| TcError::kernel("Failed to find specified qdisc"))?
                    .clone();
                if p.parent == H_INGRESS {
                    return Err(TcError::kernel("Cannot add children to ingress/clsact qdisc"));
                }
                if !p.opts.has_class_ops() {
                    return Err(TcError::kernel("Parent qdisc is not classful"));
                }
                if !class_exists(dev, &p, parent) {
                    return Err(TcError::kernel("Specified class not found"));
                }
                if dev.child_classes(parent).next().is_some() {
                    // An inner HTB class has no leaf to graft onto.
                    return Err(TcError::errno("Invalid argument"));
                }
                dev.qdisc_at(parent).map(|q| q.handle)
            };
            let mut create_n_graft = false;
            match q {
                Some(qh) if !handle.is_unspec() && qh == handle => existing = Some(qh),
                Some(qh) if !handle.is_unspec() => {
                    if !replace {
                        return Err(TcError::kernel("NLM_F_REPLACE needed to override"));
                    }
                    if let Some(other) = dev.qdisc(handle) {
                        if excl {
                            return Err(TcError::kernel("Exclusivity flag on, cannot override"));
                        }
                        if kind.is_some_and(|k| k != other.opts.kind()) {
                            return Err(TcError::kernel("Invalid qdisc name: must match existing qdisc"));
                        }
                        return Err(TcError::kernel(
                            "Sluice cannot move an existing qdisc to another parent",
                        ));
                    }
                    graft_old = Some(qh);
                    create_n_graft = true;
                }
                Some(qh) => {
                    let cur_kind = dev.qdisc(qh).map(|q| q.opts.kind()).unwrap_or("");
                    if create && replace && kind.is_some_and(|k| k != cur_kind) {
                        graft_old = Some(qh);
                        create_n_graft = true;
                    } else {
                        existing = Some(qh);
                    }
                }
                None => {
                    if !handle.is_unspec() && dev.qdisc(handle).is_some() {
                        if excl {
                            return Err(TcError::kernel("Exclusivity flag on, cannot override"));
                        }
                        return Err(TcError::kernel(
                            "Sluice cannot move an existing qdisc to another parent",
                        ));
                    }
                    create_n_graft = true;
                }
            }
            if create_n_graft {
                Some(parent)
            } else {
                None
            }
        }
        None => {
            if handle.is_unspec() {
                return Err(TcError::kernel("Handle cannot be zero"));
            }
            existing = dev.qdisc(handle).map(|q| q.handle);
            None
        }
    };
    if let Some(parent) = slot {
        if !create {
            return Err(TcError::kernel("Qdisc not found. To create specify NLM_F_CREATE flag"));
        }
        let Some(opts) = c.opts.clone() else {
            return Err(TcError::kernel("Specified qdisc kind is unknown"));
        };
        // qdisc_create: only TCQ_F_INGRESS kinds at the ingress slot; then the kind's own init.
        if parent == H_INGRESS && !opts.is_ingress() {
            return Err(TcError::kernel("Specified qdisc kind is unknown"));
        }
        opts.check_parent(dev, parent)?;
        let opts = validate_qdisc(dev, opts, None)?;
        if let QdiscOpts::Netem(n) = &opts {
            super::netem::check_in_tree(dev, graft_old, n)?;
        }
        let new_handle = if !handle.is_unspec() {
            handle
        } else {
            let h = auto_handle(dev).ok_or_else(|| TcError::errno("Cannot allocate memory"))?;
            dev.next_auto_handle = h + 1;
            Handle::from_tc(h << 16)
        };
        if let Some(old) = graft_old {
            remove_qdisc_tree(dev, old);
        }
        dev.ingress_queue |= parent == H_INGRESS;
        set_mq_slot(dev, parent, false);
        dev.qdiscs.push(QdiscNode {
            handle: new_handle,
            parent,
            opts,
            stab: c.stab,
            stats: Default::default(),
        });
        return Ok(Vec::new());
    }
    let Some(qh) = existing else {
        return Err(TcError::kernel("Specified qdisc not found"));
    };
    if excl {
        return Err(TcError::kernel("Exclusivity flag on, cannot modify"));
    }
    let old = dev.qdisc(qh).cloned().ok_or_else(|| TcError::kernel("Specified qdisc not found"))?;
    if kind.is_some_and(|k| k != old.opts.kind()) {
        return Err(TcError::kernel("Invalid qdisc name: must match existing qdisc"));
    }
    // qdisc_change: options go to the kind's change operation (HTB has none, and tc always
    // sends HTB options: its `change` refuses); then the size table is replaced by the one given,
    // or removed.
    let merged = match c.opts.clone() {
        Some(new) => validate_qdisc(dev, new, Some(&old.opts))?,
        None => old.opts.clone(),
    };
    if let QdiscOpts::Netem(n) = &merged {
        super::netem::check_in_tree(dev, Some(qh), n)?;
    }
    if let QdiscOpts::Ets(e) = &merged {
        // ets_qdisc_change: the qdiscs of bands that go away go with them.
        let gone: Vec<Handle> = dev
            .qdiscs
            .iter()
            .filter(|c| {
                c.parent != H_ROOT && c.parent.qdisc() == qh && !super::ets::has_class(e, c.parent.minor())
            })
            .map(|c| c.handle)
            .collect();
        for h in gone {
            remove_qdisc_tree(dev, h);
        }
    }
    // tbf_change: fifo_set_limit gives a fifo child the new limit (bytes, whatever the fifo).
    if let Some(limit) = sluice_model::kinds::tbf::child_fifo_limit(&merged) {
        for q in dev.qdiscs.iter_mut().filter(|q| q.parent != H_ROOT && q.parent.qdisc() == qh) {
            sluice_model::kinds::fifo::set_limit(&mut q.opts, limit);
        }
    }
    if let Some(q) = dev.qdiscs.iter_mut().find(|q| q.handle == qh) {
        q.opts = merged;
        q.stab = c.stab;
    }
    Ok(Vec::new())
}

/// Kernel-side checks; for `change`, merges with the previous options where the kernel keeps
/// attributes that were not sent.
fn validate_qdisc(dev: &Device, new: QdiscOpts, old: Option<&QdiscOpts>) -> Result<QdiscOpts, TcError> {
    new.change(dev, old)
}

fn qdisc_delete(dev: &mut Device, c: &QdiscCmd) -> Result<(), TcError> {
    let kind = c.kind.as_ref().map(|k| k.0.as_str());
    let handle = c.handle.unwrap_or(Handle::UNSPEC);
    let qh = match c.parent {
        Some(parent) => {
            let q = if parent == H_ROOT {
                // The default root (noqueue) has handle 0.
                Some(dev.root().map(|q| q.handle).unwrap_or(Handle::UNSPEC))
            } else if parent == H_INGRESS || parent.qdisc() == INGRESS_QDISC {
                match dev.qdisc_at(H_INGRESS) {
                    Some(q) => Some(q.handle),
                    // Once made, the ingress queue stays, holding the noop qdisc (handle 0).
                    None if dev.ingress_queue => Some(Handle::UNSPEC),
                    None => None,
                }
            } else {
                let p = dev
                    .qdisc(parent)
                    .ok_or_else(|| TcError::kernel("Failed to find qdisc with specified classid"))?
                    .clone();
                if !class_exists(dev, &p, parent) {
                    return Err(TcError::kernel("Specified class not found"));
                }
                Some(dev.qdisc_at(parent).map(|q| q.handle).unwrap_or(Handle::UNSPEC))
            };
            let q = q.ok_or_else(|| TcError::kernel("Cannot find specified qdisc on specified device"))?;
            if !handle.is_unspec() && q != handle {
                return Err(TcError::kernel("Invalid handle"));
            }
            q
        }
        None => {
            let q = dev.qdisc(handle).filter(|_| !handle.is_unspec()).map(|q| q.handle);
            let q = q.ok_or_else(|| TcError::kernel("Failed to find qdisc with specified handle"))?;
            if kind.is_some_and(|k| Some(k) != dev.qdisc(q).map(|x| x.opts.kind())) {
                return Err(TcError::kernel("Invalid qdisc name: must match existing qdisc"));
            }
            return Err(TcError::kernel("Classid cannot be zero"));
        }
    };
    if q_is_default(qh) {
        return Err(TcError::kernel("Cannot delete qdisc with handle of zero"));
    }
    if kind.is_some_and(|k| Some(k) != dev.qdisc(qh).map(|x| x.opts.kind())) {
        return Err(TcError::kernel("Invalid qdisc name: must match existing qdisc"));
    }
    let slot = dev.qdisc(qh).map(|q| q.parent);
    remove_qdisc_tree(dev, qh);
    if let Some(p) = slot {
        set_mq_slot(dev, p, true);
    }
    Ok(())
}

/// Marks an mq class as holding nothing (its grafted qdisc was deleted: the kernel's noop) or,
/// when a qdisc is grafted there, as holding that one.
fn set_mq_slot(dev: &mut Device, parent: Handle, emptied: bool) {
    if parent == H_ROOT || parent == H_INGRESS {
        return;
    }
    let minor = parent.minor();
    if let Some(q) = dev.qdiscs.iter_mut().find(|q| q.handle == parent.qdisc()) {
        if let QdiscOpts::Mq(m) = &mut q.opts {
            m.emptied.retain(|&e| e != minor);
            if emptied {
                m.emptied.push(minor);
            }
        }
    }
}

/// The kernel's `qdisc_alloc_handle`: the major after the last one handed out, from 8000: to
/// fffe: and round again (ffff: is the root), skipping majors in use; none free: ENOMEM.
fn auto_handle(dev: &Device) -> Option<u32> {
    let in_use: std::collections::HashSet<u16> = dev.qdiscs.iter().map(|q| q.handle.major()).collect();
    let mut h = dev.next_auto_handle.saturating_sub(1);
    for _ in 0..0x8000 {
        h += 1;
        if !(0x8000..0xFFFF).contains(&h) {
            h = 0x8000;
        }
        if !in_use.contains(&(h as u16)) {
            return Some(h);
        }
    }
    None
}

fn q_is_default(h: Handle) -> bool {
    h.is_unspec()
}

/// `tc class add|change|replace|delete`.
pub fn class_modify(state: &mut State, c: &ClassCmd) -> Result<Vec<String>, TcError> {
    let dev = device_mut(state, &c.dev)?;
    let (create, excl, _) = flags(c.verb);
    let clid = c.classid.unwrap_or(Handle::UNSPEC);
    let portid = c.parent.unwrap_or(Handle::UNSPEC);
    let root_handle = dev.root().map(|q| q.handle).unwrap_or(Handle::UNSPEC);
    let mut qid = clid.qdisc();
    let mut parent = portid;
    if portid != H_ROOT {
        let qid1 = portid.qdisc();
        if !qid.is_unspec() && !qid1.is_unspec() {
            if qid != qid1 {
                return Err(TcError::errno("Invalid argument"));
            }
        } else if !qid1.is_unspec() {
            qid = qid1;
        } else if qid.is_unspec() {
            qid = root_handle;
        }
        if !portid.is_unspec() {
            parent = Handle::new(qid.major(), portid.minor());
        }
    } else if qid.is_unspec() {
        qid = root_handle;
    }
    let q = dev
        .qdisc(qid)
        .filter(|_| !qid.is_unspec())
        .cloned()
        .ok_or_else(|| TcError::errno("No such file or directory"))?;
    if q.parent == H_INGRESS {
        // No class operations: ingress_find finds every class, clsact_find none but its hooks.
        let found = q.opts.has_class(dev, &q, clid);
        return Err(TcError::errno(match (found, c.verb == Verb::Delete) {
            (true, false) if excl => "File exists",
            (true, _) => "Operation not supported",
            (false, false) if create => "Operation not supported",
            (false, _) => "No such file or directory",
        }));
    }
    let clid = if clid.is_unspec() { clid } else { Handle::new(qid.major(), clid.minor()) };
    let exists = !clid.is_unspec() && class_exists(dev, &q, clid);
    if c.verb == Verb::Delete {
        if !exists {
            return Err(TcError::errno("No such file or directory"));
        }
        return class_delete(dev, &q, clid).map(|_| Vec::new());
    }
    if exists && excl {
        return Err(TcError::errno("File exists"));
    }
    if !exists && !create {
        return Err(TcError::errno("No such file or directory"));
    }
    if let Some((k, _)) = &c.kind {
        if k != q.opts.kind() {
            return Err(TcError::errno("Invalid argument"));
        }
    }
    // tc_ctl_tclass, for every kind.
    if clid == H_ROOT {
        return Err(TcError::kernel("Cannot create traffic class with classid TC_H_ROOT"));
    }
    let Some(opts) = c.opts.clone() else {
        return Err(TcError::errno("Invalid argument"));
    };
    if opts.kind() != q.opts.kind() {
        return Err(TcError::errno("Operation not supported"));
    }
    opts.change(ClassChange { dev, q: &q, clid, parent, exists })
}

/// `cl_ops->delete`: refused while the class has child classes or a filter of the qdisc names
/// it; its qdisc and the filters on it go with it.
fn class_delete(dev: &mut Device, q: &QdiscNode, clid: Handle) -> Result<(), TcError> {
    let kind_msg = q.opts.class_in_use(q, clid)?;
    let has_children = dev.child_classes(clid).next().is_some();
    let bound = dev.filters.iter().any(|f| f.opts.classid() == Some(clid) && f.parent.qdisc() == q.handle);
    if has_children || bound {
        return Err(TcError::kernel(kind_msg));
    }
    if let Some(leaf) = dev.qdisc_at(clid).map(|l| l.handle) {
        remove_qdisc_tree(dev, leaf);
    }
    dev.classes.retain(|c| c.classid != clid);
    dev.filters.retain(|f| f.parent != clid);
    Ok(())
}

/// Resolves a filter parent to its block id: the qdisc handle, an HTB class, or ingress/egress.
pub fn resolve_block(dev: &Device, parent: Option<Handle>) -> Result<Handle, TcError> {
    let parent = parent.unwrap_or(Handle::UNSPEC);
    if parent == H_MIN_INGRESS || parent == H_MIN_EGRESS {
        let q = dev.qdisc_at(H_INGRESS).ok_or_else(|| TcError::kernel("Parent Qdisc doesn't exists"))?;
        return q.opts.filter_block(dev, q, parent);
    }
    let q = if parent.is_unspec() || parent == H_ROOT {
        dev.root().ok_or_else(|| TcError::kernel("Qdisc not classful"))?
    } else {
        dev.qdisc(parent).ok_or_else(|| TcError::kernel("Parent Qdisc doesn't exists"))?
    };
    let minor = if parent == H_ROOT { 0 } else { parent.minor() };
    q.opts.filter_block(dev, q, Handle::new(q.handle.major(), minor))
}

/// `tc filter add|change|replace|delete`. A filter's actions bind the namespace's action table
/// (see [`super::actions`]): new inline actions join it, and those no filter holds any more leave.
pub fn filter_modify(state: &mut State, c: &FilterCmd) -> Result<Vec<String>, TcError> {
    let specs = c.spec.as_ref().map(|s| s.actions.as_slice()).unwrap_or(&[]);
    let (actions, added) = if c.verb == Verb::Delete {
        (Vec::new(), Vec::new())
    } else {
        super::actions::bind_filter_actions(state, specs)?
    };
    // Whether an action lost a bind: the references grew by exactly this filter's actions
    // (O(filters) integer sums) or the whole table is checked again.
    let before = super::actions::total_binds(state);
    let n = actions.len();
    let w = filter_modify_inner(state, c, actions)?;
    if c.verb != Verb::Delete && super::actions::total_binds(state) == before + n {
        super::actions::settle_added(state, added);
    } else {
        super::actions::settle(state, added);
    }
    Ok(w)
}

fn filter_modify_inner(
    state: &mut State,
    c: &FilterCmd,
    actions: Vec<Action>,
) -> Result<Vec<String>, TcError> {
    let names: Vec<String> = state.devices.iter().map(|d| d.name.clone()).collect();
    let dev = device_mut(state, &c.dev)?;
    let block = resolve_block(dev, c.parent)?;
    let chain = c.chain.unwrap_or(0);
    let kind = c.kind.as_ref().map(|k| k.0.clone());
    let in_tp = |f: &FilterNode, prio: u16| f.parent == block && f.chain == chain && f.prio == prio;
    if c.verb == Verb::Delete {
        if c.prio == 0 {
            // tc_del_tfilter: without a priority the whole chain is flushed, and nothing else
            // may narrow the request.
            if c.protocol.is_some() || c.kind.is_some() {
                return Err(TcError::kernel("Cannot flush filters with protocol, handle or kind set"));
            }
            dev.filters.retain(|f| !(f.parent == block && f.chain == chain));
            return Ok(Vec::new());
        }
        let prio = c.prio as u16;
        let tp = dev.filters.iter().find(|f| in_tp(f, prio)).cloned();
        let Some(tp) = tp.filter(|t| c.protocol.is_none_or(|p| p == t.protocol)) else {
            return Err(TcError::kernel("Filter with specified priority/protocol not found"));
        };
        if kind.as_deref().is_some_and(|k| k != tp.opts.kind()) {
            return Err(TcError::kernel("Specified filter kind does not match existing one"));
        }
        let handle = c.spec.as_ref().map(|s| s.handle).unwrap_or(0);
        if handle == 0 {
            dev.filters.retain(|f| !in_tp(f, prio));
            return Ok(Vec::new());
        }
        let pos = dev.filters.iter().position(|f| in_tp(f, prio) && f.handle == handle);
        let Some(pos) = pos else {
            return Err(TcError::kernel("Specified filter handle not found"));
        };
        let removed = dev.filters.remove(pos);
        removed.opts.delete(&removed, dev);
        // The classifier goes away with its last filter (u32 keeps only its root table).
        let left = dev.filters.iter().filter(|f| in_tp(f, prio)).count();
        let only_root = dev.filters.iter().filter(|f| in_tp(f, prio)).all(|f| f.opts.implicit(f.handle));
        if left == 0 || only_root {
            dev.filters.retain(|f| !in_tp(f, prio));
        }
        return Ok(Vec::new());
    }
    let (create, excl, _) = flags(c.verb);
    let Some(spec) = c.spec.clone() else {
        return Err(TcError::kernel("Filter kind and protocol must be specified"));
    };
    let kind = kind.unwrap_or_default();
    let mut prio = c.prio as u16;
    if prio == 0 {
        if !create {
            return Err(TcError::kernel("Invalid filter command with priority of zero"));
        }
        // tcf_auto_prio: one below the first classifier at or above 0x8000 (where a request
        // without priority is inserted), else 0xc000.
        prio = dev
            .filters
            .iter()
            .filter(|f| f.parent == block && f.chain == chain && f.prio >= 0x8000)
            .map(|f| f.prio)
            .min()
            .map(|p| p - 1)
            .unwrap_or(0xC000);
    }
    let tp = dev.filters.iter().find(|f| in_tp(f, prio)).cloned();
    let protocol = match &tp {
        Some(t) => {
            // tc sends ETH_P_ALL for an add or replace without `protocol`.
            let asked = c.protocol.or(create.then_some(ETH_P_ALL));
            if asked.is_some_and(|p| p != t.protocol) {
                return Err(TcError::kernel("Protocol mismatch for filter with specified priority"));
            }
            if t.opts.kind() != kind {
                return Err(TcError::kernel("Specified filter kind does not match existing one"));
            }
            t.protocol
        }
        None => {
            if !create {
                return Err(TcError::kernel("Filter with specified priority/protocol not found"));
            }
            c.protocol.unwrap_or(ETH_P_ALL)
        }
    };
    let mut cx = FilterChange {
        dev,
        block,
        chain,
        prio,
        protocol,
        new_tp: tp.is_none(),
        create,
        excl,
        devices: &names,
        actions,
        police_keyword: spec.actions.iter().any(|a| a.compat),
        handle: spec.handle,
        table: spec.u32_htid,
        given: spec.given.clone(),
    };
    spec.opts.change(&mut cx)?;
    Ok(Vec::new())
}
