//! HFSC: the Hierarchical Fair Service Curve scheduler (tc-hfsc(8); Stoica, Zhang and Ng,
//! SIGCOMM '97), with the kernel's bookkeeping (sch_hfsc).
//!
//! - Every class may have a real-time curve (`rt`), a link-share curve (`ls`) and an upper-limit
//!   curve (`ul`), each two-piece (`m1` for `d`, then `m2`; see [`ServiceCurve`]).
//! - Real time: a backlogged leaf with `rt` has an eligible time `e` and a deadline `d` computed
//!   from its curve and the work done under real-time criteria (`cumul`). Dequeue first serves,
//!   among the classes with `e <= now`, the one with the smallest `d`. This is what decouples
//!   delay from bandwidth: a concave curve (`m1 > m2`) gives a low-rate class a short deadline.
//! - Link share: otherwise each level picks, among the active children whose fit time `f` has
//!   come (`ul` pushes `f` into the future), the one with the smallest virtual time `vt`; `vt`
//!   advances along the class's `ls` curve with the work it gets, so backlogged siblings split
//!   their parent's service in the ratio of their curves.
//! - Times are psched ticks (64 ns) and every curve operation is the kernel's integer arithmetic
//!   ([`curve`]), so that eligible times, deadlines, virtual times and the periods (`vtperiod`)
//!   follow sch_hfsc step for step. Ties in the kernel's red-black trees go to the class inserted
//!   first; the sorted vectors here keep that order.
//! - Classes form a tree under the root class (`X:0`, which has no curves). A packet goes to the
//!   leaf named by its classification ([`Packet::class_for`]), else to the `default` class if it is
//!   a leaf (default 0 names the root class: with no classes at all, HFSC passes packets unshaped),
//!   else it is dropped. Each leaf has a child qdisc (a pfifo of `txqueuelen` packets unless one is
//!   grafted).
//!
//! Nothing allocates on the packet path: each ordered set has room for all classes.

pub mod curve;
#[cfg(test)]
mod tests;

use crate::fifo::Fifo;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::sched::FastMap;
use crate::time::Time;
pub use curve::ServiceCurve;
use curve::{InternalSc, RuntimeSc};

/// A class's three curves; `None` for a curve not set. A curve with both slopes zero counts as
/// not given (the kernel ignores it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Curves {
    /// Real-time curve (`rt`).
    pub rt: Option<ServiceCurve>,
    /// Link-share curve (`ls`).
    pub ls: Option<ServiceCurve>,
    /// Upper-limit curve (`ul`).
    pub ul: Option<ServiceCurve>,
}

impl Curves {
    fn given(sc: Option<ServiceCurve>) -> Option<ServiceCurve> {
        sc.filter(|s| !s.is_zero())
    }
}

/// Counters of one HFSC class as `tc -s class show` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HfscClassStats {
    /// Bytes and packets sent by the class; drops, backlog and qlen of its child qdisc.
    pub stats: QdiscStats,
    /// Link-share periods (`vtperiod`).
    pub period: u64,
    /// Bytes sent by the class and its descendants (`cl_total`).
    pub work: u64,
    /// Bytes sent under real-time criteria (`cl_cumul`).
    pub rtwork: u64,
    /// 0 for a leaf, one more than the highest child otherwise.
    pub level: u32,
}

/// An ordered set of classes by a 64-bit key; equal keys keep insertion order (the kernel's
/// red-black trees insert an equal key to the right).
#[derive(Debug, Default)]
struct Ordered {
    v: Vec<(u64, u64, usize)>,
}

