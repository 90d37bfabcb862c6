//! HTB `textbook` sharing ([`HtbFair`]) on random hierarchies: with a random subset of leaves
//! greedy, each leaf's throughput over 20 s of virtual time equals the split the HTB user guide
//! prescribes, computed here independently (a recursive tree walk with water levels found by
//! bisection, where the qdisc uses flat arrays and capped rounds): every class gets its rate if
//! its subtree wants it; a class's excess goes to its children, lower prio first, in proportion
//! to quantum, never above a ceil.

use sluice_core::htb_fair::{FairClassConfig, HtbFair};
use sluice_core::{Handle, Packet, Qdisc, Time};

struct Node {
    id: Handle,
    rate: f64,
    ceil: f64,
    prio: u8,
    quantum: f64,
    greedy: bool,
    kids: Vec<Node>,
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn gen(rng: &mut Rng, id: &mut u32, rate: f64, ceil: f64, depth: u32) -> Node {
    *id += 1;
    let mut n = Node {
        id: Handle::new(1, *id),
        rate,
        ceil,
        prio: rng.below(3) as u8,
        quantum: (1000 + rng.below(5) * 1000) as f64,
        greedy: rng.below(3) != 0,
        kids: Vec::new(),
    };
    let kids = if depth == 0 { 0 } else { rng.below(4) };
    if kids >= 2 {
        // Children's rates add up to at most the parent's; ceilings between rate and parent ceil.
        let parts: Vec<u64> = (0..kids).map(|_| 1 + rng.below(10)).collect();
        let total = parts.iter().sum::<u64>() as f64 * (1.0 + rng.below(3) as f64 * 0.25);
        for p in parts {
            let r = (rate * p as f64 / total).round().max(8000.0);
            let c = r + ((ceil - r) * rng.below(5) as f64 / 4.0).round();
            n.kids.push(gen(rng, id, r, c, depth - 1));
        }
    }
    n
}

fn demand(n: &Node) -> f64 {
    if n.kids.is_empty() {
        return if n.greedy { n.ceil } else { 0.0 };
    }
    n.ceil.min(n.kids.iter().map(demand).sum())
}

fn guarantee(n: &Node) -> f64 {
    n.rate.min(demand(n))
}

/// What `n`'s subtree can hold when only leaves of prio <= p exceed their guarantees.
fn absorb(n: &Node, p: u8) -> f64 {
    if n.kids.is_empty() {
        return if n.prio <= p { demand(n) } else { guarantee(n) };
    }
    guarantee(n).max(demand(n).min(n.kids.iter().map(|k| absorb(k, p)).sum()))
}

/// Shares `pool` among `caps` by `weights` up to each cap: the water level by bisection.
fn water(pool: f64, caps: &[f64], weights: &[f64]) -> Vec<f64> {
    let fill = |l: f64| -> Vec<f64> { caps.iter().zip(weights).map(|(c, w)| c.min(l * w)).collect() };
    if caps.iter().sum::<f64>() <= pool {
        return caps.to_vec();
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while fill(hi).iter().sum::<f64>() < pool {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if fill(mid).iter().sum::<f64>() < pool {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    fill(hi)
}

/// The textbook split of `a` inside `n`, leaf rates appended to `out`.
fn split(n: &Node, a: f64, out: &mut Vec<(Handle, f64)>) {
    if n.kids.is_empty() {
        out.push((n.id, a));
        return;
    }
    let mut got: Vec<f64> = n.kids.iter().map(guarantee).collect();
    let mut pool = a - got.iter().sum::<f64>();
    assert!(pool > -1e-6, "generated trees are not oversubscribed");
    for p in 0..8 {
        let caps: Vec<f64> = n.kids.iter().zip(&got).map(|(k, g)| (absorb(k, p) - g).max(0.0)).collect();
        let w: Vec<f64> = n.kids.iter().map(|k| k.quantum).collect();
        let share = water(pool.max(0.0), &caps, &w);
        for (g, s) in got.iter_mut().zip(&share) {
            *g += s;
        }
        pool -= share.iter().sum::<f64>();
    }
    for (k, g) in n.kids.iter().zip(got) {
        split(k, g, out);
    }
}

fn add(q: &mut HtbFair, n: &Node, parent: Handle) {
    let cfg =
        FairClassConfig { rate: n.rate as u64, ceil: n.ceil as u64, prio: n.prio, quantum: n.quantum as u32 };
    q.add_class(n.id, parent, cfg).unwrap();
    for k in &n.kids {
        add(q, k, n.id);
    }
}

fn greedy_leaves(n: &Node, out: &mut Vec<Handle>) {
    if n.kids.is_empty() {
        if n.greedy {
            out.push(n.id);
        }
    } else {
        n.kids.iter().for_each(|k| greedy_leaves(k, out));
    }
}

fn pkt(leaf: Handle, len: u32) -> Packet {
    let mut p = Packet::new(len, leaf.minor() as u64);
    p.push_class(leaf);
    p
}

#[test]
fn random_hierarchies_split_as_the_user_guide_says() {
    let mut checked = 0;
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut id = 0;
        let root = gen(&mut rng, &mut id, 10_000_000.0, 10_000_000.0, 3);
        let mut leaves = Vec::new();
        greedy_leaves(&root, &mut leaves);
        if leaves.len() < 2 {
            continue;
        }
        let mut want = Vec::new();
        split(&root, guarantee(&root), &mut want);
        let mut q = HtbFair::new(Handle::new(1, 0), 0, 1000, 1000);
        add(&mut q, &root, Handle::new(1, 0));
        // Greedy leaves keep 20 packets queued; the link is infinitely fast.
        let len = 1000u32;
        for &l in &leaves {
            for _ in 0..20 {
                q.enqueue(pkt(l, len), Time::ZERO).unwrap();
            }
        }
        let secs = 20u64;
        let end = Time::ZERO + sluice_core::Span::from_secs(secs);
        let mut now = Time::ZERO;
        while let Some(t) = q.next_event(now) {
            if t > end {
                break;
            }
            now = now.max(t);
            let p = q.dequeue(now).expect("due");
            q.enqueue(pkt(Handle::new(1, p.payload as u32), len), now).unwrap();
        }
        for (leaf, rate) in want {
            let got = q.leaf_bytes(leaf).unwrap() as f64 * 8.0 / secs as f64;
            let expect = if leaves.contains(&leaf) { rate } else { 0.0 };
            // One packet per leaf of slack over the run, plus 0.2%.
            let tol = expect * 0.002 + 2.0 * len as f64 * 8.0 / secs as f64;
            assert!(
                (got - expect).abs() <= tol,
                "seed {seed} leaf {leaf}: {got:.0} bit/s, textbook {expect:.0}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} leaves checked");
}

#[test]
fn a_leaf_that_empties_between_packets_still_gets_only_its_share() {
    // One 1 Mbit/s class, offered 8 Mbit/s as one 1000-byte packet per millisecond: its queue
    // empties whenever it catches up, and going idle must not earn it credit.
    let mut q = HtbFair::new(Handle::new(1, 0), 0, 1000, 1000);
    let leaf = Handle::new(1, 1);
    let cfg = FairClassConfig { rate: 1_000_000, ceil: 1_000_000, prio: 0, quantum: 1500 };
    q.add_class(leaf, Handle::new(1, 0), cfg).unwrap();
    let ms = sluice_core::Span::from_millis(1);
    let mut now = Time::ZERO;
    let mut sent = 0u64;
    for _ in 0..10_000 {
        let _ = q.enqueue(pkt(leaf, 1000), now);
        let next = now + ms;
        while let Some(t) = q.next_event(now).filter(|&t| t < next) {
            now = now.max(t);
            sent += q.dequeue(now).map_or(0, |p| p.len as u64);
        }
        now = next;
    }
    let bps = sent as f64 * 8.0 / 10.0;
    assert!((bps - 1e6).abs() < 1e6 * 0.002, "{bps} bit/s for a 1 Mbit/s class");
}
