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
//! Classes live in arenas addressed by `u32` index (hot scheduling state apart from config and
//! counters). Rows and feeds are intrusive doubly-linked lists with a DRR cursor, the event
//! queue is an indexed binary heap, and classid lookup is a hash map. Per packet: O(depth) list
//! and bucket work plus O(depth · log N) heap updates, and no allocation in steady state.
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
//! - **Exact token arithmetic.** Tokens are bit·ns in 128-bit integers; the kernel truncates
//!   every packet's time to whole ns (1199 ns instead of 1200 at 10 Gbit/s) and keeps tokens as
//!   ns of the *current* rate. Consequently `change_class` keeps the bytes a bucket holds when its
//!   rate changes, where the kernel keeps the time.
//! - **Own bucket code, not [`crate::rate::TokenBucket`].** The arithmetic is the same, but HTB
//!   needs one shared `t_c` for both buckets, the kernel's 60 s `mbuffer` floor and cap, and a
//!   compact layout for a million classes.
//! - **GSO packets** are charged per segment (overhead, mpu and ATM cells apply to each wire
//!   packet, see [`crate::rate::WireSpec::packet_cost`]); the kernel charges the super-packet once.
//! - **Rows and feeds are sorted intrusive lists** instead of rbtrees: the same classid order and
//!   the same cursor rules (a row's cursor moves on when its class leaves; a feed's remembers the
//!   classid, `last_ptr_id`, and resumes at the first class at or above it), so the round robin is
//!   the kernel's. Insertion walks the list (O(n) in the classes active at that row or feed, where
//!   the kernel's is O(log n)).
//! - **No depth or class-count limit.** Inner classes are ordered by depth instead of the kernel's
//!   fixed levels 0..7 (identical order for trees the kernel accepts); handles stay `u16:u16`.
//! - **Events**: all mode changes due are applied at each dequeue (the kernel gives up after two
//!   jiffies with "htb: too many events!"), and a class's wake-up time is updated on every charge
//!   (the kernel keeps a stale, earlier one until it fires). Neither changes which packet is sent.
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
//!
//! # Excess sharing
//!
//! Excess bandwidth is shared in proportion to quantum, also when borrowers keep switching
//! between sending on their own rate and borrowing (tests/perf_differential.rs,
//! `fast_htb_shares_excess_by_quantum`). This used to be off by up to 1.5x while rows and feeds
//! were kept in activation order.

mod class;
mod config;
mod heap;
mod sched;
#[cfg(test)]
mod tests;

pub use class::{ClassInfo, HtbClassStats, HtbMode};
pub use config::{
    ClassParams, HtbClassConfig, HtbConfig, DEFAULT_DIRECT_QLEN, DEFAULT_MTU, DEFAULT_R2Q, MAX_QUANTUM,
    MBUFFER, MIN_QUANTUM, NUM_PRIO, PSCHED_HZ,
};

use crate::fifo::{Fifo, DEFAULT_TXQUEUELEN};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::Time;
use class::{
    ns_to_ticks, units_to_ns, Class, ClassCold, InnerData, LeafData, Link, List, NONE, UNITS_PER_BYTE,
};
use heap::EventHeap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hash for `u32` classids (SipHash is needlessly slow for this).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type IdMap = HashMap<u32, u32, BuildHasherDefault<IdHasher>>;

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
    leaves: Vec<Option<LeafData>>,
    free_leaves: Vec<u32>,
    inners: Vec<Option<InnerData>>,
    free_inners: Vec<u32>,
    by_id: IdMap,
    rows: Vec<[List; 8]>,
    row_mask: Vec<u8>,
    events: EventHeap,
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
}