impl Ordered {
    fn insert(&mut self, key: u64, seq: u64, idx: usize) {
        let at = self.v.partition_point(|e| (e.0, e.1) <= (key, seq));
        self.v.insert(at, (key, seq, idx));
    }
    fn remove(&mut self, key: u64, seq: u64, idx: usize) {
        if let Ok(at) = self.v.binary_search(&(key, seq, idx)) {
            self.v.remove(at);
        }
    }
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.v.iter().map(|e| e.2)
    }
    fn first(&self) -> Option<usize> {
        self.v.first().map(|e| e.2)
    }
    fn last(&self) -> Option<usize> {
        self.v.last().map(|e| e.2)
    }
    fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
    fn reserve_for(&mut self, n: usize) {
        self.v.reserve(n.saturating_sub(self.v.len()));
    }
}

/// Where a class sits in one of the ordered sets: its key and insertion number.
type Slot = Option<(u64, u64)>;

struct Class {
    id: Handle,
    parent: Option<usize>,
    children: Vec<usize>,
    level: u32,
    alive: bool,
    child: Box<dyn Qdisc>,
    /// Listed in `touched` (its child may hold packets it dropped on its own).
    touched: bool,
    bytes: u64,
    packets: u64,
    old_drops: u64,

    rsc: Option<InternalSc>,
    fsc: Option<InternalSc>,
    usc: Option<InternalSc>,
    deadline: RuntimeSc,
    eligible: RuntimeSc,
    virt: RuntimeSc,
    ulimit: RuntimeSc,

    total: u64,
    cumul: u64,
    d: u64,
    e: u64,
    vt: u64,
    f: u64,
    myf: u64,
    cfmin: u64,
    cvtmin: u64,
    vtadj: u64,
    cvtoff: u64,
    vtperiod: u64,
    parentperiod: u64,
    nactive: u64,

    el_slot: Slot,
    vt_slot: Slot,
    cf_slot: Slot,
}

impl Class {
    fn new(id: Handle, parent: Option<usize>, child: Box<dyn Qdisc>) -> Class {
        Class {
            id,
            parent,
            children: Vec::new(),
            level: 0,
            alive: true,
            child,
            touched: false,
            bytes: 0,
            packets: 0,
            old_drops: 0,
            rsc: None,
            fsc: None,
            usc: None,
            deadline: RuntimeSc::default(),
            eligible: RuntimeSc::default(),
            virt: RuntimeSc::default(),
            ulimit: RuntimeSc::default(),
            total: 0,
            cumul: 0,
            d: 0,
            e: 0,
            vt: 0,
            f: 0,
            myf: 0,
            cfmin: 0,
            cvtmin: 0,
            vtadj: 0,
            cvtoff: 0,
            vtperiod: 0,
            parentperiod: 0,
            nactive: 0,
            el_slot: None,
            vt_slot: None,
            cf_slot: None,
        }
    }

    fn set_rsc(&mut self, sc: &ServiceCurve, now: u64) {
        let isc = InternalSc::new(sc);
        self.deadline = RuntimeSc::new(&isc, now, self.cumul);
        self.eligible = if isc.is_convex() { self.deadline.without_first_segment() } else { self.deadline };
        self.rsc = Some(isc);
    }

    fn set_fsc(&mut self, sc: &ServiceCurve) {
        let isc = InternalSc::new(sc);
        self.virt = RuntimeSc::new(&isc, self.vt, self.total);
        self.fsc = Some(isc);
    }

    fn set_usc(&mut self, sc: &ServiceCurve, now: u64) {
        let isc = InternalSc::new(sc);
        self.ulimit = RuntimeSc::new(&isc, now, self.total);
        self.usc = Some(isc);
    }
}

/// The HFSC qdisc. See the [module docs](self).
pub struct Hfsc {
    handle: Handle,
    default_minor: u32,
    default_limit: u32,
    /// Index 0 is the root class; deleted classes stay as dead slots.
    classes: Vec<Class>,
    by_id: FastMap<Handle, usize>,
    eligible: Ordered,
    /// Per class: its active children by virtual time and by fit time.
    vt_tree: Vec<Ordered>,
    cf_tree: Vec<Ordered>,
    seq: u64,
    touched: Vec<usize>,
    /// A packet the device refused, sent first.
    requeued: Option<Packet>,
    /// The class chosen last held its packet back (a child that is not work-conserving, which
    /// HFSC does not expect): no new attempt before its child's next event.
    stalled_until: Option<Time>,
    stats: QdiscStats,
    own_drops: u64,
}

