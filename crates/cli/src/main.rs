//! `sluice`: the command-line front end. Thin: one module per subcommand under `cmd/`.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod cmd;

// Counts heap bytes so that `sluice bench` can report memory per class (a few atomic
// adds per allocation; nothing on the shaping path allocates).
#[global_allocator]
static ALLOC: &stats_alloc::StatsAlloc<std::alloc::System> = &sluice_bench::mem::COUNTING_ALLOCATOR;

/// Sluice: a traffic-control engine. Simulate, shape live, or compile to the kernel's tc.
#[derive(Parser)]
#[command(name = "sluice", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the exact token-bucket arithmetic for a rate and packet size.
    Rate(cmd::rate::Args),
    /// Build, remove or show the netns testbed (client <-> shaper <-> server).
    Lab(cmd::lab::Args),
    /// Program the kernel's tc through netlink (or print tc commands with --dry-run).
    Apply(cmd::apply::Args),
    /// iproute2 tc on emulated devices (state in a JSON file).
    Tc(cmd::tc::Args),
    /// `ip link add|del|show` for emulated dummy, veth and ifb devices.
    Ip(cmd::ip::Args),
    /// Run a shell script with `tc` and `ip` standing for Sluice (state in a file) and harmless
    /// stand-ins for modprobe, ethtool, sysctl, iptables...; lists what ran and what was stood in for.
    Run(cmd::run::Args),
    /// What `sluice run`'s wrappers call (not for direct use).
    #[command(hide = true)]
    Shim(cmd::run::ShimArgs),
    /// Shape real traffic between two interfaces (AF_PACKET rings, the core engine).
    Shape(cmd::shape::Args),
    /// Statistics from a running `sluice shape`.
    Stats(cmd::stats::Args),
    /// Swap a running shaper's configuration without losing queued packets.
    Reload(cmd::reload::Args),
    /// Run a scenario on the virtual clock (no root, no network) and report.
    Simulate(cmd::simulate::Args),
    /// List the built-in scenarios.
    Scenarios(cmd::scenarios::Args),
    /// Run the kernel's tc-testing (tdc) JSON cases against the emulated tc.
    Conform(cmd::conform::Args),
    /// Convert a configuration between a tc script and the native TOML form.
    Export(cmd::export::Args),
    /// Check a configuration for what tc accepts but gets wrong (exit 0 clean, 1 warnings, 2 errors).
    Lint(cmd::lint::Args),
    /// Draw the qdisc/class/filter tree as Graphviz DOT or SVG.
    Viz(cmd::viz::Args),
    /// Run an experiment on the lab (rate-sweep, rrul, home-uplink, tcp) and write results JSON.
    Measure(cmd::measure::Args),
    /// Side-by-side table and overlay plot of results JSON files.
    Compare(cmd::compare::Args),
    /// Benchmark the schedulers in-process: HTB at 1k-1M classes against a naive reference,
    /// fq_codel and the full frame path.
    Bench(cmd::bench::Args),
}

/// A reader that goes away (`sluice scenarios | head -1`) ends the command quietly, as the
/// pipe-safe `out!` writers do: `println!` panics on a closed pipe, so this hook turns exactly
/// that panic into a clean exit and leaves every other panic to the default hook.
fn quiet_on_closed_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> std::process::ExitCode {
    quiet_on_closed_pipe();
    // Configuration loaders run shell scripts that need a real shell with `tc` calling back here.
    if std::env::var_os("SLUICE_EXE").is_none() {
        if let Ok(exe) = std::env::current_exe() {
            std::env::set_var("SLUICE_EXE", exe);
        }
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Rate(a) => cmd::rate::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Apply(a) => cmd::apply::run(a),
        Command::Tc(a) => cmd::tc::run(a, cmd::tc::Tool::Tc),
        Command::Ip(a) => cmd::ip::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Shim(a) => cmd::run::shim(a),
        Command::Shape(a) => cmd::shape::run(a),
        Command::Stats(a) => cmd::stats::run(a),
        Command::Reload(a) => cmd::reload::run(a),
        Command::Simulate(a) => cmd::simulate::run_cmd(a),
        Command::Scenarios(a) => cmd::scenarios::run(a),
        Command::Conform(a) => cmd::conform::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Lint(a) => cmd::lint::run(a),
        Command::Viz(a) => cmd::viz::run(a),
        Command::Measure(a) => cmd::measure::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Bench(a) => cmd::bench::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
