//! Arbitrary bytes → the scenario loader (`sluice_sim::fuzz_scenario`).
//! Run: `cargo +nightly fuzz run scenario` (seeds in `fuzz/corpus/scenario/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_sim::fuzz_scenario(data));
