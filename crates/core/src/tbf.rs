//! TBF, the token bucket filter (tc-tbf(8), kernel `net/sched/sch_tbf.c`).
//!
//! A packet leaves when the rate bucket (capacity `burst`, filling at `rate`) and, if configured,
//! the peak bucket (capacity `mtu`/`minburst`, filling at `peakrate`) both hold its cost. Unlike
//! HTB, TBF never lets a bucket go negative, so over any window T it releases at most
//! `rate·T + burst` bytes (cost measured after [`WireSpec`] accounting).
//!
//! Kernel semantics kept:
//! - the bucket holds `burst` bytes *after* wire accounting: `burst 1500 overhead 300` holds
//!   1800 bytes and tc prints `burst 1800b`; with `linklayer atm` 1500 bytes are 32 cells,
//!   printed `1696b` ([`Tbf::burst_shown`]);
//! - a packet whose cost exceeds what a bucket can ever hold (`max_size`) is dropped at
//!   enqueue ([`DropReason::TooBig`]) unless it is a GSO packet whose segments each fit: then it
//!   is split into segments, as the kernel's `tbf_segment` does;
//! - the child qdisc defaults to `bfifo` of `limit` bytes; `limit` can be given directly or as
//!   `latency` (`limit = rate·latency + burst`, the smaller of that and
//!   `peakrate·latency + mtu`, as tc computes it);
//! - `overlimits` counts every dequeue attempt that found the head packet throttled, a parent's
//!   `peek` included (the kernel's peek of TBF is `qdisc_peek_dequeued`, a dequeue attempt).
//!
//! Differences: tokens are exact (bit·ns integers, no `mult`/`shift` truncation), and
//! `peakrate > rate` is checked in bit/s rather than in the kernel's truncated bytes/s.

use crate::fifo::Fifo;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rate::{Rate, TokenBucket, WireSpec};
use crate::time::{Span, Time};
use std::collections::VecDeque;

/// TBF parameters as tc-tbf(8) names them. Sizes are bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TbfConfig {
    /// Long-term rate.
    pub rate: Rate,
    /// Bucket size (`burst`/`buffer`/`maxburst`) in bytes, before wire accounting.
    pub burst: u64,
    /// Bytes that may wait in the child queue. Exactly one of `limit` and `latency`.
    pub limit: Option<u64>,
    /// Longest time a packet may wait; converted to a limit as tc does.
    pub latency: Option<Span>,
    /// Optional peak rate; requires `mtu` and must exceed `rate`.
    pub peakrate: Option<Rate>,
    /// Peak bucket size (`mtu`/`minburst`) in bytes.
    pub mtu: Option<u64>,
    /// Overhead, mpu and link layer applied to every charge.
    pub wire: WireSpec,
}

impl TbfConfig {
    /// A config with `rate`, `burst` and a byte `limit`, everything else default.
    pub fn new(rate: Rate, burst: u64, limit: u64) -> TbfConfig {
        TbfConfig { rate, burst, limit: Some(limit), ..TbfConfig::default() }
    }

    /// Checks the configuration as tc and the kernel do and returns the effective byte limit.
    pub fn validate(&self) -> Result<u64, ConfigError> {
        let bad = |param, value: String, reason: &str| Err(ConfigError::invalid("tbf", param, value, reason));
        if self.rate.is_zero() {
            return bad("rate", self.rate.to_string(), "a rate of zero never sends; give e.g. rate 1mbit");
        }
        if self.burst == 0 {
            return bad(
                "burst",
                "0".into(),
                "the bucket must hold at least one byte (tc: \"burst\" is required)",
            );
        }
        if self.wire.wire_len(self.burst.min(u32::MAX as u64) as u32) == 0 {
            return bad("burst", self.burst.to_string(), "overhead makes the bucket hold nothing");
        }
        let peak = match (self.peakrate, self.mtu) {
            (Some(p), _) if p.is_zero() => return bad("peakrate", p.to_string(), "must be > 0"),
            (Some(p), Some(m)) if m > 0 => {
                if p <= self.rate {
                    return bad(
                        "peakrate",
                        p.to_string(),
                        &format!("must be greater than rate {} (the kernel rejects it)", self.rate),
                    );
                }
                Some((p, m))
            }
            (Some(p), _) => {
                return bad("mtu", "0".into(), &format!("\"mtu\" (minburst) is required with peakrate {p}"))
            }
            (None, _) => None,
        };
        let limit = match (self.limit, self.latency) {
            (Some(_), Some(_)) => {
                return bad("latency", "(with limit)".into(), "give only one of \"limit\" and \"latency\"")
            }
            (None, None) => {
                return bad("limit", "(none)".into(), "either \"limit\" or \"latency\" is required")
            }
            (Some(l), None) => l,
            (None, Some(lat)) => {
                let mut l = self.rate.bytes_in(lat).saturating_add(self.burst);
                if let Some((p, m)) = peak {
                    l = l.min(p.bytes_in(lat).saturating_add(m));
                }
                l
            }
        };
        if limit == 0 {
            return bad("limit", "0".into(), "a zero limit drops every packet");
        }
        Ok(limit)
    }
}

