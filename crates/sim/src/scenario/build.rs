//! Resolves one sweep point of a scenario into a runnable [`SimSpec`].

use super::file::{FlowFile, LinkFile, Scalar, ShaperFile, Q};
use super::{Point, Scenario, ScenarioError};
use crate::backend;
use crate::leaves::{LeafGen, LeafReport};
use crate::model::*;
use sluice_core::units::{parse_rate, parse_size, parse_time};
use sluice_core::{Handle, LinkLayer, Rate, Span, WireSpec};
use std::collections::BTreeMap;
use std::ops::Range;

/// A resolved case: the run description plus its name and parameters.
pub struct CaseSpec {
    /// Case name.
    pub name: String,
    /// All parameter values.
    pub params: BTreeMap<String, String>,
    /// The run.
    pub spec: SimSpec,
    /// Seed-document figures for this case: (key, value) for `extra`.
    pub references: Vec<(String, f64)>,
    /// Per-leaf accuracy of the generated leaves (`[shaper.leaves] report = "active"`).
    pub leaf_accuracy: Option<LeafAccuracy>,
    /// What `sluice lint` finds in a tc-script shaper, one line per finding.
    pub lint: Vec<String>,
    /// The hops that run a tc configuration (tc-script shaper, IFB download shaper, netem link),
    /// for their `tc -s` counters after the run.
    pub tc_views: Vec<TcView>,
    /// Estimated peak memory of the run, bytes.
    pub memory: f64,
}

/// A hop that runs a device of a tc configuration.
pub struct TcView {
    /// The link's name.
    pub link: String,
    /// The hop: the link's position on the forward path, or after it on the reverse one.
    pub hop: (bool, usize),
    /// The configuration.
    pub state: std::sync::Arc<sluice_tc::model::State>,
    /// The device the hop's queue runs (its egress).
    pub dev: String,
    /// Ingress shaping: the device whose receive path (ingress filters) runs first.
    pub rx_dev: Option<String>,
}

/// What to summarise about the backlogged generated leaves after the run.
pub struct LeafAccuracy {
    /// Generated leaves and sites (0: flat).
    pub leaves: u32,
    /// Sites (0: flat).
    pub sites: u32,
    /// Indexes into [`SimSpec::classes`] of the leaves some backlog flow is sent to.
    pub classes: Vec<usize>,
    /// Their fluid fair rates (bit/s), when the case allows computing them (only backlog flows,
    /// all into generated leaves, under a configured parent class).
    pub ideal_bps: Option<Vec<f64>>,
    /// Wall-clock ms to build the shaper once.
    pub build_ms: f64,
}

/// Resolution context: the scenario and this case's parameter values.
pub struct Ctx<'a> {
    /// The scenario.
    pub sc: &'a Scenario,
    /// Parameter values of the case.
    pub params: &'a BTreeMap<String, String>,
}

