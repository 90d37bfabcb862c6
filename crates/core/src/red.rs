//! RED: Random Early Detection (tc-red(8); Floyd and Jacobson 1993), with the kernel's
//! fixed-point arithmetic (`include/net/red.h`, `sch_red.c`).
//!
//! - The average queue `qavg` is a fixed-point byte count with `Wlog` fraction bits, updated on
//!   every enqueue from the child's backlog: `qavg += backlog - qavg >> Wlog`.
//! - After an idle period the average decays by the `stab` table that tc computes: the idle time
//!   in µs, capped at `255 << Scell_log`, indexes `stab[t >> Scell_log]`, a right shift of `qavg`;
//!   a zero shift uses the linear approximation `qavg - qavg * t >> Scell_log` (at most halving).
//! - Between `qth_min` and `qth_max` a packet is marked (ECN) or dropped with probability
//!   `max_P * (qavg - min) / (max - min)`, spread by the count since the last mark; above
//!   `qth_max` every packet is (harddrop or not-ECN: dropped; ECN: marked).
//! - `max_P` is a Q0.32 probability; zero means "derive it from `Plog`" (`(max - min) >> Plog`).
//! - Adaptive RED (Floyd, Gummadi, Shenker 2001) moves `max_P` every 500 ms towards keeping the
//!   average between 40% and 60% of the way from min to max. The kernel only arms that timer when
//!   the `adaptive` bit is in `tc_red_qopt.flags`; iproute2 since 5.7 sends the flags in
//!   `TCA_RED_FLAGS` instead, so with its `tc` the flag shows but nothing adapts
//!   ([`RedConfig::adapt`] says whether the timer runs).
//! - The child is a bfifo of `limit` bytes unless another qdisc is grafted.
//!
//! Counters as `tc -s qdisc show` prints them: `marked` (probabilistic and forced marks),
//! `early` (probabilistic and forced drops), `pdrop` (the child refused), `other` (always 0 in
//! modern kernels).

use crate::fifo::Fifo;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::{Span, Time};

/// Size of the idle-time damping table.
pub const RED_STAB_SIZE: usize = 256;

/// The adaptive timer's period (`HZ/2`).
pub const RED_ADAPT_PERIOD: Span = Span::from_millis(500);

/// `DIV_ROUND_CLOSEST(1 << 32, 100)`: 1% as a Q0.32 probability.
const ONE_PERCENT: u32 = 42_949_673;
const MAX_P_MIN: u32 = ONE_PERCENT;
const MAX_P_MAX: u32 = 50 * ONE_PERCENT;

/// RED parameters as `tc` sends them (`tc_red_qopt` + `TCA_RED_STAB` + `TCA_RED_MAX_P` + flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedConfig {
    /// Bytes the default bfifo child holds.
    pub limit: u32,
    /// Lower threshold, bytes.
    pub qth_min: u32,
    /// Upper threshold, bytes.
    pub qth_max: u32,
    /// log2 of 1/W, the averaging weight.
    pub wlog: u8,
    /// log2 of the random range (used when `max_p` is 0).
    pub plog: u8,
    /// Idle-time cell size log (µs).
    pub scell_log: u8,
    /// Idle damping table.
    pub stab: [u8; RED_STAB_SIZE],
    /// Q0.32 maximum probability; 0 derives it from `plog`.
    pub max_p: u32,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
    /// Drop (never mark) above `qth_max`.
    pub harddrop: bool,
    /// With `ecn`: queue non-ECN packets instead of dropping them.
    pub nodrop: bool,
    /// Run the adaptive-RED timer (see the module docs).
    pub adapt: bool,
    /// Seed of the random draws.
    pub seed: u64,
}

