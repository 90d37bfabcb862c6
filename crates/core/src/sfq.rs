//! SFQ, stochastic fairness queueing (tc-sfq(8), kernel `net/sched/sch_sfq.c`).
//!
//! Flows are hashed into `divisor` buckets; each busy bucket owns one of `flows` slots (a FIFO
//! of at most `depth` packets), and busy slots are served round-robin with a deficit of
//! `quantum` bytes (kept, like the kernel, in units of 8 bytes). A new slot joins at the end of
//! the round. Above `limit` packets the tail (or with `headdrop` the head) of the longest slot
//! is dropped.
//!
//! # Perturbation, and what goes wrong in Linux (seed 003)
//!
//! Every `perturb` seconds the hash key changes so that flows that collide stop colliding.
//! Linux has done this two ways, both kept here as legacy options:
//!
//! - [`PerturbMode::KeyOnly`] — Linux before 3.9, the kernel of the seed: only the key changes.
//!   A backlogged flow's next packet hashes to a new bucket and gets a *second* slot at the end
//!   of the round while its old slot still holds its backlog. For as long as that backlog takes
//!   to drain (one quantum per round) every backlogged flow owns two slots, so a sparse flow
//!   waits twice as many quanta per round (the latency spike), and the flow's new packets are
//!   sent interleaved with its older ones (reordering). Worse, the old slot stays in the hash
//!   table under its old bucket, so another flow whose *new* hash lands there joins it.
//! - [`PerturbMode::Rehash`] — Linux 3.9 and later (`sfq_rehash`): every queued packet is pulled
//!   out and re-enqueued under the new key. Flow order is kept, but the round-robin state is
//!   thrown away: slots are rebuilt in old-slot-index order (not round order), every deficit is
//!   reset to one quantum, and flows that now collide are merged, with packets beyond `depth`
//!   (or beyond the free slots) dropped — silently in Linux, counted here. A sparse flow whose
//!   packet was next in the round can find itself behind a full quantum of every bulk flow.
//!
//! [`PerturbMode::Sticky`], the Sluice default, changes the key for *new* flows only: a flow
//! with packets still queued keeps its slot (and its place in the round and its deficit) until
//! it has drained, then its next packet is hashed under the new key. Nothing is reordered,
//! nothing is dropped, no flow gets two slots, and a long-lived collision is broken up as soon
//! as one of the colliding flows goes idle. The price is one map lookup per packet while a
//! flow from an earlier key is still backlogged.
//!
//! Differences from Linux: the perturbation happens lazily at the first call at or after each
//! multiple of `perturb` since the epoch (there is no timer); the longest slot for an overflow
//! drop is found by scanning the round (Linux keeps depth lists, and may pick a different slot
//! among equally long ones).
//!
//! # Per-flow RED (`redflowlimit ... min ... max ... probability ... [ecn] [harddrop]`)
//!
//! As in the kernel: each slot keeps an EWMA of its backlog in bytes (weight 2^-`ewma`, updated
//! on every enqueue to a busy slot, no idle-time decay), and Floyd & Jacobson's count-based
//! marking between `min` and `max` with peak probability `probability`. A marked packet gets CE
//! when `ecn` is set and it is ECN-capable (with `headdrop`, the slot's head packet is marked
//! first); otherwise it is dropped (the head with `headdrop`). Above `max` every packet is
//! marked with `ecn` and without `harddrop`, else dropped. The byte `limit` is only checked
//! against `max`, as tc does.

use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};
use std::collections::{HashMap, VecDeque};

/// Most packets per flow (`SFQ_MAX_DEPTH`), also the default depth and limit.
pub const MAX_DEPTH: u32 = 127;
/// Most slots (`SFQ_MAX_FLOWS`).
pub const MAX_FLOWS: u32 = 65536 - MAX_DEPTH - 1;
/// Default number of slots (`SFQ_DEFAULT_FLOWS`).
pub const DEFAULT_FLOWS: u32 = 128;
/// Default hash table size (`SFQ_DEFAULT_HASH_DIVISOR`).
pub const DEFAULT_DIVISOR: u32 = 1024;
/// Default quantum: `psched_mtu` of an Ethernet device.
pub const DEFAULT_QUANTUM: u32 = 1514;

const NONE: u32 = u32::MAX;

/// What a perturbation does to flows that are queued (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PerturbMode {
    /// Sluice: backlogged flows keep their slot until they drain.
    #[default]
    Sticky,
    /// Linux ≥ 3.9 `sfq_rehash` (`legacy_perturb`).
    Rehash,
    /// Linux < 3.9: only the key changes (the seed's kernel).
    KeyOnly,
}

/// SFQ parameters as tc-sfq(8) names them. A zero in `limit`, `quantum`, `depth`, `divisor` or
/// `flows` means "the default", as in the kernel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqConfig {
    /// Packets in the whole qdisc (0 = the default 127).
    pub limit: u32,
    /// Bytes per slot per round (default 1514).
    pub quantum: u32,
    /// Packets per slot (default 127, at most 127).
    pub depth: u32,
    /// Hash buckets, a power of two up to 65536 (default 1024).
    pub divisor: u32,
    /// Slots (default 128).
    pub flows: u32,
    /// Rehash interval; zero disables perturbation (tc gives whole seconds).
    pub perturb: Span,
    /// Drop from the head of a full slot instead of the tail.
    pub headdrop: bool,
    /// Per-flow RED (`redflowlimit` and its options).
    pub red: Option<SfqRed>,
    /// What a perturbation does to queued flows.
    pub perturb_mode: PerturbMode,
    /// Handle major of this qdisc, for classids in `pkt.priority` and filter results.
    pub major: u16,
    /// Seed for the hash keys (Linux draws them at random; fixed here for reproducibility).
    pub seed: u64,
}

