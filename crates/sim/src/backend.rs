//! Where scenarios meet the real qdiscs: link queues from short specs, and the shaper's program
//! (root qdisc and classifier, run by a [`sluice_engine::Engine`]) from the structured form. A tc
//! script shaper is built by `sluice-tc` ([`crate::tcscript`]). This is the one place to wire
//! new core components into the structured form.

use crate::leaves::{first_then_rebuild, leaf_queue, LeafGen, LeafQueue, LeafReport, MAX_LEAVES};
use crate::legacy::LegacyHtbClass;
use crate::model::{ClassSpec, QueueFactory};
use crate::scenario::file::{LeavesFile, ShaperFile};
use crate::scenario::Ctx;
use crate::scenario::ScenarioError;
use crate::shaper::ExactShaper;
use sluice_core::fifo::{Fifo, FifoKind};
use sluice_core::fq_codel::{FqCodel, FqCodelConfig};
use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
use sluice_core::prio::{PfifoFast, PfifoFastConfig};
use sluice_core::reference_htb::{RefClassParams, RefHtb};
use sluice_core::sfq::{PerturbMode, Sfq, SfqConfig};

use sluice_core::classify::Classifier;
use sluice_core::filter::flow::{FlowConfig, FlowKey};
use sluice_core::filter::{FilterConfig, FilterSpec, Protocol, Upsert};
use sluice_core::units::{parse_size, parse_time};
use sluice_core::{ConfigError, Handle, Qdisc, Rate, Span, Time, WireSpec};
use sluice_engine::Program;
use std::sync::Arc;

/// A shared queue builder.
pub(crate) type SharedFactory = Arc<dyn Fn() -> Box<dyn Qdisc> + Send + Sync>;

/// A shared program builder (the shaper of every case of a sweep point).
pub(crate) type SharedProgram = Arc<dyn Fn() -> Program + Send + Sync>;

pub(crate) fn clone_factory(f: &SharedProgram) -> QueueFactory {
    let f = f.clone();
    Box::new(move || f())
}

/// A program of `queue`'s qdiscs with no filters.
fn plain(queue: SharedFactory) -> SharedProgram {
    Arc::new(move || Program::from_parts(queue(), Classifier::new()))
}

/// A queue (link queue or leaf qdisc) from a short tc-like spec:
/// `pfifo [N]`, `bfifo [SIZE]`, `pfifo_head_drop [N]`, `pfifo_fast [legacy]`,
/// `fq_codel [limit N] [flows N] [quantum N] [noecn|ecn] [target T] [interval T] [ISOLATION]`
/// where ISOLATION is a CAKE flow mode (`flows`, `srchost`, `dual-srchost`, `triple-isolate`...),
/// `pie ...` and `fq_pie ...` in tc's words.
pub(crate) fn queue_factory(spec: &str) -> Result<QueueFactory, String> {
    let f = shared_queue(spec)?;
    Ok(crate::model::queue(move || f()))
}

/// The device a link's netem runs as (`tc -s qdisc show dev wan0` after the run).
pub(crate) const LINK_DEV: &str = "wan0";

/// A link's queue: a [`queue_factory`] spec, or `netem OPTIONS` in tc's grammar (a WAN emulator
/// on the link, built from the model like a tc script's netem; its random source is seeded from
/// the run's `seed` and the link's name), then with its configuration.
pub(crate) fn link_queue_factory(
    spec: &str,
    link: &str,
    seed: u64,
) -> Result<(QueueFactory, Option<sluice_tc::model::State>), String> {
    if spec.split_whitespace().next() != Some("netem") {
        return Ok((queue_factory(spec)?, None));
    }
    let dev = LINK_DEV;
    let text = format!("tc qdisc add dev {dev} root handle 1: {spec}\n");
    let state = sluice_tc::script::load_tc_script(&format!("link {link}"), &text, &Default::default())
        .map_err(|e| e.to_string())?
        .state;
    let seed = seed ^ link.bytes().fold(0u64, |h, b| h.rotate_left(5) ^ b as u64);
    let kept = state.clone();
    // The classifier goes with the root: it holds the outbox of netem's duplicates.
    let build = move || {
        sluice_tc::build::build_device_seeded(&state, dev, seed)
            .map(|b| Program::from_parts(b.root, b.classifier))
    };
    build().map_err(|e| e.to_string())?;
    Ok((Box::new(move || build().expect("built once already")), Some(kept)))
}

