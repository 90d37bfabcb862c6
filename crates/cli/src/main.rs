//! `sluice`: the command-line front end. Thin: one module per subcommand under `cmd/`.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod cmd;

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
    /// Run a scenario on the virtual clock (no root, no network) and report.
    Simulate(cmd::simulate::Args),
    /// List the built-in scenarios.
    Scenarios(cmd::scenarios::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Rate(a) => cmd::rate::run(a),
        Command::Simulate(a) => cmd::simulate::run_cmd(a),
        Command::Scenarios(a) => cmd::scenarios::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
