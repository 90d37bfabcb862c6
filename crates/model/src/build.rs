//! From the model to live core objects: a root `Box<dyn Qdisc>` per device and the
//! [`Classifier`] holding its filters and tree shape, ready for the simulator or the live shaper.
//!
//! Implemented with what sluice-core provides today: pfifo/bfifo/pfifo_head_drop, pfifo_fast,
//! prio (with band children), tbf (with its child), netem (with its child), codel, fq_codel;
//! filters u32, flow, fw, matchall with gact and police actions, htb (any leaf qdiscs), sfq, drr,
//! red (with its child). The `basic` filter is reported as unsupported.

use crate::model::*;
use sluice_core::classify::{ClassShape, Classifier, Fallback, QdiscShape, ShapeKind};
use sluice_core::codel::{Codel, CodelConfig, CodelParams};
use sluice_core::ets::{Ets, EtsConfig};
use sluice_core::filter::action::{
    Action as CoreAction, Actions, GactRandom, Skbedit, Verdict as CoreVerdict,
};
use sluice_core::filter::flow::{FlowConfig, FlowMode};
use sluice_core::filter::fw::FwConfig;
use sluice_core::filter::matchall::MatchallConfig;
use sluice_core::filter::police::{Police, PoliceConfig};
use sluice_core::filter::u32::{HashKey, U32Config, U32Key as CoreKey, U32Offset, U32Selector, VarOffset};
use sluice_core::filter::BasicConfig;
use sluice_core::filter::{FilterConfig, FilterList, FilterSpec, MirredTarget, Protocol, Upsert};
use sluice_core::prio::{PfifoFast, PfifoFastConfig, Prio, PrioConfig};
use sluice_core::rate::LinkLayer as CoreLinkLayer;
use sluice_core::red::Red;
use sluice_core::sfq::{Sfq, SfqConfig, SfqRed as CoreSfqRed};
use sluice_core::{Handle, Qdisc, Rate, Span, WireSpec};

