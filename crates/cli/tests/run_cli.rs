//! `sluice run` (scripts under the real shell) and the state file's guarantees, as processes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-run-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice(cwd: &Path, state: Option<&Path>, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.current_dir(cwd).args(args).env_remove("SLUICE_EXE");
    match state {
        Some(s) => c.env("SLUICE_STATE", s),
        None => c.env_remove("SLUICE_STATE"),
    };
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const LOOP: &str = r#"#!/bin/bash
DEV=eth0
modprobe sch_htb
tc qdisc del dev $DEV root 2> /dev/null
tc qdisc add dev $DEV root handle 1: htb default 999
tc class add dev $DEV parent 1: classid 1:1 htb rate 100mbit
add_site() {
  local site=$1
  tc class add dev $DEV parent 1:1 classid 1:$((site + 10)) htb rate 2mbit ceil 10mbit
}
for SITE in $(seq 1 12); do add_site $SITE; done
n=$(tc class show dev $DEV | wc -l)
echo "classes: $n"
ethtool -K $DEV gro off
"#;

#[test]
fn run_executes_loops_and_lists_stand_ins() {
    let d = dir("loop");
    std::fs::write(d.join("shaper.sh"), LOOP).unwrap();
    let (code, out, err) = sluice(&d, None, &["run", "--state", "st.json", "shaper.sh"]);
    assert_eq!(code, 0, "{err}");
    // The script read tc's output back through the wrapper.
    assert_eq!(out, "classes: 13\n");
    assert!(err.contains("stand-in (not run): modprobe sch_htb"), "{err}");
    assert!(err.contains("stand-in (not run): ethtool -K eth0 gro off"), "{err}");
    assert!(err.contains("devices emulated as dummies: eth0"), "{err}");
    assert!(err.contains("failed (exit 2): tc qdisc del dev eth0 root"), "{err}");
    // lint/viz/export take the state file, and the script itself (run under the shell).
    for cfg in ["st.json", "shaper.sh"] {
        let (code, out, err) = sluice(&d, None, &["export", "--to", "tc", cfg]);
        assert_eq!(code, 0, "{cfg}: {err}");
        assert_eq!(out.matches("class add").count(), 13, "{cfg}: {out}");
    }
    let (code, out, _) = sluice(&d, None, &["lint", "st.json"]);
    assert!(code <= 1 && out.contains("warning(s)"), "{out}");
}

/// A script that runs its tc calls in the background (`tc ... &` then `wait`): every call is
/// applied (they take turns on the state file) and the summary counts every one (the call log's
/// lines do not interleave). Before the lock, 4 of 50 classes were left and the summary said 49.
#[test]
fn backgrounded_calls_all_land_and_are_all_counted() {
    let d = dir("background");
    let mut script = String::from("#!/bin/bash\ntc qdisc add dev eth0 root handle 1: htb\n");
    for i in 1..=50 {
        script.push_str(&format!("tc class add dev eth0 parent 1: classid 1:{i} htb rate {i}mbit &\n"));
    }
    script.push_str("wait\n");
    std::fs::write(d.join("bg.sh"), script).unwrap();
    let (code, _, err) = sluice(&d, None, &["run", "--state", "st.json", "bg.sh"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("51 tc/ip command(s) applied by Sluice, 0 failed"), "{err}");
    let (code, out, err) = sluice(&d, Some(&d.join("st.json")), &["tc", "class", "show", "dev", "eth0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("class htb 1:")).count(), 50, "{out}");
}

#[test]
fn empty_or_invalid_configs_are_errors_not_clean() {
    let d = dir("empty");
    std::fs::write(d.join("empty.json"), "{}").unwrap();
    std::fs::write(d.join("bad.json"), "{\"devices\": 3}").unwrap();
    std::fs::write(d.join("empty.sh"), "#!/bin/sh\necho nothing\n").unwrap();
    for f in ["empty.json", "bad.json", "empty.sh"] {
        let (code, out, err) = sluice(&d, None, &["lint", f]);
        assert_eq!(code, 2, "{f}: {out}{err}");
        assert!(!out.contains("0 warning"), "{f}: {out}");
    }
}

#[test]
fn state_file_is_kept_on_failure_show_and_garbage() {
    let d = dir("state");
    let st = d.join("s.json");
    assert_eq!(sluice(&d, Some(&st), &["ip", "link", "add", "dev", "e0", "type", "dummy"]).0, 0);
    assert_eq!(
        sluice(&d, Some(&st), &["tc", "qdisc", "add", "dev", "e0", "root", "handle", "1:", "htb"]).0,
        0
    );
    let before = std::fs::read(&st).unwrap();
    let mtime = std::fs::metadata(&st).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // show and a failing command leave the file untouched (not even rewritten).
    assert_eq!(sluice(&d, Some(&st), &["tc", "qdisc", "show", "dev", "e0"]).0, 0);
    let (code, _, err) =
        sluice(&d, Some(&st), &["tc", "qdisc", "add", "dev", "e0", "root", "sfq", "probability", "nan"]);
    assert_ne!(code, 0, "{err}");
    assert_eq!(std::fs::metadata(&st).unwrap().modified().unwrap(), mtime);
    assert_eq!(std::fs::read(&st).unwrap(), before);
    // A damaged file is reported and never replaced.
    std::fs::write(&st, "{\"devices\": [").unwrap();
    let (code, _, err) =
        sluice(&d, Some(&st), &["tc", "qdisc", "add", "dev", "e0", "root", "handle", "1:", "htb"]);
    assert_ne!(code, 0);
    assert!(err.contains("not valid"), "{err}");
    assert_eq!(std::fs::read_to_string(&st).unwrap(), "{\"devices\": [");
    let left: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "no temporary files left behind: {left:?}");
}
