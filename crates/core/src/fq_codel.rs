//! fq_codel, FlowQueue-CoDel (RFC 8290, tc-fq_codel(8)), with CAKE-style host isolation as an
//! option.
//!
//! # Matching the kernel (`net/sched/sch_fq_codel.c`)
//!
//! - Packets are hashed into `flows` buckets with `reciprocal_scale(hash, flows)` (RFC 8290 §4.1.1).
//!   `skb->priority` naming `handle:minor`, or a classification result for this qdisc's handle
//!   major (a filter attached to it), selects bucket `minor - 1` instead; a minor of 0 or above
//!   `flows` drops the packet as the kernel does.
//! - Deficit round robin over two lists (RFC 8290 §4.2): a flow that becomes active joins
//!   `new_flows` with `deficit = quantum`; a flow whose deficit is used up gets `quantum` more and
//!   moves to the tail of `old_flows`; a flow found empty in `new_flows` moves to `old_flows` if
//!   that list is non-empty (so new flows cannot starve old ones), otherwise it leaves the lists.
//! - CoDel (see [`crate::codel`]) runs per flow with shared parameters. As in the kernel, its
//!   "backlog at most one MTU" test looks at the whole qdisc's backlog, not the flow's.
//! - On overflow (`limit` packets or `memory_limit` bytes of estimated buffer memory) the flow
//!   with the largest byte backlog loses packets from its head until half its backlog or
//!   `drop_batch` packets are gone (RFC 8290 §4.1, kernel `fq_codel_drop`), and its CoDel count
//!   rises by the number dropped.
//!
//! # Memory accounting
//!
//! The kernel charges each packet's `skb->truesize`, which Sluice does not have. [`truesize`]
//! estimates it as a kernel allocation would: the frame plus 64 bytes of headroom plus the
//! 320-byte `skb_shared_info`, rounded up to a power-of-two slab (at most 4 KiB; beyond that, to
//! whole pages), plus 256 bytes for the `sk_buff` itself. A 1514-byte frame costs 2304 bytes, so
//! the default 32 MiB holds about 14 500 full-size packets and `limit 10240` binds first, as on a
//! typical Linux host.
//!
//! # Host isolation (a Sluice extension, off by default)
//!
//! [`FlowIsolation`] adds CAKE's modes. `srchost`, `dsthost` and `hosts` hash by host instead of by
//! flow, so each host (pair) is one queue. The `dual-*` modes and `triple-isolate` keep one queue
//! per flow and give hosts fair shares the way CAKE does: when a flow's deficit is refilled, the
//! quantum is divided by the number of bulk flows its host has (for `triple-isolate`, the larger
//! of the source and destination host's counts). A host with three bulk flows thus gets a third of
//! a quantum per flow per round, the same total as a host with one. A flow counts as bulk from its
//! first refill until it leaves the flow lists. Deficits are kept in 1/65536 bytes so that the
//! divided quantum is exact to well under a byte per round; in the default mode the arithmetic is
//! identical to the kernel's integer deficit. Host buckets are `reciprocal_scale(host_hash,
//! flows)`; two hosts in one bucket share a count.

use crate::codel::{CodelParams, CodelQueue, CodelStats, CodelVars, DEFAULT_MTU};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::sched::slab::{QueueEnds, QueueSlab};
use crate::time::{Span, Time};
use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

/// Kernel default packet limit (`10*1024`).
pub const DEFAULT_LIMIT: u32 = 10 * 1024;
/// Kernel default number of flow buckets.
pub const DEFAULT_FLOWS: u32 = 1024;
/// Kernel default quantum: `psched_mtu` of an Ethernet device.
pub const DEFAULT_QUANTUM: u32 = DEFAULT_MTU;
/// Kernel default memory limit: 32 MiB.
pub const DEFAULT_MEMORY_LIMIT: u32 = 32 << 20;
/// Kernel default number of packets dropped at most per overflow.
pub const DEFAULT_DROP_BATCH: u32 = 64;
/// Largest `flows` the kernel accepts.
pub const MAX_FLOWS: u32 = 65536;
/// Smallest quantum: smaller values are raised to it, as the kernel does.
pub const MIN_QUANTUM: u32 = 256;
/// Largest quantum the kernel accepts (`FQ_CODEL_QUANTUM_MAX`).
pub const MAX_QUANTUM: u32 = 1 << 20;
/// Largest memory limit: larger values are lowered to it, as the kernel does.
pub const MAX_MEMORY_LIMIT: u32 = 1 << 31;

