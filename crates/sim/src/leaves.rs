//! `[shaper.leaves]`: many identical subscriber classes, flat under one parent or in two levels.
//!
//! Every generated class is a class of the root HTB qdisc (class minors are 32 bits, so a
//! million subscribers are one qdisc with one contiguous class arena). Leaf `i` is class
//! `major:(first+i)`, under `parent` when the tree is flat. In two levels, as ISP shapers
//! (LibreQoS) build them, leaf `i` hangs from site `site_of(i)` instead: site `s` is the inner
//! class `major:(first+count+s)` under `parent`, numbered after the leaves so that `first + j`
//! always names leaf `j`. Leaves are handed to sites in contiguous blocks. A packet of leaf `i`
//! carries that leaf as its classification result; the naive reference HTB holds the same
//! classes in one qdisc too.

use sluice_core::htb::{Htb, HtbClassConfig};
use sluice_core::{ConfigError, Handle, Qdisc, Rate, Time, WireSpec};

/// Leaves are flat (under `parent` only) up to this many unless `sites` says otherwise.
pub(crate) const MAX_FLAT_LEAVES: u64 = 65_000;
/// The most leaves a generator makes (a few hundred bytes of simulator and scheduler state each).
pub(crate) const MAX_LEAVES: u64 = 4_000_000;

/// The qdisc of every generated leaf.
#[derive(Clone)]
pub(crate) enum LeafQueue {
    /// `pfifo N`: kept inline by the scheduler ([`Htb::set_leaf_pfifo`]).
    Pfifo(u32),
    /// Anything else, built per leaf.
    Other(crate::backend::SharedFactory),
}

impl LeafQueue {
    pub(crate) fn install(&self, h: &mut Htb, id: Handle) -> Result<(), ConfigError> {
        match self {
            LeafQueue::Pfifo(n) => h.set_leaf_pfifo(id, *n)?,
            LeafQueue::Other(f) => h.set_leaf_qdisc(id, f())?,
        };
        Ok(())
    }
}

/// Which generated leaves the results list as classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafReport {
    /// Every leaf.
    All,
    /// None.
    None,
    /// Only the leaves some flow of the case is sent to.
    Active,
}

/// The resolved generator of one case.
pub(crate) struct LeafGen {
    pub count: u32,
    /// 0: flat (leaves under `parent`); otherwise the number of sites.
    pub sites: u32,
    /// The first leaf; leaves (then sites) are numbered on from it.
    pub first: Handle,
    pub parent: Handle,
    pub rate: Rate,
    pub ceil: Rate,
    pub site_rate: Rate,
    pub site_ceil: Rate,
    /// The ceil of `parent` if it is a configured class: the capacity the leaves share.
    pub parent_ceil: Option<Rate>,
    pub report: LeafReport,
}

impl LeafGen {
    /// Sites for `count` leaves when the file says `auto`: flat up to [`MAX_FLAT_LEAVES`], else
    /// about sqrt(count) sites (LibreQoS-like trees of similar fan-out per level).
    pub(crate) fn auto_sites(count: u64) -> u64 {
        if count <= MAX_FLAT_LEAVES {
            0
        } else {
            ((count as f64).sqrt().ceil() as u64).max(2)
        }
    }

    /// Checks the geometry; `Err` says what does not fit.
    pub(crate) fn check(&self) -> Result<(), String> {
        let (n, s) = (self.count as u64, self.sites as u64);
        if s > n {
            return Err(format!("{s} sites for {n} leaves: every site needs a leaf"));
        }
        if self.first.minor() as u64 + n + s > u32::MAX as u64 + 1 {
            return Err(format!(
                "{n} leaves and {s} sites from {} run past minor ffffffff of the qdisc",
                self.first
            ));
        }
        Ok(())
    }

    pub(crate) fn nested(&self) -> bool {
        self.sites > 0
    }

    /// Site of leaf `i`.
    pub(crate) fn site_of(&self, i: u32) -> u32 {
        (i as u64 * self.sites as u64 / self.count as u64) as u32
    }

    /// Class of site `s`.
    pub(crate) fn site(&self, s: u32) -> Handle {
        Handle::new(self.first.major(), self.first.minor() + self.count + s)
    }

    /// The class id of leaf `i`.
    pub(crate) fn leaf(&self, i: u32) -> Handle {
        Handle::new(self.first.major(), self.first.minor() + i)
    }

    /// The parent class of leaf `i`.
    fn leaf_parent(&self, i: u32) -> Handle {
        if self.nested() {
            self.site(self.site_of(i))
        } else {
            self.parent
        }
    }

    /// The leaf index a class id names: `first + j` is leaf `j`.
    pub(crate) fn index_of(&self, h: Handle) -> Option<u32> {
        let j = h.minor().checked_sub(self.first.minor())?;
        (h.major() == self.first.major() && j < self.count).then_some(j)
    }

