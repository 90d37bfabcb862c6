//! `sluice apply --dev IF CONFIG`: program the kernel's tc through netlink, all or nothing and
//! incrementally (only the difference from what the device holds is sent), read it back and
//! compare; `--dry-run` prints the equivalent tc commands and rehearses the whole configuration
//! on a scratch device; `--set CLASS rate R` changes one HTB class in place. Filters are part of
//! the difference and of the transaction like qdiscs and classes.

use anyhow::{Context, Result};
use sluice_kernel::filters;
use sluice_kernel::kernel::{self, Plan};
use sluice_kernel::rate::{parse_classid, RateChange, RateSetter};
use sluice_kernel::txn::{self, ApplyOptions};
use sluice_lab::LabError;
use sluice_tc::burst::BurstPolicy;
use std::process::ExitCode;

/// Exit status when the kernel was changed but does not hold the whole configuration (a refused
/// change whose restore failed, or a read-back mismatch).
const PARTIAL: u8 = 2;

/// Requests listed one per line at most (a 10 000-subscriber tree is summarised).
const LISTED: usize = 40;

/// Arguments of `sluice apply`.
#[derive(clap::Args)]
#[command(after_help = "Exit status: 0 the kernel holds the whole configuration; 1 nothing was changed \
(the configuration cannot be encoded, a kind or option this kernel refuses, no such device, or a \
refusal whose change was undone: the previous tree is restored exactly); 2 the kernel holds only \
part of it (the restore after a refusal failed, or the read-back differs). Filters are part of the \
difference and of the transaction. With --dry-run: what the real run would end with (the \
configuration is rehearsed on a scratch device in a private namespace when run as root).")]
pub struct Args {
    /// Device to configure.
    #[arg(long)]
    dev: String,
    /// A configuration: a tc script (`$VAR` substitution, `$DEV` = --dev) or the TOML form.
    #[arg(required_unless_present = "set")]
    config: Option<String>,
    /// Print the equivalent tc commands and rehearse them on a scratch device; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Run inside this network namespace (a name under /run/netns).
    #[arg(long)]
    netns: Option<String>,
    /// Size missing bursts like tc (mtu only) instead of Sluice's kernel burst rule (rate × 4 ms).
    #[arg(long)]
    tc_default_burst: bool,
    /// Do not probe the kinds on a scratch device first (a refusal is still undone).
    #[arg(long)]
    no_probe: bool,
    /// The configuration sluice last applied to the device (trusted to be what it holds): only
    /// the difference to CONFIG is sent, without reading the kernel's tree first (fast on a large
    /// tree; a refusal is undone the same way).
    #[arg(long, value_name = "OLD_CONFIG", conflicts_with = "dry_run")]
    from: Option<String>,
    /// Variables for the script, NAME=VALUE (DEV is set to --dev).
    #[arg(long = "var")]
    vars: Vec<String>,
    /// Change one HTB class in place with one netlink message: `--set 1:10 rate 5mbit [ceil C]
    /// [burst B] [cburst B]` (ceil defaults to the rate, as in tc; bursts to Sluice's rule).
    #[arg(long, num_args = 3.., value_name = "CLASS rate R", conflicts_with_all = ["config", "dry_run"])]
    set: Option<Vec<String>>,
}

