//! HTB with the sharing the HTB user guide describes (`tc qdisc add ... htb textbook`), a Sluice
//! option: Linux's HTB (the default, [`crate::htb`]) shares spare bandwidth packet by packet, and
//! with several lenders, prio and small quanta its leaves end up far from the guide's split.
//!
//! # The allocation
//!
//! Given the leaves that hold packets (each wants as much as it may get), every class `c` gets a
//! rate `A(c)`, top down:
//! - its demand `D(c)`: a backlogged leaf's ceil, 0 for an idle one; an inner class's is
//!   `min(ceil, Σ D(children))`. Its guarantee is `g(c) = min(rate, D(c))`.
//! - a top-level class (no parent to borrow from) gets `A = g`.
//! - a class with `A(c)` first gives each child its guarantee (if the children's guarantees add
//!   up to more than `A(c)`, an oversubscribed tree, they share it by max-min weighted by rate);
//!   the rest is its *excess*, lent to its children by priority: for prio 0, then 1, ... 7, the
//!   children that can still use more for leaves of that prio (`headroom`) share what is left in
//!   proportion to their quantum, each up to its headroom (weighted max-min). A child's headroom
//!   at prio `p` is what its subtree could hold if only leaves of prio `<= p` went beyond their
//!   guarantees (`absorb(k, p)`: a leaf's `D` if its prio is `<= p`, else `g`; an inner class's
//!   `max(g, min(D, Σ absorb(children, p)))`), minus what the child already has.
//! - a class's excess thus goes to its own subtree first (nearest lender), higher priorities
//!   first, then siblings by quantum; ceilings always hold (`A(c) <= D(c) <= ceil`).
//!
//! # The data path
//!
//! The allocation is recomputed when a leaf becomes backlogged or empties (O(classes), no
//! allocation); each backlogged leaf is then paced at its rate: a leaf may send when its virtual
//! time `next` has come, the earliest such leaf goes first, and `next` advances by the packet's
//! time at the leaf's rate. Where the link is slower than the classes' rates, leaves are served
//! in order of `next` and keep the allocation's proportions. The direct queue (`skb->priority`
//! naming the qdisc, a filter result `X:0`, or no default class) goes first, unshaped, as in HTB.
//! Rates are `f64`: this scheduler gives the guide's split, not the kernel's token arithmetic
//! (bursts, mpu/overhead and the 60 s limits do not apply).

use crate::fifo::Fifo;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, Dropped, Qdisc, QdiscStats};
use crate::sched::FastMap;
use crate::time::{Span, Time};

/// Highest prio + 1 (`TC_HTB_NUMPRIO`).
const NUMPRIO: usize = 8;

/// One class of [`HtbFair`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FairClassConfig {
    /// Guaranteed rate, bit/s.
    pub rate: u64,
    /// Ceiling, bit/s (at least `rate`).
    pub ceil: u64,
    /// 0 (first) to 7.
    pub prio: u8,
    /// Weight among siblings sharing excess, bytes (never 0).
    pub quantum: u32,
}

struct Leaf {
    child: Box<dyn Qdisc>,
    /// Holds packets (counts in the allocation).
    backlogged: bool,
    /// Virtual time of its next packet.
    next: Time,
    bytes: u64,
    packets: u64,
}

struct FClass {
    parent: Option<usize>,
    children: Vec<usize>,
    cfg: FairClassConfig,
    leaf: Option<Leaf>,
}

/// HTB with textbook sharing. See the [module docs](self).
pub struct HtbFair {
    handle: Handle,
    default_class: u32,
    classes: Vec<FClass>,
    by_id: FastMap<Handle, usize>,
    direct: Fifo,
    default_limit: u32,
    /// Per class: demand, allocation; `absorb[p * n + i]`.
    demand: Vec<f64>,
    alloc: Vec<f64>,
    absorb: Vec<f64>,
    /// Water-filling scratch: still unsatisfied.
    open: Vec<bool>,
    stats: QdiscStats,
    /// The leaf the last enqueue or dequeue touched (its child may have dropped packets).
    touched: Option<usize>,
}

impl std::fmt::Debug for HtbFair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HtbFair").field("handle", &self.handle).field("classes", &self.classes.len()).finish()
    }
}

