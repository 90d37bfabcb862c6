//! CAKE, Common Applications Kept Enhanced (tc-cake(8)), as Linux `net/sched/sch_cake.c` runs it.
//!
//! # What matches the kernel
//!
//! - **Shaper** in deficit mode (`cake_advance_shaper`): every dequeued packet moves the global
//!   and its tin's next-send time on by its overhead-adjusted length at the rate; the global
//!   shaper also keeps the 1.5x "failsafe" schedule. No burst parameter. In `ingress` mode
//!   dropped packets are charged too.
//! - **Overhead** (`cake_calc_overhead`): `overhead`/`mpu`, ATM cells and PTM coding; with an
//!   explicit overhead the link-layer header (`netoff`, 14 bytes on Ethernet) is removed first.
//! - **Tins** of each Diffserv mode with their DSCP maps, thresholds (the tin's own shaper) and
//!   DRR weights; in shaped mode the highest-priority tin that is on schedule goes first, else the
//!   earliest-scheduled one; unshaped, tins share by weighted DRR. `fwmark` and `skb->priority`
//!   naming this qdisc select tins as the kernel does; `wash` clears the DSCP.
//! - **Flows**: 1024 queues per tin, 8-way set-associative hashing with tags (counting
//!   `way_inds`, `way_miss`, `way_cols`), DRR++ with new/old/decaying lists and the sparse/bulk
//!   accounting; host fairness for the dual and triple modes through per-host bulk-flow counts
//!   that divide the flow quantum (with the kernel's random dithering).
//! - **COBALT**: CoDel with the cached inverse square roots and BLUE on overflow; ECN marks CE
//!   instead of dropping; a flow stays in the decaying list until its state has relaxed.
//! - **Memory limit**: over it, the flow with the most bytes queued (any tin) loses its head,
//!   and BLUE's drop probability rises for it.
//! - **split-gso**: a GSO packet is queued as its segments.
//!
//! # What differs
//!
//! - The fattest flow is found by a scan over the active tins' queues instead of the kernel's
//!   lazily rebuilt heap: the same choice, O(tins x 1024) per overflow drop.
//! - `skb->truesize` is estimated as fq_codel's [`truesize`] does.
//! - `nat` hashes flows and hosts on the pre-NAT tuple that the packet's [`crate::NatOrig`]
//!   carries (the simulator's masquerading router fills it in, as conntrack would be asked in
//!   the kernel); a packet without one hashes on its own addresses. The live shaper has no
//!   conntrack table, so there `nat` changes nothing (as in the kernel without conntrack).
//! - The **ACK filter** ([`ack`]) reads the TCP fields of [`crate::TcpInfo`] parsed when the
//!   packet was described; "same connection" is same ports, IP version and flow hash (the
//!   kernel compares the addresses; two connections with equal ports whose 5-tuple hashes
//!   collide in one queue are the only difference). Only IPv4/IPv6 TCP is parsed, not TCP
//!   inside 6in4 (which the kernel special-cases).
//! - `autorate-ingress` follows the kernel's estimator (EWMA of arrival bursts, 15/16 of the
//!   peak, at most every 250 ms).
//! - Filters attached to cake (flow/host overrides by classid) are not consulted.
//! - Random numbers (BLUE, quantum dithering) come from a seeded xorshift, so runs repeat.

mod ack;
mod config;
#[cfg(test)]
mod tests;

pub use config::*;

use crate::fq_codel::truesize;
use crate::packet::Packet;
use crate::qdisc::{DropReason, Dropped, Qdisc, QdiscStats};
use crate::sched::slab::{QueueEnds, QueueSlab};
use crate::time::Time;

const NONE: u16 = u16::MAX;
/// Link-layer header length assumed for the network offset (Ethernet).
const NETOFF: u32 = 14;

/// Which rotation a flow is in (`CAKE_SET_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Set {
    #[default]
    None,
    Sparse,
    /// Counted as sparse, actually in the bulk rotation.
    SparseWait,
    Bulk,
    Decaying,
}

/// COBALT's per-flow state (`struct cobalt_vars`). Times in ns.
#[derive(Clone, Copy, Debug, Default)]
struct Cobalt {
    count: u32,
    rec_inv_sqrt: u32,
    drop_next: i64,
    blue_timer: i64,
    p_drop: u32,
    dropping: bool,
    ecn_marked: bool,
}

#[derive(Clone, Copy, Debug)]
struct Flow {
    q: QueueEnds,
    deficit: i32,
    cvars: Cobalt,
    srchost: u16,
    dsthost: u16,
    set: Set,
    list: u8,
    prev: u16,
    next: u16,
    backlog: u32,
    tag: u32,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            q: QueueEnds::EMPTY,
            deficit: 0,
            cvars: Cobalt::default(),
            srchost: 0,
            dsthost: 0,
            set: Set::None,
            list: LIST_NONE,
            prev: NONE,
            next: NONE,
            backlog: 0,
            tag: 0,
        }
    }
}

const LIST_NONE: u8 = 3;
const NEW: u8 = 0;
const OLD: u8 = 1;
const DECAYING: u8 = 2;

#[derive(Clone, Copy, Debug, Default)]
struct Host {
    src_tag: u32,
    dst_tag: u32,
    src_bulk: u16,
    dst_bulk: u16,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    pkt: Packet,
    adjusted: u32,
    truesize: u32,
}