impl Default for SfqConfig {
    fn default() -> Self {
        SfqConfig {
            // Zero, not 127: like tc without `limit`, so the kernel's `flows = min(flows, limit)`
            // clamp does not apply and the defaults stay 127 packets over 128 slots.
            limit: 0,
            quantum: DEFAULT_QUANTUM,
            depth: MAX_DEPTH,
            divisor: DEFAULT_DIVISOR,
            flows: DEFAULT_FLOWS,
            perturb: Span::ZERO,
            headdrop: false,
            red: None,
            perturb_mode: PerturbMode::Sticky,
            major: 0,
            seed: 0x5f5f_5346_515f_5f5f,
        }
    }
}

/// Per-flow RED parameters, as tc-sfq(8) names them (bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SfqRed {
    /// `redflowlimit`: per-flow byte limit (tc checks `max` against it).
    pub limit: u64,
    /// `min`: average backlog where marking starts.
    pub min: u32,
    /// `max`: average backlog above which every packet is marked.
    pub max: u32,
    /// `probability`: marking probability at `max`.
    pub probability: f64,
    /// `ewma`: log2 of the averaging weight's inverse (tc derives it from `burst`/`avpkt`).
    pub ewma: u8,
    /// Mark CE instead of dropping ECN-capable packets.
    pub ecn: bool,
    /// Drop (never mark) above `max`.
    pub harddrop: bool,
}

/// RED counters (`tc -s qdisc show` prints them for sfq with redflowlimit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SfqRedStats {
    /// Early drops between min and max.
    pub prob_drop: u64,
    /// Drops above max.
    pub forced_drop: u64,
    /// CE marks on the arriving packet between min and max.
    pub prob_mark: u64,
    /// CE marks on the arriving packet above max.
    pub forced_mark: u64,
    /// CE marks on the slot's head between min and max (headdrop).
    pub prob_mark_head: u64,
    /// CE marks on the slot's head above max (headdrop).
    pub forced_mark_head: u64,
}

/// The parameters after the kernel's adjustments (`sfq_change`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SfqParams {
    /// Effective packet limit: `min(limit, depth × flows)`.
    pub limit: u32,
    /// Quantum in bytes.
    pub quantum: u32,
    /// Packets per slot.
    pub depth: u32,
    /// Hash buckets.
    pub divisor: u32,
    /// Slots: `min(flows, divisor, limit)`.
    pub flows: u32,
}

impl SfqConfig {
    /// Validates and applies the kernel's clamping, as `sfq_change` does.
    pub fn params(&self) -> Result<SfqParams, ConfigError> {
        let bad = |param, value: String, reason: &str| Err(ConfigError::invalid("sfq", param, value, reason));
        if let Some(r) = &self.red {
            if r.min >= r.max {
                return bad("min", r.min.to_string(), "must be below max");
            }
            if r.limit != 0 && r.max as u64 >= r.limit {
                return bad("max", r.max.to_string(), "must be below redflowlimit");
            }
            if r.ewma >= 32 {
                return bad("ewma", r.ewma.to_string(), "must be below 32");
            }
            if !(r.probability > 0.0 && r.probability <= 1.0) {
                return bad("probability", r.probability.to_string(), "must be in (0, 1]");
            }
        }
        let divisor = if self.divisor == 0 { DEFAULT_DIVISOR } else { self.divisor };
        if !divisor.is_power_of_two() || divisor > 65536 {
            return bad("divisor", divisor.to_string(), "must be a power of two no larger than 65536");
        }
        let quantum = if self.quantum == 0 { DEFAULT_QUANTUM } else { self.quantum };
        if quantum.div_ceil(8) > 0x7FFF {
            return bad(
                "quantum",
                quantum.to_string(),
                "too large (the deficit is kept in 16 bits of 8 bytes)",
            );
        }
        if self.limit == 1 {
            return bad("limit", "1".into(), "a limit of 1 packet is rejected by the kernel; use at least 2");
        }
        let mut flows = if self.flows == 0 { DEFAULT_FLOWS } else { self.flows.min(MAX_FLOWS) };
        flows = flows.min(divisor);
        let depth = if self.depth == 0 { MAX_DEPTH } else { self.depth.min(MAX_DEPTH) };
        let mut limit = MAX_DEPTH;
        if self.limit != 0 {
            limit = self.limit.min(depth * flows);
            flows = flows.min(limit);
        }
        Ok(SfqParams { limit, quantum, depth, divisor, flows })
    }
}

