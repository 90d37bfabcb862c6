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
    let _ = std::fs::remove_dir_all(&d);
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
    let _ = std::fs::remove_dir_all(&d);
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
    let _ = std::fs::remove_dir_all(&d);
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
    let _ = std::fs::remove_dir_all(&d);
}

/// Runs sluice with its own TMPDIR (to see what it leaves there) and extra environment.
fn sluice_in(cwd: &Path, tmp: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.current_dir(cwd).args(args).env_remove("SLUICE_EXE").env_remove("SLUICE_STATE").env("TMPDIR", tmp);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn left_in(tmp: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(tmp).unwrap().map(|e| e.unwrap().file_name()).collect()
}

/// A process is gone (or a zombie waiting for init).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
    }
}

/// A script that never ends is stopped at the time limit with a message, by `run` and by the
/// loaders of lint/viz/export; nothing is left in TMPDIR. Before: `run` waited forever.
#[test]
fn looping_scripts_stop_at_the_time_limit_and_leave_nothing() {
    let d = dir("timeout");
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        d.join("loop.sh"),
        "#!/bin/bash\ntc qdisc add dev eth0 root handle 1: htb\nsleep 300 &\nwhile :; do :; done\n",
    )
    .unwrap();
    let t = std::time::Instant::now();
    let (code, _, err) =
        sluice_in(&d, &tmp, &[], &["run", "--timeout", "1", "--state", "st.json", "loop.sh"]);
    assert_ne!(code, 0);
    assert!(err.contains("stopped after 1 s (the time limit)"), "{err}");
    assert!(t.elapsed().as_secs() < 20);
    assert!(!d.join("st.json").exists(), "no state from an unfinished run");
    for cmd in [&["lint"][..], &["viz"], &["export", "--to", "tc"]] {
        let t = std::time::Instant::now();
        let args = [cmd, &["loop.sh"]].concat();
        let (code, out, err) = sluice_in(&d, &tmp, &[("SLUICE_SCRIPT_TIMEOUT", "1")], &args);
        assert_ne!(code, 0, "{cmd:?}: {out}");
        assert!(err.contains("stopped after 1 s"), "{cmd:?}: {err}");
        assert!(t.elapsed().as_secs() < 20);
    }
    assert_eq!(left_in(&tmp), Vec::<std::ffi::OsString>::new());
    let _ = std::fs::remove_dir_all(&d);
}