/// TBF's single child: the default bfifo (whose limit follows `limit`) or one set by the user.
enum Child {
    Default(Fifo),
    Custom(Box<dyn Qdisc>),
}

impl Child {
    fn q(&mut self) -> &mut dyn Qdisc {
        match self {
            Child::Default(f) => f,
            Child::Custom(b) => b.as_mut(),
        }
    }
    fn r(&self) -> &dyn Qdisc {
        match self {
            Child::Default(f) => f,
            Child::Custom(b) => b.as_ref(),
        }
    }
}

/// The token bucket filter.
pub struct Tbf {
    cfg: TbfConfig,
    limit: u64,
    /// Capacity of the rate bucket in charged (wire) bytes.
    cap: u64,
    /// Capacity of the peak bucket in charged bytes (0 without peakrate).
    pcap: u64,
    bucket: TokenBucket,
    peak: Option<TokenBucket>,
    child: Child,
    /// Cost of the child's head packet, refreshed after every call that can change it.
    head_cost: Option<u64>,
    stats: QdiscStats,
    /// Drops counted here (too big) plus those of children that were replaced.
    own_drops: u64,
    dropped: VecDeque<Dropped>,
}

impl std::fmt::Debug for Tbf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tbf").field("cfg", &self.cfg).field("limit", &self.limit).finish_non_exhaustive()
    }
}

impl Tbf {
    /// Builds a TBF with a `bfifo` child of `limit` bytes.
    pub fn new(cfg: TbfConfig) -> Result<Tbf, ConfigError> {
        let limit = cfg.validate()?;
        let wl = |b: u64| cfg.wire.wire_len(b.min(u32::MAX as u64) as u32);
        let cap = wl(cfg.burst);
        let (pcap, peak) = match (cfg.peakrate, cfg.mtu) {
            (Some(p), Some(m)) => (wl(m), Some(TokenBucket::new(p, wl(m), Time::ZERO))),
            _ => (0, None),
        };
        Ok(Tbf {
            cfg,
            limit,
            cap,
            pcap,
            bucket: TokenBucket::new(cfg.rate, cap, Time::ZERO),
            peak,
            child: Child::Default(Fifo::bfifo(limit)),
            head_cost: None,
            stats: QdiscStats::default(),
            own_drops: 0,
            dropped: VecDeque::new(),
        })
    }

    /// Replaces the child qdisc (tc `qdisc add ... parent <tbf>:1`), returning the old one with
    /// whatever it still holds; its drop count is kept in this qdisc's counters.
    pub fn set_child(&mut self, child: Box<dyn Qdisc>, now: Time) -> Box<dyn Qdisc> {
        let old = match std::mem::replace(&mut self.child, Child::Custom(child)) {
            Child::Default(f) => Box::new(f) as Box<dyn Qdisc>,
            Child::Custom(b) => b,
        };
        self.own_drops += old.stats().drops;
        self.refresh_head(now);
        old
    }

    /// The child qdisc.
    pub fn child(&self) -> &dyn Qdisc {
        self.child.r()
    }

