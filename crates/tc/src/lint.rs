//! `sluice lint`: what is wrong with a configuration that tc accepts.
//!
//! Each finding has a code, the object, an explanation and a suggested fix. The burst check uses
//! a wake-up lateness model: a shaper that runs late by `J` can send at most `burst` bytes per
//! run, so it achieves `rate / (1 + J·rate/burst)`. Kernel HTB is re-run by packet events most of
//! the time and by its timer only when idle, so the effective lateness is a fraction of the timer
//! jitter; that fraction is calibrated on DESIGN.md's measurement (default 1600b burst on a veth
//! testbed: −2.6% at 1G, −7.2% at 2G, −14.3% at 5G, −19.1% at 10G; the fit gives −2.6/−5.1/
//! −11.9/−21.2%). Suggested bursts follow [`crate::burst::kernel_burst`], the rule `sluice apply`
//! uses for kernel bursts left out: `rate × 4 ms`, which covers the wake-up tail and the sender's
//! own gaps, not just the mean (see that module for the measurements).

use crate::burst::{recommended_burst, KERNEL_JITTER_BUDGET_US};
use crate::model::*;
use crate::script::Loaded;
use crate::tc::args::get_tc_classid;
use crate::tc::show::classid_str;
use sluice_core::units::{format_rate, format_size};
use sluice_core::Rate;
use std::collections::HashMap;

/// Share of the mean timer wake-up jitter that a busy shaper effectively waits per burst,
/// fitted to DESIGN.md's kernel HTB figures (0.345 µs effective at 80 µs mean jitter).
pub const EVENT_FRACTION: f64 = 0.00431;

/// Lint settings.
#[derive(Clone, Debug)]
pub struct LintOpts {
    /// Mean timer wake-up jitter in µs (80 on the measured VMs).
    pub jitter_us: f64,
    /// Link rate in bit/s for devices without a `# sluice: link-rate` directive.
    pub link_rate: Option<u64>,
    /// Traffic on these devices is tunnelled (flow keys check); `*` for all.
    pub tunnels: Vec<String>,
    /// Report a burst shortfall above this fraction (0.01 = 1%).
    pub shortfall_threshold: f64,
}

impl Default for LintOpts {
    fn default() -> Self {
        LintOpts { jitter_us: 80.0, link_rate: None, tunnels: vec![], shortfall_threshold: 0.01 }
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Finding {
    /// Stable code, e.g. `L001`.
    pub code: &'static str,
    /// Short name, e.g. `burst-too-small`.
    pub name: &'static str,
    /// Device.
    pub dev: String,
    /// Object, e.g. `class 1:10`.
    pub object: String,
    /// Script line that created the object, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// Why it matters.
    pub why: String,
    /// Suggested fix.
    pub fix: String,
    /// Predicted throughput shortfall (fraction) for burst findings.
    pub shortfall: Option<f64>,
}

/// Predicted shortfall of a token bucket of `burst` bytes at `rate_bps` with mean jitter `j_us`.
pub fn burst_shortfall(rate_bps: u64, burst: u32, j_us: f64) -> f64 {
    let j = j_us * 1e-6 * EVENT_FRACTION;
    let rb = rate_bps as f64 / 8.0;
    let lost = j * rb;
    lost / (burst.max(1) as f64 + lost)
}

/// The burst lint suggests for `rate_bps` with packets up to `mtu`: the rule `sluice apply`
/// programs, [`crate::burst::recommended_burst`] with [`KERNEL_JITTER_BUDGET_US`].
pub fn suggested_burst(rate_bps: u64, mtu: u32) -> u64 {
    recommended_burst(rate_bps, mtu, KERNEL_JITTER_BUDGET_US)
}

fn rate(b: u64) -> String {
    format_rate(Rate::from_bps(b))
}

/// The script, indexed once: lint looks up the line of many objects, and a scan of the
/// commands per object was quadratic (72 s for a 20 000-line subscriber script).
#[derive(Default)]
struct ScriptIndex<'a> {
    /// (device, `classid`|`handle`, id as written) → (command index, line) of the last command.
    line: HashMap<(&'a str, &'a str, Handle), (usize, usize)>,
    /// (device, minor of `classid`) → (command index, `parent`) of the last `class` command
    /// naming a parent.
    class_parent: HashMap<(&'a str, u32), (usize, Handle)>,
}

impl<'a> ScriptIndex<'a> {
    fn new(loaded: Option<&'a Loaded>) -> Self {
        let mut ix = ScriptIndex::default();
        for (k, (line, argv)) in loaded.into_iter().flat_map(|l| l.commands.iter()).enumerate() {
            let word = |key: &str| argv.windows(2).find(|w| w[0] == key).and_then(|w| get_tc_classid(&w[1]));
            let is_class = argv.iter().any(|a| a == "class");
            for dev in argv.windows(2).filter(|w| w[0] == "dev").map(|w| w[1].as_str()) {
                for w in argv.windows(2) {
                    let key = match w[0].as_str() {
                        "classid" => "classid",
                        "handle" => "handle",
                        _ => continue,
                    };
                    if let Some(h) = get_tc_classid(&w[1]) {
                        ix.line.insert((dev, key, h), (k, *line));
                    }
                }
                if let (true, Some(cid), Some(par)) = (is_class, word("classid"), word("parent")) {
                    ix.class_parent.insert((dev, cid.minor()), (k, par));
                }
            }
        }
        ix
    }

    /// The script line that created `id` (`classid X` or `handle X`) on `dev`.
    fn line_of(&self, dev: &str, key: &str, id: Handle) -> Option<usize> {
        let at = |h: Handle| self.line.get(&(dev, key, h)).copied();
        let alt = if key == "handle" { at(id.qdisc()) } else { None };
        at(id).max(alt).map(|(_, line)| line)
    }
}

/// Classes of one device, indexed (children and lookups per class would be quadratic).
struct ClassIndex<'a> {
    by_id: HashMap<Handle, &'a ClassNode>,
    children: HashMap<Handle, Vec<&'a ClassNode>>,
}

impl<'a> ClassIndex<'a> {
    fn new(dev: &'a Device) -> Self {
        let mut children: HashMap<Handle, Vec<&ClassNode>> = HashMap::new();
        for c in &dev.classes {
            children.entry(c.parent).or_default().push(c);
        }
        ClassIndex { by_id: dev.classes.iter().map(|c| (c.classid, c)).collect(), children }
    }

