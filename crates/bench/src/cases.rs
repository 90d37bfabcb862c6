//! The benchmark cases: HTB trees (normal and throttled), fq_codel, and the full per-frame path.

use crate::driver::{summarize, Driver, Traffic};
use crate::mem;
use crate::tree::{Scheduler, TreeSpec};
use sluice_core::classify::{ClassShape, Classifier, Fallback, QdiscShape, ShapeKind};
use sluice_core::filter::u32::{U32Config, U32Selector};
use sluice_core::filter::{FilterConfig, FilterSpec, Upsert};
use sluice_core::fq_codel::{FqCodel, FqCodelConfig};
use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::{Handle, Packet, Rate, Span, Time};
use sluice_engine::{Engine, Program};
use sluice_wire::FrameSpec;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

/// One row of results (the JSON schema of `sluice bench --json`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BenchResult {
    /// "sluice" or "reference".
    pub scheduler: Scheduler,
    /// Case name: "htb", "htb-throttled" (with "-nested" for one qdisc per site), "fq_codel",
    /// "full-path".
    pub case: String,
    /// Leaf classes (HTB), flow buckets (fq_codel) or leaf classes on the full path.
    pub classes: usize,
    /// Percentage of classes (or flows) kept backlogged.
    pub active_pct: u32,
    /// Median of the per-batch average ns per packet.
    #[serde(deserialize_with = "nan_if_null")]
    pub ns_per_pkt_p50: f64,
    /// 99th percentile of the per-batch average ns per packet.
    #[serde(deserialize_with = "nan_if_null")]
    pub ns_per_pkt_p99: f64,
    /// Packets per second over all batches, in millions.
    #[serde(deserialize_with = "nan_if_null")]
    pub mpps: f64,
    /// Heap bytes per class after building the idle tree (None without the counting allocator).
    pub bytes_per_class: Option<f64>,
    /// Packets timed.
    pub packets: usize,
    /// Remarks (reduced packet counts, skipped runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// serde_json writes NaN (a skipped run) as null; read it back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// How much to measure.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    /// Packets per timed batch (Sluice).
    pub batch: usize,
    /// Timed batches.
    pub batches: usize,
    /// Largest class count the reference runs at.
    pub reference_max_classes: usize,
}

impl Effort {
    /// A run of a few seconds per case.
    pub const FULL: Effort = Effort { batch: 1024, batches: 300, reference_max_classes: 100_000 };
    /// A run of well under a second per case.
    pub const QUICK: Effort = Effort { batch: 1024, batches: 40, reference_max_classes: 100_000 };
}

/// Heap bytes per class of an idle tree, measured with the counting allocator.
pub fn bytes_per_class(spec: &TreeSpec, which: Scheduler) -> Option<f64> {
    let before = mem::live_bytes()?;
    let q = spec.build(which).ok()?;
    let after = mem::live_bytes()?;
    drop(black_box(q));
    Some((after - before) as f64 / spec.leaves as f64)
}

/// Name of an HTB case.
pub fn htb_case_name(throttled: bool, nested: bool) -> String {
    format!("htb{}{}", if throttled { "-throttled" } else { "" }, if nested { "-nested" } else { "" })
}

/// An HTB case: `throttled` selects the worst case with nearly every backlogged class waiting,
/// `nested` the layout with one HTB qdisc per site (Sluice only).
pub fn htb_case(
    which: Scheduler,
    leaves: usize,
    active_pct: u32,
    throttled: bool,
    nested: bool,
    effort: Effort,
) -> BenchResult {
    let n_active = (leaves * active_pct as usize / 100).max(1);
    let nested = nested && which == Scheduler::Sluice;
    let spec = TreeSpec::new(leaves, n_active, throttled).with_nested(nested);
    let case = htb_case_name(throttled, nested);
    let bytes = bytes_per_class(&spec, which);
    let mut q = spec.build(which).expect("benchmark tree is valid");
    let active = spec.active_leaves(n_active);
    let pkt_time = spec.link.time_to_send(spec.pkt_len as u64);
    // The reference costs O(classes) per packet: give it fewer packets so a run stays short.
    let (batch, batches, warm, note) = match which {
        Scheduler::Sluice => (effort.batch, effort.batches, (2 * n_active).min(200_000) + effort.batch, None),
        Scheduler::Reference => {
            let batch = (1024 * 1000 / leaves).clamp(16, effort.batch);
            let batches = effort.batches.min(40);
            (batch, batches, batch, Some(format!("reference: {batches} batches of {batch} packets")))
        }
    };
    let packet = |i| spec.packet(i);
    let mut d = Driver::new(q.as_mut(), Traffic { packet: &packet, pkt_time }, &active, 2);
    d.run(warm);
    let samples = d.measure(batches, batch);
    let (p50, p99, mean) = summarize(&samples);
    BenchResult {
        scheduler: which,
        case,
        classes: leaves,
        active_pct,
        ns_per_pkt_p50: p50,
        ns_per_pkt_p99: p99,
        mpps: 1e3 / mean,
        bytes_per_class: bytes,
        packets: samples.len() * batch,
        note,
    }
}

