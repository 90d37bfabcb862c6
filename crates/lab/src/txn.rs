//! `sluice apply` as a transaction: probe, apply the difference, or restore the previous tree.
//!
//! [`apply_plan`]:
//! 1. reads the device's tree ([`plan::dump_tree`]): the snapshot;
//! 2. refuses filters (not in the diff yet: `sluice apply` sends such configurations through
//!    `kernel::apply`, object by object) and probes every
//!    qdisc and class kind the change needs on `lo` of a private network namespace ([`probe`]),
//!    so a missing module or a refused option is found before the device is touched;
//! 3. sends only the difference ([`plan::diff`]) in batches ([`crate::batch`]), every ack checked;
//! 4. if the kernel refuses any request, reads the tree again and sends the difference back to
//!    the snapshot, then checks that the tree equals the snapshot, and reports the refusal
//!    ([`LabError::Refused`]) saying whether the restore was exact.
//!
//! [`rehearse`] (for `--dry-run`) builds the whole plan from scratch on `lo` of a private
//! namespace and reports every refusal, without touching the device.

use crate::batch;
use crate::kernel::Plan;
use crate::netlink::{Msg, Netlink};
use crate::plan::{self, RawObj, Want};
use crate::LabError;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// What an apply did.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    /// Objects added, changed in place, deleted, re-created (deleted then added).
    pub added: usize,
    /// Changed in place.
    pub changed: usize,
    /// Deleted.
    pub deleted: usize,
    /// Re-created (not hitless: the kernel cannot change kind, parent or handle in place).
    pub recreated: usize,
    /// Requests sent.
    pub messages: usize,
    /// `sendmsg` calls.
    pub sendmsgs: usize,
    /// Time to read the kernel's tree.
    pub read: Duration,
    /// Time to probe the kinds.
    pub probe: Duration,
    /// Time to compute the difference and encode the requests.
    pub plan: Duration,
    /// Time to send them and read every ack.
    pub send: Duration,
    /// One line per request.
    pub lines: Vec<String>,
    /// Warnings the kernel gave on requests it accepted (e.g. "quantum of class ... is big").
    pub warnings: Vec<String>,
}

/// Options of [`apply_plan`].
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions {
    /// Probe the needed kinds in a private namespace before touching the device.
    pub probe: bool,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions { probe: true }
    }
}

/// Programs `plan` into its device (calling thread's namespace), all or nothing, sending only
/// the difference from what the device holds.
pub fn apply_plan(plan: &Plan<'_>, opts: ApplyOptions) -> Result<Applied, LabError> {
    let filters = plan.filters();
    if !filters.is_empty() {
        // TODO: filters in the diff: encode with `filters::filter_msg`, read the kernel's with
        // `filters::dump_filters` (and keep their raw options in the snapshot for the restore),
        // send adds/changes after the class adds and deletes before the class deletes. Until then
        // a configuration with filters is refused here, whole, and the CLI uses `kernel::apply`.
        return Err(LabError::Refused(format!(
            "{} filter(s), first `{}`: the transactional apply does not program filters yet; nothing was changed",
            filters.len(),
            filters[0].1
        )));
    }
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(plan.ifname())?;
    let mut out = Applied::default();
    let t = Instant::now();
    let snapshot = plan::dump_tree(&mut nl, ifindex)?;
    out.read = t.elapsed();
    let t = Instant::now();
    let d = plan::diff(plan::wants_of_plan(plan), &snapshot);
    out.plan = t.elapsed();
    if opts.probe {
        let t = Instant::now();
        let needed: Vec<&Want<'_>> = d.adds.iter().chain(&d.changes).collect();
        probe(&needed)?;
        out.probe = t.elapsed();
    }
    let t = Instant::now();
    let mut msgs = d.messages(ifindex);
    out.plan += t.elapsed();
    out.added = d.adds.len();
    out.changed = d.changes.len();
    out.deleted = d.deletes.len();
    out.recreated = d.recreated.len();
    let t = Instant::now();
    let (sent, refusals) = send_ops(&mut nl, &mut msgs, true)?;
    out.send = t.elapsed();
    out.messages = sent.0;
    out.sendmsgs = sent.1;
    out.lines = msgs.into_iter().map(|(_, _, l)| l).collect();
    out.warnings = nl.take_warnings();
    if refusals.is_empty() {
        return Ok(out);
    }
    let restored = restore(&mut nl, ifindex, &snapshot);
    Err(LabError::Refused(format!(
        "{}; {}",
        first_few(&refusals),
        match restored {
            Ok(()) => "the device's previous tree was restored exactly".to_string(),
            Err(e) => format!("the previous tree could NOT be restored exactly: {e}"),
        }
    )))
}