pub(crate) fn shared_queue(spec: &str) -> Result<SharedFactory, String> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let kind = words.first().copied().unwrap_or("");
    let args = &words[words.len().min(1)..];
    match kind {
        "pfifo" | "pfifo_head_drop" | "bfifo" => {
            if args.len() > 1 {
                return Err(format!("unexpected `{}` in queue `{spec}`", args[1]));
            }
            let arg = args.first().map(|a| a.trim_start_matches("limit"));
            let (k, limit) = match kind {
                "bfifo" => {
                    (FifoKind::Bfifo, arg.map(|a| parse_size(a).map_err(|e| e.to_string())).transpose()?)
                }
                _ => {
                    let n = arg
                        .map(|a| a.parse::<u64>().map_err(|_| format!("`{a}` is not a packet count")))
                        .transpose()?;
                    (if kind == "pfifo" { FifoKind::Pfifo } else { FifoKind::PfifoHeadDrop }, n)
                }
            };
            Fifo::new(k, limit).map_err(|e| e.to_string())?;
            Ok(Arc::new(move || Box::new(Fifo::new(k, limit).expect("validated above")) as Box<dyn Qdisc>))
        }
        "pfifo_fast" => {
            let cfg = match args {
                [] | ["sluice"] => PfifoFastConfig::default(),
                ["legacy"] => PfifoFastConfig::legacy(),
                _ => return Err(format!("pfifo_fast takes only `legacy`, not `{}`", args.join(" "))),
            };
            Ok(Arc::new(move || Box::new(PfifoFast::new(cfg)) as Box<dyn Qdisc>))
        }
        "fq_codel" => {
            let mut cfg = FqCodelConfig::default();
            let mut i = 0;
            while i < args.len() {
                let val =
                    |i: usize| args.get(i + 1).copied().ok_or_else(|| format!("`{}` needs a value", args[i]));
                match args[i] {
                    "limit" => {
                        cfg.limit =
                            val(i)?.trim_end_matches('p').parse().map_err(|_| "bad limit".to_string())?
                    }
                    "flows" => cfg.flows = val(i)?.parse().map_err(|_| "bad flows".to_string())?,
                    "quantum" => cfg.quantum = parse_size(val(i)?).map_err(|e| e.to_string())? as u32,
                    "target" => cfg.params.target = parse_time(val(i)?).map_err(|e| e.to_string())?,
                    "interval" => cfg.params.interval = parse_time(val(i)?).map_err(|e| e.to_string())?,
                    "ecn" => {
                        cfg.params.ecn = true;
                        i -= 1;
                    }
                    "noecn" => {
                        cfg.params.ecn = false;
                        i -= 1;
                    }
                    other => {
                        cfg.isolation =
                            other.parse().map_err(|_| format!("unknown fq_codel option `{other}`"))?;
                        i -= 1;
                    }
                }
                i += 2;
            }
            let cfg = cfg.normalized().map_err(|e| e.to_string())?;
            FqCodel::new(cfg).map_err(|e| e.to_string())?;
            Ok(Arc::new(move || Box::new(FqCodel::new(cfg).expect("validated above")) as Box<dyn Qdisc>))
        }
        "sfq" => {
            let mut cfg = SfqConfig::default();
            let mut i = 0;
            while i < args.len() {
                let val = args.get(i + 1).copied().ok_or_else(|| format!("`{}` needs a value", args[i]))?;
                match args[i] {
                    "limit" => cfg.limit = val.parse().map_err(|_| format!("bad sfq limit `{val}`"))?,
                    "quantum" => cfg.quantum = parse_size(val).map_err(|e| e.to_string())? as u32,
                    "depth" => cfg.depth = val.parse().map_err(|_| format!("bad sfq depth `{val}`"))?,
                    "divisor" => cfg.divisor = val.parse().map_err(|_| format!("bad sfq divisor `{val}`"))?,
                    "perturb" => cfg.perturb = parse_time(val).map_err(|e| e.to_string())?,
                    "mode" => {
                        cfg.perturb_mode = match val {
                            "sticky" | "sluice" => PerturbMode::Sticky,
                            "rehash" => PerturbMode::Rehash,
                            "keyonly" | "legacy" => PerturbMode::KeyOnly,
                            o => return Err(format!("unknown sfq mode `{o}` (sticky, rehash or keyonly)")),
                        }
                    }
                    o => return Err(format!("unknown sfq option `{o}`")),
                }
                i += 2;
            }
            Sfq::new(cfg).map_err(|e| e.to_string())?;
            Ok(Arc::new(move || Box::new(Sfq::new(cfg).expect("validated above")) as Box<dyn Qdisc>))
        }
        "pie" | "fq_pie" => registry_queue(kind, args),
        _ => Err(format!("unknown queue `{spec}`")),
    }
}

