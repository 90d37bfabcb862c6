//! `[shaper.leaves]`: many identical subscriber classes, flat under one parent or in two levels.
//!
//! A tc handle has a 16-bit minor, so one HTB qdisc holds at most 65 535 classes. Larger trees are
//! built the way Linux operators (LibreQoS) build them: each *site* is a class `1:(first+s)` of
//! the root HTB under `parent`, and carries its own HTB qdisc `(M+s):` (M = root major + 1) whose
//! root class `(M+s):1` caps at the site's ceil and whose leaves `(M+s):2`, `(M+s):3`, ... are the
//! site's subscribers. Leaves are numbered 0..count and handed to sites in contiguous blocks.
//!
//! A packet of leaf `i` carries two classification results (`push_class`): the site class for
//! the root qdisc and the leaf for the site's qdisc. The naive reference HTB is one qdisc that
//! accepts any 32-bit classid; it holds the same classes and finds the leaf in `priority`.

use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::{ConfigError, Handle, Qdisc, Rate, Time, WireSpec};

/// Leaves that fit in one qdisc are flat unless `sites` says otherwise.
pub(crate) const MAX_FLAT_LEAVES: u64 = 65_000;
/// The most leaves a generator makes (a few hundred bytes of simulator and scheduler state each).
pub(crate) const MAX_LEAVES: u64 = 4_000_000;
/// Subscribers per site: minors 2..=0xfffe of the site's qdisc.
const MAX_PER_SITE: u64 = 0xfffd;

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
    /// 0: flat (leaves `first`, `first+1`, ... under `parent`); otherwise the number of sites.
    pub sites: u32,
    /// Flat: the first leaf. Two levels: the first site class.
    pub first: Handle,
    pub parent: Handle,
    /// Major of site 0's qdisc.
    pub site_major0: u16,
    pub rate: Rate,
    pub ceil: Rate,
    pub site_rate: Rate,
    pub site_ceil: Rate,
    /// The ceil of `parent` if it is a configured class: the capacity the leaves share.
    pub parent_ceil: Option<Rate>,
    pub report: LeafReport,
    /// Packets name their leaf in `priority` too (for the naive reference HTB).
    pub reference: bool,
}

impl LeafGen {
    /// Sites for `count` leaves when the file says `auto`: one qdisc while the leaves fit in its
    /// minors, else about sqrt(count) sites (LibreQoS-like trees of similar fan-out per level).
    pub(crate) fn auto_sites(count: u64, first_minor: u32) -> u64 {
        if count <= MAX_FLAT_LEAVES && first_minor as u64 + count <= 0x10000 {
            0
        } else {
            ((count as f64).sqrt().ceil() as u64).max(2)
        }
    }

