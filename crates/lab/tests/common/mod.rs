//! Helpers shared by the lab's root-only integration tests.

use sluice_lab::testbed::{testbed_available, LabOptions};

/// True when the netns lab can be built here; otherwise says loudly why `test` is skipped.
pub fn lab_or_skip(test: &str) -> bool {
    match testbed_available(&LabOptions::default()) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("\n*** SKIPPING {test}: the netns lab cannot be built here ({why}) ***\n");
            false
        }
    }
}
