//! The kernel backend: program one device of a `sluice_tc::model` configuration into Linux tc
//! over rtnetlink, print the equivalent tc commands, read the result back and compare it with the
//! model.
//!
//! [`Plan::new`] reads the model once: it picks the device, converts every model handle to the
//! kernel's 32-bit `major:minor` through one function (`kernel_handle`), refuses by name what the
//! encoder cannot send (what a registry kind's `encode` refuses, such as HTB's `textbook`; an HTB
//! class's ATM link layer; minors the kernel cannot hold), resolves the bursts the configuration
//! left out,
//! and orders the objects so that every parent exists before its children (a qdisc, then its
//! classes, then the qdiscs attached to them, level by level). [`apply`], [`Plan::tc_commands`]
//! and [`Plan::compare`] all work from that plan.
//!
//! Every qdisc kind is a registry kind (`sluice_model::kinds`), encoded by its own `encode`, byte
//! for byte as tc 6.1 sends it; HTB, DRR and HFSC classes are encoded here with their options.
//! `Plan::compare` checks HTB classes and a few qdisc values.
//! Filters are encoded by [`crate::filters`] and sent after every qdisc and class, in the model's
//! order (u32 hash tables before the keys that link to them).
//!
//! ## Burst rule (shared with `sluice lint`)
//! Bursts the configuration leaves out are sized by [`sluice_tc::burst::kernel_burst`]:
//! `max(mtu, rate × 4 ms)` rounded up to whole KiB, the same rule `sluice lint` suggests (see
//! `KERNEL_JITTER_BUDGET_US` there for the measurements behind 4 ms; 1 ms left −1.1 % / −9.6 %
//! at 5 Gbit/s with CUBIC / BBR on a busy 2-core VM). tc's own default is just the mtu
//! (1600 b on hrtimer kernels), which measured −19 % at 10 Gbit (DESIGN.md).
//! [`BurstPolicy::TcDefault`] keeps tc's rule for comparisons. An explicit burst is always kept
//! as written.
//!
//! ## Class ids the kernel cannot hold
//! The kernel's handles are 16-bit major, 16-bit minor, so one qdisc holds at most 65 535
//! classes. A model whose minors do not fit (a default class above `0xffff` today; classes too
//! once model handles are 48-bit) is refused before anything is sent, with a hint to split the
//! tree into nested HTB qdiscs or to use the live shaper, which takes 32-bit minors.

use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TcObject};
use crate::Error;
use sluice_core::units::{format_rate, format_size};
use sluice_core::Rate;
use sluice_model::nlattr::Attrs;
use sluice_model::print::{classid_str, filter_parent_arg, qdisc_parent_arg, tc_handle_str};
use sluice_model::tcmath::{xmittime, TICK_IN_USEC};
use sluice_tc::burst::{kernel_burst, BurstPolicy};
use sluice_tc::export::filter_args;
use sluice_tc::model::{
    ClassOpts, Device, DrrClassOpts, EtsClassOpts, FilterNode, HtbClassOpts, QdiscNode, QdiscOpts, State,
    H_INGRESS,
};
use sluice_tc::tc::args::proto_word;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// tc's default HTB class mtu (also the default burst on hrtimer kernels).
pub const HTB_DEFAULT_MTU: u32 = 1600;

/// The model's handle type (16-bit major, 32-bit minor).
type ModelHandle = sluice_core::Handle;

/// A model handle as the kernel's 32-bit handle (16-bit major, 16-bit minor), or `None` when its
/// minor does not fit. The only place this module turns a model handle into a netlink value
fn kernel_handle(h: ModelHandle) -> Option<u32> {
    h.to_tc()
}

/// An HTB `default` minor as the kernel's 16-bit one (the kernel masks wider values to 0, which
/// sends the traffic to the direct queue instead).
fn kernel_minor(minor: u32) -> Option<u32> {
    (minor <= 0xFFFF).then_some(minor)
}

/// The kernel's handle of the qdisc that owns `h` (`1:10` → `1:`).
fn qdisc_of(h: u32) -> u32 {
    h & 0xFFFF_0000
}

/// The bytes a bucket of `ticks` holds at `bytes_per_sec` (inverse of [`xmittime`], rounded).
pub fn ticks_to_bytes(bytes_per_sec: u64, ticks: u32) -> u64 {
    (ticks as f64 / TICK_IN_USEC / 1e6 * bytes_per_sec as f64).round() as u64
}

/// tc's transmit time of a burst, in psched ticks ([`xmittime`]; tc's sizes are 32-bit).
pub fn burst_ticks(bytes_per_sec: u64, burst: u64) -> u32 {
    xmittime(bytes_per_sec, u32::try_from(burst).unwrap_or(u32::MAX))
}

/// A qdisc of the plan, with its kernel handle and parent.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedQdisc<'a> {
    /// Kernel handle (`major:0`).
    pub handle: u32,
    /// Kernel parent: `TC_H_ROOT` or a class id.
    pub parent: u32,
    /// The model's qdisc.
    pub node: &'a QdiscNode,
}

impl PlannedQdisc<'_> {
    /// The tc kind.
    pub fn kind(&self) -> &'static str {
        self.node.opts.kind()
    }
}

/// An HTB class of the plan, with its kernel ids and its bursts resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedClass<'a> {
    /// Kernel class id.
    pub classid: u32,
    /// Kernel parent (a class id, or the qdisc's handle for a top-level class).
    pub parent: u32,
    /// The model's HTB options.
    pub htb: &'a HtbClassOpts,
    /// Burst bytes used.
    pub burst: u64,
    /// Cburst bytes used.
    pub cburst: u64,
}

impl ResolvedClass<'_> {
    /// Guaranteed rate.
    pub fn rate(&self) -> Rate {
        Rate::from_bps(self.htb.rate)
    }
    /// Ceiling.
    pub fn ceil(&self) -> Rate {
        Rate::from_bps(self.htb.ceil)
    }
}

/// One object to create, in the plan's order.
#[derive(Debug, Clone, PartialEq)]
enum Step<'a> {
    Qdisc(PlannedQdisc<'a>),
    Class(ResolvedClass<'a>),
    DrrClass(DrrClassPlan),
    HfscClass(HfscClassPlan),
}

impl Step<'_> {
    /// (class id, parent) of a class step.
    fn class_ids(&self) -> Option<(u32, u32)> {
        match self {
            Step::Qdisc(_) => None,
            Step::Class(c) => Some((c.classid, c.parent)),
            Step::DrrClass(c) => Some((c.classid, c.parent)),
            Step::HfscClass(c) => Some((c.classid, c.parent)),
        }
    }
}

/// A DRR class of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrrClassPlan {
    /// Kernel class id.
    pub classid: u32,
    /// Kernel parent (the DRR qdisc).
    pub parent: u32,
    /// `TCA_DRR_QUANTUM`, when given (the kernel's default is the device's psched_mtu).
    pub quantum: Option<u32>,
}

/// An HFSC class of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfscClassPlan {
    /// Kernel class id.
    pub classid: u32,
    /// Kernel parent (the HFSC qdisc's handle for a class under the root class).
    pub parent: u32,
    /// The curves sent (`TCA_HFSC_RSC`, `FSC`, `USC`).
    pub curves: sluice_tc::model::HfscClassOpts,
}

