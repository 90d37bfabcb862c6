//! `sluice apply` as a transaction: probe, apply the difference, or restore the previous tree.
//!
//! [`apply_plan`]:
//! 1. reads the device's tree ([`plan::dump_tree`]) and the filters of its qdiscs and inner
//!    classes ([`fdiff::dump_filters`]): the snapshot;
//! 2. probes every qdisc, class and filter kind the change needs on `lo` of a private network
//!    namespace ([`probe`]), so a missing module or a refused option is found before the device
//!    is touched;
//! 3. sends only the difference ([`plan::diff_all`], filters included) in batches
//!    ([`crate::batch`]), every ack checked;
//! 4. if the kernel refuses any request, reads the tree and filters again and sends the
//!    difference back to the snapshot, then checks that they equal the snapshot, and reports the
//!    refusal ([`Error::Refused`]) saying whether the restore was exact.
//!
//! [`rehearse`] (for `--dry-run`) builds the whole plan from scratch on `lo` of a private
//! namespace and reports every refusal, without touching the device.

use crate::batch;
use crate::fdiff::{self, RawFilter};
use crate::kernel::Plan;
use crate::netlink::{Msg, Netlink};
use crate::plan::{self, RawObj, Want};
use crate::Error;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// What an apply did.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    /// Objects (qdiscs, classes and filters) added.
    pub added: usize,
    /// Changed in place.
    pub changed: usize,
    /// Deleted.
    pub deleted: usize,
    /// Re-created (not hitless: the kernel cannot change kind, parent or handle in place), and
    /// filters deleted first to be added again (see [`fdiff`]).
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

