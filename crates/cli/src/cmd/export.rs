//! `sluice export --to tc|toml CONFIG`: converts between a tc script and the native TOML form.

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice export`.
#[derive(clap::Args)]
pub struct Args {
    /// Target form.
    #[arg(long, value_parser = ["tc", "toml"])]
    pub to: String,
    /// A tc script or a `.toml` configuration.
    pub config: PathBuf,
    /// Define a script variable (NAME=VALUE), repeatable.
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// Write here instead of stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Converts and prints.
pub fn run(args: Args) -> Result<ExitCode> {
    let Some(loaded) = super::config_load::load(&args.config, &args.vars)? else {
        return Ok(ExitCode::from(2));
    };
    let text = match args.to.as_str() {
        "tc" => {
            if let Some((dev, h)) = sluice_tc::export::first_wide_handle(&loaded.state) {
                anyhow::bail!(
                    "{dev}: {h} has a minor above ffff, which tc's 16-bit handles cannot express; \
                     keep this configuration in the native form (--to toml)"
                );
            }
            sluice_tc::export::to_tc_script(&loaded.state)
        }
        _ => sluice_tc::export::to_toml(&loaded.state)?,
    };
    super::write_output(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