impl Default for RedConfig {
    fn default() -> Self {
        RedConfig {
            limit: 0,
            qth_min: 0,
            qth_max: 0,
            wlog: 0,
            plog: 0,
            scell_log: 0,
            stab: [0; RED_STAB_SIZE],
            max_p: 0,
            ecn: false,
            harddrop: false,
            nodrop: false,
            adapt: false,
            seed: 0x5eed_4ed0,
        }
    }
}

fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

impl RedConfig {
    /// The kernel's checks (`red_check_params`, `red_validate_flags`), with its messages.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |param, value: String, reason: &str| Err(ConfigError::invalid("red", param, value, reason));
        if self.limit == 0 {
            return bad("limit", "0".into(), "the child bfifo would drop every packet");
        }
        if fls(self.qth_min) + self.wlog as u32 >= 32 || fls(self.qth_max) + self.wlog as u32 >= 32 {
            return bad("ewma", self.wlog.to_string(), "thresholds shifted by Wlog must fit 32 bits");
        }
        if self.scell_log >= 32 {
            return bad("Scell_log", self.scell_log.to_string(), "must be below 32");
        }
        if self.qth_max < self.qth_min {
            return bad("max", self.qth_max.to_string(), "must not be below min");
        }
        if let Some(s) = self.stab.iter().find(|&&s| s >= 32) {
            return bad("stab", s.to_string(), "every shift must be below 32");
        }
        if self.nodrop && !self.ecn {
            return bad("nodrop", "on".into(), "nodrop mode is only meaningful with ECN");
        }
        Ok(())
    }
}

/// RED's own counters (`tc_red_xstats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedStats {
    /// Probabilistic drops.
    pub prob_drop: u32,
    /// Probabilistic marks.
    pub prob_mark: u32,
    /// Drops above `qth_max`.
    pub forced_drop: u32,
    /// Marks above `qth_max`.
    pub forced_mark: u32,
    /// The child refused the packet.
    pub pdrop: u32,
}

