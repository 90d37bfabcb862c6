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
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
    /// Extra environment (e.g. `--var NAME=VALUE`); see [`check_var`] for the names refused.
    pub env: Vec<(String, String)>,
    /// Capture the script's stdout/stderr instead of passing them through.
    pub quiet: bool,
    /// Wall-clock limit for the whole script (every process it started is killed past it).
    pub timeout: Duration,
    /// Address-space limit of each process the script starts (`ulimit -v`), in bytes.
    pub memory: u64,
}

impl RunOpts {
    /// Options with the default limits ([`default_timeout`], [`DEFAULT_MEMORY`]).
    pub fn new(exe: PathBuf) -> RunOpts {
        RunOpts {
            exe,
            args: vec![],
            env: vec![],
            quiet: false,
            timeout: default_timeout(),
            memory: DEFAULT_MEMORY,
        }
    }
}

/// A script may run this long unless told otherwise (`--timeout`, `SLUICE_SCRIPT_TIMEOUT`):
/// long enough for a LibreQoS-sized script (each tc call is one Sluice process).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Each process of a script may map this much (`ulimit -v`).
pub const DEFAULT_MEMORY: u64 = 4 << 30;

/// The timeout from `SLUICE_SCRIPT_TIMEOUT` (seconds) or [`DEFAULT_TIMEOUT`].
pub fn default_timeout() -> Duration {
    std::env::var("SLUICE_SCRIPT_TIMEOUT")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// Errors running a script.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// I/O (creating wrappers, starting the shell, reading the log or state).
    #[error("{0}")]
    Io(String),
    /// A `--var` that would replace a wrapper or change how the shell starts.
    #[error("{0}")]
    Var(String),
    /// The script ran past its time limit; every process it started was killed.
    #[error(
        "the script was stopped after {:.0} s (the time limit); every process it started was killed. \
         Raise the limit with --timeout SECONDS or SLUICE_SCRIPT_TIMEOUT",
        .0.as_secs_f64()
    )]
    TimedOut(Duration),
    /// Sluice got this signal while the script ran; the script's processes were killed and its
    /// files removed. The caller removes its own files, then calls [`die_of`].
    #[error("interrupted by signal {0}; the script's processes were killed")]
    Interrupted(i32),
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

/// Environment names a `--var` may not set: the wrappers and what they read, and what changes
/// how the shell or the programs it starts behave before the script's first line. `PATH` is
/// allowed: the wrapper directory stays first in it.
pub fn check_var(name: &str) -> Result<(), RunError> {
    let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let refused = |why: &str| Err(RunError::Var(format!("--var {name}: {why}")));
    if !ident {
        return refused("not a shell variable name");
    }
    if ["TC", "IP", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH", "PS4"].contains(&name)
        || name.starts_with("SLUICE_")
        || name.starts_with("LD_")
        || name.starts_with("BASH_FUNC")
    {
        return refused(
            "this name belongs to Sluice's wrappers or to how the shell starts; it cannot be set",
        );
    }
    Ok(())
}

/// Inherited variables that would replace a wrapper (exported shell functions, startup files,
/// the dynamic loader's): removed from the script's environment.
fn unsafe_inherited(name: &str) -> bool {
    name.starts_with("BASH_FUNC_")
        || name.starts_with("LD_")
        || ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH", "PS4"].contains(&name)
}

/// A temporary directory removed when dropped: on success, on error and on unwinding; a signal
/// reaches it through [`RunError::Interrupted`].
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `$TMPDIR/PREFIX-PID-N`.
    pub fn new(prefix: &str) -> std::io::Result<TempDir> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Signals that stop a run: the script's processes are killed and the files removed first.
const STOP_SIGNALS: [i32; 3] =
    [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP];

struct Signals {
    /// The last stop signal caught while a script ran (0: none).
    caught: Arc<AtomicUsize>,
    /// True while no script runs: the signal then does what it did before (ends the process).
    idle: Arc<AtomicBool>,
    /// How many scripts run now.
    active: Mutex<usize>,
}

/// The handlers, installed at the first run and kept: with no script running they act as the
/// default action.
fn signals() -> &'static Signals {
    static S: OnceLock<Signals> = OnceLock::new();
    S.get_or_init(|| {
        let s = Signals {
            caught: Arc::new(AtomicUsize::new(0)),
            idle: Arc::new(AtomicBool::new(true)),
            active: Mutex::new(0),
        };
        for sig in STOP_SIGNALS {
            let _ = signal_hook::flag::register_conditional_default(sig, s.idle.clone());
            let _ = signal_hook::flag::register_usize(sig, s.caught.clone(), sig as usize);
        }
        s
    })
}

