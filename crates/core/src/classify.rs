//! The classification stage: which class of each classful qdisc a packet goes to.
//!
//! The [`Classifier`] holds the filters of every parent (qdisc `X:` or class `X:Y`) and the shape
//! of the classful qdiscs ([`QdiscShape`]: their classes, which are inner classes, which leaves
//! have a classful child qdisc, and the fallback when no filter decides). [`Classifier::classify`]
//! walks from the root qdisc the way the kernel's `htb_classify`/`prio_classify` do:
//!
//! 1. At a qdisc, run its filters. For an HTB-like qdisc, a result naming an inner class continues
//!    with that class's filters; a leaf ends the search; `X:0` (the qdisc itself) means HTB's
//!    direct queue; an unknown class or no match falls back (HTB's `default`). `skb->priority`
//!    naming the qdisc or one of its classes selects it first, as in HTB.
//! 2. A class chosen by a filter (or by `skb->priority`) is recorded with [`Packet::push_class`],
//!    so each qdisc finds its own result with [`Packet::class_for`] on enqueue. A fallback is not
//!    recorded: the qdisc applies its own (HTB's `default`, prio's priomap with its TOS-derived
//!    priority), and the walk only follows the declared [`Fallback`] to reach child qdiscs.
//! 3. If the chosen leaf has a classful child qdisc (say `prio 10:` under HTB class `1:10`), the
//!    walk continues there.
//!
//! A `drop` verdict (e.g. a policer's exceed action) gives [`ClassifyOutcome::Drop`]; the caller
//! counts and frees the packet. Nothing here allocates per packet.

use crate::filter::{
    ClassifyInput, FilterError, FilterList, FilterSpec, MirredTarget, Mirrors, TcfOutcome, Upsert,
};
use crate::flow_keys::FlowKeys;
use crate::handle::Handle;
use crate::netem::Duplicates;
use crate::packet::{Packet, MAX_CLASS_PATH};
use crate::time::Time;

type Map<K, V> = crate::sched::FastMap<K, V>;

/// How a classful qdisc interprets filter results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeKind {
    /// HTB (and DRR/HFSC-like): results are full class ids; inner classes have their own filters;
    /// `X:0` is the direct queue; `skb->priority` naming a class selects it.
    Htb,
    /// prio-like: only the result's minor number counts (band = minor - 1); `skb->priority` whose
    /// major is the qdisc's selects the band by its minor.
    Bands,
}

/// One class of a classful qdisc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassShape {
    /// Its id.
    pub classid: Handle,
    /// True for an inner class (has child classes; the search continues with its filters).
    pub inner: bool,
    /// The classful qdisc attached to this leaf, if any (the walk continues there).
    pub child: Option<Handle>,
}

/// What a qdisc does when no filter decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// This class (for HTB: the `default` class if it is a leaf, else `X:0`, the direct queue).
    Class(Handle),
    /// prio's priomap: band class by `skb->priority & 15` (when the priority has no major).
    Priomap([Handle; 16]),
}

/// What the classifier needs to know about one classful qdisc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QdiscShape {
    /// The qdisc's handle (`X:0`).
    pub handle: Handle,
    /// How it reads results.
    pub kind: ShapeKind,
    /// Its classes.
    pub classes: Vec<ClassShape>,
    /// When no filter decides.
    pub fallback: Fallback,
}

#[derive(Clone, Debug)]
struct ShapeIndex {
    shape: QdiscShape,
    by_id: Map<Handle, usize>,
    by_minor: Map<u32, usize>,
}

/// The outcome of classifying a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassifyOutcome {
    /// Enqueue: the results are in the packet's class path (possibly empty: every qdisc then uses
    /// its own fallback).
    Enqueue,
    /// A filter or action dropped the packet.
    Drop,
    /// A mirred action took the packet for another device: the caller hands it over.
    Redirect(MirredTarget),
}

