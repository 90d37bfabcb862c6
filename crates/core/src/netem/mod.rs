//! netem, the network emulator (tc-netem(8), kernel `net/sched/sch_netem.c`).
//!
//! Every packet is given a time to send: `delay` plus a random jitter drawn from a
//! distribution table (or uniform), optionally correlated with the previous draw; with `rate`,
//! the packet also waits for the previous one to leave and for its own serialisation time.
//! Packets wait in a time-ordered queue (the kernel's tfifo) and leave when due, in due-time
//! order (packets due at the same time keep their arrival order). On the way in a packet may be
//! lost (independent with correlation, the 4-state Markov model or Gilbert-Elliott), marked
//! CE instead of lost (`ecn`), duplicated, corrupted, or reordered (sent at once, ahead of the
//! queue). `slot` releases packets in bursts, and a child qdisc (`parent <netem>:1`) receives
//! packets when they are due and decides when they leave.
//!
//! Kernel semantics kept:
//! - times are integer nanoseconds, `tabledist` as the kernel computes it (C integer division,
//!   rounding half away from zero of the fractional part), correlated draws
//!   `(v·(2³²−ρ) + last·ρ) >> 32` with ρ = correlation + 1;
//! - the random draws happen in the kernel's order (duplicate, loss, corrupt, reorder, delay),
//!   each only when its feature is on, so a configuration's sequence depends only on the seed;
//! - `limit` counts every packet the qdisc holds (the time queue, reordered packets, a
//!   child's queue), and a packet over it is dropped after the loss and duplicate decisions;
//! - a loss under `ecn` of an ECN-capable packet marks it and counts a drop, as the kernel
//!   counts it; a reordered packet counts a requeue;
//! - with `rate`, the time to send is `max(last, now + delay) + serialisation`, where `last` is
//!   the latest time to send in the queue (the kernel's "time bonus").
//!
//! Differences: the random source is ChaCha8 seeded from [`NetemConfig::seed`] (the kernel
//! uses its own PRNG and entropy for the correlation's first value), so a run repeats exactly
//! under the same seed; a duplicate goes to the [`Duplicates`] outbox given by
//! [`Netem::set_duplicates`], for the owner of the tree to give it a payload of its own and
//! enqueue it at the root, as the kernel does (`rootq->enqueue`), right after the original
//! rather than just before it; a packet whose payload carries [`DUPLICATE_FLAG`] (a duplicate
//! coming back) is not duplicated again (the kernel turns the duplicating netem's `duplicate`
//! off while its copy goes through the root). Without an outbox a duplicate re-enters this
//! qdisc, as the kernel's does when netem is the root, its payload handle marked with
//! [`DUPLICATE_FLAG`] (the same handle twice: standalone use only). Corruption flips no bit (the core has no bytes): the packet is counted
//! in [`Netem::corrupted`] and its payload marked with [`CORRUPT_FLAG`] for the owner of the
//! bytes to act on; GSO packets are not segmented before corruption.

pub mod dist;

use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};
use dist::{DistTable, DIST_SCALE};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

/// The kernel's default `limit` (packets).
pub const DEFAULT_LIMIT: u32 = 1000;
/// Set in the payload handle of a duplicate (the owner must copy the frame, not move it).
pub const DUPLICATE_FLAG: u64 = 1 << 63;
/// Set in the payload handle of a packet chosen for corruption.
pub const CORRUPT_FLAG: u64 = 1 << 62;
/// Packets the time queue reserves room for up front (it grows to `limit` if needed).
const PREALLOC: usize = 1024;

/// Where the duplicating netems of one tree put their copies (shared by the tree's netems and
/// the owner of its root, which takes them out after each enqueue). A copy carries its original's
/// payload handle: the owner gives it one of its own before enqueueing it at the root.
#[derive(Clone, Debug, Default)]
pub struct Duplicates(Arc<Mutex<VecDeque<Packet>>>);

