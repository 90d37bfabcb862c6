//! Drawing a configuration: Graphviz DOT, and SVG laid out here (no Graphviz needed).
//!
//! The tree is device → qdisc → classes → leaf qdiscs, like tcviz; filters are dashed edges from
//! the qdisc whose block holds them to the class they select, labelled with what they match.
//! With statistics (a results JSON or a `tc -s class show` dump) classes show achieved rate and drops.

use crate::model::*;
use crate::tc::show::classid_str;
use sluice_core::units::format_rate;
use sluice_core::Rate;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A time in microseconds (the model's unit) as tc prints it (`5ms`).
/// Per-class measurements to draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassStats {
    /// Achieved rate, bit/s.
    pub achieved_bps: Option<u64>,
    /// Bytes sent.
    pub bytes: Option<u64>,
    /// Packets sent.
    pub packets: Option<u64>,
    /// Drops.
    pub drops: Option<u64>,
}

/// Stats keyed by class id string (`1:10`).
pub type StatsMap = BTreeMap<String, ClassStats>;

/// Reads a results JSON (`{"cases":[{"classes":[{"id","achieved_bps","bytes","packets","drops",...}]}]}`,
/// case `case`), or a `tc -s class show` dump.
pub fn parse_stats(text: &str, case: usize) -> Result<StatsMap, String> {
    let mut m = StatsMap::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let cases = v.get("cases").and_then(|c| c.as_array()).ok_or("results JSON has no \"cases\" array")?;
        let c = cases
            .get(case)
            .ok_or_else(|| format!("results JSON has {} case(s), asked for #{case}", cases.len()))?;
        for cl in c.get("classes").and_then(|x| x.as_array()).into_iter().flatten() {
            let Some(id) = cl.get("id").and_then(|x| x.as_str()) else {
                continue;
            };
            let n = |k: &str| cl.get(k).and_then(|x| x.as_f64()).map(|f| f as u64);
            m.insert(
                id.to_string(),
                ClassStats {
                    achieved_bps: n("achieved_bps"),
                    bytes: n("bytes"),
                    packets: n("packets"),
                    drops: n("drops"),
                },
            );
        }
        return Ok(m);
    }
    // `tc -s class show`: "class htb 1:10 ..." then " Sent N bytes M pkt (dropped D, ...".
    let mut cur: Option<String> = None;
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"class") && w.len() >= 3 {
            cur = Some(w[2].to_string());
        } else if w.first() == Some(&"Sent") && w.len() >= 7 {
            if let Some(id) = cur.take() {
                let num = |s: &str| s.trim_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().ok();
                m.insert(
                    id,
                    ClassStats { achieved_bps: None, bytes: num(w[1]), packets: num(w[3]), drops: num(w[6]) },
                );
            }
        }
    }
    if m.is_empty() {
        return Err("no class statistics found (expected a results JSON or `tc -s class show` output)".into());
    }
    Ok(m)
}

/// A class's measured rate drawn as a bar inside its box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bar {
    /// Achieved / ceil (may exceed 1).
    pub fill: f64,
    /// Rate / ceil: where the guarantee ends.
    pub rate: f64,
    /// Within the guarantee (achieved ≤ rate, 1% slack).
    pub within_rate: bool,
}

/// A drawable node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Stable id.
    pub id: String,
    /// Lines of text: what is configured (the first is the node's name).
    pub lines: Vec<String>,
    /// Lines of text: what was measured (drawn in green).
    pub stats: Vec<String>,
    /// Kind: "dev", "qdisc", "class", or "group" (identical sibling leaves drawn once).
    pub kind: &'static str,
    /// Children in the tree.
    pub children: Vec<usize>,
    /// Measured rate against rate and ceil.
    pub bar: Option<Bar>,
    /// Tags of the filters that select this node (`f1`, ...), set by [`build_graph`].
    pub filter_tags: Vec<String>,
}

/// A filter edge.
#[derive(Clone, Debug)]
pub struct FilterEdge {
    /// From node index.
    pub from: usize,
    /// To node index.
    pub to: usize,
    /// Further targets (a flow filter's spread over baseclass + 1 ..).
    pub also: Vec<usize>,
    /// What it matches (one line per filter).
    pub label: String,
}

/// The drawable graph.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Nodes; roots are devices. Nodes folded into a group stay here but are no longer reachable.
    pub nodes: Vec<Node>,
    /// Device nodes.
    pub roots: Vec<usize>,
    /// Filter edges.
    pub filters: Vec<FilterEdge>,
}

impl Graph {
    /// Node indices reachable from the roots, parents before children.
    pub fn reachable(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            out.push(i);
            stack.extend(self.nodes[i].children.iter().rev());
        }
        out
    }
}

