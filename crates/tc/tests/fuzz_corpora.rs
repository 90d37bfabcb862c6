//! Replays the seed corpora of the `tc_grammar` and `statefile` fuzz targets (`fuzz/corpus/`)
//! through the same bodies the targets run, so their invariants hold on stable Rust in CI.

use std::path::PathBuf;

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn tc_grammar_seeds_hold() {
    let s = seeds("tc_grammar");
    assert!(s.len() >= 40, "tc_grammar corpus has {} seeds", s.len());
    for (name, data) in s {
        eprintln!("{name}");
        sluice_tc::fuzzing::tc_grammar(&data);
    }
    // A few hostile inputs beside the seeds.
    for data in [
        "qdisc add dev eth0 root sfq redflowlimit 1000 min 100 max 500 probability nan",
        "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit overhead -2147483648\n",
        "qdisc add dev eth0 root handle 0xffffffff: htb\nqdisc add dev eth0 root handle 1: htb r2q 0",
        "\u{0}\u{1} qdisc \u{ffff}",
    ] {
        sluice_tc::fuzzing::tc_grammar(data.as_bytes());
    }
}

#[test]
fn statefile_seeds_hold() {
    let s = seeds("statefile");
    assert!(s.len() >= 40, "statefile corpus has {} seeds", s.len());
    let mut read = 0;
    for (name, data) in s {
        match sluice_tc::statefile::parse(std::str::from_utf8(&data).unwrap()) {
            Ok(_) => read += 1,
            Err(e) => panic!("seed {name} is not a valid state file: {e}"),
        }
        sluice_tc::fuzzing::statefile(&data);
    }
    assert!(read >= 40);
    for data in ["", "{", "[]", "{\"devices\": [{\"name\": \"e\", \"type\": \"dummy\", \"ifindex\": 1, \"qdiscs\": [{\"handle\": \"1:1\", \"parent\": \"root\", \"opts\": {\"kind\": \"pfifo\"}}]}]}", "{\"devices\": null}"] {
        sluice_tc::fuzzing::statefile(data.as_bytes());
    }
}

/// Every tdc case's setup and command lines (`$TC` dropped, devices renamed to the fuzz state's
/// `eth0`/`eth1`) through the `tc_grammar` body: each state any of them reaches must survive the
/// state file, whose loader re-reads every qdisc's and class's options through tc's grammar —
/// so a kind whose written options do not read back fails here rather than in a user's file.
#[test]
fn tdc_lines_survive_the_state_file() {
    let dirs: Vec<PathBuf> = ["SLUICE_TDC_DIR", "SLUICE_TDC_MORE_DIR"]
        .iter()
        .zip(["tdc", "tdc-more"])
        .map(|(var, name)| {
            std::env::var(var).map(PathBuf::from).unwrap_or_else(|_| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance").join(name)
            })
        })
        .filter(|d| d.exists())
        .collect();
    if dirs.is_empty() {
        eprintln!("SKIPPED: no tdc data (set SLUICE_TDC_DIR / SLUICE_TDC_MORE_DIR)");
        return;
    }
    let mut files = Vec::new();
    let mut stack = dirs;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut cases = 0;
    for f in files {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap()) else {
            continue;
        };
        for case in v.as_array().into_iter().flatten() {
            let cmd = |c: &serde_json::Value| match c {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Array(a) => a.first().and_then(|s| s.as_str()).map(String::from),
                _ => None,
            };
            let mut lines = Vec::new();
            for c in case["setup"].as_array().into_iter().flatten().chain([&case["cmdUnderTest"]]) {
                let Some(c) = cmd(c) else { continue };
                let Some(rest) = c.strip_prefix("$TC ") else { continue };
                lines.push(rest.replace("$DEV1", "eth0").replace("$DEV2", "eth1").replace("$DUMMY", "eth0"));
            }
            sluice_tc::fuzzing::tc_grammar(lines.join("\n").as_bytes());
            cases += 1;
        }
    }
    eprintln!("{cases} tdc cases replayed");
    assert!(cases > 100, "only {cases} tdc cases found");
}
