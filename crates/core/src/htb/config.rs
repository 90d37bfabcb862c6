//! HTB options: the qdisc's (`r2q`, `default`, `direct_qlen`) and each class's, with the defaults
//! that `tc` and the kernel apply, and the checks that turn bad values into [`ConfigError`]s.

use crate::handle::Handle;
use crate::qdisc::ConfigError;
use crate::rate::{Rate, WireSpec};
use crate::time::Span;

/// Default `r2q`: quantum = rate in bytes/s divided by this.
pub const DEFAULT_R2Q: u32 = 10;
/// Default `direct_qlen`: the device's `txqueuelen`.
pub const DEFAULT_DIRECT_QLEN: u32 = 1000;
/// tc's default `mtu` for HTB classes, used to size the default burst.
pub const DEFAULT_MTU: u32 = 1600;
/// Smallest quantum the kernel accepts silently when it computes one from the rate.
pub const MIN_QUANTUM: u32 = 1000;
/// Largest quantum the kernel accepts silently when it computes one from the rate.
pub const MAX_QUANTUM: u32 = 200_000;
/// Number of priorities (`prio` 0..=7).
pub const NUM_PRIO: u8 = 8;
/// The kernel's `mbuffer`: a class never accumulates more than 60 s of debt or idle credit.
pub const MBUFFER: Span = Span::from_secs(60);
/// tc sizes the default burst as `rate / HZ + mtu`; on an hrtimer kernel `/proc/net/psched`
/// reports HZ = 10⁹, so the default burst is the mtu (1600 b) for any rate below 8 Gbit/s.
pub const PSCHED_HZ: u64 = 1_000_000_000;

/// Options of the HTB qdisc itself (`tc qdisc add ... htb r2q N default X direct_qlen N`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HtbConfig {
    /// Rate-to-quantum divisor (10). Zero is treated as 1, as the kernel does.
    pub r2q: u32,
    /// Minor number of the class that gets unclassified traffic (tc reads it in hex);
    /// 0 = none, unclassified traffic goes to the direct queue.
    pub default_class: u32,
    /// Packet limit of the unshaped direct queue (1000 = txqueuelen).
    pub direct_qlen: u32,
}

impl Default for HtbConfig {
    fn default() -> Self {
        HtbConfig { r2q: DEFAULT_R2Q, default_class: 0, direct_qlen: DEFAULT_DIRECT_QLEN }
    }
}

impl HtbConfig {
    /// Checks the qdisc options.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.direct_qlen == 0 {
            return Err(ConfigError::invalid(
                "htb",
                "direct_qlen",
                0,
                "a zero direct queue drops every unclassified packet; give at least 1",
            ));
        }
        Ok(())
    }
}

/// Options of one HTB class (`tc class add ... htb rate R ceil C burst B ...`).
/// `None` fields take tc's defaults; see [`HtbClassConfig::resolve`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct HtbClassConfig {
    /// Guaranteed rate. Must not be zero.
    pub rate: Rate,
    /// Upper limit when borrowing; defaults to `rate`. Must be >= `rate`.
    pub ceil: Option<Rate>,
    /// Bytes that may be sent at once at `ceil` speed from the rate bucket; default `rate/HZ + mtu`.
    pub burst: Option<u64>,
    /// Bytes that may be sent at once from the ceil bucket; default `ceil/HZ + mtu`.
    pub cburst: Option<u64>,
    /// Priority for excess bandwidth, 0 (first) to 7.
    pub prio: u8,
    /// DRR quantum in bytes; `None` or `Some(0)` computes `rate/r2q` clamped to 1000..=200000.
    pub quantum: Option<u32>,
    /// Used only to size the default bursts (tc's `mtu`, 1600).
    pub mtu: u32,
    /// Per-packet size accounting (`overhead`, `mpu`, `linklayer`).
    pub wire: WireSpec,
}

impl HtbClassConfig {
    /// A class with this rate and every other option at tc's default.
    pub fn new(rate: Rate) -> Self {
        HtbClassConfig {
            rate,
            ceil: None,
            burst: None,
            cburst: None,
            prio: 0,
            quantum: None,
            mtu: DEFAULT_MTU,
            wire: WireSpec::default(),
        }
    }
    /// Sets `ceil`.
    pub fn ceil(mut self, ceil: Rate) -> Self {
        self.ceil = Some(ceil);
        self
    }
    /// Sets `burst` in bytes.
    pub fn burst(mut self, bytes: u64) -> Self {
        self.burst = Some(bytes);
        self
    }
    /// Sets `cburst` in bytes.
    pub fn cburst(mut self, bytes: u64) -> Self {
        self.cburst = Some(bytes);
        self
    }
    /// Sets `prio`.
    pub fn prio(mut self, prio: u8) -> Self {
        self.prio = prio;
        self
    }
    /// Sets `quantum` in bytes.
    pub fn quantum(mut self, bytes: u32) -> Self {
        self.quantum = Some(bytes);
        self
    }