/// An object of the plan, by its kernel handle (filters by their index in the model device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectId {
    /// A qdisc.
    Qdisc(u32),
    /// A class.
    Class(u32),
    /// A filter: its index in the device's filters.
    Filter(usize),
}

/// Something about one object: why the kernel refused it, or how the kernel differs from the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The object.
    pub object: ObjectId,
    /// What happened, for a person.
    pub text: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What the kernel backend will do with one device of a configuration: the checked, ordered
/// objects with kernel handles and resolved bursts. Build with [`Plan::new`].
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    ifname: String,
    policy: BurstPolicy,
    steps: Vec<Step<'a>>,
    filters: Vec<(usize, &'a FilterNode)>,
}

/// The device of `state` that interface `ifname` gets: the device of that name, or the model's
/// only device. Several devices and none named `ifname` is an error.
pub fn select_device<'a>(state: &'a State, ifname: &str) -> Result<&'a Device, Error> {
    if let Some(d) = state.devices.iter().find(|d| d.name == ifname) {
        return Ok(d);
    }
    match state.devices.as_slice() {
        [only] => Ok(only),
        [] => Err(Error::Config("the configuration has no tc objects".into())),
        all => {
            let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
            Err(Error::Config(format!(
                "the configuration has several devices ({}); none is {ifname}",
                names.join(", ")
            )))
        }
    }
}

impl<'a> Plan<'a> {
    /// Plans interface `ifname` from `state` (see [`select_device`]), sizing missing bursts by
    /// `policy`. Everything the encoder cannot send, and every minor the kernel cannot hold, is
    /// listed in one error; nothing is partly planned.
    pub fn new(state: &'a State, ifname: &str, policy: BurstPolicy) -> Result<Plan<'a>, Error> {
        let dev = select_device(state, ifname)?;
        let mut unencoded: Vec<String> = Vec::new();
        let mut too_wide: Vec<String> = Vec::new();
        // Every model handle becomes a kernel one here, or is listed as too wide.
        let conv = |h: ModelHandle, what: &dyn Fn() -> String, too_wide: &mut Vec<String>| {
            kernel_handle(h).unwrap_or_else(|| {
                too_wide.push(what());
                0
            })
        };
        let mut qdiscs = Vec::new();
        for q in &dev.qdiscs {
            let kind = q.opts.kind();
            let what = || format!("qdisc {kind} {}", classid_str(q.handle));
            if let Err(e) = q.opts.encode(&mut Attrs::new()) {
                unencoded.push(format!("{} ({e})", what()));
            }
            match &q.opts {
                // Only ingress and clsact sit at the ingress slot (handle ffff:, parent ffff:fff1).
                _ if q.parent == H_INGRESS && !q.opts.is_ingress() => {
                    unencoded.push(format!("{kind} qdisc on ingress"))
                }
                // A class id, which Plan::new converts with the others.
                QdiscOpts::Htb(h) if kernel_minor(h.default).is_none() => too_wide.push(format!(
                    "the default class {:#x} of {} (the kernel would send its traffic to the direct queue)",
                    h.default,
                    what()
                )),
                _ => {}
            }
            let handle = conv(q.handle, &what, &mut too_wide);
            let parent = conv(q.parent, &|| format!("the parent of {}", what()), &mut too_wide);
            qdiscs.push(PlannedQdisc { handle, parent, node: q });
        }
        let mut classes = Vec::new();
        for c in &dev.classes {
            let id = classid_str(c.classid);
            let htb = match &c.opts {
                ClassOpts::Htb(htb) => htb,
                ClassOpts::Drr(d) => {
                    let classid = conv(c.classid, &|| format!("class {id}"), &mut too_wide);
                    let parent = conv(c.parent, &|| format!("the parent of class {id}"), &mut too_wide);
                    classes.push(Step::DrrClass(DrrClassPlan { classid, parent, quantum: d.quantum }));
                    continue;
                }
                ClassOpts::Hfsc(h) => {
                    let classid = conv(c.classid, &|| format!("class {id}"), &mut too_wide);
                    let parent = conv(c.parent, &|| format!("the parent of class {id}"), &mut too_wide);
                    classes.push(Step::HfscClass(HfscClassPlan { classid, parent, curves: h.clone() }));
                    continue;
                }
                // ETS bands live in the qdisc's options: no class node holds one.
                ClassOpts::Ets(_) => continue,
            };
            if let Err(e) = c.opts.encode(&mut Attrs::new()) {
                unencoded.push(format!("class {id} ({e})"));
            }
            let classid = conv(c.classid, &|| format!("class {id}"), &mut too_wide);
            let parent = conv(c.parent, &|| format!("the parent of class {id}"), &mut too_wide);
            // tc's default is what the model holds already (`rate / HZ + mtu`, as tc sends it).
            let sluice_rule = policy == BurstPolicy::Sluice;
            let burst = if htb.burst_auto && sluice_rule {
                kernel_burst(Rate::from_bps(htb.rate), htb.mtu, policy)
            } else {
                htb.burst as u64
            };
            let cburst = if htb.cburst_auto && sluice_rule {
                kernel_burst(Rate::from_bps(htb.ceil), htb.mtu, policy)
            } else {
                htb.cburst as u64
            };
            classes.push(Step::Class(ResolvedClass { classid, parent, htb, burst, cburst }));
        }
        for f in &dev.filters {
            if let Some(why) = crate::filters::unencoded(f) {
                unencoded.push(why);
            }
            let what = || format!("{} filter prio {}", f.opts.kind(), f.prio);
            conv(f.parent, &|| format!("the parent of the {}", what()), &mut too_wide);
            for c in f.opts.classid().into_iter().chain(f.opts.target()) {
                conv(c, &|| format!("the class of the {}", what()), &mut too_wide);
            }
        }
        if !too_wide.is_empty() {
            return Err(Error::Config(format!(
                "{}: the kernel holds 16-bit minors (at most 65 535 classes under one qdisc), and \
                 these are above 0xffff: {}. Split the tree into nested HTB qdiscs of at most 65 535 \
                 classes each (one per site, as LibreQoS does), or shape it with `sluice shape`, \
                 which takes 32-bit minors",
                dev.name,
                first_few(&too_wide)
            )));
        }
        if !unencoded.is_empty() {
            return Err(Error::Config(format!(
                "{}: {} {} not encoded by the kernel backend",
                dev.name,
                first_few(&unencoded),
                if unencoded.len() == 1 { "is" } else { "are" }
            )));
        }
        // An ingress-only configuration (policing what comes in) is whole without a root.
        if !qdiscs.iter().any(|q| q.parent == netlink::TC_H_ROOT || q.parent == netlink::TC_H_INGRESS) {
            return Err(Error::Config(format!(
                "{}: the configuration has no root or ingress qdisc",
                dev.name
            )));
        }
        let filters = dev
            .filters
            .iter()
            .enumerate()
            // A u32 root hash table is created by the kernel with the first u32 filter.
            .filter(|(_, f)| !crate::filters::is_implicit(f))
            .collect();
        Ok(Plan { ifname: ifname.to_string(), policy, steps: order(qdiscs, classes), filters })
    }

    /// The interface this plan is for.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The qdiscs, in the order they are created.
    pub fn qdiscs(&self) -> impl Iterator<Item = &PlannedQdisc<'a>> {
        self.steps.iter().filter_map(|s| match s {
            Step::Qdisc(q) => Some(q),
            Step::Class(_) | Step::DrrClass(_) | Step::HfscClass(_) => None,
        })
    }

