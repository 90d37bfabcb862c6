//! How tc prints what every kind shows: handles, rates, sizes, times, and the scheduler-tick
//! arithmetic (`tc_calc_xmittime`) behind bursts. One copy of each, used by every printer and
//! encoder.

use crate::model::*;
use sluice_core::units::{format_rate, format_time};
use sluice_core::{Rate, Span};

pub use crate::tcmath::{l2t_ns, xmitsize, xmittime, TICK_IN_USEC};

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

/// A class id or parent as tc's `sprint_tc_classid` prints it: `root`, `none`, `1:`, `1:10`,
/// `:10` (major 0), `ffff:fff1`; a minor above `ffff` (native form) in the same hex form. The one
/// printer of handles: the others below are built on it.
pub fn classid_str(h: Handle) -> String {
    if h.major() == 0 && h.minor() != 0 {
        return format!(":{:x}", h.minor());
    }
    h.to_string() // `Handle`'s own Display: root, none, 1:, 1:10
}

/// A kernel 32-bit handle (`major << 16 | minor`, as netlink carries it) like [`classid_str`].
pub fn tc_handle_str(h: u32) -> String {
    classid_str(Handle::from_tc(h))
}

/// A qdisc's handle as `tc qdisc show` prints it (`%x:` of the major; `0:` for the default
/// qdiscs, which have none).
pub fn qdisc_handle_str(h: Handle) -> String {
    format!("{:x}:", h.major())
}

/// Where `tc qdisc add` puts a qdisc: `root`, `ingress` (the ingress/clsact slot) or `parent X:Y`.
pub fn qdisc_parent_arg(parent: Handle) -> String {
    match parent {
        H_ROOT => "root".into(),
        H_INGRESS => "ingress".into(),
        p => format!("parent {}", classid_str(p)),
    }
}

/// A filter's block for a person: clsact's `ingress`/`egress` hooks, else the class id.
pub fn filter_parent_str(parent: Handle) -> String {
    match parent {
        H_MIN_INGRESS => "ingress".into(),
        H_MIN_EGRESS => "egress".into(),
        p => classid_str(p),
    }
}

/// Where `tc filter add` puts a filter: `ingress`, `egress` (clsact's hooks) or `parent X:Y`.
pub fn filter_parent_arg(parent: Handle) -> String {
    match parent {
        H_MIN_INGRESS | H_MIN_EGRESS => filter_parent_str(parent),
        p => format!("parent {}", classid_str(p)),
    }
}

/// A class id as the kernel's `%X` prints it in its messages (one 32-bit hex number), or
/// [`classid_str`]'s form for a minor wider than the kernel's.
pub fn kernel_hex(h: Handle) -> String {
    match h.to_tc() {
        Some(v) => format!("{v:X}"),
        None => classid_str(h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_print_as_tc_prints_them() {
        assert_eq!(classid_str(H_ROOT), "root");
        assert_eq!(classid_str(Handle::UNSPEC), "none");
        assert_eq!(classid_str(H_INGRESS), "ffff:fff1");
        assert_eq!(classid_str(Handle::new(1, 0)), "1:");
        assert_eq!(classid_str(Handle::new(0x1a, 0x10)), "1a:10");
        assert_eq!(classid_str(Handle::new(0, 0x10)), ":10");
        assert_eq!(classid_str(Handle::new(1, 0x1_0001)), "1:10001");
        assert_eq!(tc_handle_str(0x0001_0010), "1:10");
        assert_eq!(tc_handle_str(0xFFFF_FFFF), "root");
        assert_eq!(qdisc_handle_str(Handle::new(0x8001, 0)), "8001:");
        assert_eq!(qdisc_handle_str(Handle::UNSPEC), "0:");
        assert_eq!(qdisc_parent_arg(H_ROOT), "root");
        assert_eq!(qdisc_parent_arg(H_INGRESS), "ingress");
        assert_eq!(qdisc_parent_arg(Handle::new(1, 0x10)), "parent 1:10");
        assert_eq!(filter_parent_arg(H_MIN_EGRESS), "egress");
        assert_eq!(filter_parent_arg(Handle::new(1, 0)), "parent 1:");
        assert_eq!(filter_parent_str(H_MIN_INGRESS), "ingress");
        assert_eq!(filter_parent_str(Handle::new(1, 0)), "1:");
        assert_eq!(kernel_hex(Handle::new(1, 0x10)), "10010");
        assert_eq!(kernel_hex(Handle::new(1, 0x1_0001)), "1:10001");
    }
}
