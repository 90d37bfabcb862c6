//! CoDel, the Controlled-Delay AQM (RFC 8289), as the algorithm state shared with fq_codel and as
//! the `codel` qdisc (tc-codel(8)).
//!
//! # Matching the kernel
//!
//! The control law, the Newton iteration for `1/sqrt(count)`, the re-entry rule and the order of
//! state changes follow Linux `include/net/codel_impl.h`, so a packet sequence produces the same
//! drop and mark decisions.
//!
//! That includes the kernel's clock: CoDel's state is kept in 1024-ns units in a `u32` with
//! wrap-safe comparisons (`CODEL_SHIFT`), so the 5 ms target is really 4882 units = 4.999168 ms and
//! sojourn times are truncated to 1.024 µs. An exact-nanosecond version was tried first (commit
//! 97849b1): it is statistically the same, but each control-law step rounds differently, the
//! drop schedule drifts by about 1 µs per drop, and in 160 of 200 five-second overload traces
//! (`tests/leafb_codel_kernel_units.rs`) a drop eventually moved to a neighbouring dequeue. Sluice
//! therefore uses the kernel's units inside the algorithm; the API stays in [`Time`] and [`Span`].
//! Like the kernel, a queue idle for more than ~36 minutes can see one stale comparison.
//!
//! # Queue accounting
//!
//! The sojourn time is measured from the moment the packet entered *this* qdisc (the kernel's
//! `codel_set_enqueue_time`), not from `Packet::enqueue_time`, which the engine sets at the outermost
//! qdisc. The "backlog at most one MTU" rule (RFC 8289 §5.4 / kernel `params->mtu`) compares the
//! backlog left after the head packet was removed with `mtu` (the device's `psched_mtu`, 1514 for
//! Ethernet).

use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};
use std::collections::VecDeque;

/// RFC 8289 §4.4: the default acceptable standing queue delay.
pub const DEFAULT_TARGET: Span = Span::from_millis(5);
/// RFC 8289 §4.5: the default interval (on the order of a worst-case RTT).
pub const DEFAULT_INTERVAL: Span = Span::from_millis(100);
/// Kernel default packet limit of the `codel` qdisc (`DEFAULT_CODEL_LIMIT`).
pub const DEFAULT_CODEL_LIMIT: u32 = 1000;
/// `psched_mtu` of an Ethernet device: 1500 + 14.
pub const DEFAULT_MTU: u32 = 1514;

/// Bits kept of `1/sqrt(count)` (the kernel's `REC_INV_SQRT_BITS`).
const REC_INV_SQRT_BITS: u32 = 16;
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;

/// CoDel's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable minimum standing queue delay (RFC 8289 §4.4).
    pub target: Span,
    /// Width of the window over which the minimum is tracked (RFC 8289 §4.5).
    pub interval: Span,
    /// Mark ECT packets CE instead of dropping them.
    pub ecn: bool,
    /// Mark CE (without affecting the control law) whenever the sojourn time exceeds this.
    pub ce_threshold: Option<Span>,
    /// With `ce_threshold`: only packets whose TOS byte satisfies `dsfield & mask == value`
    /// are marked (the kernel's `ce_threshold_selector value/mask`, used for L4S).
    pub ce_threshold_selector: Option<(u8, u8)>,
    /// A backlog of at most this many bytes is never dropped from (RFC 8289 §5.4).
    pub mtu: u32,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
            ecn: false,
            ce_threshold: None,
            ce_threshold_selector: None,
            mtu: DEFAULT_MTU,
        }
    }
}

impl CodelParams {
    /// Rejects values the algorithm cannot work with.
    pub fn validate(&self, qdisc: &str) -> Result<(), ConfigError> {
        if self.interval == Span::ZERO {
            return Err(ConfigError::invalid(qdisc, "interval", "0", "the interval must be positive"));
        }
        Ok(())
    }
}

/// A time or duration in the kernel's CoDel unit: 1024 ns, in a `u32` that wraps about every
/// 73 minutes and is compared wrap-safely (`include/net/codel.h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Units(u32);

impl Units {
    /// The unit shift (`CODEL_SHIFT`).
    const SHIFT: u32 = 10;