impl Duplicates {
    /// An empty outbox.
    pub fn new() -> Duplicates {
        Duplicates::default()
    }

    fn push(&self, p: Packet) {
        if let Ok(mut q) = self.0.lock() {
            q.push_back(p);
        }
    }

    /// The oldest copy not yet taken.
    pub fn pop(&self) -> Option<Packet> {
        self.0.lock().ok()?.pop_front()
    }
}

/// A probability scaled to `u32` as the kernel keeps it: 0 never, `u32::MAX` always.
pub type Prob = u32;

/// The loss generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LossModel {
    /// No loss.
    #[default]
    None,
    /// Independent loss with probability `p`, correlated with the previous draw by `corr`.
    Random {
        /// Loss probability.
        p: Prob,
        /// Correlation with the previous draw.
        corr: Prob,
    },
    /// The 4-state Markov model (`loss state p13 p31 p32 p23 p14`).
    FourState {
        /// Good to burst loss.
        p13: Prob,
        /// Burst loss to good.
        p31: Prob,
        /// Burst loss to burst reception.
        p32: Prob,
        /// Burst reception to burst loss.
        p23: Prob,
        /// Good to isolated loss.
        p14: Prob,
    },
    /// Gilbert-Elliott (`loss gemodel p r 1-h 1-k`), with `h` as the kernel keeps it
    /// (`u32::MAX` minus tc's `1-h`).
    GilbertElliott {
        /// Good to bad.
        p: Prob,
        /// Bad to good.
        r: Prob,
        /// Probability of delivery in the bad state.
        h: Prob,
        /// Loss probability in the good state (`1-k`).
        k1: Prob,
    },
}

/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NetemRate {
    /// Bytes per second (never 0 here: no rate is `None`).
    pub bytes_per_sec: u64,
    /// Added to every packet's length.
    pub packet_overhead: i32,
    /// Cell size (0: no cells).
    pub cell_size: u32,
    /// Added to every cell.
    pub cell_overhead: i32,
}

/// `slot`: packets leave in bursts, one burst per slot.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NetemSlot {
    /// Shortest gap between slots (uniform between min and max).
    pub min_delay: Span,
    /// Longest gap between slots.
    pub max_delay: Span,
    /// With a table: mean gap (`slot distribution TABLE DELAY JITTER`).
    pub dist_delay: Span,
    /// With a table: deviation of the gap.
    pub dist_jitter: Span,
    /// The table for `dist_delay`/`dist_jitter`.
    pub dist: Option<DistTable>,
    /// Packets per slot (0: no limit).
    pub max_packets: u32,
    /// Bytes per slot (0: no limit).
    pub max_bytes: u32,
}

/// netem's parameters as the kernel keeps them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetemConfig {
    /// Packets held at most (default 1000).
    pub limit: u32,
    /// Mean added delay.
    pub latency: Span,
    /// Jitter (deviation of the delay; capped at `i32::MAX` ns as the kernel caps it).
    pub jitter: Span,
    /// Correlation of successive delays.
    pub delay_corr: Prob,
    /// Delay table (`None`: uniform in `latency ± jitter`).
    pub delay_dist: Option<DistTable>,
    /// The loss generator.
    pub loss: LossModel,
    /// With a loss: mark ECN-capable packets CE instead of dropping them.
    pub ecn: bool,
    /// Duplication probability.
    pub duplicate: Prob,
    /// Its correlation.
    pub dup_corr: Prob,
    /// Corruption probability.
    pub corrupt: Prob,
    /// Its correlation.
    pub corrupt_corr: Prob,
    /// Reordering probability (with `gap`).
    pub reorder: Prob,
    /// Its correlation.
    pub reorder_corr: Prob,
    /// Reorder at most one packet in `gap` (0: no reordering).
    pub gap: u32,
    /// Serialisation rate.
    pub rate: Option<NetemRate>,
    /// Slotting.
    pub slot: Option<NetemSlot>,
    /// Seed of the random source.
    pub seed: u64,
}

