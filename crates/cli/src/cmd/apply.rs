//! `sluice apply --dev IF CONFIG`: program the kernel's tc through netlink, read it back and
//! compare; `--dry-run` prints the equivalent tc commands instead.

use anyhow::{Context, Result};
use sluice_config::burst::BurstPolicy;
use sluice_lab::filters;
use sluice_lab::kernel::{self, ObjectId, Plan};
use std::process::ExitCode;

/// Exit status when the kernel was changed but does not hold the whole configuration (objects
/// refused or a read-back mismatch). Errors before anything is sent exit 1.
const PARTIAL: u8 = 2;

/// Arguments of `sluice apply`.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0 the kernel holds the whole configuration; 1 nothing was sent \
(the configuration cannot be encoded, or no such device); 2 the kernel holds only part of it \
(objects refused, or the read-back differs).")]
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
        return Ok(ExitCode::SUCCESS);
    }
    let (dev, config) = (args.dev.clone(), state.clone());
    let (rep, objs, kfilters) = sluice_lab::netns::in_netns(args.netns.as_deref(), move || {
        let rep = kernel::apply(&Plan::new(&config, &dev, policy)?)?;
        let objs = kernel::read_back(&dev)?;
        let kfilters = filters::read_filters(&dev)?;
        Ok((rep, objs, kfilters))
    })?;
    for a in &rep.applied {
        println!("applied  {a}");
    }
    for n in &rep.notes {
        println!("note     {n}");
    }
    for w in &rep.warnings {
        eprintln!("warning  {w}");
    }
    for r in &rep.refused {
        eprintln!("REFUSED  {r}");
    }
    // Objects already reported as refused are not reported again as missing.
    let mut diffs: Vec<String> = plan
        .compare(&objs)
        .into_iter()
        .filter(|d| !rep.was_refused(d.object))
        .map(|d| d.to_string())
        .collect();
    let accepted: Vec<_> =
        plan.filter_nodes().filter(|(i, _)| !rep.was_refused(ObjectId::Filter(*i))).map(|(_, f)| f).collect();
    diffs.extend(filters::compare(&accepted, &kfilters));
    for d in &diffs {
        eprintln!("MISMATCH {d}");
    }
    let total = plan.qdiscs().count() + plan.classes().count() + filters;
    if diffs.is_empty() && rep.applied.len() == total {
        println!(
            "read back through netlink: the kernel matches the model ({total} qdiscs, classes and filters)"
        );
    } else if diffs.is_empty() {
        println!(
            "read back through netlink: the kernel matches the model for the {} qdiscs, classes and filters it accepted (of {total})",
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
        what.push(format!("{} filter(s) refused", rep.filters_refused()));
    }
    if !diffs.is_empty() {
        what.push(format!("{} mismatch(es) in the read-back", diffs.len()));
    }
    let root = plan.qdiscs().find(|q| q.parent == sluice_lab::netlink::TC_H_ROOT).map(|q| q.handle);
    let now = if root.is_some_and(|h| !rep.was_refused(ObjectId::Qdisc(h))) {
        let mut s = format!(
            "{} now holds {} of the configuration's {total} qdiscs, classes and filters",
            args.dev,
            rep.applied.len()
        );
        if rep.filters_refused() > 0 {
            s += &format!(
                "; what the refused filters would classify goes to {}",
                plan.unclassified_destination()
            );
        }
        s
    } else {
        format!("{} keeps the kernel's default qdisc", args.dev)
    };
    eprintln!("sluice apply: the kernel does not hold the whole configuration: {}. {now}.", what.join(", "));
    Ok(ExitCode::from(PARTIAL))
}
