//! Differential test: the fast HTB (`sluice_core::htb`) against the naive reference
//! (`sluice_core::reference_htb`) on random hierarchies and random traffic, over long runs on a
//! virtual clock that jumps to the next arrival, link slot or `next_event`.
//!
//! Each seed builds a random tree (1 to 3 levels, up to 14 leaves, random rate/ceil/prio/quantum,
//! children's rates never oversubscribing their parent), random sources (greedy leaves kept
//! backlogged, and constant-bit-rate leaves), and an optional bottleneck link. Both schedulers get
//! the same configuration and the same arrivals, each on its own clock, and per-class bytes sent
//! are compared at the end.
//!
//! Tolerance. The two schedulers make the same decisions up to the *order* of the round robin
//! among classes of equal key (same lending level, same prio): the reference serves them in
//! classid order, and so does the fast HTB (the kernel's rbtrees), but their cursors can differ
//! after classes leave and rejoin a list.
//! DRR guarantees each class its quantum per round whatever the order, so at any instant the
//! service of a class under two orders differs by at most one turn: `quantum + max packet`
//! (a turn ends on the packet that takes the deficit below zero). Token buckets then pull both
//! back to the same long-run rates, so the difference does not grow with run length. The check
//! is therefore, per class: `|fast - ref| <= quantum_max + 2 * pkt_max` bytes, where quantum_max
//! is the largest quantum among the leaves of its subtree (one turn, plus one packet for the
//! charge that may have been made just before the end of the run). Seeds whose leaves all have
//! `quantum == packet size` (one packet per turn) must agree within one packet per class,
//! which is the figure the issue asks for.
//!
//! Site trees ([`sites_scenario`]) add the shape of `tests/htb_three_level_sites.rs`: 3 to 6
//! sites under one root class, each with a few small-rate leaves of which none, one or two are
//! backlogged, so most traffic is lent by the root to sites in its feed.
//!
//! Status: every default seed agrees within the tolerance, most to the byte. Over seeds 0..200,
//! one borrowing seed (149) still exceeds it, by 19.6 kB (0.6%) after 10 s and the same after
//! 40 s: a bounded cursor-edge case. Over site-tree seeds 0..100 one seed (43) does, by 12.6 kB
//! (0.16%) after 10 s and 82 kB (0.25%) after 40 s; it needs the link and CBR sources (none
//! diverge with `SLUICE_DIFF_NOLINK`). Its first differing decision (lockstep trace) is at
//! 21.556 ms: after a row-6 round 1:2, 1:7, 1:13 (prio 0) the reference rewinds to 1:2 (leaf
//! 1:3), the fast HTB serves 1:7 (leaf 1:8); which one the kernel does is not settled yet. Until the reference's two cursor
//! fixes (a never-used list starts past the end; a turn's end points the cursor at the next
//! member at that moment, as `htb_next_rb_node` does) 8 borrowing seeds (89, 112, 128, 141,
//! 149, 158, 163, 184) differed by up to ~20 packets, and site-tree seeds too (20 in 100 with
//! up to 8 sites, up to 1.7%, before the first fix; 4 in 100 of today's shape after it); the
//! fast HTB already had both rules. The hand-computed two-leaf cases at the end also check both schedulers
//! against the analytic quantum shares. Debug knobs: `SLUICE_DIFF_SEEDS`, `SLUICE_DIFF_FIRST`,
//! `SLUICE_DIFF_MAX_CLASSES`, `SLUICE_DIFF_NOLINK`, `SLUICE_DIFF_DEBUG` (per-class rates),
//! `SLUICE_DIFF_REPORT` (list every difference instead of failing on the first), `SLUICE_DIFF_SECS`
//! (virtual seconds per run), `SLUICE_DIFF_TRACE=seed` and `SLUICE_DIFF_WATCH=minors` (lockstep
//! trace of a site tree, link and CBR included).

use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::reference_htb::{RefClassParams, RefHtb};
use sluice_core::{Handle, Packet, Qdisc, Rate, Span, Time};

/// splitmix64: small, seedable, good enough to draw configurations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

