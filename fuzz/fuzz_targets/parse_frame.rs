//! Arbitrary bytes → `parse_frame` from layer 2 and from layer 3, and `mark_ce` on a copy of
//! every frame that parses (see `sluice_wire::testing::check_frame` for the invariants).
//!
//! Run: `cargo +nightly fuzz run parse_frame` (from the repository root; seeds in
//! `fuzz/corpus/parse_frame/`, regenerate them with
//! `cargo run -p sluice-wire --example gen_corpus -- fuzz/corpus/parse_frame`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sluice_wire::testing::check_frame(data);
    // Also exercise marking at fixed offsets of frames that did not parse.
    for off in [0usize, 14, 18] {
        let mut copy = data.to_vec();
        let _ = sluice_wire::mark_ce(&mut copy, off);
    }
});