/// Counters of one tin as `tc -s` prints them (`TCA_CAKE_TIN_STATS_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TinStats {
    /// Bandwidth threshold, bytes/s.
    pub threshold_rate: u64,
    /// Bytes enqueued (the kernel counts them on enqueue).
    pub sent_bytes: u64,
    /// Packets enqueued.
    pub sent_packets: u32,
    /// Bytes queued now.
    pub backlog_bytes: u32,
    /// COBALT target, µs.
    pub target_us: u32,
    /// COBALT interval, µs.
    pub interval_us: u32,
    /// Peak delay EWMA, µs.
    pub peak_delay_us: u32,
    /// Average delay EWMA, µs.
    pub avg_delay_us: u32,
    /// Base (sparse) delay EWMA, µs.
    pub base_delay_us: u32,
    /// Set-associative hash: hits in another way.
    pub way_indirect_hits: u32,
    /// Set-associative hash: new queues taken.
    pub way_misses: u32,
    /// Set-associative hash: all ways busy.
    pub way_collisions: u32,
    /// Packets dropped.
    pub drops: u32,
    /// Packets ECN-marked.
    pub ecn_marked: u32,
    /// ACKs filtered.
    pub ack_drops: u32,
    /// Sparse and decaying flows.
    pub sparse_flows: u32,
    /// Bulk flows.
    pub bulk_flows: u32,
    /// Flows BLUE is acting on.
    pub unresponsive_flows: u32,
    /// Largest packet seen.
    pub max_skblen: u32,
    /// Flow quantum.
    pub flow_quantum: u32,
}

/// CAKE's statistics (`TCA_CAKE_STATS_*`), tins in print order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CakeStats {
    /// Estimated capacity, bytes/s.
    pub capacity_estimate: u64,
    /// Memory limit, bytes.
    pub memory_limit: u32,
    /// Peak memory used, bytes.
    pub memory_used: u32,
    /// Average network header offset.
    pub avg_netoff: u32,
    /// Largest network-layer length seen.
    pub max_netlen: u32,
    /// Largest adjusted length.
    pub max_adjlen: u32,
    /// Smallest network-layer length seen (65535 before any).
    pub min_netlen: u32,
    /// Smallest adjusted length (65535 before any).
    pub min_adjlen: u32,
    /// Per tin.
    pub tins: Vec<TinStats>,
}

impl CakeStats {
    /// The statistics of a CAKE that has seen no packet.
    pub fn idle(cfg: &CakeConfig) -> CakeStats {
        let tins = cfg.tins();
        CakeStats {
            capacity_estimate: cfg.rate,
            memory_limit: cfg.buffer_limit(),
            memory_used: 0,
            avg_netoff: 0,
            max_netlen: 0,
            max_adjlen: 0,
            min_netlen: 65535,
            min_adjlen: 65535,
            tins: cfg.tin_mode.order().iter().map(|&i| tin_stats_idle(&tins[i])).collect(),
        }
    }
}

fn tin_stats_idle(p: &TinParams) -> TinStats {
    TinStats {
        threshold_rate: p.rate,
        target_us: (p.target / 1000) as u32,
        interval_us: (p.interval / 1000) as u32,
        flow_quantum: p.flow_quantum as u32,
        ..TinStats::default()
    }
}

struct Tin {
    p: TinParams,
    flows: Vec<Flow>,
    hosts: Vec<Host>,
    heads: [u16; 3],
    tails: [u16; 3],
    time_next: i64,
    tin_deficit: i32,
    backlog: u32,
    sparse: u16,
    bulk: u16,
    decaying: u16,
    unresponsive: u16,
    st: TinStats,
    avg_delay: u64,
    peak_delay: u64,
    base_delay: u64,
}

impl Tin {
    fn new() -> Tin {
        Tin {
            p: TinParams::default(),
            flows: vec![Flow::default(); QUEUES],
            hosts: vec![Host::default(); QUEUES],
            heads: [NONE; 3],
            tails: [NONE; 3],
            time_next: 0,
            tin_deficit: 0,
            backlog: 0,
            sparse: 0,
            bulk: 0,
            decaying: 0,
            unresponsive: 0,
            st: TinStats::default(),
            avg_delay: 0,
            peak_delay: 0,
            base_delay: 0,
        }
    }

    fn active(&self) -> bool {
        self.sparse + self.bulk > 0
    }

    fn unlink(&mut self, i: u16) {
        let f = self.flows[i as usize];
        if f.list == LIST_NONE {
            return;
        }
        let l = f.list as usize;
        match f.prev {
            NONE => self.heads[l] = f.next,
            p => self.flows[p as usize].next = f.next,
        }
        match f.next {
            NONE => self.tails[l] = f.prev,
            n => self.flows[n as usize].prev = f.prev,
        }
        let f = &mut self.flows[i as usize];
        f.list = LIST_NONE;
        f.prev = NONE;
        f.next = NONE;
    }

    /// `list_move_tail` (or `list_add_tail`).
    fn push_tail(&mut self, i: u16, list: u8) {
        self.unlink(i);
        let l = list as usize;
        let tail = self.tails[l];
        {
            let f = &mut self.flows[i as usize];
            f.list = list;
            f.prev = tail;
            f.next = NONE;
        }
        match tail {
            NONE => self.heads[l] = i,
            t => self.flows[t as usize].next = i,
        }
        self.tails[l] = i;
    }