#[derive(Debug, Clone, Default)]
struct Slot {
    q: VecDeque<Packet>,
    /// Next slot in the round (valid while the slot is busy).
    next: u32,
    /// Deficit in units of 8 bytes.
    allot: i32,
    backlog: u64,
    /// Bucket whose hash-table entry points here, or NONE (a sticky slot from an earlier key).
    bucket: u32,
    /// Packets in this slot that belong to sticky flows (only in `Sticky` mode).
    sticky_pkts: u32,
    /// RED average backlog, scaled by 2^ewma.
    qavg: u64,
    /// RED packets since the last mark (-1: below min).
    qcount: i64,
    /// RED random threshold.
    qr: u64,
}

/// What RED decided for an arriving packet.
enum RedAction {
    Pass,
    Prob,
    Hard,
}

/// The SFQ qdisc.
#[derive(Debug)]
pub struct Sfq {
    cfg: SfqConfig,
    p: SfqParams,
    scaled_quantum: i32,
    slots: Vec<Slot>,
    /// bucket -> slot, or NONE.
    ht: Vec<u32>,
    /// Free slots; the last one is taken first (the kernel's `dep[0]` list behaves the same).
    free: Vec<u32>,
    /// The slot before the one being served, NONE when idle.
    tail: u32,
    /// Flow hash -> (slot, packets of that flow in it), for flows that were backlogged when the
    /// key changed (`Sticky` mode only).
    sticky: HashMap<u32, (u32, u32)>,
    perturbation: u32,
    rng: u64,
    next_perturb: Time,
    perturbations: u64,
    stats: QdiscStats,
    red_stats: SfqRedStats,
    dropped: VecDeque<Dropped>,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

impl Sfq {
    /// Builds an SFQ qdisc.
    pub fn new(cfg: SfqConfig) -> Result<Sfq, ConfigError> {
        let p = cfg.params()?;
        let mut rng = cfg.seed;
        let perturbation = splitmix(&mut rng) as u32;
        let period = cfg.perturb.as_nanos();
        Ok(Sfq {
            cfg,
            p,
            scaled_quantum: p.quantum.div_ceil(8) as i32,
            slots: vec![Slot { bucket: NONE, ..Slot::default() }; p.flows as usize],
            ht: vec![NONE; p.divisor as usize],
            free: (0..p.flows).collect(),
            tail: NONE,
            sticky: HashMap::new(),
            perturbation,
            rng,
            next_perturb: if period == 0 { Time::MAX } else { Time::from_nanos(period) },
            perturbations: 0,
            stats: QdiscStats::default(),
            red_stats: SfqRedStats::default(),
            dropped: VecDeque::new(),
        })
    }

    /// The configuration as given.
    pub fn config(&self) -> &SfqConfig {
        &self.cfg
    }
    /// The effective parameters (what `tc qdisc show` prints: `limit 127p quantum 1514b depth
    /// 127 divisor 1024`, plus `flows`).
    pub fn params(&self) -> SfqParams {
        self.p
    }
    /// The options as `tc qdisc show` prints them (without `-d`, so no `flows`), e.g.
    /// `limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec`.
    pub fn tc_options(&self) -> String {
        use crate::units::{format_g, format_size};
        let p = self.p;
        let mut out =
            format!("limit {}p quantum {} depth {}", p.limit, format_size(p.quantum as u64), p.depth);
        if self.cfg.headdrop {
            out += " headdrop";
        }
        out += &format!(" divisor {}", p.divisor);
        let secs = self.cfg.perturb.as_nanos() / 1_000_000_000;
        if secs > 0 {
            out += &format!(" perturb {secs}sec");
        }
        if let Some(r) = self.cfg.red {
            out += &format!(
                " ewma {} min {} max {} probability {}",
                r.ewma,
                format_size(r.min as u64),
                format_size(r.max as u64),
                format_g(r.probability, 6)
            );
            if r.ecn {
                out += " ecn";
            }
            if r.harddrop {
                out += " harddrop";
            }
        }
        out
    }

    /// RED counters (all zero without `red`).
    pub fn red_stats(&self) -> SfqRedStats {
        self.red_stats
    }

    /// The kernel's `red_calc_qavg_no_idle_time` and `red_action` for slot `x`.
    fn red_action(&mut self, x: u32) -> RedAction {
        let Some(r) = self.cfg.red else { return RedAction::Pass };
        let w = r.ewma as u32;
        let slot = &mut self.slots[x as usize];
        // qavg (scaled by 2^w) += backlog - qavg / 2^w
        slot.qavg = (slot.qavg + slot.backlog).saturating_sub(slot.qavg >> w);
        let (min, max) = ((r.min as u64) << w, (r.max as u64) << w);
        if slot.qavg < min {
            slot.qcount = -1;
            return RedAction::Pass;
        }
        if slot.qavg >= max {
            slot.qcount = -1;
            return RedAction::Hard;
        }
        // Between the thresholds: mark when (qavg - min) * count reaches a uniform random
        // threshold in [0, (max - min) / probability).
        let span = ((r.max - r.min) as f64 / r.probability) as u64;
        let draw = |rng: &mut u64| ((splitmix(rng) >> 32) * span.max(1)) >> 32;
        slot.qcount += 1;
        if slot.qcount > 0 {
            if ((slot.qavg - min) >> w) * slot.qcount as u64 >= slot.qr {
                slot.qcount = 0;
                slot.qr = draw(&mut self.rng);
                return RedAction::Prob;
            }
        } else {
            slot.qr = draw(&mut self.rng);
        }
        RedAction::Pass
    }