/// A measured rate, rounded for reading: `300Kbit`, `4.39Mbit`, `1.2Gbit` (tc's units, three
/// significant digits).
pub fn rate_short(bps: f64) -> String {
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "Gbit")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit")
    } else if bps >= 1e3 {
        (bps / 1e3, "Kbit")
    } else {
        (bps, "bit")
    };
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    format!("{s}{u}")
}
fn rate(b: u64) -> String {
    format_rate(Rate::from_bps(b))
}

fn qdisc_summary(q: &QdiscOpts) -> Option<String> {
    q.label()
}

/// What a filter matches, short.
pub fn filter_label(f: &FilterNode) -> String {
    let mut s = f.opts.label(f);
    s = format!("pref {} {s}", f.prio);
    for a in &f.actions {
        s.push_str(&a.label().expect("every action kind is in the registry"));
    }
    s
}

/// Builds the graph, annotating classes with `stats`; runs of identical sibling leaves are drawn
/// as one group node ([`MIN_GROUP`] or more), and filters are tagged on the nodes they select.
pub fn build_graph(state: &State, stats: &StatsMap) -> Graph {
    let mut g = build_tree(state, stats);
    group_leaves(&mut g);
    tag_filters(&mut g);
    g
}

fn build_tree(state: &State, stats: &StatsMap) -> Graph {
    let mut g = Graph::default();
    for dev in &state.devices {
        let mut lines = vec![format!("dev {}", dev.name)];
        if let Some(l) = dev.link_rate {
            lines.push(format!("link {}", rate(l)));
        }
        let d = push(&mut g, format!("dev:{}", dev.name), lines, "dev");
        g.roots.push(d);
        let tops: Vec<&QdiscNode> =
            dev.qdiscs.iter().filter(|q| q.parent == H_ROOT || q.parent == H_INGRESS).collect();
        for q in tops {
            let qi = add_qdisc(&mut g, dev, q, stats);
            g.nodes[d].children.push(qi);
        }
        // Filter edges: block owner → selected class.
        for f in &dev.filters {
            let block_q = if f.parent == H_MIN_INGRESS || f.parent == H_MIN_EGRESS {
                Handle::new(0xFFFF, 0)
            } else {
                f.parent
            };
            let from_id = if block_q.minor() == 0 {
                format!("q:{}:{}", dev.name, classid_str(block_q))
            } else {
                format!("c:{}:{}", dev.name, classid_str(block_q))
            };
            let target = f.opts.target();
            let Some(from) = g.nodes.iter().position(|n| n.id == from_id) else {
                continue;
            };
            let find =
                |t: Handle| g.nodes.iter().position(|n| n.id == format!("c:{}:{}", dev.name, classid_str(t)));
            let to = target.and_then(find);
            if f.opts.is_table() {
                continue;
            }
            let label = filter_label(f);
            // A flow filter spreads over baseclass .. baseclass + divisor - 1: one edge, many targets.
            let mut also = Vec::new();
            if let Some(b) = target {
                for k in 1..f.opts.spread().min(1024) {
                    if let Some(t) = find(Handle::new(b.major(), b.minor().wrapping_add(k))) {
                        also.push(t);
                    }
                }
            }
            match g
                .filters
                .iter_mut()
                .find(|e| e.from == from && e.to == to.unwrap_or(from) && e.also == also)
            {
                Some(e) => {
                    e.label.push('\n');
                    e.label.push_str(&label);
                }
                None => g.filters.push(FilterEdge { from, to: to.unwrap_or(from), also, label }),
            }
        }
    }
    g
}

fn push(g: &mut Graph, id: String, lines: Vec<String>, kind: &'static str) -> usize {
    g.nodes.push(Node { id, lines, stats: vec![], kind, children: vec![], bar: None, filter_tags: vec![] });
    g.nodes.len() - 1
}

fn add_qdisc(g: &mut Graph, dev: &Device, q: &QdiscNode, stats: &StatsMap) -> usize {
    let mut lines = vec![format!("{} {}", q.opts.kind(), classid_str(q.handle))];
    if let Some(s) = qdisc_summary(&q.opts) {
        lines.push(s);
    }
    let qi = push(g, format!("q:{}:{}", dev.name, classid_str(q.handle)), lines, "qdisc");
    let implicit: Vec<Handle> = match &q.opts {
        QdiscOpts::Prio(p) => (1..=p.bands).map(|b| Handle::new(q.handle.major(), b)).collect(),
        _ => vec![],
    };
    for b in implicit {
        if dev.qdisc_at(b).is_some() {
            let ci = push(
                g,
                format!("c:{}:{}", dev.name, classid_str(b)),
                vec![format!("band {}", classid_str(b))],
                "class",
            );
            g.nodes[qi].children.push(ci);
            if let Some(l) = dev.qdisc_at(b) {
                let li = add_qdisc(g, dev, l, stats);
                g.nodes[ci].children.push(li);
            }
        }
    }
    if let QdiscOpts::Tbf(_) = q.opts {
        if let Some(l) = dev.qdisc_at(Handle::new(q.handle.major(), 1)) {
            let li = add_qdisc(g, dev, l, stats);
            g.nodes[qi].children.push(li);
        }
    }
    let mut tops: Vec<&ClassNode> = dev.child_classes(q.handle).collect();
    tops.sort_by_key(|c| c.classid);
    for c in tops {
        let ci = add_class(g, dev, c, stats);
        g.nodes[qi].children.push(ci);
    }
    qi
}