/// The devices actions name (mirred's targets) among `plan`'s filters, by name, as the calling
/// thread's namespace numbers them.
fn mirred_targets(nl: &mut Netlink, plans: &[&Plan<'_>]) -> HashMap<String, Option<u32>> {
    let mut targets = HashMap::new();
    for plan in plans {
        for (_, f) in plan.filter_nodes() {
            for a in &f.actions {
                if let Some(dev) = a.device() {
                    if !dev.is_empty() && !targets.contains_key(dev) {
                        targets.insert(dev.to_string(), nl.ifindex(dev).ok().map(|i| i as u32));
                    }
                }
            }
        }
    }
    targets
}

/// The filters of `plan` as requests, or the refusal (nothing was changed).
fn filter_wants(plan: &Plan<'_>, targets: &HashMap<String, Option<u32>>) -> Result<Vec<RawFilter>, Error> {
    fdiff::wants_of_plan(plan.filter_nodes().map(|(_, f)| f), &|d| targets.get(d).copied().flatten())
        .map_err(|e| Error::Refused(format!("{e}; nothing was changed")))
}

/// Programs `plan` into its device (calling thread's namespace), all or nothing, sending only
/// the difference from what the device holds, filters included.
pub fn apply_plan(plan: &Plan<'_>, opts: ApplyOptions) -> Result<Applied, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(plan.ifname())?;
    let mut out = Applied::default();
    let targets = mirred_targets(&mut nl, &[plan]);
    let fwant = filter_wants(plan, &targets)?;
    // The blocks the model puts filters on are read too (a leaf class's are read only then).
    let also: Vec<u32> = fwant.iter().map(|f| f.parent).collect();
    let t = Instant::now();
    let snapshot = plan::dump_tree(&mut nl, ifindex)?;
    let fsnap = fdiff::dump_filters(&mut nl, ifindex, &fdiff::blocks(&snapshot, &also))?;
    out.read = t.elapsed();
    let t = Instant::now();
    let d = plan::diff_all(plan::wants_of_plan(plan), fwant, &snapshot, &fsnap);
    out.plan = t.elapsed();
    if opts.probe {
        let t = Instant::now();
        let needed: Vec<&Want<'_>> = d.adds.iter().chain(&d.changes).collect();
        let fneeded: Vec<&RawFilter> =
            d.filters.adds.iter().chain(d.filters.changes.iter().map(|(f, _)| f)).collect();
        probe(&needed, &fneeded)?;
        out.probe = t.elapsed();
    }
    let t = Instant::now();
    let mut msgs = d.messages(ifindex);
    out.plan += t.elapsed();
    out.count(&d);
    let t = Instant::now();
    let (sent, refusals) = send_ops(&mut nl, &mut msgs, true, d.retried_tail())?;
    out.send = t.elapsed();
    out.messages = sent.0;
    out.sendmsgs = sent.1;
    out.lines = msgs.into_iter().map(|(_, _, l)| l).collect();
    out.warnings = nl.take_warnings();
    if refusals.is_empty() {
        return Ok(out);
    }
    let restored = restore(&mut nl, ifindex, &snapshot, &fsnap, &also);
    Err(Error::Refused(format!(
        "{}; {}",
        first_few(&refusals),
        match restored {
            Ok(()) => "the device's previous tree was restored exactly".to_string(),
            Err(e) => format!("the previous tree could NOT be restored exactly: {e}"),
        }
    )))
}

impl Applied {
    fn count(&mut self, d: &plan::Diff<'_>) {
        let f = &d.filters;
        self.added = d.adds.len() + f.adds.len();
        self.changed = d.changes.len() + f.changes.len();
        self.deleted = d.deletes.len() + f.deletes.len();
        self.recreated = d.recreated.len() + f.first.len();
    }
}

/// Programs the change from `old` (what `sluice apply` programmed last, trusted to be what the
/// device holds) to `new`, without reading the kernel: only the difference is sent. If the kernel
/// refuses a request, the difference back to `old` is sent (deleting only what was really added)
/// and the refusal is returned. For a large tree this skips the dump, whose cost
/// grows with the tree; [`apply_plan`] is the one that checks the kernel.
pub fn apply_between(old: &Plan<'_>, new: &Plan<'_>) -> Result<Applied, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(new.ifname())?;
    let mut out = Applied::default();
    let targets = mirred_targets(&mut nl, &[old, new]);
    let (fold, fnew) = (filter_wants(old, &targets)?, filter_wants(new, &targets)?);
    let t = Instant::now();
    let old_tree = plan::as_dump(&plan::wants_of_plan(old));
    let d = plan::diff_all(plan::wants_of_plan(new), fnew.clone(), &old_tree, &fold);
    let mut msgs = d.messages(ifindex);
    out.plan = t.elapsed();
    out.count(&d);
    let t = Instant::now();
    let (sent, refusals, failed) = send_ops_detailed(&mut nl, &mut msgs, true, d.retried_tail())?;
    out.send = t.elapsed();
    (out.messages, out.sendmsgs) = sent;
    out.lines = msgs.into_iter().map(|(_, _, l)| l).collect();
    out.warnings = nl.take_warnings();
    if refusals.is_empty() {
        return Ok(out);
    }
    // Undo: the difference back to `old`, deleting only what was really added (a delete of
    // what the kernel refused to add would be refused in turn).
    let done = |i: usize| i < sent.0 && !failed.contains(&i);
    let (adds_at, fadds_at) = d.offsets();
    let added: HashSet<plan::Key> =
        d.adds.iter().enumerate().filter(|(j, _)| done(adds_at + j)).map(|(_, w)| w.key()).collect();
    let fadded: HashSet<fdiff::FKey> =
        d.filters.adds.iter().enumerate().filter(|(j, _)| done(fadds_at + j)).map(|(_, f)| f.key()).collect();
    let mut back =
        plan::diff_all(plan::wants_of_plan(old), fold, &plan::as_dump(&plan::wants_of_plan(new)), &fnew);
    back.deletes.retain(|r| added.contains(&r.key()));
    back.filters.deletes.retain(|f| fadded.contains(&f.key()));
    let mut undo = back.messages(ifindex);
    let (_, undo_refusals) = send_ops(&mut nl, &mut undo, false, back.retried_tail())?;
    Err(Error::Refused(format!(
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
/// something already gone is not a refusal. The last `retried` requests are sent after the others
/// (if they were all taken or `stop_on_error` is off), and those refused with `EBUSY` are sent
/// again every [`RETRY_EVERY`] for up to [`RETRY_FOR`].
fn send_ops(
    nl: &mut Netlink,
    ops: &mut [(Msg, bool, String)],
    stop_on_error: bool,
    retried: usize,
) -> Result<((usize, usize), Vec<String>), Error> {
    send_ops_detailed(nl, ops, stop_on_error, retried).map(|(s, r, _)| (s, r))
}

/// How often and how long a request refused with `EBUSY` is sent again (u32 tables wait for an
/// RCU grace period, milliseconds).
const RETRY_EVERY: Duration = Duration::from_millis(5);
const RETRY_FOR: Duration = Duration::from_secs(2);

/// [`send_ops`], with the indices of the requests the kernel refused.
#[allow(clippy::type_complexity)]
fn send_ops_detailed(
    nl: &mut Netlink,
    ops: &mut [(Msg, bool, String)],
    stop_on_error: bool,
    retried: usize,
) -> Result<((usize, usize), Vec<String>, HashSet<usize>), Error> {
    let head = ops.len() - retried.min(ops.len());
    let mut msgs: Vec<Msg> = ops[..head].iter().map(|(m, _, _)| m.clone()).collect();
    let o = batch::send(nl, &mut msgs, stop_on_error)?;
    let (mut sent, mut sendmsgs, mut errors) = (o.sent, o.sendmsgs, o.errors);
    if head < ops.len() && (errors.is_empty() || !stop_on_error) {
        let mut pending: Vec<usize> = (head..ops.len()).collect();
        let until = Instant::now() + RETRY_FOR;
        sent += pending.len();
        loop {
            let mut msgs: Vec<Msg> = pending.iter().map(|&i| ops[i].0.clone()).collect();
            let o = batch::send(nl, &mut msgs, false)?;
            sendmsgs += o.sendmsgs;
            let busy = |e: &Error| matches!(e, Error::Kernel { errno: 16, .. });
            let (again, refused): (Vec<_>, Vec<_>) = o.errors.into_iter().partition(|(_, e)| busy(e));
            if again.is_empty() || Instant::now() >= until {
                errors.extend(refused.into_iter().chain(again).map(|(j, e)| (pending[j], e)));
                break;
            }
            errors.extend(refused.into_iter().map(|(j, e)| (pending[j], e)));
            pending = again.iter().map(|(j, _)| pending[*j]).collect();
            std::thread::sleep(RETRY_EVERY);
        }
    }
    errors.sort_by_key(|(i, _)| *i);
    let failed = errors.iter().map(|(i, _)| *i).collect();
    let refusals = errors
        .iter()
        .filter(|(i, e)| !(ops[*i].1 && matches!(e, Error::Kernel { errno: 2, .. })))
        .map(|(i, e)| format!("{} — {}", ops[*i].2, describe(e)))
        .collect();
    Ok(((sent, sendmsgs), refusals, failed))
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

fn describe(e: &Error) -> String {
    match e {
        Error::Kernel { errno, message, strerror } if message.is_empty() => {
            format!("kernel said: {strerror} (errno {errno})")
        }
        Error::Kernel { errno, message, strerror } => {
            format!("kernel said: {message} ({strerror}, errno {errno})")
        }
        e => e.to_string(),
    }
}

/// Turns the device's tree and filters back into the snapshot and checks that they are.
/// `also`: the blocks the refused change put filters on.
fn restore(
    nl: &mut Netlink,
    ifindex: i32,
    snapshot: &[RawObj],
    fsnap: &[RawFilter],
    also: &[u32],
) -> Result<(), Error> {
    let read = |nl: &mut Netlink| -> Result<(Vec<RawObj>, Vec<RawFilter>), Error> {
        let now = plan::dump_tree(nl, ifindex)?;
        let mut blocks: Vec<u32> = also.to_vec();
        blocks.extend(fsnap.iter().map(|f| f.parent));
        let f = fdiff::dump_filters(nl, ifindex, &fdiff::blocks(&now, &blocks))?;
        Ok((now, f))
    };
    let (now, fnow) = read(nl)?;
    let d = plan::diff_all(plan::wants_of_snapshot(snapshot), fsnap.to_vec(), &now, &fnow);
    let mut msgs = d.messages(ifindex);
    let (_, refusals) = send_ops(nl, &mut msgs, false, d.retried_tail())?;
    let (after, fafter) = read(nl)?;
    let left = plan::diff_all(plan::wants_of_snapshot(snapshot), fsnap.to_vec(), &after, &fafter);
    if left.is_empty() && refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Lab(format!(
            "after restoring: {} ({})",
            left.summary(),
            if refusals.is_empty() { "no refusal".into() } else { first_few(&refusals) }
        )))
    }
}

/// Runs `f` on a thread in a fresh, private network namespace (gone when `f` returns), with a
/// netlink socket and the index of its `lo`.
fn in_private_netns<T: Send + 'static>(
    f: impl FnOnce(&mut Netlink, i32) -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    std::thread::Builder::new()
        .name("sluice-probe".into())
        .spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| Error::Netns(format!("cannot make a private namespace to probe in: {e}")))?;
            let mut nl = Netlink::open()?;
            let lo = nl.ifindex("lo")?;
            f(&mut nl, lo)
        })
        .map_err(Error::Io)?
        .join()
        .map_err(|_| Error::Netns("the probe thread panicked".into()))?
}

