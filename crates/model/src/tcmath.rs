//! tc's scheduler-tick arithmetic, once: `tc_calc_xmittime`, `tc_calc_xmitsize`,
//! `tc_calc_rtable` with its `struct tc_ratespec`, and the kernel's `psched_l2t_ns`. Every
//! encoder, printer and model of tc uses these (issue 24: one of each helper).
//!
//! tc 6.1 computes in `double` and stores into `unsigned int`, which C leaves undefined out of
//! range; Sluice reproduces what Debian's gcc 12 build of tc 6.1 does on x86-64, as captured
//! from it: a lone `tc_calc_xmittime` converts through a signed 64-bit register and keeps the
//! low half ([`c_u32`]: a value above `u32::MAX` wraps, infinity and NaN give 0), while the loop
//! of `tc_calc_rtable` is vectorised and its conversions give 0 from 2^32 up ([`c_u32_vec`]).

use crate::model::LinkLayer;

/// Scheduler ticks per microsecond (`/proc/net/psched` on high-resolution kernels: 64 ns ticks).
pub const TICK_IN_USEC: f64 = 15.625;

/// A `double` stored into an `unsigned int` as gcc does on x86-64: `cvttsd2si` into a 64-bit
/// register, low 32 bits kept. Values from 2^32 to 2^63 wrap; out-of-range values, infinities
/// and NaN give `0x8000000000000000`, whose low half is 0.
pub fn c_u32(v: f64) -> u32 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if v > -LIMIT && v < LIMIT {
        v as i64 as u32
    } else {
        0
    }
}

/// The vectorised conversion of tc's rate-table loop (`cvttpd2dq` with gcc's unsigned
/// adjustment): exact below 2^32, 0 from 2^32 up and for infinity, `0x80000000` for NaN.
pub fn c_u32_vec(v: f64) -> u32 {
    const TWO31: f64 = 2_147_483_648.0;
    let high = v >= TWO31;
    let w = if high { v - TWO31 } else { v };
    let i = if w > -TWO31 - 1.0 && w < TWO31 { w as i32 } else { i32::MIN };
    (i as u32) ^ if high { 0x8000_0000 } else { 0 }
}

/// tc's `tc_calc_xmittime`: psched ticks to send `size` bytes at `rate` bytes/s, with tc 6.1's
/// two truncations (to whole microseconds, then to ticks) and wrap-around (see [`c_u32`]).
///
/// At rate 0 it is 0, as in tc 6.1: `size / 0.0` is infinity (or NaN for size 0), which the
/// conversion to `unsigned int` turns into 0. tc never sends a rate of 0 with a table (TBF and
/// HTB refuse it); RED's idle damping and police's packet burst can meet it.
pub fn xmittime(rate: u64, size: u32) -> u32 {
    xmittime_at(TICK_IN_USEC, rate, size)
}

/// [`xmittime`] with another tick length (`tick_in_usec` ticks per µs, as tc reads it from
/// `/proc/net/psched`): old kernels had 1024 ns ticks.
pub fn xmittime_at(tick_in_usec: f64, rate: u64, size: u32) -> u32 {
    let us = c_u32(1e6 * (size as f64 / rate as f64));
    c_u32(us as f64 * tick_in_usec)
}

/// [`xmittime`] as tc's rate-table loop computes it ([`c_u32_vec`] for both conversions).
fn xmittime_in_table(rate: u64, size: u32) -> u32 {
    let us = c_u32_vec(1e6 * (size as f64 / rate as f64));
    c_u32_vec(us as f64 * TICK_IN_USEC)
}

/// tc's `tc_calc_xmitsize`: the bytes `ticks` carry at `rate` bytes/s (ticks truncated to whole
/// microseconds first, as tc does).
pub fn xmitsize(rate: u64, ticks: u32) -> u32 {
    let us = c_u32(ticks as f64 / TICK_IN_USEC);
    c_u32((rate as f64 * us as f64) / 1e6)
}

