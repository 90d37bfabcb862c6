//! Side-by-side comparison of results documents (simulator, live Sluice, kernel; or two
//! versions): every class and every flow of every case, one row per run, differences against the
//! first run marked; overlay plots on shared axes; a self-contained `compare.html`.

use crate::analysis::{class_reference_text, latency_sensitive, num, Metric};
use crate::html::esc;
use crate::plot::{self, sweep_chart, sweep_lines, Chart, Line, Series};
use crate::schema::{Case, Results};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// An overlay figure: (title, SVG file).
pub type Overlay = (String, PathBuf);

/// Cases with more flows (or classes) than this are compared as one aggregate line.
pub const MAX_ITEMS: usize = 24;

/// One compared item of one case: a flow or a class.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// A flow, by name.
    Flow(String),
    /// A class, by id.
    Class(String),
    /// All flows of a case with very many (aggregate).
    AllFlows,
}

/// Values of one item in one run.
#[derive(Clone, Debug, Default)]
pub struct Values {
    /// Mbit/s (flows: received; classes: achieved).
    pub mbps: f64,
    /// p50, p99 latency (ms), jitter (ms), loss (%) for flows ([`FLOW_METRICS`] order); a
    /// latency is None when the flow delivered nothing to measure it on.
    pub lat: Option<[Option<f64>; 4]>,
    /// "95.3% of ceil" and drops, for classes.
    pub class: Option<(String, u64)>,
}

/// The comparison: for each case name and item, the values per run.
pub struct Comparison {
    /// Run labels.
    pub labels: Vec<String>,
    /// (case name, item, values per run).
    pub rows: Vec<(String, Item, Vec<Option<Values>>)>,
}

/// The flow columns, in the order of [`Values::lat`].
pub const FLOW_METRICS: [Metric; 4] = [Metric::P50, Metric::P99, Metric::Jitter, Metric::Loss];

fn flow_values(c: &Case, name: &str) -> Option<Values> {
    let f = c.flows.iter().find(|f| f.name == name)?;
    Some(Values { mbps: f.achieved_bps / 1e6, lat: Some(FLOW_METRICS.map(|m| m.of(f))), class: None })
}

/// Means over the flows that measured each metric (p99: the worst), None where none did.
fn all_flows(c: &Case) -> Values {
    let agg = |m: Metric| {
        let v: Vec<f64> = c.flows.iter().filter_map(|f| m.of(f)).collect();
        match (v.is_empty(), m) {
            (true, _) => None,
            (false, Metric::P99) => Some(v.iter().copied().fold(0.0, f64::max)),
            (false, _) => Some(v.iter().sum::<f64>() / v.len() as f64),
        }
    };
    Values {
        mbps: c.flows.iter().map(|f| f.achieved_bps).sum::<f64>() / 1e6,
        lat: Some(FLOW_METRICS.map(agg)),
        class: None,
    }
}

fn class_values(c: &Case, id: &str) -> Option<Values> {
    let k = c.classes.iter().find(|k| k.id == id)?;
    Some(Values { mbps: k.achieved_bps / 1e6, lat: None, class: Some((class_reference_text(k), k.drops)) })
}

/// Builds the comparison of `docs` (label, results): every case of any run, every flow and
/// class of it, in the order first seen.
pub fn compare(docs: &[(String, Results)]) -> Comparison {
    let mut case_names: Vec<String> = Vec::new();
    for (_, d) in docs {
        for c in &d.cases {
            if !case_names.contains(&c.name) {
                case_names.push(c.name.clone());
            }
        }
    }
    let mut rows = Vec::new();
    for n in &case_names {
        let cases: Vec<Option<&Case>> =
            docs.iter().map(|(_, d)| d.cases.iter().find(|c| &c.name == n)).collect();
        let mut items: Vec<Item> = Vec::new();
        let many_flows = cases.iter().flatten().any(|c| c.flows.len() > MAX_ITEMS);
        if many_flows {
            items.push(Item::AllFlows);
        } else {
            for f in cases.iter().flatten().flat_map(|c| c.flows.iter()) {
                let it = Item::Flow(f.name.clone());
                if !items.contains(&it) {
                    items.push(it);
                }
            }
        }
        if !cases.iter().flatten().any(|c| c.classes.len() > MAX_ITEMS) {
            for k in cases.iter().flatten().flat_map(|c| c.classes.iter()) {
                let it = Item::Class(k.id.clone());
                if !items.contains(&it) {
                    items.push(it);
                }
            }
        }
        for it in items {
            let vals = cases
                .iter()
                .map(|c| {
                    let c = (*c)?;
                    match &it {
                        Item::Flow(f) => flow_values(c, f),
                        Item::Class(k) => class_values(c, k),
                        Item::AllFlows => Some(all_flows(c)),
                    }
                })
                .collect();
            rows.push((n.clone(), it, vals));
        }
    }
    Comparison { labels: docs.iter().map(|d| d.0.clone()).collect(), rows }
}

