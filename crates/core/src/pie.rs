//! PIE, the Proportional Integral controller Enhanced (RFC 8033, tc-pie(8)): the controller
//! shared with fq_pie ([`PieParams`], [`PieVars`]) and the `pie` qdisc.
//!
//! # Matching the kernel (`net/sched/sch_pie.c`, `include/net/pie.h`)
//!
//! - Times are psched ticks (64 ns) as in the kernel: `target` is `us * 1000 >> 6` ticks and
//!   reads back truncated (`(u32)(ticks << 6) / 1000`); `tupdate` is whole jiffies
//!   (`usecs_to_jiffies`, rounded up) of a `HZ` = 250 kernel, so 15 ms runs (and reads back)
//!   as 16 ms.
//! - The drop probability is a `u64` fraction of `MAX_PROB = 2^56 - 1`. Every `tupdate` the
//!   controller adds `alpha·(qdelay − target) + beta·(qdelay − qdelay_old)`, with `alpha` and
//!   `beta` in 1/16 units scaled to ticks, and, as RFC 8033 §5.2 and the kernel do, scaled down
//!   by 2 below a 10% probability and by 4 more per decade below 1%, 0.1%, ... (the auto-tuning
//!   by probability range); steps above 2% are capped once the probability is past 10%, a
//!   queue delay above 250 ms adds 2%, and two idle updates in a row decay it by 1/64.
//! - The queue delay is either the head packet's sojourn time at dequeue (the default) or, with
//!   `dq_rate_estimator`, `backlog / avg_dq_rate` from a departure-rate estimate taken over
//!   16 KiB of dequeues (Little's law, RFC 8033 §4.2).
//! - The early drop decision (`pie_drop_early`): no drops while the 150 ms burst allowance lasts,
//!   when the delay is below half the target with a probability under 20%, or with less than
//!   two MTUs queued; in byte mode the probability scales with the packet size; the
//!   probabilities of passed packets accumulate (RFC 8033 §5.1 de-randomisation): below 0.85
//!   never drop, at 8.5 always, else a random draw. ECN-capable packets are marked instead while
//!   the probability is at most the ECN threshold (10% in `pie`, `ecn_prob` in fq_pie).
//! - The kernel runs the update from a timer (first 500 ms after creation, then every
//!   `tupdate`). Here it runs lazily: before each enqueue or dequeue, every update due since the
//!   last call runs with the backlog and delay of that interval, which did not change between
//!   calls, so the result is the timer's.

use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};
use std::collections::VecDeque;

/// The kernel's `MAX_PROB`: probability 1.
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// The kernel's psched tick: 64 ns (`PSCHED_SHIFT`).
pub const PSCHED_SHIFT: u32 = 6;
/// psched ticks a second.
pub const TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// The timer frequency of the kernel modelled (Debian's and this machine's `CONFIG_HZ`).
pub const HZ: u32 = 250;
/// Default target delay, µs.
pub const DEFAULT_TARGET_US: u32 = 15_000;
/// Default update interval, µs.
pub const DEFAULT_TUPDATE_US: u32 = 15_000;
/// Default packet limit of `pie`.
pub const DEFAULT_LIMIT: u32 = 1000;
/// Default alpha (1/16 units: 0.125).
pub const DEFAULT_ALPHA: u32 = 2;
/// Default beta (1/16 units: 1.25).
pub const DEFAULT_BETA: u32 = 20;
/// `pie`'s ECN threshold: packets are marked instead of dropped up to this probability.
pub const MAX_ECN_PROB: u64 = MAX_PROB / 10;