/// A registry kind's queue from tc's own words (`pie target 20ms ecn`), checked and built as a
/// tc script's qdisc is, on an Ethernet device (psched_mtu 1514).
fn registry_queue(kind: &str, args: &[&str]) -> Result<SharedFactory, String> {
    use sluice_model::grammar::Cur;
    use sluice_model::kinds::BuildCx;
    use sluice_model::model::{DevKind, Device, QdiscNode, QdiscOpts, H_ROOT};
    let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
    let opts = QdiscOpts::parse_kind(kind, &mut cur)
        .ok_or_else(|| format!("unknown queue `{kind}`"))?
        .map_err(|e| format!("{kind}: {}", e.message))?;
    let dev = Device::new(LINK_DEV, DevKind::Dummy, 1);
    let opts = opts.change(&dev, None).map_err(|e| format!("{kind}: {}", e.message))?;
    let node =
        QdiscNode { handle: Handle::new(1, 0), parent: H_ROOT, opts, stab: None, stats: Default::default() };
    let build = move || {
        let mut cls = Classifier::new();
        node.opts.build(&node, &mut BuildCx { dev: &dev, cls: &mut cls, seed: 0 })
    };
    build().map_err(|e| e.to_string())?;
    Ok(Arc::new(move || build().expect("built once already")))
}

/// The shaper of a case as the backend built it.
pub(crate) struct ShaperParts {
    pub factory: SharedProgram,
    /// Classes to report.
    pub classes: Vec<ClassSpec>,
    /// The `[shaper.leaves]` generator, if any.
    pub leaves: Option<Arc<LeafGen>>,
    /// Wall-clock milliseconds of the validation build (handed to the first run).
    pub build_ms: f64,
    /// Estimated bytes of its queues and classes, and the packets they may hold at once.
    pub mem: (f64, f64),
}

fn parts(factory: SharedFactory, classes: Vec<ClassSpec>) -> ShaperParts {
    ShaperParts { factory: plain(factory), classes, leaves: None, build_ms: 0.0, mem: (0.0, 0.0) }
}