impl std::fmt::Debug for Hfsc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hfsc").field("handle", &self.handle).field("classes", &self.by_id.len()).finish()
    }
}

/// psched time: ns >> 6.
fn ticks(now: Time) -> u64 {
    now.as_nanos() >> 6
}

impl Hfsc {
    /// An HFSC qdisc `handle` with `default` class minor `default_minor` (0: the root class);
    /// classes get a pfifo of `default_limit` packets (the device's txqueuelen, at least 1).
    pub fn new(handle: Handle, default_minor: u32, default_limit: u32) -> Hfsc {
        let handle = handle.qdisc();
        let default_limit = default_limit.max(1);
        let mut by_id = FastMap::default();
        by_id.insert(handle, 0);
        Hfsc {
            handle,
            default_minor,
            default_limit,
            classes: vec![Class::new(handle, None, Box::new(Fifo::pfifo(default_limit)))],
            by_id,
            eligible: Ordered::default(),
            vt_tree: vec![Ordered::default()],
            cf_tree: vec![Ordered::default()],
            seq: 0,
            touched: Vec::new(),
            requeued: None,
            stalled_until: None,
            stats: QdiscStats::default(),
            own_drops: 0,
        }
    }

    fn index(&self, id: Handle) -> Result<usize, ConfigError> {
        self.by_id.get(&id).copied().ok_or_else(|| ConfigError::Hierarchy(format!("no hfsc class {id}")))
    }

