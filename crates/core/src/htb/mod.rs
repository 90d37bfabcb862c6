//! HTB, the hierarchical token bucket (tc-htb(8)), following `net/sched/sch_htb.c`.
//!
//! # Model
//!
//! Each class has a rate bucket (`rate`, `burst`) and a ceil bucket (`ceil`, `cburst`). From
//! them it is in one of three modes: `CanSend` (rate tokens >= 0), `MayBorrow` (rate tokens < 0,
//! ceil tokens >= 0) or `CantSend` (ceil tokens < 0). A backlogged leaf that can send sits in the
//! leaf *row* of its priority; one that may borrow sits in its parent's *feed*, and the parent in
//! turn sits in its own row (if it can send) or its parent's feed, and so on up. Dequeue serves
//! the leaf row first, then inner rows from the deepest level up, lowest `prio` first; within a
//! row or feed, leaves take turns by DRR with their `quantum`. The packet is then charged to the
//! leaf and every ancestor: ceil tokens always; rate tokens for the *lender* (the class found in
//! the row) and the classes above it, while the classes below it count a *borrow*.
//! Classes waiting for tokens sit in an event queue keyed by the exact time their mode changes;
//! [`Qdisc::next_event`] reports the earliest.
//!
//! # Scale
//!
//! Per packet the work is O(depth) and independent of the number of classes:
//!
//! - Classes live in an arena addressed by `u32` index. The state a packet touches in each class
//!   (tokens, `t_c`, byte counter, mode, links) is one 64-byte cache line; the configuration is
//!   in a plan shared by every class configured alike ([`plan`]), so an idle leaf costs about 120
//!   bytes all told (BENCHMARKS.md, Scale). Class minors are 32 bits, so a million classes are
//!   one qdisc; classid lookup is O(1) (`htb/index.rs`): a formula while classes are created in
//!   classid order, else a direct minor → index table (4 bytes per class), or a hash map for
//!   scattered minors. A leaf's queue slot is indexed by the class, so it loads alongside the
//!   class's cache line (`htb/leaves.rs`).
//! - Rows and feeds are hierarchical bitmaps of member ranks with find-next-set
//!   ([`crate::sched::bitmap::RankSet`]): joining, leaving and moving the DRR cursor are a few
//!   word operations, also with a million active classes.
//! - Classes waiting for tokens sit in a timing wheel ([`crate::sched::wheel::TimerWheel`]) that is
//!   touched only when a class changes mode, as in the kernel.
//! - Tokens are exact 64-bit integers ([`plan::Bucket`]): no division per packet.
//! - pfifo leaves (the default) are inline queues threaded through one shared packet slab.
//!
//! Nothing allocates per packet once the slab and bitmaps have grown (tests/perf_alloc.rs).
//!
//! # Classification
//!
//! In the kernel's order: `skb->priority` equal to the qdisc handle sends the packet to the direct
//! queue, equal to a leaf's classid to that leaf. Then the classifier stage's result for this
//! qdisc ([`Packet::class_for`]): `major:0` means the direct queue, a leaf means that leaf. An
//! inner class or an unknown classid falls back to the default class if it is a leaf, else the
//! direct queue. (The kernel runs an inner class's own filters when a filter returns it; in
//! Sluice the classifier stage has already done that, so an inner class as the *final* result
//! means its filters found nothing, and the kernel's fallback applies.)
//!
//! # Deviations from the kernel, and why
//!
//! - **Exact token arithmetic.** Tokens are exact integers (bit·ns divided by
//!   `gcd(rate, 8·10⁹)`, see [`plan`]); the kernel truncates every packet's time to whole ns
//!   (1199 ns instead of 1200 at 10 Gbit/s) and keeps tokens as ns of the *current* rate.
//!   Consequently `change_class` keeps the bytes a bucket holds when its rate changes, where the
//!   kernel keeps the time. The 60 s debt floor is held to 2⁶² units, which is less than 60 s
//!   only for rates with few factors of 2 and 5 above ~76 Mbit/s; bursts too large for 2⁶²
//!   units are refused.
//! - **Own bucket code, not [`crate::rate::TokenBucket`].** The arithmetic is the same, but HTB
//!   needs one shared `t_c` for both buckets, the kernel's 60 s `mbuffer` floor and cap, and a
//!   compact layout for a million classes.
//! - **GSO packets** are charged per segment (overhead, mpu and ATM cells apply to each wire
//!   packet, see [`crate::rate::WireSpec::packet_cost`]); the kernel charges the super-packet once.
//! - **Round-robin order.** Rows and feeds serve their members in a fixed order with the
//!   kernel's cursor rules (a row's cursor moves on when its class leaves; a feed's remembers
//!   the class, `last_ptr_id`, and resumes at the first one at or after it), but the order is
//!   the class's arena slot in rows and its place among its siblings in feeds, not the classid:
//!   creation order, which is classid order when classes are created in classid order (as
//!   generated configurations are). The shares are the same; only who goes first differs.
//! - **No depth or class-count limit.** Inner classes are ordered by depth instead of the kernel's
//!   fixed levels 0..7 (identical order for trees the kernel accepts), and class minors are 32
//!   bits (the kernel's are 16), so one qdisc can hold millions of classes.
//! - **Events**: all mode changes due are applied at each dequeue (the kernel gives up after two
//!   jiffies with "htb: too many events!"). This does not change which packet is sent.
//! - **Elapsed time is not capped at `mbuffer`** when tokens are refilled (the kernel caps it to
//!   keep 64-bit ns arithmetic from overflowing; buckets are capped at their burst anyway), and the
//!   60 s debt floor is applied *below* the packet just charged, so a single packet longer than
//!   60 s at the class's rate (64 KiB at 8 bit/s) is still fully paid for.
//! - **No hysteresis** (the kernel's `htb_hysteresis` parameter defaults to off too).
//! - **`ceil < rate` and `direct_qlen 0` are rejected**; the kernel accepts both. A `prio` above 7
//!   is clamped with a warning (the kernel clamps silently). `r2q 0` means 1, as in the kernel.
//! - **A leaf turned into an inner class** (a child added under it) has its queue flushed, as the
//!   kernel does; the packets come out of [`Qdisc::take_dropped`] with [`DropReason::Flushed`]. Its
//!   mode is then recomputed from its tokens instead of being forced to `CAN_SEND`.
//! - **Class drops** include drops the leaf qdisc makes on its own (AQM, head drop); the kernel
//!   counts only refusals at enqueue in the class and leaves the rest in the leaf qdisc's stats.
//! - **`giants`** is always 0, as in kernels without rate tables; `rate`/`pps` estimators are not
//!   kept (the simulator and live shaper measure rates themselves).
//! - **No `offload`**: there is no hardware here.
//! - **Throttled leaf qdiscs are parked.** A leaf whose own qdisc holds packets but sends none
//!   (a nested HTB or a TBF waiting for tokens) leaves the rows until the time that qdisc names,
//!   or until a packet is enqueued to it; the kernel polls it at every dequeue, which costs
//!   O(throttled leaves) per packet when thousands of nested HTBs wait.
//! - **`leaf_qdisc`** returns only qdiscs grafted with [`Htb::set_leaf_qdisc`]; the default
//!   pfifo is built in (its counters are in the class statistics).
//!
//! # Excess sharing
//!
//! Excess bandwidth is shared in proportion to quantum, also when borrowers keep switching
//! between sending on their own rate and borrowing (tests/perf_differential.rs,
//! `fast_htb_shares_excess_by_quantum`). This used to be off by up to 1.5x while rows and feeds
//! were kept in activation order.