/// Builds the shaper of a case.
pub(crate) fn shaper(ctx: &Ctx, s: &ShaperFile, wire: WireSpec) -> Result<ShaperParts, ScenarioError> {
    if s.tc.is_some() || s.file.is_some() {
        let q = s.tc.as_ref().or(s.file.as_ref()).expect("checked");
        return Err(ctx.err(
            Some(q.span()),
            "tc-script shapers need sluice-tc, which is not merged into this build yet",
            Some("use the structured form ([[shaper.class]]) for now"),
        ));
    }
    let kind = s.kind.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "htb".into());
    let mut active = Vec::new();
    for c in &s.class {
        if ctx.when(&c.when)? {
            active.push(c);
        }
    }
    let mut classes = Vec::new();
    for c in &active {
        let rate = ctx.rate(&c.rate)?;
        let ceil = c.ceil.as_ref().map(|q| ctx.rate(q)).transpose()?.unwrap_or(rate);
        if ceil < rate {
            return Err(ctx.err(
                Some(c.ceil.as_ref().expect("set").span()),
                "ceil is below rate",
                Some("ceil >= rate"),
            ));
        }
        classes.push(ClassSpec { id: ctx.handle(&c.id)?, rate, ceil });
    }
    let Some(first) = active.first().copied() else {
        return Err(ctx.err(
            s.kind.as_ref().map(|q| q.span()),
            "the shaper has no [[shaper.class]]",
            Some("add at least one class"),
        ));
    };
    let leaf_text =
        first.leaf.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "pfifo 1000".into());
    let leaf_span = first.leaf.as_ref().map(|q| q.span());
    let _leaf = shared_queue(&leaf_text).map_err(|m| {
        ctx.err(
            leaf_span.clone(),
            m,
            Some("pfifo N, bfifo SIZE, pfifo_fast, fq_codel [...], pie [...], fq_pie [...]"),
        )
    })?;
    let pfifo_limit = match leaf_text.split_whitespace().collect::<Vec<_>>()[..] {
        ["pfifo"] => Some(1000),
        ["pfifo", n] => n.parse::<u32>().ok(),
        _ => None,
    };
    match kind.as_str() {
        "legacy-2.6.30" => {
            if classes.len() != 1 {
                return Err(ctx.err(
                    s.kind.as_ref().map(|q| q.span()),
                    "the legacy-2.6.30 model has exactly one class",
                    None,
                ));
            }
            let mtu = s.mtu.as_ref().map(|q| ctx.uint(q, 1 << 20)).transpose()?.unwrap_or(1600) as u32;
            let timer = s.timer.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::ZERO);
            let rate = classes[0].ceil;
            let Some(limit) = pfifo_limit else {
                return Err(ctx.err(
                    leaf_span,
                    "the legacy-2.6.30 model has a pfifo leaf only",
                    Some("leaf = \"pfifo N\""),
                ));
            };
            Ok(parts(
                Arc::new(move || Box::new(LegacyHtbClass::new(rate, mtu, timer, limit)) as Box<dyn Qdisc>),
                classes,
            ))
        }
        "exact" => {
            // One exact token bucket over the leaf: the reference line, no HTB machinery.
            if classes.len() != 1 {
                return Err(ctx.err(
                    s.kind.as_ref().map(|q| q.span()),
                    "the exact shaper has exactly one class",
                    None,
                ));
            }
            let rate = classes[0].ceil;
            let burst = match &first.burst {
                Some(q) => ctx.size(q)?,
                None => default_burst(rate),
            };
            let Some(limit) = pfifo_limit else {
                return Err(ctx.err(
                    leaf_span,
                    "the exact shaper has a pfifo leaf only",
                    Some("leaf = \"pfifo N\""),
                ));
            };
            Ok(parts(
                Arc::new(move || Box::new(ExactShaper::new(rate, burst, wire, limit)) as Box<dyn Qdisc>),
                classes,
            ))
        }
        "htb" | "sluice" => htb(ctx, s, &active, wire, classes, false),
        "reference-htb" => htb(ctx, s, &active, wire, classes, true),
        other => Err(ctx.err(
            s.kind.as_ref().map(|q| q.span()),
            format!("unknown shaper kind `{other}`"),
            Some("htb or legacy-2.6.30"),
        )),
    }
}

/// tc's default HTB burst on a high-resolution kernel: one 1600-byte mtu (rate/HZ with HZ=1e9 adds
/// nothing below 8 Gbit/s), but never less than 1 ms of traffic in Sluice so a late wake-up
/// cannot cost rate. Sluice's own default in the htb component may differ.
pub(crate) fn default_burst(rate: Rate) -> u64 {
    (rate.bytes_per_sec() / 1000).max(1600) + 1600
}

/// The naive reference HTB holds at most this many generated leaves: it scans every class per
/// packet, so 65 000 leaves already take minutes (seed 001's point).
const REFERENCE_MAX_LEAVES: u64 = 65_000;