    fn class_config(rate: Rate, ceil: Rate, wire: WireSpec) -> HtbClassConfig {
        let mut c = HtbClassConfig::new(rate).ceil(ceil);
        c.wire = wire;
        c
    }

    /// Adds the generated classes to Sluice's root HTB `h` (whose explicit classes, including
    /// `parent`, exist already): the sites, then the leaves with their queues. O(count).
    pub(crate) fn install(&self, h: &mut Htb, q: &LeafQueue, wire: WireSpec) -> Result<(), ConfigError> {
        let t0 = Time::ZERO;
        h.reserve((self.count + self.sites) as usize);
        let site = Self::class_config(self.site_rate, self.site_ceil, wire);
        for s in 0..self.sites {
            h.add_class(self.site(s), self.parent, site.clone(), t0)?;
        }
        let leaf = Self::class_config(self.rate, self.ceil, wire);
        for i in 0..self.count {
            let id = self.leaf(i);
            h.add_class(id, self.leaf_parent(i), leaf.clone(), t0)?;
            q.install(h, id)?;
        }
        h.shrink_to_fit();
        Ok(())
    }

    /// The same classes for the reference HTB, as `(id, parent, rate, ceil)`, parents first.
    pub(crate) fn reference_classes(&self) -> Vec<(Handle, Handle, Rate, Rate)> {
        let sites = (0..self.sites).map(|s| (self.site(s), self.parent, self.site_rate, self.site_ceil));
        let leaves = (0..self.count).map(|i| (self.leaf(i), self.leaf_parent(i), self.rate, self.ceil));
        sites.chain(leaves).collect()
    }

    /// The fluid (max-min) rate of each leaf in `active` (distinct, sorted) when exactly these
    /// leaves are backlogged and nothing else competes under `parent`: the parent's ceil is shared
    /// by water-filling, equally among sites (identical rates, hence identical DRR quanta), each
    /// site's share equally among its active leaves, each capped by the ceils on its path and
    /// floored by its guaranteed rate. `None` if the parent's capacity is not known.
    pub(crate) fn ideal_rates(&self, active: &[u32]) -> Option<Vec<f64>> {
        let cap = self.parent_ceil?.bps() as f64;
        let (rate, ceil) = (self.rate.bps() as f64, self.ceil.bps() as f64);
        if !self.nested() {
            let share = water_fill(cap, rate, &vec![ceil; active.len()]);
            return Some(share);
        }
        // Active leaves per site, in site order (active is sorted, sites are contiguous blocks).
        let mut groups: Vec<(u32, usize)> = Vec::new();
        for &i in active {
            let s = self.site_of(i);
            match groups.last_mut() {
                Some((g, n)) if *g == s => *n += 1,
                _ => groups.push((s, 1)),
            }
        }
        let site_ceil = (self.site_ceil.bps() as f64).min(cap);
        let demand: Vec<f64> = groups.iter().map(|&(_, n)| site_ceil.min(n as f64 * ceil)).collect();
        let site_share = water_fill(cap, self.site_rate.bps() as f64, &demand);
        let mut out = Vec::with_capacity(active.len());
        for (&(_, n), share) in groups.iter().zip(site_share) {
            let each = water_fill(share, rate, &vec![ceil; n]);
            out.extend(each);
        }
        Some(out)
    }
}

/// Max-min shares of `cap` among claimants with ceilings `demand` and a common guaranteed
/// `floor`: each gets min(demand, max(floor, L)) with the level L that uses up `cap` (or its
/// demand when the demands sum below `cap`).
fn water_fill(cap: f64, floor: f64, demand: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demand.len()).collect();
    order.sort_by(|&a, &b| demand[a].total_cmp(&demand[b]));
    let mut out = vec![0.0; demand.len()];
    let mut left = cap;
    let mut n = demand.len();
    for &i in &order {
        let level = (left / n as f64).max(floor);
        let got = demand[i].min(level);
        out[i] = got;
        left = (left - got).max(0.0);
        n -= 1;
    }
    out
}

/// Reads the leaf queue spec once: pfifo is inline, anything else a factory.
pub(crate) fn leaf_queue(text: &str, f: crate::backend::SharedFactory) -> LeafQueue {
    match text.split_whitespace().collect::<Vec<_>>()[..] {
        ["pfifo"] => LeafQueue::Pfifo(sluice_core::fifo::DEFAULT_TXQUEUELEN),
        ["pfifo", n] => n.parse().map(LeafQueue::Pfifo).unwrap_or(LeafQueue::Other(f)),
        _ => LeafQueue::Other(f),
    }
}

