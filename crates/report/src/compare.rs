//! Side-by-side comparison of results documents (simulator, live Sluice, kernel).

use crate::plot::{sweep_chart, sweep_lines, Line};
use crate::schema::Results;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A text table: one row per (case, class/flow), one column group per document.
pub fn table(docs: &[(String, Results)]) -> String {
    let mut out = String::new();
    let Some((_, first)) = docs.first() else {
        return out;
    };
    let _ = write!(out, "{:<40}", "case / item");
    for (label, _) in docs {
        let _ = write!(out, " {:>22}", label);
    }
    out.push('\n');
    for c in &first.cases {
        for cl in &c.classes {
            let _ = write!(out, "{:<40}", format!("{} class {}", c.name, cl.id));
            for (_, d) in docs {
                let v = d
                    .cases
                    .iter()
                    .find(|x| x.name == c.name)
                    .and_then(|x| x.classes.iter().find(|y| y.id == cl.id));
                match v {
                    Some(v) => {
                        let _ = write!(out, " {:>22}", format!("{:.3} Mbit/s", v.achieved_bps / 1e6));
                    }
                    None => {
                        let _ = write!(out, " {:>22}", "-");
                    }
                }
            }
            out.push('\n');
        }
        for f in &c.flows {
            let _ = write!(out, "{:<40}", format!("{} flow {}", c.name, f.name));
            for (_, d) in docs {
                let v = d
                    .cases
                    .iter()
                    .find(|x| x.name == c.name)
                    .and_then(|x| x.flows.iter().find(|y| y.name == f.name));
                match v {
                    Some(v) => {
                        let _ = write!(
                            out,
                            " {:>22}",
                            format!("{:.2}M p99 {:.1}ms", v.achieved_bps / 1e6, v.latency_ms.p99)
                        );
                    }
                    None => {
                        let _ = write!(out, " {:>22}", "-");
                    }
                }
            }
            out.push('\n');
        }
    }
    out
}

/// Overlays the sweep lines of several documents in one target-vs-achieved plot.
pub fn overlay_sweep(docs: &[(String, Results)], base: &Path) -> Vec<PathBuf> {
    let mut ach: Vec<Line> = Vec::new();
    let mut err: Vec<Line> = Vec::new();
    let mut xl = String::new();
    for (label, d) in docs {
        let (x, a, e) = sweep_lines(d);
        xl = x;
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
    sweep_chart(base, "comparison: target vs achieved", &format!("{xl} (Mbit/s)"), &ach, &err)
}