#[derive(Clone, Debug)]
struct ClassDef {
    id: Handle,
    parent: Handle,
    rate: u64,
    ceil: u64,
    prio: u8,
    quantum: u32,
    burst: u64,
    cburst: u64,
    leaf: bool,
}

#[derive(Clone, Debug)]
enum Source {
    /// Always backlogged: refilled whenever one of its packets leaves.
    Greedy,
    /// Constant bit rate from `start`.
    Cbr { bps: u64, start: u64 },
}

#[derive(Clone, Debug)]
struct Scenario {
    classes: Vec<ClassDef>,
    /// Per leaf (index into `classes`): packet size and source.
    sources: Vec<(usize, u32, Source)>,
    /// Bottleneck link, or None for "send as soon as the qdisc allows".
    link_bps: Option<u64>,
    secs: u64,
    one_packet_turns: bool,
}

const ROOT: Handle = Handle::new(1, 0);

fn class_def(rng: &mut Rng, index: usize, parent: Handle, rate: u64, ceil: u64, leaf: bool) -> ClassDef {
    ClassDef {
        id: Handle::new(1, 1 + index as u32),
        parent,
        rate,
        ceil,
        prio: rng.range(0, 2) as u8,
        quantum: [1000u32, 1500, 3000, 6000][rng.range(0, 3) as usize],
        burst: rng.range(1600, 20_000),
        cburst: rng.range(1600, 20_000),
        leaf,
    }
}

fn scenario(seed: u64, borrow: bool) -> Scenario {
    let mut rng = Rng(seed);
    let one_packet_turns = seed % 3 < 1; // a third of the seeds
    let mut classes: Vec<ClassDef> = Vec::new();
    let max_depth = rng.range(1, 3);
    // Root classes, then children level by level: (parent index, depth) still to fill.
    let mut todo: Vec<(usize, u64)> = Vec::new();
    for _ in 0..rng.range(1, 2) {
        let rate = rng.range(2, 20) * 1_000_000;
        let ceil = if borrow { rate * rng.range(1, 2) } else { rate };
        let leaf = max_depth == 1;
        classes.push(class_def(&mut rng, classes.len(), ROOT, rate, ceil, leaf));
        if !leaf {
            todo.push((classes.len() - 1, 1));
        }
    }
    while let Some((p, depth)) = todo.pop() {
        let (parent, prate, pceil) = (classes[p].id, classes[p].rate, classes[p].ceil);
        let n = rng.range(1, if max_classes() < 10 { 2 } else { 4 });
        // Children share at most the parent's rate, so no ancestor runs into the 60 s debt floor.
        let mut left = prate * rng.range(50, 100) / 100;
        for k in 0..n {
            let rate = (left / (n - k) * rng.range(30, 100) / 100).max(64_000);
            left = left.saturating_sub(rate);
            let ceil = if borrow { rng.range(rate, pceil.max(rate)) } else { rate };
            let inner = depth + 1 < max_depth && classes.len() < max_classes() && rng.chance(60);
            classes.push(class_def(&mut rng, classes.len(), parent, rate, ceil, !inner));
            if inner {
                todo.push((classes.len() - 1, depth + 1));
            }
        }
    }
    let mut sources = Vec::new();
    for (i, c) in classes.iter_mut().enumerate() {
        if !c.leaf {
            continue;
        }
        let size = [64u32, 200, 576, 1000, 1500][rng.range(0, 4) as usize];
        if one_packet_turns {
            c.quantum = size;
        }
        let src = if rng.chance(60) {
            Source::Greedy
        } else {
            Source::Cbr { bps: c.ceil * rng.range(20, 90) / 100, start: rng.range(0, 2_000_000_000) }
        };
        sources.push((i, size, src));
    }
    let total: u64 = classes.iter().filter(|c| c.parent == ROOT).map(|c| c.ceil).sum();
    let link_bps = if rng.chance(50) { Some(total * rng.range(50, 150) / 100) } else { None };
    let link_bps = if std::env::var("SLUICE_DIFF_NOLINK").is_ok() { None } else { link_bps };
    if std::env::var("SLUICE_DIFF_DEBUG").is_ok() {
        eprintln!("link {link_bps:?}");
    }
    Scenario { classes, sources, link_bps, secs: secs(), one_packet_turns }
}