    /// Adds class `id` under `parent` (the qdisc's handle for the root class) with `curves`
    /// (anchored at time zero, as the kernel anchors a new class). Returns the kernel's warning when the parent, an `rt`-only class, had to take
    /// its real-time curve as link-share curve too.
    pub fn add_class(
        &mut self,
        id: Handle,
        parent: Handle,
        curves: Curves,
    ) -> Result<Option<&'static str>, ConfigError> {
        if id.qdisc() != self.handle || id.minor() == 0 {
            return Err(ConfigError::Hierarchy(format!("{id} is not a class of hfsc {}", self.handle)));
        }
        if self.by_id.contains_key(&id) {
            return Err(ConfigError::Hierarchy(format!("hfsc class {id} exists")));
        }
        let p = self.index(parent)?;
        let (rt, ls, ul) = (Curves::given(curves.rt), Curves::given(curves.ls), Curves::given(curves.ul));
        if rt.is_none() && ls.is_none() {
            return Err(ConfigError::invalid(
                format!("hfsc class {id}"),
                "sc",
                "none",
                "a class needs a real-time or link-share curve",
            ));
        }
        // The parent becomes (or stays) an inner class: whatever its queue held goes.
        if self.classes[p].level == 0 {
            self.purge(p);
        }
        let mut c = Class::new(id, Some(p), Box::new(Fifo::pfifo(self.default_limit)));
        if let Some(s) = &rt {
            c.set_rsc(s, 0);
        }
        if let Some(s) = &ls {
            c.set_fsc(s);
        }
        if let Some(s) = &ul {
            c.set_usc(s, 0);
        }
        let i = self.classes.len();
        self.classes.push(c);
        self.vt_tree.push(Ordered::default());
        self.cf_tree.push(Ordered::default());
        self.by_id.insert(id, i);
        let mut warning = None;
        if p != 0 && self.classes[p].fsc.is_none() {
            // hfsc_upgrade_rt: an inner class needs a link-share curve.
            let pc = &mut self.classes[p];
            if let Some(r) = pc.rsc {
                pc.virt = RuntimeSc::new(&r, pc.vt, pc.total);
                pc.fsc = Some(r);
            }
            warning = Some("Forced curve change on parent 'rt' to 'sc'");
        }
        self.classes[p].children.push(i);
        let n = self.classes[p].children.len();
        self.vt_tree[p].reserve_for(n);
        self.cf_tree[p].reserve_for(n);
        self.eligible.reserve_for(self.classes.len());
        self.touched.reserve(self.classes.len().saturating_sub(self.touched.len()));
        self.adjust_levels(p);
        Ok(warning)
    }

    /// `tc class change`: the curves given replace the class's, at time `now`.
    pub fn change_class(&mut self, id: Handle, curves: Curves, now: Time) -> Result<(), ConfigError> {
        let i = self.index(id)?;
        let cur = ticks(now);
        let c = &mut self.classes[i];
        let (had_rsc, had_fsc) = (c.rsc.is_some(), c.fsc.is_some());
        if let Some(s) = Curves::given(curves.rt) {
            c.set_rsc(&s, cur);
        }
        if let Some(s) = Curves::given(curves.ls) {
            c.set_fsc(&s);
        }
        if let Some(s) = Curves::given(curves.ul) {
            c.set_usc(&s, cur);
        }
        let len = if c.child.qlen() > 0 { c.child.peek(now).map(|p| p.len as u64) } else { None };
        if let Some(len) = len {
            if self.classes[i].rsc.is_some() {
                if had_rsc {
                    self.update_ed(i, len);
                } else {
                    self.init_ed(i, len, cur);
                }
            }
            if self.classes[i].fsc.is_some() {
                if had_fsc {
                    self.update_vf(i, 0);
                } else {
                    self.init_vf(i, cur);
                }
            }
        }
        Ok(())
    }

    /// Grafts `child` on leaf class `id` (`None`: a fresh default pfifo). Returns the old child
    /// with whatever it held.
    pub fn set_class_qdisc(
        &mut self,
        id: Handle,
        child: Option<Box<dyn Qdisc>>,
    ) -> Result<Box<dyn Qdisc>, ConfigError> {
        let i = self.index(id)?;
        if self.classes[i].level > 0 {
            return Err(ConfigError::Hierarchy(format!("hfsc class {id} is not a leaf")));
        }
        let child = child.unwrap_or_else(|| Box::new(Fifo::pfifo(self.default_limit)));
        let c = &mut self.classes[i];
        let old = std::mem::replace(&mut c.child, child);
        let o = old.stats();
        c.old_drops += o.drops;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(o.backlog_bytes);
        self.stats.qlen = self.stats.qlen.saturating_sub(o.qlen);
        if o.qlen > 0 {
            self.qlen_notify(i);
        }
        Ok(old)
    }

    /// Deletes leaf class `id`, returning the packets it held (counted as drops of the qdisc).
    pub fn delete_class(&mut self, id: Handle) -> Result<Vec<Packet>, ConfigError> {
        let i = self.index(id)?;
        if i == 0 || self.classes[i].level > 0 {
            return Err(ConfigError::Hierarchy("HFSC class in use".into()));
        }
        let flushed = self.purge(i);
        let c = &mut self.classes[i];
        c.alive = false;
        self.own_drops += c.child.stats().drops + c.old_drops;
        c.child = Box::new(Fifo::pfifo(1));
        c.touched = false;
        self.touched.retain(|&x| x != i);
        let p = c.parent.take().unwrap_or(0);
        self.classes[p].children.retain(|&x| x != i);
        self.by_id.remove(&id);
        self.adjust_levels(p);
        Ok(flushed)
    }

    /// Drops what class `i` holds (counted as drops of the qdisc) and makes it passive.
    fn purge(&mut self, i: usize) -> Vec<Packet> {
        let flushed = self.classes[i].child.reset();
        if !flushed.is_empty() {
            for p in &flushed {
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(p.len as u64);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
            }
            self.own_drops += flushed.len() as u64;
            self.qlen_notify(i);
        }
        flushed
    }

    fn adjust_levels(&mut self, mut i: usize) {
        loop {
            let c = &self.classes[i];
            let level = c.children.iter().map(|&k| self.classes[k].level + 1).max().unwrap_or(0);
            self.classes[i].level = level;
            match self.classes[i].parent {
                Some(p) => i = p,
                None => break,
            }
        }
    }

    /// The class ids (the root class, `X:0`, first).
    pub fn class_ids(&self) -> impl Iterator<Item = Handle> + '_ {
        self.classes.iter().filter(|c| c.alive).map(|c| c.id)
    }

    /// The child qdisc of class `id`.
    pub fn class_qdisc(&self, id: Handle) -> Option<&dyn Qdisc> {
        self.by_id.get(&id).map(|&i| self.classes[i].child.as_ref())
    }

    /// Counters of class `id`.
    pub fn class_stats(&self, id: Handle) -> Option<HfscClassStats> {
        let c = &self.classes[*self.by_id.get(&id)?];
        let ch = c.child.stats();
        Some(HfscClassStats {
            stats: QdiscStats {
                bytes: c.bytes,
                packets: c.packets,
                drops: ch.drops + c.old_drops,
                overlimits: 0,
                requeues: ch.requeues,
                backlog_bytes: ch.backlog_bytes,
                qlen: ch.qlen,
            },
            period: c.vtperiod,
            work: c.total,
            rtwork: c.cumul,
            level: c.level,
        })
    }

    // ---- the ordered sets ----

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn el_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let e = self.classes[i].e;
        self.eligible.insert(e, s, i);
        self.classes[i].el_slot = Some((e, s));
    }
    fn el_remove(&mut self, i: usize) {
        if let Some((k, s)) = self.classes[i].el_slot.take() {
            self.eligible.remove(k, s, i);
        }
    }
    fn vt_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let (vt, p) = (self.classes[i].vt, self.classes[i].parent.unwrap_or(0));
        self.vt_tree[p].insert(vt, s, i);
        self.classes[i].vt_slot = Some((vt, s));
    }
    fn vt_remove(&mut self, i: usize) {
        let p = self.classes[i].parent.unwrap_or(0);
        if let Some((k, s)) = self.classes[i].vt_slot.take() {
            self.vt_tree[p].remove(k, s, i);
        }
    }
    fn cf_insert(&mut self, i: usize) {
        let s = self.next_seq();
        let (f, p) = (self.classes[i].f, self.classes[i].parent.unwrap_or(0));
        self.cf_tree[p].insert(f, s, i);
        self.classes[i].cf_slot = Some((f, s));
    }
    fn cf_remove(&mut self, i: usize) {
        let p = self.classes[i].parent.unwrap_or(0);
        if let Some((k, s)) = self.classes[i].cf_slot.take() {
            self.cf_tree[p].remove(k, s, i);
        }
    }
    fn update_cfmin(&mut self, p: usize) {
        self.classes[p].cfmin = self.cf_tree[p].first().map_or(0, |k| self.classes[k].f);
    }

    // ---- real time ----

    fn init_ed(&mut self, i: usize, next_len: u64, cur: u64) {
        let c = &mut self.classes[i];
        let Some(rsc) = c.rsc else { return };
        c.deadline.min_with(&rsc, cur, c.cumul);
        c.eligible = if rsc.is_convex() { c.deadline.without_first_segment() } else { c.deadline };
        c.e = c.eligible.y2x(c.cumul);
        c.d = c.deadline.y2x(c.cumul.wrapping_add(next_len));
        self.el_remove(i);
        self.el_insert(i);
    }

    fn update_ed(&mut self, i: usize, next_len: u64) {
        let c = &mut self.classes[i];
        c.e = c.eligible.y2x(c.cumul);
        c.d = c.deadline.y2x(c.cumul.wrapping_add(next_len));
        self.el_remove(i);
        self.el_insert(i);
    }

    /// The eligible class with the smallest deadline.
    fn get_mindl(&self, cur: u64) -> Option<usize> {
        let mut best: Option<usize> = None;
        for i in self.eligible.iter() {
            let c = &self.classes[i];
            if c.e > cur {
                break;
            }
            if best.is_none_or(|b| c.d < self.classes[b].d) {
                best = Some(i);
            }
        }
        best
    }

    // ---- link share ----

    fn init_vf(&mut self, mut i: usize, cur: u64) {
        let mut go_active = true;
        while let Some(p) = self.classes[i].parent {
            go_active = if go_active {
                let n = self.classes[i].nactive;
                self.classes[i].nactive += 1;
                n == 0
            } else {
                false
            };
            if go_active {
                if let Some(max) = self.vt_tree[p].last() {
                    // Between the min and max of the active siblings; within the parent's
                    // period, never backwards.
                    let mut vt = self.classes[max].vt;
                    let cvtmin = self.classes[p].cvtmin;
                    if cvtmin != 0 {
                        vt = cvtmin.wrapping_add(vt) / 2;
                    }
                    if self.classes[p].vtperiod != self.classes[i].parentperiod || vt > self.classes[i].vt {
                        self.classes[i].vt = vt;
                    }
                } else {
                    // First child of a new backlog period of the parent.
                    self.classes[i].vt = self.classes[p].cvtoff;
                    self.classes[p].cvtmin = 0;
                }
                let (pperiod, pactive) = (self.classes[p].vtperiod, self.classes[p].nactive);
                let c = &mut self.classes[i];
                if let Some(fsc) = c.fsc {
                    c.virt.min_with(&fsc, c.vt, c.total);
                }
                c.vtadj = 0;
                c.vtperiod += 1;
                c.parentperiod = pperiod + u64::from(pactive == 0);
                c.f = 0;
                self.vt_insert(i);
                self.cf_insert(i);
                let c = &mut self.classes[i];
                if let Some(usc) = c.usc {
                    c.ulimit.min_with(&usc, cur, c.total);
                    c.myf = c.ulimit.y2x(c.total);
                }
            }
            let c = &self.classes[i];
            let f = c.myf.max(c.cfmin);
            if f != c.f {
                self.classes[i].f = f;
                self.cf_remove(i);
                self.cf_insert(i);
            }
            self.update_cfmin(p);
            i = p;
        }
    }

    fn update_vf(&mut self, mut i: usize, len: u64) {
        let mut go_passive = self.classes[i].child.qlen() == 0 && self.classes[i].fsc.is_some();
        while let Some(p) = self.classes[i].parent {
            let c = &mut self.classes[i];
            c.total = c.total.wrapping_add(len);
            if c.fsc.is_none() || c.nactive == 0 {
                i = p;
                continue;
            }
            go_passive = if go_passive {
                c.nactive -= 1;
                c.nactive == 0
            } else {
                false
            };
            c.vt = c.virt.y2x(c.total).wrapping_add(c.vtadj);
            // Skipped in the past for not fitting: catch up with the parent's minimum.
            let pmin = self.classes[p].cvtmin;
            let c = &mut self.classes[i];
            if c.vt < pmin {
                c.vtadj = c.vtadj.wrapping_add(pmin - c.vt);
                c.vt = pmin;
            }
            if go_passive {
                let vt = c.vt;
                if vt > self.classes[p].cvtoff {
                    self.classes[p].cvtoff = vt;
                }
                self.vt_remove(i);
                self.cf_remove(i);
                self.update_cfmin(p);
                i = p;
                continue;
            }
            self.vt_remove(i);
            self.vt_insert(i);
            let c = &mut self.classes[i];
            if c.usc.is_some() {
                c.myf = c.ulimit.y2x(c.total);
            }
            let f = c.myf.max(c.cfmin);
            if f != c.f {
                c.f = f;
                self.cf_remove(i);
                self.cf_insert(i);
                self.update_cfmin(p);
            }
            i = p;
        }
    }

    /// The leaf with the smallest virtual time whose fit time has come, level by level.
    fn get_minvt(&mut self, cur: u64) -> Option<usize> {
        let mut i = 0;
        if self.classes[0].cfmin > cur {
            return None;
        }
        while self.classes[i].level > 0 {
            let next = self.vt_tree[i].iter().find(|&k| self.classes[k].f <= cur)?;
            let vt = self.classes[next].vt;
            let pc = &mut self.classes[i];
            if pc.cvtmin < vt {
                pc.cvtmin = vt;
            }
            i = next;
        }
        Some(i)
    }

    /// The class's queue emptied other than by a dequeue (a purge, its child's own drops).
    fn qlen_notify(&mut self, i: usize) {
        if self.classes[i].nactive > 0 {
            self.update_vf(i, 0);
        }
        if self.classes[i].rsc.is_some() {
            self.el_remove(i);
        }
    }

    fn in_el_or_vttree(&self, i: usize) -> bool {
        let c = &self.classes[i];
        (c.fsc.is_some() && c.nactive > 0) || (c.rsc.is_some() && c.el_slot.is_some())
    }

    /// `hfsc_classify` after the filters: the chosen leaf, else the default class if a leaf.
    fn leaf_for(&self, pkt: &Packet) -> Option<usize> {
        let leaf = |id: Handle| self.by_id.get(&id).copied().filter(|&i| self.classes[i].level == 0);
        pkt.class_for(self.handle.major())
            .and_then(leaf)
            .or_else(|| leaf(Handle::new(self.handle.major(), self.default_minor)))
    }

    fn touch(&mut self, i: usize) {
        let c = &mut self.classes[i];
        if !c.touched {
            c.touched = true;
            self.touched.push(i);
        }
    }

    /// The class dequeue serves at `cur`, and whether by real-time criteria.
    fn select(&mut self, cur: u64) -> Option<(usize, bool)> {
        if let Some(i) = self.get_mindl(cur) {
            return Some((i, true));
        }
        self.get_minvt(cur).map(|i| (i, false))
    }
}

