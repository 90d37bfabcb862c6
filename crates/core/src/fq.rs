//! fq, the Fair Queue packet scheduler with per-flow pacing (tc-fq(8); the kernel's
//! `net/sched/sch_fq.c`, as in Linux 6.x with its three priority bands).
//!
//! # Matching the kernel
//!
//! - A flow is a socket (`Packet::sock`). Packets without one (forwarded, or from a socket that is
//!   not connected) are "orphans": their flow is `flow_hash & orphan_mask`, tagged so that it
//!   never equals a socket. Flows live in `1 << buckets_log` buckets (`hash_ptr` of the key); a
//!   lookup collects the bucket's flows that have been detached (empty, off every list) for more
//!   than 3 s (`gc_flows`).
//! - `skb->priority & 15` picks a band through `priomap` (default `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1`).
//!   `limit` bounds each band's packets (`band_drops`); `flow_limit` each flow's (`flows_plimit`).
//!   The bands share the link by weighted round robin in bytes (`weights`, default 589824 196608
//!   65536: band 0 gets 9/13).
//! - Each band keeps a list of new and one of old flows, served by deficit round robin with
//!   `quantum` (default 2 × psched_mtu); a new flow starts with `initial_quantum` (10 × psched_mtu)
//!   of credit, and one detached for more than `refill_delay` gets at least a quantum back.
//! - EDT: a packet's `tstamp` is its time to send, else its arrival. A time beyond `horizon` is
//!   dropped (`horizon_drops`) or capped to it (`horizon_cap`, `horizon_caps`). Packets of a flow
//!   leave in time-to-send order; a flow whose head is not due waits in the throttled set
//!   (`throttled`, `throttled_flows`, `time_next_delayed_flow`).
//! - Pacing (unless `nopacing`): after a packet the flow may send again `len / maxrate` later
//!   (EDT packets by their own length; others by at least a quantum, and only once their credit
//!   is used up, unless the rate is at or below `low_rate_threshold`, where every packet waits).
//!   The delay is clamped to 1 s (`pkts_too_long`) and shortened by how late the flow was served
//!   (at most by half), as the kernel does. A socket's own pacing rate is not modelled: the
//!   simulator's senders pace themselves, or give EDT times.
//! - A packet dequeued more than `ce_threshold` after its time to send is marked CE (`ce_mark`
//!   counts the attempt, as the kernel does, even for a packet that is not ECN-capable).
//! - The fast path (6.7+): with no `maxrate`, a packet due now goes to an internal FIFO served
//!   first when nothing else is eligible and that FIFO holds fewer than 8 (`fastpath_packets`).
//!
//! Times are the caller's nanoseconds; the kernel's jiffies (gc age, refill delay) become
//! nanoseconds, the refill delay rounded up to the kernel's tick by the caller.

use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Number of priority bands (`FQ_BANDS`).
pub const BANDS: usize = 3;
/// The kernel's `sch_default_prio2band`.
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// Default band weights (bytes of credit per round).
pub const DEFAULT_WEIGHTS: [i32; BANDS] = [9 << 16, 3 << 16, 1 << 16];
/// Smallest band weight the kernel accepts (`FQ_MIN_WEIGHT`).
pub const MIN_WEIGHT: i32 = 16384;
/// Largest quantum the kernel accepts.
pub const MAX_QUANTUM: u32 = 1 << 20;
/// Detached flows older than this are freed (`FQ_GC_AGE`, 3 s).
const GC_AGE: Span = Span::from_secs(3);
/// The fast path queue takes at most this many packets while others wait.
const FASTPATH_MAX: usize = 8;
/// Unlimited rate (`~0UL`).
const NO_RATE: u64 = u64::MAX;

