//! Frame → [`FlowKeys`] and packet metadata.
//!
//! Layering: Ethernet II and up to two VLAN tags (802.1Q, 802.1ad/QinQ), then IPv4 (options, AH)
//! or IPv6 (extension headers), then the transport ports. If the outer IP header carries IPIP,
//! 6in4, 4in6, 6in6 or GRE, the inner IP header and its ports are parsed too (one level: a tunnel
//! inside the tunnel is reported as the inner protocol, with ports 0).
//!
//! Header validation is etherparse's (strict: an IP header's length field must fit the frame).
//! A frame without IP is not an error; it yields keys with `outer: None`.

use crate::error::{ErrorKind, Layer, ParseError};
use crate::gre;
use crate::hash;
use etherparse::err::{ipv4 as e4, ipv6 as e6, ipv6_exts as e6x, tcp as etcp, LenError};
use etherparse::{
    Ethernet2Slice, Icmpv6Slice, Ipv4Slice, Ipv6ExtensionSlice, Ipv6Slice, SingleVlanSlice, TcpHeaderSlice,
    UdpHeaderSlice,
};
use sluice_core::{FlowKeys, HeaderKeys, Packet, TcpInfo};
use std::net::IpAddr;

/// EtherType of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETH_P_IPV6: u16 = 0x86DD;
/// EtherType of an 802.1Q tag.
pub const ETH_P_8021Q: u16 = 0x8100;
/// EtherType of an 802.1ad (QinQ service) tag.
pub const ETH_P_8021AD: u16 = 0x88A8;
/// Pre-standard QinQ tag some switches still send.
pub const ETH_P_QINQ1: u16 = 0x9100;
/// EtherType of transparent Ethernet bridging (Ethernet inside GRE).
pub const ETH_P_TEB: u16 = 0x6558;

/// IP protocol numbers the parser acts on.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IPv4 in IP (IPIP, 4in6).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// IPv6 in IP (6in4 / SIT, 6in6).
    pub const IPV6: u8 = 41;
    /// GRE.
    pub const GRE: u8 = 47;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
}

/// Where the frame starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// At an Ethernet II header (AF_PACKET, TAP, pcap with DLT_EN10MB).
    #[default]
    Ethernet,
    /// At the IP header (TUN without packet info, raw IP); the version nibble decides v4/v6.
    Ip,
}

/// Options of [`parse_frame`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Where the frame starts.
    pub start: Start,
    /// Seed of [`Parsed::flow_hash`] and the host hashes (a qdisc may perturb it).
    pub hash_seed: u64,
    /// Input interface index copied into [`FlowKeys::iif`].
    pub iif: u32,
}

impl ParseOptions {
    /// Frames that start at the IP header.
    pub fn raw_ip() -> ParseOptions {
        ParseOptions { start: Start::Ip, ..ParseOptions::default() }
    }
}

/// The tunnel encapsulations the parser looks through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// IPv4 in IPv4 (protocol 4).
    Ipip,
    /// IPv6 in IPv4 (protocol 41, "SIT").
    Sit6in4,
    /// IPv4 in IPv6 (next header 4).
    Ip4in6,
    /// IPv6 in IPv6 (next header 41).
    Ip6in6,
    /// GRE (protocol 47) over IPv4 or IPv6, carrying IPv4, IPv6 or Ethernet.
    Gre,
}

/// Fragmentation state of an IP header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fragment {
    /// A whole datagram.
    #[default]
    None,
    /// The first fragment (offset 0, more fragments): it has the transport ports.
    First,
    /// A later fragment: no transport header, so ports are 0.
    Later,
}

/// The result of parsing one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Flow keys for classifiers (outer and, for tunnels, inner headers).
    pub keys: FlowKeys,
    /// Frame length in bytes (layer 2 for Ethernet frames, layer 3 for raw IP).
    pub len: u32,
    /// TOS / traffic-class byte of the outer IP header (0 without IP).
    pub dsfield: u8,
    /// Keyed hash of the innermost 5-tuple (of the EtherType and VLAN without IP).
    pub flow_hash: u32,
    /// Keyed hash of the innermost source address (0 without IP).
    pub src_host_hash: u32,
    /// Keyed hash of the innermost destination address (0 without IP).
    pub dst_host_hash: u32,
    /// The tunnel that was decoded, if any.
    pub tunnel: Option<TunnelKind>,
    /// Offset of the inner IP header, if a tunnel was decoded.
    pub inner_network_offset: Option<u16>,
    /// Fragmentation of the outer IP header.
    pub fragment: Fragment,
    /// The outer TCP header's fields for CAKE's ACK filter (unfragmented TCP only).
    pub tcp: Option<TcpInfo>,
}

