//! Conversions: the model to a tc script, and the native TOML form both ways.
//!
//! The tc script re-creates the same tree (`load(export(x)) == x`): objects are emitted parents
//! first, filters in creation order (u32 hash-table ids depend on it), every option explicit.

use crate::model::*;
use crate::tc::args::proto_word;
use crate::tc::show::{classid_str, qdisc_handle_str, qdisc_parent_arg};
use std::fmt::Write;

fn q(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/,+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn ll(l: LinkLayer) -> &'static str {
    match l {
        LinkLayer::Ethernet => "ethernet",
        LinkLayer::Atm => "atm",
    }
}

/// A size table in tc syntax (` stab ...`).
pub fn stab_args(t: &SizeTable) -> String {
    let mut s = String::from(" stab");
    if let Some(l) = t.linklayer {
        let _ = write!(s, " linklayer {}", ll(l));
    }
    if t.overhead != 0 {
        let _ = write!(s, " overhead {}", t.overhead);
    }
    if t.mpu != 0 {
        let _ = write!(s, " mpu {}", t.mpu);
    }
    if t.mtu != 0 {
        let _ = write!(s, " mtu {}", t.mtu);
    }
    if t.tsize != 0 {
        let _ = write!(s, " tsize {}", t.tsize);
    }
    s
}

/// The options of a qdisc in tc syntax (after the kind).
pub fn qdisc_args(o: &QdiscOpts) -> String {
    o.args()
}

/// The options of a class in tc syntax.
pub fn class_args(o: &ClassOpts) -> String {
    o.args()
}

fn action_args(f: &FilterNode, cookie: &dyn Fn(&Action) -> Option<String>) -> String {
    let words = crate::tc::actions::action_words;
    match (f.police_keyword, f.actions.first()) {
        // The filter's own `police` keyword (the kernel's old TCA_*_POLICE).
        (true, Some(a)) => format!(" {}", words(a)),
        _ => f
            .actions
            .iter()
            .map(|a| match cookie(a) {
                Some(c) => format!(" action {} cookie {c}", words(a)),
                None => format!(" action {}", words(a)),
            })
            .collect(),
    }
}

/// The cookie the namespace's action table holds for a filter's own action (tc keeps it there,
/// by kind and index); none for an empty one, which tc neither stores nor reads back.
fn table_cookie(state: &State, a: &Action) -> Option<String> {
    state
        .actions
        .iter()
        .find(|e| e.action.kind() == a.kind() && e.action.index() == a.index())
        // A `tc actions` one has its cookie written with it.
        .filter(|e| !e.standalone)
        .and_then(|e| e.cookie.clone())
        .filter(|c| !c.is_empty())
}

/// The kind-specific part of a filter command (`handle ... KIND ...`).
pub fn filter_args(f: &FilterNode) -> String {
    filter_args_with(f, &|_| None)
}

/// [`filter_args`], with each action's cookie from `cookie`.
fn filter_args_with(f: &FilterNode, cookie: &dyn Fn(&Action) -> Option<String>) -> String {
    let mut s = f.opts.args(f);
    s.push_str(&action_args(f, cookie));
    s
}

/// Classes of `q` in creation order: a parent always precedes its children there, and the
/// order is what the model compares.
fn class_order(dev: &Device, q: &QdiscNode, out: &mut Vec<ClassNode>) {
    out.extend(dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle).cloned());
}

/// The state with allocation counters reset (what a freshly loaded export has): configurations
/// are equal when their normalised states are.
pub fn normalized(state: &State) -> State {
    let mut s = state.clone();
    s.next_auto_handle = 0x8001;
    for d in &mut s.devices {
        d.next_auto_handle = 0x8001;
        for b in &mut d.u32_blocks {
            b.roots_created = 0;
        }
        d.u32_blocks.retain(|b| d.filters.iter().any(|f| f.parent == b.block));
    }
    s
}

