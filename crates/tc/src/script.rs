//! tc scripts as configurations: shell-like lines of `tc ...` (or `$TC ...`, `sudo /sbin/tc ...`)
//! with `VAR=value` assignments, `$VAR`/`${VAR}` substitution, comments and line continuations.
//!
//! The script runs against fresh emulated devices; any device a `tc` line names is created as a
//! dummy. Lines that are not tc (`modprobe`, `set -e`, `echo`, loops' keywords, benchmark tools)
//! are skipped and listed in [`Loaded::notes`]. A trailing teardown (`tc qdisc del ... root` with
//! nothing added after it) is ignored so that benchmark scripts load as the configuration they
//! measured. Directives in comments: `# sluice: link-rate [DEV] RATE`.

use crate::model::{DevKind, Device, State};
use crate::shell::{split_list, split_words_spanned, Join, Vars};
use crate::tc::{self, Grammar, TcCmd, Verb};
use std::fmt;

/// A script line Sluice could not accept: where, what, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    /// File name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What went wrong (tc's own message where tc would fail).
    pub message: String,
    /// How to fix it.
    pub hint: String,
    /// tc's exit status for this error (0 when the problem is not a tc error).
    pub code: u8,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)?;
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for ScriptError {}

/// A line that was not applied, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// 1-based line.
    pub line: usize,
    /// Explanation.
    pub text: String,
}

/// A loaded configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// The resulting tree.
    pub state: State,
    /// Lines skipped or ignored.
    pub notes: Vec<Note>,
    /// For each tc command applied: (line, argv), in order (export and lint use it).
    pub commands: Vec<(usize, Vec<String>)>,
}

/// Joins `\`-continued lines; returns (first line number, text).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if cur.is_empty() {
            start = i + 1;
        }
        if let Some(s) = raw.strip_suffix('\\') {
            cur.push_str(s);
            cur.push(' ');
        } else {
            cur.push_str(raw);
            out.push((start, std::mem::take(&mut cur)));
        }
    }
    if !cur.is_empty() {
        out.push((start, cur));
    }
    out
}

fn is_assignment(w: &str) -> Option<(&str, &str)> {
    let (name, value) = w.split_once('=')?;
    let ok = !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, value))
}

fn strip_redirections(cmd: &str) -> (String, bool) {
    // `2>/dev/null`, `>/dev/null 2>&1`: output does not matter here; a pipe means "not tc".
    let mut s = cmd.to_string();
    for r in ["2>&1", "2>/dev/null", ">/dev/null", "&>/dev/null", "> /dev/null"] {
        s = s.replace(r, " ");
    }
    let piped = s.contains(" | ");
    (s, piped)
}

/// Parses a size/rate directive comment: `# sluice: link-rate [DEV] RATE`.
fn directive(line: &str, state: &mut State, pending: &mut Vec<(Option<String>, u64)>) -> Option<String> {
    let t = line.trim_start().strip_prefix('#')?.trim();
    let rest = t.strip_prefix("sluice:")?.trim();
    let mut w = rest.split_whitespace();
    match w.next()? {
        "link-rate" => {
            let a: Vec<&str> = w.collect();
            let (dev, rate) = match a.as_slice() {
                [r] => (None, *r),
                [d, r] => (Some(d.to_string()), *r),
                _ => return Some("usage: # sluice: link-rate [DEV] RATE".into()),
            };
            match sluice_core::units::parse_rate(rate) {
                Ok(r) => {
                    let _ = state;
                    pending.push((dev, r.bps()));
                    None
                }
                Err(e) => Some(e.to_string()),
            }
        }
        other => Some(format!("unknown sluice directive \"{other}\"")),
    }
}

/// Loads a tc script. `vars` pre-defines variables (e.g. from `--var DEV=eth0`).
pub fn load_tc_script(file: &str, text: &str, vars: &Vars) -> Result<Loaded, ScriptError> {
    load_script_in(file, text, vars, Grammar::Tc)
}