impl Qdisc for Hfsc {
    fn kind(&self) -> &'static str {
        "hfsc"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let Some(i) = self.leaf_for(&pkt) else {
            self.own_drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        self.touch(i);
        self.stalled_until = None;
        let len = pkt.len as u64;
        let first = self.classes[i].child.qlen() == 0;
        self.classes[i].child.enqueue(pkt, now)?;
        self.stats.backlog_bytes += len;
        self.stats.qlen += 1;
        if first && !self.in_el_or_vttree(i) {
            let cur = ticks(now);
            if self.classes[i].rsc.is_some() {
                self.init_ed(i, len, cur);
            }
            if self.classes[i].fsc.is_some() {
                self.init_vf(i, cur);
            }
        }
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        if let Some(p) = self.requeued.take() {
            self.stats.on_dequeue(&p);
            return Some(p);
        }
        if self.stats.qlen == 0 {
            return None;
        }
        let cur = ticks(now);
        // A class whose child came up empty (its own AQM dropped the rest) goes passive and the
        // choice is made again; each pass removes one class, so this ends.
        for _ in 0..self.classes.len() + 1 {
            let Some((i, realtime)) = self.select(cur) else {
                self.stats.overlimits += 1;
                return None;
            };
            self.touch(i);
            let Some(pkt) = self.classes[i].child.dequeue(now) else {
                let child = &self.classes[i].child;
                if child.qlen() > 0 {
                    self.stalled_until = child.next_event(now).filter(|&t| t > now);
                    return None;
                }
                self.qlen_notify(i);
                continue;
            };
            self.stalled_until = None;
            let len = pkt.len as u64;
            let c = &mut self.classes[i];
            c.bytes += len;
            c.packets += pkt.gso_segs.max(1) as u64;
            self.update_vf(i, len);
            let c = &mut self.classes[i];
            if realtime {
                c.cumul = c.cumul.wrapping_add(len);
            }
            if c.rsc.is_some() {
                if c.child.qlen() > 0 {
                    let next_len = c.child.peek(now).map(|p| p.len as u64);
                    match next_len {
                        Some(n) if realtime => self.update_ed(i, n),
                        Some(n) => c.d = c.deadline.y2x(c.cumul.wrapping_add(n)),
                        None => self.el_remove(i),
                    }
                } else {
                    self.el_remove(i);
                }
            }
            self.stats.on_dequeue(&pkt);
            return Some(pkt);
        }
        None
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.requeued.is_some() {
            return self.requeued.as_ref();
        }
        if self.stats.qlen == 0 {
            return None;
        }
        let (i, _) = self.select(ticks(now))?;
        self.classes[i].child.peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        if self.requeued.is_some() {
            return Some(now);
        }
        if self.stats.qlen == 0 {
            return None;
        }
        let root = &self.classes[0];
        if root.level == 0 {
            return root.child.next_event(now);
        }
        // hfsc_schedule_watchdog: the first eligible time, or the root's earliest fit time.
        let mut t = self.eligible.first().map(|i| self.classes[i].e);
        if !self.cf_tree[0].is_empty() {
            t = Some(t.map_or(root.cfmin, |e| e.min(root.cfmin)));
        }
        let at = Time::from_nanos(t?.saturating_mul(64));
        Some(at.max(now).max(self.stalled_until.unwrap_or(now)))
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.requeued.take().into_iter().collect();
        self.stalled_until = None;
        for c in &mut self.classes {
            out.extend(c.child.reset());
            c.total = 0;
            c.cumul = 0;
            c.d = 0;
            c.e = 0;
            c.vt = 0;
            c.vtadj = 0;
            c.cvtmin = 0;
            c.cvtoff = 0;
            c.vtperiod = 0;
            c.parentperiod = 0;
            c.f = 0;
            c.myf = 0;
            c.cfmin = 0;
            c.nactive = 0;
            c.el_slot = None;
            c.vt_slot = None;
            c.cf_slot = None;
            if let Some(r) = c.rsc {
                c.deadline = RuntimeSc::new(&r, 0, 0);
            }
            if let Some(f) = c.fsc {
                c.virt = RuntimeSc::new(&f, 0, 0);
            }
            if let Some(u) = c.usc {
                c.ulimit = RuntimeSc::new(&u, 0, 0);
            }
        }
        self.eligible.v.clear();
        for t in self.vt_tree.iter_mut().chain(self.cf_tree.iter_mut()) {
            t.v.clear();
        }
        self.stats.backlog_bytes = 0;
        self.stats.qlen = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        s.drops = self.own_drops;
        for c in self.classes.iter().filter(|c| c.alive) {
            let ch = c.child.stats();
            s.drops += ch.drops + c.old_drops;
        }
        s
    }

    fn qlen(&self) -> u64 {
        self.stats.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.stats.backlog_bytes
    }

    /// Every class, the root class (`major:`, minor 0) first; only a leaf reports its qdisc, as
    /// `hfsc_leaf` does.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        for c in self.classes.iter().filter(|c| c.alive) {
            let stats = self.class_stats(c.id).map(|s| s.stats);
            let child = (c.level == 0).then_some(c.child.as_ref());
            f(ClassView { minor: c.id.minor(), stats, child });
        }
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        while let Some(&i) = self.touched.last() {
            if let Some(d) = self.classes[i].child.take_dropped() {
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                if self.classes[i].child.qlen() == 0 {
                    self.qlen_notify(i);
                }
                return Some(d);
            }
            self.classes[i].touched = false;
            self.touched.pop();
        }
        None
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        if self.requeued.is_some() {
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        self.stats.requeues += 1;
        self.stats.bytes = self.stats.bytes.saturating_sub(pkt.len as u64);
        self.stats.packets = self.stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        self.stats.on_enqueue(&pkt);
        self.requeued = Some(pkt);
        Ok(())
    }
}