    fn dec_src(&mut self, i: usize, mode: FlowMode) {
        let h = self.flows[i].srchost as usize;
        if mode.dual_src() && self.hosts[h].src_bulk > 0 {
            self.hosts[h].src_bulk -= 1;
        }
    }
    fn inc_src(&mut self, i: usize, mode: FlowMode) {
        let h = self.flows[i].srchost as usize;
        if mode.dual_src() && (self.hosts[h].src_bulk as usize) < QUEUES {
            self.hosts[h].src_bulk += 1;
        }
    }
    fn dec_dst(&mut self, i: usize, mode: FlowMode) {
        let h = self.flows[i].dsthost as usize;
        if mode.dual_dst() && self.hosts[h].dst_bulk > 0 {
            self.hosts[h].dst_bulk -= 1;
        }
    }
    fn inc_dst(&mut self, i: usize, mode: FlowMode) {
        let h = self.flows[i].dsthost as usize;
        if mode.dual_dst() && (self.hosts[h].dst_bulk as usize) < QUEUES {
            self.hosts[h].dst_bulk += 1;
        }
    }

    /// `cake_hash`: the queue of a flow with these hashes, set-associatively.
    fn hash(&mut self, mode: FlowMode, flow_hash: u32, src: u32, dst: u32) -> usize {
        if mode == FlowMode::Flowblind {
            return 0;
        }
        let m = mode as u8;
        let mut fh = if m & 4 != 0 { flow_hash } else { 0 };
        if m & 4 == 0 {
            if m & 1 != 0 {
                fh ^= src;
            }
            if m & 2 != 0 {
                fh ^= dst;
            }
        }
        let reduced = (fh as usize) % QUEUES;
        if self.flows[reduced].tag == fh && self.flows[reduced].set != Set::None {
            return reduced;
        }
        let inner = reduced % SET_WAYS;
        let outer = reduced - inner;
        let (mut alloc_src, mut alloc_dst) = (false, false);
        let mut k = inner;
        let mut found = None;
        for i in 0..SET_WAYS {
            let idx = outer + k;
            if self.flows[idx].tag == fh {
                if i > 0 {
                    self.st.way_indirect_hits += 1;
                }
                if self.flows[idx].set == Set::None {
                    alloc_src = mode.dual_src();
                    alloc_dst = mode.dual_dst();
                }
                found = Some(idx);
                break;
            }
            k = (k + 1) % SET_WAYS;
        }
        let idx = match found {
            Some(i) => i,
            None => {
                alloc_src = mode.dual_src();
                alloc_dst = mode.dual_dst();
                let mut empty = None;
                for _ in 0..SET_WAYS {
                    if self.flows[outer + k].set == Set::None {
                        empty = Some(outer + k);
                        break;
                    }
                    k = (k + 1) % SET_WAYS;
                }
                match empty {
                    Some(i) => {
                        self.st.way_misses += 1;
                        i
                    }
                    None => {
                        self.st.way_collisions += 1;
                        let i = outer + k;
                        if self.flows[i].set == Set::Bulk {
                            self.dec_src(i, mode);
                            self.dec_dst(i, mode);
                        }
                        i
                    }
                }
            }
        };
        self.flows[idx].tag = fh;
        if alloc_src {
            let h = self.host_slot(src, true);
            self.flows[idx].srchost = h as u16;
            if self.flows[idx].set == Set::Bulk {
                self.inc_src(idx, mode);
            }
        }
        if alloc_dst {
            let h = self.host_slot(dst, false);
            self.flows[idx].dsthost = h as u16;
            if self.flows[idx].set == Set::Bulk {
                self.inc_dst(idx, mode);
            }
        }
        idx
    }

    /// The host table slot of a source (or destination) host hash, set-associatively.
    fn host_slot(&mut self, hash: u32, src: bool) -> usize {
        let idx = (hash as usize) % QUEUES;
        let inner = idx % SET_WAYS;
        let outer = idx - inner;
        let tag = |h: &Host| if src { h.src_tag } else { h.dst_tag };
        let bulk = |h: &Host| if src { h.src_bulk } else { h.dst_bulk };
        let mut k = inner;
        for _ in 0..SET_WAYS {
            if tag(&self.hosts[outer + k]) == hash {
                return outer + k;
            }
            k = (k + 1) % SET_WAYS;
        }
        for _ in 0..SET_WAYS {
            if bulk(&self.hosts[outer + k]) == 0 {
                break;
            }
            k = (k + 1) % SET_WAYS;
        }
        let h = &mut self.hosts[outer + k];
        if src {
            h.src_tag = hash;
        } else {
            h.dst_tag = hash;
        }
        outer + k
    }
}

/// `cake_ewma`.
fn ewma(avg: u64, sample: u64, shift: u32) -> u64 {
    avg - (avg >> shift) + (sample >> shift)
}

/// The CAKE qdisc. See the [module docs](self).
pub struct Cake {
    cfg: CakeConfig,
    handle_major: u16,
    tins: Vec<Tin>,
    tin_cnt: usize,
    slab: QueueSlab<Entry>,
    rate_ns: u64,
    rate_shft: u8,
    time_next: i64,
    failsafe_next: i64,
    buffer_used: u32,
    buffer_max_used: u32,
    buffer_limit: u32,
    cur_tin: usize,
    qlen: u32,
    stats: QdiscStats,
    dropped: std::collections::VecDeque<Dropped>,
    rng: u64,
    inv_sqrt_cache: [u32; 16],
    quantum_div: Vec<u16>,
    // capacity estimate
    last_packet_time: i64,
    avg_window_begin: i64,
    avg_packet_interval: u64,
    avg_window_bytes: u64,
    avg_peak_bandwidth: u64,
    last_reconfig_time: i64,
    avg_netoff: u32,
    max_netlen: u32,
    max_adjlen: u32,
    min_netlen: u32,
    min_adjlen: u32,
}

