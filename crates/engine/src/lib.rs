//! # sluice-engine
//!
//! The one packet engine. The simulator, the live shaper and the end-to-end tests all feed
//! packets through an [`Engine`]; none of them classifies, enqueues, or counts drops on its own.
//!
//! Layers, bottom up:
//! - `sluice-core`: the qdiscs and the classifier (sans-IO, every call takes `now`);
//! - `sluice-wire`: frame bytes → flow keys and packet metadata;
//! - `sluice-tc`: the configuration model and its builder into core objects;
//! - this crate: a [`Program`] (one configuration built: root qdisc + classifier) and the
//!   [`Engine`] that runs one, owns the payloads in flight and keeps every counter.
//!
//! It is a crate of its own because it takes frames (sluice-wire) and models (sluice-tc),
//! both of which sit above the core.
//!
//! ## Contract
//!
//! - **Ownership.** Every payload handle given to [`Engine::ingress_frame`], [`Engine::ingress`]
//!   or [`Engine::receive`] comes back exactly once: from [`Engine::dequeue`] (send it), from
//!   [`Engine::receive`]'s `Pass` (deliver it), from [`Engine::take_redirected`] (a mirred
//!   redirect: hand it to the target device's engine) or from [`Engine::take_dropped`] (free it),
//!   whoever dropped it: a frame too short to forward, a filter
//!   verdict, the root qdisc refusing it, a qdisc dropping it later on its own (AQM, head drop, the
//!   fattest flow), or [`Engine::flush`]. The verdict of an ingress is informational.
//! - **Copies.** A netem `duplicate` or a mirred `mirror` makes a copy: it comes out of
//!   [`Engine::take_copy`] carrying its original's handle, and the caller, who owns the bytes,
//!   copies them under a handle of its own before handing the copy on: a duplicate back to
//!   [`Engine::ingress_copy`] (the kernel re-enqueues it at the root), a mirror to its target
//!   device like a redirect. From then on the copy is a packet like any other. Bit 63 of a
//!   payload handle is the engine's (it marks a duplicate on its way through the root; it is
//!   cleared on every way out).
//! - **Counters.** [`Engine::stats`] counts every packet once:
//!   `received = sent_packets + dropped + queued + redirected + delivered`, and `dropped` is the
//!   number of payloads `take_dropped` hands back.
//! - **Devices.** One engine is one device: its egress (root qdisc, clsact egress filters) and its
//!   ingress hook (the `ingress` qdisc's or clsact's ingress filters, [`Engine::receive`]). A
//!   mirred redirect names another device; the caller, who holds one engine per device, routes
//!   what [`Engine::take_redirected`] returns (an IFB's egress output goes back where it came
//!   from: delivered, for the usual ingress shaping).
//! - **Time.** Every call takes `now`, which must not go backwards (an earlier `now` is taken as
//!   the latest seen). The engine never reads a clock.
//! - **Reload.** [`Engine::reload`] is hitless: packets already queued leave first, under the
//!   configuration that queued them, and new packets wait behind them, so nothing is lost and no
//!   flow is reordered. A reload during a reload keeps the generations in order.
//!
//! ## Calling order
//!
//! In the style of smoltcp's `poll` and quinn's `handle_*`/`poll_*`/`poll_timeout`:
//!
//! 1. `ingress_frame(frame, payload, now)` or `ingress(pkt, &keys, frame, now)` for what comes in;
//! 2. `dequeue(now)` until it returns `None`, sending what it returns;
//! 3. `take_dropped()` until it returns `None`, after every call of 1, 2, `reload` and `flush`,
//!    freeing the payloads;
//! 4. `next_event(now)` for when to call `dequeue` again (`None`: nothing queued). Calling
//!    `dequeue` early is harmless; calling it late only delays packets.
//!
//! ```
//! use sluice_engine::{Engine, Program, ProgramOptions, Verdict};
//! use sluice_core::{Packet, Time};
//! use sluice_model::model::{DevKind, Device, FifoOpts, Handle, QdiscNode, QdiscOpts, State, H_ROOT};
//!
//! // `tc qdisc add dev eth0 root handle 1: pfifo limit 2`, as the model holds it (`sluice-tc`
//! // reads it from a script; see `sluice_tc::script::load_tc_script`).
//! let mut dev = Device::new("eth0", DevKind::Dummy, 2);
//! let opts = QdiscOpts::Pfifo(FifoOpts { limit: Some(2) });
//! dev.qdiscs.push(QdiscNode { handle: Handle::new(1, 0), parent: H_ROOT, opts, stab: None, stats: Default::default() });
//! let state = State { devices: vec![dev], ..Default::default() };
//! let program = Program::from_model(&state, "eth0", &ProgramOptions::default()).unwrap();
//! let mut engine = Engine::new(program, Time::ZERO);
//! let now = Time::ZERO;
//! for payload in 0..3 {
//!     // A real caller passes frames to `ingress_frame`; this one describes packets itself.
//!     let _ = engine.ingress(Packet::new(1000, payload), &Default::default(), &[], now);
//! }
//! // The third packet did not fit in the 2-packet FIFO: it comes back to be freed.
//! assert_eq!(engine.take_dropped().map(|d| d.pkt.payload), Some(2));
//! assert_eq!(engine.dequeue(now).map(|p| p.payload), Some(0));
//! let s = engine.stats();
//! assert_eq!((s.received, s.sent_packets, s.dropped, s.queued), (3, 1, 1, 1));
//! assert!(engine.next_event(now).is_some());
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod engine;
mod program;

pub use engine::{ClassLoad, Copied, CopyTo, Engine, EngineStats, Received, Redirected, Verdict};
pub use program::{EngineError, Program, ProgramOptions};