/// A placeholder row for a run that was skipped.
pub fn skipped(which: Scheduler, case: &str, classes: usize, active_pct: u32, why: &str) -> BenchResult {
    BenchResult {
        scheduler: which,
        case: case.to_string(),
        classes,
        active_pct,
        ns_per_pkt_p50: f64::NAN,
        ns_per_pkt_p99: f64::NAN,
        mpps: f64::NAN,
        bytes_per_class: None,
        packets: 0,
        note: Some(why.to_string()),
    }
}

/// fq_codel with `flows` buckets and as many distinct flows, `active_pct` of them backlogged.
pub fn fq_codel_case(flows: usize, active_pct: u32, effort: Effort) -> BenchResult {
    let cfg = FqCodelConfig {
        flows: flows as u32,
        limit: 1 << 22,
        memory_limit: u32::MAX,
        ..FqCodelConfig::default()
    };
    let before = mem::live_bytes();
    let mut q = FqCodel::new(cfg).expect("valid fq_codel config");
    let bytes = before.zip(mem::live_bytes()).map(|(b, a)| (a - b) as f64 / flows as f64);
    let packet = |i: usize| {
        let mut p = Packet::new(1000, i as u64);
        // Fibonacci hashing spreads flow i over the buckets like a real 5-tuple hash would.
        p.flow_hash = (i as u32).wrapping_mul(0x9E37_79B9);
        p.src_host_hash = p.flow_hash;
        p.dst_host_hash = p.flow_hash.rotate_left(7);
        p
    };
    let n_active = (flows * active_pct as usize / 100).max(1);
    let active: Vec<usize> = (0..n_active).map(|k| k * flows / n_active).collect();
    // 10 ns per packet of virtual time keeps every sojourn far below CoDel's 5 ms target, so the
    // loop measures scheduling, not AQM drops.
    let mut d = Driver::new(&mut q, Traffic { packet: &packet, pkt_time: Span::from_nanos(10) }, &active, 2);
    d.run((2 * n_active).min(200_000) + effort.batch);
    let samples = d.measure(effort.batches, effort.batch);
    let (p50, p99, mean) = summarize(&samples);
    BenchResult {
        scheduler: Scheduler::Sluice,
        case: "fq_codel".into(),
        classes: flows,
        active_pct,
        ns_per_pkt_p50: p50,
        ns_per_pkt_p99: p99,
        mpps: 1e3 / mean,
        bytes_per_class: bytes,
        packets: samples.len() * effort.batch,
        note: None,
    }
}

/// The full path of a 64-byte frame through the packet engine (`sluice_engine::Engine`, as the
/// live shaper runs it): parse, classify (u32 on the destination address to one of `classes` HTB
/// leaves), fq_codel by flow hash inside the leaf, HTB enqueue and dequeue, drops handed back.
pub struct FullPath {
    frames: Vec<Vec<u8>>,
    engine: Engine,
    /// HTB leaf classes.
    classes: usize,
    now: Time,
}

