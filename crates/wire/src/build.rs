//! Frame builder for the simulator, the load generator, tests and the fuzz corpus.
//!
//! Plain packets go through etherparse's `PacketBuilder`; a tunnelled packet is built inner
//! first, then wrapped (GRE header written here) and given to `PacketBuilder` as the payload of
//! the outer IP header.

use crate::gre::{self, GreOptions};
use crate::parse::{Start, TunnelKind, ETH_P_IP, ETH_P_IPV6, ETH_P_TEB};
use crate::proto;
use etherparse::{
    DoubleVlanHeader, IpHeaders, IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Extensions, Ipv4Header, Ipv4Options,
    Ipv6Extensions, Ipv6FlowLabel, Ipv6Header, Ipv6RawExtHeader, PacketBuilder, PacketBuilderStep,
    SingleVlanHeader, VlanHeader, VlanId, VlanPcp,
};
use std::net::IpAddr;

/// Transport of a built frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L4 {
    /// TCP (a bare header: no flags, window 65535).
    Tcp,
    /// UDP.
    Udp,
    /// ICMP echo request (id = `src_port`, sequence = `dst_port`; parsed ports are 0).
    Icmp,
    /// ICMPv6 echo request (id = `src_port`, sequence = `dst_port`; parsed ports are 0).
    Icmpv6,
    /// Any other IP protocol: the payload follows the IP header directly.
    Other(u8),
}

/// VLAN tags of a built frame (TCI = PCP(3) | DEI(1) | VID(12)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VlanTags {
    /// One 802.1Q tag.
    Single(u16),
    /// QinQ: an 802.1ad service tag, then an 802.1Q customer tag.
    Double {
        /// TCI of the outer (service) tag.
        outer: u16,
        /// TCI of the inner (customer) tag.
        inner: u16,
    },
}

/// The encapsulation of a tunnelled frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// Encapsulation; its address families must match `src`/`dst` and the inner addresses.
    pub kind: TunnelKind,
    /// Outer source address.
    pub src: IpAddr,
    /// Outer destination address.
    pub dst: IpAddr,
    /// GRE header options (ignored for the other kinds).
    pub gre: GreOptions,
}

/// Everything that defines a built frame. The outer header of a tunnel copies `dsfield`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// VLAN tags, if any.
    pub vlan: Option<VlanTags>,
    /// (Inner) source address.
    pub src: IpAddr,
    /// (Inner) destination address.
    pub dst: IpAddr,
    /// Transport.
    pub proto: L4,
    /// Source port (ICMP echo id).
    pub src_port: u16,
    /// Destination port (ICMP echo sequence).
    pub dst_port: u16,
    /// TOS / traffic-class byte.
    pub dsfield: u8,
    /// Bytes after the transport header.
    pub payload_len: usize,
    /// TTL / hop limit.
    pub ttl: u8,
    /// Add IPv4 options (4 bytes: NOPs and end of list) or IPv6 hop-by-hop and destination
    /// options headers to the innermost IP header, to exercise option and extension parsing.
    pub ip_options: bool,
    /// Tunnel encapsulation, if any.
    pub tunnel: Option<Tunnel>,
}

/// Why a frame could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Addresses or protocol of different IP versions were combined.
    #[error("address family mismatch: {0}")]
    Family(&'static str),
    /// The packet does not fit an IP length field.
    #[error("packet too long: {0}")]
    TooLong(String),
}

