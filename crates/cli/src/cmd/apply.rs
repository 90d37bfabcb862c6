//! `sluice apply --dev IF CONFIG`: program the kernel's tc through netlink, read it back and
//! compare; `--dry-run` prints the equivalent tc commands instead.

use anyhow::{Context, Result};
use sluice_config::burst::BurstPolicy;
use sluice_lab::kernel::{self, ObjectId, Plan};
use std::process::ExitCode;

/// Exit status when the kernel was changed but does not hold the whole configuration (objects
/// refused, filters not programmed, or a read-back mismatch); `--dry-run` uses it when the real
/// run would end so. Errors before anything is sent exit 1.
const PARTIAL: u8 = 2;

/// Arguments of `sluice apply`.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0 the kernel holds the whole configuration; 1 nothing was sent \
(the configuration cannot be encoded, or no such device); 2 the kernel holds only part of it \
(objects refused, filters not programmed yet, or the read-back differs), and with --dry-run: the \
real run would end so.")]
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
    let mut pairs = args.vars.clone();
    pairs.push(format!("DEV={}", args.dev));
    let Some(loaded) = super::config_load::load(std::path::Path::new(&args.config), &pairs)? else {
        return Ok(ExitCode::FAILURE);
    };
    let state = loaded.state;
    let policy = if args.tc_default_burst { BurstPolicy::TcDefault } else { BurstPolicy::Sluice };
    let plan = Plan::new(&state, &args.dev, policy).with_context(|| format!("in {}", args.config))?;
    let filters = plan.filters().len();
    if args.dry_run {
        for line in plan.tc_commands() {
            println!("{line}");
        }
        if filters > 0 {
            eprintln!(
                "sluice apply would not program {filters} filter(s) (not supported yet): {} would get the \
                 qdiscs and classes only, and all its traffic would go to {}",
                args.dev,
                plan.unclassified_destination()
            );
            return Ok(ExitCode::from(PARTIAL));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (dev, config) = (args.dev.clone(), state.clone());
    let (rep, objs) = sluice_lab::netns::in_netns(args.netns.as_deref(), move || {
        let rep = kernel::apply(&Plan::new(&config, &dev, policy)?)?;
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
    // Objects already reported as refused are not reported again as missing.
    let diffs: Vec<_> = plan.compare(&objs).into_iter().filter(|d| !rep.was_refused(d.object)).collect();
    for d in &diffs {
        eprintln!("MISMATCH {d}");
    }
    let total = plan.qdiscs().count() + plan.classes().count();
    if diffs.is_empty() && rep.applied.len() == total {
        println!("read back through netlink: the kernel matches the model ({total} qdiscs and classes)");
    } else if diffs.is_empty() {
        println!(
            "read back through netlink: the kernel matches the model for the {} qdiscs and classes it accepted (of {total})",
            rep.applied.len()
        );
    }
    if rep.refused.is_empty() && diffs.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let objects_refused = rep.refused.len() - rep.filters_refused();
    let mut what = Vec::new();
    if objects_refused > 0 {
        what.push(format!("{objects_refused} qdisc(s)/class(es) refused"));
    }
    if rep.filters_refused() > 0 {
        what.push(format!("{} filter(s) not programmed (not supported yet)", rep.filters_refused()));
    }
    if !diffs.is_empty() {
        what.push(format!("{} mismatch(es) in the read-back", diffs.len()));
    }
    let root = plan.qdiscs().find(|q| q.parent == sluice_lab::netlink::TC_H_ROOT).map(|q| q.handle);
    let now = if root.is_some_and(|h| !rep.was_refused(ObjectId::Qdisc(h))) {
        let mut s = format!(
            "{} now holds {} of the configuration's {total} qdiscs and classes",
            args.dev,
            rep.applied.len()
        );
        if rep.filters_refused() > 0 {
            s += &format!(" and no filters: all its traffic goes to {}", plan.unclassified_destination());
        }
        s
    } else {
        format!("{} keeps the kernel's default qdisc", args.dev)
    };
    eprintln!("sluice apply: the kernel does not hold the whole configuration: {}. {now}.", what.join(", "));
    Ok(ExitCode::from(PARTIAL))
}
