//! The one burst rule Sluice uses wherever a burst is not given: `sluice lint`'s suggested fix,
//! `sluice apply`'s bursts for the kernel, and the live shaper's buckets. The kernel's buckets use
//! a larger budget than the live shaper's ([`KERNEL_JITTER_BUDGET_US`], measured).
//!
//! A token bucket that is served late by `J` can catch up only if it holds at least `rate × J`
//! bytes; otherwise the time it slept is lost for good. DESIGN.md measures timer wake-ups on these
//! machines overshooting by ~80 µs on average and by several ms at worst, and kernel HTB at
//! 10 Gbit needed a burst of about 1 MB (= 10 Gbit × 0.8 ms) to come within 0.2 % of its rate. A
//! budget sized for the *mean* (80 µs, 98 KiB at 10 Gbit) does not survive the tail, so the budget
//! is [`JITTER_BUDGET_US`] = 1 ms: it covers the measured 1 MB point at 10 Gbit, is 12× the mean
//! wake-up lateness, and costs at most 1 ms of line-rate burst downstream. The result is floored
//! at the class mtu (a bucket must hold one packet) and rounded up to whole KiB so tc prints it
//! compactly.

use sluice_core::Rate;

/// Wake-up lateness, in µs, that a bucket sized by [`recommended_burst`] absorbs without loss.
pub const JITTER_BUDGET_US: f64 = 1000.0;

/// Burst in bytes for a bucket at `rate_bps` with packets up to `mtu` bytes that must absorb
/// `jitter_us` of wake-up lateness: `max(mtu, rate × jitter)` rounded up to a multiple of 1024.
pub fn recommended_burst(rate_bps: u64, mtu: u32, jitter_us: f64) -> u64 {
    let cover = (rate_bps as f64 / 8.0 * jitter_us.max(0.0) * 1e-6).ceil() as u64;
    cover.max(mtu as u64).max(1).div_ceil(1024).saturating_mul(1024)
}

/// Lateness, in µs, that the kernel HTB buckets `sluice apply` programs absorb (and that
/// `sluice lint` suggests for kernel configurations): 4 ms, not [`JITTER_BUDGET_US`].
///
/// Measured on the veth lab with TSO (BENCHMARKS.md, "Kernel HTB at 1/5/10 Gbit/s"): what a
/// kernel bucket must absorb is not only the watchdog's wake-up lateness but the sender's own
/// gaps. When the shaper's queue runs dry (the sending application descheduled on a busy CPU,
/// the timer's softirq late), tokens pile up to the burst and only what the burst holds can be
/// caught up afterwards. With rate × 1 ms, TCP lost a median −1.1 % (CUBIC) and −9.6 % (BBR) at
/// 5 Gbit/s on the shared 2-core VM; with rate × 4 ms −0.12 % and −2.1 %, and at 1 Gbit/s BBR
/// went from −0.90 % to −0.14 %. 16 ms gained little more (−0.01 % / −2.3 % at 5 Gbit/s) for four
/// times the line-rate burst sent downstream after an idle period.
pub const KERNEL_JITTER_BUDGET_US: f64 = 4000.0;

/// How to size bursts that the configuration leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BurstPolicy {
    /// Sluice's burst rule, [`recommended_burst`].
    #[default]
    Sluice,
    /// tc's default: `rate / HZ + mtu` with HZ = 1e9, i.e. the mtu.
    TcDefault,
}

/// The burst (bytes) for `rate` when none is configured.
pub fn auto_burst(rate: Rate, mtu: u32, policy: BurstPolicy) -> u64 {
    match policy {
        BurstPolicy::Sluice => recommended_burst(rate.bps(), mtu, JITTER_BUDGET_US),
        BurstPolicy::TcDefault => mtu as u64,
    }
}

/// The burst (bytes) `sluice apply` programs for a kernel HTB bucket at `rate` when none is
/// configured: [`recommended_burst`] with [`KERNEL_JITTER_BUDGET_US`], or tc's mtu.
pub fn kernel_burst(rate: Rate, mtu: u32, policy: BurstPolicy) -> u64 {
    match policy {
        BurstPolicy::Sluice => recommended_burst(rate.bps(), mtu, KERNEL_JITTER_BUDGET_US),
        BurstPolicy::TcDefault => mtu as u64,
    }
}
