//! `report.html`: one self-contained page with the plots (SVG inline) and the tables.

use crate::schema::Results;
use std::fmt::Write;
use std::path::PathBuf;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Builds the page. `plots` are (caption, svg file) pairs, inlined.
pub fn render(r: &Results, plots: &[(String, PathBuf)]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Sluice: {}</title><style>\
         body{{font-family:sans-serif;margin:2em;max-width:1100px}} table{{border-collapse:collapse;margin:.5em 0 1.5em}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} th{{background:#eee}} td:first-child{{text-align:left}}\
         figure{{margin:1em 0}} svg{{max-width:100%;height:auto}}</style></head><body>",
        esc(&r.scenario)
    );
    let _ = write!(
        h,
        "<h1>{}</h1><p>{}</p><p>backend <b>{}</b>, seed {}, {} case(s)</p>",
        esc(&r.scenario),
        esc(&r.description),
        esc(&r.backend),
        r.seed,
        r.cases.len()
    );
    for (cap, path) in plots {
        let svg = std::fs::read_to_string(path).unwrap_or_default();
        let svg = match svg.find("<svg") {
            Some(i) => &svg[i..],
            None => continue,
        };
        let _ = write!(h, "<figure>{svg}<figcaption>{}</figcaption></figure>", esc(cap));
    }
    for c in &r.cases {
        let _ = write!(h, "<h2>{}</h2>", esc(&c.name));
        if !c.classes.is_empty() {
            h.push_str("<table><tr><th>class</th><th>rate Mbit/s</th><th>ceil Mbit/s</th><th>achieved Mbit/s</th><th>error %</th><th>bytes</th><th>packets</th><th>drops</th></tr>");
            for cl in &c.classes {
                let t = cl.ceil_bps.max(cl.rate_bps) as f64;
                let e = if t > 0.0 { (cl.achieved_bps - t) / t * 100.0 } else { 0.0 };
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&cl.id),
                    cl.rate_bps as f64 / 1e6,
                    cl.ceil_bps as f64 / 1e6,
                    cl.achieved_bps / 1e6,
                    e,
                    cl.bytes,
                    cl.packets,
                    cl.drops
                );
            }
            h.push_str("</table>");
        }
        h.push_str("<table><tr><th>flow</th><th>host</th><th>kind</th><th>Mbit/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>jitter ms</th><th>loss %</th></tr>");
        for f in &c.flows {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.3}</td><td>{:.2}</td></tr>",
                esc(&f.name),
                esc(&f.host),
                esc(&f.kind),
                f.achieved_bps / 1e6,
                f.latency_ms.p50,
                f.latency_ms.p90,
                f.latency_ms.p99,
                f.latency_ms.max,
                f.jitter_ms,
                f.loss_pct
            );
        }
        h.push_str("</table>");
        if !c.qdiscs.is_empty() {
            h.push_str("<table><tr><th>link</th><th>qdisc</th><th>bytes</th><th>packets</th><th>drops</th><th>overlimits</th><th>max backlog B</th></tr>");
            for q in &c.qdiscs {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
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
    }
    h.push_str("</body></html>\n");
    h
}