impl Ctx<'_> {
    pub(crate) fn err(
        &self,
        span: Option<Range<usize>>,
        msg: impl Into<String>,
        hint: Option<&str>,
    ) -> ScenarioError {
        ScenarioError::at(&self.sc.path, &self.sc.src, span, msg, hint.map(String::from))
    }

    /// The value as text with `${name}` replaced.
    pub(crate) fn text(&self, q: &Q) -> Result<String, ScenarioError> {
        let raw = q.get_ref().text();
        let mut out = String::new();
        let mut rest = raw.as_str();
        while let Some(i) = rest.find("${") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let Some(j) = after.find('}') else {
                return Err(self.err(Some(q.span()), "unclosed `${`", Some("write ${name}")));
            };
            let name = &after[..j];
            match self.params.get(name) {
                Some(v) => out.push_str(v),
                None => {
                    let known: Vec<_> = self.params.keys().cloned().collect();
                    return Err(self.err(
                        Some(q.span()),
                        format!("unknown parameter `{name}`"),
                        Some(&format!("declare it under [params]; known: {}", known.join(", "))),
                    ));
                }
            }
            rest = &after[j + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    pub(crate) fn rate(&self, q: &Q) -> Result<Rate, ScenarioError> {
        let t = self.text(q)?;
        let r = parse_rate(&t).map_err(|e| {
            self.err(Some(q.span()), e.to_string(), Some("a tc rate such as 5mbit or 10gbit"))
        })?;
        if r.is_zero() {
            return Err(self.err(Some(q.span()), "rate must be positive", None));
        }
        Ok(r)
    }

    pub(crate) fn time(&self, q: &Q) -> Result<Span, ScenarioError> {
        let t = self.text(q)?;
        if t == "0" {
            return Ok(Span::ZERO);
        }
        parse_time(&t)
            .map_err(|e| self.err(Some(q.span()), e.to_string(), Some("a tc time such as 20ms or 5s")))
    }

    pub(crate) fn size(&self, q: &Q) -> Result<u64, ScenarioError> {
        let t = self.text(q)?;
        parse_size(&t)
            .map_err(|e| self.err(Some(q.span()), e.to_string(), Some("a tc size such as 1514 or 128k")))
    }

    pub(crate) fn uint(&self, q: &Q, max: u64) -> Result<u64, ScenarioError> {
        let t = self.text(q)?;
        let v = t
            .trim()
            .parse::<u64>()
            .map_err(|_| self.err(Some(q.span()), format!("`{t}` is not a non-negative integer"), None))?;
        if v > max {
            return Err(self.err(Some(q.span()), format!("{v} is larger than {max}"), None));
        }
        Ok(v)
    }

    pub(crate) fn boolean(&self, q: &Q) -> Result<bool, ScenarioError> {
        if let Scalar::Bool(b) = q.get_ref() {
            return Ok(*b);
        }
        match self.text(q)?.as_str() {
            "true" | "on" | "yes" | "1" => Ok(true),
            "false" | "off" | "no" | "0" => Ok(false),
            t => Err(self.err(Some(q.span()), format!("`{t}` is not a boolean"), Some("true or false"))),
        }
    }

    pub(crate) fn handle(&self, q: &Q) -> Result<Handle, ScenarioError> {
        let t = self.text(q)?;
        Handle::parse_wide(&t).map_err(|e| self.err(Some(q.span()), e.0, Some("a class id such as 1:10")))
    }

    /// `"a=b,c!=d"`: all must hold.
    pub(crate) fn when(&self, q: &Option<Q>) -> Result<bool, ScenarioError> {
        let Some(q) = q else { return Ok(true) };
        let t = self.text(q)?;
        for cond in t.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            let (k, v, neg) = if let Some((k, v)) = cond.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = cond.split_once('=') {
                (k, v, false)
            } else {
                return Err(self.err(
                    Some(q.span()),
                    format!("bad condition `{cond}`"),
                    Some("write param=value or param!=value"),
                ));
            };
            let Some(actual) = self.params.get(k.trim()) else {
                return Err(self.err(
                    Some(q.span()),
                    format!("unknown parameter `{}` in condition", k.trim()),
                    None,
                ));
            };
            let alts: Vec<&str> = v.split('|').map(str::trim).collect();
            let hit = alts.contains(&actual.as_str());
            if hit == neg {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Resolves the scenario at `point`.
pub fn build_case(sc: &Scenario, point: &Point) -> Result<CaseSpec, ScenarioError> {
    build_case_opts(sc, point, false)
}

/// [`build_case`]; `force` runs it even when the work estimate says it would take hours.
pub fn build_case_opts(sc: &Scenario, point: &Point, force: bool) -> Result<CaseSpec, ScenarioError> {
    let ctx = Ctx { sc, params: &point.params };
    let f = &sc.file;
    let top = |key: &str, q: Option<&Q>| -> Option<Q> {
        match point.params.get(key) {
            Some(v) if !f.params.contains_key(key) => {
                let span = q.map(|q| q.span()).unwrap_or(0..0);
                Some(toml::Spanned::new(span, Scalar::Str(v.clone())))
            }
            _ => q.cloned(),
        }
    };
    let duration = ctx.time(&top("duration", Some(&f.duration)).expect("duration is required"))?;
    if duration == Span::ZERO {
        return Err(ctx.err(Some(f.duration.span()), "duration must be positive", None));
    }
    let warmup = match top("warmup", f.warmup.as_ref()) {
        Some(q) => ctx.time(&q)?,
        None => Span::ZERO,
    };
    if warmup >= duration {
        return Err(ctx.err(
            f.warmup.as_ref().map(|q| q.span()),
            "warmup must be shorter than duration",
            None,
        ));
    }
    let step = match top("step", f.step.as_ref()) {
        Some(q) => ctx.time(&q)?,
        None => Span::from_millis(100),
    };
    if step == Span::ZERO {
        return Err(ctx.err(f.step.as_ref().map(|q| q.span()), "step must be positive", None));
    }
    let seed = match point.params.get("seed") {
        Some(s) if !f.params.contains_key("seed") => {
            s.parse().map_err(|_| ctx.err(None, format!("seed `{s}` is not an integer"), None))?
        }
        _ => f.seed.unwrap_or(1),
    };
    let start_jitter = match top("start_jitter", f.start_jitter.as_ref()) {
        Some(q) => ctx.time(&q)?,
        None => Span::from_millis(10),
    };
    if start_jitter > duration {
        return Err(ctx.err(
            f.start_jitter.as_ref().map(|q| q.span()),
            "start_jitter must not exceed the duration",
            None,
        ));
    }
    let series = match &f.series {
        Some(q) => ctx.boolean(q)?,
        None => true,
    };

    let shaper = match &f.shaper {
        Some(s) if ctx.when(&s.when)? => Some(s),
        _ => None,
    };
    let built = match shaper {
        Some(s) => Some(build_shaper(&ctx, s, seed)?),
        None => None,
    };
    let mut shaper_used = false;
    let mut download_used = false;
    let mut tc_views = Vec::new();
    let mut links = |ls: &[LinkFile], reverse: bool| -> Result<Vec<LinkSpec>, ScenarioError> {
        let mut out = Vec::new();
        for l in ls {
            if !ctx.when(&l.when)? {
                continue;
            }
            let rate = l.rate.as_ref().map(|q| ctx.rate(q)).transpose()?;
            let delay = l.delay.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::ZERO);
            let overhead = l.overhead.as_ref().map(|q| ctx.uint(q, 1 << 16)).transpose()?.unwrap_or(0) as u32;
            let qtext = match &l.queue {
                Some(q) => ctx.text(q)?,
                None => "pfifo 1000".to_string(),
            };
            if reverse && (qtext == "shaper" || qtext == "shaper-download") {
                return Err(ctx.err(
                    l.queue.as_ref().map(|q| q.span()),
                    "the shaper must be on the forward path",
                    None,
                ));
            }
            let default_qdisc = || backend::queue_factory("pfifo 1000").expect("static queue spec");
            let (queue, is_shaper, receive): (QueueFactory, bool, _) = match (qtext.as_str(), &built) {
                // Shaper disabled by its `when`: the device's default qdisc.
                ("shaper" | "shaper-download", None) => (default_qdisc(), false, None),
                ("shaper", Some(b)) => {
                    shaper_used = true;
                    if let Some(tc) = &b.tc {
                        tc_views.push(TcView {
                            link: l.name.clone(),
                            hop: (reverse, out.len()),
                            state: std::sync::Arc::new(tc.state.clone()),
                            dev: tc.dev.clone(),
                            rx_dev: None,
                        });
                    }
                    (backend::clone_factory(&b.factory), true, None)
                }
                ("shaper-download", Some(b)) => {
                    // The tc script's download path: the WAN device's ingress filters, then the
                    // IFB they redirect to.
                    let Some((tc, (wan, ifb, idx, wan_idx))) =
                        b.tc.clone().and_then(|t| t.download.clone().map(|d| (t, d)))
                    else {
                        return Err(ctx.err(
                            l.queue.as_ref().map(|q| q.span()),
                            "the shaper's tc script has no ingress filter redirecting to a device's egress",
                            Some("shape the download as sqm does: an ingress qdisc and `action mirred egress redirect dev ifb0`"),
                        ));
                    };
                    download_used = true;
                    tc_views.push(TcView {
                        link: l.name.clone(),
                        hop: (reverse, out.len()),
                        state: std::sync::Arc::new(tc.state.clone()),
                        dev: ifb.clone(),
                        rx_dev: Some(wan.clone()),
                    });
                    let rx_tc = tc.clone();
                    let queue: QueueFactory = Box::new(move || tc.program_of(&ifb, seed));
                    let rx: QueueFactory = Box::new(move || rx_tc.program_of(&wan, seed));
                    (queue, true, Some((rx, idx, wan_idx)))
                }
                _ => {
                    let (fac, state) = backend::link_queue_factory(&qtext, &l.name, seed).map_err(|m| {
                        ctx.err(
                            l.queue.as_ref().map(|q| q.span()),
                            m,
                            Some("\"shaper\", \"pfifo [N]\", \"bfifo [SIZE]\", \"pfifo_head_drop [N]\" or \"netem OPTIONS\""),
                        )
                    })?;
                    if let Some(state) = state {
                        tc_views.push(TcView {
                            link: l.name.clone(),
                            hop: (reverse, out.len()),
                            state: std::sync::Arc::new(state),
                            dev: backend::LINK_DEV.into(),
                            rx_dev: None,
                        });
                    }
                    (fac, false, None)
                }
            };
            out.push(LinkSpec { name: l.name.clone(), rate, delay, overhead, queue, is_shaper, receive });
        }
        Ok(out)
    };
    let forward = links(&f.link, false)?;
    let reverse = links(&f.reverse, true)?;
    if forward.is_empty() {
        return Err(ctx.err(
            None,
            "the scenario has no [[link]]",
            Some("add at least one [[link]] table for the forward path"),
        ));
    }
    if built.is_some() && !shaper_used && !download_used {
        return Err(ctx.err(None, "a [shaper] is configured but no link has queue = \"shaper\"", None));
    }

    let mut flows = Vec::new();
    // Leaf index of each flow sent to a generated leaf.
    let mut leaf_of: Vec<Option<u32>> = Vec::new();
    let nat = match &f.nat {
        Some(n) if ctx.when(&n.when)? => {
            let a: std::net::Ipv4Addr = ctx.text(&n.address)?.parse().map_err(|_| {
                ctx.err(Some(n.address.span()), "not an IPv4 address", Some("e.g. 198.18.200.1"))
            })?;
            if built.as_ref().and_then(|b| b.tc.as_ref()).is_none() {
                return Err(ctx.err(
                    Some(n.address.span()),
                    "[nat] needs a tc-script shaper (it rewrites what the shaper's filters see)",
                    None,
                ));
            }
            Some(std::net::IpAddr::V4(a))
        }
        _ => None,
    };
    for fl in &f.flow {
        if !ctx.when(&fl.when)? {
            continue;
        }
        build_flows(&ctx, fl, built.as_ref(), nat, &mut flows, &mut leaf_of)?;
    }
    if start_jitter > Span::ZERO {
        // The seed's random inputs: each flow's start offset (TCP senders also draw from it).
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5157_a271);
        for fs in flows.iter_mut() {
            fs.start = Span::from_nanos(fs.start.as_nanos() + rng.gen_range(0..start_jitter.as_nanos()));
        }
    }
    let (mut classes, shaper_wire, mut default_class) = match &built {
        Some(b) => (b.classes.clone(), b.wire, b.default_class),
        None => (Vec::new(), WireSpec::default(), None),
    };
    if download_used && !shaper_used {
        // The download shaper's classes are the IFB's.
        if let Some((tc, (_, ifb, _, _))) =
            built.as_ref().and_then(|b| b.tc.as_ref()).and_then(|t| Some((t, t.download.as_ref()?)))
        {
            classes = tc
                .leaf_classes_of(ifb)
                .into_iter()
                .map(|(id, rate, ceil)| ClassSpec { id, rate, ceil })
                .collect();
            default_class = tc.default_class_of(ifb);
        }
    }
    let leaf_accuracy = match built.as_ref().and_then(|b| b.leaves.as_ref().map(|g| (b, g))) {
        Some((b, g)) if g.report == LeafReport::Active => {
            Some(active_leaves(g, &flows, &leaf_of, &mut classes, b.build_ms))
        }
        _ => None,
    };
    let spec = SimSpec {
        duration,
        warmup,
        step,
        seed,
        forward,
        reverse,
        classes,
        default_class,
        shaper_wire,
        flows,
        series,
        profile: f.profile.unwrap_or(false),
    };
    let shaper_mem = built.as_ref().map_or((0.0, 0.0), |b| b.mem);
    let memory = check_budget(&spec, shaper_mem, force).map_err(|(key, msg)| {
        let hint = match key {
            "work" => "a shorter `duration` or fewer packets, or --force to run it anyway".to_string(),
            k => format!("change `{k}`"),
        };
        ctx.err(None, msg, Some(&hint))
    })?;
    let mut references = Vec::new();
    for r in &f.reference {
        if ctx.when(&r.when)? {
            references.push((format!("seed_mbit.{}", r.flow), r.mbit));
        }
    }
    let lint = match built.as_ref().and_then(|b| b.tc.as_ref()) {
        Some(tc) => {
            let opts = sluice_tc::lint::LintOpts {
                link_rate: spec.forward.iter().find(|l| l.is_shaper).and_then(|l| l.rate).map(|r| r.bps()),
                ..Default::default()
            };
            sluice_tc::lint::lint(&tc.state, None, &opts)
                .into_iter()
                .map(|f| format!("{} {} ({}): {} — {}", f.code, f.object, f.dev, f.message, f.fix))
                .collect()
        }
        None => Vec::new(),
    };
    Ok(CaseSpec {
        name: point.name(),
        params: point.params.clone(),
        spec,
        references,
        leaf_accuracy,
        lint,
        tc_views,
        memory,
    })
}

/// Lists the generated leaves that flows are sent to among the reported classes, and what to
/// summarise about the backlogged ones.
fn active_leaves(
    g: &LeafGen,
    flows: &[FlowSpec],
    leaf_of: &[Option<u32>],
    classes: &mut Vec<ClassSpec>,
    build_ms: f64,
) -> LeafAccuracy {
    let mut used: Vec<u32> = leaf_of.iter().flatten().copied().collect();
    used.sort_unstable();
    used.dedup();
    let first = classes.len();
    classes.extend(used.iter().map(|&i| ClassSpec { id: g.leaf(i), rate: g.rate, ceil: g.ceil }));
    let backlogged: Vec<u32> = {
        let mut b: Vec<u32> = flows
            .iter()
            .zip(leaf_of)
            .filter(|(f, _)| matches!(f.traffic, TrafficSpec::Backlog { .. }))
            .filter_map(|(_, l)| *l)
            .collect();
        b.sort_unstable();
        b.dedup();
        b
    };
    // The fair rates hold only if nothing but these backlogged leaves competes.
    let only_backlog = flows.len() == leaf_of.len()
        && flows
            .iter()
            .zip(leaf_of)
            .all(|(f, l)| l.is_some() && matches!(f.traffic, TrafficSpec::Backlog { .. }));
    let ideal_bps = if only_backlog { g.ideal_rates(&backlogged) } else { None };
    let classes = backlogged.iter().map(|i| first + used.binary_search(i).expect("a used leaf")).collect();
    LeafAccuracy { leaves: g.count, sites: g.sites, classes, ideal_bps, build_ms }
}

/// The shaper as built for one case.
pub(crate) struct BuiltShaper {
    pub factory: backend::SharedProgram,
    pub classes: Vec<ClassSpec>,
    pub wire: WireSpec,
    /// `[[shaper.match]]` and `[shaper.hash]`: what the sending hosts put in `skb->priority`.
    pub rules: Vec<Rule>,
    pub hash: Option<(String, Vec<Handle>)>,
    /// The class packets that name none end up in (HTB's `default`), for accounting.
    pub default_class: Option<Handle>,
    pub tc: Option<std::sync::Arc<crate::tcscript::TcShaper>>,
    /// The `[shaper.leaves]` generator.
    pub leaves: Option<std::sync::Arc<LeafGen>>,
    /// Wall-clock ms of the validation build.
    pub build_ms: f64,
    /// Estimated bytes of its queues and classes, and the packets they may hold at once.
    pub mem: (f64, f64),
}

pub(crate) enum RuleKey {
    Flow(String),
    Host(String),
    Dscp(u8),
    Mark(u32),
}

pub(crate) struct Rule {
    pub keys: Vec<RuleKey>,
    pub class: Handle,
}

fn build_shaper(ctx: &Ctx, s: &ShaperFile, seed: u64) -> Result<BuiltShaper, ScenarioError> {
    let overhead = match &s.overhead {
        Some(q) => {
            let t = ctx.text(q)?;
            t.parse::<i32>().map_err(|_| ctx.err(Some(q.span()), format!("`{t}` is not an integer"), None))?
        }
        None => 0,
    };
    let mpu = s.mpu.as_ref().map(|q| ctx.uint(q, 1 << 16)).transpose()?.unwrap_or(0) as u32;
    let linklayer = match &s.linklayer {
        Some(q) => match ctx.text(q)?.as_str() {
            "ethernet" => LinkLayer::Ethernet,
            "atm" | "adsl" => LinkLayer::Atm,
            t => {
                return Err(ctx.err(
                    Some(q.span()),
                    format!("unknown linklayer `{t}`"),
                    Some("ethernet or atm"),
                ))
            }
        },
        None => LinkLayer::Ethernet,
    };
    let wire = WireSpec { overhead, mpu, linklayer };
    let mut rules = Vec::new();
    for m in &s.matches {
        let mut keys = Vec::new();
        if let Some(q) = &m.flow {
            keys.push(RuleKey::Flow(ctx.text(q)?));
        }
        if let Some(q) = &m.host {
            keys.push(RuleKey::Host(ctx.text(q)?));
        }
        if let Some(q) = &m.dscp {
            keys.push(RuleKey::Dscp(ctx.uint(q, 63)? as u8));
        }
        if let Some(q) = &m.mark {
            keys.push(RuleKey::Mark(ctx.uint(q, u32::MAX as u64)? as u32));
        }
        rules.push(Rule { keys, class: ctx.handle(&m.class)? });
    }
    let hash = match &s.hash {
        Some(h) => {
            let key = ctx.text(&h.key)?;
            if !["src-host", "dst-host", "flow"].contains(&key.as_str()) {
                return Err(ctx.err(
                    Some(h.key.span()),
                    format!("unknown hash key `{key}`"),
                    Some("src-host, dst-host or flow"),
                ));
            }
            let cl = h.classes.iter().map(|q| ctx.handle(q)).collect::<Result<Vec<_>, _>>()?;
            if cl.is_empty() {
                return Err(ctx.err(Some(h.key.span()), "hash needs at least one class", None));
            }
            Some((key, cl))
        }
        None => None,
    };
    let default = s.default.as_ref().map(|q| ctx.handle(q)).transpose()?;
    if let Some(q) = s.tc.as_ref().or(s.file.as_ref()) {
        let (name, text) = if let Some(q) = &s.tc {
            (ctx.sc.path.clone(), tc_text(ctx, &q.get_ref().text()))
        } else {
            let rel = ctx.text(q)?;
            let path = ctx.sc.dir.as_ref().map(|d| d.join(&rel)).unwrap_or_else(|| rel.clone().into());
            let t = std::fs::read_to_string(&path)
                .map_err(|e| ctx.err(Some(q.span()), format!("cannot read {}: {e}", path.display()), None))?;
            (path.display().to_string(), tc_text(ctx, &t))
        };
        let sh = crate::tcscript::load(&name, &text).map_err(|m| {
            ctx.err(
                Some(q.span()),
                format!("tc script: {m}"),
                Some("see `sluice tc` for the supported syntax"),
            )
        })?;
        let sh = std::sync::Arc::new(sh);
        let classes =
            sh.leaf_classes().into_iter().map(|(id, rate, ceil)| ClassSpec { id, rate, ceil }).collect();
        let f = sh.clone();
        let factory: backend::SharedProgram = std::sync::Arc::new(move || f.program(seed));
        return Ok(BuiltShaper {
            factory,
            classes,
            wire,
            rules,
            hash,
            default_class: sh.default_class(),
            mem: crate::scenario::memory::state_bytes(&sh.state),
            tc: Some(sh),
            leaves: None,
            build_ms: 0.0,
        });
    }
    let p = backend::shaper(ctx, s, wire)?;
    Ok(BuiltShaper {
        factory: p.factory,
        classes: p.classes,
        wire,
        rules,
        hash,
        default_class: default,
        tc: None,
        leaves: p.leaves,
        build_ms: p.build_ms,
        mem: p.mem,
    })
}

/// `${name}` of scenario parameters substituted; other `$...` is left to the script's own shell
/// variables.
/// The script with `${param}` substituted. A line that starts with `[cond]` (conditions as in
/// `when`, e.g. `[shaper=cake]`) is kept, without the prefix, only when the condition holds; it
/// becomes an empty line otherwise, so line numbers in errors stay right.
fn tc_text(ctx: &Ctx, raw: &str) -> String {
    let holds = |cond: &str| {
        cond.split(',').map(str::trim).filter(|c| !c.is_empty()).all(|c| {
            let (k, v, neg) = match c.split_once("!=") {
                Some((k, v)) => (k, v, true),
                None => match c.split_once('=') {
                    Some((k, v)) => (k, v, false),
                    None => return false,
                },
            };
            (ctx.params.get(k.trim()).map(String::as_str) == Some(v.trim())) != neg
        })
    };
    let mut out = String::with_capacity(raw.len());
    for line in raw.split_inclusive('\n') {
        let t = line.trim_start();
        match t.strip_prefix('[').and_then(|r| r.split_once(']')) {
            Some((cond, rest)) if holds(cond) => out.push_str(rest.trim_start()),
            Some(_) => out.push_str(if line.ends_with('\n') { "\n" } else { "" }),
            None => out.push_str(line),
        }
    }
    for (k, v) in ctx.params.iter() {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// The class a sending host names in `skb->priority` (as iptables `CLASSIFY` or `SO_PRIORITY`
/// do) by the scenario's `[[shaper.match]]` rules and `[shaper.hash]`: the shaper's engine then
/// honours it per packet, before its filters (HTB's order). A host decides per flow, so this runs
/// once per flow; the shaper's own classification runs per packet in the engine.
fn host_priority(
    b: &BuiltShaper,
    name: &str,
    host: &str,
    dscp: u8,
    mark: u32,
    flow_hash: u32,
) -> Option<Handle> {
    for r in &b.rules {
        let hit = r.keys.iter().all(|k| match k {
            RuleKey::Flow(f) => f == name || name.starts_with(&format!("{f}.")),
            RuleKey::Host(h) => h == host,
            RuleKey::Dscp(d) => *d == dscp,
            RuleKey::Mark(m) => *m == mark,
        });
        if hit {
            return Some(r.class);
        }
    }
    if let Some((key, classes)) = &b.hash {
        let h = match key.as_str() {
            "src-host" => name_hash(host),
            "flow" => flow_hash,
            _ => 0,
        };
        return Some(classes[(h % classes.len() as u32) as usize]);
    }
    None
}

fn build_flows(
    ctx: &Ctx,
    fl: &FlowFile,
    b: Option<&BuiltShaper>,
    nat: Option<std::net::IpAddr>,
    out: &mut Vec<FlowSpec>,
    leaf_of: &mut Vec<Option<u32>>,
) -> Result<(), ScenarioError> {
    let kind = ctx.text(&fl.kind)?;
    let need = |q: &Option<Q>, what: &str| -> Result<Q, ScenarioError> {
        q.clone().ok_or_else(|| {
            ctx.err(
                Some(fl.kind.span()),
                format!("flow `{}` of type {kind} needs `{what}`", fl.name),
                Some(&format!("add {what} = ...")),
            )
        })
    };
    let count = fl.count.as_ref().map(|q| ctx.uint(q, 1_000_000)).transpose()?.unwrap_or(1);
    let host = fl.host.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "client".into());
    let dst = fl.dst.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "server".into());
    let size = fl.size.as_ref().map(|q| ctx.size(q)).transpose()?.unwrap_or(1514);
    if !(20..=65535).contains(&size) {
        return Err(ctx.err(
            fl.size.as_ref().map(|q| q.span()),
            format!("size {size} out of range"),
            Some("20..65535 bytes"),
        ));
    }
    let gso = fl.gso_segs.as_ref().map(|q| ctx.uint(q, 64)).transpose()?.unwrap_or(1).max(1) as u16;
    if size * gso as u64 > 65535 * 2 {
        return Err(ctx.err(fl.gso_segs.as_ref().map(|q| q.span()), "GSO packet larger than 128 KB", None));
    }
    let dscp = fl.dscp.as_ref().map(|q| ctx.uint(q, 63)).transpose()?.unwrap_or(0) as u8;
    let tos = fl.tos.as_ref().map(|q| ctx.uint(q, 255)).transpose()?.map(|t| t as u8);
    let dsfield = tos.unwrap_or(dscp << 2);
    let ecn = fl.ecn.as_ref().map(|q| ctx.boolean(q)).transpose()?.unwrap_or(false);
    let mark = fl.mark.as_ref().map(|q| ctx.uint(q, u32::MAX as u64)).transpose()?.unwrap_or(0) as u32;
    let start = fl.start.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::ZERO);
    let stop = fl.stop.as_ref().map(|q| ctx.time(q)).transpose()?;
    let explicit = fl.class.as_ref().map(|q| ctx.handle(q)).transpose()?;
    // A class among the generated leaves names a leaf index; `spread` then counts leaves.
    let gen = b.and_then(|b| b.leaves.as_deref());
    let base = match (gen, explicit) {
        (Some(g), Some(c)) => g.index_of(c).map(|j| (g, j)),
        _ => None,
    };
    let spread = fl.spread.as_ref().map(|q| ctx.uint(q, u32::MAX as u64)).transpose()?;
    let dport = fl.port.as_ref().map(|q| ctx.uint(q, 65535)).transpose()?.unwrap_or(5001) as u16;
    if let (Some(n), Some(c)) = (spread, explicit) {
        match base {
            Some((g, j)) if j as u64 + n > g.count as u64 => {
                return Err(ctx.err(
                    fl.spread.as_ref().map(|q| q.span()),
                    format!("spread runs past the last of the {} generated leaves", g.count),
                    None,
                ));
            }
            None if c.minor() as u64 + n > u32::MAX as u64 => {
                return Err(ctx.err(
                    fl.spread.as_ref().map(|q| q.span()),
                    "spread runs past minor ffffffff",
                    None,
                ));
            }
            _ => {}
        }
    }
    let mut tunnel = fl.tunnel.as_ref().map(|q| ctx.text(q)).transpose()?;
    if let Some(q) = &fl.tunnel_keys {
        match ctx.text(q)?.as_str() {
            "outer" | "false" | "off" => {}
            "inner" | "true" | "on" => tunnel = None,
            o => return Err(ctx.err(Some(q.span()), format!("tunnel_keys `{o}`"), Some("outer or inner"))),
        }
    }
    let download = match fl.direction.as_ref().map(|q| ctx.text(q)).transpose()?.as_deref() {
        None | Some("up") => false,
        Some("down") if kind == "tcp" => true,
        Some("down") => {
            return Err(ctx.err(
                fl.direction.as_ref().map(|q| q.span()),
                "direction = \"down\" is for tcp flows (their ACKs cross the forward path)",
                None,
            ))
        }
        Some(o) => {
            return Err(ctx.err(
                fl.direction.as_ref().map(|q| q.span()),
                format!("direction `{o}`"),
                Some("up or down"),
            ))
        }
    };
    let traffic = match kind.as_str() {
        "cbr" => TrafficSpec::Cbr { rate: ctx.rate(&need(&fl.rate, "rate")?)? },
        "poisson" => TrafficSpec::Poisson { rate: ctx.rate(&need(&fl.rate, "rate")?)? },
        "onoff" => {
            let rate = ctx.rate(&need(&fl.rate, "rate")?)?;
            let on = ctx.time(&need(&fl.on, "on")?)?;
            let off = ctx.time(&need(&fl.off, "off")?)?;
            // Each on period sends at least one packet, so a period shorter than one packet's
            // time would send at a rate the flow never asked for (and `on = off = 0` never ends).
            if on == Span::ZERO || on < rate.time_to_send(size) {
                return Err(ctx.err(
                    fl.on.as_ref().map(|q| q.span()),
                    format!(
                        "on period must last at least one packet at the flow's rate ({:?})",
                        rate.time_to_send(size)
                    ),
                    Some("a longer `on`, or a `cbr` flow"),
                ));
            }
            TrafficSpec::OnOff { rate, on, off }
        }
        "backlog" => TrafficSpec::Backlog {
            depth: fl.depth.as_ref().map(|q| ctx.uint(q, 100_000)).transpose()?.unwrap_or(4) as u32,
        },
        "tcp" => {
            let cc = match fl.cc.as_ref().map(|q| ctx.text(q)).transpose()?.as_deref() {
                None | Some("cubic") => CongestionControl::Cubic,
                Some("reno") => CongestionControl::Reno,
                Some("bbr") => CongestionControl::Bbr,
                Some(o) => {
                    return Err(ctx.err(
                        fl.cc.as_ref().map(|q| q.span()),
                        format!("unknown cc `{o}`"),
                        Some("reno, cubic or bbr"),
                    ))
                }
            };
            TrafficSpec::Tcp {
                cc,
                bytes: fl.bytes.as_ref().map(|q| ctx.size(q)).transpose()?,
                rwnd: fl.rwnd.as_ref().map(|q| ctx.uint(q, 1 << 24)).transpose()?.unwrap_or(4096) as u32,
            }
        }
        "paced" => {
            let t_ipi = match (&fl.t_ipi, &fl.rate) {
                (Some(q), _) => ctx.time(q)?,
                // Seed 002: idealised throughput = 1/t_ipi · 1492 · 8.
                (None, Some(q)) => ctx.rate(q)?.time_to_send(1492),
                _ => return Err(ctx.err(Some(fl.kind.span()), "paced flow needs t_ipi or rate", None)),
            };
            if t_ipi == Span::ZERO {
                return Err(ctx.err(fl.t_ipi.as_ref().map(|q| q.span()), "t_ipi must be positive", None));
            }
            let timer = fl.timer.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::ZERO);
            let credit = match fl.credit.as_ref().map(|q| ctx.text(q)).transpose()?.as_deref() {
                None | Some("none") => CreditPolicy::None,
                Some("ipi") => CreditPolicy::Ipi,
                Some("rtt") => CreditPolicy::Rtt(ctx.time(&need(&fl.rtt, "rtt")?)?),
                Some(o) => {
                    return Err(ctx.err(
                        fl.credit.as_ref().map(|q| q.span()),
                        format!("unknown credit policy `{o}`"),
                        Some("none, ipi or rtt"),
                    ))
                }
            };
            TrafficSpec::Paced { t_ipi, timer, credit }
        }
        "probe" => {
            let interval =
                fl.interval.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::from_millis(100));
            if interval == Span::ZERO {
                return Err(ctx.err(
                    fl.interval.as_ref().map(|q| q.span()),
                    "interval must be positive",
                    None,
                ));
            }
            TrafficSpec::Probe { interval }
        }
        "streams" => {
            TrafficSpec::StreamGroup { rate: ctx.rate(&need(&fl.rate, "rate")?)?, streams: Vec::new() }
        }
        other => {
            return Err(ctx.err(
                Some(fl.kind.span()),
                format!("unknown flow type `{other}`"),
                Some("cbr, poisson, onoff, backlog, tcp, paced, probe or streams"),
            ))
        }
    };
    let size = if kind == "probe" && fl.size.is_none() { 98 } else { size };
    for i in 0..count {
        let name = if count > 1 { format!("{}.{}", fl.name, i + 1) } else { fl.name.clone() };
        let mut fs = FlowSpec::new(&name, &host, traffic.clone());
        fs.dst = dst.clone();
        fs.size = size as u32;
        fs.gso_segs = gso;
        fs.dsfield = dsfield;
        fs.ecn = ecn;
        fs.download = download;
        fs.mark = mark;
        fs.start = start;
        fs.stop = stop;
        fs.flow_hash = match &tunnel {
            Some(t) => name_hash(t),
            None => name_hash(&format!("{host}>{dst}:{name}")),
        };
        // A tc script's filters read the packet: give the flow its keys and headers.
        let proto = match kind.as_str() {
            "tcp" => sluice_wire::L4::Tcp,
            "probe" => sluice_wire::L4::Icmp,
            _ => sluice_wire::L4::Udp,
        };
        let sport = source_port(out.len());
        tc_wire(ctx, fl, b, &mut fs, proto, sport, dport, tunnel.as_deref(), nat)?;
        if let (Some((_, j)), false) = (base, matches!(traffic, TrafficSpec::StreamGroup { .. })) {
            let idx = j + spread.map(|n| (i * n / count) as u32).unwrap_or(0);
            // The root's `flow map key mark` filter reads the leaf's index (see `backend`).
            fs.mark = idx;
            out.push(fs);
            leaf_of.push(Some(idx));
            continue;
        }
        let class = match (explicit, spread) {
            (Some(c), Some(n)) => Some(Handle::new(c.major(), (c.minor() as u64 + i * n / count) as u32)),
            _ => explicit
                .or_else(|| b.and_then(|b| host_priority(b, &name, &host, dsfield >> 2, mark, fs.flow_hash))),
        };
        // Beside generated leaves (named by the mark filter) other traffic names its class, or
        // the default class (the direct queue without one), as the kernel would send it.
        let class = class.or_else(|| {
            b.and_then(|b| b.leaves.as_ref().map(|g| b.default_class.unwrap_or(g.first.qdisc())))
        });
        set_host_class(&mut fs, class).map_err(|m| ctx.err(Some(fl.kind.span()), m, None))?;
        if let TrafficSpec::StreamGroup { rate, .. } = &traffic {
            let group_idx = out.len();
            out.push(fs);
            leaf_of.push(None);
            let mut streams = Vec::new();
            for st in &fl.stream {
                let ssize = ctx.size(&st.size)? as u32;
                let burst = ctx.uint(&st.burst, 1_000_000)? as u32;
                let mut m = FlowSpec::new(&st.name, &host, TrafficSpec::Member);
                m.size = ssize;
                m.dst = dst.clone();
                m.dsfield = st.dscp.as_ref().map(|q| ctx.uint(q, 63)).transpose()?.unwrap_or(0) as u8 * 4;
                m.start = start;
                m.stop = stop;
                m.flow_hash = name_hash(&format!("{host}>{dst}:{}", st.name));
                let c = match &st.class {
                    Some(q) => Some(ctx.handle(q)?),
                    None => b.and_then(|b| host_priority(b, &st.name, &host, m.dsfield >> 2, 0, m.flow_hash)),
                };
                set_host_class(&mut m, c)
                    .map_err(|m| ctx.err(st.class.as_ref().map(|q| q.span()), m, None))?;
                let sport = source_port(out.len());
                tc_wire(ctx, fl, b, &mut m, sluice_wire::L4::Udp, sport, dport, None, nat)?;
                streams.push(StreamSpec { flow: out.len(), size: ssize, burst });
                out.push(m);
                leaf_of.push(None);
            }
            if streams.is_empty() {
                return Err(ctx.err(
                    Some(fl.kind.span()),
                    format!("streams flow `{}` has no [[flow.stream]]", fl.name),
                    None,
                ));
            }
            out[group_idx].traffic = TrafficSpec::StreamGroup { rate: *rate, streams };
        } else {
            out.push(fs);
            leaf_of.push(None);
        }
    }
    Ok(())
}

