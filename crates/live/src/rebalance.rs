//! Sharing a parent class between workers: each worker runs its own engine built from the same
//! configuration and sees only its own subscribers, so a class whose subtree spans workers (a
//! *shared* class: see [`shared_classes`]) would let each worker send its full rate. A
//! coordinator reads, every [`PERIOD`], how much each worker's copy of a shared class sent and
//! whether that worker still holds a backlog, splits the class's rate and ceil between the
//! workers max-min fairly by demand ([`split`]), and each worker applies its share with
//! [`sluice_engine::Engine::set_class_rate`].
//!
//! What this keeps exact and what it does not:
//! - the sum of the shares is the class's rate (and ceil) at every moment, so the workers
//!   together never send more than the class allows, beyond the buckets: each worker's copy keeps
//!   the class's burst, so a burst of up to `workers × burst` can leave at once;
//! - a worker that sends less than its fair share is given what it sends plus headroom
//!   ([`HEADROOM`]), the rest goes to the workers that want more (work conserving within a
//!   period: a worker whose demand grows waits up to one period, whose traffic its bucket
//!   absorbs);
//! - workers that all want more split the class equally, whatever the rates of the leaves
//!   behind them: exact HTB gives the excess in proportion to the leaves' quanta. With equal
//!   leaves (the usual subscriber plans) that is the same; with unequal ones it is not (measured
//!   in the tests below and in BENCHMARKS.md).
//! - the demand signal is per worker engine (its backlog), not per shared class: exact for one
//!   shared subtree (a root class over the subscribers), approximate for sibling shared classes.

use serde::Serialize;
use sluice_config::model::{ClassOpts, QdiscOpts, State};
use sluice_core::{Handle, Span};

/// How often the coordinator rebalances.
pub const PERIOD: Span = Span::from_micros(200);
/// A worker that is not backlogged gets what it sent, times this, so that it can grow.
pub const HEADROOM: f64 = 1.05;
/// Weight of the newest period in the smoothed sending rate (periods are short and packets
/// lumpy: one 1500-byte frame in 200 µs is 60 Mbit/s).
const EWMA: f64 = 0.125;
/// Least share of a class a worker keeps, as a fraction of the class's even split: an idle
/// worker can start sending at once, and a rate is never zero.
const FLOOR_FRACTION: u64 = 32;

/// A class shared by the workers (an inner HTB class of the root HTB).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SharedClass {
    /// The class.
    #[serde(serialize_with = "ser_handle")]
    pub classid: Handle,
    /// Its configured rate, bit/s (what the workers' shares add up to).
    pub rate: u64,
    /// Its configured ceil, bit/s.
    pub ceil: u64,
}

fn ser_handle<S: serde::Serializer>(h: &Handle, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(h)
}

/// The classes of device `dev`'s tree in `state` that the workers share, when the root qdisc is
/// HTB: every class with children, every top-level class and the `default` class (whatever is
/// not classified lands there from every worker). The other leaves are taken to be one
/// subscriber's each, whole in one worker. Empty when the root is not HTB.
pub fn shared_classes(state: &State, dev: &str) -> Vec<SharedClass> {
    let Some(d) = state.devices.iter().find(|d| d.name == dev) else { return Vec::new() };
    let Some(QdiscOpts::Htb(h)) = d.root().map(|q| &q.opts) else { return Vec::new() };
    let root = d.root().map(|q| q.handle);
    d.classes
        .iter()
        .filter(|c| {
            Some(c.parent) == root
                || (h.default != 0 && c.classid.minor() == h.default)
                || d.classes.iter().any(|k| k.parent == c.classid)
        })
        .filter_map(|c| match &c.opts {
            ClassOpts::Htb(o) => {
                Some(SharedClass { classid: c.classid, rate: o.rate, ceil: o.ceil.max(o.rate) })
            }
            _ => None,
        })
        .collect()
}

/// Whether `dev`'s tree in `state` keeps its limits when it runs in several workers: an HTB
/// root (its shared classes are rebalanced) or a root that limits no rate (a FIFO, fq_codel,
/// sfq, pfifo_fast). Any other root with a rate (TBF, CAKE, HFSC...) would be multiplied by the
/// number of workers.
pub fn shardable(state: &State, dev: &str) -> bool {
    let Some(d) = state.devices.iter().find(|d| d.name == dev) else { return true };
    match d.root().map(|q| &q.opts) {
        None => true,
        Some(o) => {
            matches!(o, QdiscOpts::Htb(_))
                || matches!(o.kind(), "pfifo" | "bfifo" | "pfifo_fast" | "fq_codel" | "sfq")
        }
    }
}