/// The kernel's `psched_l2t_ns` with its mult/shift approximation, including overhead/mpu/ATM.
pub fn l2t_ns(rate_bytes: u64, len: u32, overhead: i32, mpu: u32, atm: bool) -> u64 {
    if rate_bytes == 0 {
        return 0;
    }
    let mut factor: u64 = 1_000_000_000;
    let mut shift = 0u32;
    let mut mult;
    loop {
        mult = factor / rate_bytes;
        if mult & (1 << 31) != 0 || factor & (1 << 63) != 0 {
            break;
        }
        factor <<= 1;
        shift += 1;
    }
    let mut l = (len as i64 + overhead as i64).max(0) as u64;
    if l < mpu as u64 {
        l = mpu as u64;
    }
    if atm {
        l = l.div_ceil(48) * 53;
    }
    ((l as u128 * mult as u128) >> shift) as u64
}

/// `TC_LINKLAYER_ETHERNET` / `TC_LINKLAYER_ATM`: the `linklayer` byte of a ratespec.
const LINKLAYER_ETHERNET: u8 = 1;
const LINKLAYER_ATM: u8 = 2;

/// `struct tc_ratespec` as tc fills it: the rate (bytes/s, `~0` when it needs the 64-bit
/// attribute) and what its table was computed with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateSpec {
    /// log2 of the table's cell size.
    pub cell_log: u8,
    /// Link layer the table was computed for.
    pub linklayer: LinkLayer,
    /// Per-packet overhead, bytes.
    pub overhead: u16,
    /// Minimum packet unit, bytes.
    pub mpu: u16,
    /// Bytes per second (`u32::MAX` for a rate that does not fit).
    pub rate: u32,
}

impl RateSpec {
    /// A spec of `rate` bytes/s (clamped to `~0` as tc does), the table not computed yet.
    pub fn new(rate: u64, overhead: u16, mpu: u16, linklayer: LinkLayer) -> RateSpec {
        RateSpec { cell_log: 0, linklayer, overhead, mpu, rate: u32::try_from(rate).unwrap_or(u32::MAX) }
    }

    /// `tc_calc_rtable` (or `tc_calc_rtable_64` with `table_rate` the 64-bit rate): the 256
    /// transmit times of `(i + 1) << cell_log` bytes (at least `mpu`, in ATM cells for ATM),
    /// `cell_log` the smallest with `mtu >> cell_log <= 255` (`mtu` 0: 2047). Sets `cell_log`;
    /// returns the table as the 1024 bytes tc sends.
    pub fn table(&mut self, table_rate: u64, mtu: u32) -> Vec<u8> {
        let mtu = if mtu == 0 { 2047 } else { mtu };
        let mut cell_log = 0u8;
        while (mtu >> cell_log) > 255 {
            cell_log += 1;
        }
        self.cell_log = cell_log;
        let mut out = Vec::with_capacity(1024);
        for i in 0..256u32 {
            let mut sz = (i + 1) << cell_log;
            if sz < self.mpu as u32 {
                sz = self.mpu as u32;
            }
            if self.linklayer == LinkLayer::Atm {
                // tc_align_to_atm in C's unsigned arithmetic: a huge mtu wraps, as in tc.
                sz = sz.div_ceil(48).wrapping_mul(53);
            }
            out.extend_from_slice(&xmittime_in_table(table_rate, sz).to_ne_bytes());
        }
        out
    }

    /// The 12 bytes of the struct (`cell_align` is -1, as tc sets it).
    pub fn bytes(&self) -> [u8; 12] {
        let mut r = [0u8; 12];
        r[0] = self.cell_log;
        r[1] = match self.linklayer {
            LinkLayer::Ethernet => LINKLAYER_ETHERNET,
            LinkLayer::Atm => LINKLAYER_ATM,
        };
        r[2..4].copy_from_slice(&self.overhead.to_ne_bytes());
        r[4..6].copy_from_slice(&(-1i16).to_ne_bytes());
        r[6..8].copy_from_slice(&self.mpu.to_ne_bytes());
        r[8..12].copy_from_slice(&self.rate.to_ne_bytes());
        r
    }

