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

/// A drawable node.
#[derive(Clone, Debug)]
pub struct Node {
    /// Stable id.
    pub id: String,
    /// Lines of text.
    pub lines: Vec<String>,
    /// Kind: "dev", "qdisc", "class".
    pub kind: &'static str,
    /// Children in the tree.
    pub children: Vec<usize>,
}

/// A filter edge.
#[derive(Clone, Debug)]
pub struct FilterEdge {
    /// From node index.
    pub from: usize,
    /// To node index.
    pub to: usize,
    /// What it matches.
    pub label: String,
}

/// The drawable graph.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Nodes; roots are devices.
    pub nodes: Vec<Node>,
    /// Device nodes.
    pub roots: Vec<usize>,
    /// Filter edges.
    pub filters: Vec<FilterEdge>,
}

fn rate(b: u64) -> String {
    format_rate(Rate::from_bps(b))
}

fn qdisc_summary(q: &QdiscOpts) -> Option<String> {
    Some(match q {
        QdiscOpts::Tbf(t) => format!("rate {} burst {}b", rate(t.rate), t.burst),
        QdiscOpts::Htb(h) => format!("default {:x} r2q {}", h.default, h.r2q),
        QdiscOpts::Prio(p) => format!("{} bands", p.bands),
        QdiscOpts::Pfifo(f) | QdiscOpts::PfifoHeadDrop(f) => format!("limit {}p", f.limit?),
        QdiscOpts::Bfifo(f) => format!("limit {}b", f.limit?),
        QdiscOpts::FqCodel(f) => format!("target {}us", f.target.unwrap_or(5000)),
        QdiscOpts::Codel(c) => format!("target {}us", c.target.unwrap_or(5000)),
        QdiscOpts::Sfq(s) if s.perturb != 0 => format!("perturb {}s", s.perturb),
        _ => return None,
    })
}

/// What a filter matches, short.
pub fn filter_label(f: &FilterNode) -> String {
    let mut s = match &f.opts {
        FilterOpts::U32(u) => {
            let keys: Vec<String> = u
                .keys
                .iter()
                .map(|k| match (k.off, k.nexthdr, k.mask) {
                    (12, false, _) => {
                        format!("src {}/{}", std::net::Ipv4Addr::from(k.val), k.mask.count_ones())
                    }
                    (16, false, _) => {
                        format!("dst {}/{}", std::net::Ipv4Addr::from(k.val), k.mask.count_ones())
                    }
                    (20, false, 0xFFFF_0000) => format!("sport {}", k.val >> 16),
                    (20, false, 0x0000_FFFF) => format!("dport {}", k.val & 0xFFFF),
                    (0, true, 0xFFFF_0000) => format!("sport {}", k.val >> 16),
                    (0, true, 0x0000_FFFF) => format!("dport {}", k.val & 0xFFFF),
                    (0, false, 0x00FF_0000) => format!("tos {:#x}", (k.val >> 16) & 0xFF),
                    (0, false, 0x00FC_0000) => format!("dscp {}", (k.val >> 18) & 0x3F),
                    _ => format!(
                        "{:08x}/{:08x}@{}{}",
                        k.val,
                        k.mask,
                        if k.nexthdr { "nh+" } else { "" },
                        k.off
                    ),
                })
                .collect();
            format!("u32 {}", keys.join(" "))
        }
        FilterOpts::Flow(fl) => {
            let keys: Vec<&str> =
                (0..32).filter(|i| fl.keys & (1 << i) != 0).filter_map(flow_key_name).collect();
            format!(
                "flow {} {}{}",
                if fl.hash { "hash" } else { "map" },
                keys.join(","),
                fl.divisor.map(|d| format!(" /{d}")).unwrap_or_default()
            )
        }
        FilterOpts::Fw(_) => format!("fw mark {:#x}", f.handle),
        FilterOpts::Matchall(_) => "matchall".into(),
        FilterOpts::Basic(b) => format!("basic {}", b.ematch.clone().unwrap_or_default()),
        FilterOpts::U32Table { divisor } => format!("u32 table /{divisor}"),
    };
    s = format!("pref {} {s}", f.prio);
    for a in &f.actions {
        match a {
            Action::Gact { verdict, .. } => s.push_str(&format!(" → {}", verdict.name())),
            Action::Police(p) => s.push_str(&format!(" police {}", rate(p.rate))),
        }
    }
    s
}

