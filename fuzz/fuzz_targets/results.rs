//! Arbitrary bytes → the results reader of `sluice compare` (`sluice_report::fuzz_results`).
//! Run: `cargo +nightly fuzz run results` (seeds in `fuzz/corpus/results/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_report::fuzz_results(data));