mod class;
mod config;
mod index;
mod leaves;
mod plan;
mod rr;
mod sched;
#[cfg(test)]
mod tests;
mod waitq;

pub use class::{ClassInfo, HtbClassStats, HtbMode};
pub use config::{
    ClassParams, HtbClassConfig, HtbConfig, DEFAULT_DIRECT_QLEN, DEFAULT_MTU, DEFAULT_R2Q, MAX_QUANTUM,
    MBUFFER, MIN_QUANTUM, NUM_PRIO, PSCHED_HZ,
};

use crate::fifo::DEFAULT_TXQUEUELEN;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::Time;
use class::{ns_to_ticks, Class, ClassCold, LEAF, NONE, PARKED};
use index::MinorIndex;
use leaves::Leaves;
use plan::Plans;
use rr::RrList;
use sched::Inner;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use waitq::WaitQueue;

/// Where a packet goes.
enum Target {
    Direct,
    Leaf(u32),
}

/// The HTB qdisc. See the [module docs](self).
pub struct Htb {
    handle: Handle,
    cfg: HtbConfig,
    classes: Vec<Class>,
    cold: Vec<ClassCold>,
    free: Vec<u32>,
    /// Arena index of each class minor.
    by_minor: MinorIndex,
    /// Class minor of each arena index (cold: listings and stats only).
    minors: Vec<u32>,
    count: usize,
    plans: Plans,
    leaves: Leaves,
    inners: Vec<Inner>,
    free_inners: Vec<u32>,
    rows: Vec<[RrList; 8]>,
    row_mask: Vec<u8>,
    waitq: WaitQueue,
    child_wake: BinaryHeap<Reverse<(u64, u32)>>,
    direct: VecDeque<Packet>,
    direct_pkts: u64,
    /// Peeked or requeued packets, already charged, sent before anything else.
    front: VecDeque<Packet>,
    stats: QdiscStats,
    dropped: VecDeque<Dropped>,
    now: Time,
    /// Set when a dequeue found nothing although backlogged classes were linked in rows (their
    /// leaf qdiscs were throttled): `next_event` then reports wake-ups instead of "now".
    stalled: bool,
    /// The leaves taking part in scheduling now (backlogged), summed.
    active: ActiveLeaves,
}

