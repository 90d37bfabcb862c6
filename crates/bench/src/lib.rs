//! # sluice-bench
//!
//! The in-process benchmark harness behind `sluice bench` and the criterion benches in
//! `benches/`. It builds HTB trees of 1k to 1M leaf classes (two levels: sites, then
//! subscribers), keeps a fraction of the leaves backlogged on a virtual clock, and times batches
//! of packets with the wall clock; it also runs fq_codel and the full parse → classify → enqueue
//! → dequeue path of a 64-byte frame. The naive [`sluice_core::reference_htb::RefHtb`] runs the
//! same HTB cases as a baseline.
//!
//! Memory per class comes from a counting global allocator ([`mem`]), which the benchmarking
//! binary must install. Instruction counts come from callgrind around [`callgrind_case`]'s hot
//! loop (see `BENCHMARKS.md`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cases;
pub mod driver;
pub mod mem;
pub mod plot;
pub mod tree;

pub use cases::{BenchResult, Effort};
pub use tree::{Scheduler, TreeSpec};

use std::fmt::Write as _;

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
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            classes: vec![1_000, 10_000, 100_000, 1_000_000],
            active: vec![1, 10, 100],
            quick: false,
            reference: true,
        }
    }
}

/// Runs every selected case, calling `progress` with each result as it comes.
pub fn run(opts: &BenchOptions, mut progress: impl FnMut(&BenchResult)) -> Vec<BenchResult> {
    let effort = if opts.quick { Effort::QUICK } else { Effort::FULL };
    let mut out = Vec::new();
    let mut push = |r: BenchResult| {
        progress(&r);
        out.push(r);
    };
    for &n in &opts.classes {
        for &p in &opts.active {
            for throttled in [false, true] {
                push(cases::htb_case(Scheduler::Sluice, n, p, throttled, effort));
                if !opts.reference {
                    continue;
                }
                let case = if throttled { "htb-throttled" } else { "htb" };
                if n > effort.reference_max_classes {
                    let why = format!(
                        "reference skipped above {} classes (O(N) per packet)",
                        effort.reference_max_classes
                    );
                    push(cases::skipped(Scheduler::Reference, case, n, p, &why));
                } else {
                    push(cases::htb_case(Scheduler::Reference, n, p, throttled, effort));
                }
            }
        }
    }
    for flows in [1024usize, 65_536] {
        for &p in &opts.active {
            push(cases::fq_codel_case(flows, p, effort));
        }
    }
    push(cases::full_path_case(16, effort));
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

/// A plain-text table, with the reference's speed-up where both ran.
pub fn to_table(results: &[BenchResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<14} {:>9} {:>7} {:>10} {:>10} {:>8} {:>10} {:>9}",
        "scheduler", "case", "classes", "active%", "p50 ns/pk", "p99 ns/pk", "Mpps", "B/class", "speed-up"
    );
    for r in results {
        let speedup = if r.scheduler == Scheduler::Reference {
            results
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
        let _ = writeln!(
            s,
            "{:<10} {:<14} {:>9} {:>7} {:>10} {:>10} {:>8} {:>10} {:>9}{}",
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
        );
    }
    s
}

/// Names accepted by [`callgrind_case`].
pub const CALLGRIND_CASES: &str =
    "htb-<classes>-<active%>[-throttled] (e.g. htb-100000-10), ref-<classes>-<active%>[-throttled], full-path";

/// Packets in the measured loop of a callgrind case.
pub const CALLGRIND_PACKETS: usize = 100_000;

/// Builds and warms up a case, then runs [`CALLGRIND_PACKETS`] packets (1000 for the reference)
/// inside a function named `callgrind_loop`, the one to pass to callgrind's
/// `--toggle-collect='*callgrind_loop*'`. Returns the packets sent in the measured loop.
pub fn callgrind_case(name: &str) -> Result<usize, String> {
    let parts: Vec<&str> = name.split('-').collect();
    let num = |i: usize| -> Result<usize, String> {
        parts
            .get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad case {name:?}; expected {CALLGRIND_CASES}"))
    };
    match parts.first().copied() {
        Some("full") => {
            let mut fp = cases::FullPath::new(16, 16);
            fp.run(0, fp.frames() + 1024);
            Ok(fp.callgrind_loop(CALLGRIND_PACKETS))
        }
        Some(kind @ ("htb" | "ref")) => {
            let (n, p) = (num(1)?, num(2)? as u32);
            let throttled = parts.get(3) == Some(&"throttled");
            let which = if kind == "htb" { Scheduler::Sluice } else { Scheduler::Reference };
            let n_active = (n * p as usize / 100).max(1);
            let spec = TreeSpec::new(n, n_active, throttled);
            let mut q = spec.build(which).map_err(|e| e.to_string())?;
            let templates: Vec<_> = (0..n).map(|i| spec.packet(which, i)).collect();
            let active = spec.active_leaves(n_active);
            let pkt_time = spec.link.time_to_send(spec.pkt_len as u64);
            let mut d = driver::Driver::new(
                q.as_mut(),
                driver::Traffic { templates: &templates, pkt_time },
                &active,
                2,
            );
            let packets = if which == Scheduler::Reference { 1000 } else { CALLGRIND_PACKETS };
            d.run((2 * n_active).min(200_000) + 1024);
            Ok(d.callgrind_loop(packets))
        }
        _ => Err(format!("unknown case {name:?}; expected {CALLGRIND_CASES}")),
    }
}
