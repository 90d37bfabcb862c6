//! Exact rate arithmetic: rates, wire-size accounting and the token bucket.
//!
//! Linux converts a rate into a `mult`/`shift` pair and truncates every packet's transmission
//! time (at 10 Gbit/s a 1500-byte packet costs 1199 ns instead of 1200: a +0.08% error that never
//! cancels). Sluice keeps token state in *bit-nanoseconds* (1 byte = 8·10⁹ units; one nanosecond
//! at R bit/s earns R units) in 128-bit integers, so no rounding ever happens and nothing
//! accumulates. The only rounding is in [`TokenBucket::time_until`], which rounds *up* so that a
//! packet is never released early.

use crate::time::{Span, Time};
use std::fmt;

/// A rate in bits per second. Zero means "no rate" and is rejected by every shaper.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Rate(u64);

impl Rate {
    /// Builds a rate from bits per second.
    pub const fn from_bps(bits_per_sec: u64) -> Rate {
        Rate(bits_per_sec)
    }
    /// Builds a rate from bytes per second.
    pub const fn from_bytes_per_sec(bytes: u64) -> Rate {
        Rate(bytes.saturating_mul(8))
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Bytes per second, truncated (the unit the kernel stores).
    pub const fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
    /// True for the zero rate.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// Time to send `bytes` at this rate, rounded up to the next nanosecond.
    /// A zero rate never finishes: returns `Span` of `u64::MAX` ns.
    pub fn time_to_send(self, bytes: u64) -> Span {
        if self.0 == 0 {
            return Span::from_nanos(u64::MAX);
        }
        let num = bytes as u128 * 8 * 1_000_000_000;
        let ns = num.div_ceil(self.0 as u128);
        Span::from_nanos(ns.min(u64::MAX as u128) as u64)
    }
    /// Bytes this rate carries in `span`, truncated.
    pub fn bytes_in(self, span: Span) -> u64 {
        let b = self.0 as u128 * span.as_nanos() as u128 / 8 / 1_000_000_000;
        b.min(u64::MAX as u128) as u64
    }
}

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", crate::units::format_rate(*self))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::units::format_rate(*self))
    }
}

/// The link layer below IP, for per-packet size accounting (tc's `linklayer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// Bytes as they are (Ethernet and everything else).
    #[default]
    Ethernet,
    /// ATM/AAL5: the frame is carried in 48-byte cell payloads, each sent as a 53-byte cell.
    Atm,
}

/// How a packet's length becomes the number of bytes charged to a rate:
/// `overhead` is added, the result is raised to `mpu`, then ATM cells are counted if asked.
/// This is the kernel's order (`psched_l2t_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct WireSpec {
    /// Bytes added to each packet (may be negative, e.g. to remove an Ethernet header).
    pub overhead: i32,
    /// Minimum packet unit: smaller packets are charged this size.
    pub mpu: u32,
    /// Cell framing.
    pub linklayer: LinkLayer,
}

impl WireSpec {
    /// Bytes charged for one frame of `len` bytes.
    pub fn wire_len(&self, len: u32) -> u64 {
        let mut l = (len as i64 + self.overhead as i64).max(0) as u64;
        if l < self.mpu as u64 {
            l = self.mpu as u64;
        }
        match self.linklayer {
            LinkLayer::Ethernet => l,
            LinkLayer::Atm => l.div_ceil(48) * 53,
        }
    }

    /// Bytes charged for a packet, counting every GSO segment as its own frame so that overhead,
    /// mpu and ATM cells apply per wire packet.
    pub fn packet_cost(&self, pkt: &crate::packet::Packet) -> u64 {
        let segs = pkt.gso_segs.max(1) as u64;
        if segs == 1 || pkt.gso_size == 0 {
            return self.wire_len(pkt.len);
        }
        let full = pkt.gso_size as u64;
        let last = (pkt.len as u64).saturating_sub(full * (segs - 1));
        self.wire_len(full as u32) * (segs - 1) + self.wire_len(last.min(u32::MAX as u64) as u32)
    }
}

