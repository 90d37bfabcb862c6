//! # sluice-lab
//!
//! Everything Sluice needs to run real traffic on this machine:
//! - [`testbed`]: a client ↔ shaper ↔ server lab built from network namespaces and veth pairs
//!   (addresses only from 198.18.0.0/15), with an optional tbf "modem" before the server;
//! - [`traffic`]: a built-in load generator (bulk TCP, UDP CBR and flood) and latency prober
//!   (isochronous UDP probes like irtt, per-DSCP probes like ping-exp), every loop bounded in time;
//! - [`measure`]: the experiments (rate sweeps, rrul, the home uplink) on the lab, with the
//!   kernel programmed through `sluice-kernel`'s one apply path;
//! - [`results`]: the results JSON shared with the simulator.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod measure;
pub mod results;
pub mod testbed;
pub mod traffic;

pub use sluice_kernel::{netns, Error as LabError};