    /// Applies the defaults and checks the values. Warnings (quantum clamped, prio clamped) are
    /// appended to `warnings`, worded as the kernel words them.
    pub fn resolve(
        &self,
        classid: Handle,
        r2q: u32,
        warnings: &mut Vec<String>,
    ) -> Result<ClassParams, ConfigError> {
        // Formatted only for an error: a million classes are built without one.
        let who = || format!("htb class {classid}");
        if self.rate.is_zero() {
            return Err(ConfigError::invalid(who(), "rate", "0bit", "a class needs a non-zero rate"));
        }
        let ceil = self.ceil.unwrap_or(self.rate);
        if ceil.is_zero() {
            return Err(ConfigError::invalid(who(), "ceil", "0bit", "ceil must be at least the rate"));
        }
        if ceil < self.rate {
            return Err(ConfigError::invalid(
                who(),
                "ceil",
                ceil,
                format!("ceil must be at least the rate ({})", self.rate),
            ));
        }
        let default_burst = |r: Rate| r.bytes_per_sec() / PSCHED_HZ + self.mtu as u64;
        let burst = self.burst.unwrap_or_else(|| default_burst(self.rate));
        let cburst = self.cburst.unwrap_or_else(|| default_burst(ceil));
        if burst == 0 {
            return Err(ConfigError::invalid(
                who(),
                "burst",
                "0b",
                "the rate bucket needs a burst of at least 1 byte",
            ));
        }
        let mut prio = self.prio;
        if prio >= NUM_PRIO {
            warnings.push(format!("prio {prio} of class {classid} clamped to {}", NUM_PRIO - 1));
            prio = NUM_PRIO - 1;
        }
        let quantum = match self.quantum {
            Some(q) if q > 0 => q,
            _ => {
                let q = (self.rate.bytes_per_sec() / r2q.max(1) as u64).min(i32::MAX as u64) as u32;
                if q < MIN_QUANTUM {
                    warnings.push(quantum_warning(classid, "small"));
                    MIN_QUANTUM
                } else if q > MAX_QUANTUM {
                    warnings.push(quantum_warning(classid, "big"));
                    MAX_QUANTUM
                } else {
                    q
                }
            }
        };
        Ok(ClassParams { rate: self.rate, ceil, burst, cburst, prio, quantum })
    }
}

/// The kernel's extack text, with the classid as one 32-bit hex number like `%X` prints it
/// (`MAJOR:MINOR` for a class with a minor wider than tc's 16 bits).
fn quantum_warning(classid: Handle, what: &str) -> String {
    match classid.to_tc() {
        Some(id) => format!("quantum of class {id:X} is {what}. Consider r2q change."),
        None => format!("quantum of class {classid} is {what}. Consider r2q change."),
    }
}

/// A class's effective parameters after defaults (what `tc class show` prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ClassParams {
    /// Guaranteed rate.
    pub rate: Rate,
    /// Borrowing limit.
    pub ceil: Rate,
    /// Rate bucket size in bytes.
    pub burst: u64,
    /// Ceil bucket size in bytes.
    pub cburst: u64,
    /// Priority 0..=7.
    pub prio: u8,
    /// DRR quantum in bytes.
    pub quantum: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(minor: u32) -> Handle {
        Handle::new(1, minor)
    }

    #[test]
    fn defaults_follow_tc_on_an_hrtimer_kernel() {
        let mut w = Vec::new();
        let p = HtbClassConfig::new(Rate::from_bps(100_000_000)).resolve(h(0x10), 10, &mut w).unwrap();
        assert_eq!((p.ceil, p.burst, p.cburst, p.prio), (Rate::from_bps(100_000_000), 1600, 1600, 0));
        // 12.5 MB/s / 10 = 1.25 MB > 200000: clamped with the kernel's warning.
        assert_eq!(p.quantum, MAX_QUANTUM);
        assert_eq!(w, vec!["quantum of class 10010 is big. Consider r2q change.".to_string()]);
        // 10 Gbit/s = 1.25e9 B/s: rate/HZ adds one byte.
        let p = HtbClassConfig::new(Rate::from_bps(10_000_000_000)).resolve(h(1), 10, &mut w).unwrap();
        assert_eq!(p.burst, 1601);
    }

    #[test]
    fn small_quantum_warns_and_user_quantum_wins() {
        let mut w = Vec::new();
        let p = HtbClassConfig::new(Rate::from_bps(64_000)).resolve(h(0xa), 10, &mut w).unwrap();
        assert_eq!(p.quantum, MIN_QUANTUM);
        assert_eq!(w[0], "quantum of class 1000A is small. Consider r2q change.");
        let mut w = Vec::new();
        let p = HtbClassConfig::new(Rate::from_bps(64_000)).quantum(300).resolve(h(0xa), 10, &mut w).unwrap();
        assert_eq!((p.quantum, w.len()), (300, 0));
        // r2q 0 behaves as 1.
        let p = HtbClassConfig::new(Rate::from_bps(80_000)).resolve(h(0xa), 0, &mut w).unwrap();
        assert_eq!(p.quantum, 10_000);
    }

    #[test]
    fn bad_values_are_typed_errors() {
        let mut w = Vec::new();
        let e = HtbClassConfig::new(Rate::from_bps(0)).resolve(h(1), 10, &mut w).unwrap_err();
        assert!(matches!(e, ConfigError::Invalid { param: "rate", .. }), "{e}");
        let e = HtbClassConfig::new(Rate::from_bps(10))
            .ceil(Rate::from_bps(5))
            .resolve(h(1), 10, &mut w)
            .unwrap_err();
        assert!(e.to_string().contains("htb class 1:1: invalid ceil"), "{e}");
        let e = HtbClassConfig::new(Rate::from_bps(10)).burst(0).resolve(h(1), 10, &mut w).unwrap_err();
        assert!(matches!(e, ConfigError::Invalid { param: "burst", .. }));
        let p = HtbClassConfig::new(Rate::from_bps(8000)).prio(9).resolve(h(1), 10, &mut w).unwrap();
        assert_eq!(p.prio, 7);
        assert!(HtbConfig { direct_qlen: 0, ..HtbConfig::default() }.validate().is_err());
    }
}