impl HtbFair {
    /// An empty qdisc: `default_class` is the minor of the default class (0: none), leaves get a
    /// pfifo of `default_limit` packets, the direct queue holds `direct_qlen`.
    pub fn new(handle: Handle, default_class: u32, direct_qlen: u32, default_limit: u32) -> HtbFair {
        HtbFair {
            handle: handle.qdisc(),
            default_class,
            classes: Vec::new(),
            by_id: FastMap::default(),
            direct: Fifo::pfifo(direct_qlen.max(1)),
            default_limit: default_limit.max(1),
            demand: Vec::new(),
            alloc: Vec::new(),
            absorb: Vec::new(),
            open: Vec::new(),
            stats: QdiscStats::default(),
            touched: None,
        }
    }

    /// Adds class `id` under `parent` (the qdisc's handle for a top-level class); parents first.
    pub fn add_class(&mut self, id: Handle, parent: Handle, cfg: FairClassConfig) -> Result<(), ConfigError> {
        let what = || format!("htb class {id}");
        if cfg.rate == 0 || cfg.ceil < cfg.rate {
            return Err(ConfigError::invalid(what(), "ceil", cfg.ceil, "rate > 0 and ceil >= rate"));
        }
        if cfg.quantum == 0 || cfg.prio as usize >= NUMPRIO {
            return Err(ConfigError::invalid(what(), "quantum", cfg.quantum, "quantum > 0, prio 0-7"));
        }
        if id.qdisc() != self.handle || id.minor() == 0 || self.by_id.contains_key(&id) {
            return Err(ConfigError::Hierarchy(format!("{id}: not a new class of htb {}", self.handle)));
        }
        let parent = if parent == self.handle || parent == Handle::ROOT {
            None
        } else {
            let p = *self
                .by_id
                .get(&parent)
                .ok_or_else(|| ConfigError::Hierarchy(format!("{id}: no parent class {parent}")))?;
            if self.classes[p].leaf.as_ref().is_some_and(|l| l.child.qlen() > 0) {
                return Err(ConfigError::Hierarchy(format!("{parent} holds packets")));
            }
            self.classes[p].leaf = None;
            Some(p)
        };
        let i = self.classes.len();
        if let Some(p) = parent {
            self.classes[p].children.push(i);
        }
        self.by_id.insert(id, i);
        self.classes.push(FClass {
            parent,
            children: Vec::new(),
            cfg,
            leaf: Some(Leaf {
                child: Box::new(Fifo::pfifo(self.default_limit)),
                backlogged: false,
                next: Time::ZERO,
                bytes: 0,
                packets: 0,
            }),
        });
        let n = self.classes.len();
        self.demand.resize(n, 0.0);
        self.alloc.resize(n, 0.0);
        self.absorb.resize(n * NUMPRIO, 0.0);
        self.open.resize(n, false);
        Ok(())
    }

    /// Grafts `child` on leaf `id`, returning the old child.
    pub fn set_leaf_qdisc(
        &mut self,
        id: Handle,
        child: Box<dyn Qdisc>,
    ) -> Result<Box<dyn Qdisc>, ConfigError> {
        let i = *self.by_id.get(&id).ok_or_else(|| ConfigError::Hierarchy(format!("no htb class {id}")))?;
        let leaf = self.classes[i]
            .leaf
            .as_mut()
            .ok_or_else(|| ConfigError::Hierarchy(format!("htb class {id} is not a leaf")))?;
        if leaf.child.qlen() > 0 {
            return Err(ConfigError::Hierarchy(format!("htb class {id} holds packets")));
        }
        Ok(std::mem::replace(&mut leaf.child, child))
    }

    /// The rate (bit/s) the allocation gives class `id` now.
    pub fn allocated(&self, id: Handle) -> Option<f64> {
        self.by_id.get(&id).map(|&i| self.alloc[i])
    }

    /// Bytes sent by leaf `id`.
    pub fn leaf_bytes(&self, id: Handle) -> Option<u64> {
        self.classes[*self.by_id.get(&id)?].leaf.as_ref().map(|l| l.bytes)
    }

    fn leaf_for(&self, pkt: &Packet) -> Option<usize> {
        let leaf = |h: Handle| self.by_id.get(&h).copied().filter(|&i| self.classes[i].leaf.is_some());
        let prio = Handle::from_tc(pkt.priority);
        if prio == self.handle {
            return None;
        }
        if let Some(i) = leaf(prio) {
            return Some(i);
        }
        match pkt.class_for(self.handle.major()) {
            Some(h) if h == self.handle => None,
            Some(h) if leaf(h).is_some() => leaf(h),
            _ => {
                leaf(Handle::new(self.handle.major(), self.default_class)).filter(|_| self.default_class != 0)
            }
        }
    }