    /// How many perturbations have happened.
    pub fn perturbations(&self) -> u64 {
        self.perturbations
    }
    /// Busy flows as `tc -s class show` lists them: (bucket + 1 as the class minor, packets,
    /// bytes, deficit in bytes). Sticky slots from an earlier key have no bucket and report 0.
    pub fn flow_stats(&self) -> Vec<(u32, u64, u64, i64)> {
        self.round()
            .into_iter()
            .map(|i| {
                let s = &self.slots[i as usize];
                let minor = if s.bucket == NONE { 0 } else { s.bucket + 1 };
                (minor, s.q.len() as u64, s.backlog, s.allot as i64 * 8)
            })
            .collect()
    }

    /// Busy slots in service order.
    fn round(&self) -> Vec<u32> {
        let mut v = Vec::new();
        if self.tail == NONE {
            return v;
        }
        let mut i = self.slots[self.tail as usize].next;
        loop {
            v.push(i);
            if i == self.tail {
                return v;
            }
            i = self.slots[i as usize].next;
        }
    }

    fn hash_bucket(&self, flow_hash: u32) -> u32 {
        fmix32(fmix32(flow_hash) ^ self.perturbation) & (self.p.divisor - 1)
    }

    /// A bucket chosen by classid (`pkt.priority` or a filter result for this qdisc), which no
    /// perturbation changes.
    fn class_bucket(&self, pkt: &Packet) -> Option<u32> {
        let maj = self.cfg.major;
        if maj == 0 {
            return None;
        }
        let minor = if (pkt.priority >> 16) as u16 == maj {
            pkt.priority & 0xFFFF
        } else {
            pkt.class_for(maj)?.minor()
        };
        (1..=self.p.divisor).contains(&minor).then(|| minor - 1)
    }

    fn maybe_perturb(&mut self, now: Time) {
        if now < self.next_perturb {
            return;
        }
        let period = self.cfg.perturb.as_nanos().max(1);
        self.next_perturb = Time::from_nanos((now.as_nanos() / period + 1).saturating_mul(period));
        self.perturb();
    }

    /// Changes the hash key now, treating queued flows as `perturb_mode` says.
    pub fn perturb(&mut self) {
        self.perturbation = splitmix(&mut self.rng) as u32;
        self.perturbations += 1;
        if self.tail == NONE {
            self.sticky.clear();
            return;
        }
        match self.cfg.perturb_mode {
            PerturbMode::KeyOnly => {}
            PerturbMode::Rehash => self.rehash(),
            PerturbMode::Sticky => self.make_sticky(),
        }
    }

    /// Sluice: every flow with packets queued keeps its slot; the hash table starts empty for
    /// the new key.
    fn make_sticky(&mut self) {
        self.sticky.clear();
        for i in self.round() {
            let mut n = 0;
            let slot = &self.slots[i as usize];
            for p in &slot.q {
                if self.class_bucket(p).is_some() {
                    continue; // classid flows do not depend on the key
                }
                self.sticky.entry(p.flow_hash).or_insert((i, 0)).1 += 1;
                n += 1;
            }
            let slot = &mut self.slots[i as usize];
            slot.sticky_pkts = n;
            if n > 0 && slot.bucket != NONE {
                self.ht[slot.bucket as usize] = NONE;
                slot.bucket = NONE;
            }
        }
    }

    /// Linux's `sfq_rehash`: empty every slot in index order and re-enqueue under the new key.
    fn rehash(&mut self) {
        let mut list = Vec::with_capacity(self.stats.qlen as usize);
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            if s.q.is_empty() {
                continue;
            }
            list.extend(s.q.drain(..));
            s.backlog = 0;
            if s.bucket != NONE {
                self.ht[s.bucket as usize] = NONE;
                s.bucket = NONE;
            }
            self.free.push(i as u32);
        }
        self.tail = NONE;
        for pkt in list {
            let b = self.class_bucket(&pkt).unwrap_or_else(|| self.hash_bucket(pkt.flow_hash));
            let x = match self.ht[b as usize] {
                NONE => match self.free.pop() {
                    Some(x) => {
                        self.ht[b as usize] = x;
                        self.slots[x as usize].bucket = b;
                        x
                    }
                    None => {
                        self.drop_counted(pkt, DropReason::QueueFull);
                        continue;
                    }
                },
                x => x,
            };
            if self.slots[x as usize].q.len() >= self.p.depth as usize {
                self.drop_counted(pkt, DropReason::QueueFull);
                continue;
            }
            self.push_tail(x, pkt);
        }
    }

    fn drop_counted(&mut self, pkt: Packet, reason: DropReason) {
        self.stats.on_drop_queued(&pkt);
        self.dropped.push_back(Dropped { pkt, reason });
    }

    /// Appends to slot `x`; a slot that becomes busy joins the end of the round with a full
    /// quantum (the kernel's order). Backlog counters are the caller's.
    fn push_tail(&mut self, x: u32, pkt: Packet) {
        let s = &mut self.slots[x as usize];
        s.backlog += pkt.len as u64;
        s.q.push_back(pkt);
        if s.q.len() == 1 {
            if self.tail == NONE {
                s.next = x;
            } else {
                let t = self.tail as usize;
                self.slots[x as usize].next = self.slots[t].next;
                self.slots[t].next = x;
            }
            self.tail = x;
            self.slots[x as usize].allot = self.scaled_quantum;
        }
    }

