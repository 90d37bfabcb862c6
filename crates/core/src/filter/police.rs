//! The `police` action: a byte-rate policer with an optional peak-rate bucket
//! (kernel `act_police.c`, tc-police(8)).
//!
//! A packet conforms when, after paying for it, both buckets are non-negative: the rate bucket
//! (`rate`, depth `burst`) and, with `peakrate`, the peak bucket (depth `mtu`). Only a conforming
//! packet is charged. A packet longer than `mtu` (per GSO segment) always exceeds. Unlike the
//! kernel, token state is exact (see [`crate::rate`]): no rate tables, no ns truncation.

use crate::filter::action::Verdict;
use crate::filter::FilterError;
use crate::packet::Packet;
use crate::rate::{Rate, TokenBucket, WireSpec};
use crate::time::Time;

/// The MTU the kernel uses when none is given: `255 << cell_log` of the rate table that tc
/// builds for its default 2047-byte MTU, i.e. 2040 bytes. tc prints it as `mtu 2Kb`.
pub const DEFAULT_MTU: u32 = 2040;

/// Police parameters as tc takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoliceConfig {
    /// `rate`: the byte rate. `None` polices by MTU only (every packet within `mtu` conforms).
    pub rate: Option<Rate>,
    /// `burst` in bytes (required with `rate`).
    pub burst: u64,
    /// `mtu`: longer packets (per GSO segment) exceed; also the depth of the peak bucket.
    pub mtu: u32,
    /// `peakrate` (requires `rate`).
    pub peakrate: Option<Rate>,
    /// `overhead`, `mpu`, `linklayer` for the bytes charged.
    pub wire: WireSpec,
    /// `conform-exceed EXCEED/...` (tc default `reclassify`).
    pub exceed: Verdict,
    /// `conform-exceed .../CONFORM` (tc default `ok`).
    pub conform: Verdict,
}

impl Default for PoliceConfig {
    fn default() -> PoliceConfig {
        PoliceConfig {
            rate: None,
            burst: 0,
            mtu: DEFAULT_MTU,
            peakrate: None,
            wire: WireSpec::default(),
            exceed: Verdict::Reclassify,
            conform: Verdict::Ok,
        }
    }
}

impl PoliceConfig {
    /// Checks the combination as tc and the kernel do.
    pub fn validate(&self) -> Result<(), FilterError> {
        let bad = |what: &'static str, reason: &str| Err(FilterError::invalid("police", what, reason));
        match self.rate {
            Some(r) if r.is_zero() => return bad("rate", "must be positive"),
            Some(_) if self.burst == 0 => {
                return bad("burst", "\"burst\" requires \"rate\" and must be positive")
            }
            None if self.peakrate.is_some() => return bad("peakrate", "\"peakrate\" requires \"rate\""),
            None if self.burst != 0 => return bad("burst", "\"burst\" requires \"rate\""),
            _ => {}
        }
        if let Some(p) = self.peakrate {
            if p.is_zero() {
                return bad("peakrate", "must be positive");
            }
            if self.rate.is_some_and(|r| p <= r) {
                return bad("peakrate", "must be greater than rate");
            }
        }
        if self.mtu == 0 {
            return bad("mtu", "must be positive");
        }
        if matches!(self.exceed, Verdict::GotoChain(_)) {
            // act_police refuses a jump on the exceed branch.
            return bad("conform-exceed", "goto chain is not allowed for exceeding traffic");
        }
        Ok(())
    }
}

/// A configured policer with its buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Police {
    cfg: PoliceConfig,
    rate: Option<TokenBucket>,
    peak: Option<TokenBucket>,
}

impl Police {
    /// Builds a policer with full buckets.
    pub fn new(cfg: PoliceConfig) -> Result<Police, FilterError> {
        cfg.validate()?;
        let rate = cfg.rate.map(|r| TokenBucket::new(r, cfg.burst, Time::ZERO));
        let peak = cfg.peakrate.map(|p| TokenBucket::new(p, cfg.mtu as u64, Time::ZERO));
        Ok(Police { cfg, rate, peak })
    }

    /// The configuration.
    pub fn config(&self) -> &PoliceConfig {
        &self.cfg
    }

