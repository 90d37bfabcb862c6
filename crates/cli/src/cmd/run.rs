//! `sluice run SCRIPT`: the user's own shell script under the real shell, with `tc` and `ip`
//! standing for Sluice on one state file and harmless stand-ins for other system commands.
//! `sluice shim` is what the wrappers call (not for direct use).

use anyhow::{Context, Result};
use sluice_tc::run::{create_named_devices, log_call, run_script, Call, RunError, RunOpts, STAND_INS};
use sluice_tc::statefile;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice run`.
#[derive(clap::Args)]
pub struct Args {
    /// The shell script.
    pub script: PathBuf,
    /// Arguments for the script.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// Where to write the resulting state (default: SCRIPT's name + `.state.json` here). It is
    /// replaced only when the run completes.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Start from this state file's content instead of an empty machine.
    #[arg(long)]
    pub from: Option<PathBuf>,
    /// Set an environment variable for the script (NAME=VALUE), repeatable. It cannot replace
    /// the wrappers (`TC`, `IP`, `SLUICE_*`, exported functions...); `PATH` keeps them first.
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// Stop the script (and every process it started) after this many seconds (default 600,
    /// or SLUICE_SCRIPT_TIMEOUT).
    #[arg(long)]
    pub timeout: Option<f64>,
}

/// Runs the script and lists what it did.
pub fn run(args: Args) -> Result<ExitCode> {
    let state_path = args.state.clone().unwrap_or_else(|| {
        let stem = args.script.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        PathBuf::from(format!("{stem}.state.json"))
    });
    let start = match &args.from {
        Some(p) => statefile::load(p)?,
        None => Default::default(),
    };
    // Work on a private copy (in a folder removed on every way out); the named file is
    // replaced atomically once the run is over.
    let work_dir =
        sluice_tc::run::TempDir::new("sluice-run-state").context("cannot create a temporary folder")?;
    let work = work_dir.path().join("state.json");
    statefile::save(&work, &start)?;
    let mut opts = RunOpts {
        args: args.args.clone(),
        env: super::config_load::vars(&args.vars)?.into_iter().collect(),
        ..RunOpts::new(std::env::current_exe().context("cannot find the sluice executable")?)
    };
    if let Some(t) = args.timeout {
        anyhow::ensure!(t.is_finite() && t > 0.0 && t < 1e9, "--timeout {t}: expected seconds above 0");
        opts.timeout = std::time::Duration::from_secs_f64(t);
    }
    let result = run_script(&args.script, &work, &opts);
    drop(work_dir);
    let run = match result {
        Err(RunError::Interrupted(sig)) => sluice_tc::run::die_of(sig),
        r => r?,
    };
    {
        let _lock = statefile::lock(&state_path, statefile::LOCK_TIMEOUT)?;
        statefile::save(&state_path, &run.state)?;
    }

    let mut e = std::io::stderr().lock();
    let applied: Vec<&Call> = run.calls.iter().filter(|c| c.applied).collect();
    let failed = applied.iter().filter(|c| c.code != 0).count();
    let _ = writeln!(
        e,
        "sluice run: {} under {}: {} tc/ip command(s) applied by Sluice, {failed} failed; exit status {}",
        args.script.display(),
        run.shell,
        applied.len(),
        run.status.map(|s| s.to_string()).unwrap_or_else(|| "(signal)".into())
    );
    let created: Vec<&str> = run.calls.iter().flat_map(|c| c.created.iter().map(String::as_str)).collect();
    if !created.is_empty() {
        let _ = writeln!(e, "  devices emulated as dummies: {}", created.join(", "));
    }
    for c in applied.iter().filter(|c| c.code != 0) {
        let _ =
            writeln!(e, "  failed (exit {}): {} {}: {}", c.code, c.tool, c.args.join(" "), c.stderr.trim());
    }
    for c in run.calls.iter().filter(|c| !c.applied) {
        let _ = writeln!(e, "  stand-in (not run): {} {}", c.tool, c.args.join(" "));
    }
    let _ = writeln!(e, "  state: {} (use it with lint, viz, export, simulate, apply)", state_path.display());
    Ok(ExitCode::from(run.status.map(|s| s.clamp(0, 255) as u8).unwrap_or(1)))
}

/// Arguments of `sluice shim` (what the wrappers call).
#[derive(clap::Args)]
pub struct ShimArgs {
    /// The command the wrapper stands for.
    pub tool: String,
    /// Its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// One wrapped call: tc and `ip link` on the state file, sudo by name, anything else a stand-in.
pub fn shim(a: ShimArgs) -> Result<ExitCode> {
    // `ip link`, `ip -n NETNS ...` and `ip netns` (its `exec` only for tc and ip) are Sluice's.
    let words: Vec<&str> = a.args.iter().map(String::as_str).collect();
    let first = words.iter().position(|w| !w.starts_with('-'));
    let is = |w: Option<&&str>, long: &str| w.is_some_and(|w| !w.is_empty() && long.starts_with(*w));
    let is_ip_link = a.tool == "ip"
        && (matches!(words.first(), Some(&"-n") | Some(&"-netns"))
            || first.is_some_and(|k| {
                is(words.get(k), "link")
                    || (is(words.get(k), "netns")
                        && (!is(words.get(k + 1), "exec")
                            || words
                                .get(k + 3)
                                .is_some_and(|p| matches!(p.rsplit('/').next(), Some("tc" | "ip")))))
            }));
    match a.tool.as_str() {
        "sudo" => {
            let mut i = 0;
            while i < a.args.len() {
                let w = &a.args[i];
                if ["-u", "-g", "-C", "-h", "-p", "-U", "-r", "-t"].contains(&w.as_str()) {
                    i += 2;
                } else if w.starts_with('-') || (w.contains('=') && !w.starts_with('=')) {
                    i += 1;
                    if w == "--" {
                        break;
                    }
                } else {
                    break;
                }
            }
            let Some(prog) = a.args.get(i) else { return Ok(ExitCode::SUCCESS) };
            let status = std::process::Command::new(prog).args(&a.args[i + 1..]).status();
            Ok(match status {
                Ok(s) => ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
                Err(err) => {
                    eprintln!("sudo: {prog}: {err}");
                    ExitCode::from(1)
                }
            })
        }
        "tc" => apply(a, true),
        "ip" if is_ip_link => apply(a, false),
        t if t == "ip" || STAND_INS.contains(&t) => {
            log_call(&Call {
                tool: a.tool,
                args: a.args,
                applied: false,
                code: 0,
                stderr: String::new(),
                created: vec![],
            });
            Ok(ExitCode::SUCCESS)
        }
        t => anyhow::bail!("sluice shim: {t} is not a wrapped command"),
    }
}

fn apply(a: ShimArgs, tc: bool) -> Result<ExitCode> {
    let path = statefile::default_path();
    // Calls a script runs in the background (`tc ... &`) take turns: each reads the state the
    // previous one saved, and logs its call before the next one starts.
    let lock = match statefile::lock(&path, statefile::LOCK_TIMEOUT) {
        Ok(l) => l,
        Err(e) => return Err(logged_failure(a, Vec::new(), e.into())),
    };
    let mut state = match statefile::load(&path) {
        Ok(s) => s,
        Err(e) => return Err(logged_failure(a, Vec::new(), e.into())),
    };
    let before = state.clone();
    // Scripts name the machine's interfaces (and `ip link set ifb0 up` after `modprobe ifb`).
    let verb = a.args.iter().filter(|w| !w.starts_with('-')).nth(1).map(String::as_str).unwrap_or("");
    let creates = tc || !["add", "a", "delete", "del", "d"].contains(&verb);
    let created = if creates { create_named_devices(&mut state, &a.args) } else { vec![] };
    let out =
        if tc { sluice_tc::run_tc(&mut state, &a.args) } else { sluice_tc::run_ip(&mut state, &a.args) };
    // Devices the script named stay even when the command failed: the machine has them.
    if state != before {
        if let Err(e) = statefile::save(&path, &state) {
            return Err(logged_failure(a, created, e.into()));
        }
    }
    log_call(&Call {
        tool: a.tool,
        args: a.args,
        applied: true,
        code: out.code,
        stderr: out.stderr.clone(),
        created,
    });
    drop(lock);
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    Ok(ExitCode::from(out.code))
}

/// Logs a call that failed before or after tc's own work (the state file could not be locked,
/// read or saved), so the run's summary counts it as failed, and returns the error.
fn logged_failure(a: ShimArgs, created: Vec<String>, e: anyhow::Error) -> anyhow::Error {
    log_call(&Call { tool: a.tool, args: a.args, applied: true, code: 1, stderr: format!("{e:#}"), created });
    e
}