fn newton_step(v: &mut Cobalt) {
    let invsqrt = v.rec_inv_sqrt as u64;
    let invsqrt2 = (invsqrt * invsqrt) >> 32;
    let mut val = (3u64 << 32).wrapping_sub(v.count as u64 * invsqrt2);
    val >>= 2;
    val = (val * invsqrt) >> (32 - 2 + 1);
    v.rec_inv_sqrt = val as u32;
}

impl Cake {
    /// A CAKE with this configuration; `handle_major` is its handle's major (for
    /// `skb->priority` tin selection).
    pub fn new(cfg: CakeConfig, handle_major: u16) -> Cake {
        let mut cache = [0u32; 16];
        let mut v = Cobalt { rec_inv_sqrt: u32::MAX, ..Cobalt::default() };
        cache[0] = u32::MAX;
        for c in 1..16 {
            v.count = c;
            for _ in 0..4 {
                newton_step(&mut v);
            }
            cache[c as usize] = v.rec_inv_sqrt;
        }
        let mut quantum_div = vec![u16::MAX; QUEUES + 1];
        for (i, q) in quantum_div.iter_mut().enumerate().skip(1) {
            *q = (65535 / i) as u16;
        }
        let mut c = Cake {
            cfg,
            handle_major,
            tins: (0..MAX_TINS).map(|_| Tin::new()).collect(),
            tin_cnt: 1,
            slab: QueueSlab::default(),
            rate_ns: 0,
            rate_shft: 0,
            time_next: 0,
            failsafe_next: 0,
            buffer_used: 0,
            buffer_max_used: 0,
            buffer_limit: 0,
            cur_tin: 0,
            qlen: 0,
            stats: QdiscStats::default(),
            dropped: std::collections::VecDeque::with_capacity(64),
            rng: 0x9E37_79B9_7F4A_7C15,
            inv_sqrt_cache: cache,
            quantum_div,
            last_packet_time: 0,
            avg_window_begin: 0,
            avg_packet_interval: 0,
            avg_window_bytes: 0,
            avg_peak_bandwidth: cfg.rate,
            last_reconfig_time: 0,
            avg_netoff: 0,
            max_netlen: 0,
            max_adjlen: 0,
            min_netlen: 65535,
            min_adjlen: 65535,
        };
        c.reconfigure();
        c
    }

    /// The configuration in force.
    pub fn config(&self) -> &CakeConfig {
        &self.cfg
    }

    /// `cake_change`: a new configuration; packets in tins the new mode lacks are dropped
    /// (returned), as `cake_clear_tin` frees them.
    pub fn change(&mut self, cfg: CakeConfig) -> Vec<Packet> {
        if cfg.overhead_flag != self.cfg.overhead_flag || cfg.overhead != self.cfg.overhead {
            self.max_netlen = 0;
            self.max_adjlen = 0;
            self.min_netlen = 65535;
            self.min_adjlen = 65535;
        }
        self.cfg = cfg;
        self.reconfigure()
    }

    fn reconfigure(&mut self) -> Vec<Packet> {
        let params = self.cfg.tins();
        self.tin_cnt = params.len();
        for (t, p) in self.tins.iter_mut().zip(&params) {
            t.p = *p;
        }
        let mut freed = Vec::new();
        for t in self.tin_cnt..MAX_TINS {
            freed.extend(self.clear_tin(t));
            self.tins[t].p.mtu_time = params[0].mtu_time;
        }
        self.rate_ns = params[0].rate_ns;
        self.rate_shft = params[0].rate_shft;
        self.buffer_limit = self.cfg.buffer_limit();
        if self.cur_tin >= self.tin_cnt {
            self.cur_tin = 0;
        }
        freed
    }

    fn clear_tin(&mut self, t: usize) -> Vec<Packet> {
        let mut out = Vec::new();
        for i in 0..QUEUES {
            while let Some(e) = self.pop_flow(t, i) {
                out.push(e.pkt);
            }
        }
        out
    }