impl std::fmt::Debug for Htb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Htb")
            .field("handle", &self.handle)
            .field("cfg", &self.cfg)
            .field("classes", &self.by_id.len())
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
            leaves: Vec::new(),
            free_leaves: Vec::new(),
            inners: Vec::new(),
            free_inners: Vec::new(),
            by_id: IdMap::default(),
            rows: Vec::new(),
            row_mask: Vec::new(),
            events: EventHeap::default(),
            child_wake: BinaryHeap::new(),
            direct: VecDeque::new(),
            direct_pkts: 0,
            front: VecDeque::new(),
            stats: QdiscStats::default(),
            dropped: VecDeque::new(),
            now: Time::ZERO,
            stalled: false,
        })
    }

    /// Builds a qdisc and its classes given in any order, as `(classid, parent, config)` with
    /// `parent` the qdisc handle for root classes. Reports duplicate classids, unknown parents and
    /// cycles, then checks the default class ([`Htb::validate`]; a missing default is a warning).
    pub fn build(
        handle: Handle,
        cfg: HtbConfig,
        classes: &[(Handle, Handle, HtbClassConfig)],
        now: Time,
    ) -> Result<(Htb, Vec<String>), ConfigError> {
        let mut htb = Htb::new(handle, cfg)?;
        let mut warnings = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (id, _, _) in classes {
            if !seen.insert(*id) {
                return Err(ConfigError::Hierarchy(format!("htb: class {id} is defined twice")));
            }
        }
        let mut pending: Vec<usize> = (0..classes.len()).collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut rest = Vec::new();
            for i in pending {
                let (id, parent, c) = &classes[i];
                if *parent == handle || htb.by_id.contains_key(&parent.0) {
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
        match htb.validate() {
            Ok(()) => {}
            Err(e @ ConfigError::Hierarchy(_)) if htb.default_is_inner() => return Err(e),
            Err(e) => warnings.push(e.to_string()),
        }
        Ok((htb, warnings))
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
            Some(c) if !self.classes[c as usize].leaf => Err(ConfigError::Hierarchy(format!(
                "htb {}: default class {id} is an inner class; only a leaf can take packets \
                 (unclassified packets would go unshaped to the direct queue)",
                self.handle
            ))),
            Some(_) => Ok(()),
        }
    }

    fn default_is_inner(&self) -> bool {
        let id = Handle::new(self.handle.major(), self.cfg.default_class);
        self.find(id).is_some_and(|c| !self.classes[c as usize].leaf)
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
        self.by_id.len()
    }

    fn find(&self, id: Handle) -> Option<u32> {
        if id.major() != self.handle.major() {
            return None;
        }
        self.by_id.get(&id.0).copied()
    }

    fn inner(&self, c: u32) -> &InnerData {
        self.inners[self.classes[c as usize].ext as usize].as_ref().expect("inner class has inner data")
    }

    fn leaf(&self, c: u32) -> &LeafData {
        self.leaves[self.classes[c as usize].ext as usize].as_ref().expect("leaf class has leaf data")
    }

    fn leaf_mut(&mut self, c: u32) -> &mut LeafData {
        self.leaves[self.classes[c as usize].ext as usize].as_mut().expect("leaf class has leaf data")
    }

    fn observe(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn alloc_leaf(&mut self, depth: u32) -> u32 {
        let data = LeafData {
            qdisc: Box::new(Fifo::pfifo(DEFAULT_TXQUEUELEN.max(1))),
            deficit: vec![0; depth as usize + 1],
        };
        match self.free_leaves.pop() {
            Some(i) => {
                self.leaves[i as usize] = Some(data);
                i
            }
            None => {
                self.leaves.push(Some(data));
                (self.leaves.len() - 1) as u32
            }
        }
    }

    fn alloc_inner(&mut self) -> u32 {
        match self.free_inners.pop() {
            Some(i) => {
                self.inners[i as usize] = Some(InnerData::new());
                i
            }
            None => {
                self.inners.push(Some(InnerData::new()));
                (self.inners.len() - 1) as u32
            }
        }
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
        if self.by_id.contains_key(&classid.0) {
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
        let mut warnings = Vec::new();
        let params = cfg.resolve(classid, self.cfg.r2q, &mut warnings)?;
        let depth = if parent_idx == NONE { 0 } else { self.classes[parent_idx as usize].depth + 1 };
        if parent_idx != NONE && self.classes[parent_idx as usize].leaf {
            let flushed = self.leaf_to_inner(parent_idx, now);
            if flushed > 0 {
                warnings.push(format!(
                    "class {parent} was a leaf with {flushed} queued packets; they were flushed as it became an inner class"
                ));
            }
        }
        let ext = self.alloc_leaf(depth);
        let class = Class {
            tokens: params.burst as i128 * UNITS_PER_BYTE,
            ctokens: params.cburst as i128 * UNITS_PER_BYTE,
            buffer: params.burst as i128 * UNITS_PER_BYTE,
            cbuffer: params.cburst as i128 * UNITS_PER_BYTE,
            t_c: now.as_nanos(),
            rate: params.rate.bps(),
            ceil: params.ceil.bps(),
            parent: parent_idx,
            depth,
            children: 0,
            ext,
            quantum: params.quantum,
            link: Link::EMPTY,
            wire: cfg.wire,
            mode: HtbMode::CanSend,
            prio: params.prio,
            aprio: params.prio,
            activity: 0,
            leaf: true,
        };
        let cold = ClassCold {
            classid,
            config: cfg,
            params,
            bytes: 0,
            packets: 0,
            drops: 0,
            overlimits: 0,
            lends: 0,
            borrows: 0,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.classes[i as usize] = class;
                self.cold[i as usize] = cold;
                i
            }
            None => {
                self.classes.push(class);
                self.cold.push(cold);
                (self.classes.len() - 1) as u32
            }
        };
        self.by_id.insert(classid.0, idx);
        if parent_idx != NONE {
            self.classes[parent_idx as usize].children += 1;
        }
        self.ensure_rows(depth);
        self.events.ensure(self.classes.len());
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
        let ext = self.classes[c as usize].ext;
        self.leaves[ext as usize] = None;
        self.free_leaves.push(ext);
        let inner = self.alloc_inner();
        let cl = &mut self.classes[c as usize];
        cl.leaf = false;
        cl.ext = inner;
        cl.link = Link::EMPTY;
        self.update_mode(c, now.as_nanos());
        n
    }

    /// Turns an inner class whose last child went away back into a leaf with a fresh pfifo
    /// (htb_parent_to_leaf: full buckets, CAN_SEND).
    fn inner_to_leaf(&mut self, c: u32, now: Time) {
        let ext = self.classes[c as usize].ext;
        self.inners[ext as usize] = None;
        self.free_inners.push(ext);
        let depth = self.classes[c as usize].depth;
        let leaf = self.alloc_leaf(depth);
        let cl = &mut self.classes[c as usize];
        cl.leaf = true;
        cl.ext = leaf;
        cl.link = Link::EMPTY;
        cl.activity = 0;
        cl.tokens = cl.buffer;
        cl.ctokens = cl.cbuffer;
        cl.t_c = now.as_nanos();
        cl.mode = HtbMode::CanSend;
        self.events.remove(c);
    }

    /// Changes a class's parameters (`tc class change`), keeping its queue and its place in the
    /// tree. Tokens are brought up to `now` with the old rates and then capped at the new bursts.
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
        let n = now.as_nanos();
        let is_leaf = self.classes[c as usize].leaf;
        if !is_leaf {
            // The kernel sets quantum and prio of leaves only.
            warnings.clear();
            let old = self.cold[c as usize].params;
            params.quantum = old.quantum;
            params.prio = old.prio;
        }
        let was_active = is_leaf && self.classes[c as usize].activity != 0;
        if was_active {
            self.deactivate(c);
        }
        let cl = &mut self.classes[c as usize];
        let d = n.saturating_sub(cl.t_c) as i128;
        let buffer = params.burst as i128 * UNITS_PER_BYTE;
        let cbuffer = params.cburst as i128 * UNITS_PER_BYTE;
        cl.tokens = (cl.tokens + d * cl.rate as i128).min(cl.buffer).min(buffer);
        cl.ctokens = (cl.ctokens + d * cl.ceil as i128).min(cl.cbuffer).min(cbuffer);
        cl.t_c = n;
        cl.buffer = buffer;
        cl.cbuffer = cbuffer;
        cl.rate = params.rate.bps();
        cl.ceil = params.ceil.bps();
        cl.quantum = params.quantum;
        cl.prio = params.prio;
        cl.wire = cfg.wire;
        self.cold[c as usize].config = cfg;
        self.cold[c as usize].params = params;
        self.update_mode(c, n);
        if was_active || (is_leaf && self.leaf(c).qdisc.qlen() > 0) {
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
        let children = self.classes[c as usize].children;
        if children > 0 {
            return Err(ConfigError::Hierarchy(format!(
                "HTB class in use: {classid} has {children} child class(es); delete them first"
            )));
        }
        // A class without children is a leaf.
        let pkts = self.flush_leaf(c);
        self.events.remove(c);
        let ext = self.classes[c as usize].ext;
        self.leaves[ext as usize] = None;
        self.free_leaves.push(ext);
        let parent = self.classes[c as usize].parent;
        if parent != NONE {
            self.classes[parent as usize].children -= 1;
            if self.classes[parent as usize].children == 0 {
                self.inner_to_leaf(parent, now);
            }
        }
        self.by_id.remove(&classid.0);
        self.cold[c as usize].classid = Handle::UNSPEC;
        self.classes[c as usize].parent = NONE;
        self.free.push(c);
        self.stalled = false;
        Ok(pkts)
    }

    /// Replaces a leaf's qdisc (`tc qdisc add parent 1:10 ...`). The old qdisc's packets are
    /// returned (the kernel purges them too).
    pub fn set_leaf_qdisc(
        &mut self,
        classid: Handle,
        qdisc: Box<dyn Qdisc>,
    ) -> Result<Vec<Packet>, ConfigError> {
        let c = self
            .find(classid)
            .ok_or_else(|| ConfigError::Hierarchy(format!("htb class {classid} does not exist")))?;
        if !self.classes[c as usize].leaf {
            return Err(ConfigError::Hierarchy(format!(
                "htb class {classid} is an inner class; only leaves have a qdisc"
            )));
        }
        let pkts = self.flush_leaf(c);
        let s = qdisc.stats();
        self.stats.qlen += s.qlen;
        self.stats.backlog_bytes += s.backlog_bytes;
        self.leaf_mut(c).qdisc = qdisc;
        if self.leaf(c).qdisc.qlen() > 0 {
            self.activate(c);
        }
        self.stalled = false;
        Ok(pkts)
    }

    /// Gives a leaf a plain `pfifo limit N` (the default leaf qdisc, with another limit). Prefer
    /// this to [`Self::set_leaf_qdisc`] with a boxed pfifo: the scheduler keeps pfifo leaves
    /// inline, without a trait object per packet. The old queue's packets are returned.
    pub fn set_leaf_pfifo(&mut self, classid: Handle, limit: u32) -> Result<Vec<Packet>, ConfigError> {
        self.set_leaf_qdisc(classid, Box::new(Fifo::pfifo(limit.max(1))))
    }

    /// A leaf's qdisc, for its statistics and `tc qdisc show`.
    pub fn leaf_qdisc(&self, classid: Handle) -> Option<&dyn Qdisc> {
        let c = self.find(classid)?;
        self.classes[c as usize].leaf.then(|| self.leaf(c).qdisc.as_ref())
    }

    /// Counters of one class, as `tc -s class show` prints them.
    pub fn class_stats(&self, classid: Handle) -> Option<HtbClassStats> {
        let c = self.find(classid)?;
        let cl = &self.classes[c as usize];
        let cold = &self.cold[c as usize];
        let (qlen, backlog) = if cl.leaf {
            let s = self.leaf(c).qdisc.stats();
            (s.qlen, s.backlog_bytes)
        } else {
            (0, 0)
        };
        Some(HtbClassStats {
            bytes: cold.bytes,
            packets: cold.packets,
            drops: cold.drops,
            overlimits: cold.overlimits,
            backlog,
            qlen,
            lends: cold.lends,
            borrows: cold.borrows,
            giants: 0,
            tokens: ns_to_ticks(units_to_ns(cl.tokens, cl.rate)),
            ctokens: ns_to_ticks(units_to_ns(cl.ctokens, cl.ceil)),
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
        let deepest_inner = self
            .by_id
            .values()
            .filter(|&&c| !self.classes[c as usize].leaf)
            .map(|&c| self.classes[c as usize].depth)
            .max();
        let top = deepest_inner.map_or(7, |d| (d + 1).max(7));
        let mut ids: Vec<u32> = self.by_id.values().copied().collect();
        ids.sort_by_key(|&c| self.cold[c as usize].classid);
        ids.into_iter().map(move |c| {
            let cl = &self.classes[c as usize];
            let cold = &self.cold[c as usize];
            ClassInfo {
                classid: cold.classid,
                parent: if cl.parent == NONE { self.handle } else { self.cold[cl.parent as usize].classid },
                config: cold.config.clone(),
                params: cold.params,
                level: if cl.leaf { 0 } else { top - cl.depth },
                depth: cl.depth,
                is_leaf: cl.leaf,
            }
        })
    }

    /// Classification (htb_classify), see the module docs.
    fn classify(&self, pkt: &Packet) -> Target {
        if pkt.priority == self.handle.0 {
            return Target::Direct;
        }
        if let Some(c) = self.find(Handle(pkt.priority)) {
            if self.classes[c as usize].leaf {
                return Target::Leaf(c);
            }
        }
        if let Some(h) = pkt.class_for(self.handle.major()) {
            if h.minor() == 0 {
                return Target::Direct;
            }
            if let Some(c) = self.find(h) {
                if self.classes[c as usize].leaf {
                    return Target::Leaf(c);
                }
            }
        }
        match self.find(Handle::new(self.handle.major(), self.cfg.default_class)) {
            Some(c) if self.cfg.default_class != 0 && self.classes[c as usize].leaf => Target::Leaf(c),
            _ => Target::Direct,
        }
    }

    /// The classid a packet would be queued in (`None` = the direct queue).
    pub fn classify_packet(&self, pkt: &Packet) -> Option<Handle> {
        match self.classify(pkt) {
            Target::Direct => None,
            Target::Leaf(c) => Some(self.cold[c as usize].classid),
        }
    }

    fn any_row_active(&self) -> bool {
        self.row_mask.iter().any(|&m| m != 0)
    }
}

impl Qdisc for Htb {
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
                let res = self.leaf_mut(c).qdisc.enqueue(pkt, now);
                if let Err(d) = res {
                    self.stats.drops += 1;
                    self.cold[c as usize].drops += 1;
                    self.drain_child_drops(c);
                    return Err(d);
                }
                self.stats.on_enqueue(&pkt);
                self.drain_child_drops(c);
                if self.leaf(c).qdisc.qlen() > 0 {
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
        let ev = self.events.peek().map(|(t, _)| t);
        let child = self.child_wake.peek().map(|Reverse((t, _))| *t);
        let t = match (ev, child) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            // Nothing can unblock the backlog; should not happen. Poll again in a second, as the
            // kernel's watchdog does when its event queues are empty.
            (None, None) => now.as_nanos().saturating_add(1_000_000_000),
        };
        Some(Time::from_nanos(t))
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.front.drain(..).chain(self.direct.drain(..)).collect();
        for c in 0..self.classes.len() as u32 {
            if self.cold[c as usize].classid.is_unspec() {
                continue;
            }
            let cl = &mut self.classes[c as usize];
            cl.activity = 0;
            cl.link = Link::EMPTY;
            cl.mode = HtbMode::CanSend;
            if cl.leaf {
                out.extend(self.leaf_mut(c).qdisc.reset());
            } else {
                let ext = self.classes[c as usize].ext as usize;
                self.inners[ext] = Some(InnerData::new());
            }
        }
        for row in &mut self.rows {
            *row = [List::EMPTY; 8];
        }
        self.row_mask.iter_mut().for_each(|m| *m = 0);
        self.events.clear();
        self.child_wake.clear();
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        self.stalled = false;
        out
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        self.stats.on_enqueue(&pkt);
        self.stats.requeues += 1;
        self.front.push_front(pkt);
        Ok(())
    }
}
