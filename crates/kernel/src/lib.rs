//! # sluice-kernel
//!
//! The kernel back end: Linux tc programmed over rtnetlink, the production `sluice apply`.
//! - [`netlink`] and [`batch`]: the transport (one socket, batched requests, acks and extended
//!   acks); [`netns`] and [`rtnl`]: namespaces, links and addresses;
//! - [`kernel`]: one device of a `sluice_model` configuration as netlink requests (qdiscs,
//!   classes), the equivalent tc commands, and the read-back; [`filters`] and [`actions`]: the
//!   filter and action requests;
//! - [`txn`] over [`plan`] and [`fdiff`]: `sluice apply` as a transaction: probe the kinds on a
//!   scratch device, send only the difference from the kernel's tree in batched netlink, restore
//!   the previous tree exactly on a refusal; [`rate`]: one class's rate in one message.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actions;
pub mod batch;
pub mod fdiff;
pub mod filters;
pub mod kernel;
pub mod netlink;
pub mod netns;
pub mod plan;
pub mod rate;
pub mod rtnl;
pub mod txn;

/// Errors from the kernel back end (and, as `sluice_lab::LabError`, from the lab).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
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