/// A boxed root qdisc built once for validation and handed to the first run, then rebuilt.
pub(crate) fn first_then_rebuild<Q: Qdisc + 'static>(
    first: Q,
    rebuild: impl Fn() -> Q + Send + Sync + 'static,
) -> crate::backend::SharedFactory {
    let first = std::sync::Mutex::new(Some(first));
    std::sync::Arc::new(move || {
        let q = first.lock().unwrap_or_else(|p| p.into_inner()).take();
        Box::new(q.unwrap_or_else(&rebuild)) as Box<dyn Qdisc>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(count: u32, sites: u32) -> LeafGen {
        LeafGen {
            count,
            sites,
            first: Handle::new(1, 10),
            parent: Handle::new(1, 1),
            rate: Rate::from_bps(8_000),
            ceil: Rate::from_bps(100_000_000),
            site_rate: Rate::from_bps(30_000_000 / sites.max(1) as u64),
            site_ceil: Rate::from_bps(30_000_000),
            parent_ceil: Some(Rate::from_bps(30_000_000)),
            report: LeafReport::Active,
        }
    }

    #[test]
    fn leaves_map_to_distinct_ids_and_back() {
        for (count, sites) in [(100u32, 0u32), (1000, 7), (70_000, 265)] {
            let g = gen(count, sites);
            g.check().unwrap();
            let mut seen = std::collections::HashSet::new();
            for s in 0..sites {
                assert!(seen.insert(g.site(s)));
                assert_eq!(g.index_of(g.site(s)), None);
            }
            for i in 0..count {
                let id = g.leaf(i);
                assert!(seen.insert(id), "{count}/{sites}: {id} twice");
                assert_eq!(g.index_of(id), Some(i), "{id}");
                assert_eq!(id.major(), 1);
                let want = if sites > 0 { g.site(g.site_of(i)) } else { g.parent };
                assert_eq!(g.leaf_parent(i), want);
            }
        }
    }

    #[test]
    fn a_million_leaves_are_one_qdisc() {
        let g = gen(1_000_000, 1000);
        g.check().unwrap();
        let mut h = Htb::new(Handle::new(1, 0), sluice_core::htb::HtbConfig::default()).unwrap();
        h.add_class(g.parent, Handle::new(1, 0), HtbClassConfig::new(Rate::from_bps(30_000_000)), Time::ZERO)
            .unwrap();
        g.install(&mut h, &LeafQueue::Pfifo(10), WireSpec::default()).unwrap();
        assert_eq!(h.class_count(), 1_000_000 + 1000 + 1);
        let c = h.classes().find(|c| c.classid == g.leaf(999_999)).unwrap();
        assert_eq!(c.parent, g.site(999));
        assert!(c.is_leaf);
    }

    #[test]
    fn geometry_limits_are_reported() {
        assert!(gen(70_000, 0).check().is_ok(), "one qdisc holds them");
        assert!(gen(10, 11).check().is_err());
        let mut g = gen(1000, 10);
        g.first = Handle::new(1, u32::MAX - 1000);
        assert!(g.check().is_err(), "past minor ffffffff");
        assert_eq!(LeafGen::auto_sites(65_000), 0);
        assert_eq!(LeafGen::auto_sites(65_001), 255);
        assert_eq!(LeafGen::auto_sites(1200), 0);
        assert_eq!(LeafGen::auto_sites(1_000_000), 1000);
    }

    #[test]
    fn ideal_rates_share_the_parent_by_site_then_leaf() {
        // Flat: 10 leaves share 30 Mbit/s.
        let r = gen(1000, 0).ideal_rates(&(0..10).collect::<Vec<_>>()).unwrap();
        assert!(r.iter().all(|&x| (x - 3e6).abs() < 1.0), "{r:?}");
        // Two levels: sites share equally, then leaves within a site: leaves 0 and 1 in site 0,
        // leaf 999 alone in site 9 (10 sites of 100).
        let r = gen(1000, 10).ideal_rates(&[0, 1, 999]).unwrap();
        assert!(
            (r[0] - 7.5e6).abs() < 1.0 && (r[1] - 7.5e6).abs() < 1.0 && (r[2] - 15e6).abs() < 1.0,
            "{r:?}"
        );
        // Leaf ceilings cap the share and leave the rest to the others.
        let mut g = gen(1000, 0);
        g.ceil = Rate::from_bps(1_000_000);
        let r = g.ideal_rates(&[0, 1]).unwrap();
        assert_eq!(r, vec![1e6, 1e6]);
    }

    #[test]
    fn water_fill_respects_floor_and_caps() {
        assert_eq!(water_fill(10.0, 0.0, &[1.0, 100.0, 100.0]), vec![1.0, 4.5, 4.5]);
        assert_eq!(water_fill(10.0, 6.0, &[100.0, 100.0]), vec![6.0, 6.0]);
        assert_eq!(water_fill(10.0, 0.0, &[2.0, 3.0]), vec![2.0, 3.0]);
    }
}