/// Deficits are kept in 1/65536 bytes (see the module docs).
const DEFICIT_SHIFT: u32 = 16;

/// How packets are grouped into queues and how hosts share the link (CAKE's flow modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowIsolation {
    /// One queue per flow (5-tuple hash): plain fq_codel.
    #[default]
    Flows,
    /// One queue per source host.
    SrcHost,
    /// One queue per destination host.
    DstHost,
    /// One queue per source/destination host pair.
    Hosts,
    /// Flows, with source hosts sharing fairly first.
    DualSrcHost,
    /// Flows, with destination hosts sharing fairly first.
    DualDstHost,
    /// Flows, with both source and destination hosts sharing fairly.
    TripleIsolate,
}

impl FlowIsolation {
    /// Every mode, in CAKE's order.
    pub const ALL: [FlowIsolation; 7] = [
        FlowIsolation::Flows,
        FlowIsolation::SrcHost,
        FlowIsolation::DstHost,
        FlowIsolation::Hosts,
        FlowIsolation::DualSrcHost,
        FlowIsolation::DualDstHost,
        FlowIsolation::TripleIsolate,
    ];

    /// The keyword as tc-cake(8) spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowIsolation::Flows => "flows",
            FlowIsolation::SrcHost => "srchost",
            FlowIsolation::DstHost => "dsthost",
            FlowIsolation::Hosts => "hosts",
            FlowIsolation::DualSrcHost => "dual-srchost",
            FlowIsolation::DualDstHost => "dual-dsthost",
            FlowIsolation::TripleIsolate => "triple-isolate",
        }
    }

    fn queue_hash(self, pkt: &Packet) -> u32 {
        match self {
            FlowIsolation::SrcHost => pkt.src_host_hash,
            FlowIsolation::DstHost => pkt.dst_host_hash,
            FlowIsolation::Hosts => mix(pkt.src_host_hash, pkt.dst_host_hash),
            _ => pkt.flow_hash,
        }
    }

    /// Whether source hosts get fair shares of the flows' quanta.
    fn scales_by_src(self) -> bool {
        matches!(self, FlowIsolation::DualSrcHost | FlowIsolation::TripleIsolate)
    }

    /// Whether destination hosts get fair shares of the flows' quanta.
    fn scales_by_dst(self) -> bool {
        matches!(self, FlowIsolation::DualDstHost | FlowIsolation::TripleIsolate)
    }
}

impl fmt::Display for FlowIsolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown isolation keyword.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown flow isolation mode \"{0}\": expected flows, srchost, dsthost, hosts, dual-srchost, dual-dsthost or triple-isolate")]
pub struct FlowIsolationError(pub String);

impl FromStr for FlowIsolation {
    type Err = FlowIsolationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FlowIsolation::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| FlowIsolationError(s.to_string()))
    }
}

/// Combines two host hashes into one (for `hosts` mode), order-sensitive.
fn mix(a: u32, b: u32) -> u32 {
    let x = ((a as u64) << 32 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 32) as u32 ^ x as u32
}

/// The kernel's `reciprocal_scale`: maps a 32-bit hash uniformly onto `0..n`.
pub fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}

/// Estimated kernel buffer memory (`skb->truesize`) of a packet; see the module docs.
pub fn truesize(pkt: &Packet) -> u32 {
    const HEADROOM: u32 = 64;
    const SHARED_INFO: u32 = 320;
    const SKB: u32 = 256;
    let data = pkt.len.saturating_add(HEADROOM + SHARED_INFO);
    let alloc = if data <= 4096 { data.next_power_of_two().max(512) } else { data.div_ceil(4096) * 4096 };
    alloc.saturating_add(SKB)
}