    /// The struct from its 12 bytes (`None`: short).
    pub fn parse(b: &[u8]) -> Option<RateSpec> {
        let b: &[u8; 12] = b.get(..12)?.try_into().ok()?;
        Some(RateSpec {
            cell_log: b[0],
            linklayer: if b[1] == LINKLAYER_ATM { LinkLayer::Atm } else { LinkLayer::Ethernet },
            overhead: u16::from_ne_bytes([b[2], b[3]]),
            mpu: u16::from_ne_bytes([b[6], b[7]]),
            rate: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xmittime_truncates_twice_like_tc() {
        // 1 Mbit (125000 B/s), 1600 b: 12.8 ms = 12800 µs = 200000 ticks.
        assert_eq!(xmittime(125_000, 1600), 200_000);
        // 10000 b at 3 MB/s is 3333.33 µs: tc truncates to 3333 µs first (52078 ticks, not 52083).
        assert_eq!(xmittime(3_000_000, 10_000), 52_078);
        assert_eq!(xmitsize(125_000, 200_000), 1600);
    }

    #[test]
    fn rate_zero_gives_zero_as_in_tc() {
        assert_eq!(xmittime(0, 1500), 0);
        assert_eq!(xmittime(0, 0), 0);
        assert_eq!(xmittime_at(1000.0 / 1024.0, 0, 1500), 0);
    }

    #[test]
    fn values_past_u32_wrap_as_gcc_stores_them() {
        // Values from tc 6.1's own arithmetic, compiled with gcc -O2 on x86-64.
        assert_eq!(xmittime(1, 1500), 1_962_663_520);
        assert_eq!(xmittime(1, 5000), 2_426_201_408);
        assert_eq!(xmittime(125, 1_000_000), 2_056_561_152);
        assert_eq!(xmittime(1, 100_000_000), 24_520_704);
        assert_eq!(c_u32(f64::INFINITY), 0);
        assert_eq!(c_u32(f64::NAN), 0);
        assert_eq!(c_u32(-1.0), u32::MAX);
    }

    #[test]
    fn rate_tables_convert_as_the_vectorised_loop_does() {
        // Captured from tc 6.1 (`tbf rate 8bit ... mpu 4295`): 4295e6 µs does not fit 32 bits,
        // and the table holds 0 where a lone xmittime wraps to 511000.
        assert_eq!(xmittime(1, 4295), 511_000);
        assert_eq!(xmittime_in_table(1, 4295), 0);
        // `tbf rate 8bit`: slot 33 (272 bytes) is 4.25e9 ticks, slot 34 would be 4.375e9: 0.
        let t = RateSpec::new(1, 0, 0, LinkLayer::Ethernet).table(1, 0);
        let slot = |i: usize| u32::from_ne_bytes(t[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!((slot(33), slot(34)), (4_250_000_000, 0));
        assert_eq!(c_u32_vec(3e9), 3_000_000_000);
        assert_eq!(c_u32_vec(f64::INFINITY), 0);
        assert_eq!(c_u32_vec(f64::NAN), 0x8000_0000);
        assert_eq!(c_u32_vec(-5.5), (-5i32) as u32);
    }

    #[test]
    fn ratespec_round_trips_and_tables_follow_mtu_mpu_and_atm() {
        let mut r = RateSpec::new(62_500, 24, 64, LinkLayer::Atm);
        let t = r.table(62_500, 0);
        assert_eq!(r.cell_log, 3);
        assert_eq!(RateSpec::parse(&r.bytes()), Some(r));
        // Slot 0 is 8 bytes, raised to the mpu (64), then 2 ATM cells of 53 bytes.
        assert_eq!(&t[0..4], &xmittime(62_500, 106).to_ne_bytes());
        assert_eq!(RateSpec::new(5_000_000_000, 0, 0, LinkLayer::Ethernet).rate, u32::MAX);
    }
}
