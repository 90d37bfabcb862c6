//! `sluice compare A.json B.json ...`: every class and flow of every case side by side (one line
//! per run, differences from the first run marked), overlay plots on shared axes, and a
//! self-contained compare.html.

use anyhow::{Context, Result};
use sluice_report::compare::{compare, html, overlay_cases, overlay_sweep, table};
use sluice_report::Results;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `sluice compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Results JSON files (from simulate or measure).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory for compare.html and the overlay plots (compare.svg/png and compare-N.svg/png).
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

/// "backend (dir)" when the results name a backend, else the path; made unique.
fn label(r: &Results, p: &Path) -> String {
    let dir =
        p.parent().and_then(|d| d.file_name()).map(|d| d.to_string_lossy().to_string()).unwrap_or_default();
    match (r.backend.is_empty(), dir.is_empty()) {
        (true, _) => p.display().to_string(),
        (false, true) => format!("{} ({})", r.backend, p.display()),
        (false, false) => format!("{} ({dir})", r.backend),
    }
}

/// Runs `sluice compare`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut docs: Vec<(String, Results)> = Vec::new();
    for f in &args.files {
        let text = std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        let r = Results::from_json(&text)
            .with_context(|| format!("parsing {} as a results JSON", f.display()))?;
        let mut l = label(&r, f);
        if docs.iter().any(|d| d.0 == l) {
            l = f.display().to_string();
        }
        docs.push((l, r));
    }
    let cmp = compare(&docs);
    // Pipe-safe: `sluice compare a.json b.json | head -1` must not panic.
    outp!("{}", table(&cmp));
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    // The headline overlay (compare.svg/png): the sweep when the runs are sweeps, else the first
    // per-case overlay; all of them go into compare.html.
    let mut figures: Vec<(String, PathBuf)> = Vec::new();
    let sweep = overlay_sweep(&docs, &args.out.join("compare"));
    if let Some(svg) = sweep.iter().find(|p| p.extension().is_some_and(|e| e == "svg")) {
        figures.push(("achieved against target".into(), svg.clone()));
    }
    let (cases, key) = overlay_cases(&docs, &args.out);
    if figures.is_empty() {
        if let Some((_, first)) = cases.first() {
            for ext in ["svg", "png"] {
                let from = first.with_extension(ext);
                if from.exists() {
                    std::fs::copy(&from, args.out.join(format!("compare.{ext}")))?;
                }
            }
        }
    }
    figures.extend(cases);
    let page = args.out.join("compare.html");
    std::fs::write(&page, html(&cmp, &figures, &key))
        .with_context(|| format!("writing {}", page.display()))?;
    eprintln!("wrote {} and {} overlay plot(s) in {}", page.display(), figures.len(), args.out.display());
    Ok(ExitCode::SUCCESS)
}