impl Parsed {
    /// Copies the parsed metadata into a packet descriptor (len, hashes, dsfield).
    pub fn fill_packet(&self, pkt: &mut Packet) {
        pkt.len = self.len;
        pkt.flow_hash = self.flow_hash;
        pkt.src_host_hash = self.src_host_hash;
        pkt.dst_host_hash = self.dst_host_hash;
        pkt.dsfield = self.dsfield;
        pkt.tcp = self.tcp;
    }

    /// A new packet descriptor for this frame with the given payload handle.
    pub fn to_packet(&self, payload: u64) -> Packet {
        let mut p = Packet::new(self.len, payload);
        self.fill_packet(&mut p);
        p
    }
}

/// Copies the parsed metadata into a packet descriptor (see [`Parsed::fill_packet`]).
pub fn fill_packet(parsed: &Parsed, pkt: &mut Packet) {
    parsed.fill_packet(pkt);
}

/// Parses one frame. Never panics; malformed input gives a [`ParseError`] (count it with
/// [`crate::ParseStats::record`]). A frame without IP gives keys with `outer: None`.
pub fn parse_frame(frame: &[u8], opts: ParseOptions) -> Result<Parsed, ParseError> {
    let (ethertype, vlan_tci, net_off) = match opts.start {
        Start::Ethernet => parse_l2(frame, 0)?,
        Start::Ip => match frame.first().map(|b| b >> 4) {
            Some(4) => (ETH_P_IP, None, 0),
            Some(6) => (ETH_P_IPV6, None, 0),
            Some(_) => return Err(ParseError::new(ErrorKind::BadIpVersion, Layer::Ipv4, 0)),
            None => return Err(ParseError::new(ErrorKind::Truncated, Layer::Ipv4, 0)),
        },
    };
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    let mut keys = FlowKeys {
        ethertype,
        vlan_tci,
        network_offset: offset16(net_off, Layer::Ethernet)?,
        iif: opts.iif,
        ..FlowKeys::default()
    };

    let Some(outer) = parse_ip(frame, net_off, ethertype)? else {
        return Ok(Parsed {
            keys,
            len,
            dsfield: 0,
            flow_hash: hash::l2_hash(ethertype, vlan_tci, opts.hash_seed),
            src_host_hash: 0,
            dst_host_hash: 0,
            tunnel: None,
            inner_network_offset: None,
            fragment: Fragment::None,
            tcp: None,
        });
    };
    keys.outer = Some(outer.keys);
    keys.transport_offset = Some(offset16(outer.payload_offset, outer.layer)?);

    let mut tunnel = None;
    let mut inner_network_offset = None;
    if outer.fragment == Fragment::None {
        if let Some((kind, inner_ethertype, inner_off)) = find_tunnel(frame, &outer)? {
            // The inner packet ends where the outer IP length says (not at Ethernet padding).
            let inner =
                parse_ip(&frame[..outer.payload_end], inner_off, inner_ethertype).map_err(|mut e| {
                    e.tunnelled = true;
                    e
                })?;
            if let Some(inner) = inner {
                keys.inner = Some(inner.keys);
                tunnel = Some(kind);
                inner_network_offset = Some(offset16(inner_off, Layer::Gre)?);
            }
        }
    }

    let innermost = keys.innermost().copied().unwrap_or(outer.keys);
    let tcp = (outer.keys.proto == 6 && outer.fragment == Fragment::None)
        .then(|| {
            let version = if outer.layer == Layer::Ipv4 { 4 } else { 6 };
            TcpInfo::parse(frame.get(outer.payload_offset..outer.payload_end)?, version)
        })
        .flatten();
    Ok(Parsed {
        keys,
        len,
        dsfield: outer.keys.dsfield,
        flow_hash: hash::flow_hash(&innermost, opts.hash_seed),
        src_host_hash: hash::host_hash(&innermost.src, opts.hash_seed),
        dst_host_hash: hash::host_hash(&innermost.dst, opts.hash_seed),
        tunnel,
        inner_network_offset,
        fragment: outer.fragment,
        tcp,
    })
}

fn offset16(off: usize, layer: Layer) -> Result<u16, ParseError> {
    u16::try_from(off).map_err(|_| ParseError::new(ErrorKind::OffsetOverflow, layer, off))
}