    /// Checks the geometry; `Err` says what does not fit.
    pub(crate) fn check(&self) -> Result<(), String> {
        let n = self.count as u64;
        if self.sites == 0 {
            if self.first.minor() as u64 + n > 0x10000 {
                return Err(format!(
                    "{n} leaves from {} run past minor 0xffff of one qdisc; use sites = \"auto\" or more sites",
                    self.first
                ));
            }
            return Ok(());
        }
        let s = self.sites as u64;
        if s > n {
            return Err(format!("{s} sites for {n} leaves: every site needs a leaf"));
        }
        if self.first.minor() as u64 + s > 0x10000 {
            return Err(format!("{s} site classes from {} run past minor 0xffff", self.first));
        }
        if self.site_major0 as u64 + s > 0xfff0 {
            return Err(format!(
                "{s} sites need qdisc majors up to {:x}, past fff0",
                self.site_major0 as u64 + s
            ));
        }
        if n.div_ceil(s) > MAX_PER_SITE {
            return Err(format!(
                "{} leaves per site do not fit in one site qdisc (at most {MAX_PER_SITE})",
                n.div_ceil(s)
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

    /// First leaf of site `s` (`s` = sites gives count).
    fn first_leaf(&self, s: u32) -> u32 {
        (s as u64 * self.count as u64).div_ceil(self.sites as u64) as u32
    }

    /// Class of site `s` in the root qdisc.
    pub(crate) fn site(&self, s: u32) -> Handle {
        Handle::new(self.first.major(), self.first.minor() + s)
    }

    fn site_major(&self, s: u32) -> u16 {
        self.site_major0 + s as u16
    }

    /// The class id of leaf `i`.
    pub(crate) fn leaf(&self, i: u32) -> Handle {
        if !self.nested() {
            return Handle::new(self.first.major(), self.first.minor() + i);
        }
        let s = self.site_of(i);
        Handle::new(self.site_major(s), 2 + (i - self.first_leaf(s)))
    }

    /// Classification results of a packet of leaf `i` (outermost first) and its `priority`.
    pub(crate) fn path(&self, i: u32) -> (Vec<Handle>, u32) {
        if !self.nested() {
            return (vec![self.leaf(i)], 0);
        }
        let leaf = self.leaf(i);
        (vec![self.site(self.site_of(i)), leaf], if self.reference { leaf.to_tc().unwrap_or(0) } else { 0 })
    }

    /// The leaf index a flow's `class` names: `first + j` is leaf `j` (in both layouts, so that
    /// `class` + `spread` keep their flat meaning), and a two-level leaf may be named by its id.
    pub(crate) fn index_of(&self, h: Handle) -> Option<u32> {
        if h.major() == self.first.major() && h.minor() >= self.first.minor() {
            let j = h.minor() - self.first.minor();
            return (j < self.count).then_some(j);
        }
        if self.nested() && h.major() >= self.site_major0 && h.minor() >= 2 {
            let s = (h.major() - self.site_major0) as u32;
            if s < self.sites {
                let i = self.first_leaf(s) + (h.minor() - 2);
                return (i < self.first_leaf(s + 1)).then_some(i);
            }
        }
        None
    }

    fn class_config(rate: Rate, ceil: Rate, wire: WireSpec) -> HtbClassConfig {
        let mut c = HtbClassConfig::new(rate).ceil(ceil);
        c.wire = wire;
        c
    }

    /// The classes to add to the root qdisc: the flat leaves, or the site classes.
    pub(crate) fn root_classes(
        &self,
        wire: WireSpec,
    ) -> impl Iterator<Item = (Handle, Handle, HtbClassConfig)> + '_ {
        let n = if self.nested() { self.sites } else { self.count };
        let cfg = if self.nested() {
            Self::class_config(self.site_rate, self.site_ceil, wire)
        } else {
            Self::class_config(self.rate, self.ceil, wire)
        };
        (0..n).map(move |k| {
            let id = if self.nested() { self.site(k) } else { self.leaf(k) };
            (id, self.parent, cfg.clone())
        })
    }

    /// Adds the generated classes to Sluice's root HTB `h` (whose explicit classes, including
    /// `parent`, exist already). O(count): every class is added once, in id order.
    pub(crate) fn install(&self, h: &mut Htb, q: &LeafQueue, wire: WireSpec) -> Result<(), ConfigError> {
        let t0 = Time::ZERO;
        for (id, parent, cfg) in self.root_classes(wire) {
            h.add_class(id, parent, cfg, t0)?;
            if !self.nested() {
                q.install(h, id)?;
            }
        }
        for s in 0..self.sites {
            h.set_leaf_qdisc(self.site(s), Box::new(self.site_qdisc(s, q, wire)?))?;
        }
        Ok(())
    }

    /// The HTB qdisc of site `s`: a root class over its subscribers. The site's rate and ceil
    /// are enforced by the site's class in the root qdisc, which borrows from `parent`; a root
    /// class cannot borrow, so this one runs at rate = ceil = the site's ceil and only shares
    /// whatever the outer class lets through among the subscribers.
    fn site_qdisc(&self, s: u32, q: &LeafQueue, wire: WireSpec) -> Result<Htb, ConfigError> {
        let t0 = Time::ZERO;
        let major = self.site_major(s);
        let mut h = Htb::new(Handle::new(major, 0), HtbConfig::default())?;
        let root = Handle::new(major, 1);
        h.add_class(
            root,
            Handle::new(major, 0),
            Self::class_config(self.site_ceil, self.site_ceil, wire),
            t0,
        )?;
        let leaf = Self::class_config(self.rate, self.ceil, wire);
        for i in self.first_leaf(s)..self.first_leaf(s + 1) {
            let id = self.leaf(i);
            h.add_class(id, root, leaf.clone(), t0)?;
            q.install(&mut h, id)?;
        }
        Ok(h)
    }

    /// The same classes for the reference HTB, as `(id, parent, rate, ceil)`: flat leaves, or
    /// sites and their leaves, parents before children. The site qdisc's root class only caps at
    /// the site's ceil, which the site class does already, so the reference leaves hang directly
    /// from the site class (an inner class of rate > its parent's would let the site bypass it).
    pub(crate) fn reference_classes(&self) -> Vec<(Handle, Handle, Rate, Rate)> {
        let mut out = Vec::new();
        if !self.nested() {
            for i in 0..self.count {
                out.push((self.leaf(i), self.parent, self.rate, self.ceil));
            }
            return out;
        }
        for s in 0..self.sites {
            out.push((self.site(s), self.parent, self.site_rate, self.site_ceil));
            for i in self.first_leaf(s)..self.first_leaf(s + 1) {
                out.push((self.leaf(i), self.site(s), self.rate, self.ceil));
            }
        }
        out
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
            site_major0: 2,
            rate: Rate::from_bps(8_000),
            ceil: Rate::from_bps(100_000_000),
            site_rate: Rate::from_bps(30_000_000 / sites.max(1) as u64),
            site_ceil: Rate::from_bps(30_000_000),
            parent_ceil: Some(Rate::from_bps(30_000_000)),
            report: LeafReport::Active,
            reference: false,
        }
    }

    #[test]
    fn leaves_map_to_distinct_ids_and_back() {
        for (count, sites) in [(100u32, 0u32), (1000, 7), (70_000, 265)] {
            let g = gen(count, sites);
            g.check().unwrap();
            let mut seen = std::collections::HashSet::new();
            for i in 0..count {
                let id = g.leaf(i);
                assert!(seen.insert(id), "{count}/{sites}: {id} twice");
                assert_eq!(g.index_of(id), Some(i), "{id}");
                assert_eq!(g.index_of(Handle::new(1, 10 + i.min(100))), Some(i.min(100)));
                let (path, _) = g.path(i);
                assert_eq!(*path.last().unwrap(), id);
                if sites > 0 {
                    assert_eq!(path[0], g.site(g.site_of(i)));
                    assert_eq!(id.major(), 2 + g.site_of(i) as u16);
                }
            }
        }
    }

    #[test]
    fn geometry_limits_are_reported() {
        assert!(gen(70_000, 0).check().is_err());
        assert!(gen(10, 11).check().is_err());
        assert!(gen(1_000_000, 10).check().is_err(), "100 000 leaves in one site");
        assert!(gen(1_000_000, 1000).check().is_ok());
        assert_eq!(LeafGen::auto_sites(65_000, 10), 0);
        assert_eq!(LeafGen::auto_sites(65_001, 10), 255);
        assert_eq!(LeafGen::auto_sites(60_000, 10_000), 245, "past minor 0xffff");
        assert_eq!(LeafGen::auto_sites(1200, 10), 0);
        assert_eq!(LeafGen::auto_sites(1_000_000, 10), 1000);
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
