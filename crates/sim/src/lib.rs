//! # sluice-sim
//!
//! A deterministic discrete-event simulator that drives the same packet engine as the live shaper
//! ([`sluice_engine::Engine`]: classification, qdiscs, drops, counters), on a virtual clock.
//!
//! Layers, bottom up:
//! - [`model`]: the typed description of a run (links, flows, classes).
//! - the event loop ([`Sim`]): an event heap with deterministic tie-breaking, hops made of a
//!   packet engine, a transmitter and a wire, traffic sources (CBR, Poisson, on/off, Ixia stream
//!   groups, TCP Reno/CUBIC, paced senders, ping probes) and receivers that measure.
//!
//! Every packet is classified by the hop's engine. A flow of a tc-script shaper carries its flow
//! keys and a template frame (parsed once), so filters and policers act per packet; the
//! structured form's `[[shaper.match]]` rules, `[shaper.hash]` and a flow's `class` are what the
//! sending host sets on its packets (`skb->priority`, which HTB honours first; a generated
//! two-level tree also names the site class in the mark, read by an fw filter at the root).
//! - [`scenario`]: TOML scenario files, parameters and sweeps, built-in scenarios.
//! - [`run`]: runs a scenario (sweeps in parallel) into a [`sluice_report::Results`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// ScenarioError carries the source text and span for miette; it is built at most once per run,
// so its size on the error path does not matter.
#![allow(clippy::result_large_err)]

mod bbr;
mod engine;
mod event;
pub mod legacy;
pub mod model;
mod recorder;
mod results;
pub mod shaper;
mod tcp;
mod tcscript;

pub use engine::{EngineStats, Sim};
pub use results::case_results;
mod backend;
pub mod builtin;
mod leaves;
pub mod run;
pub mod scenario;
pub mod seed_table;

/// The body of the `scenario` fuzz target (in `fuzz/`), shared with the stable replay in CI:
/// arbitrary bytes as a scenario file never panic the loader or the rendering of its errors.
pub fn fuzz_scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = scenario::Scenario::parse("fuzz.toml", text) {
        let _ = e.to_string();
    }
}