    fn children(&self, id: Handle) -> &[&'a ClassNode] {
        self.children.get(&id).map_or(&[], Vec::as_slice)
    }
}

/// Runs every check.
pub fn lint(state: &State, loaded: Option<&Loaded>, o: &LintOpts) -> Vec<Finding> {
    let mut f = Vec::new();
    let script = ScriptIndex::new(loaded);
    for dev in &state.devices {
        let cx = ClassIndex::new(dev);
        let mk = |code, name, object: String, line, message: String, why: &str, fix: String| Finding {
            code,
            name,
            dev: dev.name.clone(),
            object,
            line,
            message,
            why: why.to_string(),
            fix,
            shortfall: None,
        };
        let link = dev.link_rate.or(o.link_rate);
        for q in &dev.qdiscs {
            let qline = script.line_of(&dev.name, "handle", q.handle);
            let qname = format!("qdisc {} {}", q.opts.kind(), classid_str(q.handle));
            match &q.opts {
                QdiscOpts::Htb(h) => htb_checks(dev, &cx, q, h, o, &script, &mut f),
                QdiscOpts::Tbf(t) => {
                    let s = burst_shortfall(t.rate, t.burst, o.jitter_us);
                    if s > o.shortfall_threshold {
                        let sb = suggested_burst(t.rate, t.mtu.unwrap_or(0));
                        let mut x = mk(
                            "L001",
                            "burst-too-small",
                            qname.clone(),
                            qline,
                            format!("burst {} at {} is predicted to deliver {:.1}% less than the rate", format_size(t.burst as u64), rate(t.rate), s * 100.0),
                            "a shaper that runs late cannot send more than one burst per run; at high rates one burst lasts less than a timer wake-up",
                            format!("burst {} (= rate × {} µs wake-up budget, rounded up)", format_size(sb), KERNEL_JITTER_BUDGET_US),
                        );
                        x.shortfall = Some(s);
                        f.push(x);
                    }
                    if let Some(l) = link {
                        if q.parent == H_ROOT && t.rate as f64 >= 0.95 * l as f64 {
                            f.push(mk("L010", "shaper-at-link-rate", qname.clone(), qline,
                                format!("rate {} is at or above 95% of the link rate {}", rate(t.rate), rate(l)),
                                "the queue then builds in the modem or the next hop, not here, and the AQM/fairness configured here never acts (seed 003)",
                                format!("shape to 85-95% of the link rate, e.g. rate {}", rate(l / 100 * 90))));
                        }
                    }
                }
                QdiscOpts::Sfq(s) if s.perturb.is_some_and(|p| p != 0) => f.push(mk(
                    "L007",
                    "sfq-perturb",
                    qname.clone(),
                    qline,
                    format!("perturb {}sec rehashes every flow periodically", s.perturb.unwrap_or(0)),
                    "each perturbation moves flows to new buckets, reordering packets and briefly letting colliding flows burst; modern SFQ already hashes with a random per-qdisc key",
                    "drop `perturb`".into(),
                )),
                QdiscOpts::PfifoFast(_) => f.push(mk(
                    "L008",
                    "pfifo-fast-tos",
                    qname.clone(),
                    qline,
                    "pfifo_fast maps packets to bands by the RFC 1349 TOS bits".into(),
                    "the legacy TOS mapping ignores DSCP and, before the 2011 fix, sent ECN-capable flows to the low-priority band (seed 003)",
                    "use fq_codel (or prio with an explicit priomap and DSCP filters)".into(),
                )),
                QdiscOpts::Prio(p) if p.priomap == DEFAULT_PRIOMAP && p.bands == 3 => f.push(mk(
                    "L008",
                    "prio-legacy-priomap",
                    qname.clone(),
                    qline,
                    "prio uses the default RFC 1349 TOS priomap".into(),
                    "the legacy mapping ignores DSCP and sends 'minimize cost' traffic (and ECN-capable traffic on old kernels) to the low band",
                    "give an explicit priomap and classify with DSCP filters".into(),
                )),
                _ => {}
            }
        }
        // Shaper at link rate for HTB: the root class of the root qdisc.
        if let (Some(l), Some(root)) = (link, dev.root()) {
            if let QdiscOpts::Htb(_) = root.opts {
                let top: Vec<(Handle, u64)> = cx
                    .children(root.handle)
                    .iter()
                    .filter_map(|c| match &c.opts {
                        ClassOpts::Htb(h) => Some((c.classid, h.ceil)),
                        _ => None,
                    })
                    .collect();
                let total: u64 = top.iter().map(|(_, c)| *c).max().unwrap_or(0);
                if total as f64 >= 0.95 * l as f64 {
                    let id = top.iter().max_by_key(|t| t.1).map(|t| t.0).unwrap_or(root.handle);
                    f.push(mk("L010", "shaper-at-link-rate", format!("class {}", classid_str(id)), script.line_of(&dev.name, "classid", id),
                        format!("ceil {} is at or above 95% of the link rate {}", rate(total), rate(l)),
                        "the queue then builds in the modem or the next hop, not here, and the fairness and AQM below never act (seed 003)",
                        format!("shape to 85-95% of the link rate, e.g. ceil {}", rate(l / 100 * 90))));
                }
            }
        }
        let tunnelled = o.tunnels.iter().any(|t| t == "*" || t == &dev.name)
            || ["tun", "gre", "ipip", "sit", "ip6tnl", "wg", "vti", "vxlan", "geneve"]
                .iter()
                .any(|p| dev.name.starts_with(p));
        for fl in &dev.filters {
            if let FilterOpts::Flow(x) = &fl.opts {
                let proto_ports = x.keys & ((1 << 3) | (1 << 4)) != 0;
                let tunnel_keys = x.keys >> FLOW_KEYS.len() != 0;
                if proto_ports && !tunnel_keys && tunnelled {
                    f.push(mk("L009", "flow-keys-tunnel", format!("filter pref {} flow handle {:#x}", fl.prio, fl.handle), None,
                        "flow keys proto-src/proto-dst on tunnelled traffic".into(),
                        "on IPIP/GRE packets the kernel has no ports to read: proto-dst falls back to a hash of the route (which varies with TOS) and proto-src to the socket, so all tunnelled flows collapse into one bucket or split arbitrarily (seed 003)",
                        "add tunnel-src,tunnel-dst,tunnel-proto,tunnel-proto-src,tunnel-proto-dst to the keys (Sluice), or classify before encapsulation".into()));
                }
            }
        }
    }
    f
}

fn htb_checks(
    dev: &Device,
    cx: &ClassIndex,
    q: &QdiscNode,
    h: &HtbOpts,
    o: &LintOpts,
    script: &ScriptIndex,
    f: &mut Vec<Finding>,
) {
    let classes: Vec<&ClassNode> = dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).collect();
    let push =
        |f: &mut Vec<Finding>, code, name, id: Handle, message: String, why: &str, fix: String, shortfall| {
            f.push(Finding {
                code,
                name,
                dev: dev.name.clone(),
                object: format!("class {}", classid_str(id)),
                line: script.line_of(&dev.name, "classid", id),
                message,
                why: why.to_string(),
                fix,
                shortfall,
            })
        };
    // Default class.
    let qline = script.line_of(&dev.name, "handle", q.handle);
    let qname = format!("qdisc htb {}", classid_str(q.handle));
    if h.default != 0 {
        let def = Handle::new(q.handle.major(), h.default);
        match cx.by_id.get(&def) {
            None => f.push(Finding {
                code: "L006",
                name: "default-class-missing",
                dev: dev.name.clone(),
                object: qname.clone(),
                line: qline,
                message: format!("default class {} does not exist", classid_str(def)),
                why: "unclassified traffic then goes to the direct queue, which is not shaped at all".into(),
                fix: format!("add `class ... classid {}` or set `default` to an existing leaf (tc parses default in hex)", classid_str(def)),
                shortfall: None,
            }),
            Some(_) if !cx.children(def).is_empty() => f.push(Finding {
                code: "L006",
                name: "default-class-not-leaf",
                dev: dev.name.clone(),
                object: qname.clone(),
                line: qline,
                message: format!("default class {} has children", classid_str(def)),
                why: "HTB only falls back to a leaf; an inner default sends unclassified traffic to the unshaped direct queue".into(),
                fix: "point `default` at a leaf class".into(),
                shortfall: None,
            }),
            _ => {}
        }
    } else if !dev.filters.iter().any(|x| x.parent.qdisc() == q.handle) && !classes.is_empty() {
        f.push(Finding {
            code: "L006",
            name: "no-default-class",
            dev: dev.name.clone(),
            object: qname.clone(),
            line: qline,
            message: "no default class and no filters".into(),
            why: "every packet goes to the direct queue, unshaped".into(),
            fix: "set `default MINOR` to a leaf class, or add filters".into(),
            shortfall: None,
        });
    }
    let (mut r2q_lo, mut r2q_hi) = (1u64, u64::MAX);
    for c in &classes {
        let ClassOpts::Htb(x) = &c.opts else { continue };
        // The parent the script asked for (a class command's `classid` may omit the major).
        let requested = script.class_parent.get(&(dev.name.as_str(), c.classid.minor())).map(|p| p.1);
        let unknown = requested.is_some_and(|p| p.minor() != 0 && p != H_ROOT && !cx.by_id.contains_key(&p));
        if unknown || (c.parent != q.handle && !cx.by_id.contains_key(&c.parent)) {
            let p = requested.unwrap_or(c.parent);
            push(f, "L011", "unknown-parent", c.classid, format!("parent {} does not exist; the kernel made this a root class", classid_str(p)), "HTB silently attaches classes with an unknown parent at the top of the tree, outside the intended limits", "create the parent class first".into(), None);
        }
        if x.ceil < x.rate {
            push(
                f,
                "L005",
                "ceil-below-rate",
                c.classid,
                format!("ceil {} is below rate {}", rate(x.ceil), rate(x.rate)),
                "the class can never use its guaranteed rate; the kernel accepts it silently",
                format!("ceil {} (or lower the rate)", rate(x.rate)),
                None,
            );
        }
        let leaf = cx.children(c.classid).is_empty();
        let kids: Vec<&HtbClassOpts> = cx
            .children(c.classid)
            .iter()
            .filter_map(|k| match &k.opts {
                ClassOpts::Htb(h) => Some(h),
                _ => None,
            })
            .collect();
        let sum: u64 = kids.iter().map(|k| k.rate).sum();
        if !kids.is_empty() && sum > x.rate {
            push(f, "L004", "children-exceed-parent", c.classid, format!("children are guaranteed {} in total but the class has rate {}", rate(sum), rate(x.rate)), "guarantees that add up to more than the parent cannot all be met; children then borrow unpredictably", format!("raise the rate to {} or lower the children's rates", rate(sum)), None);
        }
        for (what, r, b) in [("burst", x.rate, x.burst), ("cburst", x.ceil, x.cburst)] {
            let s = burst_shortfall(r, b, o.jitter_us);
            if s > o.shortfall_threshold {
                let sb = suggested_burst(r, x.mtu);
                push(f, "L001", "burst-too-small", c.classid,
                    format!("{what} {} at {} is predicted to deliver {:.1}% less than the rate ({} µs mean wake-up jitter)", format_size(b as u64), rate(r), s * 100.0, o.jitter_us),
                    "a shaper that runs late cannot send more than one burst per run; tc sizes the default burst for a 1 ms tick that high-resolution timers removed (DESIGN.md measures -19% at 10 Gbit)",
                    format!("{what} {} (= {} × {} µs wake-up budget, rounded up)", format_size(sb), rate(r), KERNEL_JITTER_BUDGET_US), Some(s));
            }
        }
        if leaf && x.rate >= 100_000_000 && x.mtu < 65536 && x.burst < 65536 {
            push(f, "L002", "mtu-below-gso", c.classid,
                format!("class mtu {} and burst {} are smaller than a 64 KiB GSO/TSO packet", x.mtu, format_size(x.burst as u64)),
                "at these rates the stack hands the qdisc 64 KiB TSO/GSO packets; each overdraws a bucket sized for MTU packets, so the class alternates between bursts and stalls (seed 000)",
                "mtu 65536 (tc then sizes burst and the rate table for GSO packets) or disable TSO/GSO with ethtool".into(), None);
        }
        if leaf && x.quantum.is_none() {
            let qn = x.rate / 8 / h.r2q.max(1) as u64;
            r2q_lo = r2q_lo.max((x.rate / 8).div_ceil(200_000));
            r2q_hi = r2q_hi.min((x.rate / 8 / 1000).max(1));
            if !(1000..=200_000).contains(&qn) {
                let dir = if qn < 1000 { "small" } else { "big" };
                push(f, "L003", "quantum-out-of-range", c.classid,
                    format!("quantum rate/r2q = {qn} is too {dir}; the kernel clamps it to {}", qn.clamp(1000, 200_000)),
                    "the DRR quantum decides how excess bandwidth is shared between siblings; clamped quanta no longer follow the rates",
                    String::new(), None);
            }
        }
    }
    // r2q advice on every quantum finding of this qdisc.
    let advice = if r2q_lo <= r2q_hi {
        format!("set `r2q {}` on qdisc {} (valid for all leaves: {}..={}), or give each class an explicit `quantum`", r2q_lo.max(1), classid_str(q.handle), r2q_lo, r2q_hi)
    } else {
        "no single r2q fits these rates: give the classes explicit `quantum` values (e.g. 1514 × rate share)"
            .to_string()
    };
    for x in f.iter_mut().filter(|x| x.code == "L003" && x.fix.is_empty()) {
        x.fix = advice.clone();
    }
}