/// Marks one script running while alive.
struct Active;

impl Active {
    fn start() -> Active {
        let s = signals();
        let mut n = s.active.lock().unwrap_or_else(|e| e.into_inner());
        *n += 1;
        s.idle.store(false, Ordering::SeqCst);
        Active
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let s = signals();
        let mut n = s.active.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            s.idle.store(true, Ordering::SeqCst);
        }
    }
}

/// Ends the process as `signal` would have (after the caller removed its files).
pub fn die_of(signal: i32) -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    std::process::exit(128 + signal)
}

/// Every live process the script started: its process group (the shell leads it), and any
/// process carrying the run's mark in its environment (those that left the group with `setsid`
/// and were orphaned). Zombies are left to whoever reaps them.
fn script_pids(group: i32, mark: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(rd) = std::fs::read_dir("/proc") else { return vec![] };
    let needle = format!("SLUICE_RUN_ID={mark}\0");
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            // After the `(comm)`: state, ppid, pgrp.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.first() == Some(&"Z") || f.len() < 3 {
                return false;
            }
            f[2].parse::<i32>().ok() == Some(group)
                || std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

/// Kills, by pid, every process of the script until none is left (a dying shell may still fork).
fn kill_script(child: &mut std::process::Child, mark: &str) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let group = child.id() as i32;
    for _ in 0..50 {
        let pids = script_pids(group, mark);
        if pids.is_empty() {
            break;
        }
        for p in pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The `unshare` words that give the script a network namespace of its own, when this machine
/// allows it (probed once); `SLUICE_SCRIPT_NETNS=0` turns it off.
fn netns_prefix() -> Option<&'static [&'static str]> {
    static P: OnceLock<Option<&'static [&'static str]>> = OnceLock::new();
    *P.get_or_init(|| {
        if std::env::var("SLUICE_SCRIPT_NETNS").is_ok_and(|v| v == "0") {
            return None;
        }
        // `unshare` execs the command in place: the shell keeps its pid and process group.
        let candidates: [&'static [&'static str]; 2] =
            [&["unshare", "--net", "--"], &["unshare", "--user", "--map-root-user", "--net", "--"]];
        candidates.into_iter().find(|c| {
            std::process::Command::new(c[0])
                .args(&c[1..])
                .arg("true")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    })
}

/// True when scripts run in a network namespace of their own (see [`run_script`]).
pub fn isolates_network() -> bool {
    netns_prefix().is_some()
}