    fn at(t: Time) -> Units {
        Units((t.as_nanos() >> Units::SHIFT) as u32)
    }
    fn of(s: Span) -> Units {
        Units((s.as_nanos() >> Units::SHIFT) as u32)
    }
    fn span(self) -> Span {
        Span::from_nanos((self.0 as u64) << Units::SHIFT)
    }
    fn plus(self, d: Units) -> Units {
        Units(self.0.wrapping_add(d.0))
    }
    fn minus(self, d: Units) -> Units {
        Units(self.0.wrapping_sub(d.0))
    }
    /// Signed difference `self - other`, wrap-safe.
    fn diff(self, other: Units) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

/// Per-queue state of the control loop (RFC 8289 §5, the kernel's `struct codel_vars`).
///
/// Times are kept in the kernel's 1024-ns units so that decisions match the kernel's exactly
/// (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (or marks) since entering the dropping state.
    pub count: u32,
    /// `count` when the dropping state was last entered.
    pub lastcount: u32,
    /// True while in the dropping state.
    pub dropping: bool,
    /// `1/sqrt(count)` in Q0.16.
    rec_inv_sqrt: u16,
    /// When the sojourn time may first be declared persistently above target; 0 means unset.
    first_above_time: Units,
    /// When the next drop is due (meaningful while `dropping`).
    drop_next: Units,
    /// Sojourn time of the last packet looked at.
    ldelay: Units,
}

/// Counters kept by the algorithm (the kernel's `struct codel_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// Largest packet seen at dequeue.
    pub maxpacket: u32,
    /// ECT packets marked CE by the control law instead of dropped.
    pub ecn_mark: u64,
    /// Packets marked CE because the sojourn time exceeded `ce_threshold`.
    pub ce_mark: u64,
    /// Packets dropped by the control law.
    pub drop_count: u64,
}

/// The queue CoDel controls. fq_codel implements it once per flow.
pub trait CodelQueue {
    /// Removes the head packet and returns it with the time it entered the queue.
    fn pop_head(&mut self) -> Option<(Packet, Time)>;
    /// Bytes queued now, for the "at most one MTU" rule (the head packet already removed).
    fn backlog(&self) -> u64;
    /// Takes a packet the control law dropped.
    fn dropped(&mut self, pkt: Packet);
}

impl CodelVars {
    /// Fresh state (not dropping, count 0).
    pub fn new() -> CodelVars {
        CodelVars::default()
    }