impl Default for NetemConfig {
    fn default() -> Self {
        NetemConfig {
            limit: DEFAULT_LIMIT,
            latency: Span::ZERO,
            jitter: Span::ZERO,
            delay_corr: 0,
            delay_dist: None,
            loss: LossModel::None,
            ecn: false,
            duplicate: 0,
            dup_corr: 0,
            corrupt: 0,
            corrupt_corr: 0,
            reorder: 0,
            reorder_corr: 0,
            gap: 0,
            rate: None,
            slot: None,
            seed: 0,
        }
    }
}

impl NetemConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let bad =
            |param, value: String, reason: &str| Err(ConfigError::invalid("netem", param, value, reason));
        if let Some(r) = &self.rate {
            if r.bytes_per_sec == 0 {
                return bad("rate", "0".into(), "a rate of zero never sends");
            }
        }
        if let Some(s) = &self.slot {
            if s.min_delay > s.max_delay {
                return bad(
                    "slot",
                    format!("{} {}", s.min_delay, s.max_delay),
                    "slot min delay greater than max delay",
                );
            }
        }
        for (name, d) in [
            ("distribution", &self.delay_dist),
            ("slot distribution", &self.slot.as_ref().and_then(|s| s.dist.clone())),
        ] {
            if let Some(t) = d {
                if t.is_empty() || t.len() > dist::DIST_MAX {
                    return bad(name, format!("{} entries", t.len()), "a table holds 1 to 16384 values");
                }
            }
        }
        if self.ecn && self.loss == LossModel::None {
            return bad("ecn", "on".into(), "ecn requested without loss model");
        }
        Ok(())
    }
}

/// A correlated random source (`struct crndstate`).
#[derive(Clone, Copy, Debug, Default)]
struct Crnd {
    last: u32,
    rho: u32,
}

/// A packet waiting in the time queue, ordered by (time to send, arrival).
#[derive(Debug)]
struct Timed {
    at: Time,
    seq: u64,
    pkt: Packet,
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Slot state (`struct slotstate`); `next` is `None` when slotting is off.
#[derive(Debug, Default)]
struct SlotState {
    next: Option<Time>,
    packets_left: i64,
    bytes_left: i64,
}

/// The network emulator.
pub struct Netem {
    cfg: NetemConfig,
    rng: ChaCha8Rng,
    delay_cor: Crnd,
    loss_cor: Crnd,
    dup_cor: Crnd,
    reorder_cor: Crnd,
    corrupt_cor: Crnd,
    /// Markov state of the 4-state and Gilbert-Elliott models (1-based, as the kernel's).
    clg_state: u8,
    counter: u32,
    /// The time-ordered queue (tfifo).
    tfifo: BinaryHeap<Reverse<Timed>>,
    /// Latest time to send in `tfifo` (the rate's reference point).
    tfifo_last: Option<Time>,
    /// Reordered packets, sent before anything else (the kernel's `sch->q`; newest first).
    head: VecDeque<(Time, Packet)>,
    seq: u64,
    slot: SlotState,
    child: Option<Box<dyn Qdisc>>,
    /// A packet taken out by `peek`.
    peeked: Option<Packet>,
    stats: QdiscStats,
    /// Drops counted by children that were replaced.
    child_drops_gone: u64,
    corrupted: u64,
    dropped: VecDeque<Dropped>,
    /// Where duplicates go (None: back into this qdisc).
    outbox: Option<Duplicates>,
}

impl std::fmt::Debug for Netem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netem")
            .field("cfg", &self.cfg)
            .field("qlen", &self.stats.qlen)
            .finish_non_exhaustive()
    }
}

