//! `sluice rate RATE [SIZE]`: how long a packet takes at a rate, exactly and as the kernel computes it.

use anyhow::Result;
use sluice_core::units::{format_rate, parse_rate, parse_size};
use std::process::ExitCode;

/// Arguments of `sluice rate`.
#[derive(clap::Args)]
pub struct Args {
    /// A tc rate, e.g. 10gbit.
    rate: String,
    /// A tc size, e.g. 1500 or 64k.
    #[arg(default_value = "1500")]
    size: String,
}

/// Prints the exact transmission time of one packet.
pub fn run(args: Args) -> Result<ExitCode> {
    let rate = parse_rate(&args.rate)?;
    if rate.bps() == 0 {
        anyhow::bail!(
            "rate `{}` is zero: a packet would never be sent (give a rate above 0, e.g. 10mbit)",
            args.rate
        );
    }
    let size = parse_size(&args.size)?;
    let t = rate.time_to_send(size);
    println!("{} bytes at {}: {} ns", size, format_rate(rate), t.as_nanos());
    Ok(ExitCode::SUCCESS)
}
