//! `sluice tc`/`ip` as processes: state file between invocations, exit codes, stderr, export, lint.

use std::process::Command;

fn sluice(state: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_sluice")).env("SLUICE_STATE", state).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn state_persists_and_exit_codes_follow_tc() {
    let dir = std::env::temp_dir().join(format!("sluice-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let st = dir.join("state.json");
    let _ = std::fs::remove_file(&st);
    assert_eq!(sluice(&st, &["ip", "link", "add", "dev", "eth0", "type", "dummy"]).0, 0);
    assert_eq!(
        sluice(&st, &["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10"]).0,
        0
    );
    let (code, _, err) = sluice(&st, &["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb"]);
    assert_eq!((code, err.as_str()), (2, "Error: Exclusivity flag on, cannot modify.\n"));
    assert_eq!(
        sluice(&st, &["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio", "foo"]).0,
        1
    );
    assert_eq!(sluice(&st, &["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "123^", "prio"]).0, 255);
    let (code, out, _) = sluice(&st, &["tc", "-s", "qdisc", "show", "dev", "eth0"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("qdisc htb 1: root refcnt 2 r2q 10 default 0x10"), "{out}");
    assert!(
        out.contains(
            " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
        ),
        "{out}"
    );
    // Batch keeps what succeeded before the failing line.
    let batch = dir.join("b.txt");
    std::fs::write(&batch, "class add dev eth0 parent 1: classid 1:10 htb rate 1mbit\nclass add dev eth0 parent 1: classid 1:10 htb rate 1mbit\n").unwrap();
    let (code, _, err) = sluice(&st, &["tc", "-batch", batch.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains(&format!("Command failed {}:2", batch.display())), "{err}");
    assert!(sluice(&st, &["tc", "class", "show", "dev", "eth0"])
        .1
        .contains("class htb 1:10 root prio 0 rate 1Mbit"));
    // Script errors: file:line:column, exit 2.
    let bad = dir.join("bad.tc");
    std::fs::write(
        &bad,
        "tc qdisc add dev e root handle 1: htb\ntc class add dev e parent 1: classid 1:1 htb rate 10mbits\n",
    )
    .unwrap();
    let (code, _, err) = sluice(&st, &["lint", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.tc:2:51"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
