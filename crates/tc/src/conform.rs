//! Runs the kernel's tc-testing (tdc) JSON cases against the emulated tc.
//!
//! Each case gets fresh devices as tdc's nsPlugin makes them (a veth pair `$DEV0`/`$DEV1` and
//! `$DUMMY`). Commands run in-process through a small shell: `$TC`/`$IP`, `bash -c`, `for` loops,
//! `;`/`&&`/`||`, `true`/`:`/`echo`/`sleep`. Cases needing scapy, or any other program, are
//! skipped with the reason. Matching follows tdc: the verify command's stdout (its stderr when it
//! failed and printed something) is searched with the pattern in DOTALL|MULTILINE mode and the
//! number of non-overlapping matches must equal `matchCount`.

use crate::model::{DevKind, Device, State};
use crate::shell::{split_list, split_words, Join, Vars};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Result of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Passed.
    Pass,
    /// Failed, with the reason.
    Fail(String),
    /// Not run, with the reason.
    Skip(String),
}

/// One case's outcome.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// tdc id.
    pub id: String,
    /// tdc name.
    pub name: String,
    /// File it came from.
    pub file: PathBuf,
    /// Outcome.
    pub status: Status,
}

/// All outcomes.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Per case, in file order.
    pub cases: Vec<CaseResult>,
}

impl Report {
    /// (passed, failed, skipped).
    pub fn counts(&self) -> (usize, usize, usize) {
        let p = self.cases.iter().filter(|c| c.status == Status::Pass).count();
        let f = self.cases.iter().filter(|c| matches!(c.status, Status::Fail(_))).count();
        (p, f, self.cases.len() - p - f)
    }
    /// Share of non-skipped cases that passed, in percent.
    pub fn pass_rate(&self) -> f64 {
        let (p, f, _) = self.counts();
        if p + f == 0 {
            0.0
        } else {
            100.0 * p as f64 / (p + f) as f64
        }
    }
}

/// Errors reading the corpus.
#[derive(Debug, thiserror::Error)]
pub enum ConformError {
    /// I/O.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// Not tdc JSON.
    #[error("{0}: {1}")]
    Json(PathBuf, serde_json::Error),
}

/// tdc's variables (tdc_config.py's defaults with nsPlugin).
pub fn tdc_vars() -> Vars {
    let mut v = Vars::new();
    for (k, val) in [
        ("TC", "tc"),
        ("IP", "ip"),
        ("DEV0", "v0p0"),
        ("DEV1", "v0p1"),
        ("DEV2", ""),
        ("DUMMY", "dummy1"),
        ("ETH", "eth0"),
        ("NS", "tcut"),
        ("BATCH_FILE", "./batch.txt"),
    ] {
        v.insert(k.to_string(), val.to_string());
    }
    v
}

/// The devices nsPlugin creates for each case.
pub fn fresh_state() -> State {
    let mut s = State::default();
    for (name, kind) in [
        ("v0p0", DevKind::Veth { peer: "v0p1".into() }),
        ("v0p1", DevKind::Veth { peer: "v0p0".into() }),
        ("dummy1", DevKind::Dummy),
    ] {
        let idx = s.next_ifindex;
        s.next_ifindex += 1;
        s.devices.push(Device::new(name, kind, idx));
    }
    s
}