enum Step {
    /// A decision of the filters (or of `skb->priority`): recorded in the packet.
    Class(Handle),
    /// The qdisc's own fallback: not recorded (the qdisc applies it itself, with any extra
    /// knowledge it has, such as prio's TOS-derived priority), only followed down the tree.
    Fallback(Handle),
    /// Record the first, follow the second (a prio result naming no band).
    Recorded(Handle, Handle),
    NoResult,
    Drop,
    /// A mirred redirect took the packet.
    Redirect(MirredTarget),
}

/// Filters of every parent plus the tree shape; see the module docs.
#[derive(Clone, Debug, Default)]
pub struct Classifier {
    root: Option<Handle>,
    lists: Map<Handle, FilterList>,
    shapes: Map<u16, ShapeIndex>,
    /// The copies mirred actions asked for during the last [`Classifier::classify`].
    mirrors: Mirrors,
    /// The outbox of the tree's duplicating netems (shared with them; a clone shares it too).
    duplicates: Option<Duplicates>,
}

/// Deepest qdisc nesting the walk follows.
const MAX_LEVELS: usize = 16;

impl Classifier {
    /// An empty classifier.
    pub fn new() -> Classifier {
        Classifier::default()
    }

    /// Sets the root qdisc (the one `parent root` means), or none.
    pub fn set_root(&mut self, root: Option<Handle>) {
        self.root = root;
    }

    /// The root qdisc.
    pub fn root(&self) -> Option<Handle> {
        self.root
    }

    /// The tree's outbox for netem duplicates, created on first use (the builder hands it to
    /// each duplicating netem; the engine takes the copies out and enqueues them at the root).
    pub fn duplicates_outbox(&mut self) -> Duplicates {
        self.duplicates.get_or_insert_with(Duplicates::new).clone()
    }

    /// The outbox, if a netem of the tree duplicates.
    pub fn duplicates(&self) -> Option<&Duplicates> {
        self.duplicates.as_ref()
    }

    /// The copies mirred actions asked for during the last [`Classifier::classify`].
    pub fn mirrors(&self) -> &Mirrors {
        &self.mirrors
    }

    /// Declares or updates the shape of a classful qdisc.
    pub fn set_shape(&mut self, shape: QdiscShape) -> Result<(), FilterError> {
        if shape.handle.minor() != 0 || shape.handle.is_unspec() {
            return Err(FilterError::invalid(
                "classifier",
                "handle",
                format!("{}: a qdisc handle is X:0", shape.handle),
            ));
        }
        let mut by_id = Map::default();
        let mut by_minor = Map::default();
        for (i, c) in shape.classes.iter().enumerate() {
            if c.classid.major() != shape.handle.major() || c.classid.minor() == 0 {
                return Err(FilterError::invalid(
                    "classifier",
                    "classid",
                    format!("{} is not a class of {}", c.classid, shape.handle),
                ));
            }
            by_id.insert(c.classid, i);
            by_minor.insert(c.classid.minor(), i);
        }
        self.shapes.insert(shape.handle.major(), ShapeIndex { shape, by_id, by_minor });
        Ok(())
    }

    /// The declared shape of qdisc `major:`.
    pub fn shape(&self, major: u16) -> Option<&QdiscShape> {
        self.shapes.get(&major).map(|s| &s.shape)
    }

    /// Forgets a qdisc: its shape and the filters of it and its classes.
    pub fn remove_qdisc(&mut self, handle: Handle) {
        self.shapes.remove(&handle.major());
        self.lists.retain(|p, _| p.major() != handle.major());
        if self.root == Some(handle.qdisc()) {
            self.root = None;
        }
    }

    fn resolve(&self, parent: Handle) -> Result<Handle, FilterError> {
        match parent {
            Handle::ROOT => self.root.ok_or_else(|| FilterError::NotFound("no root qdisc".into())),
            Handle::UNSPEC => Err(FilterError::invalid("filter", "parent", "a parent is required")),
            p => Ok(p),
        }
    }

