//! `sluice viz CONFIG [--stats FILE] [--format dot|svg] [-o FILE]`: draw the qdisc/class/filter tree.

use anyhow::Result;
use sluice_tc::viz::{build_graph, parse_stats, to_dot, to_svg, StatsMap};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice viz`.
#[derive(clap::Args)]
pub struct Args {
    /// A tc script or a `.toml` configuration.
    pub config: PathBuf,
    /// Results JSON (`{"cases":[{"classes":[...]}]}`) or `tc -s class show` output.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Which case of a results JSON to draw.
    #[arg(long, default_value_t = 0)]
    pub case: usize,
    /// Output format (default: from the -o extension, else dot).
    #[arg(long, value_parser = ["dot", "svg"])]
    pub format: Option<String>,
    /// Output file (default stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Define a script variable (NAME=VALUE), repeatable.
    #[arg(long = "var")]
    pub vars: Vec<String>,
}

/// Draws.
pub fn run(args: Args) -> Result<ExitCode> {
    let Some(loaded) = super::config_load::load(&args.config, &args.vars)? else {
        return Ok(ExitCode::from(2));
    };
    let stats = match &args.stats {
        Some(p) => parse_stats(&std::fs::read_to_string(p)?, args.case).map_err(anyhow::Error::msg)?,
        None => StatsMap::new(),
    };
    let max = sluice_tc::model::MAX_QDISC_DEPTH;
    if let Some(d) = loaded.state.devices.iter().find(|d| d.qdisc_depth(max + 1) > max) {
        anyhow::bail!(
            "{}: qdiscs nested more than {max} deep on {}: too deep to draw",
            args.config.display(),
            d.name
        );
    }
    let g = build_graph(&loaded.state, &stats);
    let fmt = args.format.clone().unwrap_or_else(|| match args.output.as_ref().and_then(|o| o.extension()) {
        Some(e) if e == "svg" => "svg".into(),
        _ => "dot".into(),
    });
    let text = if fmt == "svg" { to_svg(&g) } else { to_dot(&g) };
    super::write_output(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