/// [`load_tc_script`] in the given handle grammar ([`Grammar::Native`] checks the TOML form).
pub(crate) fn load_script_in(
    file: &str,
    text: &str,
    vars: &Vars,
    grammar: Grammar,
) -> Result<Loaded, ScriptError> {
    let mut vars = vars.clone();
    let mut state = State::default();
    let mut notes = Vec::new();
    let mut commands = Vec::new();
    let mut link_rates: Vec<(Option<String>, u64)> = Vec::new();
    let mut teardown: Option<(usize, State)> = None;
    let err = |line: usize, column: usize, message: String, hint: &str, code: u8| ScriptError {
        file: file.to_string(),
        line,
        column,
        message,
        hint: hint.to_string(),
        code,
    };
    for (lineno, line) in logical_lines(text) {
        if let Some(e) = directive(&line, &mut state, &mut link_rates) {
            return Err(err(lineno, 1, e, "write e.g. `# sluice: link-rate eth0 20mbit`", 0));
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let first = trimmed.split_whitespace().next().unwrap_or("");
        if [
            "while", "do", "done", "if", "then", "else", "elif", "fi", "for", "case", "esac", "{", "}",
            "function",
        ]
        .contains(&first)
            || trimmed.ends_with("() {")
        {
            notes.push(Note {
                line: lineno,
                text: format!("shell control `{first}` ignored; the lines inside run once"),
            });
            continue;
        }
        // `x=$((x+1))`, ``f=`cmd` ``: not evaluated (the rest of the line is shell, not tc).
        if let Some((n, _)) = trimmed.split_whitespace().next().and_then(is_assignment) {
            if trimmed.contains('`') || trimmed.contains("$(") {
                notes.push(Note {
                    line: lineno,
                    text: format!(
                        "{n}: command/arithmetic substitution not evaluated; variable keeps its value"
                    ),
                });
                continue;
            }
        }
        for (join, cmd) in split_list(trimmed) {
            let (cmd, piped) = strip_redirections(&cmd);
            let words = split_words_spanned(&cmd, &vars).map_err(|e| {
                err(
                    lineno,
                    e.column,
                    e.message.clone(),
                    "check quoting; Sluice reads a subset of POSIX shell",
                    0,
                )
            })?;
            let Some(w0) = words.first() else { continue };
            // Column offset of this command within the line.
            let base = line.find(cmd.trim()).unwrap_or(0);
            if words.len() == 1 || words.iter().all(|w| is_assignment(&w.text).is_some()) {
                if let Some((n, v)) = is_assignment(&w0.text) {
                    if cmd.contains('`') || cmd.contains("$(") {
                        notes.push(Note {
                            line: lineno,
                            text: format!("{n}: command substitution not evaluated; variable left unset"),
                        });
                        vars.remove(n);
                    } else {
                        for w in &words {
                            if let Some((n, v)) = is_assignment(&w.text) {
                                vars.insert(n.to_string(), v.to_string());
                            }
                        }
                        let _ = v;
                    }
                    continue;
                }
            }
            let mut idx = 0;
            while idx < words.len() && ["sudo", "exec", "command", "nice"].contains(&words[idx].text.as_str())
            {
                idx += 1;
            }
            if words.get(idx).is_some_and(|w| w.text == "export") {
                for w in &words[idx + 1..] {
                    if let Some((n, v)) = is_assignment(&w.text) {
                        vars.insert(n.to_string(), v.to_string());
                    }
                }
                continue;
            }
            let Some(prog) = words.get(idx) else { continue };
            let base_name = prog.text.rsplit('/').next().unwrap_or(&prog.text).to_string();
            let argv: Vec<String> = words[idx + 1..].iter().map(|w| w.text.clone()).collect();
            let tolerant = join == Join::Or || cmd.contains("|| true") || piped;
            match base_name.as_str() {
                "tc" if !piped => {
                    if let Some(u) = words[idx..].iter().find_map(|w| w.undefined.clone()) {
                        let w = words[idx..]
                            .iter()
                            .find(|w| w.undefined.is_some())
                            .map(|w| w.column)
                            .unwrap_or(1);
                        return Err(err(
                            lineno,
                            base + w,
                            format!("variable ${u} is not defined"),
                            &format!("define it earlier in the script (`{u}=...`) or pass `--var {u}=VALUE`"),
                            0,
                        ));
                    }
                    ensure_devices(&mut state, &argv, &mut notes, lineno);
                    // A root delete may be a trailing teardown: keep what it removes.
                    let before = argv.iter().any(|a| a.starts_with("del")).then(|| state.clone());
                    let out = tc::run_tc_in(&mut state, &argv, grammar);
                    if out.code != 0 {
                        let parsed = tc::parse_command_in(&strip_globals(&argv), grammar).ok();
                        let is_del = matches!(&parsed, Some(TcCmd::Qdisc(q)) if q.verb == Verb::Delete)
                            || matches!(&parsed, Some(TcCmd::Filter(f)) if f.verb == Verb::Delete)
                            || matches!(&parsed, Some(TcCmd::Class(c)) if c.verb == Verb::Delete);
                        if tolerant || is_del {
                            notes.push(Note {
                                line: lineno,
                                text: format!("ignored failure: {}", out.stderr.trim()),
                            });
                            continue;
                        }
                        let offset = argv.len() - strip_globals(&argv).len();
                        let col = tc::parse_command_in(&strip_globals(&argv), grammar)
                            .err()
                            .and_then(|e| e.arg)
                            .and_then(|a| words.get(idx + 1 + offset + a))
                            // A kind's own check (the registry's `change`) names the option:
                            // point at its word.
                            .or_else(|| {
                                let name = out.stderr.split("Illegal \"").nth(1)?.split('"').next()?;
                                words[idx + 1..].iter().find(|w| w.text == name)
                            })
                            .map(|w| base + w.column)
                            .unwrap_or(base + prog.column);
                        let hint = hint_for(&out.stderr);
                        return Err(err(lineno, col, out.stderr.trim().to_string(), &hint, out.code));
                    }
                    for l in out.stderr.lines() {
                        notes.push(Note { line: lineno, text: l.to_string() });
                    }
                    let parsed = tc::parse_command_in(&strip_globals(&argv), grammar).ok();
                    let deletes_root = matches!(&parsed, Some(TcCmd::Qdisc(q)) if q.verb == Verb::Delete);
                    if let (true, Some(before)) = (deletes_root, before) {
                        teardown = Some((lineno, before));
                    } else if !matches!(&parsed, Some(TcCmd::Qdisc(q)) if q.verb == Verb::Show)
                        && !matches!(&parsed, Some(TcCmd::Class(c)) if c.verb == Verb::Show)
                        && !matches!(&parsed, Some(TcCmd::Filter(f)) if f.verb == Verb::Show || f.verb == Verb::Get)
                    {
                        teardown = None;
                    }
                    commands.push((lineno, argv));
                }
                "ip" if argv.first().is_some_and(|a| "link".starts_with(a.as_str()) && !a.is_empty()) => {
                    let out = tc::run_ip(&mut state, &argv);
                    if out.code != 0 {
                        notes.push(Note { line: lineno, text: format!("ip: {}", out.stderr.trim()) });
                    }
                }
                _ => notes.push(Note { line: lineno, text: format!("`{}` is not tc; skipped", prog.text) }),
            }
        }
    }
    if let Some((l, snapshot)) = teardown {
        notes.push(Note {
            line: l,
            text: "trailing teardown ignored: the configuration is the one before it".into(),
        });
        state = snapshot;
    }
    for (dev, rate) in link_rates {
        for d in &mut state.devices {
            if dev.as_ref().is_none_or(|n| n == &d.name) {
                d.link_rate = Some(rate);
            }
        }
    }
    Ok(Loaded { state, notes, commands })
}

fn strip_globals(argv: &[String]) -> Vec<String> {
    let mut i = 0;
    while i < argv.len() && argv[i].starts_with('-') {
        i += 1;
    }
    argv[i..].to_vec()
}

fn hint_for(stderr: &str) -> String {
    let s = stderr;
    if s.contains("Cannot find device") {
        "create it first with `ip link add dev NAME type dummy`".into()
    } else if s.contains("Exclusivity flag") {
        "the object exists already: use `replace` or `change`, or delete it first".into()
    } else if s.contains("What is") {
        "see the usage above for the options this kind accepts".into()
    } else if s.contains("Illegal \"overhead\"") && s.contains("framing") {
        "the overhead is `overhead N` plus what each framing keyword (pppoe-vcmux, ether-vlan...) adds".into()
    } else if s.contains("Illegal") || s.contains("is wrong") {
        "rates take bit, kbit, mbit, gbit (or Bps units); sizes b, k, m; times us, ms, s".into()
    } else if s.contains("not found") || s.contains("doesn't exist") {
        "check that the parent qdisc/class was created earlier in the script".into()
    } else if s.contains("Invalid argument") {
        "the kernel rejects these values; see `sluice lint` and tc(8) for valid ranges".into()
    } else {
        String::new()
    }
}

/// Scripts name real interfaces: create each `dev X` a tc line names as an emulated dummy.
fn ensure_devices(state: &mut State, argv: &[String], notes: &mut Vec<Note>, line: usize) {
    for w in argv.windows(2) {
        if w[0] == "dev" && !state.devices.iter().any(|d| d.name == w[1]) {
            let idx = state.next_ifindex;
            state.next_ifindex += 1;
            state.devices.push(Device::new(&w[1], DevKind::Dummy, idx));
            notes.push(Note { line, text: format!("device {} emulated as a dummy", w[1]) });
        }
    }
}

/// Loads a configuration file: TOML (`.toml`) or a tc script (anything else).
pub fn load_file(path: &std::path::Path, vars: &Vars) -> Result<Loaded, ScriptError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScriptError {
        file: name.clone(),
        line: 0,
        column: 0,
        message: format!("cannot read: {e}"),
        hint: String::new(),
        code: 0,
    })?;
    if path.extension().is_some_and(|e| e == "toml") {
        let state = crate::export::from_toml(&text).map_err(|e| {
            let (line, column) = match &e.span {
                Some(r) => {
                    let before = &text[..r.start.min(text.len())];
                    (
                        before.matches('\n').count() + 1,
                        before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1,
                    )
                }
                None => (0, 0),
            };
            ScriptError {
                file: name.clone(),
                line,
                column,
                message: e.message,
                hint: "see docs/config.md for the native form".into(),
                code: 0,
            }
        })?;
        return Ok(Loaded { state, notes: vec![], commands: vec![] });
    }
    let fail = |message: String, hint: &str| ScriptError {
        file: name.clone(),
        line: 0,
        column: 0,
        message,
        hint: hint.into(),
        code: 0,
    };
    if text.trim_start().starts_with('{') {
        // A state file written by `sluice tc` or `sluice run`.
        let state = crate::statefile::parse(&text).map_err(|m| {
            fail(format!("not a valid Sluice state file: {m}"), "make it again with `sluice run SCRIPT`")
        })?;
        if state.devices.iter().all(|d| d.qdiscs.is_empty()) {
            return Err(fail(
                "the state file holds no qdisc: there is nothing to check".into(),
                "run the script that builds the configuration first: `sluice run SCRIPT --state FILE`",
            ));
        }
        return Ok(Loaded { state, notes: vec![], commands: vec![] });
    }
    match std::env::var_os("SLUICE_EXE") {
        Some(exe) if crate::run::needs_shell(&text) => load_by_running(path, &name, exe.into(), vars),
        _ => load_tc_script(&name, &text, vars),
    }
}