impl FrameSpec {
    /// A UDP frame with no VLAN, no tunnel, locally administered MACs and TTL 64.
    pub fn udp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, payload_len: usize) -> FrameSpec {
        FrameSpec {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x02, 0, 0, 0, 0, 2],
            vlan: None,
            src,
            dst,
            proto: L4::Udp,
            src_port,
            dst_port,
            dsfield: 0,
            payload_len,
            ttl: 64,
            ip_options: false,
            tunnel: None,
        }
    }

    /// Builds the Ethernet frame.
    pub fn build(&self) -> Result<Vec<u8>, BuildError> {
        let mut out = Vec::with_capacity(self.payload_len + 128);
        self.write_into(&mut out, Start::Ethernet)?;
        Ok(out)
    }

    /// Builds the packet from the IP header on (for TUN / raw IP); MACs and VLAN are unused.
    pub fn build_ip(&self) -> Result<Vec<u8>, BuildError> {
        let mut out = Vec::with_capacity(self.payload_len + 128);
        self.write_into(&mut out, Start::Ip)?;
        Ok(out)
    }

    /// Appends the frame to `out` (which the load generator reuses between frames).
    pub fn write_into(&self, out: &mut Vec<u8>, start: Start) -> Result<(), BuildError> {
        if self.src.is_ipv4() != self.dst.is_ipv4() {
            return Err(BuildError::Family("source and destination differ"));
        }
        match (self.proto, self.src) {
            (L4::Icmp, IpAddr::V6(_)) => return Err(BuildError::Family("ICMP over IPv6")),
            (L4::Icmpv6, IpAddr::V4(_)) => return Err(BuildError::Family("ICMPv6 over IPv4")),
            _ => {}
        }
        let payload: Vec<u8> = (0..self.payload_len).map(|i| i as u8).collect();
        let inner_header = ip_headers(self.src, self.dst, self.dsfield, self.ttl, self.ip_options)?;
        let Some(t) = self.tunnel else {
            let step = self.l2_and_ip(start, inner_header);
            return write_transport(step, self, out, &payload);
        };

        if t.src.is_ipv4() != t.dst.is_ipv4() {
            return Err(BuildError::Family("tunnel source and destination differ"));
        }
        let (outer_v4, inner_v4) = (t.src.is_ipv4(), self.src.is_ipv4());
        let ok = match t.kind {
            TunnelKind::Ipip => outer_v4 && inner_v4,
            TunnelKind::Sit6in4 => outer_v4 && !inner_v4,
            TunnelKind::Ip4in6 => !outer_v4 && inner_v4,
            TunnelKind::Ip6in6 => !outer_v4 && !inner_v4,
            TunnelKind::Gre => true,
        };
        if !ok {
            return Err(BuildError::Family("tunnel kind does not match the addresses"));
        }

        let mut inner = Vec::with_capacity(self.payload_len + 64);
        let gre_ethernet = t.kind == TunnelKind::Gre && t.gre.ethernet;
        let inner_step = if gre_ethernet {
            PacketBuilder::ethernet2(self.src_mac, self.dst_mac).ip(inner_header)
        } else {
            PacketBuilder::ip(inner_header)
        };
        write_transport(inner_step, self, &mut inner, &payload)?;

        let (outer_proto, tunnel_payload) = match t.kind {
            TunnelKind::Ipip | TunnelKind::Ip4in6 => (proto::IPIP, inner),
            TunnelKind::Sit6in4 | TunnelKind::Ip6in6 => (proto::IPV6, inner),
            TunnelKind::Gre => {
                let ethertype = match (gre_ethernet, inner_v4) {
                    (true, _) => ETH_P_TEB,
                    (false, true) => ETH_P_IP,
                    (false, false) => ETH_P_IPV6,
                };
                let mut g = Vec::with_capacity(inner.len() + 16);
                gre::write(&mut g, &t.gre, ethertype, &inner);
                (proto::GRE, g)
            }
        };
        let outer_header = ip_headers(t.src, t.dst, self.dsfield, self.ttl, false)?;
        self.l2_and_ip(start, outer_header)
            .write(out, IpNumber(outer_proto), &tunnel_payload)
            .map_err(|e| BuildError::TooLong(e.to_string()))
    }

    fn l2_and_ip(&self, start: Start, ip: IpHeaders) -> PacketBuilderStep<IpHeaders> {
        match (start, self.vlan) {
            (Start::Ip, _) => PacketBuilder::ip(ip),
            (Start::Ethernet, None) => PacketBuilder::ethernet2(self.src_mac, self.dst_mac).ip(ip),
            (Start::Ethernet, Some(v)) => {
                PacketBuilder::ethernet2(self.src_mac, self.dst_mac).vlan(vlan_header(v)).ip(ip)
            }
        }
    }
}