/// Configuration of fq_codel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Packet limit of the whole qdisc.
    pub limit: u32,
    /// Number of flow buckets (fixed once created).
    pub flows: u32,
    /// Bytes a flow may send per round.
    pub quantum: u32,
    /// Limit on the estimated buffer memory ([`truesize`]) of all queued packets, bytes.
    pub memory_limit: u32,
    /// Most packets dropped from the fattest flow per overflow.
    pub drop_batch: u32,
    /// CoDel parameters shared by all flows (`ecn` is on by default here).
    pub params: CodelParams,
    /// Flow grouping and host fairness (a Sluice extension).
    pub isolation: FlowIsolation,
}

impl Default for FqCodelConfig {
    /// Kernel defaults: `limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms
    /// memory_limit 32Mb ecn drop_batch 64`.
    fn default() -> Self {
        FqCodelConfig {
            limit: DEFAULT_LIMIT,
            flows: DEFAULT_FLOWS,
            quantum: DEFAULT_QUANTUM,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            drop_batch: DEFAULT_DROP_BATCH,
            params: CodelParams { ecn: true, ..CodelParams::default() },
            isolation: FlowIsolation::Flows,
        }
    }
}

impl FqCodelConfig {
    /// Validates, and clamps the values the kernel clamps silently (quantum to at least 256,
    /// drop_batch to at least 1, memory_limit to at most 2 GiB).
    pub fn normalized(mut self) -> Result<FqCodelConfig, ConfigError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ConfigError::invalid("fq_codel", "flows", self.flows, "must be 1 to 65536"));
        }
        if self.limit == 0 {
            return Err(ConfigError::invalid(
                "fq_codel",
                "limit",
                0,
                "a zero limit drops every packet; give at least 1",
            ));
        }
        if self.quantum > MAX_QUANTUM {
            return Err(ConfigError::invalid("fq_codel", "quantum", self.quantum, "must be at most 1048576"));
        }
        if self.memory_limit == 0 {
            return Err(ConfigError::invalid("fq_codel", "memory_limit", 0, "must be positive"));
        }
        self.params.validate("fq_codel")?;
        self.quantum = self.quantum.max(MIN_QUANTUM);
        self.drop_batch = self.drop_batch.max(1);
        self.memory_limit = self.memory_limit.min(MAX_MEMORY_LIMIT);
        Ok(self)
    }

    /// The CoDel target.
    pub fn target(&self) -> Span {
        self.params.target
    }
    /// The CoDel interval.
    pub fn interval(&self) -> Span {
        self.params.interval
    }
    /// Whether ECN marking is on.
    pub fn ecn(&self) -> bool {
        self.params.ecn
    }
    /// The CE marking threshold, if set.
    pub fn ce_threshold(&self) -> Option<Span> {
        self.params.ce_threshold
    }
}

/// `tc -s qdisc show` extended statistics of fq_codel (`tc_fq_codel_qd_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCodelXstats {
    /// Largest packet seen at dequeue.
    pub maxpacket: u32,
    /// Packets dropped on overflow (limit or memory).
    pub drop_overlimit: u64,
    /// Packets marked CE by the control law.
    pub ecn_mark: u64,
    /// Times a flow became active (joined `new_flows`).
    pub new_flow_count: u64,
    /// Flows in `new_flows` now.
    pub new_flows_len: u32,
    /// Flows in `old_flows` now.
    pub old_flows_len: u32,
    /// Packets marked CE above `ce_threshold`.
    pub ce_mark: u64,
    /// Estimated buffer memory in use, bytes.
    pub memory_usage: u64,
    /// Overflow drops while over the memory limit.
    pub drop_overmemory: u64,
}