    /// Bookkeeping for a packet leaving slot `x` (sent or dropped).
    fn left_slot(&mut self, x: u32, pkt: &Packet) {
        let s = &mut self.slots[x as usize];
        s.backlog -= pkt.len as u64;
        if s.sticky_pkts > 0 {
            if let Some(e) = self.sticky.get_mut(&pkt.flow_hash) {
                if e.0 == x {
                    e.1 -= 1;
                    s.sticky_pkts -= 1;
                    if e.1 == 0 {
                        self.sticky.remove(&pkt.flow_hash);
                    }
                }
            }
        }
    }

    /// Counts a sticky flow's packet into its slot.
    fn note_sticky(&mut self, sticky: Option<u32>, x: u32, pkt: &Packet) {
        if sticky.is_some() {
            self.sticky.entry(pkt.flow_hash).or_insert((x, 0)).1 += 1;
            self.slots[x as usize].sticky_pkts += 1;
        }
    }

    /// Frees an empty slot that has already been unlinked from the round.
    fn release(&mut self, x: u32) {
        let s = &mut self.slots[x as usize];
        if s.bucket != NONE {
            if self.ht[s.bucket as usize] == x {
                self.ht[s.bucket as usize] = NONE;
            }
            s.bucket = NONE;
        }
        s.sticky_pkts = 0;
        self.free.push(x);
    }

    /// The kernel's `sfq_drop`: drop from the longest slot (tail, or head with headdrop); when
    /// every slot holds one packet, drop the slot at the head of the round.
    fn drop_longest(&mut self) -> Option<(u32, Packet)> {
        if self.tail == NONE {
            return None;
        }
        // Walk the round without allocating: this runs for every packet under overload.
        let (mut x, mut best) = (self.tail, 0usize);
        let mut i = self.tail;
        loop {
            i = self.slots[i as usize].next;
            let len = self.slots[i as usize].q.len();
            if len > best {
                (x, best) = (i, len);
            }
            if i == self.tail {
                break;
            }
        }
        if self.slots[x as usize].q.len() > 1 {
            let s = &mut self.slots[x as usize];
            let pkt = if self.cfg.headdrop { s.q.pop_front() } else { s.q.pop_back() }?;
            self.left_slot(x, &pkt);
            return Some((x, pkt));
        }
        // All slots have length 1: drop the one about to be served and unlink it.
        let x = self.slots[self.tail as usize].next;
        let pkt = self.slots[x as usize].q.pop_front()?;
        self.left_slot(x, &pkt);
        if x == self.tail {
            self.tail = NONE;
        } else {
            self.slots[self.tail as usize].next = self.slots[x as usize].next;
        }
        self.release(x);
        Some((x, pkt))
    }

    /// Moves the round to the slot `dequeue` will serve (giving skipped slots their quantum).
    fn advance(&mut self) -> Option<u32> {
        if self.tail == NONE {
            return None;
        }
        loop {
            let a = self.slots[self.tail as usize].next;
            if self.slots[a as usize].allot > 0 {
                return Some(a);
            }
            self.tail = a;
            self.slots[a as usize].allot += self.scaled_quantum;
        }
    }
}