impl RedStats {
    /// `marked` as tc prints it.
    pub fn marked(&self) -> u32 {
        self.prob_mark.wrapping_add(self.forced_mark)
    }
    /// `early` as tc prints it.
    pub fn early(&self) -> u32 {
        self.prob_drop.wrapping_add(self.forced_drop)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    Prob,
    Hard,
}

/// The RED qdisc.
pub struct Red {
    cfg: RedConfig,
    /// Scaled thresholds (`<< Wlog`).
    qth_min: u64,
    qth_max: u64,
    qth_delta: u32,
    max_p: u32,
    /// `max_P / qth_delta` (at least 1): the divisor of the random draw.
    max_p_delta: u32,
    target_min: u32,
    target_max: u32,
    qavg: u64,
    qcount: i32,
    q_r: u32,
    idle_since: Option<Time>,
    next_adapt: Time,
    rng: u64,
    child: Box<dyn Qdisc>,
    /// Drops of replaced children.
    old_child_drops: u64,
    early_drops: u64,
    red: RedStats,
    stats: QdiscStats,
}

impl std::fmt::Debug for Red {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Red").field("cfg", &self.cfg).field("qavg", &self.qavg).finish_non_exhaustive()
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Red {
    /// Builds RED with a bfifo child of `limit` bytes; idle from `Time::ZERO`, as a new qdisc is.
    pub fn new(cfg: RedConfig) -> Result<Red, ConfigError> {
        cfg.validate()?;
        let delta = cfg.qth_max.saturating_sub(cfg.qth_min).max(1);
        let max_p = if cfg.max_p != 0 {
            cfg.max_p
        } else {
            let maxp = if cfg.plog < 32 { u32::MAX >> cfg.plog } else { u32::MAX };
            maxp.wrapping_mul(delta)
        };
        let rng = cfg.seed;
        let mut r = Red {
            qth_min: (cfg.qth_min as u64) << cfg.wlog,
            qth_max: (cfg.qth_max as u64) << cfg.wlog,
            qth_delta: delta,
            max_p,
            max_p_delta: (max_p / delta).max(1),
            target_min: cfg.qth_min + 2 * (delta / 5),
            target_max: cfg.qth_min + 3 * (delta / 5),
            qavg: 0,
            qcount: -1,
            q_r: 0,
            idle_since: Some(Time::ZERO),
            next_adapt: Time::ZERO + RED_ADAPT_PERIOD,
            rng,
            child: Box::new(Fifo::bfifo(cfg.limit as u64)),
            old_child_drops: 0,
            early_drops: 0,
            red: RedStats::default(),
            stats: QdiscStats::default(),
            cfg,
        };
        r.q_r = r.random();
        Ok(r)
    }

    /// Grafts a child qdisc in place of the bfifo; returns the old one with what it held.
    pub fn set_child(&mut self, child: Box<dyn Qdisc>) -> Box<dyn Qdisc> {
        let old = std::mem::replace(&mut self.child, child);
        self.old_child_drops += old.stats().drops;
        old
    }

    /// The child qdisc.
    pub fn child(&self) -> &dyn Qdisc {
        self.child.as_ref()
    }

    /// RED's own counters.
    pub fn red_stats(&self) -> RedStats {
        self.red
    }

    /// The current Q0.32 maximum probability (moves under adaptive RED).
    pub fn max_p(&self) -> u32 {
        self.max_p
    }

    /// The average queue in bytes (the fixed-point value shifted back).
    pub fn qavg_bytes(&self) -> u64 {
        self.qavg >> self.cfg.wlog
    }

    fn random(&mut self) -> u32 {
        ((splitmix(&mut self.rng) >> 32) as u32) / self.max_p_delta
    }

    /// `red_calc_qavg_from_idle_time` at `now`.
    fn qavg_after_idle(&self, since: Time, now: Time) -> u64 {
        let scell_max = 255u64 << self.cfg.scell_log;
        let us_idle = (now.since(since).as_micros()).min(scell_max);
        let shift = self.cfg.stab[((us_idle >> self.cfg.scell_log) & 0xFF) as usize];
        if shift != 0 {
            return self.qavg >> shift;
        }
        let dec = ((self.qavg as u128 * us_idle as u128) >> self.cfg.scell_log) as u64;
        if dec < self.qavg >> 1 {
            self.qavg - dec
        } else {
            self.qavg >> 1
        }
    }

    /// Runs the adaptive timer ticks due by `now` (lazily: nothing else changes between ticks).
    fn adapt_until(&mut self, now: Time) {
        if !self.cfg.adapt {
            return;
        }
        // After a long silence only the last 256 ticks run: enough to take max_P from any value
        // to its bound (+ min(1%, max_P/4) per tick up to 50%, x0.9 per tick down to 1%); the
        // value within one step of the bound may differ from running every tick.
        if self.next_adapt > now {
            return;
        }
        let period = RED_ADAPT_PERIOD.as_nanos();
        let due = now.since(self.next_adapt).as_nanos() / period + 1;
        if due > 256 {
            self.next_adapt += Span::from_nanos((due - 256) * period);
        }
        while self.next_adapt <= now {
            let t = self.next_adapt;
            self.next_adapt = t + RED_ADAPT_PERIOD;
            let mut qavg = match self.idle_since {
                Some(s) => self.qavg_after_idle(s, t),
                None => self.qavg,
            };
            qavg >>= self.cfg.wlog;
            if qavg > self.target_max as u64 && self.max_p <= MAX_P_MAX {
                self.max_p += MAX_P_MIN.min(self.max_p / 4);
            } else if qavg < (self.target_min as u64) && self.max_p >= MAX_P_MIN {
                self.max_p = (self.max_p / 10) * 9;
            }
            let d = self.qth_delta;
            self.max_p_delta = ((self.max_p + d / 2) / d).max(1);
        }
    }

    fn action(&mut self) -> Verdict {
        if self.qavg < self.qth_min {
            self.qcount = -1;
            Verdict::Pass
        } else if self.qavg >= self.qth_max {
            self.qcount = -1;
            Verdict::Hard
        } else {
            self.qcount = self.qcount.wrapping_add(1);
            if self.qcount != 0 {
                let x = ((self.qavg - self.qth_min) >> self.cfg.wlog).wrapping_mul(self.qcount as i64 as u64);
                if x >= self.q_r as u64 {
                    self.qcount = 0;
                    self.q_r = self.random();
                    return Verdict::Prob;
                }
            } else {
                self.q_r = self.random();
            }
            Verdict::Pass
        }
    }
}

impl Qdisc for Red {
    fn kind(&self) -> &'static str {
        "red"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.adapt_until(now);
        self.qavg = match self.idle_since.take() {
            Some(since) => self.qavg_after_idle(since, now),
            None => {
                let backlog = self.child.backlog_bytes() & 0xFFFF_FFFF;
                self.qavg.wrapping_add(backlog.wrapping_sub(self.qavg >> self.cfg.wlog))
            }
        };
        let drop = match self.action() {
            Verdict::Pass => false,
            Verdict::Prob => {
                self.stats.overlimits += 1;
                if self.cfg.ecn && pkt.set_ce() {
                    self.red.prob_mark = self.red.prob_mark.wrapping_add(1);
                    false
                } else if self.cfg.ecn && self.cfg.nodrop {
                    false
                } else {
                    self.red.prob_drop = self.red.prob_drop.wrapping_add(1);
                    true
                }
            }
            Verdict::Hard => {
                self.stats.overlimits += 1;
                if !self.cfg.harddrop && self.cfg.ecn && pkt.set_ce() {
                    self.red.forced_mark = self.red.forced_mark.wrapping_add(1);
                    false
                } else if !self.cfg.harddrop && self.cfg.ecn && self.cfg.nodrop {
                    false
                } else {
                    self.red.forced_drop = self.red.forced_drop.wrapping_add(1);
                    true
                }
            }
        };
        if drop {
            self.early_drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Aqm });
        }
        self.child.enqueue(pkt, now).inspect_err(|_| self.red.pdrop = self.red.pdrop.wrapping_add(1))
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.adapt_until(now);
        match self.child.dequeue(now) {
            Some(p) => {
                self.stats.bytes += p.len as u64;
                self.stats.packets += p.gso_segs.max(1) as u64;
                Some(p)
            }
            None => {
                if self.idle_since.is_none() {
                    self.idle_since = Some(now);
                }
                None
            }
        }
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        self.child.peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        self.child.next_event(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        self.idle_since = None;
        self.qavg = 0;
        self.qcount = -1;
        self.child.reset()
    }