/// fq's parameters, as the kernel holds them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FqConfig {
    /// Packets per band (`sch->limit`, 10000).
    pub limit: u32,
    /// Packets per flow (100).
    pub flow_limit: u32,
    /// DRR quantum in bytes (2 × psched_mtu).
    pub quantum: u32,
    /// Credit of a new flow (10 × psched_mtu).
    pub initial_quantum: u32,
    /// Per-flow rate cap in bytes/s (`None`: unlimited).
    pub maxrate: Option<u64>,
    /// log2 of the number of flow buckets (10).
    pub buckets_log: u32,
    /// Pacing on (`rate_enable`).
    pub pacing: bool,
    /// Credit refill delay of an idle flow (40 ms).
    pub refill_delay: Span,
    /// Mask on the hash of orphaned packets (1023).
    pub orphan_mask: u32,
    /// Rates (bytes/s) at or below this pace every packet (550 kbit/s).
    pub low_rate_threshold: u64,
    /// CE-mark packets this late (`None`: never).
    pub ce_threshold: Option<Span>,
    /// Watchdog slack (10 µs; only reported: the simulator's timer is exact).
    pub timer_slack: Span,
    /// EDT horizon (10 s).
    pub horizon: Span,
    /// Drop (true) or cap (false) packets beyond the horizon.
    pub horizon_drop: bool,
    /// `skb->priority & 15` → band.
    pub priomap: [u8; 16],
    /// Band weights.
    pub weights: [i32; BANDS],
}

impl FqConfig {
    /// The kernel's defaults for a device of `psched_mtu` bytes.
    pub fn for_mtu(psched_mtu: u32) -> FqConfig {
        FqConfig {
            limit: 10000,
            flow_limit: 100,
            quantum: 2 * psched_mtu,
            initial_quantum: 10 * psched_mtu,
            maxrate: None,
            buckets_log: 10,
            pacing: true,
            refill_delay: Span::from_millis(40),
            orphan_mask: 1023,
            low_rate_threshold: 550_000 / 8,
            ce_threshold: None,
            timer_slack: Span::from_micros(10),
            horizon: Span::from_secs(10),
            horizon_drop: true,
            priomap: DEFAULT_PRIOMAP,
            weights: DEFAULT_WEIGHTS,
        }
    }
}

impl Default for FqConfig {
    fn default() -> FqConfig {
        FqConfig::for_mtu(1514)
    }
}

/// The kernel's `struct tc_fq_qd_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqStats {
    /// Detached flows freed.
    pub gc_flows: u64,
    /// Always 0 (the old high-priority queue is gone).
    pub highprio_packets: u64,
    /// Packets sent through the fast path.
    pub fastpath_packets: u64,
    /// Times a flow was throttled.
    pub throttled: u64,
    /// Packets dropped at `flow_limit`.
    pub flows_plimit: u64,
    /// Packets whose pacing delay was clamped to 1 s.
    pub pkts_too_long: u64,
    /// Flow allocations that failed (never here).
    pub allocation_errors: u64,
    /// Nanoseconds until the next throttled flow is due, plus the timer slack (negative: none).
    pub time_next_delayed_flow: i64,
    /// Flows allocated.
    pub flows: u32,
    /// Flows with no packet.
    pub inactive_flows: u32,
    /// Flows waiting for their time.
    pub throttled_flows: u32,
    /// EWMA of how late throttled flows were released (ns).
    pub unthrottle_latency_ns: u32,
    /// Packets marked (or found too late to mark) past `ce_threshold`.
    pub ce_mark: u64,
    /// Packets dropped beyond the horizon.
    pub horizon_drops: u64,
    /// Packets whose time was capped to the horizon.
    pub horizon_caps: u64,
    /// Packets dropped at a band's limit.
    pub band_drops: [u64; BANDS],
    /// Packets queued per band.
    pub band_pkt_count: [u32; BANDS],
}

/// A queued packet with what fq's `skb->cb` holds.
#[derive(Clone, Copy, Debug)]
struct Item {
    pkt: Packet,
    /// Time to send (ns).
    tts: u64,
    band: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    /// On no list: `age` says since when.
    Detached,
    /// On a band's new or old list.
    Listed,
    /// In the throttled set under this key.
    Throttled(u64, u64),
}

#[derive(Debug)]
struct Flow {
    key: u64,
    /// Packets in arrival order whose times never decreased (the kernel's linked list).
    list: VecDeque<Item>,
    /// Packets that came with an earlier time than the list's tail (the kernel's rb-tree).
    tree: BTreeMap<(u64, u64), Item>,
    credit: i64,
    band: usize,
    at: Where,
    age: Time,
    time_next_packet: u64,
}

impl Flow {
    fn qlen(&self) -> usize {
        self.list.len() + self.tree.len()
    }

