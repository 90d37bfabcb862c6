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
//! - workers that want more are given what HTB would give their backlogged leaves: each leaf's
//!   rate, then the excess in proportion to the leaves' quanta ([`Claim`]);
//! - the signals are per worker engine (its backlog, its backlogged leaves), not per shared
//!   class: exact for one shared subtree (a root class over the subscribers), approximate for
//!   sibling shared classes and for leaves below inner classes of their own (HTB then shares
//!   level by level, not by leaf). Measured in `tests/shared_parent.rs` and BENCHMARKS.md.

use serde::Serialize;
use sluice_core::htb::ActiveLeaves;
use sluice_core::{Handle, Span};
use sluice_tc::model::{ClassOpts, QdiscOpts, State};

/// How often the coordinator rebalances.
pub const PERIOD: Span = Span::from_micros(200);
/// A worker that is not backlogged gets what it sent, times this, so that it can grow.
pub const HEADROOM: f64 = 1.05;
/// Weight of the newest period in the smoothed sending rate (periods are short and packets
/// lumpy: one 1500-byte frame in 200 µs is 60 Mbit/s).
const EWMA: f64 = 0.125;
/// Least share of a class a worker keeps, as a fraction of the class's even split: a rate is
/// never zero. Small: an idle worker starts on its full bucket (a worker's copy keeps the class's
/// burst, at least 1 ms of the whole rate on the live path, more than a period), and what the
/// idle workers keep is lost to the busy ones (0.05 % with two workers).
const FLOOR_FRACTION: u64 = 1024;

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

/// One shard's claim on a shared class for a period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Claim {
    /// What the shard wants, bit/s (`None`: as much as it can get).
    pub demand: Option<u64>,
    /// The rates of its backlogged leaves, bit/s: what HTB guarantees them before sharing.
    pub guaranteed: u64,
    /// Its weight for the excess: the quanta of its backlogged leaves (HTB shares the excess by
    /// quantum); 0 counts as 1.
    pub weight: u64,
}