    fn next_rand(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 32) as u32
    }

    fn invsqrt(&self, v: &mut Cobalt) {
        if v.count < 16 {
            v.rec_inv_sqrt = self.inv_sqrt_cache[v.count as usize];
        } else {
            newton_step(v);
        }
    }

    fn control(t: i64, interval: u64, rec_inv_sqrt: u32) -> i64 {
        t + ((interval as u128 * rec_inv_sqrt as u128) >> 32) as i64
    }

    fn flow_quantum(&mut self, t: usize, i: usize) -> i32 {
        let mode = self.cfg.flow_mode;
        let tin = &self.tins[t];
        let f = &tin.flows[i];
        let mut load = 1u16;
        if mode.dual_src() {
            load = load.max(tin.hosts[f.srchost as usize].src_bulk);
        }
        if mode.dual_dst() {
            load = load.max(tin.hosts[f.dsthost as usize].dst_bulk);
        }
        let q = tin.p.flow_quantum as u32 * self.quantum_div[load as usize] as u32;
        let r = self.next_rand() & 0xFFFF;
        ((q + r) >> 16) as i32
    }

    fn pop_flow(&mut self, t: usize, i: usize) -> Option<Entry> {
        let (_, e) = self.slab.pop_front(&mut self.tins[t].flows[i].q)?;
        let len = e.pkt.len;
        let tin = &mut self.tins[t];
        tin.flows[i].backlog -= len;
        tin.backlog -= len;
        self.buffer_used = self.buffer_used.saturating_sub(e.truesize);
        self.qlen -= 1;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(len as u64);
        self.stats.qlen = self.qlen as u64;
        Some(e)
    }

    /// `cake_select_tin`.
    fn select_tin(&self, pkt: &mut Packet) -> usize {
        let order = self.cfg.tin_mode.order();
        let mask = self.cfg.fwmark;
        let mark = if mask != 0 { (pkt.mark & mask) >> mask.trailing_zeros() } else { 0 };
        let dscp = pkt.dscp();
        if self.cfg.wash && dscp != 0 {
            pkt.dsfield &= 3;
        }
        let tin = if self.cfg.tin_mode == TinMode::Besteffort {
            0
        } else if mark != 0 && mark as usize <= self.tin_cnt {
            order[mark as usize - 1]
        } else if (pkt.priority >> 16) as u16 == self.handle_major
            && (pkt.priority & 0xFFFF) > 0
            && (pkt.priority & 0xFFFF) as usize <= self.tin_cnt
        {
            order[(pkt.priority & 0xFFFF) as usize - 1]
        } else {
            self.cfg.tin_mode.tin_of_dscp(dscp)
        };
        if tin >= self.tin_cnt {
            0
        } else {
            tin
        }
    }

    fn adjusted(&mut self, len: u32) -> u32 {
        self.avg_netoff = ewma(self.avg_netoff as u64, (NETOFF as u64) << 16, 8) as u32;
        let net = if self.cfg.overhead_flag { len.saturating_sub(NETOFF) } else { len };
        self.max_netlen = self.max_netlen.max(net);
        self.min_netlen = self.min_netlen.min(net);
        let adj = self.cfg.adjusted_len(len, NETOFF);
        self.max_adjlen = self.max_adjlen.max(adj);
        self.min_adjlen = self.min_adjlen.min(adj);
        adj
    }

    /// `cake_advance_shaper`.
    fn advance_shaper(&mut self, t: usize, len: u32, now: i64, drop: bool) {
        if self.rate_ns == 0 {
            return;
        }
        let tin = &mut self.tins[t];
        let tin_dur = tin.p.duration(len) as i64;
        let global = ((len as u128 * self.rate_ns as u128) >> self.rate_shft) as i64;
        if tin.time_next < now {
            tin.time_next += tin_dur;
        } else if tin.time_next < now + tin_dur {
            tin.time_next = now + tin_dur;
        }
        self.time_next += global;
        if !drop {
            self.failsafe_next += global + (global >> 1);
        }
    }

    fn queue_one(&mut self, t: usize, idx: usize, pkt: Packet, now: Time) {
        let adjusted = self.adjusted(pkt.len);
        let ts = truesize(&pkt);
        let mut pkt = pkt;
        pkt.enqueue_time = now;
        let e = Entry { pkt, adjusted, truesize: ts };
        self.slab.push_back(&mut self.tins[t].flows[idx].q, e);
        let tin = &mut self.tins[t];
        tin.flows[idx].backlog += pkt.len;
        tin.backlog += pkt.len;
        tin.st.sent_packets = tin.st.sent_packets.wrapping_add(1);
        tin.st.sent_bytes += pkt.len as u64;
        self.buffer_used = self.buffer_used.saturating_add(ts);
        self.qlen += 1;
        self.stats.backlog_bytes += pkt.len as u64;
        self.stats.qlen = self.qlen as u64;
        self.avg_window_bytes += pkt.len as u64;
    }

    /// Accounting for an ACK the filter took out of flow `i` of tin `t`: it leaves the backlog
    /// and counts as a drop and in `ack_drop`, not in the tin's `drops`.
    fn ack_dropped(&mut self, t: usize, i: usize, e: Entry, now: i64) {
        let len = e.pkt.len;
        let tin = &mut self.tins[t];
        tin.flows[i].backlog -= len;
        tin.backlog -= len;
        tin.st.ack_drops = tin.st.ack_drops.wrapping_add(1);
        self.buffer_used = self.buffer_used.saturating_sub(e.truesize);
        self.qlen -= 1;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(len as u64);
        self.stats.qlen = self.qlen as u64;
        self.stats.drops += 1;
        self.avg_window_bytes = self.avg_window_bytes.saturating_sub(len as u64);
        if self.cfg.ingress {
            self.advance_shaper(t, e.adjusted, now, true);
        }
        self.dropped.push_back(Dropped { pkt: e.pkt, reason: DropReason::AckFilter });
    }

    /// `cake_drop`: the head of the flow with the largest backlog. Returns (tin, flow).
    fn drop_fattest(&mut self, now: i64) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize, u32)> = None;
        for t in 0..self.tin_cnt {
            if self.tins[t].backlog == 0 {
                continue;
            }
            for (i, f) in self.tins[t].flows.iter().enumerate() {
                if f.backlog > best.map_or(0, |b| b.2) {
                    best = Some((t, i, f.backlog));
                }
            }
        }
        let (t, i, _) = best?;
        let e = self.pop_flow(t, i)?;
        let p = self.tins[t].p;
        let v = &mut self.tins[t].flows[i].cvars;
        // cobalt_queue_full
        let mut up = false;
        if now - v.blue_timer > p.target as i64 {
            up = v.p_drop == 0;
            v.p_drop = v.p_drop.wrapping_add(1 << 24);
            if v.p_drop < (1 << 24) {
                v.p_drop = u32::MAX;
            }
            v.blue_timer = now;
        }
        v.dropping = true;
        v.drop_next = now;
        if v.count == 0 {
            v.count = 1;
        }
        let tin = &mut self.tins[t];
        if up {
            tin.unresponsive += 1;
        }
        tin.st.drops += 1;
        self.stats.drops += 1;
        if self.cfg.ingress {
            self.advance_shaper(t, e.adjusted, now, true);
        }
        self.dropped.push_back(Dropped { pkt: e.pkt, reason: DropReason::MemoryLimit });
        Some((t, i))
    }

    fn autorate(&mut self, now: i64) {
        if !self.cfg.autorate {
            self.avg_window_bytes = 0;
            self.last_packet_time = now;
            return;
        }
        let interval = ((now - self.last_packet_time).max(0) as u64).min(1_000_000_000);
        let shift = if interval > self.avg_packet_interval { 2 } else { 8 };
        self.avg_packet_interval = ewma(self.avg_packet_interval, interval, shift);
        self.last_packet_time = now;
        if interval > self.avg_packet_interval {
            let window = (now - self.avg_window_begin).max(1) as u128;
            let b = (self.avg_window_bytes as u128 * 1_000_000_000 / window) as u64;
            let shift = if b > self.avg_peak_bandwidth { 2 } else { 8 };
            self.avg_peak_bandwidth = ewma(self.avg_peak_bandwidth, b, shift);
            self.avg_window_bytes = 0;
            self.avg_window_begin = now;
            if now > self.last_reconfig_time + 250_000_000 {
                self.cfg.rate = (self.avg_peak_bandwidth * 15) >> 4;
                self.last_reconfig_time = now;
                self.reconfigure();
            }
        }
    }

    /// `cobalt_should_drop` for the packet at the head of flow `i` of tin `t`.
    fn should_drop(&mut self, t: usize, i: usize, pkt: &mut Packet, now: i64, bulk_flows: u32) -> bool {
        let p = self.tins[t].p;
        let mut v = self.tins[t].flows[i].cvars;
        let sojourn = (now - pkt.enqueue_time.as_nanos() as i64).max(0) as u64;
        let mut schedule = now - v.drop_next;
        let over =
            sojourn > p.target && sojourn > p.mtu_time * bulk_flows as u64 * 2 && sojourn > p.mtu_time * 4;
        let mut next_due = v.count != 0 && schedule >= 0;
        let mut drop = false;
        v.ecn_marked = false;
        if over {
            if !v.dropping {
                v.dropping = true;
                v.drop_next = Self::control(now, p.interval, v.rec_inv_sqrt);
            }
            if v.count == 0 {
                v.count = 1;
            }
        } else if v.dropping {
            v.dropping = false;
        }
        if next_due && v.dropping {
            v.ecn_marked = pkt.set_ce();
            drop = !v.ecn_marked;
            v.count = v.count.saturating_add(1);
            self.invsqrt(&mut v);
            v.drop_next = Self::control(v.drop_next, p.interval, v.rec_inv_sqrt);
            schedule = now - v.drop_next;
        } else {
            while next_due {
                v.count -= 1;
                self.invsqrt(&mut v);
                v.drop_next = Self::control(v.drop_next, p.interval, v.rec_inv_sqrt);
                schedule = now - v.drop_next;
                next_due = v.count != 0 && schedule >= 0;
            }
        }
        if v.p_drop != 0 && self.next_rand() < v.p_drop {
            drop = true;
        }
        if v.count == 0 {
            v.drop_next = now + p.interval as i64;
        } else if schedule > 0 && !drop {
            v.drop_next = now;
        }
        self.tins[t].flows[i].cvars = v;
        drop
    }

    /// `cobalt_queue_empty`; true if BLUE went quiescent.
    fn queue_empty(&mut self, t: usize, i: usize, now: i64) -> bool {
        let p = self.tins[t].p;
        let mut v = self.tins[t].flows[i].cvars;
        let mut down = false;
        if v.p_drop != 0 && now - v.blue_timer > p.target as i64 {
            v.p_drop = v.p_drop.saturating_sub(1 << 20);
            v.blue_timer = now;
            down = v.p_drop == 0;
        }
        v.dropping = false;
        if v.count != 0 && now - v.drop_next >= 0 {
            v.count -= 1;
            self.invsqrt(&mut v);
            v.drop_next = Self::control(v.drop_next, p.interval, v.rec_inv_sqrt);
        }
        self.tins[t].flows[i].cvars = v;
        down
    }

    fn dequeue_inner(&mut self, now_t: Time) -> Option<Packet> {
        let now = now_t.as_nanos() as i64;
        let mode = self.cfg.flow_mode;
        // Bounded: every pass either delivers, drops a packet or retires an empty flow.
        let mut guard = 0u32;
        // Only the first flow looked at in a call may come from the decaying list.
        let mut first = true;
        'begin: loop {
            guard += 1;
            if self.qlen == 0 || guard > 4 * (QUEUES as u32) * (MAX_TINS as u32) + 2 * self.qlen {
                return None;
            }
            if self.time_next > now && self.failsafe_next > now {
                self.stats.overlimits += 1;
                return None;
            }
            let mut t = self.cur_tin;
            if self.rate_ns == 0 {
                let (mut wrapped, mut empty) = (false, true);
                while self.tins[t].tin_deficit < 0 || !self.tins[t].active() {
                    if self.tins[t].tin_deficit <= 0 {
                        self.tins[t].tin_deficit += self.tins[t].p.tin_quantum as i32;
                    }
                    if self.tins[t].active() {
                        empty = false;
                    }
                    t += 1;
                    if t >= self.tin_cnt {
                        t = 0;
                        if wrapped {
                            if empty {
                                return None;
                            }
                        } else {
                            wrapped = true;
                        }
                    }
                }
            } else {
                let mut best = i64::MAX;
                let mut best_tin = 0;
                for (i, b) in self.tins[..self.tin_cnt].iter().enumerate() {
                    if b.active() {
                        let ttp = b.time_next - now;
                        if ttp <= 0 || ttp <= best {
                            best = ttp;
                            best_tin = i;
                        }
                    }
                }
                t = best_tin;
                if !self.tins[t].active() {
                    return None;
                }
            }
            self.cur_tin = t;
            // retry:
            loop {
                let tin = &self.tins[t];
                let list = if first && tin.heads[DECAYING as usize] != NONE {
                    DECAYING
                } else if tin.heads[NEW as usize] != NONE {
                    NEW
                } else if tin.heads[OLD as usize] != NONE {
                    OLD
                } else if tin.heads[DECAYING as usize] != NONE {
                    DECAYING
                } else {
                    continue 'begin;
                };
                let i = tin.heads[list as usize] as usize;
                first = false;
                if self.tins[t].flows[i].deficit <= 0 {
                    let tin = &mut self.tins[t];
                    if tin.flows[i].set == Set::Sparse {
                        if !tin.flows[i].q.is_empty() {
                            tin.sparse -= 1;
                            tin.bulk += 1;
                            tin.inc_src(i, mode);
                            tin.inc_dst(i, mode);
                            tin.flows[i].set = Set::Bulk;
                        } else {
                            tin.flows[i].set = Set::SparseWait;
                        }
                    }
                    let q = self.flow_quantum(t, i);
                    let tin = &mut self.tins[t];
                    tin.flows[i].deficit += q;
                    tin.push_tail(i as u16, OLD);
                    continue;
                }
                // Retrieve a packet via the AQM.
                loop {
                    let Some(mut e) = self.pop_flow(t, i) else {
                        if self.queue_empty(t, i, now) {
                            self.tins[t].unresponsive = self.tins[t].unresponsive.saturating_sub(1);
                        }
                        let v = self.tins[t].flows[i].cvars;
                        let tin = &mut self.tins[t];
                        if v.p_drop != 0 || v.count != 0 || now < v.drop_next {
                            tin.push_tail(i as u16, DECAYING);
                            match tin.flows[i].set {
                                Set::Bulk => {
                                    tin.bulk -= 1;
                                    tin.dec_src(i, mode);
                                    tin.dec_dst(i, mode);
                                    tin.decaying += 1;
                                }
                                Set::Sparse | Set::SparseWait => {
                                    tin.sparse -= 1;
                                    tin.decaying += 1;
                                }
                                _ => {}
                            }
                            tin.flows[i].set = Set::Decaying;
                        } else {
                            tin.unlink(i as u16);
                            match tin.flows[i].set {
                                Set::Sparse | Set::SparseWait => tin.sparse -= 1,
                                Set::Bulk => {
                                    tin.bulk -= 1;
                                    tin.dec_src(i, mode);
                                    tin.dec_dst(i, mode);
                                }
                                _ => tin.decaying = tin.decaying.saturating_sub(1),
                            }
                            tin.flows[i].set = Set::None;
                        }
                        continue 'begin;
                    };
                    let bulk = if self.cfg.ingress { self.tins[t].bulk as u32 } else { 0 };
                    let drop = self.should_drop(t, i, &mut e.pkt, now, bulk);
                    if !drop || self.tins[t].flows[i].q.is_empty() {
                        // Deliver (the last packet of a queue may be marked, never dropped).
                        let tin = &mut self.tins[t];
                        if tin.flows[i].cvars.ecn_marked {
                            tin.st.ecn_marked += 1;
                        }
                        let delay = (now - e.pkt.enqueue_time.as_nanos() as i64).max(0) as u64;
                        tin.avg_delay = ewma(tin.avg_delay, delay, 8);
                        tin.peak_delay =
                            ewma(tin.peak_delay, delay, if delay > tin.peak_delay { 2 } else { 8 });
                        tin.base_delay =
                            ewma(tin.base_delay, delay, if delay < tin.base_delay { 2 } else { 8 });
                        self.advance_shaper(t, e.adjusted, now, false);
                        let tin = &mut self.tins[t];
                        tin.flows[i].deficit -= e.adjusted as i32;
                        tin.tin_deficit -= e.adjusted as i32;
                        self.stats.bytes += e.pkt.len as u64;
                        self.stats.packets += 1;
                        return Some(e.pkt);
                    }
                    if self.cfg.ingress {
                        self.advance_shaper(t, e.adjusted, now, true);
                        let tin = &mut self.tins[t];
                        tin.flows[i].deficit -= e.adjusted as i32;
                        tin.tin_deficit -= e.adjusted as i32;
                    }
                    self.tins[t].st.drops += 1;
                    self.stats.drops += 1;
                    self.dropped.push_back(Dropped { pkt: e.pkt, reason: DropReason::Aqm });
                    if self.cfg.ingress {
                        break;
                    }
                }
            }
        }
    }

    /// Statistics as `tc -s` prints them.
    pub fn xstats(&self) -> CakeStats {
        let order = self.cfg.tin_mode.order();
        CakeStats {
            capacity_estimate: self.avg_peak_bandwidth,
            memory_limit: self.buffer_limit,
            memory_used: self.buffer_max_used,
            avg_netoff: (self.avg_netoff + 0x8000) >> 16,
            max_netlen: self.max_netlen.min(65535),
            max_adjlen: self.max_adjlen.min(65535),
            min_netlen: self.min_netlen.min(65535),
            min_adjlen: self.min_adjlen.min(65535),
            tins: order
                .iter()
                .map(|&i| {
                    let b = &self.tins[i];
                    TinStats {
                        backlog_bytes: b.backlog,
                        peak_delay_us: (b.peak_delay / 1000) as u32,
                        avg_delay_us: (b.avg_delay / 1000) as u32,
                        base_delay_us: (b.base_delay / 1000) as u32,
                        sparse_flows: (b.sparse + b.decaying) as u32,
                        bulk_flows: b.bulk as u32,
                        unresponsive_flows: b.unresponsive as u32,
                        ..b.st
                    }
                    .with_params(&b.p)
                })
                .collect(),
        }
    }
}