    /// Decides for one packet at `now`: the verdict, and whether the packet exceeded.
    pub fn police(&mut self, pkt: &Packet, now: Time) -> (Verdict, bool) {
        let seg = if pkt.gso_segs > 1 && pkt.gso_size > 0 { pkt.gso_size } else { pkt.len };
        if seg > self.cfg.mtu {
            return (self.cfg.exceed, true);
        }
        let cost = self.cfg.wire.packet_cost(pkt);
        let rate_ok = self.rate.as_ref().is_none_or(|b| b.has(now, cost));
        let peak_ok = self.peak.as_ref().is_none_or(|b| b.has(now, cost));
        if rate_ok && peak_ok {
            if let Some(b) = self.rate.as_mut() {
                b.charge(now, cost);
            }
            if let Some(b) = self.peak.as_mut() {
                b.charge(now, cost);
            }
            (self.cfg.conform, false)
        } else {
            (self.cfg.exceed, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Span;

    fn cfg(rate_bps: u64, burst: u64) -> PoliceConfig {
        PoliceConfig {
            rate: Some(Rate::from_bps(rate_bps)),
            burst,
            exceed: Verdict::Drop,
            ..Default::default()
        }
    }

    #[test]
    fn burst_then_exactly_rate() {
        // 8 kbit/s = 1000 B/s, burst 3000 B, 1000-byte packets.
        let mut p = Police::new(cfg(8_000, 3_000)).unwrap();
        let pkt = Packet::new(1000, 0);
        let t0 = Time::from_secs(1);
        let verdicts: Vec<_> = (0..4).map(|_| p.police(&pkt, t0).0).collect();
        assert_eq!(verdicts, [Verdict::Ok, Verdict::Ok, Verdict::Ok, Verdict::Drop]);
        // One byte short of a packet's worth of tokens: still exceeds.
        assert_eq!(p.police(&pkt, t0 + Span::from_nanos(999_999_999)).0, Verdict::Drop);
        assert_eq!(p.police(&pkt, t0 + Span::from_secs(1)).0, Verdict::Ok);
        assert_eq!(p.police(&pkt, t0 + Span::from_secs(1)).0, Verdict::Drop);
    }

    #[test]
    fn oversize_exceeds_even_with_tokens() {
        let mut p = Police::new(cfg(1_000_000_000, 100_000)).unwrap();
        assert!(p.police(&Packet::new(DEFAULT_MTU + 1, 0), Time::ZERO).1);
        assert!(!p.police(&Packet::new(DEFAULT_MTU, 0), Time::ZERO).1);
        // A GSO packet is checked per segment.
        let mut gso = Packet::new(10 * 1514, 0);
        gso.gso_segs = 10;
        gso.gso_size = 1514;
        assert!(!p.police(&gso, Time::ZERO).1);
    }

    #[test]
    fn peakrate_limits_back_to_back_packets() {
        let c = PoliceConfig { peakrate: Some(Rate::from_bps(80_000)), mtu: 1500, ..cfg(8_000, 100_000) };
        let mut p = Police::new(c).unwrap();
        let pkt = Packet::new(1000, 0);
        assert_eq!(p.police(&pkt, Time::ZERO).0, Verdict::Ok);
        // The peak bucket (1500 B at 10 kB/s) has 500 B left; it needs 50 ms to hold 1000 again.
        assert_eq!(p.police(&pkt, Time::ZERO).0, Verdict::Drop);
        assert_eq!(p.police(&pkt, Time::from_millis(49)).0, Verdict::Drop);
        assert_eq!(p.police(&pkt, Time::from_millis(50)).0, Verdict::Ok);
    }

    #[test]
    fn validation() {
        assert!(Police::new(PoliceConfig { burst: 0, ..cfg(1000, 0) }).is_err());
        assert!(Police::new(PoliceConfig { peakrate: Some(Rate::from_bps(500)), ..cfg(1000, 10) }).is_err());
        assert!(Police::new(PoliceConfig { exceed: Verdict::GotoChain(1), ..cfg(1000, 10) }).is_err());
        assert!(Police::new(PoliceConfig::default()).is_ok());
    }
}