/// The source port of the `n`th flow: 10000 upwards, starting again at 10000 after 65535 (a
/// scenario may have up to a million flows).
fn source_port(n: usize) -> u16 {
    10000 + (n % (usize::from(u16::MAX) - 10000 + 1)) as u16
}

/// For a tc-script shaper, what its filters see of `fs`'s packets: the flow keys and template
/// frame of a `proto` flow from `fs.host` to `fs.dst` (and the hashes that parse gives).
#[allow(clippy::too_many_arguments)]
fn tc_wire(
    ctx: &Ctx,
    fl: &FlowFile,
    b: Option<&BuiltShaper>,
    fs: &mut FlowSpec,
    proto: sluice_wire::L4,
    sport: u16,
    dport: u16,
    tunnel: Option<&str>,
    nat: Option<std::net::IpAddr>,
) -> Result<(), ScenarioError> {
    let Some(tc) = b.and_then(|b| b.tc.as_ref()) else { return Ok(()) };
    let w = crate::tcscript::FlowWire {
        host: &fs.host,
        dst: &fs.dst,
        proto,
        sport,
        dport,
        dsfield: fs.dsfield,
        tunnel,
        nat,
    };
    let parsed = tc.flow_wire(&w).map_err(|m| ctx.err(Some(fl.kind.span()), m, None))?;
    fs.keys = parsed.keys;
    fs.frame = parsed.frame;
    fs.flow_hash = parsed.flow_hash;
    fs.host_hashes = Some(parsed.host_hashes);
    fs.nat_orig = parsed.nat_orig;
    Ok(())
}