    /// One Newton-Raphson step towards `1/sqrt(count)` (RFC 8289 §5.5 allows any approximation;
    /// this is the kernel's Q0.32 iteration `x' = x/2 · (3 - count·x²)`, truncated to 16 bits).
    fn newton_step(&mut self) {
        let x = (self.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
        let x2 = ((x as u64 * x as u64) >> 32) as u32;
        // Wrapping as in the kernel: a stale estimate with a large jump in `count` (fq_codel's
        // batch drops) makes `count·x²` exceed 3; the next steps then recover.
        let three_minus = (3u64 << 32).wrapping_sub(self.count as u64 * x2 as u64) >> 2;
        let next = three_minus.wrapping_mul(x as u64) >> (32 - 2 + 1);
        self.rec_inv_sqrt = (next >> REC_INV_SQRT_SHIFT) as u16;
    }

    /// RFC 8289 §5.5 control law: `t + interval / sqrt(count)`, using the cached reciprocal
    /// (the kernel's `reciprocal_scale(interval, rec_inv_sqrt << 16)`).
    fn control_law(&self, t: Units, interval: Units) -> Units {
        let scale = (self.rec_inv_sqrt as u64) << REC_INV_SQRT_SHIFT;
        t.plus(Units(((interval.0 as u64 * scale) >> 32) as u32))
    }

    /// RFC 8289 §5.3 `dodequeue`: records the sojourn time of the head packet and says whether
    /// it has been above target for at least `interval`.
    fn should_drop(
        &mut self,
        head: Option<(&Packet, Time)>,
        backlog: u64,
        params: &CodelParams,
        stats: &mut CodelStats,
        now: Units,
    ) -> bool {
        let Some((pkt, enqueued)) = head else {
            self.first_above_time = Units(0);
            return false;
        };
        self.ldelay = now.minus(Units::at(enqueued));
        stats.maxpacket = stats.maxpacket.max(pkt.len);
        if self.ldelay.diff(Units::of(params.target)) < 0 || backlog <= params.mtu as u64 {
            // Went below target (or the queue is too short to matter): stay below for an interval.
            self.first_above_time = Units(0);
            return false;
        }
        if self.first_above_time == Units(0) {
            // Just went above: if it stays above for an interval, it is OK to drop.
            self.first_above_time = now.plus(Units::of(params.interval));
            false
        } else {
            now.diff(self.first_above_time) > 0
        }
    }

    /// Dequeues the next packet to send from `queue`, running the control law (RFC 8289 §5.4,
    /// kernel `codel_dequeue`). Dropped packets go to [`CodelQueue::dropped`].
    pub fn dequeue<Q: CodelQueue>(
        &mut self,
        queue: &mut Q,
        params: &CodelParams,
        stats: &mut CodelStats,
        now: Time,
    ) -> Option<Packet> {
        let Some((mut pkt, mut enq)) = queue.pop_head() else {
            self.dropping = false;
            return None;
        };
        let now = Units::at(now);
        let interval = Units::of(params.interval);
        let drop = self.should_drop(Some((&pkt, enq)), queue.backlog(), params, stats, now);
        let mut out = Some(pkt);
        if self.dropping {
            if !drop {
                // Sojourn time below target: leave the dropping state.
                self.dropping = false;
            } else {
                // Drop at each deadline that has passed; a large backlog can make several due now.
                while self.dropping && now.diff(self.drop_next) >= 0 {
                    let Some(p) = out.as_mut() else { break };
                    self.count = self.count.wrapping_add(1);
                    self.newton_step();
                    if params.ecn && p.set_ce() {
                        stats.ecn_mark += 1;
                        self.drop_next = self.control_law(self.drop_next, interval);
                        break;
                    }
                    queue.dropped(*p);
                    stats.drop_count += 1;
                    out = queue.pop_head().map(|(p, t)| {
                        enq = t;
                        p
                    });
                    let head = out.as_ref().map(|p| (p, enq));
                    if self.should_drop(head, queue.backlog(), params, stats, now) {
                        self.drop_next = self.control_law(self.drop_next, interval);
                    } else {
                        self.dropping = false;
                    }
                }
            }
        } else if drop {
            if params.ecn && pkt.set_ce() {
                stats.ecn_mark += 1;
                out = Some(pkt);
            } else {
                queue.dropped(pkt);
                stats.drop_count += 1;
                out = queue.pop_head().map(|(p, t)| {
                    enq = t;
                    p
                });
                let head = out.as_ref().map(|p| (p, enq));
                self.should_drop(head, queue.backlog(), params, stats, now);
            }
            self.dropping = true;
            // RFC 8289 §5.4: if we re-enter the dropping state soon after leaving it, start from
            // the drop rate that controlled the queue last time rather than from 1.
            let delta = self.count.wrapping_sub(self.lastcount);
            let recent = now.minus(self.drop_next).diff(Units(interval.0.wrapping_mul(16))) < 0;
            if delta > 1 && recent {
                self.count = delta;
                self.newton_step();
            } else {
                self.count = 1;
                self.rec_inv_sqrt = (u32::MAX >> REC_INV_SQRT_SHIFT) as u16;
            }
            self.lastcount = self.count;
            self.drop_next = self.control_law(now, interval);
        }
        if let (Some(p), Some(th)) = (out.as_mut(), params.ce_threshold) {
            let selected = match params.ce_threshold_selector {
                Some((value, mask)) => p.dsfield & mask == value,
                None => true,
            };
            if self.ldelay.diff(Units::of(th)) > 0 && selected && p.set_ce() {
                stats.ce_mark += 1;
            }
        }
        out
    }

    /// Sojourn time of the last packet looked at (in the kernel's 1024-ns resolution).
    pub fn ldelay(&self) -> Span {
        self.ldelay.span()
    }

    /// `drop_next` relative to `now` in ns (negative if overdue) while dropping, else 0, as tc
    /// prints it.
    pub fn drop_next_from(&self, now: Time) -> i64 {
        if !self.dropping {
            return 0;
        }
        self.drop_next.diff(Units::at(now)) as i64 * (1 << Units::SHIFT)
    }

    /// The current `1/sqrt(count)` estimate in Q0.16 (exposed for tests and diagnostics).
    pub fn rec_inv_sqrt(&self) -> u16 {
        self.rec_inv_sqrt
    }
}

/// Configuration of the `codel` qdisc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelConfig {
    /// Packet limit (tail drop beyond it).
    pub limit: u32,
    /// The control loop's parameters.
    pub params: CodelParams,
}

