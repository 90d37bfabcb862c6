//! `--out DIR`: results.json, one .flent.gz per case, plots and report.html.

use crate::plot::{bar_chart, line_chart, sweep_chart, sweep_lines, Line};
use crate::schema::Results;
use std::path::{Path, PathBuf};

/// Cases beyond this many get no per-case time-series plots (their data stays in the JSON).
const MAX_CASE_PLOTS: usize = 12;

fn slug(s: &str) -> String {
    let mut out: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    out.truncate(80);
    out
}

/// Writes everything into `dir`; returns the number of files written.
pub fn write_report(r: &Results, dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    std::fs::write(dir.join("results.json"), r.to_json())?;
    n += 1;
    let mut plots: Vec<(String, PathBuf)> = Vec::new();
    let mut add = |cap: String, files: Vec<PathBuf>, n: &mut usize| {
        *n += files.len();
        if let Some(svg) = files.iter().find(|p| p.extension().is_some_and(|e| e == "svg")) {
            plots.push((cap, svg.clone()));
        }
    };
    let (x, ach, err) = sweep_lines(r);
    if !ach.is_empty() {
        let f = sweep_chart(
            &dir.join("sweep"),
            &format!("{}: target vs achieved", r.scenario),
            &format!("{x} (Mbit/s)"),
            &ach,
            &err,
        );
        add(format!("Achieved rate of the first class against {x}, with the error panel."), f, &mut n);
    }
    for (i, c) in r.cases.iter().enumerate() {
        if let Some(gz) = crate::flent::flent_gz(r, c) {
            std::fs::write(dir.join(format!("{}.flent.gz", slug(&c.name))), gz)?;
            n += 1;
        }
        if i >= MAX_CASE_PLOTS {
            continue;
        }
        let base = slug(&c.name);
        if let Some(s) = &c.series {
            let tput: Vec<Line> = s
                .flow_bps
                .iter()
                .map(|(k, v)| {
                    (k.clone(), v.iter().enumerate().map(|(j, b)| (j as f64 * s.step_s, b / 1e6)).collect())
                })
                .collect();
            if !tput.is_empty() {
                let f = line_chart(
                    &dir.join(format!("{base}-throughput")),
                    &format!("{}: throughput", c.name),
                    "time (s)",
                    "Mbit/s",
                    &tput,
                );
                add(format!("{}: per-flow throughput", c.name), f, &mut n);
            }
            let lat: Vec<Line> = s
                .flow_latency_ms
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.iter()
                            .enumerate()
                            .filter(|(_, y)| **y > 0.0)
                            .map(|(j, y)| (j as f64 * s.step_s, *y))
                            .collect(),
                    )
                })
                .collect();
            if lat.iter().any(|l| !l.1.is_empty()) {
                let f = line_chart(
                    &dir.join(format!("{base}-latency")),
                    &format!("{}: latency", c.name),
                    "time (s)",
                    "ms",
                    &lat,
                );
                add(format!("{}: mean latency per step (probes: RTT; others: one-way)", c.name), f, &mut n);
            }
            let cdf: Vec<Line> = s.latency_cdf.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if !cdf.is_empty() {
                let f = line_chart(
                    &dir.join(format!("{base}-latency-cdf")),
                    &format!("{}: latency CDF", c.name),
                    "ms",
                    "fraction",
                    &cdf,
                );
                add(format!("{}: latency CDF", c.name), f, &mut n);
            }
            let q: Vec<Line> = s
                .backlog_bytes
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.iter().enumerate().map(|(j, b)| (j as f64 * s.step_s, b / 1024.0)).collect(),
                    )
                })
                .collect();
            if !q.is_empty() {
                let f = line_chart(
                    &dir.join(format!("{base}-queues")),
                    &format!("{}: queue backlog", c.name),
                    "time (s)",
                    "KiB",
                    &q,
                );
                add(format!("{}: queue occupancy", c.name), f, &mut n);
            }
        }
        if c.classes.len() > 1 && c.classes.len() <= 40 {
            let bars: Vec<_> = c
                .classes
                .iter()
                .map(|cl| (cl.id.clone(), cl.achieved_bps / 1e6, cl.rate_bps as f64 / 1e6))
                .collect();
            let f = bar_chart(
                &dir.join(format!("{base}-classes")),
                &format!("{}: per-class rate", c.name),
                "Mbit/s",
                &bars,
            );
            add(format!("{}: per-class achieved vs configured rate", c.name), f, &mut n);
        }
    }
    std::fs::write(dir.join("report.html"), crate::html::render(r, &plots))?;
    Ok(n + 1)
}
