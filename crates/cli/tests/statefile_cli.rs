//! The state file of `sluice tc`/`ip` as processes see it: written only after a successful
//! change, by a rename (a new inode, no temporary file left); never rewritten by `show` or a
//! failed command; a damaged or unreadable file reported and left byte for byte as it was.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn sluice(state: &Path, args: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_STATE", state)
        .args(args.split(' '))
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into())
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-statefile-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The file's bytes and inode.
fn snapshot(p: &Path) -> (Vec<u8>, u64) {
    (std::fs::read(p).unwrap(), std::fs::metadata(p).unwrap().ino())
}

#[test]
fn only_a_successful_change_writes_the_file() {
    let d = dir("writes");
    let st = d.join("state.json");
    assert_eq!(sluice(&st, "ip link add dev eth0 type dummy").0, 0);
    assert_eq!(sluice(&st, "tc qdisc add dev eth0 root handle 1: htb default 10").0, 0);
    let before = snapshot(&st);
    // Reading commands and failing commands leave bytes and inode alone.
    for (cmd, code) in [
        ("tc qdisc show dev eth0", 0),
        ("tc -s -d class show dev eth0", 0),
        ("tc filter ls dev eth0", 0),
        ("ip link show", 0),
        ("tc qdisc add dev eth0 root handle 1: htb", 2),
        ("tc class add dev eth0 parent 1: classid 1:1 htb rate 1mbit overhead -2147483648", 1),
        ("tc qdisc add dev eth0 root sfq redflowlimit 1000 min 100 max 500 probability nan", 1),
        ("tc qdisc del dev eth0 root handle 7:", 2),
        ("tc class add dev eth0 parent 1: classid 1:1 htb rate", 255),
        ("tc qdisc add dev nosuch root htb", 1),
    ] {
        let (c, err) = sluice(&st, cmd);
        assert!(c >= 0, "{cmd}: killed");
        assert_eq!(c != 0, code != 0, "{cmd}: {err}");
        assert_eq!(snapshot(&st), before, "{cmd} rewrote the state file");
    }
    // A change is written by rename: a new inode, and no temporary file beside it.
    assert_eq!(sluice(&st, "tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit").0, 0);
    let after = snapshot(&st);
    assert_ne!(after.1, before.1, "not written by rename");
    assert_ne!(after.0, before.0);
    let names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["state.json"], "temporary file left behind");
    let _ = std::fs::remove_dir_all(&d);
}

/// Two processes changing one state file at the same time, each adding 200 classes: every
/// class is there afterwards (without the lock about a third were lost: each writer read the
/// state, the other renamed its own over it, and the first then renamed its copy back).
#[test]
fn two_concurrent_writers_lose_nothing() {
    let d = dir("writers");
    let st = d.join("state.json");
    assert_eq!(sluice(&st, "ip link add dev eth0 type dummy").0, 0);
    assert_eq!(sluice(&st, "tc qdisc add dev eth0 root handle 1: htb").0, 0);
    const N: u32 = 200;
    let writer = |base: u32| {
        let st = st.clone();
        std::thread::spawn(move || {
            let mut failed = Vec::new();
            for i in 0..N {
                let cmd = format!("tc class add dev eth0 parent 1: classid 1:{:x} htb rate 1mbit", base + i);
                let (c, err) = sluice(&st, &cmd);
                if c != 0 {
                    failed.push(format!("{cmd}: exit {c}: {err}"));
                }
            }
            failed
        })
    };
    let (a, b) = (writer(0x100), writer(0x1000));
    let failed: Vec<String> = a.join().unwrap().into_iter().chain(b.join().unwrap()).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_STATE", &st)
        .args(["tc", "class", "show", "dev", "eth0"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    let lost: Vec<String> = (0..N)
        .flat_map(|i| [0x100 + i, 0x1000 + i])
        .map(|c| format!("class htb 1:{c:x} "))
        .filter(|c| !shown.contains(c.as_str()))
        .collect();
    assert!(lost.is_empty(), "{} of {} classes lost: {lost:?}", lost.len(), 2 * N);
    assert_eq!(shown.lines().count(), 2 * N as usize);
    assert!(!d.join("state.json.lock").exists(), "the lock file is left behind");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_damaged_file_is_reported_and_never_replaced() {
    let d = dir("damaged");
    let st = d.join("state.json");
    assert_eq!(sluice(&st, "ip link add dev eth0 type dummy").0, 0);
    assert_eq!(
        sluice(&st, "tc qdisc add dev eth0 root sfq redflowlimit 100000 min 8000 max 60000 probability 0.5")
            .0,
        0
    );
    let good = std::fs::read_to_string(&st).unwrap();
    let damaged = [
        good.replace("0.5", "NaN"),
        good.replace("0.5", "1e309"),
        good.replace("0.5", "1.5"),
        good.replace("\"devices\"", "\"devics\""),
        good[..good.len() / 2].to_string(),
        String::new(),
        "\u{0}\u{1}garbage".to_string(),
    ];
    for text in damaged {
        std::fs::write(&st, &text).unwrap();
        let ino = std::fs::metadata(&st).unwrap().ino();
        for cmd in ["tc qdisc show dev eth0", "tc qdisc del dev eth0 root", "ip link add dev eth1 type dummy"]
        {
            let (c, err) = sluice(&st, cmd);
            assert_ne!(c, 0, "{cmd} ran against a damaged file:\n{text}");
            assert!(err.contains("state.json"), "{cmd}: the file is not named: {err}");
            assert_eq!(std::fs::read_to_string(&st).unwrap(), text, "{cmd} replaced the damaged file");
            assert_eq!(std::fs::metadata(&st).unwrap().ino(), ino);
        }
    }
    // Unreadable (a directory where the file should be): reported, nothing created over it.
    let _ = std::fs::remove_file(&st);
    std::fs::create_dir(&st).unwrap();
    let (c, err) = sluice(&st, "ip link add dev eth0 type dummy");
    assert_ne!(c, 0);
    assert!(err.contains("state.json"), "{err}");
    assert!(st.is_dir());
    let _ = std::fs::remove_dir_all(&d);
}
