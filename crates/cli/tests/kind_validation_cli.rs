//! One validation per kind (the registry's `change`), the same through `sluice tc`, `lint`,
//! `simulate` and `run`: CAKE's `overhead 256 pppoe-vcmux` (288 in all, which tc and the kernel
//! accept) is accepted by all four, and an overhead CAKE cannot keep is refused by all four with
//! the same message naming the option, at its line and column.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-kindcheck-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice(cwd: &Path, state: Option<&Path>, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.current_dir(cwd).args(args).env_remove("SLUICE_EXE").env("NO_COLOR", "1");
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

fn scenario(tc_line: &str) -> String {
    format!(
        "name = \"c\"\ndescription = \"d\"\nduration = \"50ms\"\n[[link]]\nname = \"l\"\nrate = \"10mbit\"\n\
         queue = \"shaper\"\n[shaper]\ntc = \"\"\"\n{tc_line}\n\"\"\"\n[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n"
    )
}

#[test]
fn framing_keywords_add_to_the_overhead_in_every_front_end() {
    let d = dir("ok");
    let line = "tc qdisc add dev eth0 root cake bandwidth 10mbit overhead 256 pppoe-vcmux";
    std::fs::write(d.join("c.sh"), format!("#!/bin/sh\n{line}\n")).unwrap();
    std::fs::write(d.join("c.toml"), scenario(line)).unwrap();
    // tc on a state file: accepted, shown as the kernel would (288), and the file stays valid.
    let st = d.join("s.json");
    assert_eq!(sluice(&d, Some(&st), &["ip", "link", "add", "dev", "eth0", "type", "dummy"]).0, 0);
    let args: Vec<&str> = line.split(' ').collect();
    let (code, _, err) = sluice(&d, Some(&st), &args);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = sluice(&d, Some(&st), &["tc", "qdisc", "show", "dev", "eth0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("atm overhead 288"), "{out}");
    // lint of the script and of the state file.
    for cfg in ["c.sh", "s.json"] {
        let (code, out, err) = sluice(&d, None, &["lint", cfg]);
        assert!(code <= 1, "{cfg}: {out}{err}");
    }
    // simulate with it as the shaper.
    let (code, _, err) = sluice(&d, None, &["simulate", "--quiet", "c.toml"]);
    assert_eq!(code, 0, "{err}");
    // run: the call is applied and listed.
    let (code, _, err) = sluice(&d, None, &["run", "--state", "r.json", "c.sh"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("1 tc/ip command(s) applied by Sluice, 0 failed"), "{err}");
    // export writes what reads back to the same sum.
    let (code, out, err) = sluice(&d, None, &["export", "--to", "tc", "r.json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("overhead 256 ether-vlan"), "{out}");
    std::fs::write(d.join("back.sh"), &out).unwrap();
    let (code, _, err) = sluice(&d, None, &["run", "--state", "back.json", "back.sh"]);
    assert_eq!(code, 0, "{err}");
    let a = std::fs::read_to_string(d.join("r.json")).unwrap();
    let b = std::fs::read_to_string(d.join("back.json")).unwrap();
    assert!(a.contains("\"overhead\": 288") && b.contains("\"overhead\": 288"), "{a}\n{b}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_overhead_cake_cannot_keep_is_refused_alike_everywhere() {
    let d = dir("bad");
    // 256 + 8128 × 4 = 32768: one more than CAKE's 16-bit overhead holds.
    let line = format!("tc qdisc add dev eth0 root cake overhead 256{}", " ether-vlan".repeat(8128));
    let col = line.find("overhead").unwrap() + 1;
    let msg = "Illegal \"overhead\" 32768";
    std::fs::write(d.join("c.sh"), format!("#!/bin/sh\n{line}\n")).unwrap();
    std::fs::write(d.join("c.toml"), scenario(&line)).unwrap();
    let st = d.join("s.json");
    assert_eq!(sluice(&d, Some(&st), &["ip", "link", "add", "dev", "eth0", "type", "dummy"]).0, 0);
    let args: Vec<&str> = line.split(' ').collect();
    let (code, _, err) = sluice(&d, Some(&st), &args);
    assert_ne!(code, 0);
    assert!(err.contains(msg) && !err.contains("state file"), "{err}");
    let (code, out, err) = sluice(&d, None, &["lint", "c.sh"]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains(&format!("c.sh:2:{col}: {msg}")), "{err}");
    let (code, _, err) = sluice(&d, None, &["simulate", "--quiet", "c.toml"]);
    assert_ne!(code, 0);
    assert!(err.contains(msg) && err.contains(&format!(":1:{col}:")), "{err}");
    let (code, _, err) = sluice(&d, None, &["run", "--state", "r.json", "c.sh"]);
    assert_eq!(code, 1, "the script's status, its tc's: {err}");
    assert!(err.contains("1 tc/ip command(s) applied by Sluice, 1 failed"), "{err}");
    assert!(err.contains("failed (exit 1): tc qdisc add dev eth0 root cake overhead 256"), "{err}");
    assert!(err.contains(msg), "{err}");
    // A state file edited by hand to hold it is refused by the same check.
    let ok = "tc qdisc add dev eth0 root cake overhead 100";
    assert_eq!(sluice(&d, Some(&st), &ok.split(' ').collect::<Vec<_>>()).0, 0);
    let text = std::fs::read_to_string(&st).unwrap().replace("\"overhead\": 100", "\"overhead\": 40000");
    std::fs::write(d.join("edited.json"), text).unwrap();
    let (code, _, err) = sluice(&d, None, &["lint", "edited.json"]);
    assert_ne!(code, 0);
    assert!(err.contains("Illegal \"overhead\" 40000"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
