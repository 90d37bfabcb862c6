//! The simulator against the kernel's own TCP, coarsely (the full table: scripts/sim-vs-live.sh
//! and BENCHMARKS.md). One CUBIC upload through kernel HTB at 20 Mbit/s with a 1000-packet FIFO,
//! 2 s warm-up and 4 s measured, on the netns lab, then the same path simulated
//! (scenarios/lab-tcp.toml). Root only; skips loudly where the lab cannot be built. Bounded: the
//! live half takes about 10 s.

use sluice_lab::testbed::{testbed_available, LabOptions};
use std::path::Path;
use std::process::Command;

fn sluice(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("run sluice");
    assert!(
        out.status.success(),
        "sluice {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (per-flow goodput bit/s of the TCP flows, probe p50 ms, probe p99 ms) of a results file.
fn figures(path: &Path, sim: bool) -> (Vec<f64>, f64, f64) {
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let c = &r["cases"][0];
    let flows = c["flows"].as_array().unwrap();
    let ping = flows.iter().find(|f| f["name"] == "ping").expect("a ping flow");
    let goodput = flows
        .iter()
        .filter(|f| f["name"] != "ping")
        .map(|f| {
            if sim {
                // Frame bytes (1514 per segment) to payload (1448 with timestamps).
                c["extra"][format!("{}.goodput_bps", f["name"].as_str().unwrap())].as_f64().unwrap() * 1448.0
                    / 1514.0
            } else {
                f["achieved_bps"].as_f64().unwrap()
            }
        })
        .collect();
    let lat = &ping["latency_ms"];
    (goodput, lat["p50"].as_f64().unwrap(), lat["p99"].as_f64().unwrap())
}

#[test]
fn simulated_cubic_through_a_fifo_matches_the_kernel_coarsely() {
    if let Err(why) = testbed_available(&LabOptions::default()) {
        eprintln!("\n*** SKIPPING sim-vs-live: the netns lab cannot be built here ({why}) ***\n");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-simlive-{}", std::process::id()));
    let tag = format!("sl{}", std::process::id() % 100_000);
    sluice(&["lab", "up", "--tag", &tag]);
    let live = dir.join("live");
    let set = ["rate=20mbit", "flows=1", "cc=cubic"];
    let mut args = vec!["measure", "tcp", "--tag", &tag, "--backend", "kernel", "--quiet"];
    args.extend(["--out", live.to_str().unwrap()]);
    for s in set.iter().chain(&["leaf=pfifo", "warmup=2", "duration=4"]) {
        args.extend(["--set", s]);
    }
    let measured = Command::new(env!("CARGO_BIN_EXE_sluice")).args(&args).output().expect("run sluice");
    let _ = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["lab", "down", "--tag", &tag]).output();
    assert!(measured.status.success(), "measure: {}", String::from_utf8_lossy(&measured.stderr));
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/lab-tcp.toml");
    let sim = dir.join("sim.json");
    let mut args = vec!["simulate", scenario, "--quiet", "--json", sim.to_str().unwrap()];
    for s in set.iter().chain(&["leaf=pfifo limit 1000", "warmup=2s", "duration=6s", "delay=50us"]) {
        args.extend(["--set", s]);
    }
    sluice(&args);
    let (lg, l50, l99) = figures(&live.join("results.json"), false);
    let (sg, s50, s99) = figures(&sim, true);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("live: goodput {lg:?} p50 {l50} p99 {l99}; sim: goodput {sg:?} p50 {s50} p99 {s99}");
    // Wide tolerances: the live run shares two cores with whatever else runs.
    let (l, s) = (lg[0], sg[0]);
    assert!((s / l - 1.0).abs() < 0.15, "goodput: sim {s} live {l}");
    assert!((s50 / l50 - 1.0).abs() < 0.5, "probe p50: sim {s50} live {l50}");
    assert!((s99 / l99 - 1.0).abs() < 0.5, "probe p99: sim {s99} live {l99}");
}