/// Loads a script that needs a real shell by running it (see [`crate::run`]) on a fresh state.
fn load_by_running(
    path: &std::path::Path,
    name: &str,
    exe: std::path::PathBuf,
    vars: &Vars,
) -> Result<Loaded, ScriptError> {
    let fail = |message: String| ScriptError {
        file: name.to_string(),
        line: 0,
        column: 0,
        message,
        hint: "`sluice run SCRIPT` shows every command and its result".into(),
        code: 0,
    };
    let dir = crate::run::TempDir::new("sluice-load").map_err(|e| fail(e.to_string()))?;
    let state_path = dir.path().join("state.json");
    let opts = crate::run::RunOpts {
        env: vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        quiet: true,
        ..crate::run::RunOpts::new(exe)
    };
    let run = crate::run::run_script(path, &state_path, &opts);
    drop(dir);
    let run = match run {
        // Killed while the script ran: its files are gone; end as the signal would have.
        Err(crate::run::RunError::Interrupted(sig)) => crate::run::die_of(sig),
        r => r.map_err(|e| fail(e.to_string()))?,
    };
    let mut notes =
        vec![Note { line: 0, text: format!("ran under {} (the script uses shell control flow)", run.shell) }];
    let mut commands = Vec::new();
    for c in &run.calls {
        let line = format!("{} {}", c.tool, c.args.join(" "));
        if !c.applied {
            notes.push(Note { line: 0, text: format!("stand-in, not run: {line}") });
            continue;
        }
        for d in &c.created {
            notes.push(Note { line: 0, text: format!("device {d} emulated as a dummy") });
        }
        if c.code != 0 {
            let is_delete = c.tool == "tc" && c.args.iter().any(|a| a == "del" || a == "delete");
            if !is_delete {
                return Err(ScriptError { code: c.code, ..fail(format!("{line}: {}", c.stderr.trim())) });
            }
            notes.push(Note { line: 0, text: format!("ignored failure: {line}: {}", c.stderr.trim()) });
            continue;
        }
        if c.tool == "tc" {
            commands.push((0, c.args.clone()));
        }
    }
    if run.status != Some(0) {
        notes.push(Note { line: 0, text: format!("the script exited with status {:?}", run.status) });
    }
    Ok(Loaded { state: run.state, notes, commands })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_continuations_and_teardown() {
        let s = "#!/bin/sh\nset -e\nDEV=eth1\nRATE=\"100\"\nmodprobe sch_htb\ntc qdisc del dev $DEV root 2>/dev/null || true\n$TC qdisc add dev $DEV root handle 1: \\\n  htb default 10\ntc class add dev $DEV parent 1: classid 1:10 htb rate ${RATE}mbit\n# sluice: link-rate eth1 1gbit\n";
        let mut v = Vars::new();
        v.insert("TC".into(), "tc".into());
        let l = load_tc_script("t.sh", s, &v).unwrap();
        let d = &l.state.devices[0];
        assert_eq!(d.name, "eth1");
        assert_eq!(d.classes.len(), 1);
        assert_eq!(d.link_rate, Some(1_000_000_000));
        let td = "tc qdisc add dev e root handle 1: htb\ntc qdisc del dev e root\n";
        let l = load_tc_script("t", td, &Vars::new()).unwrap();
        assert_eq!(l.state.devices[0].qdiscs.len(), 1, "teardown ignored");
    }

    #[test]
    fn errors_point_at_the_argument() {
        let e = load_tc_script("x.tc", "tc qdisc add dev e root handle 1: htb\n  tc class add dev e parent 1: classid 1:1 htb rate 10mbits\n", &Vars::new()).unwrap_err();
        assert_eq!((e.line, e.column), (2, 53), "{e}");
        assert!(e.message.contains("Illegal \"rate\""), "{e}");
        let e = load_tc_script("x.tc", "tc qdisc add dev $DEV root htb\n", &Vars::new()).unwrap_err();
        assert!(e.message.contains("$DEV"), "{e}");
    }
}
