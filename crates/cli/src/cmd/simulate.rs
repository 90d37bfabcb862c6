//! `sluice simulate <NAME|FILE>`: run a scenario on the virtual clock and report.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sluice_report::Results;
use sluice_sim::run::{run, run_with_tc_stats, RunInfo, RunOptions};
use sluice_sim::scenario::{Scenario, ScenarioError};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Arguments of `sluice simulate`.
#[derive(clap::Args)]
pub struct Args {
    /// A built-in scenario name (see `sluice scenarios`) or a scenario TOML file.
    scenario: String,
    /// Write the results JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write plots (PNG, SVG), .flent.gz time series, results.json and report.html here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// RNG seed (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Override a parameter: key=value; a comma list sweeps it (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// No progress bar and no summary table.
    #[arg(long)]
    quiet: bool,
    /// Write, per case, `tc -s qdisc show` and `tc -s class show` of every hop that runs a tc
    /// configuration (tc-script shaper, IFB download shaper, netem link) with the run's counters,
    /// to compare with the kernel's `tc -s` (`-` prints them).
    #[arg(long, value_name = "FILE")]
    tc_stats: Option<PathBuf>,
    /// Run even when the work estimate says the run would take hours (the memory estimate
    /// still applies).
    #[arg(long)]
    force: bool,
}

/// A scenario error rendered by miette with the offending line.
#[derive(Debug, thiserror_impl::Error, miette::Diagnostic)]
#[error("{message}")]
struct Diag {
    message: String,
    #[source_code]
    src: miette::NamedSource<String>,
    #[label("here")]
    span: Option<miette::SourceSpan>,
    #[help]
    help: Option<String>,
}

mod thiserror_impl {
    pub use thiserror::Error;
}

/// Prints a scenario error with file:line:col, the source line (a window of it when it is long:
/// miette cannot draw columns past 65 535) and the hint.
pub fn report_scenario_error(e: &ScenarioError) {
    let message = format!("{}:{}:{}: {}", e.path, e.line, e.col, e.message);
    let (src, offset) = super::config_load::snippet(&e.source_text, e.line, e.col);
    if src.is_empty() {
        eprintln!("{message}");
        if let Some(h) = &e.hint {
            eprintln!("  hint: {h}");
        }
        return;
    }
    let len = e.span.as_ref().map_or(0, |r| r.end.saturating_sub(r.start)).min(src.len() - offset);
    let d = Diag {
        message,
        src: miette::NamedSource::new(format!("{}:{}", e.path, e.line), src),
        span: Some((offset, len).into()),
        help: e.hint.clone(),
    };
    eprintln!("{:?}", miette::Report::new(d));
}