/// Python `string.Template.safe_substitute`: `$name`, `${name}`, `$$`; unknown names stay.
pub fn template_substitute(s: &str, vars: &Vars) -> String {
    let b: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != '$' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&'$') {
            out.push('$');
            i += 2;
            continue;
        }
        let (name, end) = if b.get(i + 1) == Some(&'{') {
            match b[i + 2..].iter().position(|&c| c == '}') {
                Some(p) => (b[i + 2..i + 2 + p].iter().collect::<String>(), i + 3 + p),
                None => (String::new(), i + 1),
            }
        } else {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == '_') {
                j += 1;
            }
            (b[i + 1..j].iter().collect(), j)
        };
        match vars.get(&name) {
            Some(v) if !name.is_empty() => {
                out.push_str(v);
                i = end;
            }
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

/// Output of a shell command line.
#[derive(Clone, Debug, Default)]
pub struct ShellOut {
    /// Exit status of the last command run.
    pub code: i32,
    /// Concatenated stdout.
    pub stdout: String,
    /// Concatenated stderr.
    pub stderr: String,
}

/// Runs a command line in-process. `Err` names a program Sluice cannot emulate.
pub fn run_shell(state: &mut State, line: &str, vars: &mut Vars) -> Result<ShellOut, String> {
    let mut out = ShellOut::default();
    let t = line.trim();
    if let Some(r) = run_for(state, t, vars)? {
        return Ok(r);
    }
    let mut last = 0;
    for (join, cmd) in split_list(t) {
        let run = match join {
            Join::Seq => true,
            Join::And => last == 0,
            Join::Or => last != 0,
        };
        if !run {
            continue;
        }
        let r = run_simple(state, cmd.trim(), vars)?;
        last = r.code;
        out.stdout.push_str(&r.stdout);
        out.stderr.push_str(&r.stderr);
    }
    out.code = last;
    Ok(out)
}

/// `for V in WORDS; do BODY; done`.
fn run_for(state: &mut State, t: &str, vars: &mut Vars) -> Result<Option<ShellOut>, String> {
    let Some(rest) = t.strip_prefix("for ") else {
        return Ok(None);
    };
    let Some((head, body)) = rest.split_once("; do ") else {
        return Ok(None);
    };
    let Some(body) = body.trim_end().strip_suffix("done") else {
        return Ok(None);
    };
    let body = body.trim_end().trim_end_matches(';');
    let Some((var, words)) = head.split_once(" in ") else {
        return Ok(None);
    };
    let words = split_words(words, vars).map_err(|e| e.to_string())?;
    let mut out = ShellOut::default();
    for w in words {
        vars.insert(var.trim().to_string(), w);
        let r = run_shell(state, body, vars)?;
        out.stdout.push_str(&r.stdout);
        out.stderr.push_str(&r.stderr);
        out.code = r.code;
    }
    Ok(Some(out))
}

fn run_simple(state: &mut State, cmd: &str, vars: &mut Vars) -> Result<ShellOut, String> {
    let words = split_words(cmd, vars).map_err(|e| e.to_string())?;
    let Some(prog) = words.first() else {
        return Ok(ShellOut::default());
    };
    let base = prog.rsplit('/').next().unwrap_or(prog);
    let from = |o: crate::tc::Outcome| ShellOut { code: o.code as i32, stdout: o.stdout, stderr: o.stderr };
    Ok(match base {
        "tc" => {
            // A failed command must leave the state as it was (checked here on every tdc case).
            let before = state.clone();
            let o = crate::tc::run_tc(state, &words[1..]);
            let batch = words.iter().any(|w| matches!(w.as_str(), "-b" | "-batch" | "-f" | "-force"));
            if o.code != 0 && !batch && *state != before {
                return Err(format!("sluice bug: the failed command changed the state: {cmd}"));
            }
            from(o)
        }
        "ip" => {
            if words.get(1).is_some_and(|w| !"link".starts_with(w.as_str())) {
                return Err(format!("needs the real system: {cmd}"));
            }
            from(crate::tc::run_ip(state, &words[1..]))
        }
        "bash" | "sh" if words.get(1).map(|s| s.as_str()) == Some("-c") => {
            let inner = words.get(2).cloned().unwrap_or_default();
            run_shell(state, &inner, vars)?
        }
        "true" | ":" => ShellOut::default(),
        "false" => ShellOut { code: 1, ..Default::default() },
        "sleep" => ShellOut::default(),
        "echo" => ShellOut { code: 0, stdout: format!("{}\n", words[1..].join(" ")), stderr: String::new() },
        _ => return Err(format!("needs the real system: {prog}")),
    })
}

/// tdc's Python regex in Rust `regex` syntax (DOTALL | MULTILINE).
pub fn translate_pattern(p: &str) -> String {
    // The constructs in tdc patterns are common to both engines; only the flags differ.
    format!("(?ms){}", p.replace("\\Z", "\\z"))
}

fn cmd_and_codes(v: &Value) -> Option<(String, Vec<i64>)> {
    match v {
        Value::String(s) => Some((s.clone(), vec![0])),
        Value::Array(a) => {
            let cmd = a.first()?.as_str()?.to_string();
            let codes =
                a[1..].iter().filter_map(|c| c.as_i64().or_else(|| c.as_str()?.parse().ok())).collect();
            Some((cmd, codes))
        }
        _ => None,
    }
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    v.and_then(|x| x.as_i64().or_else(|| x.as_str()?.trim().parse().ok()))
}

fn needs_scapy(case: &Value) -> bool {
    let plugins = case.get("plugins").map(|p| p.to_string()).unwrap_or_default();
    plugins.contains("scapy") || case.get("scapy").is_some()
}

/// tdc's scapyPlugin sends the case's packets after the setup. The emulation has no packet path;
/// packets sent from `$DEV0` cross the veth to `$DEV1`'s ingress, which no qdisc of `$DEV1`'s
/// egress tree sees, so they change nothing the case can show when `$DEV1` has no ingress
/// qdisc, `$DEV0` only its default one, and the verify command prints no counters (no `-s`)
/// and names only `$DEV1`. Such cases run with the packets as a no-op; any other is skipped.
fn scapy_is_inert(case: &Value, state: &State, vars: &Vars) -> bool {
    let Some(sends) = case.get("scapy").and_then(|s| s.as_array()) else { return false };
    let all_dev0 = sends.iter().all(|s| s.get("iface").and_then(|i| i.as_str()) == Some("$DEV0"));
    let verify = case.get("verifyCmd").and_then(|c| c.as_str()).unwrap_or("");
    let quiet =
        !verify.split_whitespace().any(|w| w == "-s" || w.starts_with("-stat")) && !verify.contains("$DEV0");
    let dev =
        |n: &str| state.devices.iter().find(|d| Some(d.name.as_str()) == vars.get(n).map(|v| v.as_str()));
    let dev1_no_ingress = dev("DEV1").is_some_and(|d| d.qdiscs.iter().all(|q| !q.opts.is_ingress()));
    let dev0_bare = dev("DEV0").is_some_and(|d| d.qdiscs.is_empty());
    all_dev0 && quiet && dev1_no_ingress && dev0_bare
}

/// Runs one case.
pub fn run_case(case: &Value) -> Status {
    let scapy = needs_scapy(case);
    if scapy && case.get("scapy").is_none() {
        return Status::Skip("requires scapy".into());
    }
    let mut vars = tdc_vars();
    let mut state = fresh_state();
    let sub = |s: &str, vars: &Vars| template_substitute(s, vars);
    let stage =
        |state: &mut State, vars: &mut Vars, list: Option<&Value>, what: &str| -> Result<(), Status> {
            for item in list.and_then(|l| l.as_array()).into_iter().flatten() {
                let Some((cmd, codes)) = cmd_and_codes(item) else {
                    continue;
                };
                let line = sub(&cmd, vars);
                match run_shell(state, &line, vars) {
                    Ok(r) if codes.contains(&(r.code as i64)) => {}
                    Ok(r) => {
                        return Err(Status::Fail(format!(
                            "{what} command `{line}` exited {} (expected {codes:?}): {}",
                            r.code,
                            r.stderr.trim()
                        )))
                    }
                    Err(e) => return Err(Status::Skip(e)),
                }
            }
            Ok(())
        };
    if let Err(s) = stage(&mut state, &mut vars, case.get("setup"), "setup") {
        return s;
    }
    if scapy && !scapy_is_inert(case, &state, &vars) {
        return Status::Skip("requires scapy (its packets would reach a qdisc)".into());
    }
    let cmd = sub(case.get("cmdUnderTest").and_then(|c| c.as_str()).unwrap_or(""), &vars);
    let expected = as_i64(case.get("expExitCode")).unwrap_or(0);
    let r = match run_shell(&mut state, &cmd, &mut vars) {
        Ok(r) => r,
        Err(e) => return Status::Skip(e),
    };
    if r.code as i64 != expected {
        return Status::Fail(format!("`{cmd}` exited {} (expected {expected}): {}", r.code, r.stderr.trim()));
    }
    let verify = sub(case.get("verifyCmd").and_then(|c| c.as_str()).unwrap_or(""), &vars);
    let v = match run_shell(&mut state, &verify, &mut vars) {
        Ok(v) => v,
        Err(e) => return Status::Skip(e),
    };
    let output = if v.code != 0 && !v.stderr.is_empty() { v.stderr } else { v.stdout };
    let want = as_i64(case.get("matchCount")).unwrap_or(0);
    let pattern = case.get("matchPattern").and_then(|p| p.as_str()).unwrap_or("");
    let re = match regex::Regex::new(&translate_pattern(pattern)) {
        Ok(re) => re,
        Err(e) => return Status::Fail(format!("cannot translate pattern {pattern:?}: {e}")),
    };
    if output.is_empty() {
        if want != 0 {
            return Status::Fail("no output generated by verify command".into());
        }
    } else {
        let got = re.find_iter(&output).count() as i64;
        if got != want {
            return Status::Fail(format!(
                "pattern {pattern:?} matched {got} times, expected {want}; `{verify}` printed:\n{}",
                output.trim_end()
            ));
        }
    }
    if let Err(s) = stage(&mut state, &mut vars, case.get("teardown"), "teardown") {
        return s;
    }
    Status::Pass
}

fn collect_json(p: &Path, out: &mut Vec<PathBuf>) -> Result<(), ConformError> {
    if p.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| ConformError::Io(p.into(), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            collect_json(&e, out)?;
        }
    } else if p.extension().is_some_and(|e| e == "json") {
        out.push(p.to_path_buf());
    }
    Ok(())
}