/// Programs the change from `old` (what `sluice apply` programmed last, trusted to be what the
/// device holds) to `new`, without reading the kernel: only the difference is sent. If the kernel
/// refuses a request, the difference back to `old` is sent (deleting only what was really added)
/// and the refusal is returned. For a large tree this skips the dump, whose cost
/// grows with the tree; [`apply_plan`] is the one that checks the kernel.
pub fn apply_between(old: &Plan<'_>, new: &Plan<'_>) -> Result<Applied, LabError> {
    if !new.filters().is_empty() {
        // TODO: as in apply_plan.
        return Err(LabError::Refused(
            "the configuration has filters, which the transactional apply does not program yet; nothing was changed".into(),
        ));
    }
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(new.ifname())?;
    let mut out = Applied::default();
    let t = Instant::now();
    let old_tree = plan::as_dump(&plan::wants_of_plan(old));
    let d = plan::diff(plan::wants_of_plan(new), &old_tree);
    let mut msgs = d.messages(ifindex);
    out.plan = t.elapsed();
    (out.added, out.changed, out.deleted, out.recreated) =
        (d.adds.len(), d.changes.len(), d.deletes.len(), d.recreated.len());
    let t = Instant::now();
    let (sent, refusals, failed) = send_ops_detailed(&mut nl, &mut msgs, true)?;
    out.send = t.elapsed();
    (out.messages, out.sendmsgs) = sent;
    out.lines = msgs.into_iter().map(|(_, _, l)| l).collect();
    out.warnings = nl.take_warnings();
    if refusals.is_empty() {
        return Ok(out);
    }
    // Undo: the difference back to `old`, deleting only what was really added (a delete of
    // what the kernel refused to add would be refused in turn).
    let added: HashSet<plan::Key> = d
        .adds
        .iter()
        .enumerate()
        .filter(|(j, _)| {
            let i = d.recreated.len() + j;
            i < sent.0 && !failed.contains(&i)
        })
        .map(|(_, w)| w.key())
        .collect();
    let mut back = plan::diff(plan::wants_of_plan(old), &plan::as_dump(&plan::wants_of_plan(new)));
    back.deletes.retain(|r| added.contains(&r.key()));
    let mut undo = back.messages(ifindex);
    let (_, undo_refusals) = send_ops(&mut nl, &mut undo, false)?;
    Err(LabError::Refused(format!(
        "{}; {}",
        first_few(&refusals),
        if undo_refusals.is_empty() {
            "the change was undone".to_string()
        } else {
            format!("the previous tree could NOT be restored exactly: {}", first_few(&undo_refusals))
        }
    )))
}

/// Sends the ordered requests; returns ((requests, sendmsgs), the refusals as text). A delete of
/// something already gone is not a refusal.
fn send_ops(
    nl: &mut Netlink,
    ops: &mut [(Msg, bool, String)],
    stop_on_error: bool,
) -> Result<((usize, usize), Vec<String>), LabError> {
    send_ops_detailed(nl, ops, stop_on_error).map(|(s, r, _)| (s, r))
}

/// [`send_ops`], with the indices of the requests the kernel refused.
#[allow(clippy::type_complexity)]
fn send_ops_detailed(
    nl: &mut Netlink,
    ops: &mut [(Msg, bool, String)],
    stop_on_error: bool,
) -> Result<((usize, usize), Vec<String>, HashSet<usize>), LabError> {
    let mut msgs: Vec<Msg> = ops.iter().map(|(m, _, _)| m.clone()).collect();
    let o = batch::send(nl, &mut msgs, stop_on_error)?;
    let failed = o.errors.iter().map(|(i, _)| *i).collect();
    let refusals = o
        .errors
        .iter()
        .filter(|(i, e)| !(ops[*i].1 && matches!(e, LabError::Kernel { errno: 2, .. })))
        .map(|(i, e)| format!("{}: {}", ops[*i].2, describe(e)))
        .collect();
    Ok(((o.sent, o.sendmsgs), refusals, failed))
}

/// The first refusals and how many more (a refused parent refuses its whole subtree).
fn first_few(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = items[..items.len().min(SHOWN)].join("; ");
    if items.len() > SHOWN {
        s += &format!("; and {} more", items.len() - SHOWN);
    }
    s
}

fn describe(e: &LabError) -> String {
    match e {
        LabError::Kernel { errno, message, strerror } if message.is_empty() => {
            format!("kernel said: {strerror} (errno {errno})")
        }
        LabError::Kernel { errno, message, strerror } => {
            format!("kernel said: {message} ({strerror}, errno {errno})")
        }
        e => e.to_string(),
    }
}

/// Turns the device's tree back into `snapshot` and checks that it is.
fn restore(nl: &mut Netlink, ifindex: i32, snapshot: &[RawObj]) -> Result<(), LabError> {
    let now = plan::dump_tree(nl, ifindex)?;
    let d = plan::diff(plan::wants_of_snapshot(snapshot), &now);
    let mut msgs = d.messages(ifindex);
    let (_, refusals) = send_ops(nl, &mut msgs, false)?;
    let after = plan::dump_tree(nl, ifindex)?;
    let left = plan::diff(plan::wants_of_snapshot(snapshot), &after);
    if left.is_empty() && refusals.is_empty() {
        Ok(())
    } else {
        Err(LabError::Lab(format!(
            "after restoring: {} ({})",
            left.summary(),
            if refusals.is_empty() { "no refusal".into() } else { first_few(&refusals) }
        )))
    }
}

