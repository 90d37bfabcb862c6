//! Running a user's shell script under the real shell with `tc` and `ip` standing for Sluice.
//!
//! [`run_script`] makes a directory of small wrapper programs placed first in `PATH`: `tc` and
//! `ip` call back into the Sluice executable (`sluice shim tc ...`), which applies them to one
//! state file; the other system commands such scripts call (`modprobe`, `ethtool`, `sysctl`,
//! `iptables`, ...) are harmless stand-ins that only record that they were called; `sudo` runs
//! its command through the same `PATH`. Every call is logged (one JSON line each) and returned
//! in [`Run`], so the caller can list what ran through Sluice and what was stood in for.
//!
//! Absolute paths (`/sbin/tc`) bypass `PATH`; the wrapper directory also defines `TC` and `IP`
//! in the environment, which covers scripts that write `${TC:-/sbin/tc}`.

use crate::model::State;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Commands that get a harmless stand-in (they only log that they were called).
pub const STAND_INS: &[&str] = &[
    "modprobe",
    "insmod",
    "rmmod",
    "lsmod",
    "ethtool",
    "sysctl",
    "iptables",
    "ip6tables",
    "iptables-save",
    "iptables-restore",
    "ip6tables-save",
    "ip6tables-restore",
    "iptables-nft",
    "ip6tables-nft",
    "ebtables",
    "nft",
    "ipset",
    "logger",
    "conntrack",
    "brctl",
    "vconfig",
    "ifconfig",
    "tcpdump",
];

/// One logged call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// `tc`, `ip`, or the stand-in's name.
    pub tool: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// True when Sluice applied it (tc, `ip link`); false for a stand-in.
    pub applied: bool,
    /// Exit status Sluice returned (0 for stand-ins).
    pub code: u8,
    /// What Sluice printed on stderr (tc's messages).
    #[serde(default)]
    pub stderr: String,
    /// Devices Sluice created because the command named them.
    #[serde(default)]
    pub created: Vec<String>,
}

/// The result of a script run.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The state after the run.
    pub state: State,
    /// Every tc/ip/stand-in call, in order.
    pub calls: Vec<Call>,
    /// The script's exit status (None if killed by a signal).
    pub status: Option<i32>,
    /// The shell that ran it.
    pub shell: String,
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// The Sluice executable the wrappers call back into.
    pub exe: PathBuf,
    /// Arguments passed to the script.
    pub args: Vec<String>,
    /// Extra environment (e.g. `--var NAME=VALUE`).
    pub env: Vec<(String, String)>,
    /// Capture the script's stdout/stderr instead of passing them through.
    pub quiet: bool,
}

/// Errors running a script.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// I/O (creating wrappers, starting the shell, reading the log or state).
    #[error("{0}")]
    Io(String),
}

/// The shell named by the script's `#!` line when it is a POSIX shell, else `bash` (or `sh` when
/// bash is missing).
pub fn shell_for(text: &str) -> String {
    let first = text.lines().next().unwrap_or("");
    if let Some(rest) = first.strip_prefix("#!") {
        let mut w = rest.split_whitespace();
        let prog = w.next().unwrap_or("");
        let prog = if prog.ends_with("/env") { w.next().unwrap_or("") } else { prog };
        let base = prog.rsplit('/').next().unwrap_or(prog);
        if ["sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"].contains(&base) && which(base).is_some() {
            return base.to_string();
        }
    }
    if which("bash").is_some() {
        "bash".into()
    } else {
        "sh".into()
    }
}

fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(prog)).find(|p| p.is_file())
}

