//! Property tests: random hierarchies driven by random operation sequences (enqueue, dequeue,
//! advance time, add and change classes), checked against invariants computed independently of
//! the scheduler's internal lists.

mod htb_common;
use htb_common::*;
use proptest::prelude::*;
use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig, HtbMode};
use sluice_core::{Handle, Packet, Qdisc, Rate, Time};
use std::collections::HashMap;

/// A random two- or three-level tree: root 1:1, children 1:10.., grandchildren 1:100...
#[derive(Clone, Debug)]
struct Tree {
    classes: Vec<(Handle, Handle, HtbClassConfig)>,
}

fn tree() -> impl Strategy<Value = Tree> {
    let kid = (1u64..=8, 1u64..=4, 0u8..3, 0usize..3, 100u32..4000);
    (4u64..=40, prop::collection::vec(kid, 1..5)).prop_map(|(root_m, kids)| {
        let root_rate = root_m * 250_000;
        let mut classes = vec![(h(1), ROOT, HtbClassConfig::new(Rate::from_bps(root_rate)).burst(3000))];
        for (i, (r, c, prio, grand, burst)) in kids.into_iter().enumerate() {
            let rate = root_rate * r / 16;
            let ceil = (rate * c).min(root_rate).max(rate);
            let id = h(0x10 + i as u32);
            let cfg = HtbClassConfig::new(Rate::from_bps(rate))
                .ceil(Rate::from_bps(ceil))
                .prio(prio)
                .burst(burst as u64)
                .cburst(burst as u64);
            classes.push((id, h(1), cfg));
            for g in 0..grand {
                let grate = rate / 2;
                let gid = h(0x100 + 0x10 * i as u32 + g as u32);
                classes.push((
                    gid,
                    id,
                    HtbClassConfig::new(Rate::from_bps(grate.max(8)))
                        .ceil(Rate::from_bps(ceil))
                        .prio((prio + g as u8) % 8),
                ));
            }
        }
        Tree { classes }
    })
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue { leaf: usize, len: u32 },
    Dequeue,
    Advance { us: u64 },
    Change { class: usize, pct: u64 },
    AddUnder { class: usize },
}

fn ops(config_changes: bool) -> impl Strategy<Value = Vec<Op>> {
    let base = prop_oneof![
        4 => (0usize..16, 40u32..1600).prop_map(|(leaf, len)| Op::Enqueue { leaf, len }),
        4 => Just(Op::Dequeue),
        2 => (0u64..3000).prop_map(|us| Op::Advance { us }),
    ];
    let changes = prop_oneof![
        (0usize..16, 50u64..200).prop_map(|(class, pct)| Op::Change { class, pct }),
        (0usize..16).prop_map(|class| Op::AddUnder { class }),
    ];
    if config_changes {
        prop::collection::vec(prop_oneof![10 => base, 1 => changes], 1..400).boxed()
    } else {
        prop::collection::vec(base, 1..400).boxed()
    }
}

struct Harness {
    q: Htb,
    now: Time,
    enqueued: u64,
    dequeued: u64,
    dropped: u64,
    next_minor: u32,
    /// Per class: (time, bytes) of every packet it sent (a packet counts for all its ancestors).
    log: HashMap<Handle, Vec<(u64, u64)>>,
    parents: HashMap<Handle, Handle>,
}

