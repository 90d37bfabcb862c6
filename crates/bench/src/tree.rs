//! The HTB trees the benchmarks build: a root class, `sites` inner classes, then the subscriber
//! leaves spread over the sites in contiguous blocks.
//!
//! Class minors are 32 bits, so every tree is one HTB qdisc `1:` with one contiguous class arena
//! (root `1:1`, sites `1:(2+s)`, leaves `1:(2+sites+i)`). For comparison, [`TreeSpec::nested`]
//! builds the layout 16-bit minors force on Linux above 65 535 classes (LibreQoS): each site a leaf
//! of the root HTB carrying its own HTB qdisc `(2+s):` of subscribers. The reference builds the
//! one-qdisc tree.

use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::reference_htb::{RefClassParams, RefHtb};
use sluice_core::{ConfigError, Handle, Packet, Qdisc, Rate, Time};

/// Most leaves a tree can have: root, sites and leaves must fit in 32-bit minors.
pub const MAX_LEAVES: usize = u32::MAX as usize - 2 - 65_536;

/// Which scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// `sluice_core::htb::Htb` (and the other production qdiscs).
    Sluice,
    /// `sluice_core::reference_htb::RefHtb`.
    Reference,
}

impl Scheduler {
    /// Name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Sluice => "sluice",
            Scheduler::Reference => "reference",
        }
    }
}

/// Shape and rates of a benchmark tree.
#[derive(Clone, Copy, Debug)]
pub struct TreeSpec {
    /// Subscriber (leaf) classes.
    pub leaves: usize,
    /// Inner site classes between the root class and the leaves.
    pub sites: usize,
    /// Root rate and ceil.
    pub link: Rate,
    /// Leaf rate.
    pub leaf_rate: Rate,
    /// Leaf ceil.
    pub leaf_ceil: Rate,
    /// Packet size used by the traffic (for the clock).
    pub pkt_len: u32,
    /// One HTB qdisc per site (the 16-bit layout) instead of one qdisc.
    pub nested: bool,
}

/// Burst and cburst of every class, bytes.
pub const BURST: u64 = 1600;
/// Quantum of every class, bytes.
pub const QUANTUM: u32 = 1500;

impl TreeSpec {
    /// `leaves` subscribers under about sqrt(leaves) sites on a 10 Gbit/s link.
    /// `throttled` gives the DPDK worst case: leaf rate = ceil so low that the `active` backlogged
    /// leaves together may use only a tenth of the link, so nearly all of them wait for tokens.
    /// Otherwise leaves have a tiny guaranteed rate and borrow up to their site's rate.
    pub fn new(leaves: usize, active: usize, throttled: bool) -> TreeSpec {
        let leaves = leaves.max(1);
        let leaves = leaves.min(MAX_LEAVES);
        let sites = ((leaves as f64).sqrt().ceil() as usize).clamp(1, 60_000);
        let link = Rate::from_bps(10_000_000_000);
        let site_rate = link.bps() / sites as u64;
        let (leaf_rate, leaf_ceil) = if throttled {
            let r = (link.bps() / 10 / active.max(1) as u64).max(8_000);
            (r, r)
        } else {
            ((link.bps() / leaves as u64).max(8_000), site_rate.max(8_000))
        };
        TreeSpec {
            leaves,
            sites,
            link,
            leaf_rate: Rate::from_bps(leaf_rate),
            leaf_ceil: Rate::from_bps(leaf_ceil.max(leaf_rate)),
            pkt_len: 1000,
            nested: false,
        }
    }

    /// The same tree in the nested layout (`true`) or in one qdisc.
    pub fn with_nested(self, nested: bool) -> TreeSpec {
        TreeSpec { nested, ..self }
    }

    /// Site of leaf `i`.
    pub fn site_of(&self, i: usize) -> usize {
        i * self.sites / self.leaves
    }

    fn site_rate(&self) -> Rate {
        Rate::from_bps((self.link.bps() / self.sites as u64).max(8_000))
    }

    /// First leaf of site `s`.
    fn first_leaf(&self, s: usize) -> usize {
        (s * self.leaves).div_ceil(self.sites)
    }

    /// Builds the tree for `which`.
    pub fn build(&self, which: Scheduler) -> Result<Box<dyn Qdisc>, ConfigError> {
        match which {
            Scheduler::Sluice => self.build_sluice().map(|q| Box::new(q) as Box<dyn Qdisc>),
            Scheduler::Reference => self.build_reference().map(|q| Box::new(q) as Box<dyn Qdisc>),
        }
    }

    fn class(rate: Rate, ceil: Rate) -> HtbClassConfig {
        HtbClassConfig::new(rate).ceil(ceil).burst(BURST).cburst(BURST).quantum(QUANTUM)
    }