/// Splits `total` bit/s between shards as HTB would split a parent between their leaves: every
/// shard first gets `floor` (at most an even split), then the rates of its backlogged leaves
/// (scaled down together if they exceed what is left), then the excess is water-filled by
/// weight: no shard gets more than it wants while another wanting more gets less than its
/// weight's part. What no one wants is spread evenly, so the shares always add up to `total`
/// exactly (work conserving) and none is below the floor.
pub fn split(total: u64, floor: u64, claims: &[Claim], out: &mut [u64]) {
    let n = claims.len();
    assert_eq!(out.len(), n, "one share per shard");
    if n == 0 {
        return;
    }
    let floor = floor.min(total / n as u64);
    let mut left = total - floor * n as u64;
    out.fill(floor);
    let mut want: Vec<u64> =
        claims.iter().map(|c| c.demand.map_or(u64::MAX, |d| d.saturating_sub(floor))).collect();
    // Guarantees first.
    let g: Vec<u64> = claims.iter().zip(&want).map(|(c, &w)| c.guaranteed.min(w)).collect();
    let sum_g: u128 = g.iter().map(|&x| x as u128).sum();
    if sum_g >= left as u128 {
        let l = left;
        for (o, &gi) in out.iter_mut().zip(&g) {
            let give = (l as u128 * gi as u128).checked_div(sum_g).unwrap_or(0) as u64;
            *o += give;
            left -= give;
        }
        want.fill(0);
    } else {
        for ((o, w), &gi) in out.iter_mut().zip(want.iter_mut()).zip(&g) {
            *o += gi;
            *w -= gi;
        }
        left -= sum_g as u64;
    }
    // The excess by weight, the shards wanting least per weight first.
    let weight = |i: usize| claims[i].weight.max(1) as u128;
    let mut order: Vec<usize> = (0..n).filter(|&i| want[i] > 0).collect();
    order.sort_unstable_by(|&i, &j| (want[i] as u128 * weight(j)).cmp(&(want[j] as u128 * weight(i))));
    let mut open: u128 = order.iter().map(|&i| weight(i)).sum();
    for &i in &order {
        let share = (left as u128 * weight(i) / open) as u64;
        let give = want[i].min(share);
        out[i] += give;
        left -= give;
        open -= weight(i);
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
    /// Its backlogged leaves, summed ([`sluice_engine::ClassLoad::active`]).
    pub active: ActiveLeaves,
}

/// The coordinator's state for one shared class.
#[derive(Clone, Debug)]
pub struct Rebalancer {
    class: SharedClass,
    last_bytes: Vec<u64>,
    /// Smoothed sending rate per shard, bit/s.
    sending: Vec<f64>,
    claims: Vec<Claim>,
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
            claims: vec![Claim::default(); shards],
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
            self.claims[i] = Claim {
                demand: (!r.hungry).then(|| (self.sending[i] * HEADROOM) as u64),
                guaranteed: r.active.rate_bps,
                weight: r.active.quantum,
            };
        }
        self.apply_split();
    }

    fn apply_split(&mut self) {
        let n = self.rates.len().max(1) as u64;
        let c = &self.class;
        split(c.rate, c.rate / n / FLOOR_FRACTION, &self.claims, &mut self.rates);
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

    fn wants(d: &[Option<u64>]) -> Vec<Claim> {
        d.iter().map(|&demand| Claim { demand, ..Default::default() }).collect()
    }

    #[test]
    fn max_min_by_demand() {
        let mut out = [0; 3];
        // 100 between one shard wanting 10 and two wanting everything: 10, 45, 45.
        split(100, 0, &wants(&[Some(10), None, None]), &mut out);
        assert_eq!(out, [10, 45, 45]);
        // Nobody wants it all: the 40 left is spread evenly (13 each, the remainder to the first).
        split(100, 0, &wants(&[Some(10), Some(20), Some(30)]), &mut out);
        assert_eq!(out, [24, 33, 43]);
        // The floor: an idle shard keeps 5.
        split(100, 5, &wants(&[Some(0), None, None]), &mut out);
        assert_eq!(out, [5, 47, 48]);
    }

    #[test]
    fn as_htb_by_rate_then_quantum() {
        let mut out = [0; 2];
        let c = |guaranteed, weight| Claim { demand: None, guaranteed, weight };
        // Two leaves on shard 0, one on shard 1, all equal: 2/3 and 1/3.
        split(90, 0, &[c(20, 2000), c(10, 1000)], &mut out);
        assert_eq!(out, [60, 30]);
        // Rates 10 and 40, quanta 125 000 and 200 000 (HTB caps 500 000), here in units of 100:
        // 10 + 50·1250/3250 = 29.2, 40 + 30.8.
        split(100, 0, &[c(10, 1250), c(40, 2000)], &mut out);
        assert_eq!(out, [30, 70]);
        // Guarantees above the class: scaled down together.
        split(100, 0, &[c(100, 1), c(300, 1)], &mut out);
        assert_eq!(out, [25, 75]);
        // A shard that wants little keeps only that, whatever its weight.
        split(100, 0, &[Claim { demand: Some(5), guaranteed: 10, weight: 9000 }, c(10, 1)], &mut out);
        assert_eq!(out, [5, 95]);
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
            claims in proptest::collection::vec(
                (proptest::option::of(0u64..=u64::MAX / 4), 0u64..1u64 << 40, 0u64..1u64 << 20),
                1..9,
            ),
        ) {
            let claims: Vec<Claim> =
                claims.iter().map(|&(demand, guaranteed, weight)| Claim { demand, guaranteed, weight }).collect();
            let n = claims.len() as u64;
            let floor = total / n / floor_div;
            let mut out = vec![0; claims.len()];
            split(total, floor, &claims, &mut out);
            // Never more than the class, and all of it (work conserving).
            prop_assert_eq!(out.iter().map(|&x| x as u128).sum::<u128>(), total as u128);
            let unsatisfied = |i: usize| claims[i].demand.is_none_or(|d| out[i] < d);
            let g: u128 = claims.iter().map(|c| c.guaranteed.min(c.demand.unwrap_or(u64::MAX)) as u128).sum();
            for (i, &o) in out.iter().enumerate() {
                prop_assert!(o >= floor);
                // When the guarantees fit, an unsatisfied shard has at least its guarantee, and
                // its excess per weight is, up to rounding, at least any other shard's.
                if unsatisfied(i) && g + (floor * n) as u128 <= total as u128 {
                    let ex = |j: usize| (out[j] - floor).saturating_sub(claims[j].guaranteed) as u128;
                    prop_assert!(o - floor >= claims[i].guaranteed);
                    let w = |j: usize| claims[j].weight.max(1) as u128;
                    for j in 0..claims.len() {
                        prop_assert!(
                            ex(j) * w(i) <= ex(i) * w(j) + 4 * n as u128 * (w(i) + w(j)),
                            "{:?} -> {:?}", claims, out
                        );
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
                        Report { bytes: bytes[i], hungry: sent[i].1, active: ActiveLeaves::default() }
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