/// Ethernet II plus up to two VLAN tags. Returns (EtherType after the tags, outermost TCI,
/// offset of the network header).
pub(crate) fn parse_l2(frame: &[u8], base: usize) -> Result<(u16, Option<u16>, usize), ParseError> {
    let bytes = frame.get(base..).unwrap_or(&[]);
    let eth = Ethernet2Slice::from_slice_without_fcs(bytes)
        .map_err(|_| ParseError::new(ErrorKind::Truncated, Layer::Ethernet, base))?;
    let mut ethertype = eth.ether_type().0;
    let mut off = base + eth.header_slice().len();
    let mut vlan_tci = None;
    // Two tags cover 802.1Q and QinQ; a third tag is left as an unknown EtherType (not IP).
    for _ in 0..2 {
        if !matches!(ethertype, ETH_P_8021Q | ETH_P_8021AD | ETH_P_QINQ1) {
            break;
        }
        let tag = SingleVlanSlice::from_slice(&frame[off..])
            .map_err(|_| ParseError::new(ErrorKind::Truncated, Layer::Vlan, off))?;
        let h = tag.header_slice();
        vlan_tci.get_or_insert(u16::from_be_bytes([h[0], h[1]]));
        ethertype = tag.ether_type().0;
        off += h.len();
    }
    Ok((ethertype, vlan_tci, off))
}

/// One parsed IP header with its transport ports.
pub(crate) struct IpInfo {
    pub(crate) keys: HeaderKeys,
    /// Offset of the IP payload (after options and extension headers) in the frame.
    pub(crate) payload_offset: usize,
    /// End of the IP payload in the frame (the IP length field, not the frame length).
    pub(crate) payload_end: usize,
    pub(crate) fragment: Fragment,
    pub(crate) layer: Layer,
}

/// Parses the IP header at `off` if `ethertype` is IPv4 or IPv6; `Ok(None)` for other types.
pub(crate) fn parse_ip(frame: &[u8], off: usize, ethertype: u16) -> Result<Option<IpInfo>, ParseError> {
    let bytes = frame.get(off..).unwrap_or(&[]);
    let (src, dst, dsfield, proto, payload, fragment, layer) = match ethertype {
        ETH_P_IP => {
            let ip = Ipv4Slice::from_slice(bytes).map_err(|e| ipv4_error(e, off))?;
            let h = ip.header();
            let fragment = match (h.fragments_offset().value(), h.more_fragments()) {
                (0, false) => Fragment::None,
                (0, true) => Fragment::First,
                _ => Fragment::Later,
            };
            (
                IpAddr::V4(h.source_addr()),
                IpAddr::V4(h.destination_addr()),
                h.slice()[1],
                ip.payload_ip_number().0,
                ip.payload().payload,
                fragment,
                Layer::Ipv4,
            )
        }
        ETH_P_IPV6 => {
            let ip = Ipv6Slice::from_slice(bytes).map_err(|e| ipv6_error(e, off))?;
            let h = ip.header();
            let fragment = ip
                .extensions()
                .clone()
                .into_iter()
                .find_map(|ext| match ext {
                    Ipv6ExtensionSlice::Fragment(f) => Some(f),
                    _ => None,
                })
                .map_or(Fragment::None, |f| {
                    match (f.fragment_offset().value(), f.more_fragments()) {
                        // An atomic fragment (RFC 6946) is a whole datagram.
                        (0, false) => Fragment::None,
                        (0, true) => Fragment::First,
                        _ => Fragment::Later,
                    }
                });
            (
                IpAddr::V6(h.source_addr()),
                IpAddr::V6(h.destination_addr()),
                h.traffic_class(),
                ip.payload().ip_number.0,
                ip.payload().payload,
                fragment,
                Layer::Ipv6,
            )
        }
        _ => return Ok(None),
    };
    // etherparse hands back the payload as a sub-slice of `bytes`; its start is the header length.
    let header_len =
        (payload.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize).min(bytes.len() - payload.len());
    let payload_offset = off + header_len;
    let (src_port, dst_port) = ports(proto, payload, payload_offset, fragment)?;
    Ok(Some(IpInfo {
        keys: HeaderKeys { src, dst, proto, src_port, dst_port, dsfield },
        payload_offset,
        payload_end: payload_offset + payload.len(),
        fragment,
        layer,
    }))
}

fn len_error(e: &LenError, layer: Layer, off: usize) -> ParseError {
    ParseError::new(ErrorKind::Truncated, layer, off + e.layer_start_offset)
}

