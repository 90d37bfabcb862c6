//! `report.html`: one self-contained page that answers first (headline, summary table of every
//! case with the seed's figure beside ours), then the figures with compared cases side by side,
//! then the details (collapsed).

use crate::analysis::{
    case_figures, class_reference_text, flow_names, headline, layout, num, sweep_cell, Layout, Metric,
    MAX_SUMMARY_FLOWS,
};
use crate::figures::Group;
use crate::schema::{Case, FlowResult, Results};
use std::fmt::Write;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1360px;padding:0 1.5em;color:#222;line-height:1.4}\
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:2px solid #ddd;padding-bottom:.2em}h3{margin:1.2em 0 .2em}\
.desc{color:#555;margin:.2em 0 1em}\
.answer{background:#f3f7fc;border-left:5px solid #1f77b4;padding:.7em 1.1em;margin:1em 0}\
.answer p{margin:.2em 0}.answer ul{margin:.4em 0 .2em;padding-left:1.3em}.answer li{margin:.15em 0}\
.seed{color:#444;font-size:.95em}.meta{color:#777;font-size:.85em}\
table{border-collapse:collapse;margin:.4em 0 1.2em;font-size:.88em}\
td,th{border:1px solid #d4d4d4;padding:2px 7px;text-align:right;white-space:nowrap}\
th{background:#eef1f4;position:sticky;top:0;z-index:1}td.l,th.l{text-align:left}\
tbody.g{border-top:2px solid #999}\
td.better{background:#d9f2dd}td.worse{background:#f8d7da}td.chg{background:#fff3cd}td.seedv{color:#7a4b00;background:#fdf6e8}\
.scroll{max-height:60vh;overflow:auto;border:1px solid #ddd;display:inline-block;max-width:100%}\
.scroll table{margin:0}\
.grid{display:grid;gap:10px;align-items:start}.grid figure{margin:0;border:1px solid #e4e4e4;background:#fff}\
svg{width:100%;height:auto;display:block}\
.note{color:#555;margin:.1em 0 .5em;font-size:.92em}\
details{margin:.8em 0}summary{cursor:pointer;font-weight:600;font-size:1.1em;padding:.3em 0}\
.key{font-size:.85em;color:#555}";

/// Builds the page from the results and the drawn figure groups.
pub fn render(r: &Results, groups: &[Group], flent_files: &[String]) -> String {
    let lay = layout(r);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>Sluice: {}</title><style>{STYLE}</style></head><body>",
        esc(&r.scenario)
    );
    let _ = write!(h, "<h1>{}</h1>", esc(&r.scenario));
    if !r.description.is_empty() {
        let _ = write!(h, "<p class=\"desc\">{}</p>", esc(&r.description));
    }
    // The answer first.
    let hl = headline(r, 5);
    h.push_str("<div class=\"answer\">");
    let _ = write!(h, "<p><b>{}</b></p>", esc(&hl.what));
    if let Some(l) = &hl.lead {
        let _ = write!(h, "<p>{}</p>", esc(l));
    }
    if !hl.findings.is_empty() {
        h.push_str("<ul>");
        for f in &hl.findings {
            let _ = write!(h, "<li>{}</li>", esc(f));
        }
        h.push_str("</ul>");
    }
    if let Some((doc, claim)) = crate::seeds::claim(&r.scenario) {
        let _ = write!(h, "<p class=\"seed\">Seed {doc} reports: {}.</p>", esc(claim));
    }
    h.push_str("</div>");
    let _ = write!(
        h,
        "<p class=\"meta\">backend <b>{}</b> · seed {} · schema {} · {} case{}</p>",
        esc(if r.backend.is_empty() { "sim" } else { &r.backend }),
        r.seed,
        r.schema_version,
        r.cases.len(),
        if r.cases.len() == 1 { "" } else { "s" }
    );
    h.push_str("<h2>Summary</h2>");
    summary(&mut h, r, &lay);
    let primary: Vec<&Group> = groups.iter().filter(|g| g.primary).collect();
    if !primary.is_empty() {
        h.push_str("<h2>Figures</h2>");
        for g in primary {
            group(&mut h, g);
        }
    }
    let secondary: Vec<&Group> = groups.iter().filter(|g| !g.primary).collect();
    if !secondary.is_empty() {
        h.push_str("<details><summary>More figures: ");
        h.push_str(&esc(&secondary.iter().map(|g| g.title.as_str()).collect::<Vec<_>>().join(", ")));
        h.push_str("</summary>");
        for g in secondary {
            group(&mut h, g);
        }
        h.push_str("</details>");
    }
    let _ = write!(h, "<details><summary>Every case in full ({} tables)</summary>", r.cases.len());
    for c in &r.cases {
        case_tables(&mut h, c);
    }
    h.push_str("</details>");
    if !flent_files.is_empty() {
        let _ = write!(
            h,
            "<p class=\"meta\">flent data files (open with <code>flent -i FILE</code>): {}</p>",
            esc(&flent_files.join(", "))
        );
    }
    h.push_str("</body></html>\n");
    h
}

fn group(h: &mut String, g: &Group) {
    let _ = write!(h, "<h3>{}</h3><p class=\"note\">{}</p>", esc(&g.title), esc(&g.note));
    // A lone figure is drawn at its own size rather than stretched across the page.
    let width = if g.columns == 1 { ";max-width:960px" } else { "" };
    let _ = write!(
        h,
        "<div class=\"grid\" style=\"grid-template-columns:repeat({},minmax(0,1fr)){width}\">",
        g.columns
    );
    for p in &g.panels {
        let svg = std::fs::read_to_string(&p.svg).unwrap_or_default();
        if let Some(i) = svg.find("<svg") {
            let _ = write!(h, "<figure>{}</figure>", &svg[i..]);
        }
    }
    h.push_str("</div>");
}

/// Aggregate stand-in for a case with very many flows.
fn aggregate(c: &Case) -> FlowResult {
    let n = c.flows.len().max(1) as f64;
    let mut f = FlowResult {
        name: format!("{} flows", c.flows.len()),
        kind: "all".into(),
        achieved_bps: c.flows.iter().map(|f| f.achieved_bps).sum(),
        jitter_ms: c.flows.iter().map(|f| f.jitter_ms).sum::<f64>() / n,
        loss_pct: c.flows.iter().map(|f| f.loss_pct).sum::<f64>() / n,
        ..Default::default()
    };
    let mut p50: Vec<f64> = c.flows.iter().map(|f| f.latency_ms.p50).collect();
    p50.sort_by(f64::total_cmp);
    f.latency_ms.p50 = p50.get(p50.len() / 2).copied().unwrap_or(0.0);
    f.latency_ms.p99 = c.flows.iter().map(|f| f.latency_ms.p99).fold(0.0, f64::max);
    f
}

/// Class for a cell among compared values: better/worse/changed.
fn cell_class(m: Metric, vals: &[Option<f64>], j: usize) -> &'static str {
    let present: Vec<f64> = vals.iter().flatten().copied().collect();
    let Some(v) = vals[j] else { return "" };
    if present.len() < 2 {
        return "";
    }
    let (lo, hi) = present.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
    if hi - lo < m.floor() || (hi - lo) < 0.1 * hi.abs() {
        return "";
    }
    match m.lower_is_better() {
        Some(true) if v == lo => "better",
        Some(true) if v == hi => "worse",
        None if j > 0
            && vals[0].is_some_and(|a| {
                (a - v).abs() >= m.floor() && (a - v).abs() >= 0.1 * a.abs().max(v.abs())
            }) =>
        {
            "chg"
        }
        _ => "",
    }
}

fn th_params(h: &mut String, lay: &Layout, rowspan: usize) {
    for k in &lay.rest {
        let _ = write!(h, "<th class=\"l\" rowspan=\"{rowspan}\">{}</th>", esc(k));
    }
}

fn summary(h: &mut String, r: &Results, lay: &Layout) {
    let cols = &lay.columns;
    let ncol = cols.len();
    let g = lay.compare.clone().unwrap_or_default();
    let col_head = |h: &mut String| {
        for v in cols {
            let _ = write!(h, "<th>{}</th>", esc(if g.is_empty() { "" } else { v }));
        }
    };
    let many = lay.rows.len() > 30;
    if many {
        h.push_str("<div class=\"scroll\">");
    }
    // Sweeps: achieved and error against the target per compared value.
    let is_sweep = r.cases.iter().any(|c| sweep_cell(r, c).is_some());
    if is_sweep {
        let two = ncol > 1 || !g.is_empty();
        h.push_str("<table><thead><tr>");
        th_params(h, lay, if two { 2 } else { 1 });
        if two {
            let _ = write!(h, "<th colspan=\"{ncol}\">achieved Mbit/s</th><th colspan=\"{ncol}\">error against target %</th>");
            h.push_str("</tr><tr>");
            col_head(h);
            col_head(h);
        } else {
            h.push_str("<th>achieved Mbit/s</th><th>error against target %</th>");
        }
        h.push_str("</tr></thead><tbody>");
        for row in &lay.rows {
            h.push_str("<tr>");
            for (_, v) in &row.key {
                let _ = write!(h, "<td class=\"l\">{}</td>", esc(v));
            }
            let cells: Vec<Option<(f64, f64)>> =
                row.cases.iter().map(|i| i.and_then(|i| sweep_cell(r, &r.cases[i]))).collect();
            for c in &cells {
                let _ = write!(h, "<td>{}</td>", c.map(|c| format!("{:.3}", c.0)).unwrap_or("-".into()));
            }
            for c in &cells {
                let (txt, cls) = match c {
                    Some((_, e)) => (
                        if e.abs() < 5e-5 { "0.0000".to_string() } else { format!("{e:+.4}") },
                        if e.abs() < 0.01 {
                            "better"
                        } else if e.abs() > 1.0 {
                            "worse"
                        } else {
                            ""
                        },
                    ),
                    None => ("-".into(), ""),
                };
                let _ = write!(h, "<td class=\"{cls}\">{txt}</td>");
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody></table>");
        if many {
            h.push_str("</div>");
        }
        h.push_str("<p class=\"key\">Green: within 0.01% of the target; red: more than 1% off.</p>");
        return;
    }
    // Flows: one line per flow, every metric with the compared values side by side.
    let has_seed = r
        .cases
        .iter()
        .any(|c| c.flows.iter().any(|f| crate::seeds::figure(&r.scenario, c, &f.name).is_some()));
    let two = !g.is_empty();
    h.push_str("<table><thead><tr>");
    th_params(h, lay, if two { 2 } else { 1 });
    let _ = write!(h, "<th class=\"l\" rowspan=\"{}\">flow</th>", if two { 2 } else { 1 });
    for m in Metric::ALL {
        let _ = write!(h, "<th colspan=\"{ncol}\">{}</th>", m.header());
    }
    if has_seed {
        let _ = write!(h, "<th colspan=\"{ncol}\">the seed's figure</th>");
    }
    if two {
        h.push_str("</tr><tr>");
        for _ in Metric::ALL {
            col_head(h);
        }
        if has_seed {
            col_head(h);
        }
    }
    h.push_str("</tr></thead>");
    for row in &lay.rows {
        let cases: Vec<Option<&Case>> = row.cases.iter().map(|i| i.map(|i| &r.cases[i])).collect();
        let big = cases.iter().flatten().any(|c| c.flows.len() > MAX_SUMMARY_FLOWS);
        let names: Vec<String> =
            if big { vec![String::new()] } else { flow_names(cases.iter().flatten().copied()) };
        let figures: Vec<String> = {
            let mut v: Vec<String> = Vec::new();
            for c in cases.iter().flatten() {
                for (k, _) in case_figures(c) {
                    if !v.contains(&k) {
                        v.push(k);
                    }
                }
            }
            // With compared cases, only the figures that differ between them (the rest are in
            // the per-case tables).
            if ncol > 1 {
                v.retain(|k| {
                    let vals: Vec<f64> =
                        cases.iter().flatten().filter_map(|c| c.extra.get(k).copied()).collect();
                    let (lo, hi) = vals.iter().fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(*x), h.max(*x)));
                    vals.len() > 1 && hi - lo > 0.05 * hi.abs().max(lo.abs())
                });
            }
            v
        };
        let span = (names.len() + figures.len()).max(1);
        h.push_str("<tbody class=\"g\">");
        for (n, name) in names.iter().enumerate() {
            h.push_str("<tr>");
            if n == 0 {
                for (_, v) in &row.key {
                    let _ = write!(h, "<td class=\"l\" rowspan=\"{span}\">{}</td>", esc(v));
                }
            }
            let flows: Vec<Option<FlowResult>> = cases
                .iter()
                .map(|c| {
                    c.and_then(|c| {
                        if big {
                            Some(aggregate(c))
                        } else {
                            c.flows.iter().find(|f| &f.name == name).cloned()
                        }
                    })
                })
                .collect();
            let label = flows.iter().flatten().next().map(|f| f.name.clone()).unwrap_or_default();
            let kind = flows.iter().flatten().next().map(|f| f.kind.clone()).unwrap_or_default();
            let _ = write!(h, "<td class=\"l\" title=\"{}\">{}</td>", esc(&kind), esc(&label));
            for m in Metric::ALL {
                let vals: Vec<Option<f64>> = flows.iter().map(|f| f.as_ref().and_then(|f| m.of(f))).collect();
                for j in 0..ncol {
                    let cls = cell_class(m, &vals, j);
                    let txt = vals[j].map(num).unwrap_or_else(|| "-".into());
                    let _ = write!(h, "<td class=\"{cls}\">{txt}</td>");
                }
            }
            if has_seed {
                for c in &cases {
                    let s = c.and_then(|c| crate::seeds::figure(&r.scenario, c, name)).unwrap_or_default();
                    let _ = write!(h, "<td class=\"l seedv\">{}</td>", esc(&s));
                }
            }
            h.push_str("</tr>");
        }
        for (n, k) in figures.iter().enumerate() {
            h.push_str("<tr>");
            if n == 0 && names.is_empty() {
                for (_, v) in &row.key {
                    let _ = write!(h, "<td class=\"l\" rowspan=\"{span}\">{}</td>", esc(v));
                }
            }
            let _ = write!(h, "<td class=\"l\"><i>{}</i></td>", esc(k));
            let vals: Vec<String> = cases
                .iter()
                .map(|c| c.and_then(|c| c.extra.get(k)).map(|v| num(*v)).unwrap_or("-".into()))
                .collect();
            // Named figures have no metric columns: each compared value spans one metric group.
            for (j, v) in vals.iter().enumerate() {
                let who = if ncol > 1 { format!("{}: ", cols[j]) } else { String::new() };
                let _ = write!(h, "<td colspan=\"5\" class=\"l\">{}{}</td>", esc(&who), esc(v));
            }
            if has_seed {
                let _ = write!(h, "<td colspan=\"{ncol}\"></td>");
            }
            h.push_str("</tr>");
        }
        h.push_str("</tbody>");
    }
    h.push_str("</table>");
    if many {
        h.push_str("</div>");
    }
    if two {
        let _ = write!(
            h,
            "<p class=\"key\">Each metric shows {g} = {} side by side. Green: clearly better (lower latency, jitter or loss); red: clearly worse; yellow: throughput differs by more than 10% from {g}={}.</p>",
            esc(&cols.join(" | ")),
            esc(&cols[0])
        );
    }
}

fn case_tables(h: &mut String, c: &Case) {
    let _ = write!(h, "<h3>{}</h3>", esc(&c.name));
    if !c.classes.is_empty() {
        h.push_str("<table><tr><th class=\"l\">class</th><th>rate Mbit/s</th><th>ceil Mbit/s</th><th>achieved Mbit/s</th><th>against its reference</th><th>bytes</th><th>packets</th><th>drops</th></tr>");
        for cl in c.classes.iter().take(200) {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&cl.id),
                cl.rate_bps as f64 / 1e6,
                cl.ceil_bps as f64 / 1e6,
                cl.achieved_bps / 1e6,
                class_reference_text(cl),
                cl.bytes,
                cl.packets,
                cl.drops
            );
        }
        if c.classes.len() > 200 {
            let _ = write!(
                h,
                "<tr><td class=\"l\" colspan=\"8\">… and {} more classes (see results.json)</td></tr>",
                c.classes.len() - 200
            );
        }
        h.push_str("</table>");
    }
    if !c.flows.is_empty() {
        h.push_str("<table><tr><th class=\"l\">flow</th><th class=\"l\">host</th><th class=\"l\">kind</th><th>Mbit/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>jitter ms</th><th>loss %</th></tr>");
        for f in c.flows.iter().take(200) {
            // Latency and jitter of a flow none of whose packets was measured: "-", not 0.
            let measured = Metric::P50.of(f).is_some();
            let l = |v: f64, digits: usize| if measured { format!("{v:.digits$}") } else { "-".into() };
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
                esc(&f.name),
                esc(&f.host),
                esc(&f.kind),
                f.achieved_bps / 1e6,
                l(f.latency_ms.p50, 2),
                l(f.latency_ms.p90, 2),
                l(f.latency_ms.p99, 2),
                l(f.latency_ms.max, 2),
                l(f.jitter_ms, 3),
                f.loss_pct
            );
        }
        if c.flows.len() > 200 {
            let _ = write!(
                h,
                "<tr><td class=\"l\" colspan=\"10\">… and {} more flows (see results.json)</td></tr>",
                c.flows.len() - 200
            );
        }
        h.push_str("</table>");
    }
    if !c.qdiscs.is_empty() {
        h.push_str("<table><tr><th class=\"l\">link</th><th class=\"l\">qdisc</th><th>bytes</th><th>packets</th><th>drops</th><th>overlimits</th><th>max backlog B</th></tr>");
        for q in &c.qdiscs {
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&q.link),
                esc(&q.kind),
                q.bytes,
                q.packets,
                q.drops,
                q.overlimits,
                q.max_backlog_bytes
            );
        }
        h.push_str("</table>");
    }
    if !c.extra.is_empty() {
        h.push_str("<table><tr><th class=\"l\">figure</th><th>value</th></tr>");
        for (k, v) in &c.extra {
            let _ = write!(h, "<tr><td class=\"l\">{}</td><td>{}</td></tr>", esc(k), num(*v));
        }
        h.push_str("</table>");
    }
}