impl Default for CodelConfig {
    /// Kernel defaults: `limit 1000p target 5ms interval 100ms` and ECN off.
    fn default() -> Self {
        CodelConfig { limit: DEFAULT_CODEL_LIMIT, params: CodelParams::default() }
    }
}

/// `tc -s qdisc show` extended statistics of `codel` (`struct tc_codel_xstats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelXstats {
    /// Largest packet seen.
    pub maxpacket: u32,
    /// Current drop count.
    pub count: u32,
    /// Count at the last entry to the dropping state.
    pub lastcount: u32,
    /// Sojourn time of the last dequeued packet.
    pub ldelay: Span,
    /// Time to the next scheduled drop, signed, in ns (0 when not dropping).
    pub drop_next: i64,
    /// Packets refused because the queue was at `limit`.
    pub drop_overlimit: u64,
    /// ECT packets marked CE instead of dropped.
    pub ecn_mark: u64,
    /// True while in the dropping state.
    pub dropping: bool,
    /// Packets marked CE above `ce_threshold`.
    pub ce_mark: u64,
}

/// The `codel` qdisc: a FIFO with the CoDel control law at its head.
#[derive(Debug)]
pub struct Codel {
    cfg: CodelConfig,
    queue: VecDeque<(Packet, Time)>,
    queue_bytes: u64,
    /// Packets dequeued by `peek` or handed back by `requeue`, sent before the queue.
    held: VecDeque<Packet>,
    vars: CodelVars,
    cstats: CodelStats,
    stats: QdiscStats,
    drop_overlimit: u64,
    dropped: VecDeque<Dropped>,
}

/// The FIFO behind [`Codel`], seen by the control law.
struct CodelFifo<'a> {
    queue: &'a mut VecDeque<(Packet, Time)>,
    bytes: &'a mut u64,
    dropped: &'a mut VecDeque<Dropped>,
}

impl CodelQueue for CodelFifo<'_> {
    fn pop_head(&mut self) -> Option<(Packet, Time)> {
        let head = self.queue.pop_front()?;
        *self.bytes -= head.0.len as u64;
        Some(head)
    }
    fn backlog(&self) -> u64 {
        *self.bytes
    }
    fn dropped(&mut self, pkt: Packet) {
        self.dropped.push_back(Dropped { pkt, reason: DropReason::Aqm });
    }
}

impl Codel {
    /// A validated codel qdisc.
    pub fn new(cfg: CodelConfig) -> Result<Codel, ConfigError> {
        Codel::check(&cfg)?;
        Ok(Codel {
            cfg,
            queue: VecDeque::new(),
            queue_bytes: 0,
            held: VecDeque::new(),
            vars: CodelVars::new(),
            cstats: CodelStats::default(),
            stats: QdiscStats::default(),
            drop_overlimit: 0,
            dropped: VecDeque::new(),
        })
    }

    fn check(cfg: &CodelConfig) -> Result<(), ConfigError> {
        if cfg.limit == 0 {
            return Err(ConfigError::invalid(
                "codel",
                "limit",
                0,
                "a zero limit drops every packet; give at least 1",
            ));
        }
        cfg.params.validate("codel")
    }

    /// The configuration (for `tc qdisc show`: `limit 1000p target 5ms interval 100ms`).
    pub fn config(&self) -> &CodelConfig {
        &self.cfg
    }