fn add_class(g: &mut Graph, dev: &Device, c: &ClassNode, stats: &StatsMap) -> usize {
    let id = classid_str(c.classid);
    let mut lines = vec![format!("class {id}")];
    lines.extend(c.opts.label());
    let (cfg_rate, cfg_ceil) = c.opts.rates();
    let mut measured = Vec::new();
    let mut bar = None;
    if let Some(s) = stats.get(&id) {
        if let Some(a) = s.achieved_bps {
            let a = a as f64;
            // Against the rate while within the guarantee, against the ceil above it.
            let within = cfg_rate > 0.0 && a <= cfg_rate * 1.01;
            let reference = if within {
                format!(" ({:.0}% of rate)", a / cfg_rate * 100.0)
            } else if cfg_ceil > 0.0 {
                format!(" ({:.0}% of ceil)", a / cfg_ceil * 100.0)
            } else {
                String::new()
            };
            if a == 0.0 && s.packets.unwrap_or(0) == 0 {
                measured.push("idle".into());
            } else {
                measured.push(format!("got {}{reference}", rate_short(a)));
            }
            if cfg_ceil > 0.0 {
                bar = Some(Bar { fill: a / cfg_ceil, rate: cfg_rate / cfg_ceil, within_rate: within });
            }
        }
        let mut t = Vec::new();
        if let Some(d) = s.drops {
            t.push(format!("drops {d}"));
        }
        if let (None, Some(b)) = (s.achieved_bps, s.bytes) {
            t.push(format!("sent {b} bytes"));
        }
        if !t.is_empty() {
            measured.push(t.join(", "));
        }
    }
    let ci = push(g, format!("c:{}:{}", dev.name, id), lines, "class");
    g.nodes[ci].stats = measured;
    g.nodes[ci].bar = bar;
    let mut kids: Vec<&ClassNode> = dev.child_classes(c.classid).filter(|k| k.classid != c.classid).collect();
    kids.sort_by_key(|k| k.classid);
    for k in kids {
        let ki = add_class(g, dev, k, stats);
        g.nodes[ci].children.push(ki);
    }
    if let Some(l) = dev.qdisc_at(c.classid) {
        let li = add_qdisc(g, dev, l, stats);
        g.nodes[ci].children.push(li);
    }
    ci
}

/// Runs of at least this many identical sibling leaves are drawn as one group node.
pub const MIN_GROUP: usize = 6;

/// What a subtree looks like without its ids: equal signatures are identical leaves.
fn signature(g: &Graph, i: usize) -> String {
    let n = &g.nodes[i];
    let mut s = String::from(n.kind);
    let own: Vec<&str> = match n.kind {
        // A qdisc's handle differs from leaf to leaf; its kind and options do not.
        "qdisc" => n
            .lines
            .first()
            .and_then(|l| l.split_whitespace().next())
            .into_iter()
            .chain(n.lines.iter().skip(1).map(String::as_str))
            .collect(),
        _ => n.lines.iter().skip(1).map(String::as_str).collect(),
    };
    for l in own {
        s.push('|');
        s.push_str(l);
    }
    for &c in &n.children {
        if g.nodes[c].kind == "class" {
            // Only leaves group: a class with child classes is an inner node.
            return format!("inner:{i}");
        }
        s.push('{');
        s.push_str(&signature(g, c));
        s.push('}');
    }
    s
}

/// The class id of a node id `c:DEV:MAJOR:MINOR`.
fn class_part(id: &str) -> &str {
    id.splitn(3, ':').nth(2).unwrap_or(id)
}

