//! `sluice compare A.json B.json ...`: a side-by-side table of results and an overlay plot
//! (sluice-report's sweep overlay, PNG and SVG, for rate sweeps; an SVG per-case overlay otherwise).

use anyhow::{Context, Result};
use sluice_report::Results;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Results JSON files (from simulate or measure).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory for the overlay plot (compare.svg/png, or compare.svg for non-sweeps).
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

fn label(r: &Results, p: &std::path::Path) -> String {
    if r.backend.is_empty() {
        p.display().to_string()
    } else {
        format!(
            "{} ({})",
            r.backend,
            p.parent()
                .and_then(|d| d.file_name())
                .map(|d| d.to_string_lossy().to_string())
                .unwrap_or_default()
        )
    }
}

/// One row of the table: a metric of a case, a value per file.
fn rows(all: &[Results]) -> Vec<(String, Vec<String>)> {
    let mut names: Vec<String> = Vec::new();
    for r in all {
        for c in &r.cases {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    let mut out = Vec::new();
    for n in &names {
        let cases: Vec<_> = all.iter().map(|r| r.cases.iter().find(|c| &c.name == n)).collect();
        let cell = |f: &dyn Fn(&sluice_report::Case) -> Option<String>| {
            cases.iter().map(|c| c.and_then(f).unwrap_or_else(|| "-".into())).collect::<Vec<_>>()
        };
        if cases.iter().flatten().any(|c| c.extra.contains_key("error_pct")) {
            out.push((
                format!("{n}: goodput vs ideal"),
                cell(&|c| {
                    Some(format!(
                        "{:.2}M {:+.2}%",
                        c.extra.get("goodput_bps")? / 1e6,
                        c.extra.get("error_pct")?
                    ))
                }),
            ));
        }
        if cases.iter().flatten().any(|c| !c.classes.is_empty()) {
            out.push((
                format!("{n}: class 1:1 wire rate"),
                cell(&|c| {
                    c.classes.first().map(|k| format!("{:.2}M drop {}", k.achieved_bps / 1e6, k.drops))
                }),
            ));
        }
        let mut flows: Vec<String> = Vec::new();
        for c in cases.iter().flatten() {
            for f in &c.flows {
                if !flows.contains(&f.name) {
                    flows.push(f.name.clone());
                }
            }
        }
        for fl in flows {
            out.push((
                format!("{n}: {fl}"),
                cell(&|c| {
                    let f = c.flows.iter().find(|f| f.name == fl)?;
                    Some(if f.kind == "probe" || f.latency_ms.p50 > 0.0 {
                        format!(
                            "p50 {:.2} p99 {:.2}ms loss {:.1}%",
                            f.latency_ms.p50, f.latency_ms.p99, f.loss_pct
                        )
                    } else {
                        format!("{:.2}M loss {:.1}%", f.achieved_bps / 1e6, f.loss_pct)
                    })
                }),
            ));
        }
    }
    out
}

/// Fallback overlay when sluice-report's sweep overlay does not apply: error % per case (sweeps
/// without a plot hint) or probe p99 per case, one polyline per file.
fn svg(all: &[Results], labels: &[String]) -> String {
    let sweep = all.iter().any(|r| r.cases.iter().any(|c| c.extra.contains_key("error_pct")));
    let series: Vec<Vec<(String, f64)>> = all
        .iter()
        .map(|r| {
            r.cases
                .iter()
                .filter_map(|c| {
                    let y = if sweep {
                        *c.extra.get("error_pct")?
                    } else {
                        c.flows
                            .iter()
                            .filter(|f| f.kind == "probe")
                            .map(|f| f.latency_ms.p99)
                            .fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))))?
                    };
                    Some((c.name.clone(), y))
                })
                .collect()
        })
        .collect();
    let xs: Vec<String> = {
        let mut v: Vec<String> = Vec::new();
        for s in &series {
            for (x, _) in s {
                if !v.contains(x) {
                    v.push(x.clone());
                }
            }
        }
        v
    };
    let ys = series.iter().flatten().map(|p| p.1);
    let (mut lo, mut hi) = ys.clone().fold((0.0f64, 0.0f64), |(l, h), y| (l.min(y), h.max(y)));
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.1;
    lo -= pad;
    hi += pad;
    let (w, h, l, t, b) = (760.0, 420.0, 70.0, 40.0, 90.0);
    let px = |i: usize| l + (w - l - 20.0) * (i as f64 + 0.5) / xs.len().max(1) as f64;
    let py = |y: f64| t + (h - t - b) * (1.0 - (y - lo) / (hi - lo));
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let title = if sweep { "shaped-rate error vs ideal goodput (%)" } else { "probe RTT p99 (ms)" };
    let _ = writeln!(s, "<text x=\"{l}\" y=\"20\" font-size=\"14\">{title}</text>");
    let _ = writeln!(
        s,
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>",
        py(0.0f64.clamp(lo, hi)),
        w - 20.0,
        py(0.0f64.clamp(lo, hi))
    );
    for k in 0..=4 {
        let y = lo + (hi - lo) * k as f64 / 4.0;
        let _ = writeln!(s, "<text x=\"5\" y=\"{:.1}\">{:.2}</text><line x1=\"{l}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#eee\"/>", py(y) + 4.0, y, py(y), w - 20.0, py(y));
    }
    for (i, x) in xs.iter().enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"end\" transform=\"rotate(-30 {:.1} {})\">{x}</text>",
            px(i),
            h - b + 18.0,
            px(i),
            h - b + 18.0
        );
    }
    for (k, ser) in series.iter().enumerate() {
        let c = colors[k % colors.len()];
        let pts: Vec<String> = ser
            .iter()
            .filter_map(|(x, y)| {
                xs.iter().position(|v| v == x).map(|i| format!("{:.1},{:.1}", px(i), py(*y)))
            })
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        for p in &pts {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{c}\"/>");
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
            l + 10.0 + 240.0 * (k % 3) as f64,
            h - 20.0 + 14.0 * (k / 3) as f64 - 14.0,
            labels[k]
        );
    }
    s + "</svg>\n"
}

