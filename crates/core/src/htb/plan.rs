//! Class plans: the configuration of a class and the constants its token arithmetic needs,
//! shared by every class with the same configuration (an ISP's subscribers have a handful of
//! plans between them), so a class stores a 4-byte plan index instead of its whole config.
//!
//! # Exact tokens in 64 bits
//!
//! A bucket of `R` bit/s earns `R` units per ns and a byte costs 8·10⁹ units (bit·ns), as in
//! [`crate::rate`]. Both sides are divided by `g = gcd(R, 8·10⁹)`, which keeps the arithmetic
//! exact and brings the numbers into an `i64` for every practical rate and burst. What still does
//! not fit is refused ([`Bucket::new`]) or capped where the cap cannot change a decision: tokens
//! earned over a long idle time saturate before the bucket cap applies, and the 60 s debt floor
//! (`mbuffer`) is held to 2⁶² units (below 60 s only for rates whose units per ns stay above
//! 7.6·10⁷ after the division, i.e. odd rates above ~76 Mbit/s).

use super::config::{ClassParams, HtbClassConfig, MBUFFER};
use crate::handle::Handle;
use crate::qdisc::ConfigError;
use crate::rate::WireSpec;
use crate::sched::FastMap;

const BIT_NS_PER_BYTE: u64 = 8_000_000_000;
/// Largest bucket or debt, in units: far from `i64` overflow when a packet's cost is added.
const MAX_UNITS: i64 = 1 << 62;

/// One token bucket's constants, in units of `g` bit·ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bucket {
    /// Units earned per ns (`R / g`).
    pub earn: u64,
    /// Units per byte (`8·10⁹ / g`).
    pub per_byte: u64,
    /// Bucket size (burst) in units.
    pub size: i64,
    /// Deepest debt the bucket may run into before a packet is charged (60 s of `R`).
    pub floor: i64,
}

impl Bucket {
    /// Constants for `rate_bps` with a bucket of `burst` bytes.
    pub fn new(rate_bps: u64, burst: u64, what: &str) -> Result<Bucket, String> {
        let g = gcd(rate_bps.max(1), BIT_NS_PER_BYTE);
        let earn = rate_bps.max(1) / g;
        let per_byte = BIT_NS_PER_BYTE / g;
        let size = burst.checked_mul(per_byte).filter(|&s| s <= MAX_UNITS as u64).ok_or_else(|| {
            format!(
                "{what} of {burst} bytes is too large for this rate (at most {} bytes)",
                MAX_UNITS as u64 / per_byte
            )
        })? as i64;
        let floor = (MBUFFER.as_nanos() as u128 * earn as u128).min(MAX_UNITS as u128) as i64;
        Ok(Bucket { earn, per_byte, size, floor })
    }

    /// Units earned in `ns` (saturating: a full bucket is reached long before).
    #[inline]
    pub fn earned(&self, ns: u64) -> i64 {
        ns.saturating_mul(self.earn).min(i64::MAX as u64) as i64
    }

    /// The kernel's htb_accnt_tokens: earn, cap at the bucket, pay `cost` units, and owe at most
    /// the floor *plus the packet just paid* (so even a packet longer than 60 s is fully paid).
    #[inline]
    pub fn account(&self, tokens: i64, ns: u64, cost: i64) -> i64 {
        let t = tokens.saturating_add(self.earned(ns)).min(self.size) - cost;
        t.max(-(self.floor + cost))
    }

    /// Tokens after `ns` without a charge, capped at the bucket.
    #[inline]
    pub fn refill(&self, tokens: i64, ns: u64) -> i64 {
        tokens.saturating_add(self.earned(ns)).min(self.size)
    }

    /// ns until `tokens` (negative) reach 0, rounded up.
    pub fn wait_ns(&self, tokens: i64) -> u64 {
        if tokens >= 0 {
            0
        } else {
            tokens.unsigned_abs().div_ceil(self.earn)
        }
    }

    /// Transmission time in ns that `tokens` stand for, floored (the kernel's ns tokens).
    pub fn ns_of(&self, tokens: i64) -> i64 {
        tokens.div_euclid(self.earn as i64)
    }

