//! Measurements: per-flow and per-class totals, latency histograms, jitter, loss, time series
//! and queue occupancy. Totals count only the measurement window (after warm-up); time series
//! cover the whole run.

use hdrhistogram::Histogram;
use sluice_core::{Span, Time};

/// Per-flow counters.
pub(crate) struct FlowRec {
    pub sent: u64,
    pub drops: u64,
    pub recv: u64,
    pub recv_bytes: u64,
    /// Bytes delivered in order to the receiving application (TCP).
    pub goodput_bytes: u64,
    /// Accounted bytes the shaper sent outside every reported class.
    pub unclassified_bytes: u64,
    pub hist: Histogram<u64>,
    jitter_sum_ns: u128,
    jitter_n: u64,
    last_transit: Option<i64>,
    pub bins_bytes: Vec<u64>,
    pub bins_lat_ns: Vec<u64>,
    pub bins_lat_n: Vec<u32>,
    /// TCP senders: congestion window (segments) and smoothed RTT (ns) at each sample.
    pub cwnd: Vec<f64>,
    pub srtt_ns: Vec<u64>,
}

/// Per-class counters (shaper dequeues).
#[derive(Default)]
pub(crate) struct ClassRec {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    /// First and last departure in the window, and the cost of the last one.
    pub first: Option<Time>,
    pub last: Time,
    pub last_cost: u64,
    pub bins_bytes: Vec<u64>,
}

/// Per-hop queue counters beyond the qdisc's own.
#[derive(Default)]
pub(crate) struct HopRec {
    pub max_backlog: u64,
    pub samples: Vec<u64>,
}

/// All measurements of one run.
pub(crate) struct Recorder {
    pub warmup: Time,
    pub end: Time,
    pub step: u64,
    pub series: bool,
    pub flows: Vec<FlowRec>,
    pub classes: Vec<ClassRec>,
    pub hops: Vec<HopRec>,
}

impl Recorder {
    pub(crate) fn new(
        nflows: usize,
        nclasses: usize,
        nhops: usize,
        warmup: Span,
        end: Span,
        step: Span,
        series: bool,
    ) -> Recorder {
        let nbins = if series { (end.as_nanos().div_ceil(step.as_nanos().max(1))) as usize } else { 0 };
        let flows = (0..nflows)
            .map(|_| FlowRec {
                sent: 0,
                drops: 0,
                recv: 0,
                recv_bytes: 0,
                goodput_bytes: 0,
                unclassified_bytes: 0,
                // From 1 ns, 3 significant digits, grown to the largest latency recorded (the
                // same buckets as fixed bounds; a fixed 1000 s range costs 250 KB per flow).
                hist: Histogram::new(3).expect("3 significant digits are valid"),
                jitter_sum_ns: 0,
                jitter_n: 0,
                last_transit: None,
                bins_bytes: vec![0; nbins],
                bins_lat_ns: vec![0; nbins],
                bins_lat_n: vec![0; nbins],
                cwnd: Vec::new(),
                srtt_ns: Vec::new(),
            })
            .collect();
        let classes =
            (0..nclasses).map(|_| ClassRec { bins_bytes: vec![0; nbins], ..Default::default() }).collect();
        let hops = (0..nhops).map(|_| HopRec::default()).collect();
        Recorder {
            warmup: Time::ZERO + warmup,
            end: Time::ZERO + end,
            step: step.as_nanos().max(1),
            series,
            flows,
            classes,
            hops,
        }
    }

    #[inline]
    fn bin(&self, t: Time) -> Option<usize> {
        if !self.series {
            return None;
        }
        let b = (t.as_nanos() / self.step) as usize;
        Some(b)
    }

    #[inline]
    pub(crate) fn in_window(&self, t: Time) -> bool {
        t >= self.warmup && t <= self.end
    }

    /// A packet of `flow` left its source at `t`.
    #[inline]
    pub(crate) fn on_sent(&mut self, flow: u32, t: Time) {
        if self.in_window(t) {
            self.flows[flow as usize].sent += 1;
        }
    }