    /// `fq_peek`: the earlier of the tree's first and the list's head (the list on ties).
    fn peek(&self) -> Option<&Item> {
        match (self.tree.first_key_value(), self.list.front()) {
            (Some((_, t)), Some(h)) if t.tts < h.tts => Some(t),
            (Some((_, t)), None) => Some(t),
            (_, h) => h,
        }
    }

    fn pop(&mut self) -> Option<Item> {
        match (self.tree.first_key_value(), self.list.front()) {
            (Some((_, t)), Some(h)) if t.tts < h.tts => self.tree.pop_first().map(|(_, i)| i),
            (Some(_), None) => self.tree.pop_first().map(|(_, i)| i),
            _ => self.list.pop_front(),
        }
    }
}

#[derive(Debug, Default)]
struct Band {
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    credit: i64,
    quantum: i64,
}

/// The fq qdisc.
#[derive(Debug)]
pub struct Fq {
    cfg: FqConfig,
    flows: Vec<Option<Flow>>,
    free: Vec<usize>,
    buckets: Vec<Vec<usize>>,
    bands: [Band; BANDS],
    band_nr: usize,
    internal: VecDeque<Item>,
    delayed: BTreeSet<(u64, u64, usize)>,
    seq: u64,
    time_next_delayed_flow: u64,
    unthrottle_latency_ns: u64,
    st: FqStats,
    stats: QdiscStats,
    /// Packets and bytes in the flows and the fast path (not the held one).
    queued: u64,
    backlog: u64,
    held: VecDeque<Packet>,
}

/// `hash_64` (the golden-ratio multiplicative hash behind `hash_ptr`).
fn hash_64(v: u64, bits: u32) -> usize {
    (v.wrapping_mul(0x61C8_8646_80B5_83EB) >> (64 - bits)) as usize
}

impl Fq {
    /// An fq with `cfg`, checked as the kernel's `fq_change` checks it.
    pub fn new(cfg: FqConfig) -> Result<Fq, ConfigError> {
        let bad = |param: &'static str, value: String, reason: &'static str| {
            Err(ConfigError::invalid("fq", param, value, reason))
        };
        if !(1..=18).contains(&cfg.buckets_log) {
            return bad("buckets", format!("2^{}", cfg.buckets_log), "must be 2 to 262144");
        }
        if cfg.quantum == 0 || cfg.quantum > MAX_QUANTUM {
            return bad("quantum", cfg.quantum.to_string(), "must be 1 to 1048576");
        }
        if cfg.initial_quantum > i32::MAX as u32 {
            return bad("initial_quantum", cfg.initial_quantum.to_string(), "must be at most 2^31-1");
        }
        if cfg.weights.iter().any(|&w| w < MIN_WEIGHT) {
            return bad("weights", format!("{:?}", cfg.weights), "each at least 16384");
        }
        if cfg.priomap.iter().any(|&b| b as usize >= BANDS) {
            return bad("priomap", format!("{:?}", cfg.priomap), "bands are 0 to 2");
        }
        let mut bands: [Band; BANDS] = Default::default();
        for (b, w) in bands.iter_mut().zip(cfg.weights) {
            b.quantum = w as i64;
        }
        Ok(Fq {
            buckets: vec![Vec::new(); 1 << cfg.buckets_log],
            cfg,
            flows: Vec::new(),
            free: Vec::new(),
            bands,
            band_nr: 0,
            internal: VecDeque::new(),
            delayed: BTreeSet::new(),
            seq: 0,
            time_next_delayed_flow: u64::MAX,
            unthrottle_latency_ns: 0,
            st: FqStats::default(),
            stats: QdiscStats::default(),
            queued: 0,
            backlog: 0,
            held: VecDeque::new(),
        })
    }

    /// The parameters.
    pub fn config(&self) -> &FqConfig {
        &self.cfg
    }

    /// The kernel's statistics (`tc -s`'s xstats) at `now`.
    pub fn fq_stats(&self, now: Time) -> FqStats {
        let mut st = self.st;
        st.time_next_delayed_flow = self
            .time_next_delayed_flow
            .wrapping_add(self.cfg.timer_slack.as_nanos())
            .wrapping_sub(now.as_nanos()) as i64;
        st.unthrottle_latency_ns = self.unthrottle_latency_ns.min(u32::MAX as u64) as u32;
        st
    }