    /// `tokens` of `from` as tokens of `self`, keeping the bytes they stand for (rounded down).
    pub fn convert(&self, tokens: i64, from: &Bucket) -> i64 {
        let t = tokens as i128 * self.per_byte as i128;
        t.div_euclid(from.per_byte as i128).clamp(-(MAX_UNITS as i128), self.size as i128) as i64
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A configuration shared by classes, with what the scheduler reads per packet.
#[derive(Debug)]
pub(super) struct Plan {
    pub rate: Bucket,
    pub ceil: Bucket,
    pub wire: WireSpec,
    pub quantum: u32,
    pub prio: u8,
    pub config: HtbClassConfig,
    pub params: ClassParams,
    refs: u32,
}

/// Interned plans with reference counts; slots of unused plans are reused.
#[derive(Debug, Default)]
pub(super) struct Plans {
    plans: Vec<Plan>,
    by_config: FastMap<(HtbClassConfig, ClassParams), u32>,
    free: Vec<u32>,
}

impl Plans {
    /// The plan index for a class with this configuration, creating it if new.
    pub fn acquire(
        &mut self,
        config: &HtbClassConfig,
        params: ClassParams,
        classid: Handle,
    ) -> Result<u32, ConfigError> {
        if let Some(&i) = self.by_config.get(&(config.clone(), params)) {
            self.plans[i as usize].refs += 1;
            return Ok(i);
        }
        let bad = |field: &'static str, value: u64, m: String| {
            ConfigError::invalid(format!("htb class {classid}"), field, value, m)
        };
        let rate = Bucket::new(params.rate.bps(), params.burst, "burst")
            .map_err(|m| bad("burst", params.burst, m))?;
        let ceil = Bucket::new(params.ceil.bps(), params.cburst, "cburst")
            .map_err(|m| bad("cburst", params.cburst, m))?;
        let plan = Plan {
            rate,
            ceil,
            wire: config.wire,
            quantum: params.quantum,
            prio: params.prio,
            config: config.clone(),
            params,
            refs: 1,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.plans[i as usize] = plan;
                i
            }
            None => {
                self.plans.push(plan);
                (self.plans.len() - 1) as u32
            }
        };
        self.by_config.insert((config.clone(), params), i);
        Ok(i)
    }

    /// Drops one class's reference to plan `i`.
    pub fn release(&mut self, i: u32) {
        let p = &mut self.plans[i as usize];
        p.refs -= 1;
        if p.refs == 0 {
            self.by_config.remove(&(p.config.clone(), p.params));
            self.free.push(i);
        }
    }

    #[inline]
    pub fn get(&self, i: u32) -> &Plan {
        &self.plans[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_units_are_exact_for_common_rates() {
        // 10 Gbit/s: g = 2·10⁹, a byte costs 4 units, a ns earns 5: 1000 bytes take 800 ns.
        let b = Bucket::new(10_000_000_000, 1600, "burst").unwrap();
        assert_eq!((b.earn, b.per_byte, b.size), (5, 4, 6400));
        let t = b.account(0, 0, 1000 * b.per_byte as i64);
        assert_eq!(b.wait_ns(t), 800);
        // An odd rate: 1 234 567 bit/s, 1 byte = 8 bits take 6480.0058... ns -> 6481 rounded up.
        let o = Bucket::new(1_234_567, 1600, "burst").unwrap();
        assert_eq!(o.wait_ns(-(o.per_byte as i64)), 6481);
        // The floor is 60 s of the rate where it fits.
        assert_eq!(Bucket::new(8_000, 1600, "burst").unwrap().floor, 60_000_000_000);
        assert!(Bucket::new(8, u64::MAX / 2, "burst").is_err());
    }

    #[test]
    fn conversion_keeps_bytes() {
        let a = Bucket::new(8_000_000, 10_000, "burst").unwrap();
        let b = Bucket::new(1_234_567, 10_000, "burst").unwrap();
        let t = 700 * a.per_byte as i64;
        assert_eq!(b.convert(t, &a), 700 * b.per_byte as i64);
        assert_eq!(b.convert(-t, &a), -700 * b.per_byte as i64);
    }
}