impl TinStats {
    fn with_params(mut self, p: &TinParams) -> TinStats {
        let idle = tin_stats_idle(p);
        self.threshold_rate = idle.threshold_rate;
        self.target_us = idle.target_us;
        self.interval_us = idle.interval_us;
        self.flow_quantum = idle.flow_quantum;
        self
    }
}

impl Qdisc for Cake {
    fn kind(&self) -> &'static str {
        "cake"
    }

    fn enqueue(&mut self, pkt: Packet, now_t: Time) -> Result<(), Dropped> {
        let now = now_t.as_nanos() as i64;
        let mut pkt = pkt;
        let t = self.select_tin(&mut pkt);
        // `nat`: hash on the tuple conntrack saw before NAT rewrote it (`cake_update_flowkeys`).
        let (fh, sh, dh) = match pkt.nat_orig {
            Some(o) if self.cfg.nat => (o.flow_hash, o.src_host_hash, o.dst_host_hash),
            _ => (pkt.flow_hash, pkt.src_host_hash, pkt.dst_host_hash),
        };
        let idx = self.tins[t].hash(self.cfg.flow_mode, fh, sh, dh);
        // Ensure the shaper state is not stale.
        if self.tins[t].backlog == 0 {
            if self.tins[t].time_next < now {
                self.tins[t].time_next = now;
            }
            if self.qlen == 0 {
                if self.time_next < now {
                    self.failsafe_next = now;
                    self.time_next = now;
                } else if self.time_next > now && self.failsafe_next > now {
                    self.stats.overlimits += 1;
                }
            }
        }
        let tin = &mut self.tins[t];
        tin.st.max_skblen = tin.st.max_skblen.max(pkt.len);
        let segs = pkt.gso_segs as u32;
        let size = pkt.gso_size;
        if self.cfg.split_gso && segs > 1 && size > 0 && pkt.len > size * (segs - 1) {
            let last = pkt.len - size * (segs - 1);
            for s in 0..segs {
                let mut seg = pkt;
                seg.len = if s + 1 < segs { size } else { last };
                seg.gso_segs = 1;
                seg.gso_size = 0;
                self.queue_one(t, idx, seg, now_t);
            }
        } else {
            self.queue_one(t, idx, pkt, now_t);
            if self.cfg.ack_filter != AckFilter::None {
                let aggressive = self.cfg.ack_filter == AckFilter::Aggressive;
                if let Some(e) = self.ack_filter(t, idx, aggressive) {
                    self.ack_dropped(t, idx, e, now);
                }
            }
        }
        self.autorate(now);
        let mode = self.cfg.flow_mode;
        let set = self.tins[t].flows[idx].set;
        if set == Set::None || set == Set::Decaying {
            let tin = &mut self.tins[t];
            if set == Set::Decaying {
                tin.decaying -= 1;
            }
            tin.push_tail(idx as u16, NEW);
            tin.flows[idx].set = Set::Sparse;
            tin.sparse += 1;
            let q = self.flow_quantum(t, idx);
            self.tins[t].flows[idx].deficit = q;
        } else if set == Set::SparseWait {
            let tin = &mut self.tins[t];
            tin.flows[idx].set = Set::Bulk;
            tin.sparse -= 1;
            tin.bulk += 1;
            tin.inc_src(idx, mode);
            tin.inc_dst(idx, mode);
        }
        self.buffer_max_used = self.buffer_max_used.max(self.buffer_used);
        while self.buffer_used > self.buffer_limit || self.qlen > SCH_LIMIT * 4 {
            if self.drop_fattest(now).is_none() {
                break;
            }
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.dequeue_inner(now)
    }

    fn peek(&mut self, _now: Time) -> Option<&Packet> {
        // CAKE decides at dequeue time (qdisc_peek_dequeued in the kernel); callers of peek
        // get the head of the current tin's first flow as an estimate.
        let tin = &self.tins[self.cur_tin];
        let head = [NEW, OLD].iter().map(|&l| tin.heads[l as usize]).find(|&h| h != NONE)?;
        self.slab.front(&tin.flows[head as usize].q).map(|e| &e.pkt)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        if self.qlen == 0 {
            return None;
        }
        let n = now.as_nanos() as i64;
        if self.time_next > n && self.failsafe_next > n {
            Some(Time::from_nanos(self.time_next.min(self.failsafe_next) as u64))
        } else {
            Some(now)
        }
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out = Vec::new();
        for t in 0..MAX_TINS {
            out.extend(self.clear_tin(t));
        }
        out
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }
}