    /// `tc qdisc change`: new parameters, queued packets kept. As in the kernel, both buckets
    /// restart full, and the default bfifo child takes the new limit (packets already queued
    /// beyond it stay); a child set with [`Tbf::set_child`] is left alone.
    pub fn change(&mut self, cfg: TbfConfig, now: Time) -> Result<(), ConfigError> {
        let fresh = Tbf::new(cfg)?;
        if let Child::Default(f) = &mut self.child {
            f.set_limit(fresh.limit);
        }
        self.cfg = fresh.cfg;
        self.limit = fresh.limit;
        self.cap = fresh.cap;
        self.pcap = fresh.pcap;
        self.bucket = TokenBucket::new(cfg.rate, self.cap, now);
        self.peak = fresh.peak.map(|b| TokenBucket::new(b.rate(), self.pcap, now));
        self.refresh_head(now);
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &TbfConfig {
        &self.cfg
    }
    /// `rate`.
    pub fn rate(&self) -> Rate {
        self.cfg.rate
    }
    /// `peakrate`, if set.
    pub fn peakrate(&self) -> Option<Rate> {
        self.peak.as_ref().map(|b| b.rate())
    }
    /// The bucket size as `tc qdisc show` prints it: after overhead/mpu/ATM accounting.
    pub fn burst_shown(&self) -> u64 {
        self.cap
    }
    /// The peak bucket (`minburst`) as tc prints it, if peakrate is set.
    pub fn minburst_shown(&self) -> Option<u64> {
        self.peak.as_ref().map(|_| self.pcap)
    }
    /// The effective byte limit (given, or derived from latency).
    pub fn limit(&self) -> u64 {
        self.limit
    }
    /// The wire accounting.
    pub fn wire(&self) -> WireSpec {
        self.cfg.wire
    }
    /// The `lat` value tc prints: the time the limit adds beyond one bucket at rate (the larger
    /// of the rate and peak figures), or `None` when negative (tc then prints nothing).
    pub fn latency_shown(&self) -> Option<Span> {
        let lat = |limit: u64, bucket: u64, rate: Rate| -> i128 {
            (limit as i128 - bucket as i128) * 8_000_000_000 / rate.bps().max(1) as i128
        };
        let mut l = lat(self.limit, self.cap, self.cfg.rate);
        if let Some(p) = self.peakrate() {
            l = l.max(lat(self.limit, self.pcap, p));
        }
        (l >= 0).then(|| Span::from_nanos(l.min(u64::MAX as i128) as u64))
    }
    /// The options as `tc qdisc show` prints them (without `-d`), e.g.
    /// `rate 20Kbit burst 1800b limit 1000b overhead 300`: `lat` when the limit leaves a
    /// non-negative latency, `limit` otherwise, as iproute2's `tbf_print_opt` decides.
    pub fn tc_options(&self) -> String {
        use crate::units::{format_rate, format_size, format_time};
        let mut out = format!("rate {} burst {}", format_rate(self.cfg.rate), format_size(self.cap));
        if let (Some(p), Some(m)) = (self.peakrate(), self.minburst_shown()) {
            out += &format!(" peakrate {} minburst {}", format_rate(p), format_size(m));
        }
        match self.latency_shown() {
            Some(l) => out += &format!(" lat {}", format_time(l)),
            None => out += &format!(" limit {}", format_size(self.limit)),
        }
        let w = self.cfg.wire;
        if w.mpu != 0 {
            out += &format!(" mpu {}", format_size(w.mpu as u64));
        }
        if w.overhead != 0 {
            out += &format!(" overhead {}", w.overhead);
        }
        if w.linklayer == crate::rate::LinkLayer::Atm {
            out += " linklayer atm";
        }
        out
    }

    /// Tokens in the rate bucket at `now`, in bytes.
    pub fn tokens(&self, now: Time) -> i128 {
        self.bucket.tokens_at(now)
    }

    fn cost(&self, pkt: &Packet) -> u64 {
        self.cfg.wire.packet_cost(pkt)
    }

    fn fits(&self, cost: u64) -> bool {
        cost <= self.cap && (self.peak.is_none() || cost <= self.pcap)
    }

    fn refresh_head(&mut self, now: Time) {
        let wire = self.cfg.wire;
        self.head_cost = self.child.q().peek(now).map(|p| wire.packet_cost(p));
    }

    /// The segments of a GSO packet as the device would send them, if each one fits the buckets.
    fn segments(&self, pkt: &Packet) -> Option<impl Iterator<Item = Packet>> {
        let segs = pkt.gso_segs as u64;
        let size = pkt.gso_size as u64;
        if segs < 2 || size == 0 || (pkt.len as u64) <= size * (segs - 1) {
            return None;
        }
        let last = pkt.len as u64 - size * (segs - 1);
        if last > size {
            return None; // malformed: more bytes than the segments can carry
        }
        if !self.fits(self.cfg.wire.wire_len(size as u32)) {
            return None;
        }
        let base = *pkt;
        Some((0..segs).map(move |i| {
            let mut s = base;
            s.len = if i + 1 < segs { size as u32 } else { last as u32 };
            s.gso_segs = 1;
            s.gso_size = 0;
            s
        }))
    }

    fn enqueue_segments(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let segs: Vec<Packet> = match self.segments(&pkt) {
            Some(it) => it.collect(),
            None => unreachable!("checked by caller"),
        };
        let mut accepted = 0;
        let mut refused = Vec::new();
        for s in segs {
            match self.child.q().enqueue(s, now) {
                Ok(()) => accepted += 1,
                Err(d) => refused.push(d),
            }
        }
        self.refresh_head(now);
        if accepted == 0 {
            // Every segment refused: hand back the original; the child counted each segment.
            let reason = refused.first().map_or(DropReason::QueueFull, |d| d.reason);
            return Err(Dropped { pkt, reason });
        }
        self.dropped.extend(refused);
        Ok(())
    }
}

impl Qdisc for Tbf {
    fn kind(&self) -> &'static str {
        "tbf"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let cost = self.cost(&pkt);
        if !self.fits(cost) {
            if self.segments(&pkt).is_some() {
                return self.enqueue_segments(pkt, now);
            }
            self.own_drops += 1;
            return Err(Dropped { pkt, reason: DropReason::TooBig });
        }
        let r = self.child.q().enqueue(pkt, now);
        self.refresh_head(now);
        r
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        loop {
            let cost = match self.child.q().peek(now) {
                None => {
                    self.head_cost = None;
                    return None;
                }
                Some(p) => self.cfg.wire.packet_cost(p),
            };
            if !self.fits(cost) {
                // Only after a reconfiguration shrank the bucket: it can never be sent.
                let pkt = self.child.q().dequeue(now)?;
                self.own_drops += 1;
                self.dropped.push_back(Dropped { pkt, reason: DropReason::TooBig });
                continue;
            }
            let ok = self.bucket.has(now, cost) && self.peak.as_ref().is_none_or(|b| b.has(now, cost));
            if !ok {
                self.stats.overlimits += 1;
                self.head_cost = Some(cost);
                return None;
            }
            let pkt = self.child.q().dequeue(now)?;
            self.bucket.charge(now, cost);
            if let Some(b) = self.peak.as_mut() {
                b.charge(now, cost);
            }
            self.stats.bytes += pkt.len as u64;
            self.stats.packets += pkt.gso_segs.max(1) as u64;
            self.refresh_head(now);
            return Some(pkt);
        }
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        let wire = self.cfg.wire;
        let cost = wire.packet_cost(self.child.q().peek(now)?);
        let ok = !self.fits(cost)
            || (self.bucket.has(now, cost) && self.peak.as_ref().is_none_or(|b| b.has(now, cost)));
        if ok {
            self.child.q().peek(now)
        } else {
            self.stats.overlimits += 1;
            None
        }
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        let c = self.child.r().next_event(now)?;
        if c > now {
            return Some(c);
        }
        let Some(cost) = self.head_cost else {
            return Some(now);
        };
        if !self.fits(cost) {
            return Some(now);
        }
        let mut t = self.bucket.time_until(now, cost);
        if let Some(b) = &self.peak {
            t = t.max(b.time_until(now, cost));
        }
        Some(t.max(now))
    }