/// Splits `total` bit/s between shards, max-min fair by demand: `demand[i]` is what shard `i`
/// wants (`None`: as much as it can get). Every shard first gets `floor` (at most an even split),
/// then the rest is water-filled: no shard gets more than it wants while another wanting more gets
/// less, and what no one wants is spread evenly, so the shares always add up to `total` exactly
/// (work conserving) and none is below the floor.
pub fn split(total: u64, floor: u64, demand: &[Option<u64>], out: &mut [u64]) {
    let n = demand.len();
    assert_eq!(out.len(), n, "one share per shard");
    if n == 0 {
        return;
    }
    let floor = floor.min(total / n as u64);
    let mut left = total - floor * n as u64;
    out.fill(floor);
    // Water-fill the demands above the floor, smallest first.
    let mut want: Vec<(u64, usize)> = demand
        .iter()
        .enumerate()
        .map(|(i, d)| (d.map_or(u64::MAX, |d| d.saturating_sub(floor)), i))
        .collect();
    want.sort_unstable();
    let mut open = n as u64;
    for &(w, i) in &want {
        let even = left / open;
        let give = w.min(even);
        out[i] += give;
        left -= give;
        open -= 1;
    }
    // What no one wanted (or the rounding remainder): evenly, the remainder to the first shards.
    let even = left / n as u64;
    let rem = (left % n as u64) as usize;
    for (k, o) in out.iter_mut().enumerate() {
        *o += even + (k < rem) as u64;
    }
}

/// One shard's report on a shared class at the end of a period.
#[derive(Clone, Copy, Debug, Default)]
pub struct Report {
    /// Bytes the shard's copy of the class has sent so far (cumulative).
    pub bytes: u64,
    /// The shard held a backlog: it wants more than it was given.
    pub hungry: bool,
}

/// The coordinator's state for one shared class.
#[derive(Clone, Debug)]
pub struct Rebalancer {
    class: SharedClass,
    last_bytes: Vec<u64>,
    /// Smoothed sending rate per shard, bit/s.
    sending: Vec<f64>,
    demand: Vec<Option<u64>>,
    rates: Vec<u64>,
    ceils: Vec<u64>,
}

impl Rebalancer {
    /// A class shared by `shards` workers, split evenly to begin with.
    pub fn new(class: SharedClass, shards: usize) -> Rebalancer {
        let mut r = Rebalancer {
            class,
            last_bytes: vec![0; shards],
            sending: vec![0.0; shards],
            demand: vec![None; shards],
            rates: vec![0; shards],
            ceils: vec![0; shards],
        };
        r.apply_split();
        r
    }

    /// The class.
    pub fn class(&self) -> &SharedClass {
        &self.class
    }

    /// Each shard's (rate, ceil), bit/s.
    pub fn shares(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.rates.iter().copied().zip(self.ceils.iter().copied())
    }

    /// A new period of `period` ended with these reports (one per shard): recompute the shares.
    pub fn tick(&mut self, period: Span, reports: &[Report]) {
        let secs = period.as_nanos().max(1) as f64 / 1e9;
        for (i, r) in reports.iter().enumerate() {
            let sent = r.bytes.saturating_sub(self.last_bytes[i]);
            self.last_bytes[i] = r.bytes;
            let bps = sent as f64 * 8.0 / secs;
            self.sending[i] += EWMA * (bps - self.sending[i]);
            self.demand[i] = (!r.hungry).then(|| (self.sending[i] * HEADROOM) as u64);
        }
        self.apply_split();
    }

