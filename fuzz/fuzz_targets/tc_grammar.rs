//! Arbitrary bytes → tc command lines on emulated devices (see
//! `sluice_tc::fuzzing::tc_grammar` for the invariants: no panic, failed commands change
//! nothing, every state survives the state file).
//!
//! Run: `cargo +nightly fuzz run tc_grammar` (from the repository root; seeds in
//! `fuzz/corpus/tc_grammar/`, made from the tc script corpus by `scripts/fuzz-seeds.sh`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_tc::fuzzing::tc_grammar(data));