/// The first handle of `state` that tc's grammar cannot write (a class minor above `ffff`, which
/// only the native form holds), with its device.
pub fn first_wide_handle(state: &State) -> Option<(&str, Handle)> {
    state.devices.iter().find_map(|d| {
        let wide = |h: &Handle| h.to_tc().is_none();
        let qdiscs = d.qdiscs.iter().flat_map(|q| {
            let def = match &q.opts {
                QdiscOpts::Htb(h) => Some(Handle::new(q.handle.major(), h.default)),
                _ => None,
            };
            [q.handle, q.parent].into_iter().chain(def)
        });
        let classes = d.classes.iter().flat_map(|c| [c.classid, c.parent]);
        let filters = d
            .filters
            .iter()
            .flat_map(|f| [Some(f.parent), f.opts.classid(), f.opts.target()].into_iter().flatten());
        qdiscs.chain(classes).chain(filters).find(wide).map(|h| (d.name.as_str(), h))
    })
}

/// Emits a tc script that rebuilds `state`. Handles with minors above `ffff` (see
/// [`first_wide_handle`]) are written in the same hex form, which only Sluice's native grammar
/// reads back; real tc refuses them.
pub fn to_tc_script(state: &State) -> String {
    let mut s = String::from(
        "#!/bin/sh\n# Generated by sluice export. Run with TC=tc (or sluice tc).\nTC=${TC:-tc}\n",
    );
    // Actions made with `tc actions` first: filters bind them by index.
    let standalone: Vec<&ActionEntry> = state.actions.iter().filter(|e| e.standalone).collect();
    if !standalone.is_empty() {
        s.push_str("\n# actions\n");
    }
    for e in standalone {
        // tc stores no cookie for an empty one, and `cookie` with nothing after it is refused.
        let cookie =
            e.cookie.as_ref().filter(|c| !c.is_empty()).map(|c| format!(" cookie {c}")).unwrap_or_default();
        let _ = writeln!(s, "$TC actions add action {}{cookie}", crate::tc::actions::action_words(&e.action));
    }
    let mut made: Vec<&str> = Vec::new();
    for dev in &state.devices {
        let d = q(&dev.name);
        let _ = writeln!(s, "\n# device {}", dev.name);
        match &dev.kind {
            DevKind::Dummy => {
                let _ = writeln!(s, "ip link add dev {d} type dummy 2>/dev/null || true");
            }
            DevKind::Veth { peer } if !made.contains(&peer.as_str()) => {
                let _ =
                    writeln!(s, "ip link add dev {d} type veth peer name {} 2>/dev/null || true", q(peer));
            }
            DevKind::Veth { .. } => {}
            DevKind::Ifb => {
                let _ = writeln!(s, "ip link add dev {d} type ifb 2>/dev/null || true");
            }
        }
        made.push(&dev.name);
        if dev.mtu != 1500 || dev.txqueuelen != 1000 {
            let _ = writeln!(s, "ip link set dev {d} mtu {} txqueuelen {}", dev.mtu, dev.txqueuelen);
        }
        if let Some(r) = dev.link_rate {
            let _ = writeln!(s, "# sluice: link-rate {} {}bit", dev.name, r);
        }
        // Creation order: a parent qdisc always precedes its children; each qdisc's classes
        // follow it, before any qdisc is attached to them. A class whose parent class holds a
        // qdisc not written yet waits (with every class after it) until that qdisc is: a kernel
        // may keep a qdisc on a class that later got children (HFSC does), but cannot graft one
        // on an inner class. Nothing is reordered, only delayed.
        let mut pending: Vec<(usize, std::collections::VecDeque<ClassNode>)> = Vec::new();
        let mut written = vec![false; dev.qdiscs.len()];
        for (i, qd) in dev.qdiscs.iter().enumerate() {
            let h = qd.handle;
            let kind = qd.opts.kind();
            if qd.parent == H_INGRESS {
                let _ = writeln!(s, "$TC qdisc add dev {d} {kind}");
            } else {
                let _ = writeln!(
                    s,
                    "$TC qdisc add dev {d} {} handle {}{} {kind}{}",
                    qdisc_parent_arg(qd.parent),
                    qdisc_handle_str(h),
                    qd.stab.map(|t| stab_args(&t)).unwrap_or_default(),
                    qdisc_args(&qd.opts)
                );
            }
            written[i] = true;
            let mut cls = Vec::new();
            class_order(dev, qd, &mut cls);
            pending.push((i, cls.into()));
            for (q, classes) in &mut pending {
                let qd = &dev.qdiscs[*q];
                while let Some(c) = classes.front() {
                    let waits =
                        dev.qdiscs.iter().enumerate().any(|(j, g)| g.parent == c.parent && !written[j]);
                    if waits {
                        break;
                    }
                    let p =
                        if c.parent == qd.handle { classid_str(qd.handle) } else { classid_str(c.parent) };
                    let _ = writeln!(
                        s,
                        "$TC class add dev {d} parent {p} classid {} {}{}",
                        classid_str(c.classid),
                        qd.opts.kind(),
                        class_args(&c.opts)
                    );
                    classes.pop_front();
                }
            }
            pending.retain(|(_, c)| !c.is_empty());
        }
        for f in &dev.filters {
            let implicit = f.opts.implicit(f.handle);
            // An object the kernel makes with the classifier (u32's root table) comes with the
            // first filter of its priority; one that stands alone (`filter add ... prio N u32`
            // with nothing else) is written as the bare kind.
            let alone = || {
                !dev.filters.iter().any(|g| {
                    !std::ptr::eq(g, f) && g.parent == f.parent && g.prio == f.prio && g.chain == f.chain
                })
            };
            if implicit && !alone() {
                continue;
            }
            let parent = match f.parent {
                // Added as `parent ffff:`: show names that parent, so write it the same way.
                H_MIN_INGRESS => match dev.ingress_filter_parent {
                    Some(p) if p != H_MIN_INGRESS => format!("parent {}", classid_str(p)),
                    _ => "ingress".to_string(),
                },
                H_MIN_EGRESS => "egress".to_string(),
                p => format!("parent {}", classid_str(p)),
            };
            let args = if implicit {
                format!(" {}", f.opts.kind())
            } else {
                filter_args_with(f, &|a| table_cookie(state, a))
            };
            let _ = writeln!(
                s,
                "$TC filter add dev {d} {parent} protocol {} prio {}{}{args}",
                proto_word(f.protocol),
                f.prio,
                if f.chain != 0 { format!(" chain {}", f.chain) } else { String::new() },
            );
        }
    }
    s
}

