//! # sluice-wire
//!
//! Bytes on the wire ↔ what the scheduler needs to know about them.
//!
//! - [`parse_frame`]: an Ethernet frame (or a raw IP packet) → [`sluice_core::FlowKeys`] for the
//!   classifiers (outer and tunnel-inner headers) and the metadata of a [`sluice_core::Packet`]
//!   (length, TOS byte, keyed flow and host hashes). Header validation is etherparse's; GRE is
//!   decoded here. Bad input is a [`ParseError`], counted by [`ParseStats`], never a panic.
//! - [`mark_ce`], [`apply_dsfield`]: rewrite the TOS / traffic-class byte in place after a qdisc
//!   marked a packet, keeping the IPv4 header checksum valid (RFC 1624).
//! - [`FrameSpec`]: builds frames (with VLANs and every supported tunnel) for the simulator, the
//!   load generator, tests and the fuzz corpus.
//!
//! ```
//! use sluice_core::Packet;
//! use sluice_wire::{apply_dsfield, parse_frame, FrameSpec, ParseOptions, ParseStats};
//! use std::net::{IpAddr, Ipv4Addr};
//!
//! let (a, b) = (IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
//! let mut spec = FrameSpec::udp(a, b, 5000, 53, 100);
//! spec.dsfield = 0x02; // ECT(0)
//! let mut frame = spec.build().unwrap();
//!
//! let mut stats = ParseStats::default();
//! let result = parse_frame(&frame, ParseOptions::default());
//! stats.record(&result);
//! let parsed = result.unwrap();
//! assert_eq!(parsed.keys.outer.unwrap().dst_port, 53);
//!
//! // The packet goes through the qdiscs; one of them marks it instead of dropping it...
//! let mut pkt: Packet = parsed.to_packet(0);
//! assert!(pkt.set_ce());
//! // ...and on transmit the live path writes the new TOS byte into the frame.
//! assert_eq!(apply_dsfield(&mut frame, &parsed.keys, pkt.dsfield), Ok(true));
//! assert_eq!(parse_frame(&frame, ParseOptions::default()).unwrap().dsfield, 0x03);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod build;
mod ecn;
mod error;
mod gre;
mod hash;
mod parse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use build::{BuildError, FrameSpec, Tunnel, VlanTags, L4};
pub use ecn::{
    apply_dsfield, internet_checksum, mark_ce, read_dsfield, write_dsfield, MarkOutcome, RewriteError,
};
pub use error::{ErrorKind, Layer, ParseError, ParseStats};
pub use gre::GreOptions;
pub use hash::{flow_hash, host_hash, l2_hash};
pub use parse::{
    fill_packet, parse_frame, proto, Fragment, ParseOptions, Parsed, Start, TunnelKind, ETH_P_8021AD,
    ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6, ETH_P_QINQ1, ETH_P_TEB,
};

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod roundtrip_tests;