/// Tries every qdisc and class kind of `needed` (its first object of each kind, with its options)
/// and every filter kind of `filters` (its first filter of each kind, with its options and
/// actions, on a clsact hook) on `lo` of a private namespace; a refusal is reported as the real
/// run would meet it.
pub fn probe(needed: &[&Want<'_>], filters: &[&RawFilter]) -> Result<(), Error> {
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
    let mut filter_kinds = HashSet::new();
    for f in filters.iter().filter(|f| filter_kinds.insert(f.kind.clone())) {
        use crate::netlink::{flags, rtm, tca, TcMsg};
        let mut clsact = Msg::tc(
            rtm::NEWQDISC,
            flags::REQUEST | flags::ACK | flags::CREATE | flags::EXCL,
            TcMsg { ifindex: 0, handle: 0xFFFF_0000, parent: crate::netlink::TC_H_INGRESS, info: 0 },
        );
        clsact.attr_str(tca::KIND, "clsact");
        cases.push((vec![clsact, f.probe_msg()], f.label()));
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
                refusals.push(format!("{what} — {}", describe(e)));
            }
            clear_root(nl, lo)?;
            clear_ingress(nl, lo)?;
        }
        Ok(refusals)
    })?;
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Refused(format!(
            "this kernel refuses {} (probed on a scratch device; nothing was changed)",
            refusals.join("; ")
        )))
    }
}