/// Runs the scenario.
pub fn run_cmd(args: Args) -> Result<ExitCode> {
    let sc = match Scenario::find(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            report_scenario_error(&e);
            return Ok(ExitCode::from(2));
        }
    };
    let mut overrides = Vec::new();
    for s in &args.set {
        let Some((k, v)) = s.split_once('=') else {
            anyhow::bail!("--set `{s}`: expected key=value");
        };
        overrides.push((k.trim().to_string(), v.trim().to_string()));
    }
    let opts = RunOptions { overrides, seed: args.seed, force: args.force };
    let started = Instant::now();
    let bar: Mutex<Option<ProgressBar>> = Mutex::new(None);
    let quiet = args.quiet;
    let progress = |f: f64| {
        if quiet {
            return;
        }
        // Show a bar only once the run has taken a second.
        if started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let mut b = bar.lock().unwrap_or_else(|p| p.into_inner());
        let pb = b.get_or_insert_with(|| {
            let pb = ProgressBar::new(1000);
            pb.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {percent}% (eta {eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            pb
        });
        pb.set_position((f * 1000.0) as u64);
    };
    let ran = match args.tc_stats {
        Some(_) => run_with_tc_stats(&sc, &opts, &progress),
        None => run(&sc, &opts, &progress).map(|(r, i)| (r, i, Vec::new())),
    };
    let (results, info, tc_stats) = match ran {
        Ok(r) => r,
        Err(e) => {
            report_scenario_error(&e);
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(pb) = bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
        pb.finish_and_clear();
    }
    for l in &info.lint {
        eprintln!("lint: {l}");
    }
    if !args.quiet {
        print_summary(&results, &info);
    }
    if let Some(p) = &args.tc_stats {
        let text: String = tc_stats.iter().map(|(case, t)| format!("== {case}\n{t}\n")).collect();
        if p.as_os_str() == "-" {
            outp!("{text}");
        } else {
            std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
        }
    }
    if let Some(p) = &args.json {
        std::fs::write(p, results.to_json()).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(dir) = &args.out {
        let written = sluice_report::write_report(&results, dir)
            .with_context(|| format!("writing report to {}", dir.display()))?;
        if !args.quiet {
            out!("wrote {} files to {} (open {}/report.html)", written, dir.display(), dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn mbit(b: f64) -> String {
    format!("{:.3}", b / 1e6)
}

/// The per-class accuracy summary of generated leaves (`leaves.*` in `extra`), if any.
fn print_leaf_accuracy(c: &sluice_report::Case) {
    let get = |k: &str| c.extra.get(&format!("leaves.{k}")).copied();
    let (Some(count), Some(backlogged)) = (get("count"), get("backlogged")) else { return };
    outp!("  leaves: {count} in {} site(s), {backlogged} backlogged", get("sites").unwrap_or(1.0));
    if let (Some(lo), Some(med), Some(hi)) =
        (get("rate_min_bps"), get("rate_median_bps"), get("rate_max_bps"))
    {
        outp!(", rate min/median/max {}/{}/{} Mbit/s", mbit(lo), mbit(med), mbit(hi));
    }
    if let (Some(ideal), Some(max), Some(mean)) = (get("ideal_bps"), get("err_max_pct"), get("err_mean_pct"))
    {
        outp!(" (ideal {}, error max {max:.4}% mean {mean:.4}%)", mbit(ideal));
    }
    out!();
}

fn print_summary(r: &Results, info: &RunInfo) {
    out!("scenario {} (seed {}): {} case(s)", r.scenario, r.seed, r.cases.len());
    for c in &r.cases {
        out!("\n== {}", c.name);
        if !c.classes.is_empty() {
            out!(
                "  {:<10} {:>12} {:>12} {:>14} {:>15} {:>8}",
                "class",
                "rate Mbit",
                "ceil Mbit",
                "achieved Mbit",
                "of rate/ceil",
                "drops"
            );
            for cl in &c.classes {
                // Against the rate while within the guarantee, against the ceil above it.
                out!(
                    "  {:<10} {:>12} {:>12} {:>14} {:>15} {:>8}",
                    cl.id,
                    mbit(cl.rate_bps as f64),
                    mbit(cl.ceil_bps as f64),
                    mbit(cl.achieved_bps),
                    sluice_report::analysis::class_reference_text(cl),
                    cl.drops
                );
            }
        }
        out!(
            "  {:<14} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "flow",
            "host",
            "Mbit/s",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "max ms",
            "jitter",
            "loss %"
        );
        for f in &c.flows {
            // A flow none of whose packets was measured has no latency: "-", not 0.
            let measured = sluice_report::analysis::Metric::P50.of(f).is_some();
            let l = |v: f64, digits: usize| if measured { format!("{v:.digits$}") } else { "-".into() };
            out!(
                "  {:<14} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7.2}",
                f.name,
                f.host,
                mbit(f.achieved_bps),
                l(f.latency_ms.p50, 2),
                l(f.latency_ms.p90, 2),
                l(f.latency_ms.p99, 2),
                l(f.latency_ms.max, 2),
                l(f.jitter_ms, 3),
                f.loss_pct
            );
            if let Some(g) = c.extra.get(&format!("{}.goodput_bps", f.name)) {
                let get = |k: &str| c.extra.get(&format!("{}.{k}", f.name)).copied().unwrap_or(0.0);
                println!(
                    "  {:<14} {:>6} {:>10}   in-order goodput; {} retransmitted, {} timeouts, srtt {:.1} ms",
                    "",
                    "tcp",
                    mbit(*g),
                    get("retransmits"),
                    get("timeouts"),
                    get("srtt_ms")
                );
            }
            if let Some(b) = c.extra.get(&format!("{}.unclassified_bytes", f.name)) {
                println!("  {:<14} warning: {b} bytes passed the shaper outside every class", "");
            }
            if let Some(v) = c.extra.get(&format!("seed_mbit.{}", f.name)) {
                out!("  {:<14} {:>6} {:>10.3}   (the seed's figure)", "", "seed", v);
            }
        }
        print_leaf_accuracy(c);
    }
    let rate = if info.wall_s > 0.0 { info.events as f64 / info.wall_s / 1e6 } else { 0.0 };
    out!(
        "\nsimulated {:.1} s in {:.2} s wall: {} events ({:.1} M events/s), {} packet transmissions",
        info.virtual_s,
        info.wall_s,
        info.events,
        rate,
        info.transmissions
    );
}