/// Resolves `[shaper.leaves]` for a root qdisc of major `major`.
fn leaf_gen(
    ctx: &Ctx,
    g: &LeavesFile,
    major: u16,
    classes: &[ClassSpec],
    reference: bool,
) -> Result<LeafGen, ScenarioError> {
    let count = ctx.uint(&g.count, MAX_LEAVES)?;
    if count == 0 {
        return Err(ctx.err(Some(g.count.span()), "count must be at least 1", None));
    }
    let parent = ctx.handle(&g.parent)?;
    let first = ctx.handle(&g.first)?;
    if first.major() != major || first.minor() == 0 {
        return Err(ctx.err(
            Some(g.first.span()),
            format!(
                "first leaf {first} is not a class of {}",
                sluice_model::print::qdisc_handle_str(Handle::new(major, 0))
            ),
            None,
        ));
    }
    let sites = match &g.sites {
        Some(q) if ctx.text(q)?.trim() != "auto" => match ctx.uint(q, 0xffff)? {
            0 => return Err(ctx.err(Some(q.span()), "sites must be at least 1", Some("1 is flat"))),
            1 => 0,
            n => n,
        },
        _ => LeafGen::auto_sites(count),
    };
    let rate = ctx.rate(&g.rate)?;
    let ceil = g.ceil.as_ref().map(|q| ctx.rate(q)).transpose()?.unwrap_or(rate);
    if ceil < rate {
        return Err(ctx.err(g.ceil.as_ref().map(|q| q.span()), "ceil is below rate", Some("ceil >= rate")));
    }
    let parent_class = classes.iter().find(|c| c.id == parent);
    let site_rate = match &g.site_rate {
        Some(q) => ctx.rate(q)?,
        None => match parent_class {
            Some(p) => Rate::from_bps((p.rate.bps() / sites.max(1)).max(8_000)),
            None => Rate::from_bps(rate.bps().saturating_mul(count.div_ceil(sites.max(1)))),
        },
    };
    let site_ceil = match &g.site_ceil {
        Some(q) => ctx.rate(q)?,
        None => parent_class.map(|p| p.ceil).unwrap_or(ceil).max(site_rate),
    };
    if site_ceil < site_rate {
        return Err(ctx.err(g.site_ceil.as_ref().map(|q| q.span()), "site_ceil is below site_rate", None));
    }
    let report = match &g.report {
        None => LeafReport::All,
        Some(q) => match ctx.text(q)?.as_str() {
            "true" => LeafReport::All,
            "false" => LeafReport::None,
            "active" => LeafReport::Active,
            o => {
                return Err(ctx.err(
                    Some(q.span()),
                    format!("report = `{o}`"),
                    Some("true, false or \"active\""),
                ))
            }
        },
    };
    if reference && count > REFERENCE_MAX_LEAVES {
        return Err(ctx.err(
            Some(g.count.span()),
            format!(
                "the naive reference HTB scans every class per packet: {count} leaves would take hours \
                 (at most {REFERENCE_MAX_LEAVES})"
            ),
            Some("use variant=sluice for larger trees"),
        ));
    }
    let gen = LeafGen {
        count: count as u32,
        sites: sites as u32,
        first,
        parent,
        rate,
        ceil,
        site_rate,
        site_ceil,
        parent_ceil: parent_class.map(|p| p.ceil),
        report,
    };
    gen.check()
        .map_err(|m| ctx.err(Some(g.count.span()), m, Some("sites = \"auto\" picks about sqrt(count)")))?;
    Ok(gen)
}

