//! # sluice-tc
//!
//! Sluice's tc front end over the model of `sluice-model` (re-exported as [`model`]): the tc and ip command languages
//! on emulated devices ([`tc`]) with tc 6.x's messages, exit codes and `show` output, the JSON
//! state file ([`statefile`]), tc scripts and the native TOML form ([`script`], [`native`]),
//! the kernel tdc conformance runner ([`conform`]), lint ([`lint`]), Graphviz/SVG drawing
//! ([`viz`]) and conversion to live core objects ([`build`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod conform;
pub mod export;
#[doc(hidden)]
pub mod fuzzing;
pub mod lint;
pub mod run;
pub mod runstats;
pub mod script;
pub mod shell;
pub mod statefile;
pub mod tc;
pub mod viz;

pub use model::State;
pub use sluice_model::{build, burst, model};
pub use tc::{run_ip, run_tc, Outcome};