    /// The HTB classes with their bursts, in the order they are created.
    pub fn classes(&self) -> impl Iterator<Item = &ResolvedClass<'a>> {
        self.steps.iter().filter_map(|s| match s {
            Step::Class(c) => Some(c),
            Step::Qdisc(_) | Step::DrrClass(_) | Step::HfscClass(_) => None,
        })
    }

    /// The DRR classes, in the order they are created.
    pub fn drr_classes(&self) -> impl Iterator<Item = &DrrClassPlan> {
        self.steps.iter().filter_map(|s| match s {
            Step::DrrClass(c) => Some(c),
            _ => None,
        })
    }

    /// The HFSC classes, in the order they are created.
    pub fn hfsc_classes(&self) -> impl Iterator<Item = &HfscClassPlan> {
        self.steps.iter().filter_map(|s| match s {
            Step::HfscClass(c) => Some(c),
            _ => None,
        })
    }

    /// The filters the plan sends, each as a tc command and its index in the device's filters.
    pub fn filters(&self) -> Vec<(usize, String)> {
        self.filters.iter().map(|(i, f)| (*i, filter_command(&self.ifname, f))).collect()
    }

    /// The filters the plan sends, in order, with their index in the device's filters.
    pub fn filter_nodes(&self) -> impl Iterator<Item = (usize, &'a FilterNode)> + '_ {
        self.filters.iter().copied()
    }

    /// Where traffic goes when no filter classifies it: the root HTB's default class, or the
    /// root's own behaviour.
    pub fn unclassified_destination(&self) -> String {
        match self.qdiscs().find(|q| q.parent == netlink::TC_H_ROOT).map(|q| (q.handle, &q.node.opts)) {
            Some((h, QdiscOpts::Htb(o))) if o.default == 0 => {
                format!("the direct queue of htb {} (unshaped)", tc_handle_str(h))
            }
            Some((h, QdiscOpts::Htb(o))) => {
                let class = h | (o.default & 0xFFFF);
                if self.classes().any(|c| c.classid == class) {
                    format!("class {}, the default of htb {}", tc_handle_str(class), tc_handle_str(h))
                } else {
                    format!(
                        "the direct queue of htb {} (unshaped: its default {} is not a class)",
                        tc_handle_str(h),
                        tc_handle_str(class)
                    )
                }
            }
            Some((h, o)) => format!("where {} {} puts it without filters", o.kind(), tc_handle_str(h)),
            None => "nowhere (no root qdisc)".into(),
        }
    }

    /// The tc commands equivalent to what [`apply`] sends (for `--dry-run`), filters last.
    pub fn tc_commands(&self) -> Vec<String> {
        let dev = &self.ifname;
        let rule = match self.policy {
            BurstPolicy::Sluice => "the jitter rule",
            BurstPolicy::TcDefault => "tc's default (the mtu)",
        };
        let mut out = vec![format!("tc qdisc del dev {dev} root 2>/dev/null")];
        for step in &self.steps {
            out.push(match step {
                Step::Qdisc(q) => qdisc_command(dev, q),
                Step::HfscClass(c) => format!(
                    "tc class replace dev {dev} parent {} classid {} hfsc{}",
                    tc_handle_str(c.parent),
                    tc_handle_str(c.classid),
                    sluice_tc::tc::hfsc::export_class_args(&c.curves)
                ),
                Step::DrrClass(c) => format!(
                    "tc class replace dev {dev} parent {} classid {} drr{}",
                    tc_handle_str(c.parent),
                    tc_handle_str(c.classid),
                    c.quantum.map(|q| format!(" quantum {q}")).unwrap_or_default()
                ),
                Step::Class(c) => {
                    let h = c.htb;
                    let mut line = format!(
                        "tc class replace dev {dev} parent {} classid {} htb rate {} ceil {} burst {}b cburst {}b",
                        tc_handle_str(c.parent),
                        tc_handle_str(c.classid),
                        format_rate(c.rate()),
                        format_rate(c.ceil()),
                        c.burst,
                        c.cburst
                    );
                    if h.prio != 0 {
                        line += &format!(" prio {}", h.prio);
                    }
                    if let Some(q) = h.quantum {
                        line += &format!(" quantum {q}");
                    }
                    if h.mtu != HTB_DEFAULT_MTU {
                        line += &format!(" mtu {}", h.mtu);
                    }
                    if h.overhead != 0 {
                        line += &format!(" overhead {}", h.overhead);
                    }
                    if h.mpu != 0 {
                        line += &format!(" mpu {}", h.mpu);
                    }
                    match (h.burst_auto, h.cburst_auto) {
                        (true, true) => {
                            line += &format!(
                                "   # burst and cburst from {rule} ({}, {})",
                                format_size(c.burst),
                                format_size(c.cburst)
                            )
                        }
                        (true, false) => line += &format!("   # burst from {rule} ({})", format_size(c.burst)),
                        (false, true) => line += &format!("   # cburst from {rule} ({})", format_size(c.cburst)),
                        (false, false) => {}
                    }
                    line
                }
            });
        }
        out.extend(self.filters().into_iter().map(|(_, f)| f));
        out
    }

    /// Differences between the plan and what the kernel reports (empty: they match).
    pub fn compare(&self, kernel: &[KObject]) -> Vec<Finding> {
        let by_id: HashMap<(bool, u32), &KObject> =
            kernel.iter().map(|k| ((k.is_qdisc, k.handle), k)).collect();
        let mut diffs = Vec::new();
        let mut diff = |object: ObjectId, text: String| diffs.push(Finding { object, text });
        for q in self.qdiscs() {
            let id = ObjectId::Qdisc(q.handle);
            let name = tc_handle_str(q.handle);
            let Some(k) = by_id.get(&(true, q.handle)) else {
                diff(id, format!("qdisc {name} ({}) is missing in the kernel", q.kind()));
                continue;
            };
            if k.kind != q.kind() {
                diff(id, format!("qdisc {name}: kind {} in the kernel, {} in the model", k.kind, q.kind()));
            }
            if k.parent != q.parent {
                diff(
                    id,
                    format!(
                        "qdisc {name}: parent {:#x} in the kernel, {:#x} in the model",
                        k.parent, q.parent
                    ),
                );
            }
            match &q.node.opts {
                QdiscOpts::Htb(h) if k.htb_default != Some(h.default) => diff(
                    id,
                    format!(
                        "qdisc {name}: default {:?} in the kernel, {:#x} in the model",
                        k.htb_default, h.default
                    ),
                ),
                QdiscOpts::Tbf(t) => {
                    let rate = Rate::from_bps(t.rate);
                    if k.rate != Some(rate) {
                        diff(id, format!("tbf {name}: rate {:?} in the kernel, {rate} in the model", k.rate));
                    }
                    if k.limit != Some(t.limit) {
                        diff(
                            id,
                            format!(
                                "tbf {name}: limit {:?} in the kernel, {} in the model",
                                k.limit, t.limit
                            ),
                        );
                    }
                }
                QdiscOpts::Pfifo(f) | QdiscOpts::Bfifo(f) => {
                    if let Some(l) = f.limit.filter(|l| k.limit != Some(*l)) {
                        diff(
                            id,
                            format!(
                                "{} {name}: limit {:?} in the kernel, {l} in the model",
                                q.kind(),
                                k.limit
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        for c in self.classes() {
            let id = ObjectId::Class(c.classid);
            let name = tc_handle_str(c.classid);
            let Some(k) = by_id.get(&(false, c.classid)) else {
                diff(id, format!("class {name} is missing in the kernel"));
                continue;
            };
            if k.rate != Some(c.rate()) || k.ceil != Some(c.ceil()) {
                diff(
                    id,
                    format!(
                        "class {name}: rate/ceil {:?}/{:?} in the kernel, {}/{} in the model",
                        k.rate,
                        k.ceil,
                        c.rate(),
                        c.ceil()
                    ),
                );
            }
            let want = (
                burst_ticks(c.rate().bytes_per_sec(), c.burst),
                burst_ticks(c.ceil().bytes_per_sec(), c.cburst),
            );
            if let Some(got) = k.buffer_ticks {
                // The kernel stores ns and dumps ns >> 6: equal up to one tick.
                if got.0.abs_diff(want.0) > 1 || got.1.abs_diff(want.1) > 1 {
                    diff(
                        id,
                        format!(
                            "class {name}: buffer/cbuffer {got:?} ticks in the kernel, {want:?} in the model"
                        ),
                    );
                }
            }
            if let Some((prio, _)) = k.prio_quantum {
                if prio != c.htb.prio.min(7) {
                    diff(id, format!("class {name}: prio {prio} in the kernel, {} in the model", c.htb.prio));
                }
            }
            // The kernel reports a top-level class's parent as the root, not the qdisc handle.
            let parent_ok =
                k.parent == c.parent || (c.parent & 0xFFFF == 0 && k.parent == netlink::TC_H_ROOT);
            if !parent_ok {
                diff(
                    id,
                    format!(
                        "class {name}: parent {:#x} in the kernel, {:#x} in the model",
                        k.parent, c.parent
                    ),
                );
            }
        }
        diffs
    }
}

/// The first few of `items`, and how many more (a million-class model must not make a
/// million-item message).
fn first_few(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = items[..items.len().min(SHOWN)].join(", ");
    if items.len() > SHOWN {
        s += &format!(" and {} more", items.len() - SHOWN);
    }
    s
}

/// Parents first: the root qdisc and its classes (each after its parent class), then the qdiscs
/// attached to those classes and their classes, level by level, each level in model order.
/// Objects not reachable from the root come last, in model order (the kernel refuses them by name).
/// `classes` are class steps (HTB or DRR).
fn order<'a>(qdiscs: Vec<PlannedQdisc<'a>>, classes: Vec<Step<'a>>) -> Vec<Step<'a>> {
    let ids: Vec<(u32, u32)> = classes.iter().map(|c| c.class_ids().expect("a class step")).collect();
    // Classes by the qdisc that owns them, and qdiscs by the qdisc that owns their parent class.
    let mut classes_of: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, &(classid, _)) in ids.iter().enumerate() {
        classes_of.entry(qdisc_of(classid)).or_default().push(i);
    }
    let mut qdiscs_under: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, q) in qdiscs.iter().enumerate().filter(|(_, q)| q.parent != netlink::TC_H_ROOT) {
        qdiscs_under.entry(qdisc_of(q.parent)).or_default().push(i);
    }
    let mut q_done = vec![false; qdiscs.len()];
    let mut c_done = vec![false; classes.len()];
    let mut steps = Vec::with_capacity(qdiscs.len() + classes.len());
    let mut level: Vec<usize> =
        (0..qdiscs.len()).filter(|&i| qdiscs[i].parent == netlink::TC_H_ROOT).collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        for &qi in &level {
            if std::mem::replace(&mut q_done[qi], true) {
                continue;
            }
            let q = &qdiscs[qi];
            steps.push(Step::Qdisc(q.clone()));
            // This qdisc's classes in model order, each once its parent (the qdisc or a class) is
            // in: one pass when the model lists parents first, as tc requires.
            let mine = classes_of.get(&q.handle).map(Vec::as_slice).unwrap_or_default();
            let mut placed: HashSet<u32> = HashSet::from([q.handle]);
            loop {
                let before = placed.len();
                for &ci in mine {
                    let (classid, parent) = ids[ci];
                    if !c_done[ci] && placed.contains(&parent) {
                        c_done[ci] = true;
                        placed.insert(classid);
                        steps.push(classes[ci].clone());
                    }
                }
                if placed.len() == before {
                    break;
                }
            }
            next.extend(qdiscs_under.get(&q.handle).into_iter().flatten().filter(|&&i| !q_done[i]));
        }
        level = next;
    }
    steps.extend(qdiscs.into_iter().zip(q_done).filter(|(_, d)| !d).map(|(q, _)| Step::Qdisc(q)));
    steps.extend(classes.into_iter().zip(c_done).filter(|(_, d)| !d).map(|(c, _)| c));
    steps
}

fn qdisc_command(dev: &str, q: &PlannedQdisc<'_>) -> String {
    if q.parent == netlink::TC_H_INGRESS {
        return format!("tc qdisc replace dev {dev} {}", q.kind());
    }
    let mut s = format!(
        "tc qdisc replace dev {dev} {} handle {} {}",
        qdisc_parent_arg(ModelHandle::from_tc(q.parent)),
        tc_handle_str(q.handle),
        q.kind()
    );
    s += &q.node.opts.args();
    s
}

/// A filter as the tc command that would add it.
fn filter_command(dev: &str, f: &FilterNode) -> String {
    format!(
        "tc filter add dev {dev} {} protocol {} prio {}{}{}",
        filter_parent_arg(f.parent),
        proto_word(f.protocol),
        f.prio,
        if f.chain != 0 { format!(" chain {}", f.chain) } else { String::new() },
        filter_args(f)
    )
}

/// `TCA_HTB_*` of classes, and `INIT` for reading back a qdisc.
mod htb_attr {
    pub const PARMS: u16 = 1;
    pub const INIT: u16 = 2;
    #[cfg(test)]
    pub const RTAB: u16 = 4;
    pub const RATE64: u16 = 6;
    pub const CEIL64: u16 = 7;
}

/// `TCA_TBF_*` for reading back what the kernel dumps.
mod tbf_attr {
    pub const PARMS: u16 = 1;
    pub const RATE64: u16 = 4;
}

/// The netlink request that creates qdisc `q` on `ifindex`.
pub fn qdisc_msg(ifindex: i32, q: &PlannedQdisc<'_>, replace: bool) -> Msg {
    let fl = flags::REQUEST | flags::ACK | flags::CREATE | if replace { flags::REPLACE } else { flags::EXCL };
    let mut m = Msg::tc(rtm::NEWQDISC, fl, TcMsg { ifindex, handle: q.handle, parent: q.parent, info: 0 });
    m.attr_str(tca::KIND, q.kind());
    // Every kind is a registry kind; Plan::new refused what one cannot encode.
    let _ = q.node.opts.encode(m.attrs());
    m
}

/// The netlink request that creates (or with `replace` replaces) class `classid` under
/// `parent` with options `opts`, as tc sends it: the kind, then the kind's `TCA_OPTIONS`
/// ([`ClassOpts::encode`]). Plan::new refused what cannot be encoded.
pub fn class_request(ifindex: i32, classid: u32, parent: u32, opts: &ClassOpts, fl: u16) -> Msg {
    let mut m = Msg::tc(rtm::NEWTCLASS, fl, TcMsg { ifindex, handle: classid, parent, info: 0 });
    m.attr_str(tca::KIND, opts.kind());
    let _ = opts.encode(m.attrs());
    m
}

fn create_flags(replace: bool) -> u16 {
    flags::REQUEST | flags::ACK | flags::CREATE | if replace { flags::REPLACE } else { flags::EXCL }
}

/// The netlink request that creates DRR class `c` on `ifindex`.
pub fn drr_class_msg(ifindex: i32, c: &DrrClassPlan, replace: bool) -> Msg {
    let opts = ClassOpts::Drr(DrrClassOpts { quantum: c.quantum });
    class_request(ifindex, c.classid, c.parent, &opts, create_flags(replace))
}

/// The netlink request that creates HFSC class `c` on `ifindex`.
pub fn hfsc_class_msg(ifindex: i32, c: &HfscClassPlan, replace: bool) -> Msg {
    class_request(ifindex, c.classid, c.parent, &ClassOpts::Hfsc(c.curves.clone()), create_flags(replace))
}

/// The netlink request `tc class change` sends for ETS class `classid` (ETS classes are the
/// qdisc's bands: they are changed, never created): `parent` 0 when not given.
pub fn ets_class_change_msg(ifindex: i32, classid: u32, parent: u32, quantum: Option<u32>) -> Msg {
    let opts = ClassOpts::Ets(EtsClassOpts { quantum });
    class_request(ifindex, classid, parent, &opts, flags::REQUEST | flags::ACK)
}

/// The netlink request that creates HTB class `c` on `ifindex`, with the plan's bursts.
pub fn class_msg(ifindex: i32, c: &ResolvedClass<'_>) -> Msg {
    let mut h = c.htb.clone();
    h.burst = u32::try_from(c.burst).unwrap_or(u32::MAX);
    h.cburst = u32::try_from(c.cburst).unwrap_or(u32::MAX);
    class_request(ifindex, c.classid, c.parent, &ClassOpts::Htb(h), create_flags(true))
}

/// What happened to each object during [`apply`].
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyReport {
    /// One line per object that the kernel accepted.
    pub applied: Vec<String>,
    /// Objects not installed: refused by the kernel (with its error), or not sent because their
    /// parent was refused.
    pub refused: Vec<Finding>,
    /// The kernel's warnings on objects it accepted (extended-ack messages), each after the
    /// object it names.
    pub warnings: Vec<String>,
}

impl ApplyReport {
    /// Whether `object` was refused.
    pub fn was_refused(&self, object: ObjectId) -> bool {
        self.refused.iter().any(|r| r.object == object)
    }

    /// The filters among the refused objects.
    pub fn filters_refused(&self) -> usize {
        self.refused.iter().filter(|r| matches!(r.object, ObjectId::Filter(_))).count()
    }
}

/// Replaces `plan`'s interface's root qdisc with the plan, in the calling thread's namespace.
///
/// Every object is attempted, parents first; a refusal (for example a qdisc kind this kernel
/// lacks) is recorded with the kernel's own error in [`ApplyReport::refused`], and the objects
/// below a refused one are not sent and are recorded as refused because of it. Filters follow
/// the qdiscs and classes; a filter whose block (qdisc or class) was refused is not sent. The
/// caller decides what a refusal means.
pub fn apply(plan: &Plan<'_>) -> Result<ApplyReport, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(&plan.ifname)?;
    let mut rep = ApplyReport { applied: vec![], refused: vec![], warnings: vec![] };
    let mut refused: HashSet<ObjectId> = HashSet::new();
    clear_root(&mut nl, ifindex)?;
    if plan.qdiscs().any(|q| q.parent == netlink::TC_H_INGRESS) {
        // The device's ingress qdisc is the plan's too: an old one of the other kind (clsact
        // for ingress) would refuse the replace.
        clear_ingress(&mut nl, ifindex)?;
    }
    for step in &plan.steps {
        let (object, what, mut msg, parents) = match step {
            Step::Qdisc(q) => {
                let what = if q.parent == netlink::TC_H_ROOT {
                    format!("qdisc {} {}", q.kind(), tc_handle_str(q.handle))
                } else {
                    format!(
                        "qdisc {} {} {}",
                        q.kind(),
                        tc_handle_str(q.handle),
                        qdisc_parent_arg(ModelHandle::from_tc(q.parent))
                    )
                };
                // A qdisc hangs from a class, or from an implicit class of a refused qdisc.
                let parents = [ObjectId::Class(q.parent), ObjectId::Qdisc(qdisc_of(q.parent))];
                (ObjectId::Qdisc(q.handle), what, qdisc_msg(ifindex, q, true), parents)
            }
            Step::DrrClass(c) => {
                let what = format!(
                    "class drr {}{}",
                    tc_handle_str(c.classid),
                    c.quantum.map(|q| format!(" quantum {q}")).unwrap_or_default()
                );
                let parents = [ObjectId::Class(c.parent), ObjectId::Qdisc(qdisc_of(c.classid))];
                (ObjectId::Class(c.classid), what, drr_class_msg(ifindex, c, true), parents)
            }
            Step::HfscClass(c) => {
                let what = format!(
                    "class hfsc {}{}",
                    tc_handle_str(c.classid),
                    sluice_tc::tc::hfsc::export_class_args(&c.curves)
                );
                let parents = [ObjectId::Class(c.parent), ObjectId::Qdisc(qdisc_of(c.classid))];
                (ObjectId::Class(c.classid), what, hfsc_class_msg(ifindex, c, true), parents)
            }
            Step::Class(c) => {
                let what = format!(
                    "class htb {} rate {} ceil {} burst {}b cburst {}b",
                    tc_handle_str(c.classid),
                    format_rate(c.rate()),
                    format_rate(c.ceil()),
                    c.burst,
                    c.cburst
                );
                let parents = [ObjectId::Class(c.parent), ObjectId::Qdisc(qdisc_of(c.classid))];
                (ObjectId::Class(c.classid), what, class_msg(ifindex, c), parents)
            }
        };
        if let Some(p) = parents.iter().find(|p| refused.contains(p)) {
            let p = match p {
                ObjectId::Qdisc(h) => format!("qdisc {}", tc_handle_str(*h)),
                ObjectId::Class(h) => format!("class {}", tc_handle_str(*h)),
                ObjectId::Filter(_) => unreachable!("a parent is a qdisc or a class"),
            };
            rep.refused
                .push(Finding { object, text: format!("{what} — not sent, its parent {p} was refused") });
            refused.insert(object);
            continue;
        }
        send(&mut nl, &mut msg, object, what, &mut rep, &mut refused);
    }
    // mirred's targets, by name, as this namespace numbers them.
    let mut targets: HashMap<String, Option<u32>> = HashMap::new();
    for (_, f) in plan.filter_nodes() {
        for a in &f.actions {
            if let Some(dev) = a.device() {
                if !dev.is_empty() && !targets.contains_key(dev) {
                    let idx = nl.ifindex(dev).ok().map(|i| i as u32);
                    targets.insert(dev.to_string(), idx);
                }
            }
        }
    }
    let target = |d: &str| targets.get(d).copied().flatten();
    for ((i, f), (_, text)) in plan.filter_nodes().zip(plan.filters()) {
        let object = ObjectId::Filter(i);
        let what = text.strip_prefix("tc filter add ").unwrap_or(&text).to_string();
        let parent = crate::filters::kernel_parent(f).unwrap_or(0);
        let parents = [ObjectId::Class(parent), ObjectId::Qdisc(qdisc_of(parent))];
        if let Some(p) = parents.iter().find(|p| refused.contains(p)) {
            let p = match p {
                ObjectId::Qdisc(h) => format!("qdisc {}", tc_handle_str(*h)),
                ObjectId::Class(h) => format!("class {}", tc_handle_str(*h)),
                ObjectId::Filter(_) => unreachable!("a parent is a qdisc or a class"),
            };
            rep.refused.push(Finding {
                object,
                text: format!("filter {what}: not sent, its parent {p} was refused"),
            });
            continue;
        }
        let fl = flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE;
        match crate::filters::filter_msg(ifindex, f, fl, &target) {
            Ok(mut msg) => send(&mut nl, &mut msg, object, format!("filter {what}"), &mut rep, &mut refused),
            Err(e) => rep.refused.push(Finding { object, text: format!("filter {what}: {e}") }),
        }
    }
    Ok(rep)
}

/// Sends one object's request and records the outcome (and the kernel's warnings) in `rep`.
fn send(
    nl: &mut Netlink,
    msg: &mut Msg,
    object: ObjectId,
    what: String,
    rep: &mut ApplyReport,
    refused: &mut HashSet<ObjectId>,
) {
    let result = nl.request(msg);
    rep.warnings.extend(nl.take_warnings().into_iter().map(|w| format!("{what} — kernel warning: {w}")));
    if result.is_err() {
        refused.insert(object);
    }
    match result {
        Ok(()) => rep.applied.push(what),
        Err(Error::Kernel { errno, message, strerror }) => rep.refused.push(Finding {
            object,
            text: format!(
                "{what} — kernel said: {} ({strerror}, errno {errno})",
                if message.is_empty() { "no message".to_string() } else { message }
            ),
        }),
        Err(e) => rep.refused.push(Finding { object, text: format!("{what} — {e}") }),
    }
}

/// Delete the root qdisc of `dev` (idempotent).
pub fn clear(dev: &str) -> Result<(), Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    clear_root(&mut nl, ifindex)
}

fn clear_root(nl: &mut Netlink, ifindex: i32) -> Result<(), Error> {
    let mut m = Msg::tc(
        rtm::DELQDISC,
        flags::REQUEST | flags::ACK,
        TcMsg { ifindex, handle: 0, parent: netlink::TC_H_ROOT, info: 0 },
    );
    match nl.request(&mut m) {
        Ok(()) => Ok(()),
        // ENOENT / EINVAL: nothing to delete (the default qdisc cannot be deleted).
        Err(Error::Kernel { errno: 2 | 22, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `tc qdisc del dev D parent ffff:fff1` (idempotent).
fn clear_ingress(nl: &mut Netlink, ifindex: i32) -> Result<(), Error> {
    let mut m = Msg::tc(
        rtm::DELQDISC,
        flags::REQUEST | flags::ACK,
        TcMsg { ifindex, handle: 0xFFFF_0000, parent: netlink::TC_H_INGRESS, info: 0 },
    );
    match nl.request(&mut m) {
        // ENOENT / EINVAL: none there (or the noop qdisc of an ingress queue that had one).
        Ok(()) | Err(Error::Kernel { errno: 2 | 22, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Counters of one qdisc or class (`tc -s`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KStats {
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
    /// Overlimits.
    pub overlimits: u64,
    /// Current backlog bytes.
    pub backlog: u64,
    /// Current queue length.
    pub qlen: u64,
}

/// An object read back from the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KObject {
    /// Qdisc (true) or class (false).
    pub is_qdisc: bool,
    /// Handle or classid, as the kernel holds it (`major << 16 | minor`).
    pub handle: u32,
    /// Parent, as the kernel holds it.
    pub parent: u32,
    /// Kind.
    pub kind: String,
    /// HTB class rate / TBF rate.
    pub rate: Option<Rate>,
    /// HTB ceil.
    pub ceil: Option<Rate>,
    /// Buffer / cbuffer in ticks as dumped.
    pub buffer_ticks: Option<(u32, u32)>,
    /// HTB class prio and quantum.
    pub prio_quantum: Option<(u32, u32)>,
    /// FIFO limit, TBF limit.
    pub limit: Option<u32>,
    /// HTB default class.
    pub htb_default: Option<u32>,
    /// Counters.
    pub stats: KStats,
}

fn parse_stats(attrs: &[u8]) -> KStats {
    let mut s = KStats::default();
    if let Some(st) = netlink::find(attrs, tca::STATS2) {
        if let Some(b) = netlink::find(st, 1) {
            s.bytes = netlink::u64_at(b, 0).unwrap_or(0);
            s.packets = netlink::u32_at(b, 8).unwrap_or(0) as u64;
        }
        if let Some(q) = netlink::find(st, 3) {
            s.qlen = netlink::u32_at(q, 0).unwrap_or(0) as u64;
            s.backlog = netlink::u32_at(q, 4).unwrap_or(0) as u64;
            s.drops = netlink::u32_at(q, 8).unwrap_or(0) as u64;
            s.overlimits = netlink::u32_at(q, 16).unwrap_or(0) as u64;
        }
    }
    s
}

fn ratespec_rate(b: &[u8], off: usize, rate64: Option<&[u8]>) -> Option<Rate> {
    let r32 = netlink::u32_at(b, off + 8)? as u64;
    let bps = rate64.and_then(|r| netlink::u64_at(r, 0)).unwrap_or(r32);
    Some(Rate::from_bytes_per_sec(bps))
}

fn decode(o: &TcObject, is_qdisc: bool) -> KObject {
    let kind = o.kind_str();
    let opts = o.options();
    let mut k = KObject {
        is_qdisc,
        handle: o.tc.handle,
        parent: o.tc.parent,
        kind: kind.clone(),
        rate: None,
        ceil: None,
        buffer_ticks: None,
        prio_quantum: None,
        limit: None,
        htb_default: None,
        stats: parse_stats(&o.attrs),
    };
    match (kind.as_str(), is_qdisc) {
        ("htb", false) => {
            if let Some(p) = netlink::find(opts, htb_attr::PARMS) {
                k.rate = ratespec_rate(p, 0, netlink::find(opts, htb_attr::RATE64));
                k.ceil = ratespec_rate(p, 12, netlink::find(opts, htb_attr::CEIL64));
                k.buffer_ticks = netlink::u32_at(p, 24).zip(netlink::u32_at(p, 28));
                k.prio_quantum = netlink::u32_at(p, 40).zip(netlink::u32_at(p, 32));
            }
        }
        ("htb", true) => {
            k.htb_default = netlink::find(opts, htb_attr::INIT).and_then(|g| netlink::u32_at(g, 8));
        }
        ("tbf", true) => {
            if let Some(p) = netlink::find(opts, tbf_attr::PARMS) {
                k.rate = ratespec_rate(p, 0, netlink::find(opts, tbf_attr::RATE64));
                k.limit = netlink::u32_at(p, 24);
                k.buffer_ticks = netlink::u32_at(p, 28).map(|b| (b, 0));
            }
        }
        ("pfifo" | "bfifo", true) => k.limit = netlink::u32_at(opts, 0),
        _ => {}
    }
    k
}

/// Read back every qdisc and class of `dev` (calling thread's namespace).
pub fn read_back(dev: &str) -> Result<Vec<KObject>, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    let mut out = Vec::new();
    let qd = nl.dump(&mut Msg::tc(
        rtm::GETQDISC,
        flags::REQUEST | flags::DUMP,
        TcMsg { ifindex, ..TcMsg::default() },
    ))?;
    out.extend(qd.iter().filter(|o| o.tc.ifindex == ifindex).map(|o| decode(o, true)));
    let cl = nl.dump(&mut Msg::tc(
        rtm::GETTCLASS,
        flags::REQUEST | flags::DUMP,
        TcMsg { ifindex, ..TcMsg::default() },
    ))?;
    out.extend(cl.iter().filter(|o| o.tc.ifindex == ifindex).map(|o| decode(o, false)));
    Ok(out)
}

/// `tc -s`-like lines for what the kernel reports.
pub fn format_objects(objs: &[KObject]) -> Vec<String> {
    objs.iter()
        .map(|k| {
            let mut s = format!(
                "{} {} {}",
                if k.is_qdisc { "qdisc" } else { "class" },
                k.kind,
                tc_handle_str(k.handle)
            );
            if let Some(r) = k.rate {
                s += &format!(" rate {}", format_rate(r));
            }
            if let Some(c) = k.ceil {
                s += &format!(" ceil {}", format_rate(c));
            }
            if let (Some((b, cb)), Some(r), Some(c)) = (k.buffer_ticks, k.rate, k.ceil) {
                s += &format!(
                    " burst {}b cburst {}b",
                    ticks_to_bytes(r.bytes_per_sec(), b),
                    ticks_to_bytes(c.bytes_per_sec(), cb)
                );
            }
            if let Some(l) = k.limit {
                s += &format!(" limit {l}");
            }
            if let Some(d) = k.htb_default {
                s += &format!(" default {d:#x}");
            }
            s += &format!(
                "\n Sent {} bytes {} pkt (dropped {}, overlimits {}) backlog {}b {}p",
                k.stats.bytes,
                k.stats.packets,
                k.stats.drops,
                k.stats.overlimits,
                k.stats.backlog,
                k.stats.qlen
            );
            s
        })
        .collect()
}

/// Loads a tc script (`$DEV` and other variables from `vars`) into a model, for configurations
/// written in code (the lab's measurements, tests).
pub fn script_state(text: &str, vars: &[(&str, &str)]) -> Result<State, Error> {
    let vars: sluice_tc::shell::Vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    sluice_tc::script::load_tc_script("<script>", text, &vars)
        .map(|l| l.state)
        .map_err(|e| Error::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(text: &str) -> State {
        script_state(text, &[("DEV", "eth0")]).unwrap()
    }

    fn single_htb(rate: &str) -> State {
        state(&format!(
            "tc qdisc add dev $DEV root handle 1: htb default 1\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate {rate}\n\
             tc qdisc add dev $DEV parent 1:1 handle 10: pfifo limit 100\n"
        ))
    }

    #[test]
    fn burst_rule_covers_the_kernel_budget_and_never_goes_below_mtu() {
        // Sluice's policy is the shared rule with the kernel's budget: rate × budget at high
        // rates, one mtu at low ones.
        use sluice_tc::burst::{recommended_burst, KERNEL_JITTER_BUDGET_US};
        for (rate, mtu) in [(10_000_000_000u64, 1600u32), (1_000_000, 1600), (100_000_000, 9000)] {
            let st = single_htb(&format!("{rate}bit"));
            let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
            let c = plan.classes().next().unwrap();
            let want = recommended_burst(rate, c.htb.mtu, KERNEL_JITTER_BUDGET_US);
            assert_eq!((c.burst, c.cburst), (want, want));
            let b = kernel_burst(Rate::from_bps(rate), mtu, BurstPolicy::Sluice);
            assert_eq!(b, recommended_burst(rate, mtu, KERNEL_JITTER_BUDGET_US));
            let cover = rate as f64 / 8.0 * KERNEL_JITTER_BUDGET_US * 1e-6;
            assert!(b as f64 >= cover.max(mtu as f64));
        }
        assert_eq!(kernel_burst(Rate::from_bps(10_000_000_000), 1600, BurstPolicy::TcDefault), 1600);
    }

    #[test]
    fn xmittime_matches_tc_for_known_values() {
        // 1 Mbit (125000 B/s), 1600 b: 12.8 ms = 12800 µs = 200000 ticks.
        assert_eq!(burst_ticks(125_000, 1600), 200_000);
        // A burst past tc's 32-bit size is sent as the largest one.
        assert_eq!(burst_ticks(125_000_000, 1 << 40), xmittime(125_000_000, u32::MAX));
        assert_eq!(ticks_to_bytes(125_000, 200_000), 1600);
    }

    #[test]
    fn high_rates_use_the_64_bit_attributes() {
        let opts_of = |rate: &str| {
            let st = single_htb(rate);
            let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
            let m = class_msg(1, plan.classes().next().unwrap());
            netlink::find(&m.bytes()[36..], tca::OPTIONS).unwrap().to_vec()
        };
        // 40 Gbit = 5e9 B/s does not fit the u32 ratespec.
        let big = opts_of("40gbit");
        assert_eq!(
            netlink::find(&big, htb_attr::RATE64).and_then(|b| netlink::u64_at(b, 0)),
            Some(5_000_000_000)
        );
        assert_eq!(netlink::find(&big, htb_attr::RTAB).map(|t| t.len()), Some(1024));
        let parms = netlink::find(&big, htb_attr::PARMS).unwrap();
        assert_eq!(parms.len(), 44);
        assert_eq!(netlink::u32_at(parms, 8), Some(u32::MAX));
        let small = opts_of("1gbit");
        assert!(netlink::find(&small, htb_attr::RATE64).is_none());
        assert_eq!(netlink::u32_at(netlink::find(&small, htb_attr::PARMS).unwrap(), 8), Some(125_000_000));
    }

    #[test]
    fn bursts_left_out_follow_the_policy_and_explicit_ones_are_kept() {
        let st = state(
            "tc qdisc add dev $DEV root handle 1: htb default 10\n\
             tc class add dev $DEV parent 1: classid 1:10 htb rate 100mbit ceil 1gbit burst 10k mtu 9000\n",
        );
        for policy in [BurstPolicy::Sluice, BurstPolicy::TcDefault] {
            let plan = Plan::new(&st, "eth0", policy).unwrap();
            let c = plan.classes().next().unwrap();
            assert_eq!(c.burst, 10 * 1024, "explicit burst kept");
            assert_eq!(c.cburst, kernel_burst(Rate::from_bps(1_000_000_000), 9000, policy));
        }
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        let q = plan.qdiscs().next().unwrap();
        let m = qdisc_msg(1, q, true);
        let glob =
            netlink::find(netlink::find(&m.bytes()[36..], tca::OPTIONS).unwrap(), htb_attr::INIT).unwrap();
        assert_eq!(netlink::u32_at(glob, 8), Some(0x10), "`default 10` is hex, as in tc");
    }

    #[test]
    fn dry_run_names_burst_source_and_prints_filters_last() {
        let st = state(
            "tc qdisc add dev $DEV root handle 1: htb default 1\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 100mbit\n\
             tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:1\n",
        );
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        let lines = plan.tc_commands();
        let b = kernel_burst(Rate::from_bps(100_000_000), HTB_DEFAULT_MTU, BurstPolicy::Sluice);
        let shown = format!("burst {b}b");
        assert!(
            lines.iter().any(|l| l.contains(&shown) && l.contains("jitter rule")),
            "{shown} in {lines:?}"
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "tc filter add dev eth0 parent 1: protocol ip prio 1 handle 800::800 u32 ht 800:0 \
                 match u32 0x00000016 0x0000ffff at 20 classid 1:1"
            ),
            "{lines:?}"
        );
        assert_eq!(plan.filters().len(), 1, "the u32 root table is implicit: one filter");
        let tc = Plan::new(&st, "eth0", BurstPolicy::TcDefault).unwrap().tc_commands();
        assert!(tc.iter().any(|l| l.contains("burst 1600b") && l.contains("tc's default")), "{tc:?}");
    }

    #[test]
    fn parents_come_before_children_at_every_level() {
        // Classes of a nested HTB must follow their qdisc, which follows its parent class.
        let st = state(
            "tc qdisc add dev $DEV root handle 1: htb default 20\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 1mbit\n\
             tc class add dev $DEV parent 1:1 classid 1:10 htb rate 300kbit ceil 1mbit\n\
             tc class add dev $DEV parent 1:1 classid 1:20 htb rate 600kbit ceil 1mbit\n\
             tc qdisc add dev $DEV parent 1:10 handle 10: pfifo\n\
             tc qdisc add dev $DEV parent 1:20 handle 20: htb default 1\n\
             tc class add dev $DEV parent 20: classid 20:1 htb rate 150kbit\n\
             tc class add dev $DEV parent 20:1 classid 20:2 htb rate 100kbit\n\
             tc qdisc add dev $DEV parent 20:2 handle 202: bfifo\n",
        );
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        let order: Vec<String> = plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Qdisc(q) => tc_handle_str(q.handle),
                Step::Class(_) | Step::DrrClass(_) | Step::HfscClass(_) => {
                    tc_handle_str(s.class_ids().unwrap().0)
                }
            })
            .collect();
        assert_eq!(order, ["1:", "1:1", "1:10", "1:20", "10:", "20:", "20:1", "20:2", "202:"]);
        assert_eq!(plan.unclassified_destination(), "class 1:20, the default of htb 1:");
    }

    #[test]
    fn htb_textbook_sharing_is_refused_with_the_reason() {
        let st = state(
            "tc qdisc add dev $DEV root handle 1: htb default 10 textbook\n\
             tc class add dev $DEV parent 1: classid 1:10 htb rate 1mbit\n",
        );
        let e = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap_err().to_string();
        assert!(e.contains("qdisc htb 1:") && e.contains("`textbook`") && e.contains("kernel's HTB"), "{e}");
    }

    #[test]
    fn what_the_encoder_cannot_send_is_refused_by_name() {
        // An ingress qdisc is sent (by kind), and is a whole configuration on its own.
        let st = state("tc qdisc add dev $DEV ingress");
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        assert_eq!(plan.tc_commands()[1], "tc qdisc replace dev eth0 ingress");
        // DRR classes are planned after their qdisc, with their quantum when given.
        let st = state(
            "tc qdisc add dev $DEV root handle 1: drr\n\
             tc class add dev $DEV parent 1: classid 1:1 drr\n\
             tc class add dev $DEV parent 1: classid 1:2 drr quantum 3000\n",
        );
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        let cmds = plan.tc_commands();
        assert_eq!(cmds[2], "tc class replace dev eth0 parent 1: classid 1:1 drr");
        assert_eq!(cmds[3], "tc class replace dev eth0 parent 1: classid 1:2 drr quantum 3000");
        let many: Vec<String> = (0..8).map(|i| format!("class 1:{i}")).collect();
        assert_eq!(first_few(&many), "class 1:0, class 1:1, class 1:2, class 1:3, class 1:4 and 3 more");
        // A registry kind is sent with its options, and the dry run prints them.
        let st = state("tc qdisc add dev $DEV root handle 1: sfq perturb 10\n");
        let plan = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap();
        let q = plan.qdiscs().next().unwrap();
        assert_eq!(plan.tc_commands()[1], "tc qdisc replace dev eth0 root handle 1: sfq perturb 10");
        assert_eq!(qdisc_msg(1, q, true).bytes().len(), 36 + 8 + 76, "kind and tc_sfq_qopt_v1");
    }

    #[test]
    fn a_minor_the_kernel_cannot_hold_is_refused_with_a_hint() {
        // The TOML form takes a 32-bit default minor; the kernel's is 16 bits and would silently
        // send the default traffic to the direct queue.
        let mut st = single_htb("1mbit");
        let QdiscOpts::Htb(h) = &mut st.devices[0].qdiscs[0].opts else { panic!() };
        h.default = 0x1_0001;
        let toml = sluice_tc::export::to_toml(&st).unwrap();
        let st = sluice_tc::export::from_toml(&toml).unwrap();
        let e = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap_err().to_string();
        assert!(e.contains("the default class 0x10001 of qdisc htb 1:"), "{e}");
        assert!(e.contains("above 0xffff") && e.contains("nested HTB") && e.contains("sluice shape"), "{e}");
    }

    #[test]
    fn device_choice() {
        let st = state("tc qdisc add dev a root pfifo limit 5\ntc qdisc add dev b root pfifo limit 6\n");
        assert_eq!(select_device(&st, "b").unwrap().name, "b");
        let e = select_device(&st, "c").unwrap_err().to_string();
        assert!(e.contains("several devices (a, b); none is c"), "{e}");
        let one = state("tc qdisc add dev a root pfifo\n");
        assert_eq!(select_device(&one, "eth9").unwrap().name, "a", "the only device is taken");
        assert!(select_device(&State::default(), "a").is_err());
    }
}