/// `--var` cannot put the machine's tc in place of Sluice's: PATH keeps the wrappers first,
/// TC/IP/SLUICE_*/BASH_ENV/exported functions are refused, and an exported `tc` function
/// inherited from the caller's environment is dropped. Before: `--var PATH=...` ran /usr/sbin/tc.
#[test]
fn vars_cannot_replace_the_wrappers() {
    let d = dir("vars");
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        d.join("s.sh"),
        "#!/bin/bash\ntc qdisc add dev eth0 root handle 1: htb\n$TC qdisc add dev eth1 root handle 1: htb\n",
    )
    .unwrap();
    let (code, _, err) = sluice_in(
        &d,
        &tmp,
        &[],
        &["run", "--var", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "--state", "st.json", "s.sh"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("2 tc/ip command(s) applied by Sluice, 0 failed"), "{err}");
    let st = std::fs::read_to_string(d.join("st.json")).unwrap();
    assert!(st.contains("eth0") && st.contains("eth1"), "{st}");
    for var in [
        "TC=/usr/sbin/tc",
        "IP=/sbin/ip",
        "SLUICE_STATE=/tmp/x.json",
        "BASH_ENV=/tmp/x",
        "LD_PRELOAD=x.so",
        "BASH_FUNC_tc%%=() { :; }",
    ] {
        let (code, _, err) = sluice_in(&d, &tmp, &[], &["run", "--var", var, "--state", "x.json", "s.sh"]);
        assert_ne!(code, 0, "{var}");
        assert!(err.contains("--var"), "{var}: {err}");
        let (code, _, err) = sluice_in(&d, &tmp, &[], &["lint", "--var", var, "s.sh"]);
        assert_ne!(code, 0, "{var}");
        assert!(err.contains("--var"), "{var}: {err}");
    }
    assert!(!d.join("x.json").exists());
    // An exported function named tc in the caller's environment does not reach the script.
    let (code, _, err) = sluice_in(
        &d,
        &tmp,
        &[("BASH_FUNC_tc%%", "() {  echo REAL-TC >&2; }")],
        &["run", "--state", "st2.json", "s.sh"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("REAL-TC") && err.contains("2 tc/ip command(s) applied"), "{err}");
    assert_eq!(left_in(&tmp), Vec::<std::ffi::OsString>::new());
    let _ = std::fs::remove_dir_all(&d);
}

/// Failing runs (the script fails, a refused --var, a missing script) leave nothing in TMPDIR.
/// Before: `sluice-run-state-PID.json.lock` stayed after every run.
#[test]
fn temporary_folders_are_removed_on_failure() {
    let d = dir("tmpclean");
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(d.join("fail.sh"), "#!/bin/sh\ntc qdisc add dev eth0 root handle 1: htb\nexit 3\n")
        .unwrap();
    std::fs::write(d.join("loop.sh"), "#!/bin/sh\nfor i in 1; do tc qdisc add dev e root bogus; done\n")
        .unwrap();
    assert_eq!(sluice_in(&d, &tmp, &[], &["run", "--state", "st.json", "fail.sh"]).0, 3);
    assert_ne!(sluice_in(&d, &tmp, &[], &["run", "--var", "TC=x", "fail.sh"]).0, 0);
    assert_ne!(sluice_in(&d, &tmp, &[], &["run", "missing.sh"]).0, 0);
    assert_ne!(sluice_in(&d, &tmp, &[], &["lint", "loop.sh"]).0, 0);
    assert_eq!(left_in(&tmp), Vec::<std::ffi::OsString>::new());
    let _ = std::fs::remove_dir_all(&d);
}

/// SIGTERM or SIGINT to a running `sluice run` (or `lint` running a script) kills every process
/// the script started, by pid: a background child, a subshell's child, and one that left the
/// process group with setsid. Sluice then ends as the signal would have (143 / 130) and leaves
/// nothing in TMPDIR. Before: the script went on as an orphan.
#[test]
fn killing_sluice_kills_the_script_and_its_children() {
    let d = dir("kill");
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let script = "#!/bin/bash\ntc qdisc add dev eth0 root handle 1: htb\n\
        sleep 1000 &\necho $! >> pids\n\
        setsid sh -c 'echo $$ >> pids; exec sleep 1001' &\n\
        ( sh -c 'echo $$ >> pids; exec sleep 1002' ) &\n\
        for i in 1; do wait; done\n";
    std::fs::write(d.join("kids.sh"), script).unwrap();
    for (sig, cmd, code) in
        [(libc_sig::TERM, "run", 143), (libc_sig::INT, "run", 130), (libc_sig::TERM, "lint", 143)]
    {
        let _ = std::fs::remove_file(d.join("pids"));
        let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.current_dir(&d).env_remove("SLUICE_EXE").env_remove("SLUICE_STATE").env("TMPDIR", &tmp);
        if cmd == "run" {
            c.args(["run", "--state", "st.json", "kids.sh"]);
        } else {
            c.args(["lint", "kids.sh"]);
        }
        let mut child = c.stderr(std::process::Stdio::null()).spawn().unwrap();
        let t = std::time::Instant::now();
        let pids: Vec<u32> = loop {
            let p: Vec<u32> = std::fs::read_to_string(d.join("pids"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if p.len() == 3 {
                break p;
            }
            assert!(t.elapsed().as_secs() < 30, "the script did not start its children");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(pids.iter().all(|&p| !gone(p)));
        assert!(Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success());
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal().map(|s| 128 + s).or(status.code()), Some(code), "{cmd} {sig}");
        let t = std::time::Instant::now();
        while !pids.iter().all(|&p| gone(p)) && t.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for p in &pids {
            assert!(gone(*p), "{cmd} {sig}: process {p} outlived sluice");
        }
        assert_eq!(left_in(&tmp), Vec::<std::ffi::OsString>::new(), "{cmd} {sig}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

mod libc_sig {
    pub const TERM: &str = "TERM";
    pub const INT: &str = "INT";
}

/// Where `unshare --net` works, a script that reaches the machine's `ip` by absolute path sees
/// only its own namespace's loopback, not the host's interfaces (and so cannot change them).
#[test]
fn scripts_get_a_network_namespace_of_their_own_where_possible() {
    let ip =
        ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].into_iter().find(|p| Path::new(p).exists());
    let probe = Command::new("unshare").args(["--net", "true"]).status().is_ok_and(|s| s.success())
        || Command::new("unshare")
            .args(["--user", "--map-root-user", "--net", "true"])
            .status()
            .is_ok_and(|s| s.success());
    let (Some(ip), true) = (ip, probe) else {
        eprintln!("no ip or no unshare --net here: skipped");
        return;
    };
    let d = dir("netns");
    std::fs::write(
        d.join("s.sh"),
        format!("#!/bin/sh\n{ip} -o link show | wc -l > links\ntc qdisc add dev eth0 root handle 1: htb\n"),
    )
    .unwrap();
    let (code, _, err) = sluice(&d, None, &["run", "--state", "st.json", "s.sh"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(d.join("links")).unwrap().trim(), "1", "only lo");
    assert!(err.contains("1 tc/ip command(s) applied by Sluice"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