    /// `tc filter add|replace|change dev D parent P ...`. Returns `(pref, handle)`.
    pub fn add_filter(
        &mut self,
        parent: Handle,
        spec: FilterSpec,
        mode: Upsert,
    ) -> Result<(u16, u32), FilterError> {
        let parent = self.resolve(parent)?;
        let list = self.lists.entry(parent).or_default();
        let r = list.apply(spec, mode, parent.major());
        if list.is_empty() {
            self.lists.remove(&parent);
        }
        r
    }

    /// `tc filter del dev D parent P [chain C] pref N [handle H]`; with no pref, every filter.
    pub fn delete_filter(
        &mut self,
        parent: Handle,
        chain: u32,
        pref: Option<u16>,
        handle: Option<u32>,
    ) -> Result<(), FilterError> {
        let parent = self.resolve(parent)?;
        let list = self
            .lists
            .get_mut(&parent)
            .ok_or_else(|| FilterError::NotFound(format!("no filters on {parent}")))?;
        match pref {
            Some(p) => list.delete(chain, p, handle)?,
            None => list.flush(),
        }
        if list.is_empty() {
            self.lists.remove(&parent);
        }
        Ok(())
    }

    /// The filters of one parent (`tc filter show dev D parent P`).
    pub fn filters(&self, parent: Handle) -> Option<&FilterList> {
        let parent = self.resolve(parent).ok()?;
        self.lists.get(&parent)
    }

    /// Every parent with filters, sorted by handle.
    pub fn parents(&self) -> Vec<Handle> {
        let mut v: Vec<Handle> = self.lists.keys().copied().collect();
        v.sort();
        v
    }

    /// True if a filter names `class` as its result (tc refuses to delete such a class).
    pub fn references_class(&self, class: Handle) -> bool {
        self.lists.values().any(|l| l.references_class(class))
    }

    /// Runs the filters of one parent only (e.g. `ingress`, `ffff:`), without walking the tree.
    pub fn classify_at(
        &mut self,
        parent: Handle,
        pkt: &Packet,
        keys: &FlowKeys,
        frame: &[u8],
        now: Time,
    ) -> TcfOutcome {
        let Ok(parent) = self.resolve(parent) else {
            return TcfOutcome::NoMatch;
        };
        let input = ClassifyInput::new(pkt, keys, frame);
        match self.lists.get_mut(&parent) {
            Some(l) => l.classify(&input, now),
            None => TcfOutcome::NoMatch,
        }
    }

    /// Classifies a packet from the root qdisc down, recording one result per classful qdisc in
    /// `pkt.class_path` (cleared first).
    pub fn classify(
        &mut self,
        pkt: &mut Packet,
        keys: &FlowKeys,
        frame: &[u8],
        now: Time,
    ) -> ClassifyOutcome {
        pkt.class_path = [Handle::UNSPEC; MAX_CLASS_PATH];
        self.mirrors = Mirrors::default();
        let Some(mut q) = self.root else {
            return ClassifyOutcome::Enqueue;
        };
        for _ in 0..MAX_LEVELS {
            let (step, meta) = {
                let input = ClassifyInput::new(pkt, keys, frame);
                (self.classify_qdisc(q, &input, now), input.meta.get())
            };
            // What skbedit wrote is what the next qdisc down (and fw there) sees.
            pkt.mark = meta.mark;
            pkt.priority = meta.priority;
            if !meta.mirrors.is_empty() {
                self.mirrors.extend(&meta.mirrors);
            }
            let class = match step {
                Step::Drop => return ClassifyOutcome::Drop,
                Step::Redirect(t) => return ClassifyOutcome::Redirect(t),
                Step::NoResult => return ClassifyOutcome::Enqueue,
                Step::Class(c) => {
                    pkt.push_class(c);
                    c
                }
                Step::Fallback(c) => c,
                Step::Recorded(r, c) => {
                    pkt.push_class(r);
                    c
                }
            };
            let child = self
                .shapes
                .get(&q.major())
                .and_then(|s| s.by_id.get(&class).map(|i| s.shape.classes[*i]))
                .and_then(|c| c.child);
            match child {
                Some(next) if class != q && next.major() != q.major() => q = next,
                _ => return ClassifyOutcome::Enqueue,
            }
        }
        ClassifyOutcome::Enqueue
    }