/// True if `b` differs from the reference `a` enough to point out.
pub fn differs(m: Metric, a: f64, b: f64) -> bool {
    (a - b).abs() >= m.floor() && (a - b).abs() >= 0.1 * a.abs().max(b.abs())
}

fn item_name(it: &Item) -> String {
    match it {
        Item::Flow(f) => format!("flow {f}"),
        Item::Class(k) => format!("class {k}"),
        Item::AllFlows => "all flows (aggregate)".into(),
    }
}

/// The text table: per case and item a header line, then one line per run. A `*` marks a value
/// that differs from the first run's by 10% or more (and more than the metric's noise floor).
pub fn table(cmp: &Comparison) -> String {
    let mut out = String::new();
    let runs = cmp.labels.iter().map(|l| l.chars().count() + 2).max().unwrap_or(4);
    let items = cmp.rows.iter().map(|r| item_name(&r.1).chars().count()).max().unwrap_or(4);
    let lw = runs.max(items).clamp(6, 48);
    let mut last_case = "";
    for (case, it, vals) in &cmp.rows {
        if case != last_case {
            let _ = writeln!(out, "\n== {case}");
            last_case = case;
        }
        let is_flow = !matches!(it, Item::Class(_));
        if is_flow {
            let _ = writeln!(
                out,
                "  {:<lw$}  {:>11}{:>10}{:>10}{:>10}{:>9}",
                item_name(it),
                "Mbit/s ",
                "p50 ms ",
                "p99 ms ",
                "jitter ms ",
                "loss % "
            );
        } else {
            let _ = writeln!(
                out,
                "  {:<lw$}  {:>11} {:>16} {:>8}",
                item_name(it),
                "Mbit/s ",
                "of rate/ceil",
                "drops"
            );
        }
        let first = vals.first().cloned().flatten();
        for (label, v) in cmp.labels.iter().zip(vals) {
            let Some(v) = v else {
                let _ = writeln!(out, "    {label:<w$}  -", w = lw - 2);
                continue;
            };
            // Right-aligned numbers with the mark in a column of its own.
            let mark = |m: Metric, a: Option<f64>, b: Option<f64>| -> String {
                let Some(b) = b else { return "- ".into() };
                let star = if a.is_some_and(|a| differs(m, a, b)) { '*' } else { ' ' };
                format!("{}{star}", num(b))
            };
            let mb = mark(Metric::Mbps, first.as_ref().map(|f| f.mbps), Some(v.mbps));
            if let Some(lat) = v.lat {
                let fl = first.as_ref().and_then(|f| f.lat);
                let c: Vec<String> =
                    (0..4).map(|i| mark(FLOW_METRICS[i], fl.and_then(|f| f[i]), lat[i])).collect();
                let _ = writeln!(
                    out,
                    "    {label:<w$}  {mb:>11}{:>10}{:>10}{:>10}{:>9}",
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    w = lw - 2
                );
            } else if let Some((r, d)) = &v.class {
                let _ = writeln!(out, "    {label:<w$}  {mb:>11} {r:>16} {d:>8}", w = lw - 2);
            }
        }
    }
    if cmp.labels.len() > 1 {
        let _ = writeln!(out, "\n* differs from {} by 10% or more", cmp.labels[0]);
    }
    out
}