/// The leaves of an [`Htb`] that are backlogged now, summed ([`Htb::active_leaves`]): what a
/// coordinator splitting a parent between several HTBs weighs each by, as HTB itself gives each
/// backlogged leaf its rate, then the excess by quantum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveLeaves {
    /// How many.
    pub leaves: u32,
    /// Their rates, bit/s.
    pub rate_bps: u64,
    /// Their quanta, bytes.
    pub quantum: u64,
}

impl ActiveLeaves {
    #[inline]
    pub(super) fn add(&mut self, rate_bps: u64, quantum: u32) {
        self.leaves += 1;
        self.rate_bps += rate_bps;
        self.quantum += quantum as u64;
    }

    #[inline]
    pub(super) fn remove(&mut self, rate_bps: u64, quantum: u32) {
        self.leaves = self.leaves.saturating_sub(1);
        self.rate_bps = self.rate_bps.saturating_sub(rate_bps);
        self.quantum = self.quantum.saturating_sub(quantum as u64);
    }
}

impl std::fmt::Debug for Htb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Htb")
            .field("handle", &self.handle)
            .field("cfg", &self.cfg)
            .field("classes", &self.count)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Htb {
    /// An HTB qdisc with handle `major:0` and no classes.
    pub fn new(handle: Handle, cfg: HtbConfig) -> Result<Htb, ConfigError> {
        if handle.minor() != 0 || handle.major() == 0 || handle == Handle::ROOT {
            return Err(ConfigError::invalid(
                "htb",
                "handle",
                handle,
                "a qdisc handle is MAJOR: with MAJOR not 0",
            ));
        }
        cfg.validate()?;
        Ok(Htb {
            handle,
            cfg,
            classes: Vec::new(),
            cold: Vec::new(),
            free: Vec::new(),
            by_minor: MinorIndex::default(),
            minors: Vec::new(),
            count: 0,
            plans: Plans::default(),
            leaves: Leaves::new(),
            inners: Vec::new(),
            free_inners: Vec::new(),
            rows: Vec::new(),
            row_mask: Vec::new(),
            waitq: WaitQueue::default(),
            child_wake: BinaryHeap::new(),
            direct: VecDeque::new(),
            direct_pkts: 0,
            front: VecDeque::new(),
            stats: QdiscStats::default(),
            dropped: VecDeque::new(),
            now: Time::ZERO,
            stalled: false,
            active: ActiveLeaves::default(),
        })
    }

    /// Builds a qdisc and its classes given in any order, as `(classid, parent, config)` with
    /// `parent` the qdisc handle for root classes. Reports duplicate classids, unknown parents and
    /// cycles, then checks the default class ([`Htb::validate`]; a missing default is a warning).
    /// Classes are created parents first, each level in classid order, so that the round-robin
    /// order is the classid order.
    pub fn build(
        handle: Handle,
        cfg: HtbConfig,
        classes: &[(Handle, Handle, HtbClassConfig)],
        now: Time,
    ) -> Result<(Htb, Vec<String>), ConfigError> {
        let mut htb = Htb::new(handle, cfg)?;
        let mut warnings = Vec::new();
        let mut seen = std::collections::HashSet::with_capacity(classes.len());
        for (id, _, _) in classes {
            if !seen.insert(*id) {
                return Err(ConfigError::Hierarchy(format!("htb: class {id} is defined twice")));
            }
        }
        let mut pending: Vec<usize> = (0..classes.len()).collect();
        pending.sort_by_key(|&i| classes[i].0);
        htb.reserve(classes.len());
        while !pending.is_empty() {
            let before = pending.len();
            let mut rest = Vec::new();
            for i in pending {
                let (id, parent, c) = &classes[i];
                if *parent == handle || htb.find(*parent).is_some() {
                    warnings.extend(htb.add_class(*id, *parent, c.clone(), now)?);
                } else if !seen.contains(parent) {
                    return Err(ConfigError::Hierarchy(format!(
                        "htb class {id}: parent {parent} does not exist (neither a class nor the qdisc {handle})"
                    )));
                } else {
                    rest.push(i);
                }
            }
            if rest.len() == before {
                let ids: Vec<String> = rest.iter().map(|&i| classes[i].0.to_string()).collect();
                return Err(ConfigError::Hierarchy(format!(
                    "htb: classes {} form a cycle: none of them hangs from the qdisc {handle}",
                    ids.join(", ")
                )));
            }
            pending = rest;
        }
        htb.shrink_to_fit();
        match htb.validate() {
            Ok(()) => {}
            Err(e @ ConfigError::Hierarchy(_)) if htb.default_is_inner() => return Err(e),
            Err(e) => warnings.push(e.to_string()),
        }
        Ok((htb, warnings))
    }

    /// Makes room for `n` more classes, so that adding them reallocates nothing.
    pub fn reserve(&mut self, n: usize) {
        self.classes.reserve_exact(n);
        self.cold.reserve_exact(n);
        self.by_minor.reserve(n);
        self.leaves.reserve(n);
        self.minors.reserve_exact(n);
    }

    /// Gives back the spare capacity of the class tables (after a bulk build; adding a class
    /// afterwards grows them again).
    pub fn shrink_to_fit(&mut self) {
        self.classes.shrink_to_fit();
        self.cold.shrink_to_fit();
        self.free.shrink_to_fit();
        self.by_minor.shrink_to_fit();
        self.leaves.shrink_to_fit();
        self.minors.shrink_to_fit();
        self.inners.iter_mut().for_each(|i| i.children.shrink_to_fit());
    }

    /// Checks what the kernel only discovers at classification time: the default class must
    /// exist and be a leaf (otherwise unclassified traffic goes unshaped to the direct queue).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let def = self.cfg.default_class;
        if def == 0 {
            return Ok(());
        }
        let id = Handle::new(self.handle.major(), def);
        match self.find(id) {
            None => Err(ConfigError::Hierarchy(format!(
                "htb {}: default class {id} does not exist; unclassified packets go unshaped to the direct queue",
                self.handle
            ))),
            Some(c) if !self.classes[c as usize].is_leaf() => Err(ConfigError::Hierarchy(format!(
                "htb {}: default class {id} is an inner class; only a leaf can take packets \
                 (unclassified packets would go unshaped to the direct queue)",
                self.handle
            ))),
            Some(_) => Ok(()),
        }
    }

    fn default_is_inner(&self) -> bool {
        let id = Handle::new(self.handle.major(), self.cfg.default_class);
        self.find(id).is_some_and(|c| !self.classes[c as usize].is_leaf())
    }

    /// The qdisc handle.
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// The qdisc options.
    pub fn htb_config(&self) -> &HtbConfig {
        &self.cfg
    }

    /// Changes the qdisc options (`tc qdisc change ... htb default X r2q N`). A new `r2q` applies
    /// to classes added or changed afterwards, as in the kernel.
    pub fn change_config(&mut self, cfg: HtbConfig) -> Result<(), ConfigError> {
        cfg.validate()?;
        self.cfg = cfg;
        Ok(())
    }

    /// Packets that went through the direct queue (`direct_packets_stat`).
    pub fn direct_packets(&self) -> u64 {
        self.direct_pkts
    }

    /// Number of classes.
    pub fn class_count(&self) -> usize {
        self.count
    }

    #[inline]
    fn find(&self, id: Handle) -> Option<u32> {
        if id.major() != self.handle.major() {
            return None;
        }
        self.by_minor.get(id.minor())
    }

    fn id_of(&self, c: u32) -> Handle {
        Handle::new(self.handle.major(), self.minors[c as usize])
    }

    fn observe(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn alloc_inner(&mut self) -> u32 {
        match self.free_inners.pop() {
            Some(i) => i,
            None => {
                self.inners.push(Inner::default());
                (self.inners.len() - 1) as u32
            }
        }
    }

    fn release_inner(&mut self, i: u32) {
        self.inners[i as usize] = Inner::default();
        self.free_inners.push(i);
    }

    /// Adds a class (`tc class add dev D parent P classid C htb ...`). `parent` is the qdisc
    /// handle for a root class. Returns the kernel's warnings (quantum clamped...). If the parent
    /// is a leaf it becomes an inner class and its queued packets are flushed, as in the kernel
    /// (they come out of [`Qdisc::take_dropped`]).
    pub fn add_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        cfg: HtbClassConfig,
        now: Time,
    ) -> Result<Vec<String>, ConfigError> {
        let now = self.observe(now);
        if classid.major() != self.handle.major() || classid.minor() == 0 {
            return Err(ConfigError::Hierarchy(format!(
                "htb {}: invalid classid {classid}: a class of this qdisc is {:x}:MINOR with MINOR not 0",
                self.handle,
                self.handle.major()
            )));
        }
        if self.find(classid).is_some() {
            return Err(ConfigError::Hierarchy(format!("htb class {classid} already exists")));
        }
        let parent_idx = if parent == self.handle {
            NONE
        } else {
            self.find(parent).ok_or_else(|| {
                ConfigError::Hierarchy(format!(
                    "htb class {classid}: parent {parent} does not exist (neither a class nor the qdisc {})",
                    self.handle
                ))
            })?
        };
        let depth = if parent_idx == NONE { 0 } else { self.classes[parent_idx as usize].depth as u32 + 1 };
        if depth > u8::MAX as u32 - 2 {
            return Err(ConfigError::Hierarchy(format!("htb class {classid}: the tree is too deep")));
        }
        let mut warnings = Vec::new();
        let params = cfg.resolve(classid, self.cfg.r2q, &mut warnings)?;
        let plan = self.plans.acquire(&cfg, params, classid)?;
        if parent_idx != NONE && self.classes[parent_idx as usize].is_leaf() {
            let flushed = self.leaf_to_inner(parent_idx, now);
            if flushed > 0 {
                warnings.push(format!(
                    "class {parent} was a leaf with {flushed} queued packets; they were flushed as it became an inner class"
                ));
            }
        }
        let p = self.plans.get(plan);
        let class = Class {
            tokens: p.rate.size,
            ctokens: p.ceil.size,
            t_c: now.as_nanos(),
            bytes: 0,
            parent: parent_idx,
            plan,
            ext: NONE,
            srank: 0,
            lends: 0,
            borrows: 0,
            timer: NONE,
            depth: depth as u8,
            mode: HtbMode::CanSend,
            activity: 0,
            flags: LEAF,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.classes[i as usize] = class;
                self.cold[i as usize] = ClassCold::default();
                self.minors[i as usize] = classid.minor();
                i
            }
            None => {
                self.classes.push(class);
                self.cold.push(ClassCold::default());
                self.minors.push(classid.minor());
                (self.classes.len() - 1) as u32
            }
        };
        self.leaves.alloc(idx, DEFAULT_TXQUEUELEN.max(1), depth as usize + 1);
        self.by_minor.insert(classid.minor(), idx);
        self.count += 1;
        if parent_idx != NONE {
            let ext = self.classes[parent_idx as usize].ext as usize;
            self.classes[idx as usize].srank = self.inners[ext].children.push(idx);
        }
        self.ensure_rows(depth);
        self.stalled = false;
        Ok(warnings)
    }

    /// Turns a leaf into an inner class; returns how many packets were flushed.
    fn leaf_to_inner(&mut self, c: u32, now: Time) -> usize {
        let pkts = self.flush_leaf(c);
        let n = pkts.len();
        for pkt in pkts {
            self.dropped.push_back(Dropped { pkt, reason: DropReason::Flushed });
        }
        self.cold[c as usize].packets += self.leaves.sent(c) as u64;
        self.leaves.release(c);
        let inner = self.alloc_inner();
        let cl = &mut self.classes[c as usize];
        cl.set_flag(LEAF, false);
        cl.ext = inner;
        self.update_mode(c, now.as_nanos());
        n
    }

    /// Turns an inner class whose last child went away back into a leaf with a fresh pfifo
    /// (htb_parent_to_leaf: full buckets, CAN_SEND).
    fn inner_to_leaf(&mut self, c: u32, now: Time) {
        self.release_inner(self.classes[c as usize].ext);
        let depth = self.classes[c as usize].depth as usize;
        self.leaves.alloc(c, DEFAULT_TXQUEUELEN.max(1), depth + 1);
        let p = self.plans.get(self.classes[c as usize].plan);
        let (size, csize) = (p.rate.size, p.ceil.size);
        let cl = &mut self.classes[c as usize];
        cl.set_flag(LEAF, true);
        cl.ext = NONE;
        cl.activity = 0;
        cl.tokens = size;
        cl.ctokens = csize;
        cl.t_c = now.as_nanos();
        cl.mode = HtbMode::CanSend;
        self.waitq.cancel(c, self.classes[c as usize].timer);
    }

    /// Changes a class's parameters (`tc class change`), keeping its queue and its place in the
    /// tree. Tokens are brought up to `now` with the old rates, converted to the new rates
    /// keeping the bytes they stand for, and capped at the new bursts.
    pub fn change_class(
        &mut self,
        classid: Handle,
        cfg: HtbClassConfig,
        now: Time,
    ) -> Result<Vec<String>, ConfigError> {
        let now = self.observe(now);
        let c = self
            .find(classid)
            .ok_or_else(|| ConfigError::Hierarchy(format!("htb class {classid} does not exist")))?;
        let mut warnings = Vec::new();
        let mut params = cfg.resolve(classid, self.cfg.r2q, &mut warnings)?;
        let is_leaf = self.classes[c as usize].is_leaf();
        let old_plan = self.classes[c as usize].plan;
        if !is_leaf {
            // The kernel sets quantum and prio of leaves only.
            warnings.clear();
            let old = self.plans.get(old_plan).params;
            params.quantum = old.quantum;
            params.prio = old.prio;
        }
        let plan = self.plans.acquire(&cfg, params, classid)?;
        let was_active = is_leaf && self.classes[c as usize].activity != 0;
        if was_active {
            self.deactivate(c);
        }
        let n = now.as_nanos();
        let (old, new) = (self.plans.get(old_plan), self.plans.get(plan));
        let cl = &mut self.classes[c as usize];
        let d = n.saturating_sub(cl.t_c);
        cl.tokens = new.rate.convert(old.rate.refill(cl.tokens, d), &old.rate);
        cl.ctokens = new.ceil.convert(old.ceil.refill(cl.ctokens, d), &old.ceil);
        cl.t_c = n;
        cl.plan = plan;
        self.plans.release(old_plan);
        self.update_mode(c, n);
        if was_active || (is_leaf && self.leaves.qlen(c) > 0) {
            self.activate(c);
        }
        self.stalled = false;
        Ok(warnings)
    }

    /// Deletes a class (`tc class del`). A class with children is refused ("HTB class in use").
    /// The packets queued in a deleted leaf are returned. When the parent loses its last child
    /// it becomes a leaf again with a fresh pfifo, as in the kernel.
    pub fn delete_class(&mut self, classid: Handle, now: Time) -> Result<Vec<Packet>, ConfigError> {
        let now = self.observe(now);
        let c = self
            .find(classid)
            .ok_or_else(|| ConfigError::Hierarchy(format!("htb class {classid} does not exist")))?;
        if !self.classes[c as usize].is_leaf() {
            let children = self.inners[self.classes[c as usize].ext as usize].children.len();
            return Err(ConfigError::Hierarchy(format!(
                "HTB class in use: {classid} has {children} child class(es); delete them first"
            )));
        }
        let pkts = self.flush_leaf(c);
        self.waitq.cancel(c, self.classes[c as usize].timer);
        self.leaves.release(c);
        let parent = self.classes[c as usize].parent;
        if parent != NONE {
            // Take the class out of its parent's children; the last child takes its rank.
            let rank = self.classes[c as usize].srank;
            let ext = self.classes[parent as usize].ext as usize;
            if let Some(moved) = self.inners[ext].children.swap_remove(rank) {
                self.renumber_child(parent, moved, rank);
            }
            if self.inners[ext].children.is_empty() {
                self.inner_to_leaf(parent, now);
            }
        }
        self.plans.release(self.classes[c as usize].plan);
        self.by_minor.remove(classid.minor());
        self.classes[c as usize].parent = NONE;
        self.free.push(c);
        self.count -= 1;
        self.stalled = false;
        Ok(pkts)
    }

    fn find_leaf(&self, classid: Handle) -> Result<u32, ConfigError> {
        let c = self
            .find(classid)
            .ok_or_else(|| ConfigError::Hierarchy(format!("htb class {classid} does not exist")))?;
        if !self.classes[c as usize].is_leaf() {
            return Err(ConfigError::Hierarchy(format!(
                "htb class {classid} is an inner class; only leaves have a qdisc"
            )));
        }
        Ok(c)
    }

    /// Replaces a leaf's qdisc (`tc qdisc add parent 1:10 ...`). The old qdisc's packets are
    /// returned (the kernel purges them too).
    pub fn set_leaf_qdisc(
        &mut self,
        classid: Handle,
        qdisc: Box<dyn Qdisc>,
    ) -> Result<Vec<Packet>, ConfigError> {
        let c = self.find_leaf(classid)?;
        let pkts = self.flush_leaf(c);
        let s = qdisc.stats();
        self.stats.qlen += s.qlen;
        self.stats.backlog_bytes += s.backlog_bytes;
        self.leaves.replace(c, Some(qdisc), 0);
        if self.leaves.qlen(c) > 0 {
            self.activate(c);
        }
        self.stalled = false;
        Ok(pkts)
    }

    /// Gives a leaf a plain `pfifo limit N` (the default leaf qdisc, with another limit). Prefer
    /// this to [`Self::set_leaf_qdisc`] with a boxed pfifo: pfifo leaves are kept inline, with no
    /// trait object per packet and about 16 bytes per idle leaf. The old queue's packets are
    /// returned.
    pub fn set_leaf_pfifo(&mut self, classid: Handle, limit: u32) -> Result<Vec<Packet>, ConfigError> {
        let c = self.find_leaf(classid)?;
        let pkts = self.flush_leaf(c);
        self.leaves.replace(c, None, limit);
        self.stalled = false;
        Ok(pkts)
    }

    /// The leaves backlogged now, summed (see [`ActiveLeaves`]).
    pub fn active_leaves(&self) -> ActiveLeaves {
        self.active
    }

    /// A class's configuration as given (`None`: no such class).
    pub fn class_config(&self, classid: Handle) -> Option<&HtbClassConfig> {
        let c = self.find(classid)?;
        Some(&self.plans.get(self.classes[c as usize].plan).config)
    }

    /// A leaf's qdisc grafted with [`Self::set_leaf_qdisc`], for its statistics and `tc qdisc
    /// show`; `None` for the built-in pfifo.
    pub fn leaf_qdisc(&self, classid: Handle) -> Option<&dyn Qdisc> {
        let c = self.find(classid)?;
        let cl = &self.classes[c as usize];
        cl.is_leaf().then(|| self.leaves.qdisc(c)).flatten()
    }

    /// Counters of one class, as `tc -s class show` prints them.
    pub fn class_stats(&self, classid: Handle) -> Option<HtbClassStats> {
        let c = self.find(classid)?;
        let cl = &self.classes[c as usize];
        let cold = &self.cold[c as usize];
        let plan = self.plans.get(cl.plan);
        let (qlen, backlog) = if cl.is_leaf() { self.leaves.backlog(c) } else { (0, 0) };
        Some(HtbClassStats {
            bytes: cl.bytes,
            packets: cold.packets + if cl.is_leaf() { self.leaves.sent(c) as u64 } else { 0 },
            drops: cold.drops as u64,
            overlimits: cold.overlimits as u64,
            backlog,
            qlen,
            lends: cl.lends as u64,
            borrows: cl.borrows as u64,
            giants: 0,
            tokens: ns_to_ticks(plan.rate.ns_of(cl.tokens)),
            ctokens: ns_to_ticks(plan.ceil.ns_of(cl.ctokens)),
            mode: Some(cl.mode),
        })
    }

    /// A class's mode at `now` computed from its buckets (what it would be if re-evaluated now).
    pub fn class_mode(&self, classid: Handle, now: Time) -> Option<HtbMode> {
        let c = self.find(classid)?;
        Some(self.mode_at(c, now.max(self.now).as_nanos()).0)
    }

    /// Every class, sorted by classid.
    pub fn classes(&self) -> impl Iterator<Item = ClassInfo> + '_ {
        let sorted = self.by_minor.sorted_indices();
        let deepest_inner = sorted
            .iter()
            .filter(|&&c| !self.classes[c as usize].is_leaf())
            .map(|&c| self.classes[c as usize].depth as u32)
            .max();
        let top = deepest_inner.map_or(7, |d| (d + 1).max(7));
        sorted.into_iter().map(move |c| {
            let cl = &self.classes[c as usize];
            let plan = self.plans.get(cl.plan);
            ClassInfo {
                classid: self.id_of(c),
                parent: if cl.parent == NONE { self.handle } else { self.id_of(cl.parent) },
                config: plan.config.clone(),
                params: plan.params,
                level: if cl.is_leaf() { 0 } else { top - cl.depth as u32 },
                depth: cl.depth as u32,
                is_leaf: cl.is_leaf(),
            }
        })
    }

    /// Classification (htb_classify), see the module docs.
    #[inline]
    fn classify(&self, pkt: &Packet) -> Target {
        // `skb->priority` is a 32-bit tc handle.
        let prio = Handle::from_tc(pkt.priority);
        if prio == self.handle {
            return Target::Direct;
        }
        if let Some(c) = self.find(prio) {
            if self.classes[c as usize].is_leaf() {
                return Target::Leaf(c);
            }
        }
        if let Some(h) = pkt.class_for(self.handle.major()) {
            if h.minor() == 0 {
                return Target::Direct;
            }
            if let Some(c) = self.find(h) {
                if self.classes[c as usize].is_leaf() {
                    return Target::Leaf(c);
                }
            }
        }
        match self.find(Handle::new(self.handle.major(), self.cfg.default_class)) {
            Some(c) if self.cfg.default_class != 0 && self.classes[c as usize].is_leaf() => Target::Leaf(c),
            _ => Target::Direct,
        }
    }

    /// The classid a packet would be queued in (`None` = the direct queue).
    pub fn classify_packet(&self, pkt: &Packet) -> Option<Handle> {
        match self.classify(pkt) {
            Target::Direct => None,
            Target::Leaf(c) => Some(self.id_of(c)),
        }
    }

    fn any_row_active(&self) -> bool {
        self.row_mask.iter().any(|&m| m != 0)
    }
}