/// Errors reading the native form.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct NativeError {
    /// What is wrong.
    pub message: String,
    /// Byte range in the input, when known.
    pub span: Option<std::ops::Range<usize>>,
}

/// The native TOML form of a configuration.
pub fn to_toml(state: &State) -> Result<String, NativeError> {
    toml::to_string_pretty(state).map_err(|e| {
        let at = serde_json::to_value(state).ok().and_then(|v| too_big_for_toml(&v, String::new()));
        let message = match at {
            Some((path, v)) => format!("{path} = {v} does not fit TOML's integers (at most {})", i64::MAX),
            None => e.to_string(),
        };
        NativeError { message, span: None }
    })
}

/// The path and value of the first number above `i64::MAX` in `v` (TOML integers are i64).
fn too_big_for_toml(v: &serde_json::Value, path: String) -> Option<(String, u64)> {
    use serde_json::Value;
    match v {
        Value::Number(n) => n.as_u64().filter(|&x| x > i64::MAX as u64).map(|x| (path, x)),
        Value::Array(a) => {
            a.iter().enumerate().find_map(|(i, x)| too_big_for_toml(x, format!("{path}[{i}]")))
        }
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            too_big_for_toml(x, if path.is_empty() { k.clone() } else { format!("{path}.{k}") })
        }),
        _ => None,
    }
}

/// Reads the native TOML form, then re-applies every object through the kernel checks so that a
/// hand-written file cannot hold what tc would refuse.
pub fn from_toml(text: &str) -> Result<State, NativeError> {
    let state: State =
        toml::from_str(text).map_err(|e| NativeError { message: e.message().to_string(), span: e.span() })?;
    let script = to_tc_script(&state);
    let grammar = crate::tc::Grammar::Native;
    let loaded =
        crate::script::load_script_in("<toml>", &script, &Default::default(), grammar).map_err(|e| {
            NativeError { message: format!("the configuration is not valid: {}", e.message), span: None }
        })?;
    drop(loaded);
    Ok(state)
}
