//! # sluice-bench
//!
//! The in-process benchmark harness behind `sluice bench` and the criterion benches in
//! `benches/`. It builds HTB trees of 1k to 1M leaf classes (two levels: sites, then
//! subscribers, all in one HTB qdisc thanks to 32-bit class minors; `nested` builds one qdisc
//! per site instead, for comparison), keeps a fraction of the leaves backlogged on a virtual
//! clock, and times batches of packets with the wall clock; it also runs fq_codel and the full
//! parse → classify → enqueue → dequeue path of a 64-byte frame. The naive
//! [`sluice_core::reference_htb::RefHtb`] runs the same HTB cases as a baseline.
//!
//! Memory per class comes from a counting global allocator ([`mem`]), which the benchmarking
//! binary must install. Instruction counts come from callgrind around [`callgrind_case`]'s hot
//! loop (see `BENCHMARKS.md`). Sizes that cannot fit in memory are refused up front
//! ([`check_size`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cases;
pub mod driver;
pub mod mem;
pub mod plot;
pub mod tree;

pub use cases::{BenchResult, Effort};
pub use tree::{Scheduler, TreeSpec};

use std::ops::ControlFlow;

/// What `sluice bench` runs.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Leaf class counts for the HTB cases.
    pub classes: Vec<usize>,
    /// Backlogged percentages.
    pub active: Vec<u32>,
    /// Shorter runs.
    pub quick: bool,
    /// Also run the naive reference (up to [`Effort::reference_max_classes`]).
    pub reference: bool,
    /// Also run the Sluice HTB cases with one HTB qdisc per site (the 16-bit layout).
    pub nested: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            classes: vec![1_000, 10_000, 100_000, 1_000_000],
            active: vec![1, 10, 100],
            quick: false,
            reference: true,
            nested: false,
        }
    }
}

/// Heap bytes one leaf class of an HTB case needs at most, all told: the idle tree (about 120
/// bytes per class measured, see BENCHMARKS.md) and `active_pct`% of the leaves holding two
/// queued packets (a packet and its slab link each). Sites, the bitmaps, the timing wheel and
/// the growth of vectors are inside the margin of 64 bytes.
pub fn bytes_per_leaf(active_pct: u32) -> u64 {
    let pkt = std::mem::size_of::<sluice_core::Packet>() as u64;
    let queued = 2 * (pkt + 8) * active_pct.min(100) as u64 / 100;
    128 + queued + 64
}

/// Checks that an HTB case of `classes` leaves with `active_pct`% backlogged can run: the classes
/// must fit in 32-bit minors, and the estimated memory ([`bytes_per_leaf`]) in the memory the
/// machine has available. The error names the largest size that fits. (The reference, about
/// 600 bytes per class, runs only up to [`Effort::reference_max_classes`], far below this.)
pub fn check_size(classes: usize, active_pct: u32) -> Result<(), String> {
    if classes == 0 {
        return Err("a tree needs at least 1 class".into());
    }
    if !(1..=100).contains(&active_pct) {
        return Err(format!("{active_pct}% backlogged: the percentage must be in 1..=100"));
    }
    let per = bytes_per_leaf(active_pct);
    let fit_mem = mem::available_bytes().map(|avail| (avail / per) as usize);
    let largest = fit_mem.map_or(tree::MAX_LEAVES, |m| m.min(tree::MAX_LEAVES));
    if classes <= largest {
        return Ok(());
    }
    let why = match fit_mem {
        Some(m) if m < tree::MAX_LEAVES => format!(
            "needs about {} of memory ({per} bytes per class) and {} are available",
            human_bytes(classes as u64 * per),
            human_bytes(mem::available_bytes().unwrap_or(0)),
        ),
        _ => "does not fit in one qdisc's 32-bit class minors (with its root and sites)".into(),
    };
    Err(format!(
        "{classes} classes at {active_pct}% backlogged: {why}; the largest tree that fits is {largest} classes"
    ))
}

