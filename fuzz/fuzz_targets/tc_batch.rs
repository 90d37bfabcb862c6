//! Arbitrary bytes → a `tc -force -batch` file (see `sluice_tc::fuzzing::tc_batch`).
//! Run: `cargo +nightly fuzz run tc_batch` (seeds in `fuzz/corpus/tc_batch/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_tc::fuzzing::tc_batch(data));