/// What the sending host puts on a flow's packets to name its class `path` (outermost first):
/// the innermost class in `skb->priority`, which HTB honours; for a generated two-level tree
/// also the site class in the firewall mark, which the root's fw filter reads. Both are 32-bit
/// tc handles: a class whose minor does not fit in 16 bits cannot be named this way.
fn set_host_class(fs: &mut FlowSpec, class: Option<Handle>) -> Result<(), String> {
    if let Some(c) = class {
        fs.priority = c
            .to_tc()
            .ok_or_else(|| format!("class {c} cannot be named in skb->priority (its minor is above ffff)"))?;
    }
    Ok(())
}

impl LeafAccuracy {
    /// Adds the summary to the results' `extra`, under `leaves.*`: counts, the measured rates
    /// of the backlogged leaves (min, median, max) and, when known, their fair rate and the
    /// relative error against it (max and mean of |measured - ideal| / ideal, in %).
    pub fn summarize(&self, case: &mut sluice_report::Case) {
        let x = &mut case.extra;
        x.insert("leaves.count".into(), self.leaves as f64);
        x.insert("leaves.sites".into(), self.sites.max(1) as f64);
        x.insert("leaves.backlogged".into(), self.classes.len() as f64);
        x.insert("leaves.build_ms".into(), self.build_ms);
        let rates: Vec<f64> =
            self.classes.iter().filter_map(|&i| case.classes.get(i)).map(|c| c.achieved_bps).collect();
        if rates.is_empty() || rates.len() != self.classes.len() {
            return;
        }
        let mut sorted = rates.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        x.insert("leaves.rate_min_bps".into(), sorted[0]);
        x.insert("leaves.rate_median_bps".into(), median);
        x.insert("leaves.rate_max_bps".into(), sorted[n - 1]);
        if let Some(ideal) = &self.ideal_bps {
            let errs: Vec<f64> = rates
                .iter()
                .zip(ideal)
                .map(|(m, i)| if *i > 0.0 { (m - i).abs() / i * 100.0 } else { 0.0 })
                .collect();
            x.insert("leaves.ideal_bps".into(), ideal.iter().sum::<f64>() / ideal.len() as f64);
            x.insert("leaves.err_max_pct".into(), errs.iter().cloned().fold(0.0, f64::max));
            x.insert("leaves.err_mean_pct".into(), errs.iter().sum::<f64>() / errs.len() as f64);
        }
    }
}

