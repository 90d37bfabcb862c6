//! # sluice-report
//!
//! The results document every Sluice experiment writes ([`schema`]), a flent-compatible
//! `.flent.gz` writer ([`flent`]), plots with plotters in PNG and SVG ([`plot`]), a
//! self-contained `report.html` ([`html`]) and side-by-side comparison helpers ([`compare`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod schema;

pub use schema::{Case, ClassResult, FlowResult, Latency, QdiscResult, Results, Series};