impl Netem {
    /// Builds a netem qdisc.
    pub fn new(cfg: NetemConfig) -> Result<Netem, ConfigError> {
        cfg.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut crnd = |rho| Crnd { last: rng.next_u32(), rho };
        let (delay_cor, loss_cor, dup_cor, reorder_cor, corrupt_cor) = (
            crnd(cfg.delay_corr),
            crnd(match cfg.loss {
                LossModel::Random { corr, .. } => corr,
                _ => 0,
            }),
            crnd(cfg.dup_corr),
            crnd(cfg.reorder_corr),
            crnd(cfg.corrupt_corr),
        );
        let mut q = Netem {
            rng,
            delay_cor,
            loss_cor,
            dup_cor,
            reorder_cor,
            corrupt_cor,
            clg_state: 1,
            counter: 0,
            tfifo: BinaryHeap::with_capacity((cfg.limit as usize).min(PREALLOC)),
            tfifo_last: None,
            head: VecDeque::new(),
            seq: 0,
            slot: SlotState::default(),
            child: None,
            peeked: None,
            stats: QdiscStats::default(),
            child_drops_gone: 0,
            corrupted: 0,
            dropped: VecDeque::new(),
            outbox: None,
            cfg,
        };
        q.init_slot(Time::ZERO);
        Ok(q)
    }

    fn init_slot(&mut self, now: Time) {
        self.slot = SlotState::default();
        if let Some(s) = &self.cfg.slot {
            self.slot.packets_left = if s.max_packets == 0 { i32::MAX as i64 } else { s.max_packets as i64 };
            self.slot.bytes_left = if s.max_bytes == 0 { i32::MAX as i64 } else { s.max_bytes as i64 };
            if s.min_delay != Span::ZERO || s.max_delay != Span::ZERO || s.dist_jitter != Span::ZERO {
                self.slot.next = Some(now);
            }
        }
    }

    /// `tc qdisc change`: new parameters, queued packets kept (the kernel resets the reorder
    /// counter, the loss model's state, and the correlations and slot when given).
    pub fn change(&mut self, cfg: NetemConfig, now: Time) -> Result<(), ConfigError> {
        cfg.validate()?;
        let old = std::mem::replace(&mut self.cfg, cfg);
        self.counter = 0;
        if self.cfg.loss != old.loss {
            self.clg_state = 1;
        }
        let re = |c: &mut Crnd, rho: Prob, old_rho: Prob, rng: &mut ChaCha8Rng| {
            if rho != old_rho {
                *c = Crnd { last: rng.next_u32(), rho };
            }
        };
        let loss_rho = |l: &LossModel| match l {
            LossModel::Random { corr, .. } => *corr,
            _ => 0,
        };
        re(&mut self.delay_cor, self.cfg.delay_corr, old.delay_corr, &mut self.rng);
        re(&mut self.loss_cor, loss_rho(&self.cfg.loss), loss_rho(&old.loss), &mut self.rng);
        re(&mut self.dup_cor, self.cfg.dup_corr, old.dup_corr, &mut self.rng);
        re(&mut self.reorder_cor, self.cfg.reorder_corr, old.reorder_corr, &mut self.rng);
        re(&mut self.corrupt_cor, self.cfg.corrupt_corr, old.corrupt_corr, &mut self.rng);
        if self.cfg.slot != old.slot {
            self.init_slot(now);
        }
        Ok(())
    }

    /// Puts a child qdisc under netem (`tc qdisc add ... parent <netem>:1`); returns the old one.
    pub fn set_child(&mut self, child: Box<dyn Qdisc>) -> Option<Box<dyn Qdisc>> {
        let old = self.child.replace(child);
        if let Some(o) = &old {
            self.child_drops_gone += o.stats().drops;
        }
        old
    }

    /// Sends duplicates to `out` (see the module docs) instead of back into this qdisc.
    pub fn set_duplicates(&mut self, out: Duplicates) {
        self.outbox = Some(out);
    }

    /// The child qdisc, if any.
    pub fn child(&self) -> Option<&dyn Qdisc> {
        self.child.as_deref()
    }

    /// The configuration.
    pub fn config(&self) -> &NetemConfig {
        &self.cfg
    }

