//! `sluice bench`: the in-process scheduler benchmarks (HTB at 1k-1M classes against the naive
//! reference, fq_codel, the full frame path), as a table or JSON, with memory per class from the
//! binary's counting allocator. `--callgrind-case NAME` runs one case's hot loop for callgrind.
//! Sizes that cannot fit in memory are refused before anything runs; output to a closed pipe
//! (`| head`) ends the run quietly.

use anyhow::{bail, Result};
use sluice_bench::{BenchOptions, BenchResult, CALLGRIND_CASES};
use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

/// Arguments of `sluice bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Leaf class counts for the HTB cases, comma-separated (every tree is one HTB qdisc).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000,1000000")]
    classes: Vec<usize>,
    /// Percentages of classes kept backlogged, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
    active: Vec<u32>,
    /// Shorter runs (about a tenth of the packets).
    #[arg(long)]
    quick: bool,
    /// Print `{"results":[...]}` instead of a table.
    #[arg(long)]
    json: bool,
    /// Do not run the naive reference scheduler.
    #[arg(long)]
    no_reference: bool,
    /// Also run each Sluice HTB case with one HTB qdisc per site (the layout 16-bit minors force
    /// above 65 535 classes), for comparison.
    #[arg(long)]
    nested: bool,
    /// Also draw ns/packet against classes (HTB, 10% backlogged, or the first --active) to this SVG.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Draw the plot from a saved `--json` output instead of running anything (needs --plot).
    #[arg(long, value_name = "JSON")]
    from_json: Option<std::path::PathBuf>,
    /// Run only this case's hot loop, for `valgrind --tool=callgrind --toggle-collect='*callgrind_loop*'`.
    #[arg(long, value_name = "NAME", help = format!("Run one case's hot loop under callgrind: {CALLGRIND_CASES}"))]
    callgrind_case: Option<String>,
}

/// Writes to stdout; `Break` once the reader has gone (a closed pipe), any other error is real.
fn out(text: &str) -> Result<ControlFlow<()>> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => Ok(ControlFlow::Continue(())),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ControlFlow::Break(())),
        Err(e) => Err(e.into()),
    }
}

/// Runs the benchmarks.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(name) = &args.callgrind_case {
        let n = sluice_bench::callgrind_case(name).map_err(anyhow::Error::msg)?;
        let _ = out(&format!("{name}: {n} packets in callgrind_loop\n"))?;
        return Ok(ExitCode::SUCCESS);
    }
    let pct = if args.active.contains(&10) { 10 } else { args.active.first().copied().unwrap_or(10) };
    if let Some(json) = &args.from_json {
        let Some(path) = &args.plot else { bail!("--from-json needs --plot FILE.svg") };
        let text = std::fs::read_to_string(json)?;
        let results = sluice_bench::from_json(&text).map_err(anyhow::Error::msg)?;
        sluice_bench::plot::scaling_svg(&results, pct, path).map_err(anyhow::Error::msg)?;
        eprintln!("wrote {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.classes.is_empty() || args.active.is_empty() {
        bail!("--classes and --active need at least one value");
    }
    let opts = BenchOptions {
        classes: args.classes.clone(),
        active: args.active.clone(),
        quick: args.quick,
        reference: !args.no_reference,
        nested: args.nested,
    };
    sluice_bench::check_options(&opts).map_err(anyhow::Error::msg)?;
    if !sluice_bench::mem::installed() {
        eprintln!("note: counting allocator not installed; bytes per class not measured");
    }
    // The table streams row by row; JSON needs every result first.
    let mut error = None;
    let mut done: Vec<BenchResult> = Vec::new();
    if !args.json && out(&sluice_bench::table_header())?.is_break() {
        return Ok(ExitCode::SUCCESS);
    }
    let results = sluice_bench::run(&opts, |r| {
        if args.json {
            eprintln!(
                "  {} {} classes={} active={}%: p50 {:.1} ns/pkt",
                r.scheduler.name(),
                r.case,
                r.classes,
                r.active_pct,
                r.ns_per_pkt_p50
            );
            return ControlFlow::Continue(());
        }
        done.push(r.clone());
        match out(&sluice_bench::table_row(r, &done)) {
            Ok(flow) => flow,
            Err(e) => {
                error = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    if args.json && out(&format!("{}\n", sluice_bench::to_json(&results)))?.is_break() {
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(path) = &args.plot {
        sluice_bench::plot::scaling_svg(&results, pct, path).map_err(anyhow::Error::msg)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