    /// `tc qdisc change`: applies a new configuration, dropping from the head while over the new
    /// limit (as the kernel does). The dropped packets come out of `take_dropped`.
    pub fn change(&mut self, cfg: CodelConfig) -> Result<(), ConfigError> {
        Codel::check(&cfg)?;
        self.cfg = cfg;
        while self.queue.len() + self.held.len() > cfg.limit as usize {
            let pkt = match self.held.pop_front() {
                Some(p) => p,
                None => {
                    let (p, _) = self.queue.pop_front().expect("over limit means non-empty");
                    self.queue_bytes -= p.len as u64;
                    p
                }
            };
            self.stats.drops += 1;
            self.dropped.push_back(Dropped { pkt, reason: DropReason::QueueFull });
        }
        Ok(())
    }

    /// Extended statistics at `now`.
    pub fn xstats(&self, now: Time) -> CodelXstats {
        CodelXstats {
            maxpacket: self.cstats.maxpacket,
            count: self.vars.count,
            lastcount: self.vars.lastcount,
            ldelay: self.vars.ldelay(),
            drop_next: self.vars.drop_next_from(now),
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.cstats.ecn_mark,
            dropping: self.vars.dropping,
            ce_mark: self.cstats.ce_mark,
        }
    }

    /// The control loop's state (for tests and diagnostics).
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }

    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.held.pop_front() {
            return Some(p);
        }
        let before = self.dropped.len();
        let mut fifo =
            CodelFifo { queue: &mut self.queue, bytes: &mut self.queue_bytes, dropped: &mut self.dropped };
        let pkt = self.vars.dequeue(&mut fifo, &self.cfg.params, &mut self.cstats, now);
        self.stats.drops += (self.dropped.len() - before) as u64;
        pkt
    }
}

impl Qdisc for Codel {
    fn kind(&self) -> &'static str {
        "codel"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        if self.queue.len() + self.held.len() >= self.cfg.limit as usize {
            self.drop_overlimit += 1;
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        self.queue_bytes += pkt.len as u64;
        self.queue.push_back((pkt, now));
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let pkt = self.dequeue_inner(now)?;
        self.stats.on_dequeue(&pkt); // its backlog and qlen are unused: stats() computes them
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        peek_held(self, now, |q| &mut q.held, Codel::dequeue_inner)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (!self.queue.is_empty() || !self.held.is_empty()).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.held.drain(..).collect();
        out.extend(self.queue.drain(..).map(|(p, _)| p));
        self.queue_bytes = 0;
        self.vars = CodelVars::new();
        out
    }

    fn stats(&self) -> QdiscStats {
        let held_bytes: u64 = self.held.iter().map(|p| p.len as u64).sum();
        QdiscStats {
            backlog_bytes: self.queue_bytes + held_bytes,
            qlen: (self.queue.len() + self.held.len()) as u64,
            ..self.stats
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Puts the packet back at the head ([`requeue_held`]).
    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        requeue_held(&mut self.stats, &mut self.held, pkt)
    }
}

/// Peek for codel and fq_codel, like the kernel's qdisc_peek_dequeued: run the dequeue (and its
/// AQM) now and hold the result in `held`, which their dequeue takes from first.
pub(crate) fn peek_held<Q>(
    q: &mut Q,
    now: Time,
    held: fn(&mut Q) -> &mut VecDeque<Packet>,
    dequeue: fn(&mut Q, Time) -> Option<Packet>,
) -> Option<&Packet> {
    if held(q).is_empty() {
        let pkt = dequeue(q, now)?;
        held(q).push_back(pkt);
    }
    held(q).front()
}

/// Requeue for codel and fq_codel, whose `peek` holds dequeued packets: the packet goes back at
/// the head of the held queue, and "sent" counts it once: the earlier dequeue is undone.
pub(crate) fn requeue_held(
    stats: &mut QdiscStats,
    held: &mut VecDeque<Packet>,
    pkt: Packet,
) -> Result<(), Dropped> {
    stats.bytes = stats.bytes.saturating_sub(pkt.len as u64);
    stats.packets = stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
    stats.requeues += 1;
    held.push_front(pkt);
    Ok(())
}

#[cfg(test)]
mod tests;