/// Renders findings like a compiler.
pub fn render(findings: &[Finding], file: &str) -> String {
    let mut s = String::new();
    for x in findings {
        s.push_str(&format!("warning[{} {}]: {} {}: {}\n", x.code, x.name, x.dev, x.object, x.message));
        if let Some(l) = x.line {
            s.push_str(&format!("  --> {file}:{l}\n"));
        }
        s.push_str(&format!("  = why: {}\n  = fix: {}\n\n", x.why, x.fix));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_reproduces_design_measurements() {
        // DESIGN.md: default 1600b burst: -2.6% at 1G, -7.2% at 2G, -14.3% at 5G, -19.1% at 10G.
        for (g, measured) in [(1u64, 0.026), (2, 0.072), (5, 0.143), (10, 0.191)] {
            let s = burst_shortfall(g * 1_000_000_000, 1600, 80.0);
            assert!((s - measured).abs() < 0.03, "{g}G: model {s:.3} vs measured {measured}");
        }
        assert!(burst_shortfall(100_000_000, 1600, 80.0) < 0.01, "100M measured 0.0%");
        // A 1m burst (measured -0.2..-0.4%) is predicted fine.
        assert!(burst_shortfall(10_000_000_000, 1 << 20, 80.0) < 0.01);
        // The suggestion is the shared rule, and it is predicted to fix the finding.
        let sb = suggested_burst(10_000_000_000, 1600);
        assert_eq!(sb, recommended_burst(10_000_000_000, 1600, KERNEL_JITTER_BUDGET_US));
        assert!(burst_shortfall(10_000_000_000, sb as u32, 80.0) < LintOpts::default().shortfall_threshold);
    }
}
