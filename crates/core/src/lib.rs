//! # sluice-core
//!
//! The sans-IO heart of Sluice: exact rate arithmetic, the packet descriptor, the [`Qdisc`]
//! contract, the queueing disciplines and the classifiers. Nothing here reads a clock, opens a
//! socket or spawns a thread: every call takes `now`, and a qdisc says when it next wants to run
//! through [`Qdisc::next_event`]. The simulator and the live shaper drive this same code.
//!
//! Layers, bottom up:
//! - [`time`], [`rate`], [`units`]: integer nanoseconds, bit-exact token buckets, tc's units.
//! - [`packet`], [`handle`]: what a packet looks like to a scheduler; tc `major:minor` handles.
//! - [`qdisc`]: the contract, drop reasons and `tc -s` counters.
//! - the qdiscs themselves, one module each.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cake;
pub mod classify;
pub mod codel;
pub mod drr;
pub mod ets;
pub mod fifo;
pub mod filter;
pub mod flow_keys;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod handle;
pub mod hfsc;
pub mod htb;
pub mod htb_fair;
pub mod netem;
pub mod packet;
pub mod pie;
pub mod prio;
pub mod qdisc;
pub mod rate;
pub mod red;
pub mod reference_htb;
pub mod sched;
pub mod sfq;
pub mod tbf;
pub mod tcp_info;
pub mod time;
pub mod units;

pub use flow_keys::{FlowKeys, HeaderKeys};
pub use handle::Handle;
pub use packet::{Ecn, NatOrig, Packet};
pub use qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
pub use rate::{LinkLayer, Rate, TokenBucket, WireSpec};
pub use tcp_info::TcpInfo;
pub use time::{Span, Time};
