//! Shared helpers: run a built-in scenario and write its report into a fresh directory.

#![allow(dead_code)]

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;
use std::path::PathBuf;

/// Runs built-in scenario `name` with its defaults.
pub fn simulate(name: &str) -> Results {
    simulate_with(name, &[])
}

/// Runs built-in scenario `name` with `--set` overrides.
pub fn simulate_with(name: &str, set: &[(&str, &str)]) -> Results {
    let sc = Scenario::find(name).unwrap_or_else(|e| panic!("{name}: {}", e.message));
    let opts = RunOptions {
        overrides: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        seed: None,
        force: false,
    };
    run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{name}: {}", e.message)).0
}

/// A fresh directory under the system temp dir.
pub fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