/// The most virtual time a run may cover.
const MAX_DURATION: Span = Span::from_secs(1_000_000);
/// The most occupancy samples (`duration / step`) a run may take.
const MAX_SAMPLES: u64 = 100_000_000;
/// Events (packet transmissions, samples) a second the simulator handles on one core: measured
/// 4.8e6 (probes every 1 ns) and 5.4e6 (64-byte CBR at 1 Tbit/s) in release builds.
const TRANSMISSIONS_PER_S: f64 = 5e6;
/// The most events a run may be expected to take without `--force`: an hour of wall time.
const MAX_PACKETS: f64 = 3600.0 * TRANSMISSIONS_PER_S;

fn hours(secs: f64) -> String {
    if secs >= 3600.0 {
        format!("{:.1} hours", secs / 3600.0)
    } else {
        format!("{:.0} minutes", (secs / 60.0).ceil())
    }
}

/// Refuses, before anything is allocated, a run that would not end or not fit: returns the key
/// to change and a message with the figure.
/// `shaper` is the shaper's estimated bytes and the packets its queues may hold; `force` lets a
/// run that would take hours go ahead. Returns the memory estimate (bytes).
pub(crate) fn check_budget(
    spec: &SimSpec,
    shaper: (f64, f64),
    force: bool,
) -> Result<f64, (&'static str, String)> {
    let secs = spec.duration.as_secs_f64();
    if spec.duration > MAX_DURATION {
        return Err((
            "duration",
            format!("duration {secs} s is longer than the {} s a run may cover", MAX_DURATION.as_secs_f64()),
        ));
    }
    let samples = spec.duration.as_nanos() / spec.step.as_nanos().max(1);
    if samples > MAX_SAMPLES {
        return Err((
            "step",
            format!("step {:?} over {secs} s is {samples} samples (at most {MAX_SAMPLES})", spec.step),
        ));
    }
    // Packets the run will carry: open-loop flows at their rate; greedy flows at the rate of the
    // slowest forward link (TCP also bounded by its window per round trip).
    let link = spec.forward.iter().filter_map(|l| l.rate.filter(|r| !r.is_zero())).map(|r| r.bps()).min();
    // A shaper's classes bound what passes it (by the sum of their ceilings at most).
    let shaped = (spec.forward.iter().any(|l| l.is_shaper) && !spec.classes.is_empty())
        .then(|| spec.classes.iter().map(|c| c.ceil.bps().max(c.rate.bps())).fold(0u64, u64::saturating_add));
    let bottleneck = match (link, shaped) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let rtt: f64 = spec.forward.iter().chain(&spec.reverse).map(|l| l.delay.as_secs_f64()).sum();
    let mut packets = 0f64;
    let mut tcp_bytes = 0f64;
    let mut tcp_flows = 0f64;
    for (i, f) in spec.flows.iter().enumerate() {
        let bits = f.size.max(1) as f64 * 8.0 * f.gso_segs.max(1) as f64;
        let pps = match &f.traffic {
            TrafficSpec::Cbr { rate } | TrafficSpec::Poisson { rate } | TrafficSpec::OnOff { rate, .. } => {
                rate.bps() as f64 / bits
            }
            TrafficSpec::StreamGroup { rate, .. } => rate.bps() as f64 / bits,
            TrafficSpec::Paced { t_ipi, .. } => 1.0 / t_ipi.as_secs_f64().max(1e-9),
            TrafficSpec::Probe { interval } => 1.0 / interval.as_secs_f64().max(1e-9),
            TrafficSpec::Member => 0.0,
            TrafficSpec::Backlog { .. } | TrafficSpec::Tcp { .. } => {
                let window = match &f.traffic {
                    TrafficSpec::Tcp { rwnd, .. } if rtt > 0.0 => Some(*rwnd as f64 / rtt),
                    _ => None,
                };
                // The shaper's classes bound only what they take: with no link rate, follow the
                // flow's packets into the shaper (HTB's direct queue has no rate).
                let direct = match (link, shaped, window) {
                    (None, Some(_), None) => crate::engine::unshaped(spec, i),
                    _ => None,
                };
                let limit = if direct.is_some() { link } else { bottleneck };
                match (limit.map(|b| b as f64 / bits), window) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => {
                        return Err(match direct {
                            Some((why, fix)) => (
                                "rate",
                                format!(
                                    "flow `{}` sends as fast as it can into HTB's direct queue, \
                                     which no rate limits ({why}), and no forward link has a \
                                     rate: it would send without bound ({fix})",
                                    f.name
                                ),
                            ),
                            None => (
                                "rate",
                                format!(
                                    "flow `{}` sends as fast as it can, and no forward link has a rate \
                                     (nor, for TCP, a delay): it would send without bound",
                                    f.name
                                ),
                            ),
                        })
                    }
                }
            }
        };
        if let TrafficSpec::Tcp { rwnd, .. } = &f.traffic {
            // Packets of the receive window (bytes each: `memory::PER_RWND_PACKET`).
            tcp_bytes += *rwnd as f64;
            tcp_flows += 1.0;
        }
        packets += pps * secs;
    }
    let hops = (spec.forward.len() + spec.reverse.len()).max(1) as f64;
    // Packet transmissions, plus the occupancy samples (one event each step).
    let work = packets * hops + samples as f64;
    if work > MAX_PACKETS && !force {
        return Err((
            "work",
            format!(
                "the run would carry about {packets:.3e} packets over {hops} links: {work:.3e} \
                 events, about {} at {:.0e} a second (at most {MAX_PACKETS:.0e} without --force)",
                hours(work / TRANSMISSIONS_PER_S),
                TRANSMISSIONS_PER_S
            ),
        ));
    }
    // Memory (see `memory`): per flow its records and a latency histogram grown up to the run's
    // end, per time-series bin a few counters per flow, class and link (and the window and RTT
    // of each TCP sender), TCP scoreboards up to their receive window, the shaper's queues and
    // classes, and every packet that can be queued or on a wire at once.
    use super::memory::{self, PER_FLOW, PER_PACKET, PER_RWND_PACKET};
    let nflows = spec.flows.len() as f64;
    let bins = if spec.series { samples as f64 + 1.0 } else { 0.0 };
    let per_bin = nflows * 24.0 + tcp_flows * 16.0 + spec.classes.len() as f64 * 8.0 + hops * 16.0;
    let hist = memory::histogram_bytes(spec.duration.as_nanos());
    // Each hop's own queue (a default pfifo, a link's fq_codel...), and what its wire holds.
    let mut queued = shaper.1 + hops * 10240.0;
    for l in spec.forward.iter().chain(&spec.reverse) {
        if let Some(r) = l.rate {
            queued += r.bps() as f64 / 8.0 * l.delay.as_secs_f64() / 64.0 + 1.0;
        } else {
            queued += f64::INFINITY;
        }
    }
    let sent = packets
        + spec
            .flows
            .iter()
            .map(|f| match f.traffic {
                TrafficSpec::Backlog { depth } => depth as f64,
                _ => 1.0,
            })
            .sum::<f64>();
    let alive = sent.min(queued);
    let need = memory::BASE
        + nflows * (PER_FLOW + hist)
        + hist
        + bins * per_bin
        + tcp_bytes * PER_RWND_PACKET
        + shaper.0
        + hops * 128.0 * 1024.0
        + alive * PER_PACKET;
    let budget = memory::budget();
    if need > budget {
        let key = if bins * per_bin > need / 2.0 { "step" } else { "count" };
        return Err((
            key,
            format!(
                "the run needs about {} of memory, more than the {} it may use",
                memory::gib(need),
                memory::gib(budget)
            ),
        ));
    }
    Ok(need)
}