    fn stats(&self) -> QdiscStats {
        let c = self.child.stats();
        QdiscStats {
            drops: self.early_drops + c.drops + self.old_child_drops,
            backlog_bytes: c.backlog_bytes,
            qlen: c.qlen,
            ..self.stats
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.child.take_dropped()
    }

    /// Class `major:1`, which holds the child; the kernel dumps no counters for it.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        f(ClassView { minor: 1, stats: None, child: Some(self.child.as_ref()) });
    }

    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.stats.requeues += 1;
        self.stats.bytes = self.stats.bytes.saturating_sub(pkt.len as u64);
        self.stats.packets = self.stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        self.child.requeue(pkt, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters `tc qdisc add ... red limit 400000 min 30000 max 90000 avpkt 1000 burst 55
    /// bandwidth 10Mbit` sends (Wlog 5, Plog 21, Scell_log 13, stab computed by tc).
    fn man_page(ecn: bool) -> RedConfig {
        let mut stab = [0u8; 256];
        // tc_red_eval_idle_damping(5, 1000, 1250000): lW = -ln(31/32)/12500 ticks.
        let lw = -(1.0f64 - 1.0 / 32.0).ln() / 12500.0;
        for (i, s) in stab.iter_mut().enumerate().skip(1) {
            *s = (((i << 13) as f64 * lw) as u32).min(31) as u8;
        }
        stab[255] = 31;
        RedConfig {
            limit: 400_000,
            qth_min: 30_000,
            qth_max: 90_000,
            wlog: 5,
            plog: 21,
            scell_log: 13,
            stab,
            max_p: (0.02 * 4294967296.0f64) as u32,
            ecn,
            ..RedConfig::default()
        }
    }

    #[test]
    fn below_min_everything_passes_and_qavg_follows_the_ewma() {
        let mut r = Red::new(man_page(false)).unwrap();
        let now = Time::from_millis(1);
        // First packet after the initial idle period: qavg stays 0.
        r.enqueue(Packet::new(1000, 0), now).unwrap();
        assert_eq!(r.qavg, 0);
        r.enqueue(Packet::new(1000, 1), now).unwrap();
        // qavg = 0 + (1000 - 0): with Wlog 5 that is 1000/32 bytes.
        assert_eq!(r.qavg, 1000);
        r.enqueue(Packet::new(1000, 2), now).unwrap();
        assert_eq!(r.qavg, 1000 + 2000 - (1000 >> 5));
        assert_eq!(r.stats().qlen, 3);
        assert_eq!(r.red_stats(), RedStats::default());
    }

    #[test]
    fn idle_time_decays_the_average_by_the_table() {
        let mut r = Red::new(man_page(false)).unwrap();
        r.idle_since = None;
        r.qavg = 60_000 << 5;
        // 8192 µs per cell; stab[1] = floor(8192 * 15.625 * lW) = 0: the linear branch halves at most.
        assert_eq!(
            r.qavg_after_idle(Time::ZERO, Time::from_micros(1)),
            (60_000 << 5) - ((60_000u64 << 5) >> 13)
        );
        let s = r.cfg.stab[100] as u32;
        assert!(s > 0);
        assert_eq!(r.qavg_after_idle(Time::ZERO, Time::from_micros(100 << 13)), (60_000u64 << 5) >> s);
        // Capped at 255 cells.
        assert_eq!(r.qavg_after_idle(Time::ZERO, Time::from_secs(100)), (60_000u64 << 5) >> 31);
    }

    #[test]
    fn above_max_drops_or_marks() {
        for (ecn, harddrop, ect) in
            [(false, false, true), (true, false, true), (true, true, true), (true, false, false)]
        {
            let mut cfg = man_page(ecn);
            cfg.harddrop = harddrop;
            let mut r = Red::new(cfg).unwrap();
            r.idle_since = None;
            r.qavg = 100_000 << 5;
            let mut p = Packet::new(1000, 1);
            if ect {
                p.dsfield = 2;
            }
            let res = r.enqueue(p, Time::ZERO);
            let marked = ecn && !harddrop && ect;
            assert_eq!(res.is_ok(), marked, "ecn {ecn} harddrop {harddrop} ect {ect}");
            assert_eq!(r.red_stats().marked(), marked as u32);
            assert_eq!(r.red_stats().early(), !marked as u32);
            assert_eq!(r.stats().overlimits, 1);
            assert_eq!(r.stats().drops, !marked as u64);
            if marked {
                assert_eq!(r.dequeue(Time::ZERO).unwrap().ecn(), crate::Ecn::Ce);
            }
        }
    }

    #[test]
    fn nodrop_queues_what_it_cannot_mark() {
        let mut cfg = man_page(true);
        cfg.nodrop = true;
        let mut r = Red::new(cfg).unwrap();
        r.idle_since = None;
        r.qavg = 100_000 << 5;
        r.enqueue(Packet::new(1000, 1), Time::ZERO).unwrap();
        assert_eq!((r.red_stats().marked(), r.red_stats().early()), (0, 0));
        assert_eq!(r.stats().overlimits, 1);
        let mut bad = man_page(false);
        bad.nodrop = true;
        assert!(Red::new(bad).unwrap_err().to_string().contains("only meaningful with ECN"));
    }

    #[test]
    fn between_thresholds_the_drop_rate_follows_max_p() {
        // Hold the average at the same point before every packet. The random threshold is
        // uniform over 1/pb packets (pb = max_P (avg - min) / (max - min)) and a packet is
        // dropped once the count since the last drop reaches it: one drop per 1/(2 pb) packets.
        let mut r = Red::new(man_page(false)).unwrap();
        let set = 60_000u64 << 5;
        let n = 400_000;
        let mut drops = 0;
        for i in 0..n {
            r.idle_since = None;
            r.qavg = set;
            let _ = r.child.reset();
            if r.enqueue(Packet::new(1000, i), Time::ZERO).is_err() {
                drops += 1;
            }
        }
        let avg = (set - (set >> 5)) as f64 / 32.0;
        let pb = 0.02 * (avg - 30_000.0) / 60_000.0;
        let rate = drops as f64 / n as f64;
        assert!((rate / (2.0 * pb) - 1.0).abs() < 0.1, "drop rate {rate}, 2 pb = {}", 2.0 * pb);
        assert_eq!(r.red_stats().prob_drop, drops);
    }

    #[test]
    fn limit_overflow_is_pdrop() {
        let mut cfg = man_page(false);
        cfg.limit = 2500;
        cfg.qth_min = 100_000;
        cfg.qth_max = 200_000;
        let mut r = Red::new(cfg).unwrap();
        for i in 0..3 {
            let _ = r.enqueue(Packet::new(1000, i), Time::ZERO);
        }
        assert_eq!(r.red_stats().pdrop, 1);
        assert_eq!(r.stats().drops, 1);
        assert_eq!(r.stats().qlen, 2);
    }

    #[test]
    fn adaptive_timer_raises_max_p_under_a_standing_queue_and_lowers_it_when_idle() {
        let mut cfg = man_page(false);
        cfg.adapt = true;
        let mut r = Red::new(cfg.clone()).unwrap();
        let p0 = r.max_p();
        r.idle_since = None;
        r.qavg = 80_000 << 5; // above target_max = 30000 + 3*12000 = 66000
        r.adapt_until(Time::from_millis(2600));
        // Five ticks of + min(1%, max_P/4): 0.02 -> 0.025 -> 0.03125 -> ... (each +max_P/4 < 1%).
        let mut want = p0;
        for _ in 0..5 {
            want += MAX_P_MIN.min(want / 4);
        }
        assert_eq!(r.max_p(), want);
        // Idle and empty: decays by 9/10 per tick down to 1%.
        r.qavg = 0;
        r.adapt_until(Time::from_secs(60));
        assert!(r.max_p() < MAX_P_MIN && r.max_p() > MAX_P_MIN * 9 / 10, "{}", r.max_p());
        // An hour of silence costs 256 ticks, not 7200, and ends at the bound.
        r.adapt_until(Time::from_secs(3660));
        assert!(r.max_p() < MAX_P_MIN && r.max_p() > MAX_P_MIN * 9 / 10, "{}", r.max_p());
        // Without the timer (what tc 6.1 gets from the kernel) nothing moves.
        let mut fixed = Red::new(man_page(false)).unwrap();
        fixed.qavg = 80_000 << 5;
        fixed.adapt_until(Time::from_secs(10));
        assert_eq!(fixed.max_p(), p0);
    }

    #[test]
    fn plog_gives_max_p_when_none_is_sent() {
        let mut cfg = man_page(false);
        cfg.max_p = 0;
        let r = Red::new(cfg).unwrap();
        assert_eq!(r.max_p(), (u32::MAX >> 21).wrapping_mul(60_000));
    }
}