impl Qdisc for Htb {
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn kind(&self) -> &'static str {
        "htb"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        let now = self.observe(now);
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        match self.classify(&pkt) {
            Target::Direct => {
                if self.direct.len() as u64 >= self.cfg.direct_qlen as u64 {
                    self.stats.drops += 1;
                    return Err(Dropped { pkt, reason: DropReason::QueueFull });
                }
                self.stats.on_enqueue(&pkt);
                self.direct.push_back(pkt);
                self.direct_pkts += 1;
            }
            Target::Leaf(c) => {
                if let Err(d) = self.leaves.push(c, pkt, now) {
                    self.stats.drops += 1;
                    self.cold[c as usize].drops = self.cold[c as usize].drops.wrapping_add(1);
                    self.drain_child_drops(c);
                    return Err(d);
                }
                self.stats.on_enqueue(&pkt);
                self.drain_child_drops(c);
                if self.classes[c as usize].is_parked() {
                    self.unpark(c);
                } else if self.leaves.qlen(c) > 0 {
                    self.activate(c);
                }
                self.stalled = false;
            }
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let now = self.observe(now);
        let pkt = match self.front.pop_front().or_else(|| self.direct.pop_front()) {
            Some(p) => Some(p),
            None if self.stats.qlen == 0 => None,
            None => self.dequeue_shaped(now),
        };
        match &pkt {
            Some(p) => {
                self.stats.on_dequeue(p);
                self.stalled = false;
            }
            None => self.stalled = self.stats.qlen > 0,
        }
        pkt
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        let now = self.observe(now);
        if self.front.is_empty() && self.direct.is_empty() && self.stats.qlen > 0 {
            match self.dequeue_shaped(now) {
                Some(p) => self.front.push_back(p),
                None => self.stalled = true,
            }
        }
        self.front.front().or_else(|| self.direct.front())
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        let now = now.max(self.now);
        if !self.front.is_empty() || !self.direct.is_empty() {
            return Some(now);
        }
        if self.stats.qlen == 0 {
            return None;
        }
        if !self.stalled && self.any_row_active() {
            return Some(now);
        }
        let ev = self.waitq.earliest();
        let child = self.child_wake.peek().map(|Reverse((t, _))| *t);
        let t = match (ev, child) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            // Nothing can unblock the backlog; should not happen. Poll again in a second, as the
            // kernel's watchdog does when its event queues are empty.
            (None, None) => now.as_nanos().saturating_add(1_000_000_000),
        };
        Some(Time::from_nanos(t).max(now))
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.front.drain(..).chain(self.direct.drain(..)).collect();
        self.waitq.clear();
        for c in 0..self.classes.len() as u32 {
            if self.by_minor.get(self.minors[c as usize]) != Some(c) {
                continue; // a free slot
            }
            let cl = &mut self.classes[c as usize];
            cl.activity = 0;
            cl.set_flag(PARKED, false);
            cl.mode = HtbMode::CanSend;
            let ext = cl.ext;
            if cl.is_leaf() {
                out.extend(self.leaves.flush(c));
            } else {
                self.inners[ext as usize].feeds.iter_mut().for_each(RrList::clear);
            }
        }
        self.rows.iter_mut().flatten().for_each(RrList::clear);
        self.row_mask.iter_mut().for_each(|m| *m = 0);
        self.child_wake.clear();
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        self.stalled = false;
        self.active = ActiveLeaves::default();
        out
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Every class, inner ones included (their `Sent` is their descendants'), with
    /// [`Htb::class_stats`]'s counters and the leaf's grafted qdisc.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        for c in self.by_minor.sorted_indices() {
            let id = self.id_of(c);
            let stats = self.class_stats(id).map(|s| QdiscStats {
                bytes: s.bytes,
                packets: s.packets,
                drops: s.drops,
                overlimits: s.overlimits,
                requeues: 0,
                backlog_bytes: s.backlog,
                qlen: s.qlen,
            });
            f(ClassView { minor: id.minor(), stats, child: self.leaf_qdisc(id) });
        }
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        self.stats.on_enqueue(&pkt);
        self.stats.requeues += 1;
        self.front.push_front(pkt);
        Ok(())
    }
}
