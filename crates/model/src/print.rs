//! How tc prints what every kind shows: handles, rates, sizes, times, and the scheduler-tick
//! arithmetic (`tc_calc_xmittime`) behind bursts. One copy of each, used by every printer and
//! encoder.

use crate::model::*;
use sluice_core::units::{format_rate, format_time};
use sluice_core::{Rate, Span};

/// Scheduler ticks per microsecond (`/proc/net/psched` on high-resolution kernels: 64 ns ticks).
pub const TICK_IN_USEC: f64 = 15.625;

/// tc's `tc_calc_xmittime`: bytes at `rate_bytes` B/s, in psched ticks (truncating like C).
pub fn xmittime(rate_bytes: u64, size: u32) -> u32 {
    if rate_bytes == 0 {
        return 0;
    }
    let us = (1e6 * (size as f64 / rate_bytes as f64)) as u32;
    (us as f64 * TICK_IN_USEC) as u32
}

/// tc's `tc_calc_xmitsize`: the bytes `ticks` carry at `rate_bytes`.
pub fn xmitsize(rate_bytes: u64, ticks: u32) -> u32 {
    let us = (ticks as f64 / TICK_IN_USEC) as u32;
    ((rate_bytes as f64 * us as f64) / 1e6) as u32
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

/// HTB burst as `tc class show` prints it: bytes → ticks (tc) → bytes (tc).
pub fn htb_shown_burst(rate_bps: u64, bytes: u32) -> u32 {
    let rb = rate_bps / 8;
    xmitsize(rb, xmittime(rb, bytes))
}

/// CoDel keeps times in 1024 ns units: what a µs value reads back as.
pub fn codel_us(us: u32) -> u32 {
    let t = (us as u64 * 1000) >> 10;
    ((t << 10) / 1000) as u32
}

/// A µs time as tc prints it.
pub fn time_us(us: u32) -> String {
    format_time(Span::from_micros(us as u64))
}

/// A rate in bit/s as tc prints it.
pub fn rate(bps: u64) -> String {
    format_rate(Rate::from_bps(bps))
}

/// Prints a class id like `sprint_tc_classid` (a minor above `ffff` in the same hex form).
pub fn classid_str(h: Handle) -> String {
    match h {
        H_ROOT => "root".into(),
        Handle::UNSPEC => "none".into(),
        H_INGRESS => "ffff:fff1".into(),
        h if h.minor() == 0 => format!("{:x}:", h.major()),
        h if h.major() == 0 => format!(":{:x}", h.minor()),
        h => format!("{:x}:{:x}", h.major(), h.minor()),
    }
}