fn human_bytes(b: u64) -> String {
    let gib = b as f64 / (1u64 << 30) as f64;
    if gib >= 1024.0 {
        format!("{:.1} TiB", gib / 1024.0)
    } else if gib >= 1.0 {
        format!("{gib:.1} GiB")
    } else {
        format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

/// Checks every HTB size of `opts` ([`check_size`]) before anything runs.
pub fn check_options(opts: &BenchOptions) -> Result<(), String> {
    for &n in &opts.classes {
        for &p in &opts.active {
            check_size(n, p)?;
        }
    }
    Ok(())
}

/// Runs every selected case, calling `progress` with each result as it comes; `progress`
/// returning `Break` stops the run (e.g. when nobody reads the output any more).
pub fn run(
    opts: &BenchOptions,
    mut progress: impl FnMut(&BenchResult) -> ControlFlow<()>,
) -> Vec<BenchResult> {
    let effort = if opts.quick { Effort::QUICK } else { Effort::FULL };
    let mut out = Vec::new();
    let mut push = |r: BenchResult| {
        let flow = progress(&r);
        out.push(r);
        flow
    };
    let mut go = || -> ControlFlow<()> {
        for &n in &opts.classes {
            for &p in &opts.active {
                for throttled in [false, true] {
                    push(cases::htb_case(Scheduler::Sluice, n, p, throttled, false, effort))?;
                    if opts.nested {
                        push(cases::htb_case(Scheduler::Sluice, n, p, throttled, true, effort))?;
                    }
                    if !opts.reference {
                        continue;
                    }
                    let case = cases::htb_case_name(throttled, false);
                    if n > effort.reference_max_classes {
                        let why = format!(
                            "reference skipped above {} classes (O(N) per packet)",
                            effort.reference_max_classes
                        );
                        push(cases::skipped(Scheduler::Reference, &case, n, p, &why))?;
                    } else {
                        push(cases::htb_case(Scheduler::Reference, n, p, throttled, false, effort))?;
                    }
                }
            }
        }
        for flows in [1024usize, 65_536] {
            for &p in &opts.active {
                push(cases::fq_codel_case(flows, p, effort))?;
            }
        }
        push(cases::full_path_case(16, effort))
    };
    let _ = go();
    out
}

/// The results as `{"results":[...]}`.
pub fn to_json(results: &[BenchResult]) -> String {
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        results: &'a [BenchResult],
    }
    // NaN (skipped runs) is written as null by serde_json.
    serde_json::to_string_pretty(&Doc { results }).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Reads back the output of [`to_json`].
pub fn from_json(text: &str) -> Result<Vec<BenchResult>, String> {
    #[derive(serde::Deserialize)]
    struct Doc {
        results: Vec<BenchResult>,
    }
    serde_json::from_str::<Doc>(text).map(|d| d.results).map_err(|e| format!("bench JSON: {e}"))
}

/// The header line of [`to_table`].
pub fn table_header() -> String {
    format!(
        "{:<10} {:<20} {:>9} {:>7} {:>10} {:>10} {:>8} {:>10} {:>9}\n",
        "scheduler", "case", "classes", "active%", "p50 ns/pk", "p99 ns/pk", "Mpps", "B/class", "speed-up"
    )
}

/// One line of [`to_table`]; `others` are the results to find the Sluice counterpart of a
/// reference row in (for its speed-up).
pub fn table_row(r: &BenchResult, others: &[BenchResult]) -> String {
    let speedup = if r.scheduler == Scheduler::Reference {
        others
            .iter()
            .find(|o| {
                o.scheduler == Scheduler::Sluice
                    && o.case == r.case
                    && o.classes == r.classes
                    && o.active_pct == r.active_pct
            })
            .map(|o| r.ns_per_pkt_p50 / o.ns_per_pkt_p50)
            .filter(|x| x.is_finite())
            .map(|x| format!("{x:.0}x"))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let f = |x: f64, d: usize| if x.is_finite() { format!("{x:.d$}") } else { "-".into() };
    let b = r.bytes_per_class.map(|b| format!("{b:.0}")).unwrap_or_else(|| "-".into());
    format!(
        "{:<10} {:<20} {:>9} {:>7} {:>10} {:>10} {:>8} {:>10} {:>9}{}\n",
        r.scheduler.name(),
        r.case,
        r.classes,
        r.active_pct,
        f(r.ns_per_pkt_p50, 1),
        f(r.ns_per_pkt_p99, 1),
        f(r.mpps, 2),
        b,
        speedup,
        r.note.as_deref().map(|n| format!("  ({n})")).unwrap_or_default()
    )
}

/// A plain-text table, with the reference's speed-up where both ran.
pub fn to_table(results: &[BenchResult]) -> String {
    let mut s = table_header();
    for r in results {
        s.push_str(&table_row(r, results));
    }
    s
}

/// Names accepted by [`callgrind_case`].
pub const CALLGRIND_CASES: &str = "htb-<classes>-<active%>[-throttled][-nested] (e.g. htb-100000-10), \
     ref-<classes>-<active%>[-throttled], full-path";

/// Packets in the measured loop of a callgrind case.
pub const CALLGRIND_PACKETS: usize = 100_000;

/// A parsed [`callgrind_case`] name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallgrindCase {
    FullPath,
    Htb { which: Scheduler, classes: usize, active_pct: u32, throttled: bool, nested: bool },
}

fn parse_callgrind_case(name: &str) -> Result<CallgrindCase, String> {
    let bad = |why: String| format!("bad case {name:?}: {why}; valid cases: {CALLGRIND_CASES}");
    let parts: Vec<&str> = name.split('-').collect();
    let kind = match parts.as_slice() {
        ["full", "path"] => return Ok(CallgrindCase::FullPath),
        [k @ ("htb" | "ref"), _, _, ..] => *k,
        _ => return Err(bad("unknown case".into())),
    };
    let classes: usize = parts[1].parse().map_err(|_| bad(format!("{:?} is not a class count", parts[1])))?;
    let active_pct: u32 = parts[2].parse().map_err(|_| bad(format!("{:?} is not a percentage", parts[2])))?;
    let (mut throttled, mut nested) = (false, false);
    for &flag in &parts[3..] {
        match flag {
            "throttled" if !throttled => throttled = true,
            "nested" if kind == "htb" && !nested => nested = true,
            f => return Err(bad(format!("unknown or repeated suffix {f:?}"))),
        }
    }
    let which = if kind == "htb" { Scheduler::Sluice } else { Scheduler::Reference };
    check_size(classes, active_pct).map_err(bad)?;
    Ok(CallgrindCase::Htb { which, classes, active_pct, throttled, nested })
}

/// Builds and warms up a case, then runs [`CALLGRIND_PACKETS`] packets (1000 for the reference)
/// inside a function named `callgrind_loop`, the one to pass to callgrind's
/// `--toggle-collect='*callgrind_loop*'`. Returns the packets sent in the measured loop.
pub fn callgrind_case(name: &str) -> Result<usize, String> {
    match parse_callgrind_case(name)? {
        CallgrindCase::FullPath => {
            let mut fp = cases::FullPath::new(16, 16);
            fp.run(0, fp.frames() + 1024);
            Ok(fp.callgrind_loop(CALLGRIND_PACKETS))
        }
        CallgrindCase::Htb { which, classes: n, active_pct: p, throttled, nested } => {
            let n_active = (n * p as usize / 100).max(1);
            let spec = TreeSpec::new(n, n_active, throttled).with_nested(nested);
            let mut q = spec.build(which).map_err(|e| e.to_string())?;
            let active = spec.active_leaves(n_active);
            let pkt_time = spec.link.time_to_send(spec.pkt_len as u64);
            let packet = |i| spec.packet(i);
            let mut d =
                driver::Driver::new(q.as_mut(), driver::Traffic { packet: &packet, pkt_time }, &active, 2);
            let packets = if which == Scheduler::Reference { 1000 } else { CALLGRIND_PACKETS };
            d.run((2 * n_active).min(200_000) + 1024);
            Ok(d.callgrind_loop(packets))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sizes_and_case_names_are_refused_with_the_limits() {
        let e = check_size(4_294_967_295, 10).unwrap_err();
        assert!(e.contains("the largest tree that fits is"), "{e}");
        let largest: usize =
            e.rsplit("fits is ").next().unwrap().trim_end_matches(" classes").parse().unwrap();
        assert!(largest < 4_294_967_295 && largest > 0, "{e}");
        assert!(check_size(largest, 10).is_ok());
        assert!(check_size(0, 10).is_err());
        assert!(check_size(1000, 0).is_err());
        assert!(check_size(1000, 101).is_err());
        for bad in
            ["htb-0-0", "htb-100-0", "htb-x-10", "htb-100", "foo", "htb-100-10-fast", "ref-100-10-nested"]
        {
            let e = callgrind_case(bad).unwrap_err();
            assert!(e.contains("valid cases: htb-"), "{bad}: {e}");
        }
        assert_eq!(
            parse_callgrind_case("htb-1000-10-nested-throttled"),
            Ok(CallgrindCase::Htb {
                which: Scheduler::Sluice,
                classes: 1000,
                active_pct: 10,
                throttled: true,
                nested: true
            })
        );
        assert_eq!(parse_callgrind_case("full-path"), Ok(CallgrindCase::FullPath));
    }
}