/// Builds the graph, annotating classes with `stats`.
pub fn build_graph(state: &State, stats: &StatsMap) -> Graph {
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
            let target = match &f.opts {
                FilterOpts::Flow(fl) => fl.baseclass,
                o => o.classid(),
            };
            let Some(from) = g.nodes.iter().position(|n| n.id == from_id) else {
                continue;
            };
            let find =
                |t: Handle| g.nodes.iter().position(|n| n.id == format!("c:{}:{}", dev.name, classid_str(t)));
            let to = target.and_then(find);
            if matches!(f.opts, FilterOpts::U32Table { .. }) {
                continue;
            }
            let label = filter_label(f);
            // A flow filter spreads over baseclass .. baseclass + divisor - 1.
            if let (FilterOpts::Flow(fl), Some(b)) = (&f.opts, target) {
                for k in 1..fl.divisor.unwrap_or(1).min(64) {
                    if let Some(t) = find(Handle::new(b.major(), b.minor().wrapping_add(k))) {
                        g.filters.push(FilterEdge { from, to: t, label: String::new() });
                    }
                }
            }
            match g
                .filters
                .iter_mut()
                .find(|e| e.from == from && e.to == to.unwrap_or(from) && !e.label.is_empty())
            {
                Some(e) => {
                    e.label.push('\n');
                    e.label.push_str(&label);
                }
                None => g.filters.push(FilterEdge { from, to: to.unwrap_or(from), label }),
            }
        }
    }
    g
}

