//! # sluice-report
//!
//! The results document every Sluice experiment writes ([`schema`]), a flent-compatible
//! `.flent.gz` writer ([`flent`]), plots with plotters in PNG and SVG ([`plot`]), a
//! self-contained `report.html` ([`html`]) and side-by-side comparison helpers ([`compare`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compare;
pub mod flent;
pub mod html;
pub mod plot;
pub mod schema;
mod write;

pub use schema::{Case, ClassResult, FlowResult, Latency, PlotHints, QdiscResult, Results, Series};
pub use write::write_report;