    /// Packets chosen for corruption so far.
    pub fn corrupted(&self) -> u64 {
        self.corrupted
    }

    fn next_u32(&mut self) -> u32 {
        self.rng.next_u32()
    }

    /// `get_crandom`.
    fn crandom(rng: &mut ChaCha8Rng, st: &mut Crnd) -> u32 {
        let value = rng.next_u32() as u64;
        if st.rho == 0 {
            return value as u32;
        }
        let rho = st.rho as u64 + 1;
        let answer = ((value * ((1u64 << 32) - rho) + st.last as u64 * rho) >> 32) as u32;
        st.last = answer;
        answer
    }

    /// `tabledist(mu, sigma)`: a delay in ns (may be negative).
    fn tabledist(
        rng: &mut ChaCha8Rng,
        mu: i64,
        sigma: i64,
        st: Option<&mut Crnd>,
        table: Option<&DistTable>,
    ) -> i64 {
        if sigma == 0 {
            return mu;
        }
        let rnd = match st {
            Some(s) => Netem::crandom(rng, s),
            None => rng.next_u32(),
        };
        let Some(t) = table else {
            return (rnd as u64 % (2 * sigma as u64)) as i64 + mu - sigma;
        };
        let t = t[rnd as usize % t.len()] as i64;
        let mut x = (sigma % DIST_SCALE) * t;
        if x >= 0 {
            x += DIST_SCALE / 2;
        } else {
            x -= DIST_SCALE / 2;
        }
        x / DIST_SCALE + (sigma / DIST_SCALE) * t + mu
    }

    /// `loss_event`.
    fn loss_event(&mut self) -> bool {
        match self.cfg.loss {
            LossModel::None => false,
            LossModel::Random { p, .. } => p != 0 && p >= Netem::crandom(&mut self.rng, &mut self.loss_cor),
            LossModel::FourState { p13, p31, p32, p23, p14 } => {
                let rnd = self.next_u32();
                match self.clg_state {
                    1 => {
                        if rnd < p14 {
                            self.clg_state = 4;
                            true
                        } else if rnd < p13.wrapping_add(p14) {
                            self.clg_state = 3;
                            true
                        } else {
                            false
                        }
                    }
                    2 => {
                        if rnd < p23 {
                            self.clg_state = 3;
                            true
                        } else {
                            false
                        }
                    }
                    3 => {
                        if rnd < p32 {
                            self.clg_state = 2;
                            false
                        } else if rnd < p31.wrapping_add(p32) {
                            self.clg_state = 1;
                            false
                        } else {
                            true
                        }
                    }
                    _ => {
                        self.clg_state = 1;
                        false
                    }
                }
            }
            LossModel::GilbertElliott { p, r, h, k1 } => {
                if self.clg_state == 1 {
                    if self.next_u32() < p {
                        self.clg_state = 2;
                    }
                    self.next_u32() < k1
                } else {
                    if self.next_u32() < r {
                        self.clg_state = 1;
                    }
                    self.next_u32() > h
                }
            }
        }
    }

    /// Serialisation time of `len` bytes at the configured rate (`packet_time_ns`).
    fn packet_time(r: &NetemRate, len: u32) -> u64 {
        let mut l = (len as i64 + r.packet_overhead as i64).max(0) as u64;
        if r.cell_size != 0 {
            let cells = l.div_ceil(r.cell_size as u64);
            l = (cells as i64 * (r.cell_size as i64 + r.cell_overhead as i64)).max(0) as u64;
        }
        (l as u128 * 1_000_000_000 / r.bytes_per_sec as u128).min(u64::MAX as u128) as u64
    }

    fn qlen_total(&self) -> u64 {
        self.stats.qlen
    }