/// The self-contained `compare.html`: the table with differences highlighted, then the overlays.
pub fn html(cmp: &Comparison, figures: &[Overlay], case_key: &[(usize, String)]) -> String {
    let mut h = String::from(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sluice: comparison</title><style>\
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1360px;padding:0 1.5em;color:#222}\
table{border-collapse:collapse;font-size:.88em;margin:.4em 0 1.2em}td,th{border:1px solid #d4d4d4;padding:2px 7px;text-align:right;white-space:nowrap}\
th{background:#eef1f4}td.l,th.l{text-align:left}tbody.g{border-top:2px solid #999}td.better{background:#d9f2dd}td.worse{background:#f8d7da}td.chg{background:#fff3cd}\
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:10px}.grid figure{margin:0;border:1px solid #e4e4e4}svg{width:100%;height:auto}\
</style></head><body><h1>Comparison</h1>",
    );
    let _ = write!(h, "<p>Runs: {}. Cells are marked where a run differs from <b>{}</b> by 10% or more: green better (lower latency, jitter or loss), red worse, yellow a different throughput.</p>",
        esc(&cmp.labels.join(" · ")), esc(cmp.labels.first().map(String::as_str).unwrap_or("")));
    if !figures.is_empty() {
        h.push_str("<h2>Overlays</h2><div class=\"grid\">");
        for (_, p) in figures {
            let svg = std::fs::read_to_string(p).unwrap_or_default();
            if let Some(i) = svg.find("<svg") {
                let _ = write!(h, "<figure>{}</figure>", &svg[i..]);
            }
        }
        h.push_str("</div>");
        if !case_key.is_empty() {
            h.push_str("<p>Case numbers: ");
            let parts: Vec<String> = case_key.iter().map(|(i, n)| format!("<b>{i}</b> {}", esc(n))).collect();
            h.push_str(&parts.join(" · "));
            h.push_str("</p>");
        }
    }
    h.push_str("<h2>Every case</h2><table><thead><tr><th class=\"l\">case</th><th class=\"l\">item</th><th class=\"l\">run</th><th>Mbit/s</th><th>p50 ms</th><th>p99 ms</th><th>jitter ms</th><th>loss %</th><th>of rate/ceil</th><th>drops</th></tr></thead>");
    let mut last = String::new();
    for (case, it, vals) in &cmp.rows {
        let new_case = *case != last;
        last = case.clone();
        let _ = write!(h, "<tbody{}>", if new_case { " class=\"g\"" } else { "" });
        let first = vals.first().cloned().flatten();
        for (k, (label, v)) in cmp.labels.iter().zip(vals).enumerate() {
            h.push_str("<tr>");
            if k == 0 {
                let _ = write!(
                    h,
                    "<td class=\"l\" rowspan=\"{n}\">{}</td><td class=\"l\" rowspan=\"{n}\">{}</td>",
                    if new_case { esc(case) } else { String::new() },
                    esc(&item_name(it)),
                    n = cmp.labels.len()
                );
            }
            let _ = write!(h, "<td class=\"l\">{}</td>", esc(label));
            let Some(v) = v else {
                h.push_str("<td colspan=\"7\" class=\"l\">not in this run</td></tr>");
                continue;
            };
            let cell = |m: Metric, a: Option<f64>, b: Option<f64>| -> String {
                let Some(b) = b else { return "<td>-</td>".into() };
                let cls = match a {
                    Some(a) if k > 0 && differs(m, a, b) => match m.lower_is_better() {
                        Some(true) if b < a => "better",
                        Some(true) => "worse",
                        _ => "chg",
                    },
                    _ => "",
                };
                format!("<td class=\"{cls}\">{}</td>", num(b))
            };
            h.push_str(&cell(Metric::Mbps, first.as_ref().map(|f| f.mbps), Some(v.mbps)));
            match v.lat {
                Some(lat) => {
                    let fl = first.as_ref().and_then(|f| f.lat);
                    for (i, m) in FLOW_METRICS.into_iter().enumerate() {
                        h.push_str(&cell(m, fl.and_then(|f| f[i]), lat[i]));
                    }
                }
                None => h.push_str("<td></td><td></td><td></td><td></td>"),
            }
            match &v.class {
                Some((r, d)) => {
                    let _ = write!(h, "<td>{}</td><td>{d}</td>", esc(r));
                }
                None => h.push_str("<td></td><td></td>"),
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody>");
    }
    h.push_str("</table></body></html>\n");
    h
}

/// Overlays the sweep lines of several documents in one target-vs-achieved plot.
pub fn overlay_sweep(docs: &[(String, Results)], base: &Path) -> Vec<PathBuf> {
    let mut ach: Vec<Line> = Vec::new();
    let mut err: Vec<Line> = Vec::new();
    let mut xl = String::new();
    for (label, d) in docs {
        let (x, a, e) = sweep_lines(d);
        if !x.is_empty() {
            xl = x;
        }
        for (l, pts) in a {
            ach.push((format!("{label} {l}").trim().to_string(), pts));
        }
        for (l, pts) in e {
            err.push((format!("{label} {l}").trim().to_string(), pts));
        }
    }
    if ach.is_empty() {
        return Vec::new();
    }
    sweep_chart(base, "comparison: achieved against target", &xl, &ach, &err)
}

/// Per-case overlays: for each flow, one chart with a line per run across the cases (numbered
/// on the x axis): p99 latency for latency-sensitive flows, throughput for the others. Returns
/// (title, SVG) per chart and the case numbering.
pub fn overlay_cases(docs: &[(String, Results)], dir: &Path) -> (Vec<Overlay>, Vec<(usize, String)>) {
    let mut cases: Vec<String> = Vec::new();
    let mut flows: Vec<(String, bool)> = Vec::new();
    for (_, d) in docs {
        for c in &d.cases {
            if !cases.contains(&c.name) {
                cases.push(c.name.clone());
            }
            if c.flows.len() > MAX_ITEMS {
                continue;
            }
            for f in &c.flows {
                if !flows.iter().any(|x| x.0 == f.name) {
                    flows.push((f.name.clone(), latency_sensitive(&f.kind)));
                }
            }
        }
    }
    let key: Vec<(usize, String)> = cases.iter().enumerate().map(|(i, n)| (i + 1, n.clone())).collect();
    let mut out = Vec::new();
    for (k, (flow, lat)) in flows.iter().enumerate().take(12) {
        let (what, unit) = if *lat { ("p99 latency", "ms") } else { ("throughput", "Mbit/s") };
        let mut c = Chart::new(format!("{flow}: {what} per case"), "case", unit);
        for (j, (label, d)) in docs.iter().enumerate() {
            let pts: Vec<(f64, f64)> = cases
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    let f = d.cases.iter().find(|c| &c.name == n)?.flows.iter().find(|f| &f.name == flow)?;
                    Some(((i + 1) as f64, if *lat { f.latency_ms.p99 } else { f.achieved_bps / 1e6 }))
                })
                .collect();
            let mut s = Series::new(label.clone(), pts, j);
            s.dashed = j > 0 && docs.len() == 2;
            c.series.push(s);
        }
        if c.data_bounds().is_none() {
            continue;
        }
        c.x = Some((0.5, cases.len() as f64 + 0.5));
        c.integer_x = true;
        let base = dir.join(format!("compare-{}", k + 1));
        if let Some(svg) =
            plot::chart(&base, &c).into_iter().find(|p| p.extension().is_some_and(|e| e == "svg"))
        {
            out.push((c.title.clone(), svg));
        }
    }
    (out, key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ClassResult, FlowResult, Latency};

    fn doc(p99: f64, classes: &[(&str, f64)]) -> Results {
        Results {
            scenario: "s".into(),
            cases: vec![Case {
                name: "c".into(),
                flows: vec![
                    FlowResult {
                        name: "ping".into(),
                        kind: "probe".into(),
                        latency_ms: Latency { p50: 1.0, p90: 1.0, p99, max: p99 },
                        ..Default::default()
                    },
                    FlowResult {
                        name: "bulk".into(),
                        kind: "tcp-cubic".into(),
                        achieved_bps: 5e6,
                        ..Default::default()
                    },
                ],
                classes: classes
                    .iter()
                    .map(|(id, a)| ClassResult {
                        id: id.to_string(),
                        rate_bps: 1_000_000,
                        ceil_bps: 2_000_000,
                        achieved_bps: *a,
                        packets: 1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn every_class_and_flow_is_compared_and_differences_are_marked() {
        let docs = vec![
            ("a".to_string(), doc(20.0, &[("1:10", 1e6), ("1:20", 2e6)])),
            ("b".to_string(), doc(200.0, &[("1:10", 1e6), ("1:20", 1e6)])),
        ];
        let cmp = compare(&docs);
        let items: Vec<&Item> = cmp.rows.iter().map(|r| &r.1).collect();
        assert_eq!(
            items,
            vec![
                &Item::Flow("ping".into()),
                &Item::Flow("bulk".into()),
                &Item::Class("1:10".into()),
                &Item::Class("1:20".into())
            ]
        );
        let t = table(&cmp);
        assert!(t.contains("200*"), "{t}");
        assert!(
            t.contains("class 1:20") && t.contains("100.0% of ceil") && t.contains("100.0% of rate"),
            "{t}"
        );
        let h = html(&cmp, &[], &[]);
        assert!(h.contains("class=\"worse\">200<"), "p99 rise not marked worse");
    }

    #[test]
    fn a_flow_that_delivered_nothing_shows_no_latency() {
        let mut starved = doc(20.0, &[]);
        let ping = &mut starved.cases[0].flows[0];
        (ping.sent, ping.received, ping.loss_pct) = (100, 0, 100.0);
        let docs = vec![("a".to_string(), doc(20.0, &[])), ("b".to_string(), starved)];
        let cmp = compare(&docs);
        let Some(Values { lat: Some(lat), .. }) = &cmp.rows[0].2[1] else { panic!("no ping row") };
        assert_eq!(lat[..3], [None, None, None], "latency of a flow with nothing received");
        assert_eq!(lat[3], Some(100.0));
        let t = table(&cmp);
        let line = t.lines().find(|l| l.trim_start().starts_with("b ")).expect("row of run b");
        assert_eq!(line.matches(" - ").count(), 3, "{t}");
        assert!(html(&cmp, &[], &[]).contains("<td>-</td>"));
    }
}
