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
        sluice_config::fuzzing::tc_grammar(&data);
    }
    // A few hostile inputs beside the seeds.
    for data in [
        "qdisc add dev eth0 root sfq redflowlimit 1000 min 100 max 500 probability nan",
        "class add dev eth0 parent 1: classid 1:1 htb rate 1mbit overhead -2147483648\n",
        "qdisc add dev eth0 root handle 0xffffffff: htb\nqdisc add dev eth0 root handle 1: htb r2q 0",
        "\u{0}\u{1} qdisc \u{ffff}",
    ] {
        sluice_config::fuzzing::tc_grammar(data.as_bytes());
    }
}

#[test]
fn statefile_seeds_hold() {
    let s = seeds("statefile");
    assert!(s.len() >= 40, "statefile corpus has {} seeds", s.len());
    let mut read = 0;
    for (name, data) in s {
        if sluice_config::statefile::parse(std::str::from_utf8(&data).unwrap()).is_ok() {
            read += 1;
        } else {
            panic!("seed {name} is not a valid state file");
        }
        sluice_config::fuzzing::statefile(&data);
    }
    assert!(read >= 40);
    for data in ["", "{", "[]", "{\"devices\": [{\"name\": \"e\", \"type\": \"dummy\", \"ifindex\": 1, \"qdiscs\": [{\"handle\": \"1:1\", \"parent\": \"root\", \"opts\": {\"kind\": \"pfifo\"}}]}]}", "{\"devices\": null}"] {
        sluice_config::fuzzing::statefile(data.as_bytes());
    }
}
