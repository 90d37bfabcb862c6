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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_rate_times_jitter_and_one_packet() {
        for rate in [1_000_000u64, 10_000_000, 1_000_000_000, 10_000_000_000, 40_000_000_000] {
            for mtu in [1514u32, 1600, 9000, 65536] {
                let b = recommended_burst(rate, mtu, JITTER_BUDGET_US);
                let cover = rate as f64 / 8.0 * JITTER_BUDGET_US * 1e-6;
                assert!(b as f64 >= cover && b >= mtu as u64, "{rate} {mtu}: {b}");
                assert!((b as f64) < cover.max(mtu as f64) + 1024.0, "rounds up by less than 1 KiB");
                assert_eq!(b % 1024, 0);
            }
        }
    }

    #[test]
    fn ten_gbit_lands_near_the_measured_megabyte() {
        // DESIGN.md: kernel HTB at 10 Gbit needed ~1m to get within 0.2 %.
        let b = recommended_burst(10_000_000_000, 1600, JITTER_BUDGET_US);
        assert!((1 << 20..=(3 << 19)).contains(&b), "{b}");
    }

    #[test]
    fn kernel_bursts_cover_the_kernel_budget_and_keep_tc_for_comparisons() {
        for rate in [1_000_000u64, 1_000_000_000, 5_000_000_000, 10_000_000_000, 40_000_000_000] {
            for mtu in [1600u32, 9000] {
                let r = Rate::from_bps(rate);
                let b = kernel_burst(r, mtu, BurstPolicy::Sluice);
                assert_eq!(b, recommended_burst(rate, mtu, KERNEL_JITTER_BUDGET_US));
                assert!(b as f64 >= rate as f64 / 8.0 * KERNEL_JITTER_BUDGET_US * 1e-6);
                // Never smaller than the general rule's bucket.
                assert!(b >= auto_burst(r, mtu, BurstPolicy::Sluice));
                assert_eq!(kernel_burst(r, mtu, BurstPolicy::TcDefault), mtu as u64);
            }
        }
    }

    #[test]
    fn bad_input_does_not_panic() {
        assert_eq!(recommended_burst(0, 0, -5.0), 1024);
        assert!(recommended_burst(u64::MAX, u32::MAX, f64::MAX) > 0);
    }

    #[test]
    fn the_model_records_bursts_left_out_and_export_keeps_that() {
        use crate::model::ClassOpts;
        let t = "tc qdisc add dev e root handle 1: htb\n\
                 tc class add dev e parent 1: classid 1:1 htb rate 1gbit\n\
                 tc class add dev e parent 1: classid 1:2 htb rate 1gbit burst 10k\n";
        let v = crate::shell::Vars::new();
        let st = crate::script::load_tc_script("t", t, &v).unwrap().state;
        let flags = |st: &crate::State| -> Vec<(bool, bool)> {
            st.devices[0]
                .classes
                .iter()
                .map(|c| match &c.opts {
                    ClassOpts::Htb(h) => (h.burst_auto, h.cburst_auto),
                    _ => panic!("htb class expected"),
                })
                .collect()
        };
        assert_eq!(flags(&st), vec![(true, true), (false, true)]);
        let again = crate::script::load_tc_script("x", &crate::export::to_tc_script(&st), &v).unwrap().state;
        assert_eq!(flags(&again), flags(&st));
        let back = crate::export::from_toml(&crate::export::to_toml(&st).unwrap()).unwrap();
        assert_eq!(flags(&back), flags(&st));
    }
}
