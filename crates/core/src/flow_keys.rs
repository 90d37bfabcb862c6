//! Flow keys: what classifiers and flow-queueing qdiscs need to know about a packet's headers.
//!
//! `sluice-wire` fills this from a frame; the simulator fills it from its flow definitions. It is
//! plain data so that the core needs no parser. Both the outer header and, for tunnelled packets
//! (IPIP, 6in4, 4in6, 6in6, GRE), the inner header are kept.

use std::net::IpAddr;

/// Addresses, protocol and ports of one IP header and its transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeaderKeys {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol / IPv6 next header of the transport (after extension headers).
    pub proto: u8,
    /// Source port for TCP/UDP/SCTP/DCCP/UDP-Lite; 0 for protocols without ports.
    pub src_port: u16,
    /// Destination port; 0 for protocols without ports.
    pub dst_port: u16,
    /// TOS / traffic-class byte.
    pub dsfield: u8,
}

/// Everything a classifier may key on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKeys {
    /// EtherType of the network header (0x0800 IPv4, 0x86DD IPv6, ...), after VLAN tags.
    pub ethertype: u16,
    /// Outermost VLAN tag (VID and PCP as in the TCI), if any.
    pub vlan_tci: Option<u16>,
    /// The outer IP header, if the frame carries IP.
    pub outer: Option<HeaderKeys>,
    /// The inner IP header of a tunnel, if the outer header encapsulates one.
    pub inner: Option<HeaderKeys>,
    /// Offset of the outer network header from the start of the frame (u32 matches are relative
    /// to it).
    pub network_offset: u16,
    /// Offset of the outer transport header from the start of the frame (u32's `nexthdr`), if known.
    pub transport_offset: Option<u16>,
    /// Input interface index (`iif`), 0 if unknown.
    pub iif: u32,
}

impl FlowKeys {
    /// The innermost header: the tunnel's inner header if there is one, else the outer one.
    pub fn innermost(&self) -> Option<&HeaderKeys> {
        self.inner.as_ref().or(self.outer.as_ref())
    }
}