fn push(g: &mut Graph, id: String, lines: Vec<String>, kind: &'static str) -> usize {
    g.nodes.push(Node { id, lines, kind, children: vec![] });
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
    match &c.opts {
        ClassOpts::Htb(h) => {
            lines.push(format!("rate {} ceil {}", rate(h.rate), rate(h.ceil)));
            lines.push(format!("burst {}b prio {}", h.burst, h.prio));
        }
        ClassOpts::Drr { quantum } => {
            lines.push(format!("quantum {}", quantum.map(|q| q.to_string()).unwrap_or("mtu".into())))
        }
    }
    if let Some(s) = stats.get(&id) {
        let mut t = Vec::new();
        if let Some(a) = s.achieved_bps {
            t.push(format!("got {}", rate(a)));
        }
        if let Some(d) = s.drops {
            t.push(format!("drops {d}"));
        }
        if let (None, Some(b)) = (s.achieved_bps, s.bytes) {
            t.push(format!("{b} bytes"));
        }
        if !t.is_empty() {
            lines.push(t.join(", "));
        }
    }
    let ci = push(g, format!("c:{}:{}", dev.name, id), lines, "class");
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

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Graphviz DOT.
pub fn to_dot(g: &Graph) -> String {
    let mut s = String::from("digraph sluice {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontname=\"monospace\", fontsize=9];\n");
    for (i, n) in g.nodes.iter().enumerate() {
        let shape = match n.kind {
            "dev" => "shape=house, style=filled, fillcolor=\"#dddddd\"",
            "qdisc" => "shape=box, style=\"rounded,filled\", fillcolor=\"#cfe2ff\"",
            _ => "shape=box, style=filled, fillcolor=\"#fff3cd\"",
        };
        let label = n
            .lines
            .iter()
            .map(|l| l.replace('\\', "\\\\").replace('"', "\\\""))
            .collect::<Vec<_>>()
            .join("\\n");
        let _ = writeln!(s, "  n{i} [{shape}, label=\"{label}\"];");
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for c in &n.children {
            let _ = writeln!(s, "  n{i} -> n{c};");
        }
    }
    for f in &g.filters {
        let _ = writeln!(
            s,
            "  n{} -> n{} [style=dashed, color=\"#b02a37\", label=\"{}\"];",
            f.from,
            f.to,
            f.label.replace('"', "\\\"").replace('\n', "\\n")
        );
    }
    s.push_str("}\n");
    s
}

const CHAR_W: f64 = 7.0;
const LINE_H: f64 = 14.0;
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 56.0;

fn size(n: &Node) -> (f64, f64) {
    let w = n.lines.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64 * CHAR_W + 16.0;
    (w, n.lines.len() as f64 * LINE_H + 10.0)
}

/// Lays out a tidy tree: each subtree gets the width of its children side by side (or its own
/// box if wider); parents are centred above their children. Returns (x centre, y top) per node.
pub fn layout(g: &Graph) -> (Vec<(f64, f64)>, f64, f64) {
    let mut pos = vec![(0.0, 0.0); g.nodes.len()];
    let mut width = vec![0.0; g.nodes.len()];
    fn measure(g: &Graph, i: usize, width: &mut Vec<f64>) -> f64 {
        let own = size(&g.nodes[i]).0;
        let kids: f64 = g.nodes[i].children.iter().map(|&c| measure(g, c, width)).sum::<f64>()
            + GAP_X * g.nodes[i].children.len().saturating_sub(1) as f64;
        width[i] = own.max(kids);
        width[i]
    }
    // Row heights by depth, so that every level starts at the same y.
    fn depths(g: &Graph, i: usize, d: usize, out: &mut Vec<(usize, usize)>) {
        out.push((i, d));
        for &c in &g.nodes[i].children {
            depths(g, c, d + 1, out);
        }
    }
    let mut dl = Vec::new();
    for &r in &g.roots {
        depths(g, r, 0, &mut dl);
    }
    let maxd = dl.iter().map(|x| x.1).max().unwrap_or(0);
    let mut row_h = vec![0.0f64; maxd + 1];
    for &(i, d) in &dl {
        row_h[d] = row_h[d].max(size(&g.nodes[i]).1);
    }
    let mut row_y = vec![20.0; maxd + 1];
    for d in 1..=maxd {
        row_y[d] = row_y[d - 1] + row_h[d - 1] + GAP_Y;
    }
    fn place(
        g: &Graph,
        i: usize,
        left: f64,
        d: usize,
        width: &[f64],
        row_y: &[f64],
        pos: &mut Vec<(f64, f64)>,
    ) {
        pos[i] = (left + width[i] / 2.0, row_y[d]);
        let kids: f64 = g.nodes[i].children.iter().map(|&c| width[c]).sum::<f64>()
            + GAP_X * g.nodes[i].children.len().saturating_sub(1) as f64;
        let mut x = left + (width[i] - kids) / 2.0;
        for &c in &g.nodes[i].children {
            place(g, c, x, d + 1, width, row_y, pos);
            x += width[c] + GAP_X;
        }
    }
    let mut left = 20.0;
    for &r in &g.roots {
        measure(g, r, &mut width);
        place(g, r, left, 0, &width, &row_y, &mut pos);
        left += width[r] + GAP_X * 2.0;
    }
    let h = row_y[maxd] + row_h[maxd] + 40.0;
    (pos, left, h)
}

/// SVG, laid out by [`layout`].
pub fn to_svg(g: &Graph) -> String {
    let (pos, w, h) = layout(g);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"monospace\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<defs><marker id=\"a\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#444\"/></marker><marker id=\"f\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#b02a37\"/></marker></defs>\n"
    );
    for (i, n) in g.nodes.iter().enumerate() {
        let (x, y) = pos[i];
        let (_, nh) = size(n);
        for &c in &n.children {
            let (cx, cy) = pos[c];
            let _ = writeln!(s, "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{cy:.1}\" stroke=\"#444\" marker-end=\"url(#a)\"/>", y + nh);
        }
    }
    // Filter edges curve to the side so they do not hide the tree edges; labels at the bend.
    for (k, f) in g.filters.iter().enumerate() {
        let (x1, y1) = pos[f.from];
        let (_, h1) = size(&g.nodes[f.from]);
        let (x2, y2) = pos[f.to];
        let (sx, sy) = (x1, y1 + h1);
        let mx = (sx + x2) / 2.0 + if x2 >= sx { 30.0 } else { -30.0 };
        let my = (sy + y2) / 2.0 + (k % 3) as f64 * 12.0 - 12.0;
        let _ = writeln!(
            s,
            "<path d=\"M{sx:.1},{sy:.1} Q{mx:.1},{my:.1} {x2:.1},{y2:.1}\" fill=\"none\" stroke=\"#b02a37\" stroke-dasharray=\"5,3\" marker-end=\"url(#f)\"/>"
        );
        if f.label.is_empty() {
            continue;
        }
        let tx = (sx + 2.0 * mx + x2) / 4.0;
        let lines: Vec<&str> = f.label.split('\n').collect();
        let ty = (sy + 2.0 * my + y2) / 4.0 - (lines.len() as f64 - 1.0) * 6.0;
        let tw = lines.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64 * 6.0 + 6.0;
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{tw:.1}\" height=\"{:.1}\" fill=\"white\" fill-opacity=\"0.85\"/>",
            tx - tw / 2.0,
            ty - 10.0,
            lines.len() as f64 * 12.0 + 2.0
        );
        for (j, l) in lines.iter().enumerate() {
            let _ = writeln!(s, "<text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"10\" fill=\"#b02a37\">{}</text>", ty + j as f64 * 12.0, esc(l));
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        let (x, y) = pos[i];
        let (nw, nh) = size(n);
        let (fill, rx) = match n.kind {
            "dev" => ("#dddddd", 0),
            "qdisc" => ("#cfe2ff", 8),
            _ => ("#fff3cd", 2),
        };
        let _ = writeln!(s, "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{nw:.1}\" height=\"{nh:.1}\" rx=\"{rx}\" fill=\"{fill}\" stroke=\"#333\"/>", x - nw / 2.0);
        for (j, l) in n.lines.iter().enumerate() {
            let weight = if j == 0 { " font-weight=\"bold\"" } else { "" };
            let color =
                if l.starts_with("got ") || l.starts_with("drops") { " fill=\"#146c43\"" } else { "" };
            let _ = writeln!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\"{weight}{color}>{}</text>",
                y + 16.0 + j as f64 * LINE_H,
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

    #[test]
    fn layout_separates_siblings_and_stats_parse() {
        let l = crate::script::load_tc_script(
            "t",
            "tc qdisc add dev e root handle 1: htb default 10\ntc class add dev e parent 1: classid 1:1 htb rate 10mbit\ntc class add dev e parent 1:1 classid 1:10 htb rate 5mbit\ntc class add dev e parent 1:1 classid 1:20 htb rate 5mbit\ntc filter add dev e parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10\n",
            &Default::default(),
        )
        .unwrap();
        let stats = parse_stats(r#"{"cases":[{"classes":[{"id":"1:10","rate_bps":5000000,"ceil_bps":5000000,"achieved_bps":4900000,"bytes":1,"packets":1,"drops":3}]}]}"#, 0).unwrap();
        let g = build_graph(&l.state, &stats);
        let (pos, _, _) = layout(&g);
        let a = g.nodes.iter().position(|n| n.id.ends_with("1:10")).unwrap();
        let b = g.nodes.iter().position(|n| n.id.ends_with("1:20")).unwrap();
        assert_eq!(pos[a].1, pos[b].1);
        assert!((pos[a].0 - pos[b].0).abs() >= size(&g.nodes[a]).0.max(size(&g.nodes[b]).0));
        assert!(g.nodes[a].lines.iter().any(|l| l.contains("got 4900Kbit") && l.contains("drops 3")));
        assert_eq!(g.filters.len(), 1);
        assert!(g.filters[0].label.contains("dport 22"), "{}", g.filters[0].label);
        assert!(to_dot(&g).contains("style=dashed"));
        assert!(to_svg(&g).starts_with("<svg"));
        let t = parse_stats("class htb 1:10 parent 1:1 prio 0 rate 5Mbit\n Sent 1500 bytes 1 pkt (dropped 2, overlimits 0 requeues 0)\n", 0).unwrap();
        assert_eq!(t["1:10"].drops, Some(2));
    }
}