    /// One qdisc's decision.
    fn classify_qdisc(&mut self, q: Handle, input: &ClassifyInput<'_>, now: Time) -> Step {
        let Some(si) = self.shapes.get(&q.major()) else {
            // Unknown shape: report the raw result and let the qdisc interpret it.
            return match self.lists.get_mut(&q).map(|l| l.classify(input, now)) {
                Some(TcfOutcome::Classified(r)) if !r.classid.is_unspec() => Step::Class(r.classid),
                Some(TcfOutcome::Drop) => Step::Drop,
                Some(TcfOutcome::Redirect(t)) => Step::Redirect(t),
                _ => Step::NoResult,
            };
        };
        // `skb->priority` is a 32-bit tc handle.
        let prio = Handle::from_tc(input.priority());
        match si.shape.kind {
            ShapeKind::Htb => {
                let mut start = q;
                if prio == q {
                    return Step::Class(q);
                }
                if let Some(&i) = si.by_id.get(&prio) {
                    let c = si.shape.classes[i];
                    if !c.inner {
                        return Step::Class(c.classid);
                    }
                    start = c.classid;
                }
                // Each step goes one level down the class tree, so this terminates; the bound
                // guards against a malformed shape that claims a cycle.
                for _ in 0..=si.shape.classes.len() {
                    let Some(list) = self.lists.get_mut(&start) else {
                        break;
                    };
                    match list.classify(input, now) {
                        TcfOutcome::Drop => return Step::Drop,
                        TcfOutcome::Redirect(t) => return Step::Redirect(t),
                        TcfOutcome::NoMatch => break,
                        TcfOutcome::Classified(r) => {
                            if r.classid == q {
                                return Step::Class(q);
                            }
                            let Some(&i) = si.by_id.get(&r.classid) else {
                                break;
                            };
                            let c = si.shape.classes[i];
                            if !c.inner {
                                return Step::Class(c.classid);
                            }
                            start = c.classid;
                        }
                    }
                }
                Step::Fallback(fallback(&si.shape, prio))
            }
            ShapeKind::Bands => {
                let minor = if prio.major() == q.major() {
                    prio.minor()
                } else {
                    match self.lists.get_mut(&q).map(|l| l.classify(input, now)) {
                        Some(TcfOutcome::Drop) => return Step::Drop,
                        Some(TcfOutcome::Redirect(t)) => return Step::Redirect(t),
                        Some(TcfOutcome::Classified(r)) => r.classid.minor(),
                        _ => return Step::Fallback(fallback(&si.shape, prio)),
                    }
                };
                // The band is the minor only (the major of a filter's result does not matter to
                // prio); record it under this qdisc's major so that prio finds it.
                match si.by_minor.get(&minor) {
                    Some(&i) => Step::Class(si.shape.classes[i].classid),
                    // Out of range: prio itself maps it to priomap[0]; follow that band.
                    None => {
                        Step::Recorded(Handle::new(q.major(), minor), fallback(&si.shape, Handle::UNSPEC))
                    }
                }
            }
        }
    }
}

fn fallback(shape: &QdiscShape, prio: Handle) -> Handle {
    match shape.fallback {
        Fallback::Class(c) => c,
        Fallback::Priomap(map) => {
            let i = if prio.major() != 0 { 0 } else { (prio.minor() & 15) as usize };
            map[i]
        }
    }
}