fn clear_root(nl: &mut Netlink, ifindex: i32) -> Result<(), Error> {
    clear_slot(nl, ifindex, crate::netlink::TC_H_ROOT)
}

fn clear_ingress(nl: &mut Netlink, ifindex: i32) -> Result<(), Error> {
    clear_slot(nl, ifindex, crate::netlink::TC_H_INGRESS)
}

fn clear_slot(nl: &mut Netlink, ifindex: i32, parent: u32) -> Result<(), Error> {
    use crate::netlink::{flags, rtm, TcMsg};
    let handle = if parent == crate::netlink::TC_H_INGRESS { 0xFFFF_0000 } else { 0 };
    let mut m =
        Msg::tc(rtm::DELQDISC, flags::REQUEST | flags::ACK, TcMsg { ifindex, handle, parent, info: 0 });
    match nl.request(&mut m) {
        Ok(()) | Err(Error::Kernel { errno: 2 | 22, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Builds the whole plan from scratch on `lo` of a private namespace (nothing else is touched)
/// and returns every refusal, each with the kernel's reason; filters included (mirred targets
/// become `lo`). Differences from the real device: `lo`'s mtu and queue count.
pub fn rehearse(plan: &Plan<'_>) -> Result<Vec<String>, Error> {
    let fwant = match fdiff::wants_of_plan(plan.filter_nodes().map(|(_, f)| f), &|_| Some(1)) {
        Ok(f) => f,
        Err(e) => return Ok(vec![e]),
    };
    let d = plan::diff_all(plan::wants_of_plan(plan), fwant, &[], &[]);
    let ops: Vec<(Vec<u8>, String)> =
        d.messages(0).into_iter().map(|(m, _, l)| (m.bytes().to_vec(), l)).collect();
    in_private_netns(move |nl, lo| {
        let mut msgs: Vec<Msg> = ops.iter().map(|(b, _)| Msg::from_bytes(b, lo)).collect();
        let o = batch::send(nl, &mut msgs, false)?;
        Ok(o.errors.iter().map(|(i, e)| format!("{}: {}", ops[*i].1, describe(e))).collect())
    })
}
