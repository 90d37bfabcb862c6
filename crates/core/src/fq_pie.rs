//! fq_pie, Flow Queue PIE (tc-fq_pie(8)): fq_codel's flow queueing with a PIE controller
//! ([`crate::pie`]) per flow.
//!
//! # Matching the kernel (`net/sched/sch_fq_pie.c`)
//!
//! - Packets are hashed into `flows` buckets with `reciprocal_scale(hash, flows)` as fq_codel
//!   does; `skb->priority` naming `handle:minor` (1..=flows), or a classification result for
//!   this qdisc's major, picks bucket `minor - 1`; a result of minor 0 drops the packet.
//! - Deficit round robin over `new_flows` and `old_flows` exactly as fq_codel (a flow out of
//!   credit gets `quantum` more and goes to the tail of `old_flows`; an empty flow found in
//!   `new_flows` passes through `old_flows` once).
//! - Drops happen at enqueue only: at the packet `limit` (`overlimit`), or by the flow's PIE
//!   (early drop against the flow's own backlog; ECN-capable packets are marked instead while
//!   the flow's probability is at most `ecn_prob` percent, when `ecn` is on).
//! - `memory_limit` is counted, not enforced: a packet arriving above it counts in
//!   `overmemory` and is queued all the same, as in the kernel. Memory is the estimated
//!   `truesize` of [`crate::fq_codel::truesize`].
//! - Every `tupdate`, each flow's PIE updates its probability with the flow's backlog. The
//!   kernel walks at most 2048 flows per timer tick (more flows take more jiffies per round);
//!   here each round updates every flow at once. Flows whose controller is at a fixed point are
//!   not walked (an update would not change them), which is the same result.

use crate::fq_codel::{reciprocal_scale, truesize};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::pie::{run_updates, splitmix, PieParams, PieTimer, PieVars, MAX_PROB};
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::sched::slab::{QueueEnds, QueueSlab};
use crate::time::Time;
use std::collections::VecDeque;

/// Kernel default packet limit.
pub const DEFAULT_LIMIT: u32 = 10 * 1024;
/// Kernel default number of flows.
pub const DEFAULT_FLOWS: u32 = 1024;
/// Kernel default memory limit: 32 MiB.
pub const DEFAULT_MEMORY_LIMIT: u32 = 32 << 20;
/// Kernel default ECN threshold, percent.
pub const DEFAULT_ECN_PROB: u32 = 10;
/// Largest `flows`.
pub const MAX_FLOWS: u32 = 65536;
/// Largest quantum (the netlink policy's range is 1..=2^20).
pub const MAX_QUANTUM: u32 = 1 << 20;

/// Configuration of fq_pie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqPieConfig {
    /// PIE's parameters, shared by the flows (`limit` is the whole qdisc's).
    pub params: PieParams,
    /// Flow buckets (fixed once created).
    pub flows: u32,
    /// Bytes a flow may send per round.
    pub quantum: u32,
    /// Memory counted against `overmemory`, bytes.
    pub memory_limit: u32,
    /// Mark instead of drop up to this probability, percent.
    pub ecn_prob: u32,
    /// The device's `psched_mtu`.
    pub mtu: u32,
    /// Seed of the random drop decisions.
    pub seed: u64,
}

impl Default for FqPieConfig {
    /// `fq_pie_init`'s defaults.
    fn default() -> Self {
        FqPieConfig {
            params: PieParams { limit: DEFAULT_LIMIT, ..PieParams::default() },
            flows: DEFAULT_FLOWS,
            quantum: crate::codel::DEFAULT_MTU,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            ecn_prob: DEFAULT_ECN_PROB,
            mtu: crate::codel::DEFAULT_MTU,
            seed: 0x5eed_f0e1,
        }
    }
}

impl FqPieConfig {
    /// The kernel's checks: flows in 1..=65536, quantum in 1..=2^20.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.flows == 0 || self.flows > MAX_FLOWS {
            return Err(ConfigError::invalid("fq_pie", "flows", self.flows, "must be 1 to 65536"));
        }
        if self.quantum == 0 || self.quantum > MAX_QUANTUM {
            return Err(ConfigError::invalid("fq_pie", "quantum", self.quantum, "must be 1 to 1048576"));
        }
        if self.mtu == 0 {
            return Err(ConfigError::invalid("fq_pie", "mtu", 0, "must be positive"));
        }
        Ok(())
    }
}