impl Qdisc for Sfq {
    fn kind(&self) -> &'static str {
        "sfq"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.maybe_perturb(now);
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        let class = self.class_bucket(&pkt);
        let sticky = if class.is_none() && !self.sticky.is_empty() {
            self.sticky.get(&pkt.flow_hash).map(|e| e.0)
        } else {
            None
        };
        let mut fresh = false;
        let x = match sticky {
            Some(x) => x,
            None => {
                let b = class.unwrap_or_else(|| self.hash_bucket(pkt.flow_hash));
                match self.ht[b as usize] {
                    NONE => {
                        let Some(x) = self.free.pop() else {
                            self.stats.drops += 1;
                            return Err(Dropped { pkt, reason: DropReason::QueueFull });
                        };
                        self.ht[b as usize] = x;
                        let s = &mut self.slots[x as usize];
                        s.bucket = b;
                        (s.qavg, s.qcount, s.qr) = (0, -1, 0);
                        fresh = true;
                        x
                    }
                    x => x,
                }
            }
        };
        let mut congested = false;
        let action = if fresh { RedAction::Pass } else { self.red_action(x) };
        let hard = match action {
            RedAction::Pass => None,
            RedAction::Prob => Some(false),
            RedAction::Hard => Some(true),
        };
        if let (Some(hard), Some(red)) = (hard, self.cfg.red) {
            self.stats.overlimits += 1;
            let mark = red.ecn && !(hard && red.harddrop);
            let head_marked =
                mark && self.cfg.headdrop && self.slots[x as usize].q.front_mut().is_some_and(|h| h.set_ce());
            let rs = &mut self.red_stats;
            if head_marked {
                *(if hard { &mut rs.forced_mark_head } else { &mut rs.prob_mark_head }) += 1;
            } else if mark && pkt.set_ce() {
                *(if hard { &mut rs.forced_mark } else { &mut rs.prob_mark }) += 1;
            } else {
                *(if hard { &mut rs.forced_drop } else { &mut rs.prob_drop }) += 1;
                congested = true;
            }
        }
        if congested || self.slots[x as usize].q.len() >= self.p.depth as usize {
            let reason = if congested { DropReason::Aqm } else { DropReason::QueueFull };
            if !self.cfg.headdrop {
                self.stats.drops += 1;
                return Err(Dropped { pkt, reason });
            }
            // Replace the head in place, as the kernel does: the slot never looks empty, so it
            // keeps its place in the round, and the total length does not change.
            let head = self.slots[x as usize].q.pop_front().expect("depth >= 1");
            self.left_slot(x, &head);
            self.drop_counted(head, DropReason::HeadDrop);
            self.note_sticky(sticky, x, &pkt);
            self.stats.on_enqueue(&pkt);
            let s = &mut self.slots[x as usize];
            s.backlog += pkt.len as u64;
            s.q.push_back(pkt);
            return Ok(());
        }
        self.note_sticky(sticky, x, &pkt);
        self.stats.on_enqueue(&pkt);
        self.push_tail(x, pkt);
        if self.stats.qlen <= self.p.limit as u64 {
            return Ok(());
        }
        let (from, victim) = self.drop_longest().expect("over limit means busy");
        self.stats.on_drop_queued(&victim);
        if from == x && !self.cfg.headdrop && victim == pkt {
            // Our own packet was the tail of the longest slot: hand it back to the sender.
            return Err(Dropped { pkt: victim, reason: DropReason::QueueFull });
        }
        self.dropped.push_back(Dropped { pkt: victim, reason: DropReason::FattestFlow });
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.maybe_perturb(now);
        let a = self.advance()?;
        let pkt = self.slots[a as usize].q.pop_front()?;
        self.left_slot(a, &pkt);
        self.stats.on_dequeue(&pkt);
        if self.slots[a as usize].q.is_empty() {
            let next = self.slots[a as usize].next;
            if next == a {
                self.tail = NONE;
            } else {
                self.slots[self.tail as usize].next = next;
            }
            self.release(a);
        } else {
            self.slots[a as usize].allot -= pkt.len.div_ceil(8) as i32;
        }
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        self.maybe_perturb(now);
        let a = self.advance()?;
        self.slots[a as usize].q.front()
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (self.tail != NONE).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out = Vec::with_capacity(self.stats.qlen as usize);
        for i in self.round() {
            out.extend(self.slots[i as usize].q.drain(..));
            self.slots[i as usize].backlog = 0;
            self.release(i);
        }
        self.tail = NONE;
        self.sticky.clear();
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;

    fn pkt(flow: u32, len: u32, id: u64) -> Packet {
        let mut p = Packet::new(len, id);
        p.flow_hash = flow;
        p
    }

    #[test]
    fn defaults_match_the_kernel() {
        let p = SfqConfig::default().params().unwrap();
        assert_eq!(p, SfqParams { limit: 127, quantum: 1514, depth: 127, divisor: 1024, flows: 128 });
        // Zeros mean "default"; the kernel's clamps apply.
        let z = SfqConfig { limit: 0, quantum: 0, depth: 0, divisor: 0, flows: 0, ..SfqConfig::default() };
        assert_eq!(z.params().unwrap(), p);
        let c = SfqConfig { limit: 10000, depth: 200, flows: 4, ..SfqConfig::default() }.params().unwrap();
        assert_eq!((c.depth, c.limit, c.flows), (127, 508, 4));
        let small = SfqConfig { limit: 3, ..SfqConfig::default() }.params().unwrap();
        assert_eq!(small.flows, 3);
        let d = SfqConfig { divisor: 16, ..SfqConfig::default() }.params().unwrap();
        assert_eq!(d.flows, 16);
    }

    #[test]
    fn show_matches_tc() {
        let show = |c: SfqConfig| Sfq::new(c).unwrap().tc_options();
        let d = SfqConfig::default();
        assert_eq!(show(d), "limit 127p quantum 1514b depth 127 divisor 1024");
        assert_eq!(show(SfqConfig { limit: 8, ..d }), "limit 8p quantum 1514b depth 127 divisor 1024");
        let p = SfqConfig { perturb: Span::from_secs(10), ..d };
        assert_eq!(show(p), "limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec");
        let q = SfqConfig { quantum: 9000, divisor: 512, depth: 64, ..d };
        assert_eq!(show(q), "limit 127p quantum 9000b depth 64 divisor 512");
        let r = SfqConfig { red: Some(tdc_red()), headdrop: true, ..d };
        assert_eq!(
            show(r),
            "limit 127p quantum 1514b depth 127 headdrop divisor 1024 \
             ewma 6 min 8000b max 60000b probability 0.2 ecn"
        );
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let e = |c: SfqConfig| c.params().unwrap_err().to_string();
        assert!(e(SfqConfig { divisor: 1000, ..SfqConfig::default() }).contains("power of two"));
        assert!(e(SfqConfig { divisor: 131072, ..SfqConfig::default() }).contains("power of two"));
        assert!(e(SfqConfig { limit: 1, ..SfqConfig::default() }).contains("limit"));
        assert!(e(SfqConfig { quantum: 300_000, ..SfqConfig::default() }).contains("quantum"));
        assert!(e(SfqConfig {
            red: Some(SfqRed {
                limit: 100_000,
                min: 60_000,
                max: 8_000,
                probability: 0.2,
                ewma: 6,
                ecn: true,
                harddrop: false,
            }),
            ..SfqConfig::default()
        })
        .contains("below max"));
    }