/// Sluice's HTB (`sluice_core::htb`) from the structured form.
fn htb(
    ctx: &Ctx,
    s: &ShaperFile,
    active: &[&crate::scenario::file::ClassFile],
    wire: WireSpec,
    mut classes: Vec<ClassSpec>,
    reference: bool,
) -> Result<ShaperParts, ScenarioError> {
    let major = classes[0].id.major();
    let handle = Handle::new(major, 0);
    let default_class = match &s.default {
        Some(q) => {
            let h = ctx.handle(q)?;
            if h.major() != major {
                return Err(ctx.err(
                    Some(q.span()),
                    format!("default class {h} is not a class of {handle}"),
                    None,
                ));
            }
            h.minor()
        }
        None => 0,
    };
    let cfg = HtbConfig { default_class, ..HtbConfig::default() };
    let mut list = Vec::new();
    let mut leaves: Vec<(Handle, LeafQueue)> = Vec::new();
    let mut parents: Vec<Handle> =
        active.iter().filter_map(|c| c.parent.as_ref()).map(|q| ctx.handle(q)).collect::<Result<_, _>>()?;
    if let Some(g) = &s.leaves {
        parents.push(ctx.handle(&g.parent)?);
    }
    let mut mem = (0.0f64, 0.0f64);
    for (c, spec) in active.iter().zip(&classes) {
        let parent = match &c.parent {
            Some(q) => ctx.handle(q)?,
            None => handle,
        };
        let mut cc = HtbClassConfig::new(spec.rate).ceil(spec.ceil);
        cc.wire = wire;
        if let Some(q) = &c.burst {
            cc = cc.burst(ctx.size(q)?);
        }
        if let Some(q) = &c.cburst {
            cc = cc.cburst(ctx.size(q)?);
        }
        if let Some(q) = &c.prio {
            cc = cc.prio(ctx.uint(q, 7)? as u8);
        }
        if let Some(q) = &c.quantum {
            cc = cc.quantum(ctx.size(q)? as u32);
        }
        list.push((spec.id, parent, cc));
        if !parents.contains(&spec.id) {
            let text =
                c.leaf.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "pfifo 1000".into());
            let f = shared_queue(&text).map_err(|m| {
                ctx.err(
                    c.leaf.as_ref().map(|q| q.span()),
                    m,
                    Some("pfifo N, bfifo SIZE, pfifo_fast, fq_codel [...], pie [...], fq_pie [...]"),
                )
            })?;
            let (b, p) = crate::scenario::memory::leaf_text_bytes(&text);
            mem.0 += b;
            mem.1 += p;
            leaves.push((spec.id, leaf_queue(&text, f)));
        } else if let Some(q) = &c.leaf {
            return Err(ctx.err(
                Some(q.span()),
                format!("class {} has children, so it has no leaf qdisc", spec.id),
                None,
            ));
        }
    }
    let mut gen = None;
    if let Some(g) = &s.leaves {
        let lg = leaf_gen(ctx, g, major, &classes, reference)?;
        let text = g.leaf.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "pfifo 1000".into());
        let f = shared_queue(&text).map_err(|m| ctx.err(g.leaf.as_ref().map(|q| q.span()), m, None))?;
        if lg.report == LeafReport::All {
            for i in 0..lg.count {
                classes.push(ClassSpec { id: lg.leaf(i), rate: lg.rate, ceil: lg.ceil });
            }
        }
        let (b, p) = crate::scenario::memory::leaf_text_bytes(&text);
        mem.0 += lg.count as f64 * b + lg.sites as f64 * crate::scenario::memory::PER_NODE;
        mem.1 += lg.count as f64 * p;
        gen = Some((Arc::new(lg), leaf_queue(&text, f)));
    }
    mem.0 += list.len() as f64 * crate::scenario::memory::PER_NODE;
    // Refused before the tree is built: a million fq_codel leaves would take 85 GB to build.
    crate::scenario::memory::check_shaper(mem.0, "queues and classes").map_err(|m| {
        ctx.err(active.first().map(|c| c.id.span()), m, Some("fewer leaves or a leaner leaf qdisc (pfifo)"))
    })?;
    let span = active.first().map(|c| c.id.span());
    let reported: Vec<ClassSpec> = classes.into_iter().filter(|c| !parents.contains(&c.id)).collect();
    let leaf_gen = gen.as_ref().map(|(g, _)| g.clone());
    // Packets name their class in `priority` (see `scenario::build`); the root qdisc honours it
    // first. A generated leaf (possibly beyond 16-bit minors) is named by the flow's mark instead,
    // read by one `flow map key mark baseclass FIRST` filter at the root, 32 bits wide.
    let classifier = match &leaf_gen {
        Some(g) => {
            let mut c = Classifier::new();
            c.set_root(Some(handle));
            let map = FlowConfig { baseclass: Some(g.leaf(0)), wide: true, ..FlowConfig::map(FlowKey::Mark) };
            let spec = FilterSpec {
                chain: 0,
                pref: Some(1),
                protocol: Protocol::ALL,
                handle: None,
                config: FilterConfig::Flow(map),
            };
            c.add_filter(handle, spec, Upsert::Add)
                .map_err(|e| ctx.err(span.clone(), e.to_string(), None))?;
            c
        }
        None => Classifier::new(),
    };
    let program = move |root: SharedFactory| -> SharedProgram {
        Arc::new(move || Program::from_parts(root(), classifier.clone()))
    };
    if reference {
        // sluice_core::reference_htb: the naive O(backlogged leaves) HTB, the "old HTB" baseline
        // of seed 001. pfifo leaves only; burst/cburst 1600 bytes, quantum 1500.
        let pfifo = |q: &LeafQueue| match q {
            LeafQueue::Pfifo(n) => *n,
            LeafQueue::Other(_) => 1000,
        };
        let limits: std::collections::HashMap<Handle, u32> =
            leaves.iter().map(|(id, q)| (*id, pfifo(q))).collect();
        let mut rlist: Vec<(Handle, Handle, RefClassParams)> = list
            .iter()
            .map(|(id, parent, cc)| (*id, *parent, ref_params(*id, cc, cfg.r2q, limits.get(id).copied())))
            .collect();
        if let Some((g, q)) = &gen {
            for (id, parent, rate, ceil) in g.reference_classes() {
                let cc = HtbClassConfig::new(rate).ceil(ceil);
                rlist.push((id, parent, ref_params(id, &cc, cfg.r2q, Some(pfifo(q)))));
            }
        }
        let build_ref = move || -> Result<RefHtb, ConfigError> {
            let mut h = RefHtb::new(handle);
            for (id, parent, p) in &rlist {
                h.add_class(*id, *parent, *p, Time::ZERO)?;
            }
            Ok(h)
        };
        let t0 = std::time::Instant::now();
        let first = build_ref().map_err(|e| ctx.err(span, e.to_string(), None))?;
        let build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let factory = first_then_rebuild(first, move || build_ref().expect("validated above"));
        return Ok(ShaperParts {
            factory: program(factory),
            classes: reported,
            leaves: leaf_gen,
            build_ms,
            mem,
        });
    }
    let build = move || -> Result<Htb, ConfigError> {
        let (mut h, _warnings) = Htb::build(handle, cfg.clone(), &list, Time::ZERO)?;
        for (id, q) in &leaves {
            q.install(&mut h, *id)?;
        }
        if let Some((g, q)) = &gen {
            g.install(&mut h, q, wire)?;
        }
        Ok(h)
    };
    let t0 = std::time::Instant::now();
    let first = build().map_err(|e| ctx.err(span.clone(), e.to_string(), None))?;
    let build_ms = t0.elapsed().as_secs_f64() * 1e3;
    let factory = first_then_rebuild(first, move || build().expect("validated above"));
    Ok(ShaperParts { factory: program(factory), classes: reported, leaves: leaf_gen, build_ms, mem })
}

/// The reference scheduler's parameters for a class, resolved as the HTB resolves them (tc's
/// default burst, quantum from r2q), so that both variants run the same configuration.
fn ref_params(id: Handle, cc: &HtbClassConfig, r2q: u32, limit: Option<u32>) -> RefClassParams {
    let mut p = RefClassParams::new(cc.rate);
    if let Ok(r) = cc.resolve(id, r2q, &mut Vec::new()) {
        p.ceil = r.ceil;
        p.burst = r.burst;
        p.cburst = r.cburst;
        p.prio = r.prio;
        p.quantum = r.quantum;
    }
    if let Some(l) = limit {
        p.limit = l;
    }
    p
}