/// `tc -s qdisc show` statistics of fq_pie (`struct tc_fq_pie_xstats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqPieXstats {
    /// Packets enqueued.
    pub packets_in: u32,
    /// Packets dropped (early or at the limit).
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Packets that arrived above the memory limit.
    pub overmemory: u32,
    /// Packets marked CE.
    pub ecn_mark: u32,
    /// Times a flow became active.
    pub new_flow_count: u32,
    /// Flows in `new_flows`.
    pub new_flows_len: u32,
    /// Flows in `old_flows`.
    pub old_flows_len: u32,
    /// Estimated memory in use, bytes.
    pub memory_usage: u32,
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
    vars: PieVars,
    deficit: i64,
    backlog: u64,
    qlen: u32,
    listed: bool,
    /// In `dirty`: its controller may change at the next update.
    dirty: bool,
}

/// The fq_pie qdisc. See the [module docs](self).
#[derive(Debug)]
pub struct FqPie {
    cfg: FqPieConfig,
    handle: Handle,
    flows: Vec<Flow>,
    nodes: QueueSlab<Node>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    dirty: Vec<u32>,
    timer: PieTimer,
    rng: u64,
    held: VecDeque<Packet>,
    qlen: u64,
    backlog: u64,
    memory_usage: u32,
    x: FqPieXstats,
    stats: QdiscStats,
    dropped: VecDeque<Dropped>,
}

impl FqPie {
    /// A validated fq_pie.
    pub fn new(cfg: FqPieConfig) -> Result<FqPie, ConfigError> {
        cfg.validate()?;
        let n = cfg.flows as usize;
        let flow = Flow {
            queue: QueueEnds::EMPTY,
            vars: PieVars::new(),
            deficit: 0,
            backlog: 0,
            qlen: 0,
            listed: false,
            dirty: false,
        };
        Ok(FqPie {
            cfg,
            handle: Handle::UNSPEC,
            flows: vec![flow; n],
            nodes: QueueSlab::default(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            dirty: Vec::new(),
            timer: PieTimer::default(),
            rng: cfg.seed,
            held: VecDeque::new(),
            qlen: 0,
            backlog: 0,
            memory_usage: 0,
            x: FqPieXstats::default(),
            stats: QdiscStats::default(),
            dropped: VecDeque::new(),
        })
    }

    /// Sets this qdisc's handle (`skb->priority` and filter results then pick flows).
    pub fn set_handle(&mut self, handle: Handle) {
        self.handle = handle.qdisc();
    }

    /// The configuration.
    pub fn config(&self) -> &FqPieConfig {
        &self.cfg
    }

    /// The PIE state of bucket `idx`.
    pub fn flow_vars(&self, idx: u32) -> Option<&PieVars> {
        self.flows.get(idx as usize).map(|f| &f.vars)
    }

    /// `tc qdisc change`: `flows` cannot change; while over a lower limit, packets are
    /// dequeued and dropped, as the kernel does.
    pub fn change(&mut self, cfg: FqPieConfig, now: Time) -> Result<(), ConfigError> {
        cfg.validate()?;
        if cfg.flows != self.cfg.flows {
            return Err(ConfigError::invalid(
                "fq_pie",
                "flows",
                cfg.flows,
                format!("the number of flows is fixed at creation ({})", self.cfg.flows),
            ));
        }
        self.cfg = cfg;
        self.mark_all_dirty();
        while self.total_qlen() > cfg.params.limit as u64 {
            let Some(pkt) = self.dequeue_inner(now) else { break };
            self.stats.drops += 1;
            self.dropped.push_back(Dropped { pkt, reason: DropReason::QueueFull });
        }
        Ok(())
    }

    /// Extended statistics (`fq_pie_dump_stats`).
    pub fn xstats(&self) -> FqPieXstats {
        FqPieXstats {
            new_flows_len: self.new_flows.len() as u32,
            old_flows_len: self.old_flows.len() as u32,
            memory_usage: self.memory_usage,
            ..self.x
        }
    }

    /// The bucket of a packet (`fq_pie_classify`), or `None` when classification drops it.
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
        Some(reciprocal_scale(pkt.flow_hash, n))
    }

    fn total_qlen(&self) -> u64 {
        self.qlen + self.held.len() as u64
    }

    fn mark_dirty(&mut self, idx: usize) {
        if !self.flows[idx].dirty {
            self.flows[idx].dirty = true;
            self.dirty.push(idx as u32);
        }
    }

    fn mark_all_dirty(&mut self) {
        for i in 0..self.flows.len() {
            self.mark_dirty(i);
        }
    }