/// True when a script needs a real shell: loops, conditionals, functions, command or
/// arithmetic substitution (the static reader in [`crate::script`] runs each line once).
pub fn needs_shell(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim();
        if t.starts_with('#') {
            return false;
        }
        let first = t.split_whitespace().next().unwrap_or("");
        ["for", "while", "until", "if", "case", "function", "select"].contains(&first)
            || (first.ends_with("()") && first.len() > 2)
            || t.contains("$(")
            || t.contains('`')
            || t.contains("$[")
            || t.split_whitespace().any(|w| w == "()" || w == "(){")
            || t.starts_with(". ")
            || first == "source"
    })
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Runs `script` under the real shell; `state_path` starts from whatever it holds (create it
/// empty for a fresh run) and holds the final state afterwards.
pub fn run_script(script: &Path, state_path: &Path, opts: &RunOpts) -> Result<Run, RunError> {
    let io = |what: &str, e: std::io::Error| RunError::Io(format!("{what}: {e}"));
    let text =
        std::fs::read_to_string(script).map_err(|e| io(&format!("cannot read {}", script.display()), e))?;
    let shell = shell_for(&text);
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sluice-run-{}-{n}", std::process::id()));
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| io("cannot create the wrapper directory", e))?;
    let log = dir.join("calls.jsonl");
    let exe = sh_quote(&opts.exe.display().to_string());
    let mut names: Vec<&str> = vec!["tc", "ip", "sudo"];
    names.extend(STAND_INS);
    for name in names {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\nexec {exe} shim {name} \"$@\"\n"))
            .map_err(|e| io("cannot write a wrapper", e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| io("cannot make a wrapper executable", e))?;
        }
    }
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut v = vec![bin.clone()];
            v.extend(std::env::split_paths(&p));
            std::env::join_paths(v).map_err(|e| RunError::Io(e.to_string()))?
        }
        None => bin.clone().into_os_string(),
    };
    let mut cmd = std::process::Command::new(&shell);
    cmd.arg(script)
        .args(&opts.args)
        .env("PATH", path)
        .env("SLUICE_STATE", state_path)
        .env("SLUICE_RUN_LOG", &log)
        .env("TC", bin.join("tc"))
        .env("IP", bin.join("ip"))
        .stdin(std::process::Stdio::null());
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    if opts.quiet {
        cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    }
    let status = cmd.status().map_err(|e| io(&format!("cannot start {shell}"), e));
    // Every line is one call; a line that does not read (a wrapper killed while writing) is
    // kept as a failed call rather than left out of the count.
    let calls = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Call>(l).unwrap_or_else(|e| Call {
                tool: "?".into(),
                args: vec![],
                applied: true,
                code: 1,
                stderr: format!("unreadable call log line ({e}): {l}"),
                created: vec![],
            })
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    let status = status?;
    let state = crate::statefile::load(state_path).map_err(|e| RunError::Io(e.to_string()))?;
    Ok(Run { state, calls, status: status.code(), shell })
}

/// Appends one call to the log named by `SLUICE_RUN_LOG` (no log: nothing to do). Calls a script
/// runs in the background log at the same time: each line goes in one `write` to the file
/// opened for appending, under the file's lock, so lines never interleave.
pub fn log_call(call: &Call) {
    let Some(p) = std::env::var_os("SLUICE_RUN_LOG") else { return };
    let Ok(mut line) = serde_json::to_string(call) else { return };
    line.push('\n');
    if let Ok(f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
        use std::io::Write;
        match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive) {
            Ok(mut held) => {
                let _ = held.write_all(line.as_bytes());
            }
            Err((mut f, _)) => {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }
}

/// Creates, as emulated dummies, the devices a tc command names with `dev X` that the state lacks
/// (scripts name the machine's real interfaces). Returns their names.
pub fn create_named_devices(state: &mut State, argv: &[String]) -> Vec<String> {
    let mut made = Vec::new();
    for w in argv.windows(2) {
        if w[0] == "dev"
            && !state.devices.iter().any(|d| d.name == w[1])
            && crate::statefile::valid_name(&w[1])
        {
            let idx = state.next_ifindex;
            state.next_ifindex += 1;
            state.devices.push(crate::model::Device::new(&w[1], crate::model::DevKind::Dummy, idx));
            made.push(w[1].clone());
        }
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_scripts_need_a_shell() {
        assert!(!needs_shell("#!/bin/sh\nDEV=eth0\ntc qdisc add dev $DEV root htb # for x\n"));
        assert!(needs_shell(
            "for s in 1 2; do tc class add dev e parent 1: classid 1:$s htb rate 1mbit; done\n"
        ));
        assert!(needs_shell("R=$((2*3))\n"));
        assert!(needs_shell("setup() {\n tc qdisc add dev e root htb\n}\nsetup\n"));
        assert!(needs_shell("if [ -n \"$X\" ]; then tc qdisc del dev e root; fi\n"));
    }

    #[test]
    fn shell_from_shebang() {
        assert_eq!(shell_for("#!/bin/sh\n"), "sh");
        assert_eq!(shell_for("#!/usr/bin/env bash\n"), "bash");
        assert_eq!(shell_for("#!/usr/bin/python3\n"), "bash");
    }
}
