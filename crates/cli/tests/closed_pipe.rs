//! No command panics when its reader goes away (`sluice ... | head -1`).

use std::process::{Command, Stdio};

/// Runs `sluice ARGS` with stdout a pipe whose read end is closed before the command writes.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("sluice ends");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn commands_end_quietly_on_a_closed_pipe() {
    let tc = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/home-003.tc");
    for args in [
        &["scenarios"][..],
        &["scenarios", "--show", "home-uplink"],
        &["apply", "--dev", "ppp0", tc, "--dry-run"],
        &["bench", "--classes", "1000", "--active", "10", "--quick"],
        &["lint", tc],
    ] {
        let (code, stderr) = with_closed_stdout(args);
        assert!(!stderr.contains("panicked"), "sluice {args:?} panicked: {stderr}");
        assert_ne!(code, Some(101), "sluice {args:?}: {stderr}");
    }
}
