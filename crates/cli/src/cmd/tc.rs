//! `sluice tc ...`: iproute2's tc grammar on emulated devices kept in a state file.

use anyhow::Result;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `sluice tc` (everything after the state options is tc's own argv).
#[derive(clap::Args)]
pub struct Args {
    /// State file (default: $SLUICE_STATE, $XDG_RUNTIME_DIR/sluice/tc-state.json or /tmp/sluice-tc-state.json).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// tc arguments, e.g. `-s qdisc show dev eth0`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Which tool to emulate.
pub enum Tool {
    /// tc.
    Tc,
    /// ip.
    Ip,
}

/// Runs one tc or ip command against the state file, printing like the real tool.
pub fn run(args: Args, tool: Tool) -> Result<ExitCode> {
    let path = args.state.unwrap_or_else(sluice_tc::statefile::default_path);
    // One writer at a time, from reading the state to renaming the new one into place.
    let lock = sluice_tc::statefile::lock(&path, sluice_tc::statefile::LOCK_TIMEOUT)?;
    // An unreadable or invalid file is reported and left alone: nothing runs against it.
    let mut state = sluice_tc::statefile::load(&path)?;
    let before = state.clone();
    let out = match tool {
        Tool::Tc => sluice_tc::run_tc(&mut state, &args.args),
        Tool::Ip => sluice_tc::run_ip(&mut state, &args.args),
    };
    // A failed command leaves the state as it was; a batch keeps what succeeded before the
    // failure (as tc does). The file is written only when something changed (never by `show`).
    if state != before {
        sluice_tc::statefile::save(&path, &state)?;
    }
    drop(lock);
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    if out.stderr.starts_with("Cannot find device") {
        // A second line, after tc's own message, for users new to the emulation.
        let _ = writeln!(
            std::io::stderr(),
            "(sluice emulates devices in {}: create it with `sluice ip link add dev NAME type dummy`)",
            path.display()
        );
    }
    Ok(ExitCode::from(out.code))
}