fn ipv4_error(e: e4::SliceError, off: usize) -> ParseError {
    match e {
        e4::SliceError::Len(l) => len_error(&l, Layer::Ipv4, off),
        e4::SliceError::Header(e4::HeaderError::UnexpectedVersion { .. }) => {
            ParseError::new(ErrorKind::BadIpVersion, Layer::Ipv4, off)
        }
        e4::SliceError::Header(_) => ParseError::new(ErrorKind::BadIpv4Header, Layer::Ipv4, off),
        e4::SliceError::Exts(_) => ParseError::new(ErrorKind::BadIpAuth, Layer::Ipv4, off),
    }
}

fn ipv6_error(e: e6::SliceError, off: usize) -> ParseError {
    match e {
        e6::SliceError::Len(l) => {
            let layer = if l.layer_start_offset > 0 { Layer::Ipv6Ext } else { Layer::Ipv6 };
            len_error(&l, layer, off)
        }
        e6::SliceError::Header(_) => ParseError::new(ErrorKind::BadIpVersion, Layer::Ipv6, off),
        e6::SliceError::Exts(e6x::HeaderError::HopByHopNotAtStart)
        | e6::SliceError::Exts(e6x::HeaderError::IpAuth(_)) => {
            ParseError::new(ErrorKind::BadIpv6Extension, Layer::Ipv6Ext, off)
        }
    }
}

/// Transport ports of the first fragment or a whole datagram; 0 for protocols without ports and
/// for later fragments (seed 003: never a value unrelated to the packet).
fn ports(proto: u8, payload: &[u8], off: usize, fragment: Fragment) -> Result<(u16, u16), ParseError> {
    if fragment == Fragment::Later {
        return Ok((0, 0));
    }
    match proto {
        proto::TCP => {
            let t = TcpHeaderSlice::from_slice(payload).map_err(|e| match e {
                etcp::HeaderSliceError::Len(_) => ParseError::new(ErrorKind::Truncated, Layer::Tcp, off),
                etcp::HeaderSliceError::Content(_) => {
                    ParseError::new(ErrorKind::BadTcpHeader, Layer::Tcp, off)
                }
            })?;
            Ok((t.source_port(), t.destination_port()))
        }
        proto::UDP => {
            let u = UdpHeaderSlice::from_slice(payload)
                .map_err(|_| ParseError::new(ErrorKind::Truncated, Layer::Udp, off))?;
            Ok((u.source_port(), u.destination_port()))
        }
        proto::SCTP | proto::DCCP | proto::UDPLITE => match payload {
            [a, b, c, d, ..] => Ok((u16::from_be_bytes([*a, *b]), u16::from_be_bytes([*c, *d]))),
            _ => Err(ParseError::new(ErrorKind::Truncated, Layer::Ports, off)),
        },
        proto::ICMP => {
            // etherparse's Icmpv4Slice also rejects timestamp messages of unusual length; only the
            // 8-byte header matters here.
            if payload.len() < 8 {
                return Err(ParseError::new(ErrorKind::Truncated, Layer::Icmp, off));
            }
            Ok((0, 0))
        }
        proto::ICMPV6 => {
            Icmpv6Slice::from_slice(payload)
                .map_err(|_| ParseError::new(ErrorKind::Truncated, Layer::Icmpv6, off))?;
            Ok((0, 0))
        }
        _ => Ok((0, 0)),
    }
}

/// If the outer header's payload is a tunnel the parser decodes, returns its kind, the inner
/// EtherType and the offset of the inner network header.
fn find_tunnel(frame: &[u8], outer: &IpInfo) -> Result<Option<(TunnelKind, u16, usize)>, ParseError> {
    let v4 = outer.layer == Layer::Ipv4;
    let off = outer.payload_offset;
    Ok(match outer.keys.proto {
        proto::IPIP => Some((if v4 { TunnelKind::Ipip } else { TunnelKind::Ip4in6 }, ETH_P_IP, off)),
        proto::IPV6 => Some((if v4 { TunnelKind::Sit6in4 } else { TunnelKind::Ip6in6 }, ETH_P_IPV6, off)),
        proto::GRE => {
            let gre_bytes = &frame[off..outer.payload_end];
            match gre::parse(gre_bytes, off)? {
                Some(g) if g.protocol == ETH_P_TEB => {
                    let start = off + g.header_len;
                    let (ethertype, _, net) =
                        parse_l2(&frame[..outer.payload_end], start).map_err(|mut e| {
                            e.tunnelled = true;
                            e
                        })?;
                    Some((TunnelKind::Gre, ethertype, net))
                }
                Some(g) => Some((TunnelKind::Gre, g.protocol, off + g.header_len)),
                None => None,
            }
        }
        _ => None,
    })
}