    fn enqueue_one(&mut self, mut pkt: Packet, now: Time, may_duplicate: bool) -> Result<(), Dropped> {
        let mut count = 1;
        if may_duplicate
            && self.cfg.duplicate != 0
            && pkt.payload & DUPLICATE_FLAG == 0
            && self.cfg.duplicate >= Netem::crandom(&mut self.rng, &mut self.dup_cor)
        {
            count += 1;
        }
        if self.loss_event() {
            if self.cfg.ecn && pkt.set_ce() {
                self.stats.drops += 1; // the kernel counts a mark as a drop
            } else {
                count -= 1;
            }
        }
        if count == 0 {
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Aqm });
        }
        let dup = (count > 1).then_some(pkt);
        if self.cfg.corrupt != 0 && self.cfg.corrupt >= Netem::crandom(&mut self.rng, &mut self.corrupt_cor) {
            self.corrupted += 1;
            pkt.payload |= CORRUPT_FLAG;
        }
        if self.qlen_total() >= self.cfg.limit as u64 {
            self.stats.drops += 1;
            match dup {
                // The kernel frees the clone without counting it; an outbox's copy has no
                // payload of its own yet, so there is nothing to hand back.
                Some(mut d) if self.outbox.is_none() => {
                    d.payload |= DUPLICATE_FLAG;
                    self.dropped.push_back(Dropped { pkt: d, reason: DropReason::QueueFull });
                }
                _ => {}
            }
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        if let (Some(d), Some(out)) = (dup, &self.outbox) {
            out.push(d);
        } else if let Some(mut d) = dup {
            d.payload |= DUPLICATE_FLAG;
            if let Err(e) = self.enqueue_one(d, now, false) {
                self.dropped.push_back(e);
            }
        }
        self.stats.on_enqueue(&pkt);
        let cfg = &self.cfg;
        let normal = cfg.gap == 0
            || self.counter < cfg.gap - 1
            || cfg.reorder < Netem::crandom(&mut self.rng, &mut self.reorder_cor);
        if normal {
            let jitter = cfg.jitter.as_nanos().min(i32::MAX as u64) as i64;
            let latency = cfg.latency.as_nanos().min(i64::MAX as u64) as i64;
            let mut delay = Netem::tabledist(
                &mut self.rng,
                latency,
                jitter,
                Some(&mut self.delay_cor),
                cfg.delay_dist.as_ref(),
            );
            let mut at = now.as_nanos() as i128;
            if let Some(r) = &cfg.rate {
                let last = match (self.tfifo_last, self.head.back()) {
                    (Some(a), Some((b, _))) => Some(a.max(*b)),
                    (a, b) => a.or(b.map(|x| x.0)),
                };
                if let Some(last) = last {
                    let last = last.as_nanos() as i128;
                    delay = (delay as i128 - (last - at)).max(0) as i64;
                    at = last;
                }
                delay = delay.saturating_add(Netem::packet_time(r, pkt.len) as i64);
            }
            let t = Time::from_nanos((at + delay as i128).clamp(0, u64::MAX as i128) as u64);
            self.counter = self.counter.wrapping_add(1);
            self.tfifo_last = Some(self.tfifo_last.map_or(t, |l| l.max(t)));
            self.seq += 1;
            self.tfifo.push(Reverse(Timed { at: t, seq: self.seq, pkt }));
        } else {
            self.counter = 0;
            self.head.push_front((now, pkt));
            self.stats.requeues += 1;
        }
        Ok(())
    }

    /// `get_slot_next`.
    fn slot_next(&mut self, now: Time) {
        let Some(s) = &self.cfg.slot else { return };
        let delay = match &s.dist {
            None => {
                let span = s.max_delay.as_nanos() - s.min_delay.as_nanos();
                s.min_delay.as_nanos() as i64 + ((span as u128 * self.rng.next_u32() as u128) >> 32) as i64
            }
            Some(t) => Netem::tabledist(
                &mut self.rng,
                s.dist_delay.as_nanos().min(i64::MAX as u64) as i64,
                s.dist_jitter.as_nanos().min(i32::MAX as u64) as i64,
                None,
                Some(t),
            ),
        };
        self.slot.next = Some(Time::from_nanos(
            (now.as_nanos() as i128 + delay as i128).clamp(0, u64::MAX as i128) as u64,
        ));
        self.slot.packets_left = if s.max_packets == 0 { i32::MAX as i64 } else { s.max_packets as i64 };
        self.slot.bytes_left = if s.max_bytes == 0 { i32::MAX as i64 } else { s.max_bytes as i64 };
    }

    fn tfifo_pop(&mut self) -> Option<Packet> {
        let Reverse(t) = self.tfifo.pop()?;
        if self.tfifo.is_empty() {
            self.tfifo_last = None;
        }
        Some(t.pkt)
    }

    /// `netem_dequeue` without the byte counters (those are kept by [`Qdisc::dequeue`]).
    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        loop {
            if let Some((_, p)) = self.head.pop_front() {
                return Some(p);
            }
            let Some(Reverse(first)) = self.tfifo.peek() else { break };
            let at = first.at;
            if let Some(sn) = self.slot.next {
                if sn < at {
                    self.slot_next(now);
                }
            }
            let slot_ok = self.slot.next.is_none_or(|s| s <= now);
            if at <= now && slot_ok {
                let pkt = self.tfifo_pop().expect("peeked");
                if self.slot.next.is_some() {
                    self.slot.packets_left -= 1;
                    self.slot.bytes_left -= pkt.len as i64;
                    if self.slot.packets_left <= 0 || self.slot.bytes_left <= 0 {
                        self.slot_next(now);
                    }
                }
                if let Some(c) = self.child.as_mut() {
                    if let Err(d) = c.enqueue(pkt, now) {
                        // The child counted the drop; the packet leaves this qdisc.
                        self.stats.qlen = self.stats.qlen.saturating_sub(1);
                        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                        self.dropped.push_back(d);
                    }
                    while let Some(d) = c.take_dropped() {
                        self.stats.qlen = self.stats.qlen.saturating_sub(1);
                        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                        self.dropped.push_back(d);
                    }
                    continue;
                }
                return Some(pkt);
            }
            break;
        }
        let c = self.child.as_mut()?;
        let p = c.dequeue(now);
        while let Some(d) = c.take_dropped() {
            self.stats.qlen = self.stats.qlen.saturating_sub(1);
            self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
            self.dropped.push_back(d);
        }
        p
    }
}