    fn rate(&self) -> u64 {
        self.cfg.maxrate.unwrap_or(NO_RATE)
    }

    fn flow(&mut self, i: usize) -> &mut Flow {
        self.flows[i].as_mut().expect("live flow")
    }

    fn set_throttled(&mut self, i: usize) {
        self.seq += 1;
        let (seq, f) = (self.seq, self.flows[i].as_mut().expect("live flow"));
        f.at = Where::Throttled(f.time_next_packet, seq);
        self.delayed.insert((f.time_next_packet, seq, i));
        self.st.throttled_flows += 1;
        self.st.throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(f.time_next_packet);
    }

    fn add_tail(&mut self, i: usize, new: bool) {
        let f = self.flows[i].as_mut().expect("live flow");
        f.at = Where::Listed;
        let b = &mut self.bands[f.band];
        if new { &mut b.new_flows } else { &mut b.old_flows }.push_back(i);
    }

    /// The fast path test (`fq_fastpath_check`).
    fn fastpath(&self, tts: u64, now: u64) -> bool {
        if tts > now {
            return false;
        }
        if self.qlen() != 0 {
            let busy = self.st.flows - self.st.inactive_flows - self.st.throttled_flows;
            if busy != 0 || self.internal.len() >= FASTPATH_MAX || self.time_next_delayed_flow <= now {
                return false;
            }
        }
        self.cfg.maxrate.is_none()
    }

    /// `fq_gc` on the bucket of `key`: frees its flows detached for more than [`GC_AGE`].
    fn gc(&mut self, bucket: usize, key: u64, now: Time) {
        let mut freed = 0;
        let mut k = 0;
        while k < self.buckets[bucket].len() {
            let i = self.buckets[bucket][k];
            let f = self.flows[i].as_ref().expect("live flow");
            if f.key != key && f.at == Where::Detached && now > f.age + GC_AGE {
                self.buckets[bucket].swap_remove(k);
                self.flows[i] = None;
                self.free.push(i);
                freed += 1;
            } else {
                k += 1;
            }
        }
        self.st.flows -= freed;
        self.st.inactive_flows -= freed;
        self.st.gc_flows += freed as u64;
    }