/// `tc -s class show` statistics of one flow bucket (`tc_fq_codel_cl_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCodelClassStats {
    /// Remaining deficit, bytes.
    pub deficit: i32,
    /// Sojourn time of the flow's last dequeued packet.
    pub ldelay: Span,
    /// CoDel drop count.
    pub count: u32,
    /// CoDel count at the last entry to the dropping state.
    pub lastcount: u32,
    /// In CoDel's dropping state.
    pub dropping: bool,
    /// Time to the next drop, signed ns (0 unless dropping).
    pub drop_next: i64,
    /// Packets queued.
    pub qlen: u32,
    /// Bytes queued.
    pub backlog: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    New,
    Old,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    pkt: Packet,
    enqueued: Time,
    mem: u32,
}

#[derive(Clone, Debug)]
struct Flow {
    queue: QueueEnds,
    qlen: u32,
    backlog: u64,
    /// In 1/65536 bytes.
    deficit: i64,
    vars: CodelVars,
    list: Option<List>,
    /// Counted in its hosts' bulk-flow counts (isolation modes only).
    bulk: bool,
    src_host: u32,
    dst_host: u32,
}

impl Flow {
    fn new() -> Flow {
        Flow {
            queue: QueueEnds::EMPTY,
            qlen: 0,
            backlog: 0,
            deficit: 0,
            vars: CodelVars::new(),
            list: None,
            bulk: false,
            src_host: 0,
            dst_host: 0,
        }
    }
}

/// The fq_codel qdisc. See the [module docs](self).
#[derive(Debug)]
pub struct FqCodel {
    cfg: FqCodelConfig,
    handle: Handle,
    flows: Vec<Flow>,
    /// Packet arena shared by all flows; each flow is a singly linked list through `next`.
    nodes: QueueSlab<Node>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    src_bulk: Vec<u32>,
    dst_bulk: Vec<u32>,
    /// Packets taken by `peek` or handed back by `requeue`; sent first.
    held: VecDeque<Packet>,
    qlen: u64,
    backlog: u64,
    memory_usage: u64,
    cstats: CodelStats,
    stats: QdiscStats,
    drop_overlimit: u64,
    drop_overmemory: u64,
    new_flow_count: u64,
    dropped: VecDeque<Dropped>,
}

/// One flow's packet list, seen by the control law.
struct FlowQueue<'a> {
    q: &'a mut FqCodel,
    idx: usize,
}

impl CodelQueue for FlowQueue<'_> {
    fn pop_head(&mut self) -> Option<(Packet, Time)> {
        self.q.pop_node(self.idx).map(|(_, n)| (n.pkt, n.enqueued))
    }
    fn backlog(&self) -> u64 {
        self.q.backlog
    }
    fn dropped(&mut self, pkt: Packet) {
        self.q.stats.drops += 1;
        self.q.dropped.push_back(Dropped { pkt, reason: DropReason::Aqm });
    }
}

impl FqCodel {
    /// A validated fq_codel (see [`FqCodelConfig::normalized`]).
    pub fn new(cfg: FqCodelConfig) -> Result<FqCodel, ConfigError> {
        let cfg = cfg.normalized()?;
        let n = cfg.flows as usize;
        let mut q = FqCodel {
            cfg,
            handle: Handle::UNSPEC,
            flows: vec![Flow::new(); n],
            nodes: QueueSlab::default(),
            new_flows: VecDeque::with_capacity(n),
            old_flows: VecDeque::with_capacity(n),
            src_bulk: Vec::new(),
            dst_bulk: Vec::new(),
            held: VecDeque::new(),
            qlen: 0,
            backlog: 0,
            memory_usage: 0,
            cstats: CodelStats::default(),
            stats: QdiscStats::default(),
            drop_overlimit: 0,
            drop_overmemory: 0,
            new_flow_count: 0,
            dropped: VecDeque::with_capacity(cfg.drop_batch.min(DEFAULT_DROP_BATCH) as usize),
        };
        q.reset_host_counts();
        Ok(q)
    }