    /// Weighted max-min of `pool` among `kids` (of class arrays) with caps `cap(k)` and weights
    /// `w(k)`; adds the shares to `alloc`. Returns what is left.
    fn share(
        &mut self,
        kids: &[usize],
        mut pool: f64,
        cap: impl Fn(&Self, usize) -> f64,
        w: impl Fn(&Self, usize) -> f64,
    ) -> f64 {
        for &k in kids {
            self.open[k] = cap(self, k) > 1e-9;
        }
        while pool > 1e-9 {
            let wsum: f64 = kids.iter().filter(|&&k| self.open[k]).map(|&k| w(self, k)).sum();
            if wsum <= 0.0 {
                break;
            }
            let mut capped = false;
            for &k in kids {
                if self.open[k] && pool * w(self, k) / wsum >= cap(self, k) {
                    let c = cap(self, k);
                    self.alloc[k] += c;
                    pool -= c;
                    self.open[k] = false;
                    capped = true;
                }
            }
            if !capped {
                for &k in kids {
                    if self.open[k] {
                        self.alloc[k] += pool * w(self, k) / wsum;
                        self.open[k] = false;
                    }
                }
                pool = 0.0;
            }
        }
        pool
    }

    /// Recomputes every class's rate from the backlogged leaves (see the module docs).
    fn recompute(&mut self) {
        let n = self.classes.len();
        self.demand.fill(0.0);
        self.alloc.fill(0.0);
        self.absorb.fill(0.0);
        // Bottom up (children come after their parents).
        for i in (0..n).rev() {
            let c = &self.classes[i];
            let ceil = c.cfg.ceil as f64;
            let d = match &c.leaf {
                Some(l) if l.backlogged => ceil,
                Some(_) => 0.0,
                None => self.demand[i].min(ceil),
            };
            self.demand[i] = d;
            let g = d.min(c.cfg.rate as f64);
            for p in 0..NUMPRIO {
                let a = match &c.leaf {
                    Some(_) if c.cfg.prio as usize <= p => d,
                    Some(_) => g,
                    None => self.absorb[p * n + i].min(d).max(g),
                };
                self.absorb[p * n + i] = a;
            }
            if let Some(parent) = c.parent {
                self.demand[parent] += d;
                for p in 0..NUMPRIO {
                    self.absorb[p * n + parent] += self.absorb[p * n + i];
                }
            }
        }
        for i in 0..n {
            if self.classes[i].parent.is_none() {
                self.alloc[i] = self.demand[i].min(self.classes[i].cfg.rate as f64);
            }
        }
        for i in 0..n {
            if self.classes[i].children.is_empty() {
                continue;
            }
            let kids = std::mem::take(&mut self.classes[i].children);
            let guar = |s: &Self, k: usize| s.demand[k].min(s.classes[k].cfg.rate as f64);
            let total: f64 = kids.iter().map(|&k| guar(self, k)).sum();
            let mut pool = self.alloc[i];
            if total > pool {
                pool = self.share(&kids, pool, guar, |s, k| s.classes[k].cfg.rate as f64);
            } else {
                for &k in &kids {
                    self.alloc[k] = guar(self, k);
                }
                pool -= total;
            }
            for p in 0..NUMPRIO {
                if pool <= 1e-9 {
                    break;
                }
                pool = self.share(
                    &kids,
                    pool,
                    |s, k| (s.absorb[p * n + k] - s.alloc[k]).max(0.0),
                    |s, k| s.classes[k].cfg.quantum as f64,
                );
            }
            self.classes[i].children = kids;
        }
    }

    /// Leaf `i` becomes backlogged: it may send once its last packet is paid for, and no later
    /// than the backlogged leaf furthest behind, so going idle earns no credit and a returning
    /// leaf does not wait for the others to catch up.
    fn wake(&mut self, i: usize, now: Time) {
        let behind = self
            .classes
            .iter()
            .filter_map(|c| c.leaf.as_ref())
            .filter(|l| l.backlogged)
            .map(|l| l.next)
            .min()
            .unwrap_or(now);
        if let Some(l) = self.classes[i].leaf.as_mut() {
            l.backlogged = true;
            l.next = l.next.max(behind.min(now));
        }
        self.recompute();
    }

    fn sleep_if_empty(&mut self, i: usize) {
        if let Some(l) = self.classes[i].leaf.as_mut() {
            if l.backlogged && l.child.qlen() == 0 {
                l.backlogged = false;
                self.recompute();
            }
        }
    }