    fn apply_split(&mut self) {
        let n = self.rates.len().max(1) as u64;
        let c = &self.class;
        split(c.rate, c.rate / n / FLOOR_FRACTION, &self.demand, &mut self.rates);
        // The ceil follows the rate's split, at least the rate (the shares of the ceil add up to
        // at most the class's ceil).
        for (ceil, &rate) in self.ceils.iter_mut().zip(&self.rates) {
            let share = (rate as u128 * c.ceil as u128 / c.rate.max(1) as u128) as u64;
            *ceil = share.max(rate).max(1);
        }
        for r in self.rates.iter_mut() {
            *r = (*r).max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn max_min_by_demand() {
        let mut out = [0; 3];
        // 100 between one shard wanting 10 and two wanting everything: 10, 45, 45.
        split(100, 0, &[Some(10), None, None], &mut out);
        assert_eq!(out, [10, 45, 45]);
        // Nobody wants it all: the 40 left is spread evenly (13 each, the remainder to the first).
        split(100, 0, &[Some(10), Some(20), Some(30)], &mut out);
        assert_eq!(out, [24, 33, 43]);
        // The floor: an idle shard keeps 5.
        split(100, 5, &[Some(0), None, None], &mut out);
        assert_eq!(out, [5, 47, 48]);
    }

    #[test]
    fn a_shared_class_is_an_inner_htb_class() {
        let s = crate::config::from_script(
            "t",
            "tc qdisc add dev $DEV root handle 1: htb default 20\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 100mbit ceil 200mbit\n\
             tc class add dev $DEV parent 1:1 classid 1:2 htb rate 50mbit\n\
             tc class add dev $DEV parent 1:2 classid 1:10 htb rate 10mbit ceil 100mbit\n\
             tc class add dev $DEV parent 1:1 classid 1:20 htb rate 1mbit\n\
             tc class add dev $DEV parent 1: classid 1:3 htb rate 1mbit\n",
            "e",
        )
        .unwrap();
        let ids: Vec<String> = shared_classes(&s, "e").iter().map(|c| c.classid.to_string()).collect();
        // Inner classes, the top-level ones, the default; not the subscriber's leaf 1:10.
        assert_eq!(ids, ["1:1", "1:2", "1:20", "1:3"]);
        assert_eq!(
            shared_classes(&s, "e")[0],
            SharedClass { classid: Handle::new(1, 1), rate: 100_000_000, ceil: 200_000_000 }
        );
        assert!(shardable(&s, "e"));
        let tbf = crate::config::from_script(
            "t",
            "tc qdisc add dev $DEV root tbf rate 1mbit burst 10k latency 10ms\n",
            "e",
        )
        .unwrap();
        assert!(!shardable(&tbf, "e"));
        assert!(shared_classes(&s, "other").is_empty());
        let fifo = crate::config::unlimited("e");
        assert!(shared_classes(&fifo, "e").is_empty() && shardable(&fifo, "e"));
    }

    proptest! {
        #[test]
        fn split_keeps_its_invariants(
            total in 0u64..=u64::MAX / 4,
            floor_div in 1u64..1000,
            demand in proptest::collection::vec(proptest::option::of(0u64..=u64::MAX / 4), 1..9),
        ) {
            let n = demand.len() as u64;
            let floor = total / n / floor_div;
            let mut out = vec![0; demand.len()];
            split(total, floor, &demand, &mut out);
            // Never more than the class, and all of it (work conserving).
            prop_assert_eq!(out.iter().map(|&x| x as u128).sum::<u128>(), total as u128);
            for (i, &o) in out.iter().enumerate() {
                prop_assert!(o >= floor);
                // Max-min: a shard that got less than it wants has, up to rounding, at least as
                // much as any other shard.
                if demand[i].is_none_or(|d| o < d) {
                    for &p in &out {
                        prop_assert!(p <= o + n, "{:?} -> {:?}", demand, out);
                    }
                }
            }
        }

        #[test]
        fn shares_stay_within_rate_and_ceil(
            rate in 1000u64..100_000_000_000,
            extra in 0u64..100_000_000_000,
            shards in 1usize..9,
            sent in proptest::collection::vec((0u64..10_000_000, any::<bool>()), 8),
        ) {
            let ceil = rate + extra;
            let class = SharedClass { classid: Handle::new(1, 1), rate, ceil };
            let mut r = Rebalancer::new(class, shards);
            let mut bytes = vec![0u64; shards];
            for _ in 0..3 {
                let reports: Vec<Report> = (0..shards)
                    .map(|i| {
                        bytes[i] += sent[i].0;
                        Report { bytes: bytes[i], hungry: sent[i].1 }
                    })
                    .collect();
                r.tick(PERIOD, &reports);
                let shares: Vec<(u64, u64)> = r.shares().collect();
                // The shares add up to the class's rate exactly, their ceils to at most its ceil.
                prop_assert_eq!(shares.iter().map(|s| s.0).sum::<u64>(), rate);
                prop_assert!(shares.iter().map(|s| s.1).sum::<u64>() <= ceil);
                for &(r, c) in &shares {
                    prop_assert!(r >= 1 && c >= r && c <= ceil);
                }
            }
        }
    }
}
