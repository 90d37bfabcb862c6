//! # sluice-live
//!
//! The live dataplane: real frames from AF_PACKET TPACKET_V2 rings (with their offload headers) through the same packet engine
//! the simulator runs ([`sluice_engine::Engine`]: parse, classify, enqueue, drops, counters,
//! hitless reload), timed by its `next_event`.
//!
//! - [`sys`]: unsafe code (packet sockets, the mmap ring);
//! - [`xdp`], [`xdp_prog`]: unsafe code too: AF_XDP ports (UMEM and rings through `xdpilone`)
//!   and the XDP redirect program loaded and attached with `bpf(2)`;
//! - [`io`]: which of the two a port uses (`--io auto|xdp|packet`), and the fallback;
//! - [`offload`]: GSO/GRO super-packets and partial checksums (`virtio_net_hdr`);
//! - [`frame`]: the buffer pool that holds frames while the engine holds their payload handles;
//! - [`config`]: configuration file → model → engine program, with the live burst floor;
//! - [`netns`]: entering a network namespace;
//! - [`timing`]: wake-up jitter calibration and the burst floor;
//! - [`pacing`]: replaying deadlines the loop missed, so late wake-ups cost no rate;
//! - [`rebalance`]: sharing a parent class between worker threads;
//! - [`control`]: owner-only control socket and Prometheus endpoint;
//! - [`shaper`]: the forwarding loop;
//! - [`worker`]: several worker threads, subscribers spread by address, shared classes rebalanced.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod control;
pub mod frame;
pub mod io;
pub mod netns;
pub mod offload;
pub mod pacing;
pub mod rebalance;
pub mod shaper;
pub mod sys;
pub mod timing;
pub mod worker;
pub mod xdp;
pub mod xdp_prog;

/// Errors of the live shaper.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// An OS call failed.
    #[error("{0}")]
    Io(String),
    /// The configuration cannot run live.
    #[error("configuration: {0}")]
    Config(String),
}
