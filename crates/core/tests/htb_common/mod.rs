//! A small deterministic driver for HTB integration tests: constant-bit-rate sources, an optional
//! link of fixed rate, and a virtual clock that jumps to the next arrival or `next_event`.
#![allow(dead_code)]

use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::{Handle, Packet, Qdisc, Rate, Time};

pub const ROOT: Handle = Handle::new(1, 0);

pub fn h(minor: u32) -> Handle {
    Handle::new(1, minor)
}

pub fn mbit(m: f64) -> Rate {
    Rate::from_bps((m * 1e6).round() as u64)
}

/// Builds an HTB from `(classid, parent, config)`.
pub fn htb(classes: &[(Handle, Handle, HtbClassConfig)]) -> Htb {
    Htb::build(ROOT, HtbConfig::default(), classes, Time::ZERO).expect("valid hierarchy").0
}

/// A constant-bit-rate source whose packets are classified into `class`.
#[derive(Clone, Debug)]
pub struct Source {
    pub class: Handle,
    pub rate_bps: u64,
    pub size: u32,
    /// Offset of the first packet, ns.
    pub phase: u64,
    sent: u64,
}

impl Source {
    pub fn new(class: Handle, rate: Rate, size: u32) -> Source {
        Source { class, rate_bps: rate.bps(), size, phase: 0, sent: 0 }
    }
    /// Starts the source `ns` later.
    pub fn phase(mut self, ns: u64) -> Source {
        self.phase = ns;
        self
    }
    /// Exact arrival time of packet k (no drift).
    fn arrival(&self, k: u64) -> u64 {
        self.phase + ((k as u128 * self.size as u128 * 8_000_000_000).div_ceil(self.rate_bps as u128)) as u64
    }
}

/// Per-source results.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Bytes delivered inside the measurement window, per source.
    pub bytes: Vec<u64>,
    pub enqueued: u64,
    pub dequeued: u64,
    pub dropped: u64,
}

impl Outcome {
    /// Delivered rate of source `i` in bit/s over a window of `secs`.
    pub fn rate(&self, i: usize, secs: f64) -> f64 {
        self.bytes[i] as f64 * 8.0 / secs
    }
}

/// Runs the sources into `q` until `until`; a link of `link_bps` (if any) serialises the output.
/// Bytes are counted for packets leaving in `[from, until)`.
pub fn run(q: &mut Htb, sources: &mut [Source], link_bps: Option<u64>, from: Time, until: Time) -> Outcome {
    let mut out = Outcome { bytes: vec![0; sources.len()], ..Outcome::default() };
    let mut now = 0u64;
    let mut link_free = 0u64;
    let end = until.as_nanos();
    for _ in 0..50_000_000u64 {
        // Arrivals due now.
        for (i, s) in sources.iter_mut().enumerate() {
            while s.arrival(s.sent) <= now {
                let mut p = Packet::new(s.size, i as u64);
                p.push_class(s.class);
                out.enqueued += 1;
                if q.enqueue(p, Time::from_nanos(now)).is_err() {
                    out.dropped += 1;
                }
                s.sent += 1;
            }
        }
        while q.take_dropped().is_some() {
            out.dropped += 1;
        }
        // Transmit.
        if now >= link_free {
            while let Some(p) = q.dequeue(Time::from_nanos(now)) {
                out.dequeued += 1;
                if now >= from.as_nanos() {
                    out.bytes[p.payload as usize] += p.len as u64;
                }
                if let Some(l) = link_bps {
                    link_free = now + (p.len as u128 * 8_000_000_000).div_ceil(l as u128) as u64;
                    break;
                }
            }
            while q.take_dropped().is_some() {
                out.dropped += 1;
            }
        }
        let next_arrival = sources.iter().map(|s| s.arrival(s.sent)).min().unwrap_or(u64::MAX);
        let next_tx = match q.next_event(Time::from_nanos(now)) {
            Some(t) => t.as_nanos().max(link_free).max(now + if now >= link_free { 1 } else { 0 }),
            None => u64::MAX,
        };
        let next = next_arrival.min(next_tx);
        if next >= end {
            return out;
        }
        assert!(next > now || next_tx > now, "clock stuck at {now}");
        now = next.max(now);
    }
    panic!("simulation did not finish");
}
