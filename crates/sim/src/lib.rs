//! # sluice-sim
//!
//! A deterministic discrete-event simulator that drives the same `sluice-core` qdiscs as the live
//! shaper, on a virtual clock.
//!
//! Layers, bottom up:
//! - [`model`]: the typed description of a run (links, flows, classes).
//! - the engine ([`Sim`]): an event heap with deterministic tie-breaking, hops made of a queue,
//!   a transmitter and a wire, traffic sources (CBR, Poisson, on/off, Ixia stream groups, TCP
//!   Reno/CUBIC, paced senders, ping probes) and receivers that measure.
//! - [`scenario`]: TOML scenario files, parameters and sweeps, built-in scenarios.
//! - [`run`]: runs a scenario (sweeps in parallel) into a [`sluice_report::Results`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// ScenarioError carries the source text and span for miette; it is built at most once per run,
// so its size on the error path does not matter.
#![allow(clippy::result_large_err)]

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
