//! `sluice reload CFG`: swap a running shaper's configuration without losing queued packets.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice reload`.
#[derive(clap::Args)]
pub struct Args {
    /// The new tc script for the shaped (IN -> OUT) direction.
    config: PathBuf,
    /// Control socket of the shaper.
    #[arg(long)]
    control: Option<PathBuf>,
}

/// Runs `sluice reload`.
pub fn run(args: Args) -> Result<ExitCode> {
    let cfg = std::fs::canonicalize(&args.config).with_context(|| format!("{}", args.config.display()))?;
    let path = args.control.unwrap_or_else(sluice_live::control::default_path);
    let out = sluice_live::control::request(&path, &format!("reload {}", cfg.display()))?;
    print!("{out}");
    Ok(if out.starts_with("error") { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