fn vlan_tag(tci: u16) -> SingleVlanHeader {
    SingleVlanHeader {
        pcp: VlanPcp::try_new((tci >> 13) as u8).unwrap_or(VlanPcp::ZERO),
        drop_eligible_indicator: tci & 0x1000 != 0,
        vlan_id: VlanId::try_new(tci & 0x0FFF).unwrap_or(VlanId::ZERO),
        // PacketBuilder fills in the EtherTypes.
        ether_type: etherparse::EtherType(0),
    }
}

fn vlan_header(v: VlanTags) -> VlanHeader {
    match v {
        VlanTags::Single(tci) => VlanHeader::Single(vlan_tag(tci)),
        VlanTags::Double { outer, inner } => {
            VlanHeader::Double(DoubleVlanHeader { outer: vlan_tag(outer), inner: vlan_tag(inner) })
        }
    }
}

fn ip_headers(
    src: IpAddr,
    dst: IpAddr,
    dsfield: u8,
    ttl: u8,
    options: bool,
) -> Result<IpHeaders, BuildError> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(0, ttl, IpNumber(0), s.octets(), d.octets())
                .map_err(|e| BuildError::TooLong(e.to_string()))?;
            h.dscp = Ipv4Dscp::try_new(dsfield >> 2).unwrap_or(Ipv4Dscp::ZERO);
            h.ecn = Ipv4Ecn::try_new(dsfield & 3).unwrap_or(Ipv4Ecn::ZERO);
            if options {
                // NOP, NOP, NOP, End of option list.
                h.options = Ipv4Options::try_from(&[1u8, 1, 1, 0][..])
                    .map_err(|_| BuildError::TooLong("IPv4 options".into()))?;
            }
            Ok(IpHeaders::Ipv4(h, Ipv4Extensions::default()))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let h = Ipv6Header {
                traffic_class: dsfield,
                flow_label: Ipv6FlowLabel::ZERO,
                payload_length: 0,
                next_header: IpNumber(0),
                hop_limit: ttl,
                source: s.octets(),
                destination: d.octets(),
            };
            let mut exts = Ipv6Extensions::default();
            if options {
                // PadN options filling each header to 8 bytes; next headers are set on write.
                let pad = [1u8, 4, 0, 0, 0, 0];
                let raw = |_| {
                    Ipv6RawExtHeader::new_raw(IpNumber(0), &pad)
                        .map_err(|e| BuildError::TooLong(e.to_string()))
                };
                exts.hop_by_hop_options = Some(raw(())?);
                exts.destination_options = Some(raw(())?);
            }
            Ok(IpHeaders::Ipv6(h, exts))
        }
        _ => Err(BuildError::Family("source and destination differ")),
    }
}

fn write_transport(
    step: PacketBuilderStep<IpHeaders>,
    spec: &FrameSpec,
    out: &mut Vec<u8>,
    payload: &[u8],
) -> Result<(), BuildError> {
    let (sp, dp) = (spec.src_port, spec.dst_port);
    let r = match spec.proto {
        L4::Tcp => step.tcp(sp, dp, 0, 65535).write(out, payload),
        L4::Udp => step.udp(sp, dp).write(out, payload),
        L4::Icmp => step.icmpv4_echo_request(sp, dp).write(out, payload),
        L4::Icmpv6 => step.icmpv6_echo_request(sp, dp).write(out, payload),
        L4::Other(p) => step.write(out, IpNumber(p), payload),
    };
    r.map_err(|e| BuildError::TooLong(e.to_string()))
}