    fn run_timer(&mut self, now: Time) {
        let p = self.cfg.params;
        let n = self.timer.due(now, p.tupdate_span());
        if n == 0 {
            return;
        }
        let flows = &mut self.flows;
        self.dirty.retain(|&i| {
            let f = &mut flows[i as usize];
            let settled = run_updates(&mut f.vars, &p, f.backlog, n);
            f.dirty = !settled;
            !settled
        });
    }

    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.held.pop_front() {
            return Some(p);
        }
        self.run_timer(now);
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i as usize),
                (None, Some(&i)) => (false, i as usize),
                (None, None) => return None,
            };
            if self.flows[idx].deficit <= 0 {
                self.pop_front(from_new);
                self.flows[idx].deficit += self.cfg.quantum as i64;
                self.old_flows.push_back(idx as u32);
                continue;
            }
            let f = &mut self.flows[idx];
            let Some((_, node)) = self.nodes.pop_front(&mut f.queue) else {
                self.pop_front(from_new);
                if from_new && !self.old_flows.is_empty() {
                    self.old_flows.push_back(idx as u32);
                } else {
                    self.flows[idx].listed = false;
                }
                continue;
            };
            let len = node.pkt.len;
            f.qlen -= 1;
            f.deficit -= len as i64;
            f.backlog -= len as u64;
            self.qlen -= 1;
            self.backlog -= len as u64;
            self.memory_usage = self.memory_usage.wrapping_sub(node.mem);
            let p = self.cfg.params;
            let f = &mut self.flows[idx];
            f.vars.on_dequeue(&p, len, node.enqueued, f.backlog, now);
            self.mark_dirty(idx);
            return Some(node.pkt);
        }
    }

    fn pop_front(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }
}

impl Qdisc for FqPie {
    fn kind(&self) -> &'static str {
        "fq_pie"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.run_timer(now);
        let Some(bucket) = self.bucket_of(&pkt) else {
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        let idx = bucket as usize;
        let mem = truesize(&pkt);
        let memory_limited = self.memory_usage > self.cfg.memory_limit.wrapping_add(mem);
        let p = self.cfg.params;
        let reason;
        if self.total_qlen() >= p.limit as u64 {
            self.x.overlimit = self.x.overlimit.wrapping_add(1);
            reason = DropReason::QueueFull;
        } else {
            if memory_limited {
                self.x.overmemory = self.x.overmemory.wrapping_add(1);
            }
            let rng = &mut self.rng;
            let f = &mut self.flows[idx];
            let drop = f.vars.drop_early(&p, f.backlog, pkt.len, self.cfg.mtu, &mut || splitmix(rng));
            let mut take = !drop;
            if drop && p.ecn && f.vars.prob <= (MAX_PROB / 100) * self.cfg.ecn_prob as u64 && pkt.set_ce() {
                self.x.ecn_mark = self.x.ecn_mark.wrapping_add(1);
                take = true;
            }
            if take {
                if pkt.enqueue_time == Time::ZERO {
                    pkt.enqueue_time = now;
                }
                self.x.packets_in = self.x.packets_in.wrapping_add(1);
                self.memory_usage = self.memory_usage.wrapping_add(mem);
                self.qlen += 1;
                self.backlog += pkt.len as u64;
                let f = &mut self.flows[idx];
                self.nodes.push_back(&mut f.queue, Node { pkt, enqueued: now, mem });
                if !f.listed {
                    f.listed = true;
                    f.deficit = self.cfg.quantum as i64;
                    self.new_flows.push_back(idx as u32);
                    self.x.new_flow_count = self.x.new_flow_count.wrapping_add(1);
                }
                f.qlen += 1;
                f.backlog += pkt.len as u64;
                self.mark_dirty(idx);
                return Ok(());
            }
            reason = DropReason::Aqm;
        }
        self.x.dropped = self.x.dropped.wrapping_add(1);
        self.flows[idx].vars.accu_prob = 0;
        self.mark_dirty(idx);
        self.stats.drops += 1;
        Err(Dropped { pkt, reason })
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let pkt = self.dequeue_inner(now)?;
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        crate::codel::peek_held(self, now, |q| &mut q.held, FqPie::dequeue_inner)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (self.total_qlen() > 0).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.held.drain(..).collect();
        for f in &mut self.flows {
            while let Some((_, n)) = self.nodes.pop_front(&mut f.queue) {
                out.push(n.pkt);
            }
            f.qlen = 0;
            f.backlog = 0;
            f.listed = false;
            f.vars.restart();
        }
        self.nodes.clear();
        self.new_flows.clear();
        self.old_flows.clear();
        self.qlen = 0;
        self.backlog = 0;
        self.memory_usage = 0;
        self.mark_all_dirty();
        out
    }

    fn stats(&self) -> QdiscStats {
        let held: u64 = self.held.iter().map(|p| p.len as u64).sum();
        QdiscStats { backlog_bytes: self.backlog + held, qlen: self.total_qlen(), ..self.stats }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        crate::codel::requeue_held(&mut self.stats, &mut self.held, pkt)
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests;