/// A tree shaped like an ISP's (and the simulator's `htb-scaling` with sites): one root class,
/// 3 to 8 "site" classes whose rates share part of the root's and whose ceils let them borrow
/// from it, each with 2 to 5 small-rate leaves that may borrow up to the site's ceil or beyond.
/// Per site none, one or two greedy leaves and maybe a CBR one, so most of the traffic is lent
/// by the root to sites in its feed, and sites move between their own row and the root's feed.
fn sites_scenario(seed: u64) -> Scenario {
    let mut rng = Rng(seed ^ 0x5173_5173);
    let one_packet_turns = seed % 3 < 1;
    let root_rate = rng.range(5, 40) * 1_000_000;
    let mut classes = vec![class_def(&mut rng, 0, ROOT, root_rate, root_rate, false)];
    let sites = rng.range(3, 6);
    let mut sources = Vec::new();
    for _ in 0..sites {
        let rate = (root_rate * rng.range(40, 100) / 100 / sites).max(64_000);
        let ceil = if rng.chance(75) { root_rate } else { rng.range(rate, root_rate) };
        classes.push(class_def(&mut rng, classes.len(), classes[0].id, rate, ceil, false));
        let site = classes.len() - 1;
        let greedy = rng.range(0, 2);
        for k in 0..rng.range(2, 4) {
            let rate = rng.range(8, 200) * 1000;
            let ceil = if rng.chance(50) { ceil } else { 100_000_000 };
            let mut c = class_def(&mut rng, classes.len(), classes[site].id, rate, ceil, true);
            let size = [64u32, 200, 576, 1000, 1500][rng.range(0, 4) as usize];
            if one_packet_turns {
                c.quantum = size;
            }
            let src = if k < greedy {
                Some(Source::Greedy)
            } else if rng.chance(20) {
                Some(Source::Cbr {
                    bps: rate.max(ceil / 8) * rng.range(20, 90) / 100,
                    start: rng.range(0, 2_000_000_000),
                })
            } else {
                None
            };
            classes.push(c);
            if let Some(src) = src {
                sources.push((classes.len() - 1, size, src));
            }
        }
    }
    if sources.is_empty() {
        let leaf = classes.iter().position(|c| c.leaf).unwrap();
        sources.push((leaf, 1000, Source::Greedy));
    }
    let link_bps = if rng.chance(30) { Some(root_rate * rng.range(80, 150) / 100) } else { None };
    let link_bps = if std::env::var("SLUICE_DIFF_NOLINK").is_ok() { None } else { link_bps };
    Scenario { classes, sources, link_bps, secs: secs(), one_packet_turns }
}

