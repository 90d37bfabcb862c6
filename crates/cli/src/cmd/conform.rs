//! `sluice conform tdc DIR...`: the kernel's tc-testing cases against the emulated tc.

use anyhow::Result;
use sluice_tc::conform::{run_tdc, Status};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice conform`.
#[derive(clap::Args)]
pub struct Args {
    /// Suite (only `tdc`).
    #[arg(value_parser = ["tdc"])]
    pub suite: String,
    /// tdc JSON files or directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Also list skipped cases with the reason.
    #[arg(long)]
    pub verbose: bool,
    /// Exit 1 when the pass rate of non-skipped cases is below this percentage.
    #[arg(long, default_value_t = 0.0)]
    pub min_pass: f64,
}

/// Runs the corpus, one line per failed case, then the totals.
pub fn run(args: Args) -> Result<ExitCode> {
    let report = run_tdc(&args.paths)?;
    for c in &report.cases {
        match &c.status {
            Status::Fail(r) => out!("FAIL {} {} ({}): {}", c.id, c.name, c.file.display(), r),
            Status::Skip(r) if args.verbose => out!("SKIP {} {}: {}", c.id, c.name, r),
            _ => {}
        }
    }
    let (p, f, s) = report.counts();
    out!("{p} passed, {f} failed, {s} skipped ({:.1}% of non-skipped cases pass)", report.pass_rate());
    Ok(if report.pass_rate() < args.min_pass { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