    #[test]
    fn flows_share_by_quantum() {
        // Flow 1 sends 1500-byte packets, flow 2 500-byte ones: equal bytes per round.
        let mut q = Sfq::new(SfqConfig { quantum: 1500, ..SfqConfig::default() }).unwrap();
        let t = Time::ZERO;
        for i in 0..30 {
            q.enqueue(pkt(1, 1500, i), t).unwrap();
            q.enqueue(pkt(2, 500, 100 + i), t).unwrap();
        }
        let mut bytes = [0u64; 3];
        for _ in 0..20 {
            let p = q.dequeue(t).unwrap();
            bytes[p.flow_hash as usize] += p.len as u64;
        }
        assert_eq!(bytes[1], 7500, "5 big packets");
        assert_eq!(bytes[2], 7500, "15 small packets");
    }

    #[test]
    fn a_new_flow_joins_at_the_end_of_the_round() {
        let mut q = Sfq::new(SfqConfig::default()).unwrap();
        let t = Time::ZERO;
        for i in 0..3 {
            q.enqueue(pkt(1, 1514, i), t).unwrap();
            q.enqueue(pkt(2, 1514, 10 + i), t).unwrap();
        }
        assert_eq!(q.dequeue(t).unwrap().flow_hash, 1);
        q.enqueue(pkt(3, 100, 20), t).unwrap();
        let order: Vec<u32> = std::iter::from_fn(|| q.dequeue(t)).map(|p| p.flow_hash).collect();
        assert_eq!(order, vec![2, 3, 1, 2, 1, 2]);
    }

    #[test]
    fn depth_tail_drops_or_head_drops() {
        let t = Time::ZERO;
        let mut q = Sfq::new(SfqConfig { depth: 2, ..SfqConfig::default() }).unwrap();
        q.enqueue(pkt(1, 100, 1), t).unwrap();
        q.enqueue(pkt(1, 100, 2), t).unwrap();
        assert_eq!(q.enqueue(pkt(1, 100, 3), t).unwrap_err().pkt.payload, 3);
        let mut h = Sfq::new(SfqConfig { depth: 2, headdrop: true, ..SfqConfig::default() }).unwrap();
        for id in 1..=3 {
            h.enqueue(pkt(1, 100, id), t).unwrap();
        }
        let d = h.take_dropped().unwrap();
        assert_eq!((d.pkt.payload, d.reason), (1, DropReason::HeadDrop));
        assert_eq!(h.dequeue(t).unwrap().payload, 2);
        assert_eq!(h.stats().drops, 1);
    }

    #[test]
    fn overflow_drops_from_the_longest_flow() {
        let t = Time::ZERO;
        let mut q = Sfq::new(SfqConfig { limit: 4, ..SfqConfig::default() }).unwrap();
        for id in 0..3 {
            q.enqueue(pkt(1, 100, id), t).unwrap();
        }
        q.enqueue(pkt(2, 100, 10), t).unwrap();
        // Fifth packet: flow 1 (3 packets) loses its tail, the sparse flow's packet is kept.
        q.enqueue(pkt(3, 100, 20), t).unwrap();
        let d = q.take_dropped().unwrap();
        assert_eq!((d.pkt.payload, d.reason), (2, DropReason::FattestFlow));
        // If the arriving packet's own flow is the longest, the arrival itself is refused.
        let d = q.enqueue(pkt(1, 100, 3), t).unwrap_err();
        assert_eq!(d.pkt.payload, 3);
        assert_eq!(q.stats().qlen, 4);
        assert_eq!(q.stats().drops, 2);
    }

    #[test]
    fn classid_selects_the_bucket() {
        let mut q = Sfq::new(SfqConfig { major: 1, ..SfqConfig::default() }).unwrap();
        let mut a = pkt(1, 100, 1);
        a.priority = Handle::new(1, 5).to_tc().unwrap();
        let mut b = pkt(2, 100, 2);
        b.push_class(Handle::new(1, 5));
        q.enqueue(a, Time::ZERO).unwrap();
        q.enqueue(b, Time::ZERO).unwrap();
        assert_eq!(q.flow_stats(), vec![(5, 2, 200, 1520)]);
    }

    #[test]
    fn sticky_flows_keep_their_slot_until_drained() {
        let t = Time::ZERO;
        let mut q = Sfq::new(SfqConfig { divisor: 16, ..SfqConfig::default() }).unwrap();
        for i in 0..4 {
            q.enqueue(pkt(7, 100, i), t).unwrap();
        }
        q.perturb();
        for i in 4..8 {
            q.enqueue(pkt(7, 100, i), t).unwrap();
        }
        assert_eq!(q.flow_stats().len(), 1, "one slot for the flow across the perturbation");
        let ids: Vec<u64> = std::iter::from_fn(|| q.dequeue(t)).map(|p| p.payload).collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
        assert!(q.sticky.is_empty());
        // Once drained, the flow is hashed under the new key.
        q.enqueue(pkt(7, 100, 8), t).unwrap();
        assert_eq!(q.flow_stats()[0].0, q.hash_bucket(7) + 1);
    }

