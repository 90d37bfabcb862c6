//! `sluice bench`: the in-process scheduler benchmarks (HTB at 1k-1M classes against the naive
//! reference, fq_codel, the full frame path), as a table or JSON, with memory per class from the
//! binary's counting allocator. `--callgrind-case NAME` runs one case's hot loop for callgrind.

use anyhow::{bail, Result};
use sluice_bench::{BenchOptions, CALLGRIND_CASES};
use std::process::ExitCode;

/// Arguments of `sluice bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Leaf class counts for the HTB cases, comma-separated.
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

/// Runs the benchmarks.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(name) = &args.callgrind_case {
        match sluice_bench::callgrind_case(name) {
            Ok(n) => {
                println!("{name}: {n} packets in callgrind_loop");
                return Ok(ExitCode::SUCCESS);
            }
            Err(e) => bail!(e),
        }
    }
    if let Some(json) = &args.from_json {
        let Some(path) = &args.plot else { bail!("--from-json needs --plot FILE.svg") };
        let text = std::fs::read_to_string(json)?;
        let results = sluice_bench::from_json(&text).map_err(anyhow::Error::msg)?;
        let pct = if args.active.contains(&10) { 10 } else { args.active[0] };
        sluice_bench::plot::scaling_svg(&results, pct, path).map_err(anyhow::Error::msg)?;
        eprintln!("wrote {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.classes.is_empty() || args.classes.contains(&0) || args.active.iter().any(|&p| p == 0 || p > 100)
    {
        bail!("--classes needs positive counts and --active percentages in 1..=100");
    }
    if !sluice_bench::mem::installed() {
        eprintln!("note: counting allocator not installed; bytes per class not measured");
    }
    let opts = BenchOptions {
        classes: args.classes.clone(),
        active: args.active.clone(),
        quick: args.quick,
        reference: !args.no_reference,
    };
    let results = sluice_bench::run(&opts, |r| {
        if !args.json {
            eprintln!(
                "  {} {} classes={} active={}%: p50 {:.1} ns/pkt",
                r.scheduler.name(),
                r.case,
                r.classes,
                r.active_pct,
                r.ns_per_pkt_p50
            );
        }
    });
    if args.json {
        println!("{}", sluice_bench::to_json(&results));
    } else {
        print!("{}", sluice_bench::to_table(&results));
    }
    if let Some(path) = &args.plot {
        let pct = if args.active.contains(&10) { 10 } else { args.active[0] };
        sluice_bench::plot::scaling_svg(&results, pct, path).map_err(anyhow::Error::msg)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