impl Qdisc for Netem {
    fn kind(&self) -> &'static str {
        "netem"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.enqueue_one(pkt, now, true)
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let p = self.peeked.take().or_else(|| self.dequeue_inner(now))?;
        self.stats.on_dequeue(&p);
        Some(p)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.peeked.is_none() {
            self.peeked = self.dequeue_inner(now);
        }
        self.peeked.as_ref()
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        if self.peeked.is_some() || !self.head.is_empty() {
            return Some(now);
        }
        let own = self.tfifo.peek().map(|Reverse(t)| match self.slot.next {
            Some(s) => t.at.max(s),
            None => t.at,
        });
        let child = self.child.as_ref().and_then(|c| c.next_event(now));
        match (own, child) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.peeked.take().into_iter().collect();
        out.extend(self.head.drain(..).map(|(_, p)| p));
        out.extend(std::mem::take(&mut self.tfifo).into_iter().map(|Reverse(t)| t.pkt));
        self.tfifo = BinaryHeap::with_capacity((self.cfg.limit as usize).min(PREALLOC));
        self.tfifo_last = None;
        if let Some(c) = self.child.as_mut() {
            out.extend(c.reset());
        }
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        if let Some(c) = &self.child {
            s.drops += c.stats().drops;
        }
        s.drops += self.child_drops_gone;
        s
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Class `major:1` while a child is grafted (`netem_dump_class`); the kernel dumps no
    /// counters for it.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        if let Some(c) = self.child.as_deref() {
            f(ClassView { minor: 1, stats: None, child: Some(c) });
        }
    }
}

#[cfg(test)]
mod tests;
