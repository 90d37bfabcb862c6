//! `sluice shape --config CFG --in IF_A --out IF_B`: shape real frames between two interfaces.

use anyhow::Result;
use sluice_live::shaper::{self, Options};
use sluice_tc::model::State;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `sluice shape`.
#[derive(clap::Args)]
pub struct Args {
    /// tc script for the IN -> OUT direction (`$DEV` is OUT).
    #[arg(long, required_unless_present = "unlimited")]
    config: Option<String>,
    /// Forward IN -> OUT through one unlimited FIFO (for forwarding benchmarks).
    #[arg(long, conflicts_with = "config")]
    unlimited: bool,
    /// Interface frames arrive on.
    #[arg(long = "in")]
    in_if: String,
    /// Interface frames leave by.
    #[arg(long = "out")]
    out_if: String,
    /// Shape OUT -> IN too, with this tc script (`$DEV` is IN). Without it that direction is
    /// forwarded unshaped.
    #[arg(long, value_name = "REVERSE_CFG")]
    bidirectional: Option<String>,
    /// Control socket path (default: $XDG_RUNTIME_DIR/sluice-shape.sock or /tmp/sluice-UID/...).
    #[arg(long)]
    control: Option<PathBuf>,
    /// Serve Prometheus metrics on this loopback address, e.g. 127.0.0.1:9464.
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Forward inside this network namespace (e.g. slc-lab-shp).
    #[arg(long)]
    netns: Option<String>,
    /// Print only the final counters.
    #[arg(long)]
    quiet: bool,
    /// Replay deadlines missed by up to this many ms (late wake-ups, descheduling), so they cost
    /// no rate; a longer gap gives up the rest.
    #[arg(long, value_name = "MS", default_value_t = 20.0)]
    catch_up: f64,
    /// Spin instead of sleeping for deadlines under 50 us (less jitter, one core busy).
    #[arg(long)]
    busy_poll: bool,
    /// Never sleep: poll the rings continuously (lowest latency on a quiet path; one core at 100%).
    #[arg(long)]
    spin: bool,
    /// Worker threads, each with its own engines; subscribers are spread between them by
    /// address and the classes they share are rebalanced every 200 us. One by default: with
    /// several, `reload` is refused and frames go through AF_PACKET. A root that limits a rate
    /// and is not HTB runs in one worker.
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// Which address of the frames arriving on IN is the subscriber's: src (subscribers are on
    /// the IN side) or dst (on the OUT side).
    #[arg(long, value_name = "src|dst", default_value = "src", value_parser = ["src", "dst"])]
    shard_by: String,
    /// Frame I/O: `packet` (AF_PACKET), `xdp` (AF_XDP, zero-copy where the driver grants it,
    /// falling back to AF_PACKET), or `auto` (per driver; the choice and its reason are printed).
    #[arg(long, value_name = "auto|xdp|packet", default_value = "auto")]
    io: sluice_live::io::IoMode,
}

/// Reads a configuration for device `dev` (`$DEV`), printing a diagnostic on error.
fn load_config(path: &str, dev: &str) -> Result<Option<State>> {
    let vars = [format!("DEV={dev}")];
    Ok(super::config_load::load(Path::new(path), &vars)?.map(|l| l.state))
}

/// Runs `sluice shape`.
pub fn run(args: Args) -> Result<ExitCode> {
    // Every configuration becomes the model and runs in the packet engine; `--unlimited` is one
    // FIFO of 10 000 frames.
    let forward = match &args.config {
        Some(path) => match load_config(path, &args.out_if)? {
            Some(s) => s,
            None => return Ok(ExitCode::from(2)),
        },
        None => sluice_live::config::unlimited(&args.out_if),
    };
    let reverse = match &args.bidirectional {
        Some(path) => match load_config(path, &args.in_if)? {
            Some(s) => Some(s),
            None => return Ok(ExitCode::from(2)),
        },
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    shaper::stop_on_signals(&stop)?;
    let dev = args.out_if.clone();
    let opts = Options {
        in_if: args.in_if,
        out_if: args.out_if,
        forward,
        reverse,
        control: Some(args.control.unwrap_or_else(sluice_live::control::default_path)),
        metrics: args.metrics,
        max_duration: args.duration.map(Duration::from_secs_f64),
        stop,
        load_config: Box::new(move |p| sluice_live::config::load(p, &dev).map_err(|e| e.to_string())),
        verbose: !args.quiet,
        netns: args.netns,
        pacing: sluice_live::pacing::Pacing {
            catch_up: sluice_core::Span::from_nanos((args.catch_up.clamp(0.0, 1000.0) * 1e6) as u64),
            busy_poll: args.busy_poll,
            spin: args.spin,
            ..Default::default()
        },
        workers: args.workers.clamp(1, 64),
        shard_by: if args.shard_by == "dst" {
            sluice_live::sys::FanoutKey::Destination
        } else {
            sluice_live::sys::FanoutKey::Source
        },
        io: args.io,
    };
    let snap = shaper::run(opts)?;
    println!("final counters:\n{}", snap.to_text());
    Ok(ExitCode::SUCCESS)
}
