//! Heap bytes in use, read from a counting global allocator.
//!
//! The binary that wants memory figures installs [`stats_alloc::INSTRUMENTED_SYSTEM`] as its
//! global allocator (the `sluice` binary does). Without it the counters stay at zero and
//! [`live_bytes`] reports `None`.

use stats_alloc::INSTRUMENTED_SYSTEM;

pub use stats_alloc::{Stats, INSTRUMENTED_SYSTEM as COUNTING_ALLOCATOR};

/// Bytes allocated and not yet freed, if the counting allocator is installed.
pub fn live_bytes() -> Option<i64> {
    if !installed() {
        return None;
    }
    let s = INSTRUMENTED_SYSTEM.stats();
    Some(s.bytes_allocated as i64 - s.bytes_deallocated as i64)
}

/// Allocation calls (alloc + realloc) so far, if the counting allocator is installed.
pub fn allocation_calls() -> Option<u64> {
    if !installed() {
        return None;
    }
    let s = INSTRUMENTED_SYSTEM.stats();
    Some((s.allocations + s.reallocations) as u64)
}

/// True if allocations are being counted.
pub fn installed() -> bool {
    let before = INSTRUMENTED_SYSTEM.stats().allocations;
    let b = std::hint::black_box(Box::new(0u64));
    drop(b);
    INSTRUMENTED_SYSTEM.stats().allocations != before
}

/// Memory the system can give without swapping (`MemAvailable` of /proc/meminfo), if known.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
