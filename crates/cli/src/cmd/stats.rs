//! `sluice stats`: `tc -s`-style statistics from a running `sluice shape`.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice stats`.
#[derive(clap::Args)]
pub struct Args {
    /// Control socket of the shaper.
    #[arg(long)]
    control: Option<PathBuf>,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `sluice stats`.
pub fn run(args: Args) -> Result<ExitCode> {
    let path = args.control.unwrap_or_else(sluice_live::control::default_path);
    let out = sluice_live::control::request(&path, if args.json { "stats json" } else { "stats" })?;
    print!("{out}");
    Ok(if out.starts_with("error") { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
