//! Garbage input on the command line: each case is an error that names what is wrong, with a
//! non-zero exit and no panic.

use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn rate_zero_is_refused_by_name() {
    let (code, err) = sluice(&["rate", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("rate `0` is zero"), "{err}");
}

#[test]
fn a_scenario_error_far_along_a_long_line_is_shown_without_a_panic() {
    let dir = std::env::temp_dir().join(format!("sluice-garbage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("long.toml");
    // The error sits at column 70 000 of line 2: miette draws columns up to 65 535.
    let pad = " ".repeat(70_000);
    let base =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/benita.toml")).unwrap();
    let text = base.replacen("duration = \"4s\"", &format!("duration ={pad}\"four seconds\""), 1);
    assert_ne!(text, base);
    std::fs::write(&f, text).unwrap();
    let (code, err) = sluice(&["simulate", f.to_str().unwrap(), "--quiet"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("long.toml:19:70011") && err.contains("four seconds"), "{err}");
}

#[test]
fn viz_of_qdiscs_nested_ten_thousand_deep_is_an_error_not_a_stack_overflow() {
    let dir = std::env::temp_dir().join(format!("sluice-garbage-viz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("deep.tc");
    let mut s = String::from("tc qdisc add dev eth0 root handle 1: htb default 1\n");
    for i in 1..=10_000u32 {
        s += &format!("tc class add dev eth0 parent {i:x}: classid {i:x}:1 htb rate 1mbit\n");
        s += &format!("tc qdisc add dev eth0 parent {i:x}:1 handle {:x}: htb default 1\n", i + 1);
    }
    std::fs::write(&f, s).unwrap();
    let (code, err) = sluice(&["viz", f.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nested more than 256 deep"), "{err}");
}