    /// Sets this qdisc's handle, which enables `skb->priority` and filter results
    /// (`Packet::class_for(major)`) to pick a flow bucket.
    pub fn set_handle(&mut self, handle: Handle) {
        self.handle = handle.qdisc();
    }

    /// This qdisc's handle (`UNSPEC` unless set).
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// The configuration, normalized, for `tc qdisc show`.
    pub fn config(&self) -> &FqCodelConfig {
        &self.cfg
    }

    /// `tc qdisc change`. `flows` cannot change (as in the kernel). While over the new limits,
    /// packets are dequeued (through CoDel) and dropped; they come out of `take_dropped`.
    pub fn change(&mut self, cfg: FqCodelConfig, now: Time) -> Result<(), ConfigError> {
        let cfg = cfg.normalized()?;
        if cfg.flows != self.cfg.flows {
            return Err(ConfigError::invalid(
                "fq_codel",
                "flows",
                cfg.flows,
                format!("the number of flows is fixed at creation ({})", self.cfg.flows),
            ));
        }
        let isolation_changed = cfg.isolation != self.cfg.isolation;
        self.cfg = cfg;
        if isolation_changed {
            self.reset_host_counts();
        }
        loop {
            let over_mem = self.memory_usage > cfg.memory_limit as u64;
            if self.total_qlen() <= cfg.limit as u64 && !over_mem {
                break;
            }
            let Some(pkt) = self.dequeue_inner(now) else { break };
            self.stats.drops += 1;
            let reason = if over_mem { DropReason::MemoryLimit } else { DropReason::QueueFull };
            self.dropped.push_back(Dropped { pkt, reason });
        }
        Ok(())
    }

    /// Extended statistics.
    pub fn xstats(&self) -> FqCodelXstats {
        FqCodelXstats {
            maxpacket: self.cstats.maxpacket,
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.cstats.ecn_mark,
            new_flow_count: self.new_flow_count,
            new_flows_len: self.new_flows.len() as u32,
            old_flows_len: self.old_flows.len() as u32,
            ce_mark: self.cstats.ce_mark,
            memory_usage: self.memory_usage,
            drop_overmemory: self.drop_overmemory,
        }
    }