/// Runs every case in the given files or directories (searched recursively for `*.json`).
pub fn run_tdc(paths: &[PathBuf]) -> Result<Report, ConformError> {
    let mut files = Vec::new();
    for p in paths {
        if !p.exists() {
            return Err(ConformError::Io(p.clone(), std::io::Error::from(std::io::ErrorKind::NotFound)));
        }
        collect_json(p, &mut files)?;
    }
    let mut report = Report::default();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| ConformError::Io(f.clone(), e))?;
        let cases: Vec<Value> = serde_json::from_str(&text).map_err(|e| ConformError::Json(f.clone(), e))?;
        for c in &cases {
            let str_of = |k: &str| c.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
            report.cases.push(CaseResult {
                id: str_of("id"),
                name: str_of("name"),
                file: f.clone(),
                status: run_case(c),
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_is_python_safe_substitute() {
        let v = tdc_vars();
        assert_eq!(
            template_substitute("$TC qdisc add dev $DUMMY \\$mask $$ ${DEV1}", &v),
            "tc qdisc add dev dummy1 \\$mask $ v0p1"
        );
    }

    #[test]
    fn shell_runs_loops_and_or_lists() {
        let mut s = fresh_state();
        let mut v = tdc_vars();
        let r = run_shell(&mut s, "ip link add dev dummy1 type dummy || /bin/true", &mut v).unwrap();
        assert_eq!(r.code, 0);
        let r = run_shell(
            &mut s,
            "bash -c \"for h in 1 2; do tc qdisc add dev dummy1 parent root handle \\$h: prio; done\"",
            &mut v,
        )
        .unwrap();
        assert_eq!(r.code, 2, "second root add must fail: {r:?}");
        assert!(run_shell(&mut s, "scapy foo", &mut v).is_err());
    }

    #[test]
    fn a_wrong_expectation_fails() {
        let case: Value = serde_json::from_str(
            r#"{"id":"x","name":"n","setup":[],"cmdUnderTest":"$TC qdisc add dev $DUMMY root handle 1: prio bands 1","expExitCode":"0","verifyCmd":"$TC qdisc show dev $DUMMY","matchPattern":"prio","matchCount":"1","teardown":[]}"#,
        )
        .unwrap();
        assert!(matches!(run_case(&case), Status::Fail(_)));
    }
}