/// Runs `sluice compare`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut all = Vec::new();
    let mut labels = Vec::new();
    for f in &args.files {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let r = Results::from_json(&text).with_context(|| format!("parsing {}", f.display()))?;
        labels.push(label(&r, f));
        all.push(r);
    }
    let rows = rows(&all);
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(10).max(10);
    let wc: Vec<usize> = (0..all.len())
        .map(|i| rows.iter().map(|r| r.1[i].len()).chain([labels[i].len()]).max().unwrap_or(8))
        .collect();
    print!("{:<w0$}", "");
    for (i, l) in labels.iter().enumerate() {
        print!("  {:<w$}", l, w = wc[i]);
    }
    println!();
    for (name, cells) in &rows {
        print!("{name:<w0$}");
        for (i, c) in cells.iter().enumerate() {
            print!("  {:<w$}", c, w = wc[i]);
        }
        println!();
    }
    std::fs::create_dir_all(&args.out)?;
    // Rate sweeps with a plot hint: sluice-report's target-vs-achieved overlay (PNG and SVG).
    let docs: Vec<(String, Results)> = labels.iter().cloned().zip(all.iter().cloned()).collect();
    let files = sluice_report::compare::overlay_sweep(&docs, &args.out.join("compare"));
    if !files.is_empty() {
        for f in &files {
            eprintln!("wrote {}", f.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Other scenarios (and sweeps without a hint): sluice-report has no per-case overlay yet, so
    // draw the probe p99 / error per case here.
    let p = args.out.join("compare.svg");
    std::fs::write(&p, svg(&all, &labels))?;
    eprintln!("wrote {}", p.display());
    Ok(ExitCode::SUCCESS)
}
