//! Service curves in the kernel's fixed-point form (sch_hfsc's `internal_sc`/`runtime_sc`).
//!
//! Time is in psched ticks (64 ns: `ns >> 6`), work in bytes. Slopes are scaled by `2^24`
//! (bytes per tick), inverse slopes by `2^14` (ticks per byte). Every operation is the kernel's
//! unsigned 64-bit arithmetic, wrapping where the kernel's does, so that eligible times, deadlines
//! and virtual times come out to the same tick.

/// Ticks per second of the psched clock (`NSEC_PER_SEC >> PSCHED_SHIFT`).
pub const TICKS_PER_SEC: u64 = 1_000_000_000 >> 6;
/// "Never" on the tick axis.
pub const INFINITY: u64 = u64::MAX;
const SM_SHIFT: u32 = 24;
const ISM_SHIFT: u32 = 14;
const SM_MASK: u64 = (1 << SM_SHIFT) - 1;
const ISM_MASK: u64 = (1 << ISM_SHIFT) - 1;

/// A two-piece service curve as tc sends it (`struct tc_service_curve`): slope `m1` (bytes/s)
/// for `d` µs, then slope `m2` (bytes/s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ServiceCurve {
    /// Slope of the first segment, bytes per second.
    pub m1: u32,
    /// Length of the first segment, µs.
    pub d: u32,
    /// Slope of the second segment, bytes per second.
    pub m2: u32,
}

impl ServiceCurve {
    /// A one-piece curve of `m2` bytes per second.
    pub const fn linear(m2: u32) -> ServiceCurve {
        ServiceCurve { m1: 0, d: 0, m2 }
    }

    /// Both slopes zero: the kernel ignores such a curve (`hfsc_change_class`).
    pub const fn is_zero(&self) -> bool {
        self.m1 == 0 && self.m2 == 0
    }

    /// The curve as the kernel stores it and reports it back (`hfsc_dump_sc`): each value goes
    /// through the fixed-point form and back, which may round it.
    pub fn as_reported(&self) -> ServiceCurve {
        let i = InternalSc::new(self);
        ServiceCurve { m1: sm2m(i.sm1), d: dx2d(i.dx), m2: sm2m(i.sm2) }
    }
}

/// `seg_x2y`: bytes served in `x` ticks at scaled slope `sm`.
fn seg_x2y(x: u64, sm: u64) -> u64 {
    (x >> SM_SHIFT).wrapping_mul(sm).wrapping_add((x & SM_MASK).wrapping_mul(sm) >> SM_SHIFT)
}

/// `seg_y2x`: ticks to serve `y` bytes at scaled inverse slope `ism`.
fn seg_y2x(y: u64, ism: u64) -> u64 {
    if y == 0 {
        0
    } else if ism == INFINITY {
        INFINITY
    } else {
        (y >> ISM_SHIFT).wrapping_mul(ism).wrapping_add((y & ISM_MASK).wrapping_mul(ism) >> ISM_SHIFT)
    }
}

fn m2sm(m: u32) -> u64 {
    ((m as u64) << SM_SHIFT).div_ceil(TICKS_PER_SEC)
}

fn m2ism(m: u32) -> u64 {
    if m == 0 {
        INFINITY
    } else {
        (TICKS_PER_SEC << ISM_SHIFT).div_ceil(m as u64)
    }
}

fn d2dx(d: u32) -> u64 {
    (d as u64 * TICKS_PER_SEC).div_ceil(1_000_000)
}

fn sm2m(sm: u64) -> u32 {
    (sm.wrapping_mul(TICKS_PER_SEC) >> SM_SHIFT) as u32
}

fn dx2d(dx: u64) -> u32 {
    (dx.wrapping_mul(1_000_000) / TICKS_PER_SEC) as u32
}

/// A service curve in fixed point (`internal_sc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct InternalSc {
    pub sm1: u64,
    ism1: u64,
    dx: u64,
    dy: u64,
    pub sm2: u64,
    ism2: u64,
}

impl InternalSc {
    pub(crate) fn new(sc: &ServiceCurve) -> InternalSc {
        let sm1 = m2sm(sc.m1);
        let dx = d2dx(sc.d);
        InternalSc { sm1, ism1: m2ism(sc.m1), dx, dy: seg_x2y(dx, sm1), sm2: m2sm(sc.m2), ism2: m2ism(sc.m2) }
    }

    /// First slope no steeper than the second.
    pub(crate) fn is_convex(&self) -> bool {
        self.sm1 <= self.sm2
    }
}

/// A service curve anchored at a point (`runtime_sc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RuntimeSc {
    x: u64,
    y: u64,
    sc: InternalSc,
}

impl RuntimeSc {
    /// `rtsc_init`: `isc` starting at `(x, y)`.
    pub(crate) fn new(isc: &InternalSc, x: u64, y: u64) -> RuntimeSc {
        RuntimeSc { x, y, sc: *isc }
    }

    /// The same curve with its first segment removed (a convex curve's eligible curve).
    pub(crate) fn without_first_segment(mut self) -> RuntimeSc {
        self.sc.dx = 0;
        self.sc.dy = 0;
        self
    }