/// Folds runs of identical sibling leaf classes into group nodes.
fn group_leaves(g: &mut Graph) {
    for p in g.reachable() {
        let kids = g.nodes[p].children.clone();
        if kids.len() < MIN_GROUP {
            continue;
        }
        let sigs: Vec<Option<String>> =
            kids.iter().map(|&k| (g.nodes[k].kind == "class").then(|| signature(g, k))).collect();
        let mut new_kids = Vec::new();
        let mut i = 0;
        while i < kids.len() {
            let mut j = i + 1;
            while j < kids.len()
                && sigs[i].is_some()
                && sigs[j] == sigs[i]
                && !sigs[i].as_ref().is_some_and(|s| s.starts_with("inner:"))
            {
                j += 1;
            }
            if j - i >= MIN_GROUP {
                let members = &kids[i..j];
                let gi = make_group(g, members);
                // Filters that selected a member now select the group.
                for f in g.filters.iter_mut() {
                    if members.contains(&f.to) {
                        f.to = gi;
                    }
                    for t in f.also.iter_mut() {
                        if members.contains(t) {
                            *t = gi;
                        }
                    }
                    let to = f.to;
                    f.also.retain(|t| *t != to);
                    f.also.dedup();
                }
                new_kids.push(gi);
            } else {
                new_kids.extend_from_slice(&kids[i..j]);
            }
            i = j;
        }
        g.nodes[p].children = new_kids;
    }
    // Filters to the same group from the same block merge into one edge.
    let mut merged: Vec<FilterEdge> = Vec::new();
    for f in std::mem::take(&mut g.filters) {
        match merged
            .iter_mut()
            .find(|m| m.from == f.from && m.to == f.to && m.also == f.also && g.nodes[f.to].kind == "group")
        {
            Some(m) => {
                if !f.label.is_empty() {
                    m.label.push('\n');
                    m.label.push_str(&f.label);
                }
            }
            None => merged.push(f),
        }
    }
    g.filters = merged;
}

fn make_group(g: &mut Graph, members: &[usize]) -> usize {
    let first = &g.nodes[members[0]];
    let last = &g.nodes[members[members.len() - 1]];
    let mut lines =
        vec![format!("{} × class {}–{}", members.len(), class_part(&first.id), class_part(&last.id))];
    lines.extend(first.lines.iter().skip(1).cloned());
    // Each member's leaf qdisc, said once.
    if let Some(&q) = first.children.first() {
        let qn = &g.nodes[q];
        let kind = qn.lines.first().and_then(|l| l.split_whitespace().next()).unwrap_or("");
        let mut l = format!("each → {kind}");
        for x in qn.lines.iter().skip(1) {
            l.push(' ');
            l.push_str(x);
        }
        lines.push(l);
    }
    let id = format!("g:{}..{}", first.id, last.id);
    let gi = push(g, id, lines, "group");
    // Measurements: the sum and the spread.
    let got: Vec<f64> = members
        .iter()
        .filter_map(|&m| {
            g.nodes[m]
                .stats
                .first()
                .and_then(|l| l.strip_prefix("got "))
                .and_then(|l| l.split_whitespace().next())
                .and_then(parse_rate_short)
        })
        .collect();
    if !got.is_empty() {
        let lo = got.iter().copied().fold(f64::MAX, f64::min);
        let hi = got.iter().copied().fold(0.0, f64::max);
        g.nodes[gi].stats.push(format!(
            "got {} in all, {}–{} each",
            rate_short(got.iter().sum()),
            rate_short(lo),
            rate_short(hi)
        ));
    }
    let drops: u64 = members
        .iter()
        .flat_map(|&m| g.nodes[m].stats.iter())
        .filter_map(|l| {
            l.split("drops ")
                .nth(1)
                .and_then(|d| d.split(|c: char| !c.is_ascii_digit()).next()?.parse::<u64>().ok())
        })
        .sum();
    if drops > 0 || !got.is_empty() {
        g.nodes[gi].stats.push(format!("drops {drops} in all"));
    }
    gi
}