impl FullPath {
    /// `classes` leaves (at most 250), each with a u32 filter on its /32 and an fq_codel leaf.
    pub fn new(classes: usize, flows_per_class: usize) -> FullPath {
        let classes = classes.clamp(1, 250);
        let h = |m: u32| Handle::new(1, m);
        let link = Rate::from_bps(100_000_000_000);
        let mut htb = Htb::new(h(0), HtbConfig::default()).expect("valid");
        let class = |r: Rate| HtbClassConfig::new(r).ceil(link).burst(1600).cburst(1600).quantum(1500);
        htb.add_class(h(1), h(0), class(link), Time::ZERO).expect("valid");
        let mut shapes = vec![ClassShape { classid: h(1), inner: true, child: None }];
        let mut classifier = Classifier::new();
        classifier.set_root(Some(h(0)));
        let mut filters = Vec::new();
        for k in 0..classes {
            let id = h(0x10 + k as u32);
            let rate = Rate::from_bps(link.bps() / classes as u64);
            htb.add_class(id, h(1), class(rate), Time::ZERO).expect("valid");
            let fq = FqCodel::new(FqCodelConfig::default()).expect("valid");
            htb.set_leaf_qdisc(id, Box::new(fq)).expect("leaf exists");
            shapes.push(ClassShape { classid: id, inner: false, child: None });
            let mut sel = U32Selector::new();
            sel.ip_dst(Ipv4Addr::new(198, 19, 0, k as u8), 32).expect("valid selector");
            filters.push(FilterConfig::U32(U32Config { sel, classid: Some(id), ..Default::default() }));
        }
        classifier
            .set_shape(QdiscShape {
                handle: h(0),
                kind: ShapeKind::Htb,
                classes: shapes,
                fallback: Fallback::Class(h(0x10)),
            })
            .expect("valid shape");
        for (pref, f) in filters.into_iter().enumerate() {
            classifier
                .add_filter(h(0), FilterSpec::new(1 + pref as u16, f), Upsert::Add)
                .expect("valid filter");
        }
        let mut frames = Vec::new();
        for k in 0..classes {
            for f in 0..flows_per_class {
                let src = IpAddr::V4(Ipv4Addr::new(198, 18, (f >> 8) as u8, f as u8));
                let dst = IpAddr::V4(Ipv4Addr::new(198, 19, 0, k as u8));
                let frame = FrameSpec::udp(src, dst, 10_000 + f as u16, 53, 22).build().expect("valid frame");
                debug_assert_eq!(frame.len(), 64);
                frames.push(frame);
            }
        }
        let engine = Engine::new(Program::from_parts(Box::new(htb), classifier), Time::ZERO);
        FullPath { frames, engine, classes, now: Time::ZERO }
    }

    /// Frames in the traffic mix.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// [`Self::run`] from frame 0 under a name of its own for callgrind's `--toggle-collect`.
    #[inline(never)]
    pub fn callgrind_loop(&mut self, n: usize) -> usize {
        self.run(0, n)
    }

    /// Runs frames `start..start+n` (cyclically) through parse, classify, enqueue and dequeue.
    pub fn run(&mut self, start: usize, n: usize) -> usize {
        let mut sent = 0;
        for k in 0..n {
            let frame = &self.frames[(start + k) % self.frames.len()];
            let _ = self.engine.ingress_frame(black_box(frame), k as u64, self.now);
            while self.engine.take_dropped().is_some() {}
            if let Some(p) = self.engine.dequeue(self.now) {
                black_box(p);
                sent += 1;
            }
            // 64 B at 100 Gbit/s: 5.12 ns.
            self.now += Span::from_nanos(5);
        }
        sent
    }
}

/// The full-path case.
pub fn full_path_case(classes: usize, effort: Effort) -> BenchResult {
    let mut fp = FullPath::new(classes, 16);
    fp.run(0, fp.frames() + effort.batch);
    let mut samples = Vec::new();
    let mut at = 0;
    for _ in 0..effort.batches {
        let t = Instant::now();
        let sent = fp.run(at, effort.batch);
        let el = t.elapsed().as_nanos() as f64;
        at += effort.batch;
        samples.push(el / sent.max(1) as f64);
    }
    let (p50, p99, mean) = summarize(&samples);
    BenchResult {
        scheduler: Scheduler::Sluice,
        case: "full-path".into(),
        classes: fp.classes,
        active_pct: 100,
        ns_per_pkt_p50: p50,
        ns_per_pkt_p99: p99,
        mpps: 1e3 / mean,
        bytes_per_class: None,
        packets: samples.len() * effort.batch,
        note: Some(
            "64-byte UDP frame through the engine: parse + u32 classify + HTB/fq_codel enqueue + dequeue"
                .into(),
        ),
    }
}
