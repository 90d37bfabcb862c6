//! # sluice-report
//!
//! The results document every Sluice experiment writes ([`schema`]), a `.flent.gz` writer that
//! the real flent opens ([`flent`]), plots with plotters in PNG and SVG ([`plot`]), what a
//! document shows worked out from the results ([`analysis`]: the compared parameter, summary
//! rows, the headline), the seed documents' figures ([`seeds`]), the report's figures
//! ([`figures`]), a self-contained `report.html` ([`html`]) and comparisons of several documents
//! ([`compare`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod compare;
pub mod figures;
pub mod flent;
pub mod html;
pub mod plot;
pub mod schema;
pub mod seeds;
mod write;

pub use schema::{Case, ClassResult, FlowResult, Latency, PlotHints, QdiscResult, Results, Series};
pub use write::{write_report, write_report_checked, Written};

/// The body of the `results` fuzz target (in `fuzz/`), shared with the stable replay in CI:
/// arbitrary bytes as a results document never panic the reader, and what it reads writes out
/// as a document it reads again.
pub fn fuzz_results(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(r) = schema::Results::from_json(text) {
        let again = r.to_json();
        if let Err(e) = schema::Results::from_json(&again) {
            panic!("written results do not read: {e}\n{again}");
        }
    }
}
