//! `sluice lint CONFIG`: warnings with explanations and fixes; exit 0 clean, 1 warnings, 2 errors.

use anyhow::Result;
use sluice_tc::lint::{lint, render, LintOpts};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice lint`.
#[derive(clap::Args)]
pub struct Args {
    /// A tc script or a `.toml` configuration.
    pub config: PathBuf,
    /// Mean timer wake-up jitter in µs used by the burst model.
    #[arg(long, default_value_t = 80.0)]
    pub jitter: f64,
    /// Link rate (e.g. 20mbit) for devices without a `# sluice: link-rate` directive.
    #[arg(long)]
    pub link_rate: Option<String>,
    /// Devices whose traffic is tunnelled (`*` for all), for the flow-keys check.
    #[arg(long)]
    pub tunnels: Vec<String>,
    /// Treat warnings as errors (exit 2).
    #[arg(long)]
    pub deny_warnings: bool,
    /// Define a script variable (NAME=VALUE), repeatable.
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// Also print the lines the loader skipped.
    #[arg(long)]
    pub notes: bool,
    /// Output format.
    #[arg(long, value_parser = ["text", "json"], default_value = "text")]
    pub format: String,
}

/// Lints and prints.
pub fn run(args: Args) -> Result<ExitCode> {
    let Some(loaded) = super::config_load::load(&args.config, &args.vars)? else {
        return Ok(ExitCode::from(2));
    };
    let link_rate = match &args.link_rate {
        Some(r) => Some(sluice_core::units::parse_rate(r)?.bps()),
        None => None,
    };
    let opts =
        LintOpts { jitter_us: args.jitter, link_rate, tunnels: args.tunnels.clone(), ..Default::default() };
    let findings = lint(&loaded.state, Some(&loaded), &opts);
    if args.notes {
        for n in &loaded.notes {
            out!("note: {}:{}: {}", args.config.display(), n.line, n.text);
        }
    }
    if args.format == "json" {
        out!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        outp!("{}", render(&findings, &args.config.display().to_string()));
        out!("{} warning(s)", findings.len());
    }
    Ok(match (findings.is_empty(), args.deny_warnings) {
        (true, _) => ExitCode::SUCCESS,
        (false, false) => ExitCode::from(1),
        (false, true) => ExitCode::from(2),
    })
}