    /// `fq_classify`: the flow of `pkt` (None: the fast path).
    fn classify(&mut self, pkt: &Packet, tts: u64, now: Time) -> Option<usize> {
        // Socket pointers are even, orphan keys odd: the two never meet.
        let key = if pkt.sock != 0 {
            pkt.sock << 1
        } else {
            (((pkt.flow_hash & self.cfg.orphan_mask) as u64) << 1) | 1
        };
        if self.fastpath(tts, now.as_nanos()) {
            self.st.fastpath_packets += 1;
            return None;
        }
        let bucket = hash_64(key, self.cfg.buckets_log);
        self.gc(bucket, key, now);
        if let Some(&i) =
            self.buckets[bucket].iter().find(|&&i| self.flows[i].as_ref().is_some_and(|f| f.key == key))
        {
            return Some(i);
        }
        let f = Flow {
            key,
            list: VecDeque::new(),
            tree: BTreeMap::new(),
            credit: self.cfg.initial_quantum as i64,
            band: 0,
            at: Where::Detached,
            age: now,
            time_next_packet: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.flows[i] = Some(f);
                i
            }
            None => {
                self.flows.push(Some(f));
                self.flows.len() - 1
            }
        };
        self.buckets[bucket].push(i);
        self.st.flows += 1;
        self.st.inactive_flows += 1;
        Some(i)
    }

    /// `fq_check_throttled`: releases the flows that are due.
    fn check_throttled(&mut self, now: u64) {
        if self.time_next_delayed_flow > now {
            return;
        }
        let sample = now - self.time_next_delayed_flow;
        if sample > 0 {
            self.unthrottle_latency_ns -= self.unthrottle_latency_ns >> 3;
            self.unthrottle_latency_ns += sample >> 3;
        }
        self.time_next_delayed_flow = u64::MAX;
        while let Some(&(t, seq, i)) = self.delayed.first() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.delayed.remove(&(t, seq, i));
            self.st.throttled_flows -= 1;
            self.add_tail(i, false);
        }
    }

    fn qlen(&self) -> u64 {
        self.queued
    }

    fn took(&mut self, p: &Packet) {
        self.queued -= 1;
        self.backlog -= p.len as u64;
    }

    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.held.pop_front() {
            return Some(p);
        }
        if self.qlen() == 0 {
            return None;
        }
        if let Some(it) = self.internal.pop_front() {
            self.took(&it.pkt);
            return Some(it.pkt);
        }
        let now_ns = now.as_nanos();
        self.check_throttled(now_ns);
        let mut retry = 0;
        loop {
            let b = self.band_nr;
            let band = &mut self.bands[b];
            let from_new = if band.credit <= 0 {
                None
            } else if !band.new_flows.is_empty() {
                Some(true)
            } else if !band.old_flows.is_empty() {
                Some(false)
            } else {
                None
            };
            let Some(from_new) = from_new else {
                // This band is empty or out of credit: the next one, refilled.
                let mut found = false;
                while retry < BANDS {
                    retry += 1;
                    self.band_nr = (self.band_nr + 1) % BANDS;
                    let band = &mut self.bands[self.band_nr];
                    band.credit = (band.credit + band.quantum).min(band.quantum);
                    if band.credit > 0 {
                        found = true;
                        break;
                    }
                    retry = 0;
                }
                if found {
                    continue;
                }
                return None;
            };
            let list = if from_new { &mut band.new_flows } else { &mut band.old_flows };
            let i = *list.front().expect("non-empty list");
            retry = 0;
            let quantum = self.cfg.quantum as i64;
            let f = self.flow(i);
            if f.credit <= 0 {
                f.credit += quantum;
                let band = &mut self.bands[b];
                if from_new { &mut band.new_flows } else { &mut band.old_flows }.pop_front();
                self.add_tail(i, false);
                continue;
            }
            let Some(head) = f.peek() else {
                let band = &mut self.bands[b];
                if from_new { &mut band.new_flows } else { &mut band.old_flows }.pop_front();
                if from_new {
                    // A pass through old_flows first, so new flows cannot starve old ones.
                    self.add_tail(i, false);
                } else {
                    let f = self.flow(i);
                    f.at = Where::Detached;
                    f.age = now;
                }
                continue;
            };
            let tnp = head.tts.max(f.time_next_packet);
            if now_ns < tnp {
                f.time_next_packet = tnp;
                let band = &mut self.bands[b];
                if from_new { &mut band.new_flows } else { &mut band.old_flows }.pop_front();
                self.set_throttled(i);
                continue;
            }
            let mut it = f.pop().expect("peeked");
            let emptied = f.qlen() == 0;
            if let Some(ce) = self.cfg.ce_threshold {
                if now_ns.wrapping_sub(tnp).wrapping_sub(ce.as_nanos()) as i64 > 0 {
                    it.pkt.set_ce();
                    self.st.ce_mark += 1;
                }
            }
            if emptied {
                self.st.inactive_flows += 1;
            }
            self.st.band_pkt_count[it.band as usize] -= 1;
            self.took(&it.pkt);
            let mut plen = it.pkt.len as u64;
            let f = self.flow(i);
            f.credit -= plen as i64;
            self.bands[b].credit -= plen as i64;
            if !self.cfg.pacing {
                return Some(it.pkt);
            }
            let rate = self.rate();
            if it.pkt.tstamp == Time::ZERO {
                // A socket's own pacing rate would lower `rate` here (not modelled).
                if rate <= self.cfg.low_rate_threshold {
                    self.flow(i).credit = 0;
                } else {
                    plen = plen.max(self.cfg.quantum as u64);
                    if self.flow(i).credit > 0 {
                        return Some(it.pkt);
                    }
                }
            }
            if rate != NO_RATE {
                // Rate 0: the whole length in ns, clamped to 1 s below.
                let mut len = plen * 1_000_000_000;
                len = len.checked_div(rate).unwrap_or(len);
                if len > 1_000_000_000 {
                    len = 1_000_000_000;
                    self.st.pkts_too_long += 1;
                }
                let f = self.flow(i);
                if f.time_next_packet != 0 {
                    len -= (len / 2).min(now_ns.saturating_sub(f.time_next_packet));
                }
                f.time_next_packet = now_ns + len;
            }
            return Some(it.pkt);
        }
    }
}