    /// The Sluice HTB tree (one qdisc, or nested per site).
    pub fn build_sluice(&self) -> Result<Htb, ConfigError> {
        let t0 = Time::ZERO;
        let mut root = Htb::new(Handle::new(1, 0), HtbConfig::default())?;
        root.reserve(1 + self.sites + if self.nested { 0 } else { self.leaves });
        root.add_class(Handle::new(1, 1), Handle::new(1, 0), Self::class(self.link, self.link), t0)?;
        let site = Self::class(self.site_rate(), self.link);
        let leaf = Self::class(self.leaf_rate, self.leaf_ceil);
        for s in 0..self.sites {
            root.add_class(self.site(s), Handle::new(1, 1), site.clone(), t0)?;
        }
        // Classes in classid order, as generated configurations create them.
        for s in 0..self.sites {
            let (lo, hi) = (self.first_leaf(s), self.first_leaf(s + 1));
            if self.nested {
                let major = 2 + s as u16;
                let mut q = Htb::new(Handle::new(major, 0), HtbConfig::default())?;
                q.reserve(1 + hi - lo);
                // The inner qdisc's root class cannot borrow, so it runs at the site's ceil and
                // leaves the site's rate to the outer class `1:(2+s)`.
                q.add_class(
                    Handle::new(major, 1),
                    Handle::new(major, 0),
                    Self::class(self.link, self.link),
                    t0,
                )?;
                for j in 0..hi - lo {
                    q.add_class(Handle::new(major, 2 + j as u32), Handle::new(major, 1), leaf.clone(), t0)?;
                }
                q.shrink_to_fit();
                root.set_leaf_qdisc(self.site(s), Box::new(q))?;
            } else {
                for i in lo..hi {
                    root.add_class(self.leaf(i), self.site(s), leaf.clone(), t0)?;
                }
            }
        }
        root.shrink_to_fit();
        Ok(root)
    }

    /// The reference tree, with the ids of the one-qdisc Sluice tree.
    pub fn build_reference(&self) -> Result<RefHtb, ConfigError> {
        let t0 = Time::ZERO;
        let p = |rate: Rate, ceil: Rate| RefClassParams {
            rate,
            ceil,
            burst: BURST,
            cburst: BURST,
            prio: 0,
            quantum: QUANTUM,
            limit: 1000,
        };
        let mut q = RefHtb::new(Handle::new(1, 0));
        let root = Handle::new(1, 1);
        q.add_class(root, Handle::new(1, 0), p(self.link, self.link), t0)?;
        for s in 0..self.sites {
            q.add_class(self.site(s), root, p(self.site_rate(), self.link), t0)?;
        }
        for i in 0..self.leaves {
            q.add_class(self.leaf(i), self.site(self.site_of(i)), p(self.leaf_rate, self.leaf_ceil), t0)?;
        }
        Ok(q)
    }

    fn site(&self, s: usize) -> Handle {
        Handle::new(1, 2 + s as u32)
    }

    fn leaf(&self, i: usize) -> Handle {
        Handle::new(1, (2 + self.sites + i) as u32)
    }

    /// A packet for leaf `i` (its payload is `i`, so the driver can refill the same leaf).
    pub fn packet(&self, i: usize) -> Packet {
        let mut pkt = Packet::new(self.pkt_len, i as u64);
        if self.nested {
            let s = self.site_of(i);
            pkt.push_class(self.site(s));
            let major = 2 + s as u16;
            pkt.push_class(Handle::new(major, 2 + (i - self.first_leaf(s)) as u32));
        } else {
            pkt.push_class(self.leaf(i));
        }
        pkt
    }

    /// The `n` backlogged leaves, spread evenly over the tree.
    pub fn active_leaves(&self, n: usize) -> Vec<usize> {
        let n = n.clamp(1, self.leaves);
        (0..n).map(|k| k * self.leaves / n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_partition_the_leaves() {
        for leaves in [1usize, 7, 1000, 100_000] {
            let t = TreeSpec::new(leaves, leaves / 10, false);
            let mut count = vec![0usize; t.sites];
            for i in 0..leaves {
                count[t.site_of(i)] += 1;
                assert!(i >= t.first_leaf(t.site_of(i)) && i < t.first_leaf(t.site_of(i) + 1));
            }
            assert!(count.iter().all(|&c| c > 0), "{leaves}: {count:?}");
        }
    }

    #[test]
    fn every_tree_accepts_its_packets() {
        for (leaves, nested) in [(50usize, false), (50, true), (70_000, false), (70_000, true)] {
            let t = TreeSpec::new(leaves, 10, false).with_nested(nested);
            let whiches: &[Scheduler] =
                if nested { &[Scheduler::Sluice] } else { &[Scheduler::Sluice, Scheduler::Reference] };
            for &which in whiches {
                let mut q = t.build(which).unwrap();
                for i in t.active_leaves(10) {
                    q.enqueue(t.packet(i), Time::ZERO).unwrap();
                }
                let mut got = 0;
                while let Some(p) = q.dequeue(Time::ZERO) {
                    assert!(p.payload < leaves as u64);
                    got += 1;
                }
                assert_eq!(got, 10, "{which:?} {leaves} nested={nested}");
            }
        }
    }
}
