//! Runs the kernel tdc corpus from `../shared/conformance/tdc` (or `$SLUICE_TDC_DIR`) and
//! requires at least 95% of the non-scapy cases to pass. Skips loudly when the corpus is absent.

use sluice_tc::conform::{run_tdc, Status};
use std::path::PathBuf;

fn corpus() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("SLUICE_TDC_DIR") {
        return Some(PathBuf::from(d));
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // crates/tc -> repo root -> its sibling `shared`.
    let p = here.join("../../../shared/conformance/tdc");
    p.exists().then_some(p)
}

#[test]
fn tdc_corpus_passes_at_least_95_percent() {
    let Some(dir) = corpus() else {
        eprintln!("SKIPPED: tdc corpus not found (set SLUICE_TDC_DIR or provide ../shared/conformance/tdc)");
        return;
    };
    let report = run_tdc(&[dir]).expect("corpus readable");
    for c in &report.cases {
        if let Status::Fail(r) = &c.status {
            eprintln!("FAIL {} {}: {}", c.id, c.name, r);
        }
    }
    let (p, f, s) = report.counts();
    eprintln!("{p} passed, {f} failed, {s} skipped");
    assert!(p + f >= 100, "corpus unexpectedly small: {p} + {f}");
    assert!(report.pass_rate() >= 95.0, "pass rate {:.1}% < 95%", report.pass_rate());
}

/// `../shared/conformance/tdc-more` (or `$SLUICE_TDC_MORE_DIR`): the kernel's other tdc files.
fn more() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("SLUICE_TDC_MORE_DIR") {
        return Some(PathBuf::from(d));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tdc-more");
    p.exists().then_some(p)
}

/// The tdc-more files whose kinds Sluice claims: each must pass at ≥ 95% (issue 12 for fifo,
/// issue 15 for the rest; basic's ematches in issue 12).
const ENFORCED: &[&str] = &[
    "qdiscs/fifo.json",
    "qdiscs/netem.json",
    "qdiscs/drr.json",
    "qdiscs/red.json",
    "qdiscs/ingress.json",
    "qdiscs/cake.json",
    "qdiscs/hfsc.json",
    "qdiscs/ets.json",
    "filters/matchall.json",
    "filters/fw.json",
    "filters/basic.json",
    "actions/gact.json",
    "actions/police.json",
    "actions/skbedit.json",
    "actions/mirred.json",
];

/// tdc-more files still being brought up: run and their rates printed, not enforced.
const REPORTED: &[&str] = &[];

#[test]
fn tdc_more_claimed_kinds_pass() {
    let Some(dir) = more() else {
        eprintln!(
            "SKIPPED: tdc-more not found (set SLUICE_TDC_MORE_DIR or provide ../shared/conformance/tdc-more)"
        );
        return;
    };
    let low = below_95(&dir, ENFORCED, 4);
    for file in REPORTED {
        match run_tdc(&[dir.join(file)]) {
            Ok(r) => {
                for c in &r.cases {
                    if let Status::Fail(why) = &c.status {
                        eprintln!("FAIL {file} {} {}: {}", c.id, c.name, why);
                    }
                }
                let (p, f, s) = r.counts();
                eprintln!(
                    "{file}: {p} passed, {f} failed, {s} skipped ({:.1}%, not enforced)",
                    r.pass_rate()
                );
            }
            Err(e) => eprintln!("{file}: not run: {e}"),
        }
    }
    assert!(low.is_empty(), "below 95%: {}", low.join(", "));
}

/// `../shared/conformance/tdc-next` (or `$SLUICE_TDC_NEXT_DIR`): the kernel's tdc files for the
/// kinds of issues 26–28.
fn next() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("SLUICE_TDC_NEXT_DIR") {
        return Some(PathBuf::from(d));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tdc-next");
    p.exists().then_some(p)
}

/// The tdc-next files whose kinds Sluice claims: each must pass at ≥ 95%, every case run (some
/// files hold a single case).
const ENFORCED_NEXT: &[&str] = &["qdiscs/fq.json", "qdiscs/pie.json", "qdiscs/fq_pie.json"];

#[test]
fn tdc_next_claimed_kinds_pass() {
    let Some(dir) = next() else {
        eprintln!(
            "SKIPPED: tdc-next not found (set SLUICE_TDC_NEXT_DIR or provide ../shared/conformance/tdc-next)"
        );
        return;
    };
    let low = below_95(&dir, ENFORCED_NEXT, 1);
    assert!(low.is_empty(), "below 95%: {}", low.join(", "));
}

/// Runs each file of `files` under `dir`, prints its failures and rate, and returns those that
/// pass below 95% or run fewer than `min_cases` cases.
fn below_95(dir: &std::path::Path, files: &[&str], min_cases: usize) -> Vec<String> {
    let mut low = Vec::new();
    for file in files {
        let r = run_tdc(&[dir.join(file)]).unwrap_or_else(|e| panic!("{file}: {e}"));
        for c in &r.cases {
            if let Status::Fail(why) = &c.status {
                eprintln!("FAIL {file} {} {}: {}", c.id, c.name, why);
            }
        }
        let (p, f, s) = r.counts();
        eprintln!("{file}: {p} passed, {f} failed, {s} skipped ({:.1}%)", r.pass_rate());
        if p + f < min_cases || r.pass_rate() < 95.0 {
            low.push(format!("{file} {:.1}%", r.pass_rate()));
        }
    }
    low
}