    /// A packet of `flow` sent at `sent` was dropped.
    #[inline]
    pub(crate) fn on_drop(&mut self, flow: u32, class: u32, sent: Time, now: Time) {
        if self.in_window(sent) {
            self.flows[flow as usize].drops += 1;
        }
        if class != u32::MAX && self.in_window(now) {
            self.classes[class as usize].drops += 1;
        }
    }

    /// A packet of `flow` (`bytes` long, sent at `sent`) reached its receiver at `at`.
    /// `latency` is what the flow reports (one-way delay, or RTT for probes).
    #[inline]
    pub(crate) fn on_recv(&mut self, flow: u32, bytes: u64, sent: Time, at: Time, latency: Span) {
        let binned = self.bin(at);
        let in_win = self.in_window(sent) && self.in_window(at);
        // Throughput counts what arrives in the window, whenever it was sent (a long queue
        // must not hide the last part of the window).
        let arrived_in_win = self.in_window(at);
        let f = &mut self.flows[flow as usize];
        let lat = latency.as_nanos();
        if let Some(b) = binned {
            if b < f.bins_bytes.len() {
                f.bins_bytes[b] += bytes;
                f.bins_lat_ns[b] += lat;
                f.bins_lat_n[b] += 1;
            }
        }
        if arrived_in_win {
            f.recv_bytes += bytes;
        }
        if in_win {
            f.recv += 1;
            let _ = f.hist.record(lat.max(1));
            // RFC 3550 §6.4.1: D = difference of transit times of consecutive packets.
            let transit = lat as i64;
            if let Some(prev) = f.last_transit {
                f.jitter_sum_ns += (transit - prev).unsigned_abs() as u128;
                f.jitter_n += 1;
            }
            f.last_transit = Some(transit);
        }
    }

    /// `bytes` of `flow` were delivered in order to the receiving application at `at`.
    #[inline]
    pub(crate) fn on_goodput(&mut self, flow: u32, bytes: u64, at: Time) {
        if bytes > 0 && self.in_window(at) {
            self.flows[flow as usize].goodput_bytes += bytes;
        }
    }

    /// The shaper released a packet of `flow` that no reported class accounts for.
    #[cold]
    pub(crate) fn on_unclassified(&mut self, flow: u32, cost: u64, now: Time) {
        if self.in_window(now) {
            self.flows[flow as usize].unclassified_bytes += cost;
        }
    }

    /// The shaper released a packet of class `class` costing `cost` accounted bytes.
    #[inline]
    pub(crate) fn on_class_tx(&mut self, class: u32, cost: u64, segs: u64, now: Time) {
        if class == u32::MAX {
            return;
        }
        let binned = self.bin(now);
        let win = self.in_window(now);
        let c = &mut self.classes[class as usize];
        if let Some(b) = binned {
            if b < c.bins_bytes.len() {
                c.bins_bytes[b] += cost;
            }
        }
        if win {
            c.bytes += cost;
            c.packets += segs;
            if c.first.is_none() {
                c.first = Some(now);
            }
            c.last = now;
            c.last_cost = cost;
        }
    }

    pub(crate) fn jitter_ms(&self, flow: usize) -> f64 {
        let f = &self.flows[flow];
        if f.jitter_n == 0 {
            0.0
        } else {
            f.jitter_sum_ns as f64 / f.jitter_n as f64 / 1e6
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_latency_histogram_reports_what_fixed_bounds_did() {
        let mut grown: Histogram<u64> = Histogram::new(3).unwrap();
        let mut fixed: Histogram<u64> = Histogram::new_with_bounds(1, 1_000_000_000_000, 3).unwrap();
        let mut x: u64 = 12345;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = 1 + (x >> 20) % 3_000_000_000;
            grown.record(v).unwrap();
            fixed.record(v).unwrap();
        }
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(grown.value_at_quantile(q), fixed.value_at_quantile(q), "q = {q}");
        }
        assert!(grown.distinct_values() < fixed.distinct_values(), "it grew only as far as needed");
    }
}
