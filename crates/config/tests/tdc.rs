//! Runs the kernel tdc corpus from `../shared/conformance/tdc` (or `$SLUICE_TDC_DIR`) and
//! requires at least 95% of the non-scapy cases to pass. Skips loudly when the corpus is absent.

use sluice_config::conform::{run_tdc, Status};
use std::path::PathBuf;

fn corpus() -> Option<PathBuf> {
    if let Ok(d) = std::env::var("SLUICE_TDC_DIR") {
        return Some(PathBuf::from(d));
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // crates/config -> repo root -> its sibling `shared`.
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