    fn reset(&mut self) -> Vec<Packet> {
        self.head_cost = None;
        self.bucket = TokenBucket::new(self.cfg.rate, self.cap, Time::ZERO);
        if let Some(b) = &mut self.peak {
            *b = TokenBucket::new(b.rate(), self.pcap, Time::ZERO);
        }
        self.child.q().reset()
    }

    fn stats(&self) -> QdiscStats {
        let c = self.child.r().stats();
        QdiscStats {
            drops: self.own_drops + c.drops,
            backlog_bytes: c.backlog_bytes,
            qlen: c.qlen,
            ..self.stats
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front().or_else(|| self.child.q().take_dropped())
    }

    /// Class `major:1`, which holds the child; the kernel dumps no counters for it.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        f(ClassView { minor: 1, stats: None, child: Some(self.child.r()) });
    }

    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        // Tokens already charged are not refunded (the kernel's requeue does not either).
        self.stats.requeues += 1;
        let r = self.child.q().requeue(pkt, now);
        self.refresh_head(now);
        r
    }
}

/// For classful qdiscs' tests: an 8 Mbit/s TBF with a one-packet burst, a child that holds
/// packets back (a parent must then wait for it, not spin).
#[cfg(test)]
pub(crate) fn holding_child() -> Tbf {
    Tbf::new(TbfConfig {
        rate: Rate::from_bps(8_000_000),
        burst: 1500,
        limit: Some(100_000),
        ..TbfConfig::default()
    })
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::LinkLayer;

    fn mbit(n: u64) -> Rate {
        Rate::from_bps(n * 1_000_000)
    }

    #[test]
    fn validation_follows_tc() {
        let ok = TbfConfig::new(mbit(1), 1500, 10_000);
        assert_eq!(ok.validate(), Ok(10_000));
        let e = |c: TbfConfig| c.validate().unwrap_err().to_string();
        assert!(e(TbfConfig { rate: Rate::from_bps(0), ..ok }).contains("rate"));
        assert!(e(TbfConfig { burst: 0, ..ok }).contains("burst"));
        assert!(e(TbfConfig { limit: None, ..ok }).contains("either \"limit\" or \"latency\""));
        assert!(e(TbfConfig { latency: Some(Span::from_millis(5)), ..ok }).contains("only one"));
        assert!(e(TbfConfig { limit: Some(0), ..ok }).contains("zero limit"));
        assert!(e(TbfConfig { peakrate: Some(mbit(2)), ..ok }).contains("mtu"));
        let eq = TbfConfig { peakrate: Some(mbit(1)), mtu: Some(1500), ..ok };
        assert!(e(eq).contains("greater than rate"));
    }

    #[test]
    fn latency_becomes_limit_as_tc_computes_it() {
        // rate 1mbit = 125000 B/s; 50ms -> 6250 + burst 1500 = 7750.
        let c = TbfConfig {
            limit: None,
            latency: Some(Span::from_millis(50)),
            ..TbfConfig::new(mbit(1), 1500, 0)
        };
        assert_eq!(c.validate(), Ok(7750));
        // With peakrate 2mbit mtu 1540: 12500 + 1540 = 14040 > 7750, so 7750 stays.
        let p = TbfConfig { peakrate: Some(mbit(2)), mtu: Some(1540), ..c };
        assert_eq!(p.validate(), Ok(7750));
        // A peak barely above rate with tiny mtu makes the peak side the smaller one.
        let p2 = TbfConfig { peakrate: Some(Rate::from_bps(1_000_008)), mtu: Some(100), ..c };
        assert_eq!(p2.validate(), Ok(6250 + 100));
        let t = Tbf::new(c).unwrap();
        assert_eq!(t.latency_shown(), Some(Span::from_millis(50)));
    }

    #[test]
    fn show_matches_tc() {
        let kbit = |k: u64| Rate::from_bps(k * 1000);
        let show = |c: TbfConfig| Tbf::new(c).unwrap().tc_options();
        let base = TbfConfig::new(kbit(20), 1500, 1000);
        assert_eq!(show(TbfConfig::new(kbit(10), 1500, 1000)), "rate 10Kbit burst 1500b limit 1000b");
        let lat = TbfConfig { limit: None, latency: Some(Span::from_millis(100)), ..base };
        assert_eq!(show(lat), "rate 20Kbit burst 1500b lat 100ms");
        let mut o = base;
        o.wire.overhead = 300;
        assert_eq!(show(o), "rate 20Kbit burst 1800b limit 1000b overhead 300");
        let mut atm = base;
        atm.wire.linklayer = LinkLayer::Atm;
        assert_eq!(show(atm), "rate 20Kbit burst 1696b limit 1000b linklayer atm");
        let pk = TbfConfig { peakrate: Some(kbit(30)), mtu: Some(1510), ..base };
        assert_eq!(show(pk), "rate 20Kbit burst 1500b peakrate 30Kbit minburst 1510b limit 1000b");
    }

    #[test]
    fn burst_is_shown_after_wire_accounting() {
        let mut c = TbfConfig::new(mbit(1), 1500, 10_000);
        c.wire.overhead = 300;
        assert_eq!(Tbf::new(c).unwrap().burst_shown(), 1800);
        c.wire = WireSpec { overhead: 0, mpu: 0, linklayer: LinkLayer::Atm };
        assert_eq!(Tbf::new(c).unwrap().burst_shown(), 1696);
    }

    #[test]
    fn sends_burst_then_paces_at_rate() {
        // 8 kbit/s = 1000 B/s, burst 2000: two 1000-byte packets at once, then one per second.
        let mut t = Tbf::new(TbfConfig::new(Rate::from_bps(8000), 2000, 100_000)).unwrap();
        let t0 = Time::ZERO;
        for i in 0..5 {
            t.enqueue(Packet::new(1000, i), t0).unwrap();
        }
        assert_eq!(t.dequeue(t0).unwrap().payload, 0);
        assert_eq!(t.dequeue(t0).unwrap().payload, 1);
        assert!(t.dequeue(t0).is_none());
        assert_eq!(t.stats().overlimits, 1);
        assert_eq!(t.next_event(t0), Some(Time::from_secs(1)));
        assert!(t.dequeue(Time::from_nanos(999_999_999)).is_none());
        assert_eq!(t.dequeue(Time::from_secs(1)).unwrap().payload, 2);
        assert_eq!(t.next_event(Time::from_secs(1)), Some(Time::from_secs(2)));
    }

    #[test]
    fn peakrate_spaces_packets_within_the_burst() {
        // rate 8 kbit, burst 10000; peak 80 kbit (10000 B/s) with a 1000-byte bucket.
        let cfg = TbfConfig {
            peakrate: Some(Rate::from_bps(80_000)),
            mtu: Some(1000),
            ..TbfConfig::new(Rate::from_bps(8000), 10_000, 100_000)
        };
        let mut t = Tbf::new(cfg).unwrap();
        for i in 0..3 {
            t.enqueue(Packet::new(1000, i), Time::ZERO).unwrap();
        }
        assert!(t.dequeue(Time::ZERO).is_some());
        assert!(t.dequeue(Time::ZERO).is_none());
        assert_eq!(t.next_event(Time::ZERO), Some(Time::from_millis(100)));
        assert!(t.dequeue(Time::from_millis(100)).is_some());
    }

    #[test]
    fn too_big_is_dropped_but_gso_is_segmented() {
        let mut t = Tbf::new(TbfConfig::new(mbit(1), 1514, 100_000)).unwrap();
        let d = t.enqueue(Packet::new(1515, 7), Time::ZERO).unwrap_err();
        assert_eq!(d.reason, DropReason::TooBig);
        assert_eq!(t.stats().drops, 1);
        let mut g = Packet::new(3 * 1514 + 500, 9);
        g.gso_segs = 4;
        g.gso_size = 1514;
        t.enqueue(g, Time::ZERO).unwrap();
        assert_eq!(t.stats().qlen, 4);
        assert_eq!(t.stats().backlog_bytes, g.len as u64);
        let mut lens = Vec::new();
        let mut now = Time::ZERO;
        while let Some(ev) = t.next_event(now) {
            now = ev;
            if let Some(p) = t.dequeue(now) {
                assert_eq!((p.gso_segs, p.payload), (1, 9));
                lens.push(p.len);
            }
        }
        assert_eq!(lens, vec![1514, 1514, 1514, 500]);
        // A GSO packet whose segments do not fit is dropped, not split.
        let mut big = Packet::new(2 * 2000, 10);
        big.gso_segs = 2;
        big.gso_size = 2000;
        assert_eq!(t.enqueue(big, now).unwrap_err().reason, DropReason::TooBig);
    }

    #[test]
    fn gso_that_fits_is_kept_whole_and_charged_per_segment() {
        let mut c = TbfConfig::new(Rate::from_bps(8000), 10_000, 100_000);
        c.wire.overhead = 100;
        let mut t = Tbf::new(c).unwrap();
        let mut g = Packet::new(3000, 1);
        g.gso_segs = 3;
        g.gso_size = 1000;
        t.enqueue(g, Time::ZERO).unwrap();
        assert_eq!(t.dequeue(Time::ZERO).unwrap().gso_segs, 3);
        // The bucket holds wire_len(10000) = 10100; three segments cost 3 * 1100.
        assert_eq!(t.tokens(Time::ZERO), 10_100 - 3300);
    }

    #[test]
    fn a_throttled_child_sets_the_wake_up() {
        // Outer 8 Mbit/s, inner 8 kbit/s: the inner TBF decides when the next packet can go.
        let mut outer = Tbf::new(TbfConfig::new(mbit(8), 1000, 100_000)).unwrap();
        let inner = Tbf::new(TbfConfig::new(Rate::from_bps(8000), 1000, 100_000)).unwrap();
        outer.set_child(Box::new(inner), Time::ZERO);
        for i in 0..2 {
            outer.enqueue(Packet::new(1000, i), Time::ZERO).unwrap();
        }
        assert!(outer.dequeue(Time::ZERO).is_some());
        assert!(outer.dequeue(Time::ZERO).is_none());
        assert_eq!(outer.next_event(Time::ZERO), Some(Time::from_secs(1)));
        assert_eq!(outer.dequeue(Time::from_secs(1)).unwrap().payload, 1);
        assert_eq!(outer.next_event(Time::from_secs(1)), None);
    }

    #[test]
    fn long_run_throughput_is_exact() {
        // Backlogged for 100 ms: delivered = R*T + burst within one packet, with no rounding
        // that accumulates (the kernel's mult/shift loses 0.08% at 10 Gbit/s).
        for &(bps, len) in &[(1_000_000_000u64, 1514u32), (3_333_333, 97), (800_000_000_000, 65_000)] {
            let burst = 2 * len as u64;
            let mut t = Tbf::new(TbfConfig::new(Rate::from_bps(bps), burst, u64::MAX / 2)).unwrap();
            let end = Time::from_millis(100);
            let mut now = Time::ZERO;
            let mut sent = 0u64;
            let mut id = 0;
            while now <= end {
                while t.stats().qlen < 4 {
                    t.enqueue(Packet::new(len, id), now).unwrap();
                    id += 1;
                }
                while let Some(p) = t.dequeue(now) {
                    sent += p.len as u64;
                }
                now = t.next_event(now).unwrap();
            }
            let ideal = bps as u128 * 100 / 1000 / 8 + burst as u128;
            let diff = (sent as i128 - ideal as i128).unsigned_abs();
            assert!(diff <= len as u128, "bps {bps}: sent {sent} ideal {ideal}");
        }
    }

    #[test]
    fn change_keeps_packets_and_refills() {
        let mut t = Tbf::new(TbfConfig::new(Rate::from_bps(8000), 1000, 3000)).unwrap();
        for i in 0..3 {
            t.enqueue(Packet::new(1000, i), Time::ZERO).unwrap();
        }
        assert!(t.dequeue(Time::ZERO).is_some());
        assert!(t.dequeue(Time::ZERO).is_none());
        let faster = TbfConfig {
            limit: None,
            latency: Some(Span::from_millis(200)),
            ..TbfConfig::new(Rate::from_bps(80_000), 1000, 0)
        };
        t.change(faster, Time::from_millis(1)).unwrap();
        assert_eq!(t.tc_options(), "rate 80Kbit burst 1000b lat 200ms");
        assert_eq!(t.child().stats().qlen, 2, "queued packets survive");
        assert_eq!(t.dequeue(Time::from_millis(1)).unwrap().payload, 1, "bucket restarts full");
        assert_eq!(t.next_event(Time::from_millis(1)), Some(Time::from_millis(101)));
        assert!(t.change(TbfConfig::new(Rate::from_bps(0), 1, 1), Time::ZERO).is_err());
    }

    #[test]
    fn limit_applies_to_the_default_bfifo() {
        let mut t = Tbf::new(TbfConfig::new(mbit(1), 1500, 3000)).unwrap();
        t.enqueue(Packet::new(1500, 1), Time::ZERO).unwrap();
        t.enqueue(Packet::new(1500, 2), Time::ZERO).unwrap();
        assert_eq!(t.enqueue(Packet::new(1, 3), Time::ZERO).unwrap_err().reason, DropReason::QueueFull);
        assert_eq!(t.stats().drops, 1);
        assert_eq!(t.child().kind(), "bfifo");
    }
}