fn parse_rate_short(s: &str) -> Option<f64> {
    let (num, mult) = [("Gbit", 1e9), ("Mbit", 1e6), ("Kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(u, m)| s.strip_suffix(u).map(|n| (n, *m)))?;
    num.parse::<f64>().ok().map(|v| v * mult)
}

/// Numbers the filter edges (`f1`, ...) and tags the nodes they select.
fn tag_filters(g: &mut Graph) {
    for (k, f) in g.filters.iter().enumerate() {
        let tag = format!("f{}", k + 1);
        for &t in std::iter::once(&f.to).chain(f.also.iter()) {
            g.nodes[t].filter_tags.push(tag.clone());
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Graphviz DOT.
pub fn to_dot(g: &Graph) -> String {
    let mut s = String::from("digraph sluice {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n");
    let reach = g.reachable();
    for &i in &reach {
        let n = &g.nodes[i];
        let shape = match n.kind {
            "dev" => "shape=house, style=filled, fillcolor=\"#dddddd\"",
            "qdisc" => "shape=box, style=\"rounded,filled\", fillcolor=\"#cfe2ff\"",
            "group" => "shape=box3d, style=filled, fillcolor=\"#fff3cd\"",
            _ => "shape=box, style=filled, fillcolor=\"#fff3cd\"",
        };
        let label = n
            .lines
            .iter()
            .chain(n.stats.iter())
            .map(|l| l.replace('\\', "\\\\").replace('"', "\\\""))
            .collect::<Vec<_>>()
            .join("\\n");
        let _ = writeln!(s, "  n{i} [{shape}, label=\"{label}\"];");
    }
    for &i in &reach {
        for c in &g.nodes[i].children {
            let _ = writeln!(s, "  n{i} -> n{c};");
        }
    }
    for f in &g.filters {
        let _ = writeln!(
            s,
            "  n{} -> n{} [style=dashed, color=\"#b02a37\", label=\"{}\"];",
            f.from,
            f.to,
            filter_text(&f.label, 6).join("\\n").replace('"', "\\\"")
        );
        for t in &f.also {
            let _ = writeln!(s, "  n{} -> n{t} [style=dashed, color=\"#b02a37\"];", f.from);
        }
    }
    s.push_str("}\n");
    s
}

/// A filter edge's label lines, at most `max` of them (then "… N more").
fn filter_text(label: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = label.split('\n').filter(|l| !l.is_empty()).collect();
    if lines.len() <= max {
        return lines.iter().map(|l| l.to_string()).collect();
    }
    let mut v: Vec<String> = lines[..max - 1].iter().map(|l| l.to_string()).collect();
    v.push(format!("… {} more ({} filters)", lines.len() - (max - 1), lines.len()));
    v
}

const CHAR_W: f64 = 6.8;
const LINE_H: f64 = 14.0;
const GAP_X: f64 = 18.0;
const GAP_Y: f64 = 40.0;
const BAR_H: f64 = 12.0;
/// Children beyond this many per row wrap onto further rows.
const MAX_PER_ROW: usize = 10;
/// Rows of children wrap at this width (pixels) unless the parent is wider.
const WRAP_W: f64 = 1500.0;
/// Room on the left of wrapped children for the connector trunk.
const TRUNK: f64 = 16.0;

/// Lines of a node's box: configured, then the filter tags, then the measured lines.
fn box_lines(n: &Node) -> Vec<(String, &'static str)> {
    let mut v: Vec<(String, &'static str)> = n.lines.iter().map(|l| (l.clone(), "")).collect();
    if !n.filter_tags.is_empty() {
        let t = if n.filter_tags.len() > 4 {
            format!(
                "← {} … {} ({} filters)",
                n.filter_tags[0],
                n.filter_tags[n.filter_tags.len() - 1],
                n.filter_tags.len()
            )
        } else {
            format!("← {}", n.filter_tags.join(" "))
        };
        v.push((t, "filter"));
    }
    v.extend(n.stats.iter().map(|l| (l.clone(), "stat")));
    v
}

fn text_w(lines: impl Iterator<Item = usize>) -> f64 {
    lines.max().unwrap_or(1) as f64 * CHAR_W + 18.0
}

fn node_size(n: &Node) -> (f64, f64) {
    let l = box_lines(n);
    let h = l.len() as f64 * LINE_H + 10.0 + if n.bar.is_some() { BAR_H } else { 0.0 };
    (text_w(l.iter().map(|x| x.0.chars().count())), h)
}

/// The filter list drawn beside the node that holds the filters.
fn filter_box_lines(g: &Graph, i: usize) -> Vec<String> {
    let mut v = Vec::new();
    for (k, f) in g.filters.iter().enumerate() {
        if f.from != i {
            continue;
        }
        let to = &g.nodes[f.to];
        let name = |n: &Node| match n.kind {
            "group" => n.lines[0].split("class ").nth(1).unwrap_or("").to_string(),
            _ => class_part(&n.id).to_string(),
        };
        let target = match f.also.last() {
            Some(&l) => format!("{}–{}", name(to), name(&g.nodes[l])),
            None => name(to),
        };
        let body = filter_text(&f.label, 4);
        let first = body.first().cloned().unwrap_or_else(|| "(spread)".into());
        v.push(format!("f{} → {target}: {first}", k + 1));
        for l in body.iter().skip(1) {
            v.push(format!("    {l}"));
        }
    }
    v
}

fn filter_box_size(lines: &[String]) -> (f64, f64) {
    if lines.is_empty() {
        return (0.0, 0.0);
    }
    (text_w(lines.iter().map(|l| l.chars().count())) + 4.0, (lines.len() + 1) as f64 * LINE_H + 8.0)
}

/// Where everything goes: boxes (node index, x left, y top, w, h), filter lists, connectors.
#[derive(Clone, Debug, Default)]
pub struct Placed {
    /// (node, left, top, width, height) of every reachable node.
    pub boxes: Vec<(usize, f64, f64, f64, f64)>,
    /// (holder node, left, top, width, height, lines) of every filter list.
    pub filter_boxes: Vec<(usize, f64, f64, f64, f64, Vec<String>)>,
    /// Connector polylines (parent to children).
    pub lines: Vec<Vec<(f64, f64)>>,
    /// Canvas width.
    pub width: f64,
    /// Canvas height.
    pub height: f64,
}

impl Placed {
    /// The box of node `i`.
    pub fn box_of(&self, i: usize) -> Option<(f64, f64, f64, f64)> {
        self.boxes.iter().find(|b| b.0 == i).map(|b| (b.1, b.2, b.3, b.4))
    }
}

struct Block {
    w: f64,
    h: f64,
    header_w: f64,
    header_h: f64,
    rows: Vec<Vec<usize>>,
    wrapped: bool,
}

fn measure(g: &Graph, i: usize, blocks: &mut Vec<Option<Block>>) -> (f64, f64) {
    let (nw, nh) = node_size(&g.nodes[i]);
    let (fw, fh) = filter_box_size(&filter_box_lines(g, i));
    let header_w = nw + if fw > 0.0 { GAP_X + fw } else { 0.0 };
    let header_h = nh.max(fh);
    let kids = g.nodes[i].children.clone();
    let sizes: Vec<(f64, f64)> = kids.iter().map(|&c| measure(g, c, blocks)).collect();
    let limit = header_w.max(WRAP_W);
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut row_w = 0.0;
    for (k, &c) in kids.iter().enumerate() {
        let w = sizes[k].0;
        let fits = rows.last().is_some_and(|r| r.len() < MAX_PER_ROW && row_w + GAP_X + w <= limit);
        if fits {
            rows.last_mut().unwrap().push(c);
            row_w += GAP_X + w;
        } else {
            rows.push(vec![c]);
            row_w = w;
        }
    }
    let wrapped = rows.len() > 1;
    let size_of = |c: usize| sizes[kids.iter().position(|&k| k == c).unwrap_or(0)];
    let rows_w = rows
        .iter()
        .map(|r| r.iter().map(|&c| size_of(c).0).sum::<f64>() + GAP_X * (r.len() as f64 - 1.0))
        .fold(0.0, f64::max)
        + if wrapped { TRUNK } else { 0.0 };
    let rows_h: f64 = rows.iter().map(|r| r.iter().map(|&c| size_of(c).1).fold(0.0, f64::max) + GAP_Y).sum();
    let w = header_w.max(rows_w);
    let h = header_h + rows_h;
    blocks[i] = Some(Block { w, h, header_w, header_h, rows, wrapped });
    (w, h)
}

fn place(g: &Graph, i: usize, left: f64, top: f64, blocks: &[Option<Block>], out: &mut Placed) {
    let Some(b) = &blocks[i] else { return };
    let (nw, nh) = node_size(&g.nodes[i]);
    let hx = left + (b.w - b.header_w) / 2.0;
    out.boxes.push((i, hx, top, nw, nh));
    let fl = filter_box_lines(g, i);
    if !fl.is_empty() {
        let (fw, fh) = filter_box_size(&fl);
        out.filter_boxes.push((i, hx + nw + GAP_X, top, fw, fh, fl));
    }
    let px = hx + nw / 2.0;
    let py = top + nh;
    let mut y = top + b.header_h + GAP_Y;
    let inner_left = left + if b.wrapped { TRUNK } else { 0.0 };
    let inner_w = b.w - if b.wrapped { TRUNK } else { 0.0 };
    let trunk_x = left + TRUNK / 2.0;
    let mut first_bus = None;
    for row in &b.rows {
        let ws: Vec<f64> = row.iter().map(|&c| blocks[c].as_ref().map_or(0.0, |x| x.w)).collect();
        let row_w = ws.iter().sum::<f64>() + GAP_X * (row.len() as f64 - 1.0);
        let row_h = row.iter().map(|&c| blocks[c].as_ref().map_or(0.0, |x| x.h)).fold(0.0, f64::max);
        let bus_y = y - GAP_Y / 2.0;
        let mut x = inner_left + (inner_w - row_w) / 2.0;
        let mut centres = Vec::new();
        for (k, &c) in row.iter().enumerate() {
            place(g, c, x, y, blocks, out);
            let (cw, _) = node_size(&g.nodes[c]);
            let cb = blocks[c].as_ref().map_or(0.0, |x| x.w);
            let ch = blocks[c].as_ref().map_or(0.0, |x| x.header_w);
            let cx = x + (cb - ch) / 2.0 + cw / 2.0;
            centres.push(cx);
            out.lines.push(vec![(cx, bus_y), (cx, y)]);
            x += ws[k] + GAP_X;
        }
        let (lo, hi) = centres.iter().fold((f64::MAX, f64::MIN), |(l, h), c| (l.min(*c), h.max(*c)));
        match first_bus {
            None => {
                // The parent's drop to the first bus, which also reaches the trunk if rows wrap.
                out.lines.push(vec![(px, py), (px, bus_y)]);
                let l = if b.wrapped { trunk_x } else { lo.min(px) };
                out.lines.push(vec![(l, bus_y), (hi.max(px), bus_y)]);
                first_bus = Some(bus_y);
            }
            Some(y0) => {
                out.lines.push(vec![(trunk_x, y0), (trunk_x, bus_y), (hi, bus_y)]);
                let _ = lo;
            }
        }
        y += row_h + GAP_Y;
    }
}

/// Lays out the tree: each node's box (with its filter list beside it) sits above its children,
/// which stand in rows of at most [`MAX_PER_ROW`] that wrap; every subtree owns a rectangle no
/// other subtree enters, so no box, list or connector crosses another.
pub fn layout(g: &Graph) -> Placed {
    let mut blocks: Vec<Option<Block>> = (0..g.nodes.len()).map(|_| None).collect();
    let mut out = Placed::default();
    let mut left = 20.0;
    let mut h: f64 = 0.0;
    for &r in &g.roots {
        let (w, bh) = measure(g, r, &mut blocks);
        place(g, r, left, 20.0, &blocks, &mut out);
        left += w + GAP_X * 2.0;
        h = h.max(bh);
    }
    out.width = left;
    out.height = h + 40.0;
    out
}

/// SVG, laid out by [`layout`].
pub fn to_svg(g: &Graph) -> String {
    let p = layout(g);
    let (w, h) = (p.width, p.height);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"DejaVu Sans Mono,monospace\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for l in &p.lines {
        let pts: Vec<String> = l.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(s, "<polyline points=\"{}\" fill=\"none\" stroke=\"#555\"/>", pts.join(" "));
    }
    for (i, x, y, bw, bh) in &p.boxes {
        let n = &g.nodes[*i];
        let (fill, rx) = match n.kind {
            "dev" => ("#dddddd", 0),
            "qdisc" => ("#cfe2ff", 8),
            "group" => ("#ffe8a3", 2),
            _ => ("#fff3cd", 2),
        };
        if n.kind == "group" {
            // A stack of cards: the group stands for many identical classes.
            let _ = writeln!(s, "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" rx=\"2\" fill=\"{fill}\" stroke=\"#333\"/>", x + 4.0, y - 4.0);
        }
        let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{bw:.1}\" height=\"{bh:.1}\" rx=\"{rx}\" fill=\"{fill}\" stroke=\"#333\"><title>{}</title></rect>", esc(&n.id));
        let cx = x + bw / 2.0;
        let lines = box_lines(n);
        for (j, (l, what)) in lines.iter().enumerate() {
            let style = match (*what, j) {
                (_, 0) => " font-weight=\"bold\"",
                ("stat", _) => " fill=\"#146c43\"",
                ("filter", _) => " fill=\"#b02a37\"",
                _ => "",
            };
            let _ = writeln!(
                s,
                "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\"{style}>{}</text>",
                y + 16.0 + j as f64 * LINE_H,
                esc(l)
            );
        }
        if let Some(b) = n.bar {
            // Achieved against the ceil (the whole bar), with the rate marked.
            let (bx, by, bwid) = (x + 8.0, y + bh - BAR_H - 2.0, bw - 16.0);
            let color = if b.within_rate { "#2ca02c" } else { "#1f77b4" };
            let _ = writeln!(s, "<rect x=\"{bx:.1}\" y=\"{by:.1}\" width=\"{bwid:.1}\" height=\"8\" fill=\"#e9e9e9\" stroke=\"#999\" stroke-width=\"0.5\"/>");
            let _ = writeln!(
                s,
                "<rect x=\"{bx:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"8\" fill=\"{color}\"/>",
                bwid * b.fill.clamp(0.0, 1.0)
            );
            let rx = bx + bwid * b.rate.clamp(0.0, 1.0);
            let _ = writeln!(
                s,
                "<path d=\"M{rx:.1},{:.1} V{:.1}\" stroke=\"#222\" stroke-width=\"2\"/>",
                by - 2.0,
                by + 10.0
            );
        }
    }
    for (_, x, y, fw, fh, lines) in &p.filter_boxes {
        let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{fw:.1}\" height=\"{fh:.1}\" fill=\"#fdf2f3\" stroke=\"#b02a37\" stroke-dasharray=\"4,2\"/>");
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\" fill=\"#b02a37\">filters</text>",
            x + 8.0,
            y + 16.0
        );
        for (j, l) in lines.iter().enumerate() {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#b02a37\" xml:space=\"preserve\">{}</text>",
                x + 8.0,
                y + 16.0 + (j + 1) as f64 * LINE_H,
                esc(l)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(a: (f64, f64, f64, f64), b: (f64, f64, f64, f64)) -> bool {
        a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3
    }

    fn no_overlaps(p: &Placed) {
        let mut rects: Vec<(f64, f64, f64, f64)> = p.boxes.iter().map(|b| (b.1, b.2, b.3, b.4)).collect();
        rects.extend(p.filter_boxes.iter().map(|b| (b.1, b.2, b.3, b.4)));
        for i in 0..rects.len() {
            for j in i + 1..rects.len() {
                assert!(!overlaps(rects[i], rects[j]), "{:?} overlaps {:?}", rects[i], rects[j]);
            }
        }
    }

    #[test]
    fn layout_separates_boxes_and_stats_read_as_tc_units() {
        let l = crate::script::load_tc_script(
            "t",
            "tc qdisc add dev e root handle 1: htb default 10\ntc class add dev e parent 1: classid 1:1 htb rate 10mbit\ntc class add dev e parent 1:1 classid 1:10 htb rate 5mbit ceil 10mbit\ntc class add dev e parent 1:1 classid 1:20 htb rate 300kbit ceil 10mbit\ntc filter add dev e parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10\n",
            &Default::default(),
        )
        .unwrap();
        let stats = parse_stats(r#"{"cases":[{"classes":[{"id":"1:10","rate_bps":5000000,"ceil_bps":10000000,"achieved_bps":4900000,"bytes":1,"packets":1,"drops":3},{"id":"1:20","achieved_bps":300071,"drops":0}]}]}"#, 0).unwrap();
        let g = build_graph(&l.state, &stats);
        let p = layout(&g);
        no_overlaps(&p);
        let a = g.nodes.iter().position(|n| n.id.ends_with("1:10")).unwrap();
        let b = g.nodes.iter().position(|n| n.id.ends_with("1:20")).unwrap();
        assert_eq!(p.box_of(a).unwrap().1, p.box_of(b).unwrap().1, "siblings share a row");
        assert!(g.nodes[a].stats.iter().any(|l| l == "got 4.9Mbit (98% of rate)"), "{:?}", g.nodes[a].stats);
        assert!(g.nodes[a].stats.iter().any(|l| l == "drops 3"));
        assert!(
            g.nodes[b].stats.iter().any(|l| l.starts_with("got 300Kbit (100% of rate)")),
            "{:?}",
            g.nodes[b].stats
        );
        assert_eq!(g.filters.len(), 1);
        assert_eq!(g.nodes[a].filter_tags, vec!["f1"]);
        assert!(g.filters[0].label.contains("dport 22"), "{}", g.filters[0].label);
        assert!(to_dot(&g).contains("style=dashed"));
        let svg = to_svg(&g);
        assert!(svg.starts_with("<svg") && svg.contains("f1 → 1:10: pref 1 u32 dport 22"), "{svg}");
        let t = parse_stats("class htb 1:10 parent 1:1 prio 0 rate 5Mbit\n Sent 1500 bytes 1 pkt (dropped 2, overlimits 0 requeues 0)\n", 0).unwrap();
        assert_eq!(t["1:10"].drops, Some(2));
    }

    #[test]
    fn identical_leaves_are_grouped_and_big_trees_stay_readable() {
        let mut script = String::from("tc qdisc add dev e root handle 1: htb default 2\ntc class add dev e parent 1: classid 1:1 htb rate 1gbit\ntc class add dev e parent 1:1 classid 1:2 htb rate 100mbit ceil 1gbit\n");
        for i in 0..300u32 {
            let h = 0x100 + i;
            script.push_str(&format!("tc class add dev e parent 1:1 classid 1:{h:x} htb rate 8kbit ceil 100mbit\ntc qdisc add dev e parent 1:{h:x} handle {h:x}: fq_codel\ntc filter add dev e parent 1: protocol ip prio 5 u32 match ip dst 198.18.{}.{}/32 flowid 1:{h:x}\n", i / 250, i % 250 + 1));
        }
        let l = crate::script::load_tc_script("t", &script, &Default::default()).unwrap();
        let g = build_graph(&l.state, &StatsMap::new());
        let groups: Vec<&Node> =
            g.reachable().into_iter().map(|i| &g.nodes[i]).filter(|n| n.kind == "group").collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].lines[0], "300 × class 1:100–1:22b");
        assert!(groups[0].lines.iter().any(|l| l == "each → fq_codel target 5ms"), "{:?}", groups[0].lines);
        assert_eq!(g.filters.len(), 1, "the 300 filters to the group merge into one edge");
        let p = layout(&g);
        no_overlaps(&p);
        assert!(p.width < 2000.0, "300 identical leaves drawn {} px wide", p.width);
        // 1 000 different leaves: rows wrap, nothing overlaps, the drawing stays within reach.
        let mut script = String::from("tc qdisc add dev e root handle 1: htb\ntc class add dev e parent 1: classid 1:1 htb rate 10gbit\n");
        for i in 0..1000u32 {
            script.push_str(&format!(
                "tc class add dev e parent 1:1 classid 1:{:x} htb rate {}kbit ceil 1gbit\n",
                0x100 + i,
                100 + i
            ));
        }
        let l = crate::script::load_tc_script("t", &script, &Default::default()).unwrap();
        let g = build_graph(&l.state, &StatsMap::new());
        let p = layout(&g);
        assert_eq!(p.boxes.len(), 1003);
        no_overlaps(&p);
        assert!(p.width < 2500.0 && p.height < 40_000.0, "{} x {}", p.width, p.height);
    }
}
