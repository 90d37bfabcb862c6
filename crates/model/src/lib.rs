//! # sluice-model
//!
//! The configuration as plain data ([`model`]), every kind's own code in one place ([`kinds`]),
//! the words and printers those kinds are written with ([`grammar`], [`print`]), and the
//! builder of running core objects ([`build`]). No command grammar, no file formats: those are
//! `sluice-tc`'s. The packet engine depends on this crate alone.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod build;
pub mod burst;
pub mod error;
pub mod grammar;
pub mod json;
pub mod kinds;
pub mod model;
pub mod nlattr;
pub mod print;
mod serde_units;
pub mod tcmath;

pub use model::State;
