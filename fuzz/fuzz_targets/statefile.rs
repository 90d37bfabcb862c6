//! Arbitrary bytes → the JSON state file reader (see `sluice_tc::fuzzing::statefile`: no
//! panic, whatever reads writes back to the same state).
//!
//! Run: `cargo +nightly fuzz run statefile` (seeds in `fuzz/corpus/statefile/`, made by
//! `scripts/fuzz-seeds.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_tc::fuzzing::statefile(data));