    /// The class minors (`bucket + 1`) of the flows that are active (in a flow list), as
    /// `tc class show` walks them.
    pub fn active_classes(&self) -> impl Iterator<Item = u32> + '_ {
        self.flows.iter().enumerate().filter(|(_, f)| f.list.is_some()).map(|(i, _)| i as u32 + 1)
    }

    /// Statistics of class `minor` (bucket `minor - 1`), or `None` if out of range.
    pub fn class_stats(&self, minor: u32, now: Time) -> Option<FqCodelClassStats> {
        let f = self.flows.get((minor as usize).checked_sub(1)?)?;
        Some(FqCodelClassStats {
            deficit: (f.deficit >> DEFICIT_SHIFT) as i32,
            ldelay: f.vars.ldelay(),
            count: f.vars.count,
            lastcount: f.vars.lastcount,
            dropping: f.vars.dropping,
            drop_next: f.vars.drop_next_from(now),
            qlen: f.qlen,
            backlog: f.backlog,
        })
    }

    /// The bucket a packet would be queued in, or `None` if classification drops it.
    pub fn bucket_of(&self, pkt: &Packet) -> Option<u32> {
        let n = self.cfg.flows;
        if !self.handle.is_unspec() {
            let major = self.handle.major();
            let prio = Handle::from_tc(pkt.priority);
            if prio.major() == major && prio.minor() > 0 && prio.minor() <= n {
                return Some(prio.minor() - 1);
            }
            if let Some(class) = pkt.class_for(major) {
                let minor = class.minor();
                return (minor > 0 && minor <= n).then(|| minor - 1);
            }
        }
        Some(reciprocal_scale(self.cfg.isolation.queue_hash(pkt), n))
    }

    fn total_qlen(&self) -> u64 {
        self.qlen + self.held.len() as u64
    }

    fn reset_host_counts(&mut self) {
        let n = self.cfg.flows as usize;
        let iso = self.cfg.isolation;
        self.src_bulk = if iso.scales_by_src() { vec![0; n] } else { Vec::new() };
        self.dst_bulk = if iso.scales_by_dst() { vec![0; n] } else { Vec::new() };
        for f in &mut self.flows {
            f.bulk = false;
        }
    }

    /// The credit a flow gets on joining the lists or on a refill: the quantum, divided among its
    /// host's bulk flows in the dual/triple modes.
    fn credit(&self, idx: usize) -> i64 {
        let full = (self.cfg.quantum as i64) << DEFICIT_SHIFT;
        let f = &self.flows[idx];
        let mut load = 1u32;
        if let Some(&c) = self.src_bulk.get(f.src_host as usize) {
            load = load.max(c);
        }
        if let Some(&c) = self.dst_bulk.get(f.dst_host as usize) {
            load = load.max(c);
        }
        full / load as i64
    }

    fn mark_bulk(&mut self, idx: usize) {
        let f = &mut self.flows[idx];
        if f.bulk || (self.src_bulk.is_empty() && self.dst_bulk.is_empty()) {
            return;
        }
        f.bulk = true;
        if let Some(c) = self.src_bulk.get_mut(f.src_host as usize) {
            *c += 1;
        }
        if let Some(c) = self.dst_bulk.get_mut(f.dst_host as usize) {
            *c += 1;
        }
    }

    fn unmark_bulk(&mut self, idx: usize) {
        let f = &mut self.flows[idx];
        if !f.bulk {
            return;
        }
        f.bulk = false;
        if let Some(c) = self.src_bulk.get_mut(f.src_host as usize) {
            *c = c.saturating_sub(1);
        }
        if let Some(c) = self.dst_bulk.get_mut(f.dst_host as usize) {
            *c = c.saturating_sub(1);
        }
    }

    fn push_node(&mut self, idx: usize, pkt: Packet, now: Time, mem: u32) -> u32 {
        let f = &mut self.flows[idx];
        let id = self.nodes.push_back(&mut f.queue, Node { pkt, enqueued: now, mem });
        f.qlen += 1;
        f.backlog += pkt.len as u64;
        self.qlen += 1;
        self.backlog += pkt.len as u64;
        self.memory_usage += mem as u64;
        id
    }

    fn pop_node(&mut self, idx: usize) -> Option<(u32, Node)> {
        let f = &mut self.flows[idx];
        let (id, node) = self.nodes.pop_front(&mut f.queue)?;
        f.qlen -= 1;
        f.backlog -= node.pkt.len as u64;
        self.qlen -= 1;
        self.backlog -= node.pkt.len as u64;
        self.memory_usage -= node.mem as u64;
        Some((id, node))
    }

    /// Drops from the head of the flow with the largest backlog until half of it or `max`
    /// packets are gone (kernel `fq_codel_drop`). Returns how many were dropped and whether
    /// `new_id` (the packet being enqueued) was among them; it is not put in `dropped`.
    fn drop_fattest(&mut self, max: u32, reason: DropReason, new_id: u32) -> (u32, Option<Packet>) {
        let mut fat = None;
        let mut most = 0u64;
        for (i, f) in self.flows.iter().enumerate() {
            if f.qlen > 0 && (fat.is_none() || f.backlog > most) {
                fat = Some(i);
                most = f.backlog;
            }
        }
        let Some(idx) = fat else { return (0, None) };
        let threshold = most / 2;
        let (mut n, mut len, mut new_pkt) = (0u32, 0u64, None);
        while let Some((id, node)) = self.pop_node(idx) {
            n += 1;
            len += node.pkt.len as u64;
            if id == new_id {
                new_pkt = Some(node.pkt);
            } else {
                self.dropped.push_back(Dropped { pkt: node.pkt, reason });
            }
            if n >= max || len >= threshold {
                break;
            }
        }
        // Tell CoDel to increase its signal strength too.
        let vars = &mut self.flows[idx].vars;
        vars.count = vars.count.wrapping_add(n);
        self.stats.drops += n as u64;
        (n, new_pkt)
    }

    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.held.pop_front() {
            return Some(p);
        }
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i as usize),
                (None, Some(&i)) => (false, i as usize),
                (None, None) => return None,
            };
            if self.flows[idx].deficit <= 0 {
                // RFC 8290 §4.2: out of credit: refill and go to the back of the old list.
                self.pop_list_front(from_new);
                self.mark_bulk(idx);
                self.flows[idx].deficit += self.credit(idx);
                self.flows[idx].list = Some(List::Old);
                self.old_flows.push_back(idx as u32);
                continue;
            }
            let mut vars = self.flows[idx].vars;
            let mut cstats = self.cstats;
            let params = self.cfg.params;
            let pkt = vars.dequeue(&mut FlowQueue { q: self, idx }, &params, &mut cstats, now);
            self.flows[idx].vars = vars;
            self.cstats = cstats;
            match pkt {
                Some(p) => {
                    self.flows[idx].deficit -= (p.len as i64) << DEFICIT_SHIFT;
                    return Some(p);
                }
                None => {
                    self.pop_list_front(from_new);
                    if from_new && !self.old_flows.is_empty() {
                        // Force a pass through old_flows so new flows cannot starve them.
                        self.flows[idx].list = Some(List::Old);
                        self.old_flows.push_back(idx as u32);
                    } else {
                        self.flows[idx].list = None;
                        self.unmark_bulk(idx);
                    }
                }
            }
        }
    }

    fn pop_list_front(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

impl Qdisc for FqCodel {
    fn kind(&self) -> &'static str {
        "fq_codel"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        let Some(bucket) = self.bucket_of(&pkt) else {
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        let idx = bucket as usize;
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        let id = self.push_node(idx, pkt, now, truesize(&pkt));
        if self.flows[idx].list.is_none() {
            let n = self.cfg.flows;
            let f = &mut self.flows[idx];
            f.src_host = reciprocal_scale(pkt.src_host_hash, n);
            f.dst_host = reciprocal_scale(pkt.dst_host_hash, n);
            f.list = Some(List::New);
            self.new_flows.push_back(idx as u32);
            self.new_flow_count += 1;
            self.flows[idx].deficit = self.credit(idx);
        }
        let memory_limited = self.memory_usage > self.cfg.memory_limit as u64;
        if self.total_qlen() <= self.cfg.limit as u64 && !memory_limited {
            return Ok(());
        }
        let reason = if memory_limited { DropReason::MemoryLimit } else { DropReason::FattestFlow };
        let (n, own) = self.drop_fattest(self.cfg.drop_batch, reason, id);
        self.drop_overlimit += n as u64;
        if memory_limited {
            self.drop_overmemory += n as u64;
        }
        match own {
            Some(pkt) => Err(Dropped { pkt, reason }),
            None => Ok(()),
        }
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let pkt = self.dequeue_inner(now)?;
        self.stats.on_dequeue(&pkt); // its backlog and qlen are unused: stats() computes them
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        crate::codel::peek_held(self, now, |q| &mut q.held, FqCodel::dequeue_inner)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (self.total_qlen() > 0).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.held.drain(..).collect();
        for idx in 0..self.flows.len() {
            while let Some((_, n)) = self.pop_node(idx) {
                out.push(n.pkt);
            }
            let f = &mut self.flows[idx];
            f.vars = CodelVars::new();
            f.list = None;
            f.deficit = 0;
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.nodes.clear();
        self.reset_host_counts();
        out
    }

    fn stats(&self) -> QdiscStats {
        let held_bytes: u64 = self.held.iter().map(|p| p.len as u64).sum();
        QdiscStats { backlog_bytes: self.backlog + held_bytes, qlen: self.total_qlen(), ..self.stats }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Puts the packet back at the head ([`crate::codel::requeue_held`]).
    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        crate::codel::requeue_held(&mut self.stats, &mut self.held, pkt)
    }
}

#[cfg(test)]
mod tests;