/// Bytes of dequeues over which the departure rate is measured (`QUEUE_THRESHOLD`).
const QUEUE_THRESHOLD: u64 = 16384;
const DTIME_INVALID: u64 = u64::MAX;
const DQCOUNT_INVALID: u64 = u64::MAX;
/// Fixed-point shift of the departure rate (`PIE_SCALE`).
const PIE_SCALE: u32 = 8;
/// The burst allowance a fresh controller gets: 150 ms.
const BURST_TICKS: u64 = 150_000_000 >> PSCHED_SHIFT;
/// Above this queue delay the probability rises 2% more per update: 250 ms.
const HIGH_DELAY_TICKS: u64 = 250_000_000 >> PSCHED_SHIFT;
/// The first update runs `HZ / 2` jiffies after creation.
const FIRST_UPDATE: Span = Span::from_millis(500);

/// `usecs_to_jiffies` (rounded up).
pub fn usecs_to_jiffies(us: u32) -> u32 {
    let per = 1_000_000 / HZ as u64;
    (us as u64).div_ceil(per) as u32
}

/// `jiffies_to_usecs` (an `unsigned int`: wraps as the kernel's does).
pub fn jiffies_to_usecs(j: u32) -> u32 {
    j.wrapping_mul(1_000_000 / HZ)
}

/// What a `tupdate` of `us` reads back as from the kernel.
pub fn tupdate_shown(us: u32) -> u32 {
    jiffies_to_usecs(usecs_to_jiffies(us))
}

/// psched ticks of `us` µs (`PSCHED_NS2TICKS(us * NSEC_PER_USEC)`).
pub fn us_to_ticks(us: u32) -> u64 {
    (us as u64 * 1000) >> PSCHED_SHIFT
}

/// µs of `ticks`, as the kernel dumps them (`(u32)PSCHED_TICKS2NS(t) / NSEC_PER_USEC`).
pub fn ticks_to_us(ticks: u64) -> u32 {
    ((ticks << PSCHED_SHIFT) as u32) / 1000
}

/// What a `target` of `us` reads back as from the kernel.
pub fn target_shown(us: u32) -> u32 {
    ticks_to_us(us_to_ticks(us))
}

/// PIE's parameters in the kernel's units (`struct pie_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieParams {
    /// Target queue delay, psched ticks.
    pub target: u64,
    /// Update interval, jiffies (0: no update after the first).
    pub tupdate: u32,
    /// Packet limit.
    pub limit: u32,
    /// Integral gain, 1/16 units.
    pub alpha: u32,
    /// Proportional gain, 1/16 units.
    pub beta: u32,
    /// Mark ECN-capable packets instead of dropping them (below the ECN threshold).
    pub ecn: bool,
    /// Scale the probability by packet size.
    pub bytemode: bool,
    /// Estimate the queue delay from the departure rate instead of timestamps.
    pub dq_rate_estimator: bool,
}

