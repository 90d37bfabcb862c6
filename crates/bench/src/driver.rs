//! The measurement loop: a virtual clock, a qdisc kept at a steady backlog, and wall-clock timing
//! of batches of packets.
//!
//! One "packet" is one successful dequeue plus the enqueue that refills the same class, together
//! with any `dequeue` that found nothing and the `next_event` calls spent waiting in between: the
//! whole per-packet cost of a scheduler on a link that is never idle while something may be sent.

use sluice_core::{Packet, Qdisc, Span, Time};
use std::hint::black_box;
use std::time::Instant;

/// What the loop needs to know about the traffic.
pub struct Traffic<'a> {
    /// The packet for class (or flow) `i`, with payload `i`: a dequeued packet is replaced by
    /// `packet(payload)`. Computed, not looked up in a table of templates, so that the harness
    /// adds no cache miss of its own at a million classes.
    pub packet: &'a dyn Fn(usize) -> Packet,
    /// Link transmission time of one packet: the clock advances this much per packet sent.
    pub pkt_time: Span,
}

/// A qdisc driven on a virtual clock.
pub struct Driver<'a> {
    q: &'a mut dyn Qdisc,
    traffic: Traffic<'a>,
    now: Time,
    /// Packets the qdisc refused (should stay 0 in these set-ups).
    pub refused: u64,
}

impl<'a> Driver<'a> {
    /// Fills each of `active` with `depth` packets.
    pub fn new(q: &'a mut dyn Qdisc, traffic: Traffic<'a>, active: &[usize], depth: usize) -> Driver<'a> {
        let mut d = Driver { q, traffic, now: Time::ZERO, refused: 0 };
        for _ in 0..depth {
            for &i in active {
                let p = (d.traffic.packet)(i);
                if d.q.enqueue(p, d.now).is_err() {
                    d.refused += 1;
                }
                while d.q.take_dropped().is_some() {}
            }
        }
        d
    }

    /// Sends one packet (waiting on the virtual clock if needed) and refills its class.
    /// Returns false if the qdisc ran empty.
    #[inline]
    pub fn step(&mut self) -> bool {
        loop {
            match self.q.dequeue(self.now) {
                Some(p) => {
                    let refill = (self.traffic.packet)(p.payload as usize);
                    if self.q.enqueue(black_box(refill), self.now).is_err() {
                        self.refused += 1;
                    }
                    self.now += self.traffic.pkt_time;
                    return true;
                }
                None => match self.q.next_event(self.now) {
                    None => return false,
                    Some(t) => self.now = t.max(self.now + Span::from_nanos(1)),
                },
            }
        }
    }

    /// The measured loop under callgrind (`--toggle-collect='*callgrind_loop*'`): [`Self::run`]
    /// under a name of its own so that set-up and warm-up are not counted.
    #[inline(never)]
    pub fn callgrind_loop(&mut self, n: usize) -> usize {
        self.run(n)
    }

    /// Sends `n` packets; returns how many were sent.
    pub fn run(&mut self, n: usize) -> usize {
        for k in 0..n {
            if !self.step() {
                return k;
            }
        }
        n
    }

    /// Times `batches` batches of `batch` packets; returns ns per packet of each batch.
    pub fn measure(&mut self, batches: usize, batch: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(batches);
        for _ in 0..batches {
            let t = Instant::now();
            let sent = self.run(batch);
            let el = t.elapsed().as_nanos() as f64;
            if sent == 0 {
                break;
            }
            out.push(el / sent as f64);
        }
        out
    }

    /// Current virtual time.
    pub fn now(&self) -> Time {
        self.now
    }
}

/// p50, p99 and mean of per-batch ns/packet.
pub fn summarize(samples: &[f64]) -> (f64, f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let pick = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    (pick(0.5), pick(0.99), mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_ranks() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        let (p50, p99, mean) = summarize(&v);
        assert_eq!((p50, p99, mean), (51.0, 99.0, 50.5));
        assert!(summarize(&[]).0.is_nan());
    }
}
