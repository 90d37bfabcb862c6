//! From the model to live core objects: a root `Box<dyn Qdisc>` per device and the
//! [`Classifier`] holding its filters and tree shape, ready for the simulator or the live shaper.
//!
//! Implemented with what sluice-core provides today: pfifo/bfifo/pfifo_head_drop, pfifo_fast,
//! prio (with band children), tbf (with its child), netem (with its child), codel, fq_codel;
//! filters u32, flow, fw, matchall with gact and police actions, htb (any leaf qdiscs), sfq, drr,
//! red (with its child). The `basic` filter is reported as unsupported.

use crate::model::*;
use sluice_core::classify::Classifier;
use sluice_core::codel::CodelParams;
use sluice_core::filter::action::Actions;
use sluice_core::filter::{FilterList, FilterSpec, Protocol, Upsert};
use sluice_core::rate::LinkLayer as CoreLinkLayer;
use sluice_core::{Handle, Qdisc, Span, WireSpec};

/// Why a configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The core lacks this object.
    #[error("{0} is not available in sluice-core yet")]
    Unsupported(String),
    /// Qdiscs nested deeper than [`MAX_QDISC_DEPTH`].
    #[error(
        "{0}: qdiscs are nested more than {MAX_QDISC_DEPTH} deep; Sluice builds at most that many levels"
    )]
    TooDeep(String),
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
    if dev.qdisc_depth(MAX_QDISC_DEPTH + 1) > MAX_QDISC_DEPTH {
        return Err(BuildError::TooDeep(dev_name.into()));
    }
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

fn actions(a: &[Action], devices: &[Device]) -> Result<Actions, BuildError> {
    let mut v = Vec::new();
    for x in a {
        v.push(x.build(devices).expect("every action kind is in the registry")?);
    }
    Ok(Actions::new(v))
}

fn filter_spec(f: &FilterNode, devices: &[Device]) -> Result<Option<FilterSpec>, BuildError> {
    let acts = actions(&f.actions, devices)?;
    let Some(config) = f.opts.build(f, acts)? else { return Ok(None) };
    Ok(Some(FilterSpec {
        chain: f.chain,
        pref: Some(f.prio),
        protocol: Protocol(f.protocol),
        handle: Some(f.handle),
        config,
    }))
}

/// The classifier's shape of a tree with a `default` class (HTB, HFSC): its classes, and the
/// `default` class as the fallback when it exists and is a leaf, else the qdisc itself (the
/// direct queue, or HFSC's drop).
pub(crate) fn set_default_class_shape(
    cx: &mut crate::kinds::BuildCx<'_>,
    q: &QdiscNode,
    default: u32,
    classes: Vec<sluice_core::classify::ClassShape>,
) -> Result<(), BuildError> {
    use sluice_core::classify::{Fallback, QdiscShape, ShapeKind};
    let dev = cx.dev;
    let def = Handle::new(q.handle.major(), default);
    let fallback = if default != 0 && dev.class(def).is_some() && dev.child_classes(def).next().is_none() {
        def
    } else {
        q.handle
    };
    cx.cls
        .set_shape(QdiscShape {
            handle: q.handle,
            kind: ShapeKind::Htb,
            classes,
            fallback: Fallback::Class(fallback),
        })
        .map_err(BuildError::Filter)
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
    q.opts.build(q, &mut crate::kinds::BuildCx { dev, cls, seed })
}

/// FNV-1a: a hash that stays the same across runs and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}