/// Runs `sluice apply`.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(words) = &args.set {
        return set(&args, words);
    }
    let config = args.config.clone().unwrap_or_default();
    let mut pairs = args.vars.clone();
    pairs.push(format!("DEV={}", args.dev));
    let Some(loaded) = super::config_load::load(std::path::Path::new(&config), &pairs)? else {
        return Ok(ExitCode::FAILURE);
    };
    let state = loaded.state;
    let policy = if args.tc_default_burst { BurstPolicy::TcDefault } else { BurstPolicy::Sluice };
    let plan = Plan::new(&state, &args.dev, policy).with_context(|| format!("in {config}"))?;
    if args.dry_run {
        return dry_run(&args, &plan);
    }
    let old = match &args.from {
        Some(f) => match super::config_load::load(std::path::Path::new(f), &pairs)? {
            Some(l) => {
                Plan::new(&l.state, &args.dev, policy).with_context(|| format!("in {f}"))?;
                Some(l.state)
            }
            None => return Ok(ExitCode::FAILURE),
        },
        None => None,
    };
    let (dev, model) = (args.dev.clone(), state.clone());
    let opts = ApplyOptions { probe: !args.no_probe };
    let result = sluice_kernel::netns::in_netns(args.netns.as_deref(), move || {
        let plan = Plan::new(&model, &dev, policy)?;
        let applied = match &old {
            Some(old) => txn::apply_between(&Plan::new(old, &dev, policy)?, &plan),
            None => txn::apply_plan(&plan, opts),
        };
        match applied {
            Ok(a) => {
                let kfilters =
                    if plan.filters().is_empty() { Vec::new() } else { filters::read_filters(&dev)? };
                Ok(Ok((a, kernel::read_back(&dev)?, kfilters)))
            }
            Err(LabError::Refused(why)) => Ok(Err(why)),
            Err(e) => Err(e),
        }
    })?;
    let (applied, objs, kfilters) = match result {
        Ok(r) => r,
        Err(why) => {
            eprintln!("sluice apply: refused: {why}");
            let restored = !why.contains("could NOT be restored");
            // With --from the kernel's tree was not read: a refusal was undone by the inverse
            // difference, which is exact only if the device held OLD_CONFIG.
            return Ok(if restored { ExitCode::FAILURE } else { ExitCode::from(PARTIAL) });
        }
    };
    for l in applied.lines.iter().take(LISTED) {
        println!("sent     {l}");
    }
    if applied.lines.len() > LISTED {
        println!("sent     ... and {} more", applied.lines.len() - LISTED);
    }
    for w in &applied.warnings {
        eprintln!("warning  {w}");
    }
    println!(
        "{} request(s) in {} sendmsg(s): {} added, {} changed in place, {} deleted, {} re-created \
         (read {:.1} ms, probe {:.1} ms, plan {:.1} ms, send {:.1} ms)",
        applied.messages,
        applied.sendmsgs,
        applied.added,
        applied.changed,
        applied.deleted,
        applied.recreated,
        ms(applied.read),
        ms(applied.probe),
        ms(applied.plan),
        ms(applied.send)
    );
    let mut diffs: Vec<String> = plan.compare(&objs).into_iter().map(|d| d.to_string()).collect();
    let model_filters: Vec<_> = plan.filter_nodes().map(|(_, f)| f).collect();
    diffs.extend(filters::compare(&model_filters, &kfilters));
    for d in &diffs {
        eprintln!("MISMATCH {d}");
    }
    let total =
        plan.qdiscs().count() + plan.classes().count() + plan.drr_classes().count() + model_filters.len();
    if diffs.is_empty() {
        println!(
            "read back through netlink: the kernel matches the model ({total} qdiscs, classes and filters)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("sluice apply: the read-back differs from the model in {} place(s)", diffs.len());
    Ok(ExitCode::from(PARTIAL))
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `--dry-run`: the tc commands, then a rehearsal on a scratch device.
fn dry_run(args: &Args, plan: &Plan<'_>) -> Result<ExitCode> {
    for line in plan.tc_commands() {
        println!("{line}");
    }
    // The rehearsal runs in a private namespace of its own, whatever --netns says.
    let refusals = match txn::rehearse(plan) {
        Ok(r) => r,
        Err(LabError::Netns(why)) => {
            // A comment among the commands (stderr stays for what the real run would meet).
            println!("# not rehearsed on a scratch device ({why}): not checked against this kernel");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    if refusals.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for r in refusals.iter().take(LISTED) {
        eprintln!("WOULD BE REFUSED {r}");
    }
    if refusals.len() > LISTED {
        eprintln!("WOULD BE REFUSED ... and {} more", refusals.len() - LISTED);
    }
    eprintln!(
        "sluice apply would refuse the configuration ({} refusal(s)) and leave {} as it is",
        refusals.len(),
        args.dev
    );
    Ok(ExitCode::FAILURE)
}

/// `--set CLASS rate R ...`.
fn set(args: &Args, words: &[String]) -> Result<ExitCode> {
    let classid = parse_classid(&words[0])?;
    let change = RateChange::parse(&words[1..])?;
    let dev = args.dev.clone();
    sluice_kernel::netns::in_netns(args.netns.as_deref(), move || {
        RateSetter::open(&dev)?.set(classid, &change)
    })?;
    Ok(ExitCode::SUCCESS)
}