/// Virtual seconds per run (`SLUICE_DIFF_SECS`, default 10).
fn secs() -> u64 {
    std::env::var("SLUICE_DIFF_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(10)
}

fn build_fast(s: &Scenario) -> Htb {
    let mut q = Htb::new(ROOT, HtbConfig::default()).unwrap();
    for c in &s.classes {
        let cfg = HtbClassConfig::new(Rate::from_bps(c.rate))
            .ceil(Rate::from_bps(c.ceil))
            .burst(c.burst)
            .cburst(c.cburst)
            .prio(c.prio)
            .quantum(c.quantum);
        q.add_class(c.id, c.parent, cfg, Time::ZERO).unwrap();
    }
    q
}

fn build_ref(s: &Scenario) -> RefHtb {
    let mut q = RefHtb::new(ROOT);
    for c in &s.classes {
        let p = RefClassParams {
            rate: Rate::from_bps(c.rate),
            ceil: Rate::from_bps(c.ceil),
            burst: c.burst,
            cburst: c.cburst,
            prio: c.prio,
            quantum: c.quantum,
            limit: 1000,
        };
        q.add_class(c.id, c.parent, p, Time::ZERO).unwrap();
    }
    q
}

/// Runs a scenario; returns bytes sent per class (indexed like `s.classes`).
/// Every CBR source's arrivals before `end`, as (time, source), in time order.
fn cbr_arrivals(s: &Scenario, end: Time) -> Vec<(Time, usize)> {
    let mut arrivals = Vec::new();
    for (k, (_, size, src)) in s.sources.iter().enumerate() {
        if let Source::Cbr { bps, start } = src {
            let gap = Rate::from_bps(*bps).time_to_send(*size as u64);
            let mut t = Time::from_nanos(*start);
            while t < end {
                arrivals.push((t, k));
                t += gap;
            }
        }
    }
    arrivals.sort();
    arrivals
}

fn run(s: &Scenario, q: &mut dyn Qdisc) -> Vec<u64> {
    let end = Time::from_secs(s.secs);
    let pkt = |src: usize, seq: u64| {
        let (ci, size, _) = &s.sources[src];
        let mut p = Packet::new(*size, (src as u64) << 32 | seq);
        p.push_class(s.classes[*ci].id);
        p
    };
    let arrivals = cbr_arrivals(s, end);
    let mut now = Time::ZERO;
    for (k, (_, _, src)) in s.sources.iter().enumerate() {
        if matches!(src, Source::Greedy) {
            for j in 0..4 {
                q.enqueue(pkt(k, j), now).unwrap();
            }
        }
    }
    let mut bytes = vec![0u64; s.classes.len()];
    let (mut ai, mut link_free, mut seq) = (0usize, Time::ZERO, 1u64 << 20);
    let mut steps = 0u64;
    while now < end {
        steps += 1;
        assert!(steps < 50_000_000, "runaway loop");
        while ai < arrivals.len() && arrivals[ai].0 <= now {
            let _ = q.enqueue(pkt(arrivals[ai].1, ai as u64), now);
            ai += 1;
        }
        if now >= link_free {
            if let Some(p) = q.dequeue(now) {
                let src = (p.payload >> 32) as usize;
                let ci = s.sources[src].0;
                // Count the leaf and each ancestor.
                let mut c = Some(ci);
                while let Some(i) = c {
                    bytes[i] += p.len as u64;
                    c = s.classes.iter().position(|x| x.id == s.classes[i].parent);
                }
                if matches!(s.sources[src].2, Source::Greedy) {
                    seq += 1;
                    q.enqueue(pkt(src, seq), now).unwrap();
                }
                if let Some(l) = s.link_bps {
                    link_free = now + Rate::from_bps(l).time_to_send(p.len as u64);
                }
                continue;
            }
        }
        let mut next = end;
        if let Some(&(t, _)) = arrivals.get(ai) {
            next = next.min(t);
        }
        if now < link_free {
            next = next.min(link_free);
        } else if let Some(t) = q.next_event(now) {
            next = next.min(t.max(now + Span::from_nanos(1)));
        }
        now = next;
    }
    bytes
}

fn check(seed: u64, s: Scenario) -> (u64, f64) {
    let fast = run(&s, &mut build_fast(&s));
    let reference = run(&s, &mut build_ref(&s));
    let pkt_max = s.sources.iter().map(|x| x.1 as u64).max().unwrap();
    let mut worst_pkts = 0f64;
    if std::env::var("SLUICE_DIFF_DEBUG").is_ok() {
        for (i, c) in s.classes.iter().enumerate() {
            eprintln!(
                "{} {:?} fast {:.1} kbit/s ref {:.1} kbit/s",
                c.id,
                (
                    c.parent,
                    c.rate / 1000,
                    c.ceil / 1000,
                    c.prio,
                    c.quantum,
                    s.sources.iter().find(|x| x.0 == i).map(|x| (x.1, x.2.clone()))
                ),
                fast[i] as f64 * 8.0 / s.secs as f64 / 1e3,
                reference[i] as f64 * 8.0 / s.secs as f64 / 1e3
            );
        }
    }
    for (i, c) in s.classes.iter().enumerate() {
        let diff = fast[i].abs_diff(reference[i]);
        // Largest packet and quantum among the leaves below (or at) this class.
        let under: Vec<usize> = s
            .sources
            .iter()
            .map(|x| x.0)
            .filter(|&l| {
                let mut c = Some(l);
                while let Some(k) = c {
                    if k == i {
                        return true;
                    }
                    c = s.classes.iter().position(|x| x.id == s.classes[k].parent);
                }
                false
            })
            .collect();
        let q_max = under.iter().map(|&l| s.classes[l].quantum as u64).max().unwrap_or(0);
        let p_max =
            under.iter().map(|&l| s.sources.iter().find(|x| x.0 == l).unwrap().1 as u64).max().unwrap_or(0);
        let tol = if s.one_packet_turns && c.leaf { p_max } else { q_max + 2 * p_max };
        worst_pkts = worst_pkts.max(diff as f64 / pkt_max as f64);
        if std::env::var("SLUICE_DIFF_REPORT").is_ok() {
            if diff > tol {
                eprintln!(
                    "seed {seed} class {} diff {diff} tol {tol} ({:.2}% of {})",
                    c.id,
                    diff as f64 * 100.0 / reference[i].max(1) as f64,
                    reference[i]
                );
            }
            continue;
        }
        assert!(
            diff <= tol,
            "seed {seed}: class {} ({}) sent {} bytes in the fast HTB, {} in the reference \
             (diff {diff} > tolerance {tol})\n{s:#?}",
            c.id,
            if c.leaf { "leaf" } else { "inner" },
            fast[i],
            reference[i],
        );
    }
    let total: u64 =
        s.classes.iter().enumerate().filter(|(_, c)| c.parent == ROOT).map(|(i, _)| fast[i]).sum();
    (total, worst_pkts)
}

fn run_seeds(what: &str, default_seeds: u64, make: impl Fn(u64) -> Scenario) {
    let seeds = std::env::var("SLUICE_DIFF_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default_seeds);
    let first = std::env::var("SLUICE_DIFF_FIRST").ok().and_then(|v| v.parse().ok()).unwrap_or(0u64);
    let mut worst = 0f64;
    for seed in first..first + seeds {
        let (total, w) = check(seed, make(seed));
        assert!(total > 0, "seed {seed}: nothing was sent");
        worst = worst.max(w);
    }
    eprintln!("{seeds} seeds ({what}): worst per-class difference {worst:.2} packets");
}

/// rate == ceil everywhere (bursts still differ, so classes do borrow briefly): token buckets,
/// modes, prio and the leaf row. The two schedulers agree to the byte on every seed so far.
#[test]
fn fast_htb_matches_the_reference_without_excess_sharing() {
    run_seeds("no borrowing", 40, |seed| scenario(seed, false));
}

/// Full borrowing. Both schedulers keep rows and feeds in classid order with nested round robin
/// and the kernel's cursor rules; on seeds 0..40 the worst per-class difference is one packet.
/// Before that (fast HTB in activation order, reference flat per level) seeds differed by up to
/// ~38% of a class's bytes (seed 13).
#[test]
fn fast_htb_matches_the_reference_with_borrowing() {
    run_seeds("borrowing", 40, |seed| scenario(seed, true));
}

/// Site trees ([`sites_scenario`]): several sites borrowing from the root for one or two
/// backlogged leaves each, the shape of `tests/htb_three_level_sites.rs`.
#[test]
fn fast_htb_matches_the_reference_on_site_trees() {
    run_seeds("site trees", 24, sites_scenario);
}

fn max_classes() -> usize {
    std::env::var("SLUICE_DIFF_MAX_CLASSES").ok().and_then(|v| v.parse().ok()).unwrap_or(10)
}

/// Two greedy leaves under a 5 Mbit/s parent (rate = ceil), each with its own guaranteed rate and
/// ceil 5 Mbit/s: the excess `5000 - r1 - r2` kbit/s is shared in proportion to quantum
/// (issue 2's property). Returns (leaf 1, leaf 2) kbit/s after 10 s of virtual time.
fn two_leaves(q: &mut dyn Qdisc, size: [u32; 2]) -> [f64; 2] {
    let pkt = |i: usize| {
        let mut p = Packet::new(size[i], i as u64);
        p.push_class(Handle::new(1, 2 + i as u32));
        p
    };
    let mut now = Time::ZERO;
    for i in 0..2 {
        for _ in 0..4 {
            q.enqueue(pkt(i), now).unwrap();
        }
    }
    let mut bytes = [0u64; 2];
    while now < Time::from_secs(10) {
        match q.dequeue(now) {
            Some(p) => {
                bytes[p.payload as usize] += p.len as u64;
                q.enqueue(pkt(p.payload as usize), now).unwrap();
            }
            None => now = q.next_event(now).unwrap().max(now + Span::from_nanos(1)),
        }
    }
    bytes.map(|b| b as f64 * 8.0 / 10e3)
}

/// (rate1, rate2, quantum1, quantum2, size1, size2)
const SHARE_CASES: [(u64, u64, u32, u32, u32, u32); 3] = [
    (838_000, 906_000, 1500, 1500, 1500, 1500),
    (838_000, 906_000, 1000, 6000, 1000, 1000),
    (838_000, 906_000, 1000, 6000, 1000, 1500),
];

fn share_check(fast: bool) {
    for (r1, r2, q1, q2, s1, s2) in SHARE_CASES {
        let parent = 5_000_000u64;
        let mut q: Box<dyn Qdisc> = if fast {
            let mut h = Htb::new(ROOT, HtbConfig::default()).unwrap();
            let c = |rate: u64, q: u32| {
                HtbClassConfig::new(Rate::from_bps(rate))
                    .ceil(Rate::from_bps(parent))
                    .burst(1600)
                    .cburst(1600)
                    .quantum(q)
            };
            h.add_class(Handle::new(1, 1), ROOT, c(parent, 1500), Time::ZERO).unwrap();
            h.add_class(Handle::new(1, 2), Handle::new(1, 1), c(r1, q1), Time::ZERO).unwrap();
            h.add_class(Handle::new(1, 3), Handle::new(1, 1), c(r2, q2), Time::ZERO).unwrap();
            Box::new(h)
        } else {
            let mut h = RefHtb::new(ROOT);
            let p = |rate: u64, q: u32| RefClassParams {
                ceil: Rate::from_bps(parent),
                quantum: q,
                ..RefClassParams::new(Rate::from_bps(rate))
            };
            h.add_class(Handle::new(1, 1), ROOT, p(parent, 1500), Time::ZERO).unwrap();
            h.add_class(Handle::new(1, 2), Handle::new(1, 1), p(r1, q1), Time::ZERO).unwrap();
            h.add_class(Handle::new(1, 3), Handle::new(1, 1), p(r2, q2), Time::ZERO).unwrap();
            Box::new(h)
        };
        let got = two_leaves(q.as_mut(), [s1, s2]);
        let excess = (parent - r1 - r2) as f64 / 1e3;
        let want = [
            r1 as f64 / 1e3 + excess * q1 as f64 / (q1 + q2) as f64,
            r2 as f64 / 1e3 + excess * q2 as f64 / (q1 + q2) as f64,
        ];
        for i in 0..2 {
            // 1% covers the bursts (1600 B over 10 s = 1.3 kbit/s) and DRR rounding.
            assert!(
                (got[i] - want[i]).abs() <= 0.01 * want[i],
                "{} leaf {}: {:.1} kbit/s, analytic {:.1} (case {:?})",
                if fast { "fast HTB" } else { "reference" },
                i + 1,
                got[i],
                want[i],
                (r1, r2, q1, q2, s1, s2)
            );
        }
    }
}

/// The reference shares the excess in proportion to quantum, as computed by hand.
#[test]
fn reference_shares_excess_by_quantum() {
    share_check(false);
}

/// The same check on the fast HTB. It used to fail (2495 and 2508 kbit/s where 2466 and 2534
/// are due) because rows and feeds were kept in activation order; they are now in classid order
/// with the kernel's cursor rules, as in `sch_htb.c`.
#[test]
fn fast_htb_shares_excess_by_quantum() {
    share_check(true);
}

/// Debug aid: runs both schedulers in lockstep on one clock and reports the first dequeue where
/// they pick different leaves (`SLUICE_DIFF_TRACE=seed`, site trees, with their link and CBR).
#[test]
fn trace_first_divergence() {
    let Some(seed) = std::env::var("SLUICE_DIFF_TRACE").ok().and_then(|v| v.parse().ok()) else { return };
    let s = sites_scenario(seed);
    for (i, c) in s.classes.iter().enumerate() {
        let src = s.sources.iter().find(|x| x.0 == i).map(|x| (x.1, x.2.clone()));
        eprintln!(
            "{} parent {} rate {} ceil {} prio {} q {} burst {} cburst {} {:?}",
            c.id, c.parent, c.rate, c.ceil, c.prio, c.quantum, c.burst, c.cburst, src
        );
    }
    eprintln!("link {:?}", s.link_bps);
    let mut f = build_fast(&s);
    let mut r = build_ref(&s);
    let pkt = |src: usize, seq: u64| {
        let (ci, size, _) = &s.sources[src];
        let mut p = Packet::new(*size, (src as u64) << 32 | seq);
        p.push_class(s.classes[*ci].id);
        p
    };
    let greedy: Vec<usize> =
        (0..s.sources.len()).filter(|&k| matches!(s.sources[k].2, Source::Greedy)).collect();
    let mut now = Time::ZERO;
    for &k in &greedy {
        for j in 0..4 {
            f.enqueue(pkt(k, j), now).unwrap();
            r.enqueue(pkt(k, j), now).unwrap();
        }
    }
    let end = Time::from_secs(s.secs);
    let arrivals = cbr_arrivals(&s, end);
    let (mut ai, mut link_free) = (0usize, Time::ZERO);
    let mut recent: Vec<String> = Vec::new();
    for step in 0..20_000_000u64 {
        if now >= end {
            break;
        }
        while ai < arrivals.len() && arrivals[ai].0 <= now {
            let _ = f.enqueue(pkt(arrivals[ai].1, ai as u64), now);
            let _ = r.enqueue(pkt(arrivals[ai].1, ai as u64), now);
            ai += 1;
        }
        let next_arrival = arrivals.get(ai).map(|a| a.0).unwrap_or(end);
        if now < link_free {
            now = link_free.min(next_arrival);
            continue;
        }
        let state: Vec<String> = s
            .classes
            .iter()
            .map(|c| {
                let st = f.class_stats(c.id).unwrap();
                format!(
                    "  {} fast {:?} tok {} ctok {} q {} | ref {:?} q {:?}",
                    c.id,
                    st.mode,
                    st.tokens,
                    st.ctokens,
                    st.qlen,
                    r.class_mode(c.id, now),
                    r.class_qlen(c.id)
                )
            })
            .collect();
        let a = f.dequeue(now);
        let b = r.dequeue(now);
        let name =
            |p: &Option<Packet>| p.map(|p| s.classes[s.sources[(p.payload >> 32) as usize].0].id.to_string());
        if name(&a) != name(&b) {
            for l in &recent {
                eprintln!("{l}");
            }
            eprintln!("step {step} at {now:?}: fast {:?} reference {:?}", name(&a), name(&b));
            for l in &state {
                eprintln!("{l}");
            }
            return;
        }
        match a {
            Some(p) => {
                let m = |h: u32| r.class_mode(Handle::new(1, h), now).unwrap();
                let watch: Vec<u32> = std::env::var("SLUICE_DIFF_WATCH")
                    .map(|v| v.split(',').filter_map(|x| u32::from_str_radix(x, 16).ok()).collect())
                    .unwrap_or_default();
                let ms: Vec<String> = watch.iter().map(|&h| format!("{h:x}:{}", m(h))).collect();
                recent.push(format!("{step} {now:?} {} {}", name(&a).unwrap(), ms.join(" ")));
                if recent.len() > 40 {
                    recent.remove(0);
                }
                let src = (p.payload >> 32) as usize;
                if matches!(s.sources[src].2, Source::Greedy) {
                    f.enqueue(pkt(src, step + 100), now).unwrap();
                    r.enqueue(pkt(src, step + 100), now).unwrap();
                }
                if let Some(l) = s.link_bps {
                    link_free = now + Rate::from_bps(l).time_to_send(p.len as u64);
                }
            }
            None => {
                let wake = [f.next_event(now), r.next_event(now)].into_iter().flatten().min();
                now = wake.map_or(next_arrival, |t| t.max(now + Span::from_nanos(1)).min(next_arrival));
            }
        }
    }
    eprintln!("no divergence");
}
