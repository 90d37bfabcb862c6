//! `sluice scenarios`: the built-in scenarios, one line each.

use anyhow::Result;
use std::process::ExitCode;

/// Arguments of `sluice scenarios`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the TOML source of this scenario instead of the list.
    #[arg(long)]
    show: Option<String>,
    /// Run the built-in scenarios and print the README's seed table (scripts/seed-table.sh).
    #[arg(long, conflicts_with = "show")]
    seed_table: bool,
    /// With --seed-table: take the results from DIR/NAME.json files instead of running.
    #[arg(long, requires = "seed_table")]
    from: Option<std::path::PathBuf>,
}

/// Lists the built-in scenarios.
pub fn run(args: Args) -> Result<ExitCode> {
    if args.seed_table {
        let table = match &args.from {
            Some(dir) => sluice_sim::seed_table::render_from(dir),
            None => sluice_sim::seed_table::render(),
        }
        .map_err(anyhow::Error::msg)?;
        outp!("{table}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(name) = args.show {
        return match sluice_sim::builtin::BUILTIN.iter().find(|(n, _, _)| *n == name) {
            Some((_, _, src)) => {
                print!("{src}");
                Ok(ExitCode::SUCCESS)
            }
            None => anyhow::bail!("no built-in scenario `{name}` (see `sluice scenarios`)"),
        };
    }
    let list = sluice_sim::builtin::list();
    let w = list.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, desc) in list {
        println!("{name:<w$}  {desc}");
    }
    Ok(ExitCode::SUCCESS)
}