    /// The leaf to serve at `now`: the earliest due backlogged leaf that releases a packet.
    fn pick(&mut self, now: Time) -> Option<usize> {
        let mut best: Option<(Time, usize)> = None;
        for i in 0..self.classes.len() {
            if self.alloc[i] <= 0.0 {
                continue;
            }
            let Some(l) = self.classes[i].leaf.as_mut() else { continue };
            if !l.backlogged || l.next > now || best.is_some_and(|(t, _)| t <= l.next) {
                continue;
            }
            if l.child.peek(now).is_some() {
                best = Some((l.next, i));
            }
        }
        best.map(|b| b.1)
    }
}

impl Qdisc for HtbFair {
    fn kind(&self) -> &'static str {
        "htb"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let len = pkt.len as u64;
        match self.leaf_for(&pkt) {
            None => self.direct.enqueue(pkt, now)?,
            Some(i) => {
                self.touched = Some(i);
                let l = self.classes[i].leaf.as_mut().expect("a leaf");
                let was_idle = !l.backlogged;
                l.child.enqueue(pkt, now)?;
                if was_idle {
                    self.wake(i, now);
                }
            }
        }
        self.stats.backlog_bytes += len;
        self.stats.qlen += 1;
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let pkt = match self.direct.dequeue(now) {
            Some(p) => p,
            None => loop {
                let i = self.pick(now)?;
                self.touched = Some(i);
                let rate = self.alloc[i];
                let l = self.classes[i].leaf.as_mut().expect("a leaf");
                let Some(p) = l.child.dequeue(now) else {
                    self.sleep_if_empty(i);
                    continue;
                };
                l.bytes += p.len as u64;
                l.packets += p.gso_segs.max(1) as u64;
                l.next += Span::from_nanos((p.len as f64 * 8e9 / rate).ceil() as u64);
                self.sleep_if_empty(i);
                break p;
            },
        };
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.direct.qlen() > 0 {
            return self.direct.peek(now);
        }
        let i = self.pick(now)?;
        self.classes[i].leaf.as_mut()?.child.peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        if self.direct.qlen() > 0 {
            return Some(now);
        }
        let mut any = false;
        let mut t: Option<Time> = None;
        for (i, c) in self.classes.iter().enumerate() {
            let Some(l) = c.leaf.as_ref().filter(|l| l.backlogged) else { continue };
            any = true;
            if self.alloc[i] <= 0.0 {
                continue;
            }
            let due = l.child.next_event(now).map_or(l.next, |c| c.max(l.next));
            t = Some(t.map_or(due, |x: Time| x.min(due)));
        }
        // A backlogged leaf the allocation gives nothing waits for a change: poll.
        t.or(any.then(|| now + Span::from_millis(1)))
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out = self.direct.reset();
        for c in &mut self.classes {
            if let Some(l) = c.leaf.as_mut() {
                out.extend(l.child.reset());
                l.backlogged = false;
            }
        }
        self.recompute();
        self.stats.backlog_bytes = 0;
        self.stats.qlen = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        s.drops = self.direct.stats().drops;
        for l in self.classes.iter().filter_map(|c| c.leaf.as_ref()) {
            s.drops += l.child.stats().drops;
        }
        s
    }

    /// Every class: a leaf's own counters and its qdisc's queue; an inner class's `Sent` is its
    /// descendants', as in HTB.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        // Children come after their parents: sum the sent counters bottom up.
        let mut sent: Vec<(u64, u64)> =
            self.classes.iter().map(|c| c.leaf.as_ref().map_or((0, 0), |l| (l.bytes, l.packets))).collect();
        for i in (0..self.classes.len()).rev() {
            if let Some(p) = self.classes[i].parent {
                sent[p].0 += sent[i].0;
                sent[p].1 += sent[i].1;
            }
        }
        for (&id, &i) in &self.by_id {
            let leaf = self.classes[i].leaf.as_ref();
            let q = leaf.map(|l| l.child.stats()).unwrap_or_default();
            let stats = QdiscStats {
                bytes: sent[i].0,
                packets: sent[i].1,
                drops: q.drops,
                overlimits: 0,
                requeues: 0,
                backlog_bytes: q.backlog_bytes,
                qlen: q.qlen,
            };
            f(ClassView { minor: id.minor(), stats: Some(stats), child: leaf.map(|l| l.child.as_ref()) });
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        let i = self.touched?;
        let d = self.classes[i].leaf.as_mut()?.child.take_dropped();
        match d {
            Some(d) => {
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                self.sleep_if_empty(i);
                Some(d)
            }
            None => {
                self.touched = None;
                None
            }
        }
    }
}
