//! `sluice apply --dev IF CONFIG`: program the kernel's tc through netlink, read it back and
//! compare; `--dry-run` prints the equivalent tc commands instead.

use anyhow::{bail, Context, Result};
use sluice_config::burst::BurstPolicy;
use sluice_lab::kernel;
use sluice_lab::tree::Tree;
use std::collections::HashMap;
use std::process::ExitCode;

/// Arguments of `sluice apply`.
#[derive(clap::Args)]
pub struct Args {
    /// Device to configure.
    #[arg(long)]
    dev: String,
    /// A configuration: a tc script (`$VAR` substitution, `$DEV` = --dev) or the TOML form.
    config: String,
    /// Print the equivalent tc commands; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Run inside this network namespace (a name under /run/netns).
    #[arg(long)]
    netns: Option<String>,
    /// Size missing bursts like tc (mtu only) instead of Sluice's burst rule (rate × 1 ms).
    #[arg(long)]
    tc_default_burst: bool,
    /// Variables for the script, NAME=VALUE (DEV is set to --dev).
    #[arg(long = "var")]
    vars: Vec<String>,
}

/// Runs `sluice apply`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut vars: HashMap<String, String> = args
        .vars
        .iter()
        .filter_map(|v| v.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    vars.insert("DEV".into(), args.dev.clone());
    let tree = Tree::load_file(std::path::Path::new(&args.config), &vars, &args.dev)
        .with_context(|| format!("in {}", args.config))?;
    let policy = if args.tc_default_burst { BurstPolicy::TcDefault } else { BurstPolicy::Sluice };
    if args.dry_run {
        for line in kernel::tc_commands(&args.dev, &tree, policy) {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dev = args.dev.clone();
    let t2 = tree.clone();
    let (rep, objs) = sluice_lab::netns::in_netns(args.netns.as_deref(), move || {
        let rep = kernel::apply(&dev, &t2, policy)?;
        let objs = kernel::read_back(&dev)?;
        Ok((rep, objs))
    })?;
    for a in &rep.applied {
        println!("applied  {a}");
    }
    for n in &rep.notes {
        println!("note     {n}");
    }
    for r in &rep.refused {
        eprintln!("REFUSED  {r}");
    }
    let diffs = kernel::compare(&tree, policy, &objs);
    if diffs.is_empty() {
        println!("read back through netlink: the kernel matches the model ({} objects)", objs.len());
    } else {
        for d in &diffs {
            eprintln!("MISMATCH {d}");
        }
    }
    if !rep.refused.is_empty() || !diffs.is_empty() {
        bail!("{} object(s) refused, {} mismatch(es)", rep.refused.len(), diffs.len());
    }
    Ok(ExitCode::SUCCESS)
}