/// Units of token state per byte: 8 bits × 10⁹ ns/s.
const UNITS_PER_BYTE: i128 = 8_000_000_000;

/// An exact token bucket.
///
/// Tokens accrue at `rate` up to `burst` bytes. [`charge`](Self::charge) may take the bucket
/// negative (HTB and TBF charge a packet after deciding to send it); a bucket may send while its
/// tokens are non-negative. Hence over any interval T it releases at most R·T + B + one packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: Rate,
    burst_units: i128,
    tokens: i128,
    last: Time,
}

impl TokenBucket {
    /// A full bucket of `burst_bytes` at `rate`, last updated at `now`.
    pub fn new(rate: Rate, burst_bytes: u64, now: Time) -> TokenBucket {
        let burst_units = burst_bytes as i128 * UNITS_PER_BYTE;
        TokenBucket { rate, burst_units, tokens: burst_units, last: now }
    }

    /// The configured rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The configured burst in bytes.
    pub fn burst_bytes(&self) -> u64 {
        (self.burst_units / UNITS_PER_BYTE) as u64
    }

    /// Changes rate and burst, keeping the current fill (clamped to the new burst).
    pub fn reconfigure(&mut self, rate: Rate, burst_bytes: u64, now: Time) {
        self.refill(now);
        self.rate = rate;
        self.burst_units = burst_bytes as i128 * UNITS_PER_BYTE;
        self.tokens = self.tokens.min(self.burst_units);
    }

    /// Adds the tokens earned since the last update, capped at the burst.
    pub fn refill(&mut self, now: Time) {
        if now > self.last {
            let earned = (now - self.last).as_nanos() as i128 * self.rate.bps() as i128;
            self.tokens = (self.tokens + earned).min(self.burst_units);
            self.last = now;
        }
    }

    /// Tokens that the bucket would hold at `now`, in bytes (may be negative), without changing it.
    pub fn tokens_at(&self, now: Time) -> i128 {
        self.units_at(now) / UNITS_PER_BYTE
    }

    fn units_at(&self, now: Time) -> i128 {
        let earned = (now - self.last).as_nanos() as i128 * self.rate.bps() as i128;
        (self.tokens + earned).min(self.burst_units)
    }

    /// True when the bucket is non-negative at `now`, i.e. it may send a packet of any size.
    pub fn can_send(&self, now: Time) -> bool {
        self.units_at(now) >= 0
    }

    /// True when the bucket holds at least `bytes` worth of tokens at `now`.
    pub fn has(&self, now: Time, bytes: u64) -> bool {
        self.units_at(now) >= bytes as i128 * UNITS_PER_BYTE
    }

    /// Refills to `now` and removes `bytes`. The bucket may go negative; it never goes below
    /// minus one burst plus the packet (kernel HTB's `mbuffer` serves the same purpose).
    pub fn charge(&mut self, now: Time, bytes: u64) {
        self.refill(now);
        self.tokens -= bytes as i128 * UNITS_PER_BYTE;
    }

    /// Adds tokens without time passing (HTB: a borrowing class's own bucket keeps filling).
    pub fn credit_elapsed(&mut self, now: Time) {
        self.refill(now);
    }

    /// Earliest time at which the bucket holds at least `bytes` bytes (0 = non-negative),
    /// rounded up to the next nanosecond. `Time::MAX` if it never will (zero rate).
    pub fn time_until(&self, now: Time, bytes: u64) -> Time {
        let have = self.units_at(now);
        let need = bytes as i128 * UNITS_PER_BYTE;
        if have >= need {
            return now;
        }
        if need > self.burst_units || self.rate.is_zero() {
            return Time::MAX;
        }
        let deficit = need - have;
        let rate = self.rate.bps() as i128;
        let ns = (deficit + rate - 1) / rate;
        now + Span::from_nanos(ns.min(u64::MAX as i128) as u64)
    }