    /// `rtsc_y2x`: when the curve reaches `y` bytes.
    pub(crate) fn y2x(&self, y: u64) -> u64 {
        let r = &self.sc;
        if y < self.y {
            self.x
        } else if y <= self.y.wrapping_add(r.dy) {
            if r.dy == 0 {
                self.x.wrapping_add(r.dx)
            } else {
                self.x.wrapping_add(seg_y2x(y - self.y, r.ism1))
            }
        } else {
            self.x.wrapping_add(r.dx).wrapping_add(seg_y2x(y.wrapping_sub(self.y).wrapping_sub(r.dy), r.ism2))
        }
    }

    /// `rtsc_x2y`: bytes the curve allows by tick `x`.
    pub(crate) fn x2y(&self, x: u64) -> u64 {
        let r = &self.sc;
        if x <= self.x {
            self.y
        } else if x <= self.x.wrapping_add(r.dx) {
            self.y.wrapping_add(seg_x2y(x - self.x, r.sm1))
        } else {
            self.y.wrapping_add(r.dy).wrapping_add(seg_x2y(x.wrapping_sub(self.x).wrapping_sub(r.dx), r.sm2))
        }
    }

    /// `rtsc_min`: the minimum of this curve and `isc` anchored at `(x, y)`.
    pub(crate) fn min_with(&mut self, isc: &InternalSc, x: u64, y: u64) {
        if isc.is_convex() {
            if self.x2y(x) < y {
                return;
            }
            self.x = x;
            self.y = y;
            return;
        }
        let y1 = self.x2y(x);
        if y1 <= y {
            return;
        }
        let y2 = self.x2y(x.wrapping_add(isc.dx));
        if y2 >= y.wrapping_add(isc.dy) {
            self.x = x;
            self.y = y;
            self.sc.dx = isc.dx;
            self.sc.dy = isc.dy;
            return;
        }
        // The curves cross: where seg_x2y(dx, sm1) == seg_x2y(dx, sm2) + (y1 - y). The kernel
        // divides by the slope difference truncated to 32 bits.
        let dsm = (isc.sm1.wrapping_sub(isc.sm2) as u32).max(1) as u64;
        let mut dx = ((y1 - y) << SM_SHIFT) / dsm;
        let end = self.x.wrapping_add(self.sc.dx);
        if end > x {
            dx = dx.wrapping_add(end - x);
        }
        self.x = x;
        self.y = y;
        self.sc.dx = dx;
        self.sc.dy = seg_x2y(dx, isc.sm1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reported_values_round_trip_as_the_kernel_prints_them() {
        // tdc's umax 1540 dmax 5ms rate 10000bit: m1 308000 B/s (2464Kbit), 5ms, 1250 B/s.
        let sc = ServiceCurve { m1: 308_000, d: 5000, m2: 1250 };
        assert_eq!(sc.as_reported(), sc);
        assert_eq!(ServiceCurve::linear(2500).as_reported(), ServiceCurve::linear(2500));
    }

    #[test]
    fn a_linear_curve_serves_its_rate() {
        // 1 Mbit/s = 125000 B/s: 125000 bytes take one second of ticks (within rounding).
        let isc = InternalSc::new(&ServiceCurve::linear(125_000));
        let rt = RuntimeSc::new(&isc, 0, 0);
        let x = rt.y2x(125_000);
        assert!(x.abs_diff(TICKS_PER_SEC) <= TICKS_PER_SEC / 10_000, "{x}");
        let y = rt.x2y(TICKS_PER_SEC);
        assert!(y.abs_diff(125_000) <= 13, "{y}");
    }

    #[test]
    fn a_concave_curve_serves_its_burst_first() {
        // m1 1 MB/s for 10 ms, then 100 kB/s: 10000 bytes in the first 10 ms.
        let isc = InternalSc::new(&ServiceCurve { m1: 1_000_000, d: 10_000, m2: 100_000 });
        let rt = RuntimeSc::new(&isc, 0, 0);
        let at_d = rt.x2y(d2dx(10_000));
        assert!(at_d.abs_diff(10_000) <= 2, "{at_d}");
        // The next 10000 bytes take 100 ms more.
        let x = rt.y2x(20_000) - rt.y2x(10_000);
        assert!(x.abs_diff(d2dx(100_000)) <= 2, "{x}");
    }

    #[test]
    fn the_minimum_keeps_the_lower_curve() {
        let isc = InternalSc::new(&ServiceCurve { m1: 1_000_000, d: 10_000, m2: 100_000 });
        let mut rt = RuntimeSc::new(&isc, 0, 0);
        // Re-anchoring later and higher (a class that used its burst and comes back soon) keeps
        // the old curve where it is lower.
        let later = d2dx(5_000);
        rt.min_with(&isc, later, 5_000);
        assert!(rt.x2y(later) == 5_000);
        let old = RuntimeSc::new(&isc, 0, 0);
        assert!(rt.x2y(d2dx(50_000)) <= old.x2y(d2dx(50_000)) + 2);
    }
}