/// Runs `script` under the real shell; `state_path` starts from whatever it holds (create it
/// empty for a fresh run) and holds the final state afterwards.
///
/// Containment: the script has its own network namespace where the machine allows it; the
/// shell leads its own process group and every process carries a mark in its environment; past `opts.timeout`, or when Sluice gets SIGINT/SIGTERM/SIGHUP, each of them
/// is killed by pid. `--var` cannot replace the wrappers ([`check_var`]); `PATH` keeps the
/// wrapper directory first. The wrapper directory is removed on every exit path.
pub fn run_script(script: &Path, state_path: &Path, opts: &RunOpts) -> Result<Run, RunError> {
    let io = |what: &str, e: std::io::Error| RunError::Io(format!("{what}: {e}"));
    for (k, _) in &opts.env {
        check_var(k)?;
    }
    let text =
        std::fs::read_to_string(script).map_err(|e| io(&format!("cannot read {}", script.display()), e))?;
    let shell = shell_for(&text);
    let shell_path = which(&shell).unwrap_or_else(|| PathBuf::from(&shell));
    let dir = TempDir::new("sluice-run").map_err(|e| io("cannot create the wrapper directory", e))?;
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| io("cannot create the wrapper directory", e))?;
    let log = dir.path().join("calls.jsonl");
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
    // A `--var PATH=...` replaces the rest of PATH, never the wrappers in front.
    let rest = match opts.env.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(std::ffi::OsString::from(v)),
        None => std::env::var_os("PATH"),
    };
    let mut dirs = vec![bin.clone()];
    if let Some(p) = rest {
        dirs.extend(std::env::split_paths(&p));
    }
    let path = std::env::join_paths(dirs).map_err(|e| RunError::Io(e.to_string()))?;
    let mark = dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // `ulimit -v` bounds each process's memory; the shell then replaces itself with the script's.
    // Where it can, the script gets a network namespace of its own (`unshare --net`, as an
    // unprivileged user in a user namespace): no network, and a machine's `tc`/`ip` reached by
    // absolute path sees only that namespace's loopback, not the host's interfaces.
    let mut cmd = match netns_prefix() {
        Some(pre) => {
            let mut c = std::process::Command::new(pre[0]);
            c.args(&pre[1..]).arg("/bin/sh");
            c
        }
        None => std::process::Command::new("/bin/sh"),
    };
    cmd.arg("-c")
        .arg(format!("ulimit -v {} 2>/dev/null; exec \"$0\" \"$@\"", opts.memory / 1024))
        .arg(&shell_path)
        .arg(script)
        .args(&opts.args);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_none_or(unsafe_inherited) {
            cmd.env_remove(k);
        }
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    cmd.env("PATH", path)
        .env("SLUICE_STATE", state_path)
        .env("SLUICE_RUN_LOG", &log)
        .env("SLUICE_RUN_ID", &mark)
        .env("TC", bin.join("tc"))
        .env("IP", bin.join("ip"))
        .stdin(std::process::Stdio::null())
        .process_group(0);
    if opts.quiet {
        cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    }
    let active = Active::start();
    let mut child = cmd.spawn().map_err(|e| io(&format!("cannot start {shell}"), e))?;
    let started = Instant::now();
    let caught = &signals().caught;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {}
            Err(e) => break Err(io("cannot wait for the script", e)),
        }
        let sig = caught.swap(0, Ordering::SeqCst);
        if sig != 0 {
            kill_script(&mut child, &mark);
            break Err(RunError::Interrupted(sig as i32));
        }
        if started.elapsed() >= opts.timeout {
            kill_script(&mut child, &mark);
            break Err(RunError::TimedOut(opts.timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Background processes the shell left behind do not outlive the run.
    if status.is_ok() {
        kill_script(&mut child, &mark);
    }
    drop(active);
    // A signal that came as the script ended still stops Sluice.
    let sig = caught.swap(0, Ordering::SeqCst);
    let status = match status {
        Ok(_) if sig != 0 => Err(RunError::Interrupted(sig as i32)),
        s => s,
    }?;
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
    drop(dir);
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
    fn vars_that_would_replace_a_wrapper_are_refused() {
        for ok in ["PATH", "DEV", "RATE", "_x1"] {
            assert!(check_var(ok).is_ok(), "{ok}");
        }
        for bad in [
            "TC",
            "IP",
            "SLUICE_STATE",
            "SLUICE_RUN_LOG",
            "BASH_ENV",
            "ENV",
            "LD_PRELOAD",
            "BASH_FUNC_tc%%",
            "1X",
            "",
            "A-B",
        ] {
            assert!(check_var(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn temporary_folders_go_on_drop_and_unwinding() {
        let d = TempDir::new("sluice-tempdir-test").unwrap();
        let p = d.path().to_path_buf();
        std::fs::write(p.join("f"), "x").unwrap();
        drop(d);
        assert!(!p.exists());
        let p2 = std::panic::catch_unwind(|| {
            let d = TempDir::new("sluice-tempdir-test").unwrap();
            let p = d.path().to_path_buf();
            if p.exists() {
                std::panic::panic_any(p);
            }
            unreachable!()
        })
        .unwrap_err();
        assert!(!p2.downcast_ref::<PathBuf>().unwrap().exists());
    }

    #[test]
    fn shell_from_shebang() {
        assert_eq!(shell_for("#!/bin/sh\n"), "sh");
        assert_eq!(shell_for("#!/usr/bin/env bash\n"), "bash");
        assert_eq!(shell_for("#!/usr/bin/python3\n"), "bash");
    }
}
