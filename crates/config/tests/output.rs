//! tc's output options (`-j`, `-p`, `-o`, `-g`, `-n`, `-batch`, `-force`) against transcripts
//! recorded from the real tc (iproute2 6.1, Linux 6.18): `tests/recorded/output/`, whose
//! README.md says how they were made. Each script is replayed through `run_tc` on the
//! recording's devices and every recorded command must print what tc printed, byte for byte,
//! with the same exit status.

use sluice_config::model::{DevKind, Device};
use sluice_config::{run_tc, State};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded/output")
}

/// The recording's namespace: the veth pair `jva`/`jvb` with two transmit queues, the peer
/// `jvb` registered first (ifindex 2) as veth does.
fn devices() -> State {
    let mut s = State::default();
    for (n, p) in [("jvb", "jva"), ("jva", "jvb")] {
        let idx = s.next_ifindex;
        s.next_ifindex += 1;
        let mut d = Device::new(n, DevKind::Veth { peer: p.into() }, idx);
        d.num_tx_queues = 2;
        s.devices.push(d);
    }
    s
}

/// What tc printed for one recorded command.
#[derive(Debug, PartialEq)]
struct Answer {
    stdout: String,
    stderr: String,
    rc: u8,
}

/// `NAME.expected`: for each `$ ` line, stdout, optional `@@ stderr` block, `@@ rc=N`.
fn expected(name: &str) -> Vec<(String, Answer)> {
    let text = std::fs::read_to_string(dir().join(format!("{name}.expected"))).unwrap();
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(r) = rest.strip_prefix("$ ") {
        let (cmd, body) = r.split_once('\n').unwrap();
        let end = body.find("@@ rc=").unwrap();
        let (printed, tail) = body.split_at(end);
        let (rc, next) = tail["@@ rc=".len()..].split_once('\n').unwrap();
        let (stdout, stderr) = match printed.find("@@ stderr\n") {
            Some(k) => (&printed[..k], &printed[k + "@@ stderr\n".len()..]),
            None => (printed, ""),
        };
        let a = Answer { stdout: stdout.into(), stderr: stderr.into(), rc: rc.parse().unwrap() };
        out.push((cmd.to_string(), a));
        rest = next;
    }
    assert!(rest.is_empty(), "{name}.expected: unparsed tail {rest:?}");
    out
}

/// Runs one command line as the recorder did (`tc ARGS`, split on blanks), with batch files
/// named relative to the scripts' directory.
fn run(s: &mut State, line: &str) -> (Answer, Vec<(String, String)>) {
    let mut argv: Vec<String> = line.split_whitespace().skip(1).map(String::from).collect();
    let mut renamed = Vec::new();
    for k in 1..argv.len() {
        if matches!(argv[k - 1].as_str(), "-batch" | "-b") {
            let abs = dir().join(&argv[k]).display().to_string();
            renamed.push((argv[k].clone(), abs.clone()));
            argv[k] = abs;
        }
    }
    let o = run_tc(s, &argv);
    (Answer { stdout: o.stdout, stderr: o.stderr, rc: o.code }, renamed)
}

fn replay(name: &str) -> usize {
    let script = std::fs::read_to_string(dir().join(format!("{name}.script"))).unwrap();
    let mut want = expected(name).into_iter();
    let mut s = devices();
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in script.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            let (recorded_cmd, mut a) = want.next().expect("a recorded answer per command");
            assert_eq!(recorded_cmd, cmd, "{name}: script and recording differ");
            let (got, renamed) = run(&mut s, cmd);
            for (rel, abs) in renamed {
                a.stderr = a.stderr.replace(&format!("{rel}:"), &format!("{abs}:"));
                a.stderr = a.stderr.replace(&format!("\"{rel}\""), &format!("\"{abs}\""));
            }
            checked += 1;
            if got != a {
                failures.push(format!(
                    "$ {cmd}\n--- tc printed (rc {}):\n{}{}\n--- sluice printed (rc {}):\n{}{}",
                    a.rc, a.stdout, a.stderr, got.rc, got.stdout, got.stderr
                ));
            }
        } else {
            let (got, _) = run(&mut s, line);
            assert_eq!(got.rc, 0, "{name}: set-up `{line}` failed: {}", got.stderr);
        }
    }
    assert!(want.next().is_none(), "{name}: recording has more commands than the script");
    assert!(
        failures.is_empty(),
        "{name}: {} of {checked} differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    checked
}

#[test]
fn qdisc_and_class_output_options() {
    assert!(replay("qdisc") > 20);
}

#[test]
fn filter_output_options() {
    assert!(replay("filter") > 5);
}

#[test]
fn global_options_and_batch() {
    assert!(replay("misc") > 5);
}
