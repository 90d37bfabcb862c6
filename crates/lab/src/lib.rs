//! # sluice-lab
//!
//! Everything Sluice needs to run real traffic on this machine:
//! - [`testbed`]: a client ↔ shaper ↔ server lab built from network namespaces and veth pairs
//!   (addresses only from 198.18.0.0/15), with an optional tbf "modem" before the server;
//! - [`traffic`]: a built-in load generator (bulk TCP, UDP CBR and flood) and latency prober
//!   (isochronous UDP probes like irtt, per-DSCP probes like ping-exp), every loop bounded in time;
//! - [`kernel`] over [`netlink`]: the kernel backend that programs one device of a
//!   `sluice_config::model` configuration into Linux tc (HTB, TBF, FIFOs) through rtnetlink,
//!   prints the equivalent tc commands and reads the result back;
//! - [`txn`] over [`plan`] and [`batch`]: `sluice apply` as a transaction: probe the kinds on a
//!   scratch device, send only the difference from the kernel's tree in batched netlink, restore
//!   the previous tree exactly on a refusal; [`rate`]: one class's rate in one message;
//! - [`results`]: the results JSON shared with the simulator.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actions;
pub mod batch;
pub mod fdiff;
pub mod filters;
pub mod kernel;
pub mod measure;
pub mod netlink;
pub mod netns;
pub mod plan;
pub mod rate;
pub mod results;
pub mod rtnl;
pub mod testbed;
pub mod traffic;
pub mod txn;

/// Errors from the lab, the traffic tools and the kernel backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// An OS call failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A namespace could not be entered or created.
    #[error("network namespace: {0}")]
    Netns(String),
    /// A setup command (`ip`, `ethtool`) failed.
    #[error("setup: {0}")]
    Setup(String),
    /// The kernel refused a netlink request.
    #[error("kernel refused: {message} ({strerror}, errno {errno})")]
    Kernel {
        /// Positive errno.
        errno: i32,
        /// The kernel's extended-ack message, if any.
        message: String,
        /// strerror(errno).
        strerror: String,
    },
    /// No such interface.
    #[error("no such interface: {0}")]
    NoDevice(String),
    /// The configuration cannot be used.
    #[error("configuration: {0}")]
    Config(String),
    /// The kernel refused part of a change (what and why; whether the previous state was restored).
    #[error("refused: {0}")]
    Refused(String),
    /// The lab is not in the state the operation needs.
    #[error("lab: {0}")]
    Lab(String),
}
