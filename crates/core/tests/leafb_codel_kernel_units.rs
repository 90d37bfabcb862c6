//! The kernel keeps CoDel's clock in 1024-ns units in a `u32`. This test replays random overload
//! traces through the `codel` qdisc and through a small, separate model of the kernel's arithmetic
//! (time `ns >> 10`, wrap-safe `s32` comparisons, target `5ms >> 10` = 4882 units) and compares
//! which packets were dropped and which were sent, packet by packet.
//!
//! History: the first version of `codel.rs` (commit 97849b1) kept exact nanoseconds; against this
//! model only 40 of the 200 traces agreed to the end (the drop schedule drifted ~1 µs per drop and
//! a drop eventually moved to a neighbouring dequeue), which is why `codel.rs` now computes in the
//! kernel's units.

use sluice_core::codel::{Codel, CodelConfig};
use sluice_core::{Packet, Qdisc, Time};
use std::collections::VecDeque;

/// A model of the kernel's CoDel in its own time units, written from RFC 8289 and the kernel's
/// documented behaviour, used only as a reference here.
#[derive(Default)]
struct KernelUnits {
    count: u32,
    lastcount: u32,
    dropping: bool,
    rec_inv_sqrt: u16,
    first_above: u32,
    drop_next: u32,
    queue: VecDeque<(u64, u32, u32)>, // id, len, enqueue time in units
    backlog: u64,
}

const TARGET: u32 = (5_000_000u64 >> 10) as u32;
const INTERVAL: u32 = (100_000_000u64 >> 10) as u32;
const MTU: u64 = 1514;

fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl KernelUnits {
    fn newton(&mut self) {
        let x = (self.rec_inv_sqrt as u32) << 16;
        let x2 = ((x as u64 * x as u64) >> 32) as u32;
        let v = (3u64 << 32).wrapping_sub(self.count as u64 * x2 as u64) >> 2;
        self.rec_inv_sqrt = ((v.wrapping_mul(x as u64) >> 31) >> 16) as u16;
    }
    fn law(&self, t: u32) -> u32 {
        t.wrapping_add(((INTERVAL as u64 * ((self.rec_inv_sqrt as u64) << 16)) >> 32) as u32)
    }
    fn pop(&mut self) -> Option<(u64, u32, u32)> {
        let h = self.queue.pop_front()?;
        self.backlog -= h.1 as u64;
        Some(h)
    }
    fn should_drop(&mut self, head: Option<(u64, u32, u32)>, now: u32) -> bool {
        let Some((_, _, enq)) = head else {
            self.first_above = 0;
            return false;
        };
        let ldelay = now.wrapping_sub(enq);
        if (ldelay.wrapping_sub(TARGET) as i32) < 0 || self.backlog <= MTU {
            self.first_above = 0;
            return false;
        }
        if self.first_above == 0 {
            self.first_above = now.wrapping_add(INTERVAL);
            false
        } else {
            after(now, self.first_above)
        }
    }
    fn dequeue(&mut self, now_ns: u64, drops: &mut Vec<u64>) -> Option<u64> {
        let now = (now_ns >> 10) as u32;
        let mut head = self.pop();
        head?;
        let drop = self.should_drop(head, now);
        if self.dropping {
            if !drop {
                self.dropping = false;
            } else {
                while self.dropping && !after(self.drop_next, now) {
                    self.count = self.count.wrapping_add(1);
                    self.newton();
                    drops.push(head.unwrap().0);
                    head = self.pop();
                    if self.should_drop(head, now) {
                        self.drop_next = self.law(self.drop_next);
                    } else {
                        self.dropping = false;
                    }
                }
            }
        } else if drop {
            drops.push(head.unwrap().0);
            head = self.pop();
            self.should_drop(head, now);
            self.dropping = true;
            let delta = self.count.wrapping_sub(self.lastcount);
            let since = now.wrapping_sub(self.drop_next);
            if delta > 1 && (since.wrapping_sub(16 * INTERVAL) as i32) < 0 {
                self.count = delta;
                self.newton();
            } else {
                self.count = 1;
                self.rec_inv_sqrt = u16::MAX;
            }
            self.lastcount = self.count;
            self.drop_next = self.law(now);
        }
        head.map(|h| h.0)
    }
}

/// xorshift64*, so the traces are reproducible without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// One trace: 1500-byte packets on a 10 Mbit/s link (1.2 ms each), offered at a random load
/// between 0.9 and 1.5 of the link with random gaps, for 5 s. Returns the two drop lists.
fn trace(seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let load = 0.9 + (rng.next() % 600) as f64 / 1000.0;
    let mean_gap = 1_200_000.0 / load;
    let mut q = Codel::new(CodelConfig::default()).unwrap();
    let mut k = KernelUnits::default();
    let (mut sluice_drops, mut kernel_drops) = (vec![], vec![]);
    // Start at an arbitrary offset so unit truncation falls at random phases.
    let start = 1_000_000_000 + rng.next() % 1_000_000;
    let (mut next_arr, mut next_srv, mut id) = (start, start, 0u64);
    while next_arr.min(next_srv) < start + 5_000_000_000 {
        if next_arr <= next_srv {
            let accepted = q.enqueue(Packet::new(1500, id), Time::from_nanos(next_arr)).is_ok();
            if accepted {
                k.queue.push_back((id, 1500, (next_arr >> 10) as u32));
                k.backlog += 1500;
            }
            id += 1;
            next_arr += (rng.next() % (2 * mean_gap as u64)).max(1);
        } else {
            let a = q.dequeue(Time::from_nanos(next_srv)).map(|p| p.payload);
            while let Some(d) = q.take_dropped() {
                sluice_drops.push(d.pkt.payload);
            }
            let b = k.dequeue(next_srv, &mut kernel_drops);
            if a != b {
                // Diverged: the rest of the trace is no longer comparable.
                break;
            }
            next_srv += 1_200_000;
        }
    }
    (sluice_drops, kernel_drops)
}

#[test]
fn drop_decisions_match_the_kernel_unit_model() {
    let runs = 200;
    let mut identical = 0;
    let mut total_drops = 0;
    for seed in 0..runs {
        let (s, k) = trace(seed);
        total_drops += k.len();
        if s == k {
            identical += 1;
        }
    }
    eprintln!("{identical}/{runs} traces with identical drops ({total_drops} kernel-unit drops in all)");
    assert!(total_drops > 1000, "the traces must exercise the control law");
    assert_eq!(identical, runs, "only {identical}/{runs} traces agree");
}