    /// Current tokens at `now` expressed as nanoseconds of transmission time at the bucket's rate,
    /// like the kernel's `tokens` (tc -s prints them in psched ticks of 64 ns).
    pub fn tokens_ns(&self, now: Time) -> i64 {
        if self.rate.is_zero() {
            return 0;
        }
        let ns = self.units_at(now) / self.rate.bps() as i128;
        ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;

    #[test]
    fn wire_len_applies_overhead_mpu_then_atm() {
        let eth = WireSpec::default();
        assert_eq!(eth.wire_len(1500), 1500);
        let o = WireSpec { overhead: 24, mpu: 64, linklayer: LinkLayer::Ethernet };
        assert_eq!(o.wire_len(20), 64);
        assert_eq!(o.wire_len(1500), 1524);
        let atm = WireSpec { overhead: 0, mpu: 0, linklayer: LinkLayer::Atm };
        assert_eq!(atm.wire_len(48), 53);
        assert_eq!(atm.wire_len(49), 106);
        assert_eq!(atm.wire_len(1500), 32 * 53);
        let neg = WireSpec { overhead: -14, mpu: 0, linklayer: LinkLayer::Ethernet };
        assert_eq!(neg.wire_len(10), 0);
    }

    #[test]
    fn gso_packets_are_charged_per_segment() {
        let mut p = Packet::new(3 * 1514 + 100, 0);
        p.gso_segs = 4;
        p.gso_size = 1514;
        let o = WireSpec { overhead: 38, mpu: 0, linklayer: LinkLayer::Ethernet };
        assert_eq!(o.packet_cost(&p), 3 * (1514 + 38) + 100 + 38);
    }

    #[test]
    fn time_to_send_is_exact_and_rounds_up() {
        let r = Rate::from_bps(10_000_000_000);
        assert_eq!(r.time_to_send(1500).as_nanos(), 1200);
        assert_eq!(Rate::from_bps(3).time_to_send(1).as_nanos(), 2_666_666_667);
        // 2^32 bytes/s and above
        let big = Rate::from_bytes_per_sec(1 << 33);
        assert_eq!(big.time_to_send(1 << 33).as_nanos(), 1_000_000_000);
    }

    #[test]
    fn bucket_refills_to_burst_and_waits_exactly() {
        let t0 = Time::ZERO;
        let mut b = TokenBucket::new(Rate::from_bps(8_000), 1000, t0);
        assert!(b.has(t0, 1000));
        b.charge(t0, 1500);
        assert!(!b.can_send(t0));
        // -500 bytes at 1000 B/s: non-negative after exactly 0.5 s.
        assert_eq!(b.time_until(t0, 0), Time::from_millis(500));
        assert!(!b.can_send(Time::from_nanos(499_999_999)));
        assert!(b.can_send(Time::from_millis(500)));
        b.refill(Time::from_secs(100));
        assert_eq!(b.tokens_at(Time::from_secs(100)), 1000);
        assert_eq!(b.time_until(Time::from_secs(100), 2000), Time::MAX);
    }

    #[test]
    fn long_run_rate_is_exact() {
        // Send greedily for 10 s simulated; delivered bytes = R*T + burst, plus < 1 packet.
        for &(bps, size) in &[(8u64, 1u64), (1_000_000, 64), (10_000_000_000, 1500), (800_000_000_000, 65536)]
        {
            let mut b = TokenBucket::new(Rate::from_bps(bps), size, Time::ZERO);
            let end = Time::from_secs(10);
            let mut now = Time::ZERO;
            let mut sent = 0u64;
            while now <= end {
                b.charge(now, size);
                sent += size;
                now = b.time_until(now, 0);
            }
            let ideal = bps as u128 * 10 / 8 + size as u128;
            let diff = (sent as i128 - ideal as i128).unsigned_abs();
            assert!(diff <= size as u128, "bps={bps} size={size} sent={sent} ideal={ideal}");
        }
    }
}