impl Harness {
    fn new(t: &Tree) -> Harness {
        let (q, _) = Htb::build(ROOT, HtbConfig::default(), &t.classes, Time::ZERO).unwrap();
        let mut hs = Harness {
            q,
            now: Time::ZERO,
            enqueued: 0,
            dequeued: 0,
            dropped: 0,
            next_minor: 0x1000,
            log: HashMap::new(),
            parents: HashMap::new(),
        };
        hs.refresh_parents();
        hs
    }
    fn refresh_parents(&mut self) {
        self.parents = self.q.classes().map(|c| (c.classid, c.parent)).collect();
    }
    fn leaves(&self) -> Vec<Handle> {
        self.q.classes().filter(|c| c.is_leaf).map(|c| c.classid).collect()
    }
    fn all(&self) -> Vec<Handle> {
        self.q.classes().map(|c| c.classid).collect()
    }
    fn drain(&mut self) {
        while self.q.take_dropped().is_some() {
            self.dropped += 1;
        }
    }
    fn conservation(&self) {
        let qlen = self.q.stats().qlen;
        assert_eq!(self.enqueued, self.dequeued + self.dropped + qlen, "conservation");
        let per_class: u64 = self.leaves().iter().map(|l| self.q.class_stats(*l).unwrap().qlen).sum();
        assert_eq!(per_class, qlen, "class queues add up to the qdisc's");
    }
    /// May a packet of this leaf be sent now, judging from bucket states only?
    fn may_send(&self, leaf: Handle) -> bool {
        let mut c = leaf;
        loop {
            match self.q.class_mode(c, self.now).unwrap() {
                HtbMode::CantSend => return false,
                HtbMode::CanSend => return true,
                HtbMode::MayBorrow => match self.parents.get(&c) {
                    Some(p) if *p != ROOT => c = *p,
                    _ => return false,
                },
            }
        }
    }
    fn step(&mut self, op: &Op, check_work_conserving: bool) {
        match *op {
            Op::Enqueue { leaf, len } => {
                let leaves = self.leaves();
                let mut p = Packet::new(len, 0);
                p.push_class(leaves[leaf % leaves.len()]);
                self.enqueued += 1;
                if self.q.enqueue(p, self.now).is_err() {
                    self.dropped += 1;
                }
            }
            Op::Dequeue => match self.q.dequeue(self.now) {
                Some(p) => {
                    self.dequeued += 1;
                    let mut c = p.class_path[0];
                    while c != ROOT {
                        self.log.entry(c).or_default().push((self.now.as_nanos(), p.len as u64));
                        c = self.parents[&c];
                    }
                }
                None => {
                    if self.q.stats().qlen > 0 {
                        let t = self.q.next_event(self.now).unwrap();
                        assert!(t > self.now, "idle at {:?} but next_event says now", self.now);
                    }
                    if check_work_conserving {
                        for l in self.leaves() {
                            if self.q.class_stats(l).unwrap().qlen > 0 {
                                assert!(!self.may_send(l), "link idle at {:?} while {l} may send", self.now);
                            }
                        }
                    }
                }
            },
            Op::Advance { us } => self.now += sluice_core::Span::from_micros(us),
            Op::Change { class, pct } => {
                let all = self.all();
                let id = all[class % all.len()];
                let info = self.q.classes().find(|c| c.classid == id).unwrap();
                let rate = (info.params.rate.bps() * pct / 100).max(8);
                let cfg = HtbClassConfig {
                    rate: Rate::from_bps(rate),
                    ceil: Some(Rate::from_bps(info.params.ceil.bps().max(rate))),
                    ..info.config
                };
                self.q.change_class(id, cfg, self.now).unwrap();
            }
            Op::AddUnder { class } => {
                let all = self.all();
                let parent = all[class % all.len()];
                let id = h(self.next_minor);
                self.next_minor += 1;
                self.q.add_class(id, parent, HtbClassConfig::new(Rate::from_bps(100_000)), self.now).unwrap();
                self.refresh_parents();
            }
        }
        self.drain();
        self.conservation();
    }
    /// Bytes a class X sent in any window [t_i, t_j] of its departures. A packet passes X either
    /// on tokens X borrowed from itself or above (then X's ceil bucket was non-negative), or lent
    /// by a descendant D that could send on its own rate (HTB does not ask X then). Hence at most
    /// ceil_X·dt + cburst_X + one packet, plus Σ_D (rate_D·dt + burst_D + one packet). For a leaf
    /// that is its ceil bound.
    fn check_bounds(&self) {
        let infos: Vec<_> = self.q.classes().collect();
        let descendants = |x: Handle| -> Vec<usize> {
            (0..infos.len())
                .filter(|&i| {
                    let mut c = infos[i].classid;
                    while let Some(p) = self.parents.get(&c) {
                        if *p == x {
                            return true;
                        }
                        c = *p;
                    }
                    false
                })
                .collect()
        };
        for c in &infos {
            let Some(log) = self.log.get(&c.classid) else {
                continue;
            };
            let max_pkt = log.iter().map(|e| e.1).max().unwrap_or(0) as u128;
            let desc = descendants(c.classid);
            let desc_rate: u128 = desc.iter().map(|&i| infos[i].params.rate.bps() as u128).sum();
            let desc_burst: u128 = desc.iter().map(|&i| infos[i].params.burst as u128 + max_pkt).sum();
            for i in 0..log.len() {
                let mut sum = 0u64;
                for j in i..log.len() {
                    sum += log[j].1;
                    let dt = (log[j].0 - log[i].0) as u128;
                    let allowed = (c.params.ceil.bps() as u128 + desc_rate) * dt / 8_000_000_000
                        + c.params.cburst as u128
                        + max_pkt
                        + desc_burst;
                    assert!(
                        sum as u128 <= allowed,
                        "{} sent {sum} B in {dt} ns, allowed {allowed}",
                        c.classid
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn conservation_work_conservation_and_rate_bounds(t in tree(), ops in ops(false)) {
        let mut hs = Harness::new(&t);
        for op in &ops {
            hs.step(op, true);
        }
        hs.check_bounds();
    }

    #[test]
    fn conservation_under_run_time_changes(t in tree(), ops in ops(true)) {
        let mut hs = Harness::new(&t);
        for op in &ops {
            hs.step(op, false);
        }
        // Drain everything: whatever is queued must come out.
        for _ in 0..100_000 {
            if hs.q.stats().qlen == 0 { break; }
            hs.step(&Op::Dequeue, false);
            if let Some(t) = hs.q.next_event(hs.now) { hs.now = hs.now.max(t); }
        }
        prop_assert_eq!(hs.q.stats().qlen, 0);
    }
}

/// A random set of leaves under one parent whose rates add up to at most half the parent's.
fn flat() -> impl Strategy<Value = (u64, Vec<(u64, u32)>)> {
    (8u64..=40, prop::collection::vec((1u64..=10, 1u32..=4), 2..5)).prop_map(|(root_m, kids)| {
        let root = root_m * 500_000;
        let total: u64 = kids.iter().map(|k| k.0).sum::<u64>() * 2;
        (root, kids.into_iter().map(|(w, q)| (root * w / total, q * 1500)).collect())
    })
}

/// Greedy constant-rate sources (each offering the parent's whole rate) into the given leaves
/// under a parent of rate `root`; returns the delivered rates over 4 s after a 1 s warm-up.
fn greedy(root: u64, kids: &[(u64, u32)]) -> Vec<f64> {
    let mut classes = vec![(h(1), ROOT, HtbClassConfig::new(Rate::from_bps(root)).burst(10_000))];
    let mut src = Vec::new();
    for (i, &(rate, quantum)) in kids.iter().enumerate() {
        let id = h(0x10 + i as u32);
        let cfg = HtbClassConfig::new(Rate::from_bps(rate)).ceil(Rate::from_bps(root)).quantum(quantum);
        classes.push((id, h(1), cfg));
        src.push(Source::new(id, Rate::from_bps(root), 500).phase(i as u64 * 77_777));
    }
    let mut q = htb(&classes);
    let out = run(&mut q, &mut src, Some(root * 2), Time::from_secs(1), Time::from_secs(5));
    (0..kids.len()).map(|i| out.rate(i, 4.0)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Every greedy leaf gets at least its guaranteed rate when the parent is not oversubscribed.
    #[test]
    fn backlogged_leaf_gets_its_guaranteed_rate((root, kids) in flat()) {
        let got = greedy(root, &kids);
        for (i, &(rate, _)) in kids.iter().enumerate() {
            prop_assert!(got[i] >= rate as f64 * 0.99, "leaf {i} got {} < rate {rate}", got[i]);
        }
        let total: f64 = got.iter().sum();
        prop_assert!((total - root as f64).abs() / (root as f64) < 0.01, "parent not fully used: {total}");
    }

    /// Borrowers of the same prio share the excess in proportion to their quanta. Their own
    /// rates are set negligible (8 kbit/s) so that almost everything they send is excess.
    #[test]
    fn excess_is_shared_in_proportion_to_quantum(
        root_m in 8u64..=40,
        quanta in prop::collection::vec(1u32..=4, 2..5),
    ) {
        let root = root_m * 500_000;
        let kids: Vec<(u64, u32)> = quanta.iter().map(|&q| (8_000, q * 1500)).collect();
        let got = greedy(root, &kids);
        let rates: f64 = kids.iter().map(|k| k.0 as f64).sum();
        let qsum: f64 = kids.iter().map(|k| k.1 as f64).sum();
        for (i, &(rate, quantum)) in kids.iter().enumerate() {
            let expected = rate as f64 + (root as f64 - rates) * quantum as f64 / qsum;
            prop_assert!((got[i] - expected).abs() / expected < 0.03, "leaf {i} got {}, expected {expected}; all {got:?}", got[i]);
        }
    }
}