/// Why a configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The core lacks this object.
    #[error("{0} is not available in sluice-core yet")]
    Unsupported(String),
    /// The core rejected the configuration.
    #[error("{0}")]
    Config(#[from] sluice_core::ConfigError),
    /// The core rejected a filter.
    #[error("filter: {0}")]
    Filter(#[from] sluice_core::filter::FilterError),
    /// No such device, or no root qdisc on it.
    #[error("{0}")]
    Missing(String),
}

/// The live objects for one device.
pub struct Built {
    /// The root (egress) qdisc.
    pub root: Box<dyn Qdisc>,
    /// Filters and tree shape.
    pub classifier: Classifier,
}

pub(crate) fn wire(overhead: i32, mpu: u32, ll: LinkLayer) -> WireSpec {
    WireSpec {
        overhead,
        mpu,
        linklayer: match ll {
            LinkLayer::Ethernet => CoreLinkLayer::Ethernet,
            LinkLayer::Atm => CoreLinkLayer::Atm,
        },
    }
}

fn us(v: u32) -> Span {
    Span::from_micros(v as u64)
}

/// Builds the egress tree of `dev_name` with random sources (netem) seeded from 0.
pub fn build_device(state: &State, dev_name: &str) -> Result<Built, BuildError> {
    build_device_seeded(state, dev_name, 0)
}

/// Builds the egress tree of `dev_name`; every qdisc that draws random numbers (netem) gets a
/// stream of its own derived from `seed`, its device and its handle, so a run repeats under
/// the same seed.
pub fn build_device_seeded(state: &State, dev_name: &str, seed: u64) -> Result<Built, BuildError> {
    let dev = state
        .devices
        .iter()
        .find(|d| d.name == dev_name)
        .ok_or_else(|| BuildError::Missing(format!("no device {dev_name}")))?;
    let root = dev.root().ok_or_else(|| BuildError::Missing(format!("{dev_name} has no root qdisc")))?;
    let mut classifier = Classifier::new();
    classifier.set_root(Some(root.handle));
    let seed = seed ^ fnv1a(dev_name.as_bytes());
    let q = build_qdisc(dev, root, &mut classifier, seed)?;
    for f in &dev.filters {
        if f.parent == H_MIN_INGRESS || f.parent == H_MIN_EGRESS {
            continue;
        }
        if let Some(spec) = filter_spec(f, &state.devices)? {
            classifier.add_filter(f.parent, spec, Upsert::Replace)?;
        }
    }
    Ok(Built { root: q, classifier })
}

/// The filters on one hook of `dev_name`'s ingress or clsact qdisc (`block`: [`H_MIN_INGRESS`] or
/// [`H_MIN_EGRESS`]), run on their own as the kernel runs them (`tcf_classify` on the block, no
/// qdisc behind it); `None` when the hook has no filter. A mirred target is the device's index in
/// `state.devices`.
pub fn build_hook(state: &State, dev_name: &str, block: Handle) -> Result<Option<FilterList>, BuildError> {
    let dev = state
        .devices
        .iter()
        .find(|d| d.name == dev_name)
        .ok_or_else(|| BuildError::Missing(format!("no device {dev_name}")))?;
    if !dev.filters.iter().any(|f| f.parent == block) {
        return Ok(None);
    }
    let mut list = FilterList::new();
    for f in dev.filters.iter().filter(|f| f.parent == block) {
        if let Some(spec) = filter_spec(f, &state.devices)? {
            list.apply(spec, Upsert::Replace, 0xFFFF)?;
        }
    }
    Ok(Some(list))
}

fn verdict(v: Verdict) -> Result<CoreVerdict, BuildError> {
    Ok(match v {
        Verdict::Pass => CoreVerdict::Ok,
        Verdict::Drop => CoreVerdict::Drop,
        Verdict::Continue => CoreVerdict::Continue,
        Verdict::Reclassify => CoreVerdict::Reclassify,
        Verdict::Pipe => CoreVerdict::Pipe,
        // In software a trap is a drop (`TC_ACT_TRAP` only means something to hardware).
        Verdict::Trap => CoreVerdict::Drop,
        Verdict::Goto(n) => CoreVerdict::GotoChain(n),
        Verdict::Jump(n) => CoreVerdict::Jump(n),
        // Only a mirred redirect returns it, as its own verdict.
        Verdict::Stolen => {
            return Err(BuildError::Unsupported("a `stolen` verdict outside a mirred redirect".into()))
        }
    })
}

fn actions(a: &[Action], devices: &[Device]) -> Result<Actions, BuildError> {
    let mut v = Vec::new();
    for x in a {
        v.push(match x {
            Action::Gact { verdict: g, random: None, .. } => CoreAction::Gact(verdict(*g)?),
            Action::Gact { verdict: g, random: Some(r), index } => CoreAction::GactRandom(GactRandom::new(
                verdict(*g)?,
                verdict(r.verdict)?,
                r.determ,
                r.val,
                *index as u64,
            )),
            Action::Skbedit(k) => CoreAction::Skbedit(Skbedit {
                priority: k.priority.and_then(|p| p.to_tc()),
                mark: k.mark,
                mask: k.mask.unwrap_or(u32::MAX),
                verdict: verdict(k.verdict)?,
            }),
            Action::Police(p) if p.avrate.is_some() || p.pkts_rate.is_some() => {
                return Err(BuildError::Unsupported(
                    "police avrate and pkts_rate (the core polices bytes with a token bucket)".into(),
                ))
            }
            Action::Police(p) => CoreAction::Police(Police::new(PoliceConfig {
                rate: (p.rate > 0).then(|| Rate::from_bps(p.rate)),
                burst: p.burst as u64,
                // Without a rate and an mtu the kernel's policer lets every packet conform.
                mtu: p.mtu.unwrap_or(if p.rate > 0 {
                    sluice_core::filter::police::DEFAULT_MTU
                } else {
                    u32::MAX
                }),
                peakrate: p.peakrate.map(Rate::from_bps),
                wire: wire(p.overhead as i32, p.mpu, p.linklayer),
                exceed: verdict(p.exceed)?,
                conform: verdict(p.conform)?,
            })?),
            Action::Mirred(m) => mirred(m, devices)?,
        });
    }
    Ok(Actions::new(v))
}

/// A mirred action: a redirect that steals the packet moves it; a mirror, or a redirect with
/// another verdict, sends a copy and lets the original go on with the verdict (the kernel's
/// `tcf_mirred_act` clones unless it may steal; a mirror that steals is a redirect).
fn mirred(m: &MirredOpts, devices: &[Device]) -> Result<CoreAction, BuildError> {
    let dev = devices.iter().position(|d| d.name == m.dev).and_then(|i| u16::try_from(i).ok()).ok_or_else(
        || BuildError::Missing(format!("mirred target {} is not a device of this configuration", m.dev)),
    )?;
    let target = MirredTarget { dev, ingress: m.direction == MirredDirection::Ingress };
    Ok(match m.verdict {
        Verdict::Stolen => CoreAction::Redirect(target),
        v => CoreAction::Mirror(target, verdict(v)?),
    })
}

fn filter_spec(f: &FilterNode, devices: &[Device]) -> Result<Option<FilterSpec>, BuildError> {
    let acts = actions(&f.actions, devices)?;
    let (config, handle) = match &f.opts {
        // The root table of each priority is created by the core itself.
        FilterOpts::U32Table { .. } if f.handle >> 20 >= 0x800 => return Ok(None),
        FilterOpts::U32Table { divisor } => (
            FilterConfig::U32(U32Config {
                ht: None,
                order: None,
                divisor: Some(*divisor),
                sel: U32Selector::default(),
                link: None,
                classid: None,
                actions: acts,
                indev: None,
                mark: None,
            }),
            Some(f.handle),
        ),
        FilterOpts::U32(u) => (
            FilterConfig::U32(U32Config {
                ht: Some(f.handle & 0xFFFF_F000),
                order: Some(f.handle & 0xFFF),
                divisor: None,
                sel: U32Selector {
                    keys: u
                        .keys
                        .iter()
                        .map(|k| CoreKey { val: k.val, mask: k.mask, off: k.off, nexthdr: k.nexthdr })
                        .collect(),
                    offset: u.offset.map(|o| U32Offset {
                        plus: o.plus,
                        var: o.var.then_some(VarOffset { at: o.at, mask: o.mask, shift: o.shift }),
                        eat: o.eat,
                    }),
                    hashkey: u.hashkey.map(|(mask, at)| HashKey { mask, at }),
                },
                link: u.link,
                classid: u.classid,
                actions: acts,
                indev: None,
                mark: None,
            }),
            Some(f.handle),
        ),
        FilterOpts::Flow(x) => (
            FilterConfig::Flow(FlowConfig {
                mode: if x.hash { FlowMode::Hash } else { FlowMode::Map },
                keys: x.keys,
                and: x.mask,
                xor: x.xor,
                rshift: x.rshift.unwrap_or(0).min(31) as u8,
                addend: x.addend.unwrap_or(0),
                divisor: x.divisor.unwrap_or(0),
                baseclass: x.baseclass,
                perturb: x.perturb.filter(|&p| p > 0).map(|p| Span::from_secs(p as u64)),
                actions: acts,
                ..FlowConfig::default()
            }),
            Some(f.handle),
        ),
        FilterOpts::Fw(x) => (
            FilterConfig::Fw(FwConfig { mask: x.mask, classid: x.classid, actions: acts, indev: None }),
            Some(f.handle),
        ),
        FilterOpts::Matchall(m) => {
            (FilterConfig::Matchall(MatchallConfig { classid: m.classid, actions: acts }), Some(f.handle))
        }
        FilterOpts::Basic(b) => (FilterConfig::Basic(basic_config(b, acts)?), Some(f.handle)),
    };
    Ok(Some(FilterSpec {
        chain: f.chain,
        pref: Some(f.prio),
        protocol: Protocol(f.protocol),
        handle,
        config,
    }))
}

/// A basic filter's tree, read back from the model's canonical text; meta ids the engine has no
/// value for are refused.
fn basic_config(
    b: &crate::model::BasicOpts,
    actions: sluice_core::filter::Actions,
) -> Result<BasicConfig, BuildError> {
    let ematch = match &b.ematch {
        Some(t) => crate::kinds::ematch::parse_text(t).map_err(BuildError::Unsupported)?,
        None => Vec::new(),
    };
    if let Some(id) = sluice_core::filter::basic::unsupported(&ematch) {
        return Err(BuildError::Unsupported(format!(
            "the basic filter's meta id {id} (no value in the model)"
        )));
    }
    Ok(BasicConfig { ematch, classid: b.classid, actions })
}

pub(crate) fn codel_params(
    target: Option<u32>,
    interval: Option<u32>,
    ce: Option<u32>,
    ecn: bool,
) -> CodelParams {
    let d = CodelParams::default();
    CodelParams {
        target: target.map(us).unwrap_or(d.target),
        interval: interval.map(us).unwrap_or(d.interval),
        ce_threshold: ce.map(us),
        ecn,
        ..d
    }
}

pub(crate) fn build_qdisc(
    dev: &Device,
    q: &QdiscNode,
    cls: &mut Classifier,
    seed: u64,
) -> Result<Box<dyn Qdisc>, BuildError> {
    if let Some(r) = q.opts.build(q, &mut crate::kinds::BuildCx { dev, cls, seed }) {
        return r;
    }
    let major = q.handle.major();
    Ok(match &q.opts {
        QdiscOpts::PfifoFast => Box::new(PfifoFast::new(PfifoFastConfig {
            txqueuelen: dev.txqueuelen,
            ..PfifoFastConfig::default()
        })),
        QdiscOpts::Prio(p) => {
            let mut map = [0u8; 16];
            map.copy_from_slice(&p.priomap[..16]);
            let mut prio = Prio::new(PrioConfig {
                bands: p.bands as usize,
                priomap: map,
                major,
                ..PrioConfig::default()
            })?;
            let mut classes = Vec::new();
            for b in 0..p.bands {
                let id = Handle::new(q.handle.major(), b + 1);
                let child = dev.qdisc_at(id);
                if let Some(c) = child {
                    prio.set_band_qdisc(b as usize, build_qdisc(dev, c, cls, seed)?)?;
                }
                classes.push(ClassShape {
                    classid: id,
                    inner: false,
                    child: child.filter(|c| c.opts.is_classful()).map(|c| c.handle),
                });
            }
            let mut fb = [Handle::UNSPEC; 16];
            for (i, b) in p.priomap.iter().enumerate().take(16) {
                fb[i] = Handle::new(q.handle.major(), *b as u32 + 1);
            }
            cls.set_shape(QdiscShape {
                handle: q.handle,
                kind: ShapeKind::Bands,
                classes,
                fallback: Fallback::Priomap(fb),
            })
            .map_err(BuildError::Filter)?;
            Box::new(prio)
        }
        QdiscOpts::Codel(c) => Box::new(Codel::new(CodelConfig {
            limit: c.limit.unwrap_or(1000),
            params: codel_params(c.target, c.interval, c.ce_threshold, c.ecn.unwrap_or(false)),
        })?),
        QdiscOpts::Netem(n) => build_netem(dev, q, n, cls, seed)?,
        QdiscOpts::Sfq(x) => {
            let d = SfqConfig::default();
            Box::new(Sfq::new(SfqConfig {
                limit: x.limit.unwrap_or(0),
                quantum: x.quantum.unwrap_or(dev.psched_mtu()),
                depth: x.depth.unwrap_or(d.depth),
                divisor: x.divisor.unwrap_or(d.divisor),
                flows: x.flows.unwrap_or(d.flows),
                perturb: Span::from_secs(x.perturb as u64),
                headdrop: x.headdrop,
                red: x.red.as_ref().map(|r| CoreSfqRed {
                    limit: r.flowlimit as u64,
                    min: r.min,
                    max: r.max,
                    probability: r.probability,
                    ewma: r.ewma,
                    ecn: r.ecn,
                    harddrop: r.harddrop,
                }),
                major,
                ..d
            })?)
        }
        QdiscOpts::Hfsc(h) => build_hfsc(dev, q, h.default, cls, seed)?,
        QdiscOpts::Ets(e) => build_ets(dev, q, e, cls, seed)?,
        QdiscOpts::Red(r) => {
            let mut red = Red::new(sluice_core::red::RedConfig {
                seed: seed ^ (major as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ..crate::kinds::red::core_config(r)
            })?;
            if let Some(c) = dev.qdisc_at(Handle::new(major, 1)) {
                red.set_child(build_qdisc(dev, c, cls, seed)?);
            }
            Box::new(red)
        }
        QdiscOpts::Cake(c) => {
            Box::new(sluice_core::cake::Cake::new(crate::kinds::cake::config(c, dev.psched_mtu()), major))
        }
        // Registry kinds were built above.
        _ => return Err(BuildError::Unsupported(q.opts.kind().into())),
    })
}

/// HFSC: its classes (parents before children), their curves, the grafted qdiscs of leaves,
/// and the classifier's shape (filters on the qdisc and on inner classes; the `default` class when
/// it is a leaf).
fn build_hfsc(
    dev: &Device,
    q: &QdiscNode,
    default: u16,
    cls: &mut Classifier,
    seed: u64,
) -> Result<Box<dyn Qdisc>, BuildError> {
    let mut hfsc = sluice_core::hfsc::Hfsc::new(q.handle, default as u32, dev.txqueuelen);
    let classes: Vec<&ClassNode> = dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
    // Parents first: a class is added once its parent is there (the model keeps creation
    // order, which already is such an order; this also survives a hand-edited state file).
    let mut added = vec![false; classes.len()];
    let mut progress = true;
    while progress {
        progress = false;
        for (i, c) in classes.iter().enumerate() {
            let ready =
                c.parent == q.handle || classes.iter().zip(&added).any(|(p, &a)| a && p.classid == c.parent);
            if added[i] || !ready {
                continue;
            }
            let ClassOpts::Hfsc(o) = &c.opts else { continue };
            hfsc.add_class(c.classid, c.parent, crate::kinds::hfsc::curves(o))?;
            added[i] = true;
            progress = true;
        }
    }
    // With no classes, the root class is the leaf (a qdisc may be grafted on `X:`).
    if dev.child_classes(q.handle).next().is_none() {
        if let Some(l) = dev.qdisc_at(q.handle) {
            hfsc.set_class_qdisc(q.handle, Some(build_qdisc(dev, l, cls, seed)?))?;
        }
    }
    let mut shapes = Vec::new();
    for c in classes.iter().zip(&added).filter(|(_, &a)| a).map(|(c, _)| c) {
        let leaf = dev.child_classes(c.classid).next().is_none();
        let child = dev.qdisc_at(c.classid);
        if let (true, Some(l)) = (leaf, child) {
            hfsc.set_class_qdisc(c.classid, Some(build_qdisc(dev, l, cls, seed)?))?;
        }
        let classful_child = child.filter(|l| leaf && l.opts.is_classful()).map(|l| l.handle);
        shapes.push(ClassShape { classid: c.classid, inner: !leaf, child: classful_child });
    }
    let def = Handle::new(q.handle.major(), default as u32);
    let fallback = if default != 0 && dev.class(def).is_some() && dev.child_classes(def).next().is_none() {
        def
    } else {
        q.handle
    };
    cls.set_shape(QdiscShape {
        handle: q.handle,
        kind: ShapeKind::Htb,
        classes: shapes,
        fallback: Fallback::Class(fallback),
    })
    .map_err(BuildError::Filter)?;
    Ok(Box::new(hfsc))
}

/// ETS: its bands (quanta resolved, default pfifo or the grafted qdisc) and a prio-like shape
/// (band by the result's minor, else the priomap).
fn build_ets(
    dev: &Device,
    q: &QdiscNode,
    e: &EtsOpts,
    cls: &mut Classifier,
    seed: u64,
) -> Result<Box<dyn Qdisc>, BuildError> {
    let major = q.handle.major();
    let priomap = crate::kinds::ets::priomap(e);
    let mut ets = Ets::new(EtsConfig {
        nbands: e.bands as usize,
        nstrict: e.strict as usize,
        quanta: crate::kinds::ets::quanta(e, dev.psched_mtu()),
        priomap,
        major,
        tos_mapping: Default::default(),
        default_limit: dev.txqueuelen,
    })?;
    let mut classes = Vec::new();
    for b in 0..e.bands as u32 {
        let id = Handle::new(major, b + 1);
        let child = dev.qdisc_at(id);
        if let Some(c) = child {
            ets.set_band_qdisc(b as usize, Some(build_qdisc(dev, c, cls, seed)?))?;
        }
        let child = child.filter(|c| c.opts.is_classful()).map(|c| c.handle);
        classes.push(ClassShape { classid: id, inner: false, child });
    }
    let fallback = Fallback::Priomap(priomap.map(|b| Handle::new(major, b as u32 + 1)));
    cls.set_shape(QdiscShape { handle: q.handle, kind: ShapeKind::Bands, classes, fallback })
        .map_err(BuildError::Filter)?;
    Ok(Box::new(ets))
}

/// FNV-1a: a hash that stays the same across runs and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}

/// netem, with its child qdisc (any qdisc whose parent is one of its classes).
fn build_netem(
    dev: &Device,
    q: &QdiscNode,
    n: &NetemOpts,
    cls: &mut Classifier,
    seed: u64,
) -> Result<Box<dyn Qdisc>, BuildError> {
    use sluice_core::netem::{LossModel, Netem, NetemConfig, NetemRate, NetemSlot};
    // A duplicate goes to the tree's outbox (the classifier holds it): the engine's owner copies
    // the frame and the engine enqueues the copy at the root. A corrupted packet keeps its
    // payload, marked: the simulator's receiver discards it, the live shaper flips a bit.
    let cor = n.corr.unwrap_or_default();
    let table = |d: &Option<NetemDist>| d.as_ref().map(|d| crate::kinds::netem::dist_table(d).into());
    let loss = match n.loss_model {
        Some(NetemLoss::State { p13, p31, p32, p23, p14 }) => {
            LossModel::FourState { p13, p31, p32, p23, p14 }
        }
        Some(NetemLoss::Gemodel { p, r, h, k1 }) => LossModel::GilbertElliott { p, r, h, k1 },
        None if n.loss != 0 => LossModel::Random { p: n.loss, corr: cor.loss },
        None => LossModel::None,
    };
    let ns = |v: i64| Span::from_nanos(v.max(0) as u64);
    let reorder = n.reorder.unwrap_or_default();
    let corrupt = n.corrupt.unwrap_or_default();
    let mut netem = Netem::new(NetemConfig {
        limit: n.limit,
        latency: Span::from_nanos(n.latency),
        jitter: Span::from_nanos(n.jitter),
        delay_corr: cor.delay,
        delay_dist: table(&n.distribution),
        loss,
        ecn: n.ecn,
        duplicate: n.duplicate,
        dup_corr: cor.duplicate,
        corrupt: corrupt.probability,
        corrupt_corr: corrupt.correlation,
        // sch_netem: a gap without a reorder attribute reorders every gap-th packet.
        reorder: if n.gap != 0 && n.reorder.is_none() { u32::MAX } else { reorder.probability },
        reorder_corr: reorder.correlation,
        gap: n.gap,
        rate: n.rate.filter(|r| r.bytes_per_sec != 0).map(|r| NetemRate {
            bytes_per_sec: r.bytes_per_sec,
            packet_overhead: r.packet_overhead,
            cell_size: r.cell_size,
            cell_overhead: r.cell_overhead,
        }),
        slot: n.slot.filter(|s| s.min_delay != 0 || s.max_delay != 0 || s.dist_jitter != 0).map(|s| {
            NetemSlot {
                min_delay: ns(s.min_delay),
                max_delay: ns(s.max_delay),
                dist_delay: ns(s.dist_delay),
                dist_jitter: ns(s.dist_jitter),
                dist: table(&n.slot_distribution),
                max_packets: s.max_packets.max(0) as u32,
                max_bytes: s.max_bytes.max(0) as u32,
            }
        }),
        seed: seed
            ^ ((q.handle.major() as u64) << 32 | q.handle.minor() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    })?;
    if n.duplicate != 0 {
        netem.set_duplicates(cls.duplicates_outbox());
    }
    if let Some(c) = dev
        .qdiscs
        .iter()
        .find(|c| c.parent != H_ROOT && c.parent != H_INGRESS && c.parent.qdisc() == q.handle)
    {
        netem.set_child(build_qdisc(dev, c, cls, seed)?);
    }
    Ok(Box::new(netem))
}