/// Runs `f` on a thread in a fresh, private network namespace (gone when `f` returns), with a
/// netlink socket and the index of its `lo`.
fn in_private_netns<T: Send + 'static>(
    f: impl FnOnce(&mut Netlink, i32) -> Result<T, LabError> + Send + 'static,
) -> Result<T, LabError> {
    std::thread::Builder::new()
        .name("sluice-probe".into())
        .spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| LabError::Netns(format!("cannot make a private namespace to probe in: {e}")))?;
            let mut nl = Netlink::open()?;
            let lo = nl.ifindex("lo")?;
            f(&mut nl, lo)
        })
        .map_err(LabError::Io)?
        .join()
        .map_err(|_| LabError::Netns("the probe thread panicked".into()))?
}

/// Tries every qdisc and class kind of `needed` (its first object of each kind, with its options)
/// on `lo` of a private namespace; a refusal is reported as the real run would meet it.
pub fn probe(needed: &[&Want<'_>]) -> Result<(), LabError> {
    let mut seen: HashSet<(bool, String)> = HashSet::new();
    // (requests to send in order, what is probed)
    let mut cases: Vec<(Vec<Msg>, String)> = Vec::new();
    let owner = |classid: u32| needed.iter().find(|w| w.is_qdisc && w.handle == classid & 0xFFFF_0000);
    for w in needed {
        if !seen.insert((w.is_qdisc, w.kind.clone())) {
            continue;
        }
        let mut as_root = (*w).clone();
        if w.is_qdisc {
            if w.parent != crate::netlink::TC_H_INGRESS {
                as_root.parent = crate::netlink::TC_H_ROOT;
            }
            cases.push((vec![as_root.msg(0)], w.label()));
        } else if let Some(q) = owner(w.handle) {
            let mut q = (*q).clone();
            q.parent = crate::netlink::TC_H_ROOT;
            as_root.parent = q.handle;
            cases.push((vec![q.msg(0), as_root.msg(0)], w.label()));
        }
    }
    if cases.is_empty() {
        return Ok(());
    }
    let cases: Vec<(Vec<Vec<u8>>, String)> =
        cases.into_iter().map(|(ms, l)| (ms.iter().map(|m| m.bytes().to_vec()).collect(), l)).collect();
    let refusals = in_private_netns(move |nl, lo| {
        let mut refusals = Vec::new();
        for (msgs, what) in cases {
            let mut msgs: Vec<Msg> = msgs.into_iter().map(|b| Msg::from_bytes(&b, lo)).collect();
            let o = batch::send(nl, &mut msgs, true)?;
            if let Some((_, e)) = o.errors.first() {
                refusals.push(format!("{what}: {}", describe(e)));
            }
            clear_root(nl, lo)?;
        }
        Ok(refusals)
    })?;
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(LabError::Refused(format!(
            "this kernel refuses {} (probed on a scratch device; nothing was changed)",
            refusals.join("; ")
        )))
    }
}

fn clear_root(nl: &mut Netlink, ifindex: i32) -> Result<(), LabError> {
    use crate::netlink::{flags, rtm, TcMsg, TC_H_ROOT};
    let mut m = Msg::tc(
        rtm::DELQDISC,
        flags::REQUEST | flags::ACK,
        TcMsg { ifindex, handle: 0, parent: TC_H_ROOT, info: 0 },
    );
    match nl.request(&mut m) {
        Ok(()) | Err(LabError::Kernel { errno: 2 | 22, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Builds the whole plan from scratch on `lo` of a private namespace (nothing else is touched)
/// and returns every refusal, each with the kernel's reason; filters included (mirred targets
/// become `lo`). Differences from the real device: `lo`'s mtu and queue count.
pub fn rehearse(plan: &Plan<'_>) -> Result<Vec<String>, LabError> {
    let mut refusals = Vec::new();
    let d = plan::diff(plan::wants_of_plan(plan), &[]);
    let mut ops: Vec<(Vec<u8>, String)> =
        d.messages(0).into_iter().map(|(m, _, l)| (m.bytes().to_vec(), l)).collect();
    // Filters after the tree, as `kernel::apply` sends them (mirred targets become `lo`).
    let fl = crate::netlink::flags::REQUEST
        | crate::netlink::flags::ACK
        | crate::netlink::flags::EXCL
        | crate::netlink::flags::CREATE;
    for ((_, f), (_, text)) in plan.filter_nodes().zip(plan.filters()) {
        match crate::filters::filter_msg(0, f, fl, &|_| Some(1)) {
            Ok(m) => ops.push((m.bytes().to_vec(), text)),
            Err(e) => refusals.push(format!("`{text}`: {e}")),
        }
    }
    let found = in_private_netns(move |nl, lo| {
        let mut msgs: Vec<Msg> = ops.iter().map(|(b, _)| Msg::from_bytes(b, lo)).collect();
        let o = batch::send(nl, &mut msgs, false)?;
        Ok(o.errors.iter().map(|(i, e)| format!("{}: {}", ops[*i].1, describe(e))).collect::<Vec<_>>())
    })?;
    refusals.extend(found);
    Ok(refusals)
}