impl Qdisc for Fq {
    fn kind(&self) -> &'static str {
        "fq"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        let band = self.cfg.priomap[(pkt.priority & 15) as usize];
        if self.st.band_pkt_count[band as usize] >= self.cfg.limit {
            self.st.band_drops[band as usize] += 1;
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        let now_ns = now.as_nanos();
        let tts = if pkt.tstamp == Time::ZERO {
            now_ns
        } else {
            let horizon = now_ns.saturating_add(self.cfg.horizon.as_nanos());
            if pkt.tstamp.as_nanos() > horizon {
                if self.cfg.horizon_drop {
                    self.st.horizon_drops += 1;
                    self.stats.drops += 1;
                    return Err(Dropped { pkt, reason: DropReason::TooBig });
                }
                self.st.horizon_caps += 1;
                pkt.tstamp = Time::from_nanos(horizon);
            }
            pkt.tstamp.as_nanos()
        };
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        let it = Item { pkt, tts, band };
        let Some(i) = self.classify(&pkt, tts, now) else {
            self.internal.push_back(it);
            self.queued += 1;
            self.backlog += pkt.len as u64;
            return Ok(());
        };
        let (quantum, refill, flow_limit) =
            (self.cfg.quantum as i64, self.cfg.refill_delay, self.cfg.flow_limit as usize);
        self.seq += 1;
        let seq = self.seq;
        let f = self.flows[i].as_mut().expect("live flow");
        if f.qlen() >= flow_limit {
            self.st.flows_plimit += 1;
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        let was_detached = f.at == Where::Detached;
        if was_detached && now > f.age + refill {
            f.credit = f.credit.max(quantum);
        }
        f.band = band as usize;
        let empty = f.qlen() == 0;
        // Times that never decrease go on the list; an earlier one goes in the tree.
        if f.list.back().is_none_or(|t| tts >= t.tts) {
            f.list.push_back(it);
        } else {
            f.tree.insert((tts, seq), it);
        }
        if was_detached {
            self.add_tail(i, true);
        }
        self.st.band_pkt_count[band as usize] += 1;
        if empty {
            self.st.inactive_flows -= 1;
        }
        self.queued += 1;
        self.backlog += pkt.len as u64;
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let p = self.dequeue_inner(now)?;
        self.stats.on_dequeue(&p); // its backlog and qlen are unused: stats() computes them
        Some(p)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.held.is_empty() {
            let p = self.dequeue_inner(now)?;
            self.held.push_back(p);
        }
        self.held.front()
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        if !self.held.is_empty() || !self.internal.is_empty() {
            return Some(now);
        }
        if self.qlen() == 0 {
            return None;
        }
        if self.st.flows - self.st.inactive_flows - self.st.throttled_flows > 0 {
            return Some(now);
        }
        match self.delayed.first() {
            Some(&(t, _, _)) => Some(Time::from_nanos(t).max(now)),
            None => Some(now),
        }
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.held.drain(..).collect();
        out.extend(self.internal.drain(..).map(|i| i.pkt));
        for f in self.flows.drain(..).flatten() {
            out.extend(f.tree.into_values().map(|i| i.pkt));
            out.extend(f.list.into_iter().map(|i| i.pkt));
        }
        self.free.clear();
        self.buckets.iter_mut().for_each(Vec::clear);
        for b in &mut self.bands {
            b.new_flows.clear();
            b.old_flows.clear();
        }
        self.delayed.clear();
        self.st.flows = 0;
        self.st.inactive_flows = 0;
        self.st.throttled_flows = 0;
        self.st.band_pkt_count = [0; BANDS];
        self.queued = 0;
        self.backlog = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        let held: u64 = self.held.iter().map(|p| p.len as u64).sum();
        QdiscStats {
            qlen: self.queued + self.held.len() as u64,
            backlog_bytes: self.backlog + held,
            ..self.stats
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// Puts the packet back at the head; "sent" counts it once.
    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        self.stats.bytes = self.stats.bytes.saturating_sub(pkt.len as u64);
        self.stats.packets = self.stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        self.stats.requeues += 1;
        self.held.push_front(pkt);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