impl Default for PieParams {
    /// The kernel's `pie_params_init`.
    fn default() -> Self {
        PieParams {
            target: us_to_ticks(DEFAULT_TARGET_US),
            tupdate: usecs_to_jiffies(DEFAULT_TUPDATE_US),
            limit: DEFAULT_LIMIT,
            alpha: DEFAULT_ALPHA,
            beta: DEFAULT_BETA,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

impl PieParams {
    /// Parameters from user units: `target` and `tupdate` in µs, converted as the kernel does.
    pub fn from_us(target_us: u32, tupdate_us: u32) -> PieParams {
        PieParams {
            target: us_to_ticks(target_us),
            tupdate: usecs_to_jiffies(tupdate_us),
            ..PieParams::default()
        }
    }

    /// The update period.
    pub fn tupdate_span(&self) -> Span {
        Span::from_micros(self.tupdate as u64 * (1_000_000 / HZ as u64))
    }
}

/// One controller's state (`struct pie_vars`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieVars {
    /// Current queue delay, ticks.
    pub qdelay: u64,
    /// Queue delay at the previous update, ticks.
    pub qdelay_old: u64,
    /// Burst allowance left, ticks.
    pub burst_time: u64,
    /// Start of the rate measurement, or the last dequeue (timestamp mode), ticks.
    dq_tstamp: u64,
    /// Drop probability (fraction of [`MAX_PROB`]).
    pub prob: u64,
    /// Probability accumulated over packets not dropped.
    pub accu_prob: u64,
    /// Bytes dequeued in this measurement cycle.
    dq_count: u64,
    /// Departure rate, bytes per tick << 8.
    pub avg_dq_rate: u32,
    /// Backlog at the last update, bytes.
    pub backlog_old: u32,
}

impl Default for PieVars {
    fn default() -> Self {
        let mut v = PieVars {
            qdelay: 0,
            qdelay_old: 0,
            burst_time: 0,
            dq_tstamp: 0,
            prob: 0,
            accu_prob: 0,
            dq_count: 0,
            avg_dq_rate: 0,
            backlog_old: 0,
        };
        v.restart();
        v
    }
}

/// Ticks at `t` (`psched_get_time`).
fn ticks(t: Time) -> u64 {
    t.as_nanos() >> PSCHED_SHIFT
}

impl PieVars {
    /// A fresh controller (probability 0, a full burst allowance).
    pub fn new() -> PieVars {
        PieVars::default()
    }

    /// `pie_vars_init`: a new measurement cycle and burst allowance (the probability and delays
    /// are kept).
    pub fn restart(&mut self) {
        self.burst_time = BURST_TICKS;
        self.dq_tstamp = DTIME_INVALID;
        self.accu_prob = 0;
        self.dq_count = DQCOUNT_INVALID;
        self.avg_dq_rate = 0;
    }

    /// The probability as `tc -s` shows it (`prob << 8`, over `u64::MAX`).
    pub fn prob_fraction(&self) -> f64 {
        (self.prob << 8) as f64 / u64::MAX as f64
    }

    /// The queue delay as the kernel reports it, µs.
    pub fn delay_us(&self) -> u32 {
        ticks_to_us(self.qdelay)
    }

    /// The departure rate in bytes/s, as the kernel reports it.
    pub fn avg_dq_rate_bytes(&self) -> u32 {
        ((self.avg_dq_rate as u64 * TICKS_PER_SEC) >> PIE_SCALE) as u32
    }

    /// `pie_drop_early`: whether the packet of `packet_size` bytes arriving at `backlog` bytes
    /// queued should be dropped (or marked). `rnd` draws 64 random bits.
    pub fn drop_early(
        &mut self,
        p: &PieParams,
        backlog: u64,
        packet_size: u32,
        mtu: u32,
        rnd: &mut impl FnMut() -> u64,
    ) -> bool {
        if self.burst_time > 0 {
            return false;
        }
        if self.qdelay < p.target / 2 && self.prob < MAX_PROB / 5 {
            return false;
        }
        if backlog < 2 * mtu as u64 {
            return false;
        }
        let local = if p.bytemode && packet_size <= mtu {
            (packet_size as u64).wrapping_mul(self.prob / mtu.max(1) as u64)
        } else {
            self.prob
        };
        if local == 0 {
            self.accu_prob = 0;
        } else {
            self.accu_prob = self.accu_prob.wrapping_add(local);
        }
        if self.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if self.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        if (rnd() >> 8) < local {
            self.accu_prob = 0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue`: a packet of `len` bytes that entered at `enqueued` left at `now`,
    /// `backlog` bytes remain.
    pub fn on_dequeue(&mut self, p: &PieParams, len: u32, enqueued: Time, backlog: u64, now: Time) {
        let now = ticks(now);
        let dtime: u32;
        if !p.dq_rate_estimator {
            self.qdelay = now.wrapping_sub(ticks(enqueued));
            let d = if self.dq_tstamp != DTIME_INVALID { now.wrapping_sub(self.dq_tstamp) as u32 } else { 0 };
            self.dq_tstamp = now;
            if backlog == 0 {
                self.qdelay = 0;
            }
            if d == 0 {
                return;
            }
            dtime = d;
        } else {
            if backlog >= QUEUE_THRESHOLD && self.dq_count == DQCOUNT_INVALID {
                self.dq_tstamp = now;
                self.dq_count = 0;
            }
            if self.dq_count == DQCOUNT_INVALID {
                return;
            }
            self.dq_count = self.dq_count.wrapping_add(len as u64);
            if self.dq_count < QUEUE_THRESHOLD {
                return;
            }
            let count = (self.dq_count << PIE_SCALE) as u32;
            let d = now.wrapping_sub(self.dq_tstamp) as u32;
            if d == 0 {
                return;
            }
            let count = count / d;
            self.avg_dq_rate = if self.avg_dq_rate == 0 {
                count
            } else {
                (self.avg_dq_rate - (self.avg_dq_rate >> 3)).wrapping_add(count >> 3)
            };
            if backlog < QUEUE_THRESHOLD {
                self.dq_count = DQCOUNT_INVALID;
            } else {
                self.dq_count = 0;
                self.dq_tstamp = now;
            }
            dtime = d;
        }
        // Burst allowance reduction.
        self.burst_time = self.burst_time.saturating_sub(dtime as u64);
    }

    /// `pie_calculate_probability`: one update with `backlog` bytes queued.
    pub fn update(&mut self, p: &PieParams, backlog: u64) {
        let backlog = backlog as u32; // the kernel's backlog is a u32
        let (qdelay, qdelay_old);
        if p.dq_rate_estimator {
            qdelay_old = self.qdelay;
            self.qdelay_old = self.qdelay;
            qdelay = (backlog << PIE_SCALE).checked_div(self.avg_dq_rate).unwrap_or(0) as u64;
        } else {
            qdelay = self.qdelay;
            qdelay_old = self.qdelay_old;
        }
        // A delay of zero with a backlog: too little queued to measure; no decay this round.
        let mut update_prob = !(qdelay == 0 && backlog != 0);

        // alpha and beta in 1/16 units, scaled to probability per tick.
        let mut alpha = (p.alpha as u64).wrapping_mul(MAX_PROB / TICKS_PER_SEC) >> 4;
        let mut beta = (p.beta as u64).wrapping_mul(MAX_PROB / TICKS_PER_SEC) >> 4;
        // Auto-tuning (RFC 8033 §5.2): smaller steps the smaller the probability.
        if self.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power: u32 = 100;
            while self.prob < MAX_PROB / power as u64 && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        let mut delta: i64 = 0;
        delta = delta.wrapping_add(alpha.wrapping_mul(qdelay.wrapping_sub(p.target)) as i64);
        delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);
        let oldprob = self.prob;
        // Rise by at most 2% a step once past 10%.
        if delta > (MAX_PROB / 50) as i64 && self.prob >= MAX_PROB / 10 {
            delta = ((MAX_PROB / 100) * 2) as i64;
        }
        // Non-linear rise for very high delays.
        if qdelay > HIGH_DELAY_TICKS {
            delta = delta.wrapping_add((MAX_PROB / 50) as i64);
        }
        self.prob = self.prob.wrapping_add(delta as u64);
        if delta > 0 {
            if self.prob < oldprob {
                self.prob = MAX_PROB;
                update_prob = false;
            }
        } else if self.prob > oldprob {
            self.prob = 0;
        }
        // Two idle updates in a row: decay to 98.4%.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.prob -= self.prob / 64;
        }
        self.qdelay = qdelay;
        self.backlog_old = backlog;
        if self.qdelay < p.target / 2
            && self.qdelay_old < p.target / 2
            && self.prob == 0
            && (!p.dq_rate_estimator || self.avg_dq_rate > 0)
        {
            self.restart();
        }
        if !p.dq_rate_estimator {
            self.qdelay_old = qdelay;
        }
    }
}

/// The kernel's update timer, run lazily (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct PieTimer {
    next: Option<Time>,
}

impl PieTimer {
    /// How many updates are due at `now` (the first one 500 ms after the first call), with
    /// `tupdate` between them; they count as run.
    pub fn due(&mut self, now: Time, tupdate: Span) -> u64 {
        let next = *self.next.get_or_insert(now + FIRST_UPDATE);
        if now < next {
            return 0;
        }
        if tupdate == Span::ZERO {
            // The kernel does not re-arm a timer of zero jiffies: one update, then none.
            self.next = Some(Time::MAX);
            return 1;
        }
        let n = now.since(next).as_nanos() / tupdate.as_nanos() + 1;
        self.next = Some(next + Span::from_nanos(n * tupdate.as_nanos()));
        n
    }
}

/// Runs `n` updates of `v` with `backlog` queued, stopping early once an update changes nothing
/// (the rest would not either). Returns whether `v` is then at such a fixed point.
pub fn run_updates(v: &mut PieVars, p: &PieParams, backlog: u64, n: u64) -> bool {
    for _ in 0..n {
        let before = *v;
        v.update(p, backlog);
        if *v == before {
            return true;
        }
    }
    false
}

/// The random source of an early drop (`get_random_bytes`), seeded.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Configuration of the `pie` qdisc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieConfig {
    /// The controller's parameters (kernel units).
    pub params: PieParams,
    /// The device's `psched_mtu`.
    pub mtu: u32,
    /// Seed of the random drop decisions.
    pub seed: u64,
}

impl Default for PieConfig {
    fn default() -> Self {
        PieConfig { params: PieParams::default(), mtu: crate::codel::DEFAULT_MTU, seed: 0x5eed_0e1e }
    }
}

/// `tc -s qdisc show` statistics of pie (`struct tc_pie_xstats`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PieXstats {
    /// Drop probability, 0..1.
    pub prob: f64,
    /// Current queue delay, µs.
    pub delay_us: u32,
    /// Departure rate, bytes/s (with `dq_rate_estimator`).
    pub avg_dq_rate: u32,
    /// Whether `avg_dq_rate` is measured.
    pub dq_rate_estimating: bool,
    /// Packets enqueued.
    pub packets_in: u32,
    /// Packets dropped by PIE or the limit.
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Most packets queued.
    pub maxq: u32,
    /// Packets marked CE.
    pub ecn_mark: u32,
}

/// Counters kept by the kernel (`struct pie_stats`; u32, wrapping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieStats {
    /// Packets enqueued.
    pub packets_in: u32,
    /// Packets dropped (early or at the limit).
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Packets marked CE.
    pub ecn_mark: u32,
    /// Most packets queued.
    pub maxq: u32,
}

/// The `pie` qdisc. See the [module docs](self).
#[derive(Debug)]
pub struct Pie {
    cfg: PieConfig,
    vars: PieVars,
    pstats: PieStats,
    timer: PieTimer,
    rng: u64,
    queue: VecDeque<(Packet, Time)>,
    held: VecDeque<Packet>,
    backlog: u64,
    stats: QdiscStats,
    dropped: VecDeque<Dropped>,
}

impl Pie {
    /// A new pie.
    pub fn new(cfg: PieConfig) -> Result<Pie, ConfigError> {
        if cfg.mtu == 0 {
            return Err(ConfigError::invalid("pie", "mtu", 0, "must be positive"));
        }
        Ok(Pie {
            cfg,
            vars: PieVars::new(),
            pstats: PieStats::default(),
            timer: PieTimer::default(),
            rng: cfg.seed,
            queue: VecDeque::new(),
            held: VecDeque::new(),
            backlog: 0,
            stats: QdiscStats::default(),
            dropped: VecDeque::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PieConfig {
        &self.cfg
    }

    /// The controller's state.
    pub fn vars(&self) -> &PieVars {
        &self.vars
    }

    /// `tc qdisc change` (`pie_change`): new parameters; while over a lower limit, packets are
    /// dropped from the head.
    pub fn change(&mut self, params: PieParams) {
        self.cfg.params = params;
        while self.qlen_total() > params.limit as u64 {
            let Some(pkt) = self.held.pop_front().or_else(|| self.queue.pop_front().map(|(p, _)| p)) else {
                break;
            };
            self.backlog -= pkt.len as u64;
            self.stats.drops += 1;
            self.dropped.push_back(Dropped { pkt, reason: DropReason::QueueFull });
        }
    }

    /// Extended statistics (`pie_dump_stats`).
    pub fn xstats(&self) -> PieXstats {
        let est = self.cfg.params.dq_rate_estimator;
        PieXstats {
            prob: self.vars.prob_fraction(),
            delay_us: self.vars.delay_us(),
            avg_dq_rate: if est { self.vars.avg_dq_rate_bytes() } else { 0 },
            dq_rate_estimating: est,
            packets_in: self.pstats.packets_in,
            dropped: self.pstats.dropped,
            overlimit: self.pstats.overlimit,
            maxq: self.pstats.maxq,
            ecn_mark: self.pstats.ecn_mark,
        }
    }

    fn qlen_total(&self) -> u64 {
        (self.queue.len() + self.held.len()) as u64
    }

    fn run_timer(&mut self, now: Time) {
        let p = self.cfg.params;
        let n = self.timer.due(now, p.tupdate_span());
        let backlog = self.backlog + self.held.iter().map(|p| p.len as u64).sum::<u64>();
        run_updates(&mut self.vars, &p, backlog, n);
    }

    fn dequeue_inner(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.held.pop_front() {
            return Some(p);
        }
        self.run_timer(now);
        let (pkt, enq) = self.queue.pop_front()?;
        self.backlog -= pkt.len as u64;
        let p = self.cfg.params;
        self.vars.on_dequeue(&p, pkt.len, enq, self.backlog, now);
        Some(pkt)
    }
}

impl Qdisc for Pie {
    fn kind(&self) -> &'static str {
        "pie"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.run_timer(now);
        let p = self.cfg.params;
        let qlen = self.qlen_total();
        let reason;
        if qlen >= p.limit as u64 {
            self.pstats.overlimit = self.pstats.overlimit.wrapping_add(1);
            reason = DropReason::QueueFull;
        } else {
            let rng = &mut self.rng;
            // A packet held by `peek` still counts in the kernel's backlog.
            let backlog = self.backlog + self.held.iter().map(|p| p.len as u64).sum::<u64>();
            let drop = self.vars.drop_early(&p, backlog, pkt.len, self.cfg.mtu, &mut || splitmix(rng));
            let mut take = !drop;
            if drop && p.ecn && self.vars.prob <= MAX_ECN_PROB && pkt.set_ce() {
                self.pstats.ecn_mark = self.pstats.ecn_mark.wrapping_add(1);
                take = true;
            }
            if take {
                self.pstats.packets_in = self.pstats.packets_in.wrapping_add(1);
                if qlen > self.pstats.maxq as u64 {
                    self.pstats.maxq = qlen as u32;
                }
                if pkt.enqueue_time == Time::ZERO {
                    pkt.enqueue_time = now;
                }
                self.backlog += pkt.len as u64;
                self.queue.push_back((pkt, now));
                return Ok(());
            }
            reason = DropReason::Aqm;
        }
        self.pstats.dropped = self.pstats.dropped.wrapping_add(1);
        self.vars.accu_prob = 0;
        self.stats.drops += 1;
        Err(Dropped { pkt, reason })
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let pkt = self.dequeue_inner(now)?;
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        crate::codel::peek_held(self, now, |q| &mut q.held, Pie::dequeue_inner)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        (self.qlen_total() > 0).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.held.drain(..).collect();
        out.extend(self.queue.drain(..).map(|(p, _)| p));
        self.backlog = 0;
        self.vars.restart();
        out
    }

    fn stats(&self) -> QdiscStats {
        let held: u64 = self.held.iter().map(|p| p.len as u64).sum();
        QdiscStats { backlog_bytes: self.backlog + held, qlen: self.qlen_total(), ..self.stats }
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