    #[test]
    fn key_only_splits_a_backlogged_flow() {
        let t = Time::ZERO;
        let cfg = SfqConfig { perturb_mode: PerturbMode::KeyOnly, seed: 1, ..SfqConfig::default() };
        let mut q = Sfq::new(cfg).unwrap();
        let before = q.hash_bucket(7);
        q.enqueue(pkt(7, 100, 0), t).unwrap();
        q.perturb();
        assert_ne!(q.hash_bucket(7), before, "seed 1 moves flow 7 on the first perturbation");
        q.enqueue(pkt(7, 100, 1), t).unwrap();
        assert_eq!(q.flow_stats().len(), 2);
    }

    #[test]
    fn perturbation_runs_on_the_period_grid() {
        let cfg = SfqConfig { perturb: Span::from_secs(10), ..SfqConfig::default() };
        let mut q = Sfq::new(cfg).unwrap();
        q.enqueue(pkt(1, 100, 0), Time::from_secs(9)).unwrap();
        assert_eq!(q.perturbations(), 0);
        q.dequeue(Time::from_secs(10));
        assert_eq!(q.perturbations(), 1);
        q.dequeue(Time::from_secs(35));
        assert_eq!(q.perturbations(), 2, "missed instants collapse into one");
        q.dequeue(Time::from_secs(39));
        assert_eq!(q.perturbations(), 2);
    }

    /// tdc's "Create SFQ with redflowlimit setting".
    fn tdc_red() -> SfqRed {
        SfqRed {
            limit: 100_000,
            min: 8000,
            max: 60_000,
            probability: 0.2,
            ewma: 6,
            ecn: true,
            harddrop: false,
        }
    }

    /// Holds one flow's backlog at `backlog` bytes of 1000-byte packets and offers `n` more,
    /// one dequeue per enqueue; returns (CE-marked, dropped) among the offered packets.
    fn red_run(red: SfqRed, headdrop: bool, ect: bool, backlog: u32, n: u64) -> (u64, u64) {
        let cfg = SfqConfig { red: Some(red), headdrop, ..SfqConfig::default() };
        let mut q = Sfq::new(cfg).unwrap();
        let t = Time::ZERO;
        let mk = |id| {
            let mut p = pkt(1, 1000, id);
            p.dsfield = if ect { 0x02 } else { 0 };
            p
        };
        for id in 0..(backlog / 1000) as u64 {
            let _ = q.enqueue(mk(id), t);
        }
        // Let the average settle (weight 1/64) before counting.
        let (mut marked, mut dropped) = (0, 0);
        for id in 0..(n + 1000) {
            let counting = id >= 1000;
            if q.enqueue(mk(1000 + id), t).is_err() && counting {
                dropped += 1;
            }
            while q.take_dropped().is_some() {
                if counting {
                    dropped += 1;
                }
            }
            if q.stats().qlen > (backlog / 1000) as u64 {
                let p = q.dequeue(t).unwrap();
                if counting && p.ecn() == crate::packet::Ecn::Ce {
                    marked += 1;
                }
            }
        }
        (marked, dropped)
    }

    #[test]
    fn red_is_silent_below_min_and_absolute_above_max() {
        assert_eq!(red_run(tdc_red(), false, true, 5000, 2000), (0, 0));
        // Above max: every arrival is marked (ecn) or dropped (no ECT, or harddrop).
        assert_eq!(red_run(tdc_red(), false, true, 70_000, 2000), (2000, 0));
        assert_eq!(red_run(tdc_red(), false, false, 70_000, 2000), (0, 2000));
        let hard = SfqRed { harddrop: true, ..tdc_red() };
        assert_eq!(red_run(hard, false, true, 70_000, 2000), (0, 2000));
    }

    #[test]
    fn red_marks_in_proportion_between_the_thresholds() {
        // At 34000 bytes, halfway: p_b = 0.2 * 26000/52000 = 0.1; with Floyd & Jacobson's
        // uniform spacing, one mark every ~1/(2 p_b) + 1 = 6 packets.
        let (marked, dropped) = red_run(tdc_red(), false, true, 34_000, 20_000);
        assert_eq!(dropped, 0);
        let frac = marked as f64 / 20_000.0;
        assert!((0.13..0.2).contains(&frac), "marked fraction {frac}");
        // Without ECN the same packets are dropped instead.
        let (m2, d2) = red_run(tdc_red(), false, false, 34_000, 20_000);
        assert_eq!(m2, 0);
        assert!((0.13..0.2).contains(&(d2 as f64 / 20_000.0)), "dropped {d2}");
    }

    #[test]
    fn red_with_headdrop_marks_the_head() {
        let cfg = SfqConfig { red: Some(tdc_red()), headdrop: true, ..SfqConfig::default() };
        let mut q = Sfq::new(cfg).unwrap();
        for id in 0..80 {
            let mut p = pkt(1, 1000, id);
            p.dsfield = 0x02;
            let _ = q.enqueue(p, Time::ZERO);
        }
        let s = q.red_stats();
        assert!(s.forced_mark_head + s.prob_mark_head > 0, "{s:?}");
        assert_eq!(s.prob_mark + s.forced_mark, 0);
        assert_eq!(q.dequeue(Time::ZERO).unwrap().ecn(), crate::packet::Ecn::Ce);
    }
}
