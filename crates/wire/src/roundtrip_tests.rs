//! Build → parse → same keys, for every tunnel kind, VLAN layout and transport; plus the edge
//! cases of the parser (fragments, non-IP, truncation, raw IP).

use crate::*;
use proptest::prelude::*;
use sluice_core::{FlowKeys, HeaderKeys, Packet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, last))
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

fn proto_number(l4: L4) -> u8 {
    match l4 {
        L4::Tcp => 6,
        L4::Udp => 17,
        L4::Icmp => 1,
        L4::Icmpv6 => 58,
        L4::Other(p) => p,
    }
}

/// The keys the parser must report for a spec, derived from the spec alone.
fn expected(spec: &FrameSpec) -> (Option<HeaderKeys>, Option<HeaderKeys>) {
    let has_ports = matches!(spec.proto, L4::Tcp | L4::Udp);
    let inner = HeaderKeys {
        src: spec.src,
        dst: spec.dst,
        proto: proto_number(spec.proto),
        src_port: if has_ports { spec.src_port } else { 0 },
        dst_port: if has_ports { spec.dst_port } else { 0 },
        dsfield: spec.dsfield,
    };
    match spec.tunnel {
        None => (Some(inner), None),
        Some(t) => {
            let proto = match t.kind {
                TunnelKind::Ipip | TunnelKind::Ip4in6 => 4,
                TunnelKind::Sit6in4 | TunnelKind::Ip6in6 => 41,
                TunnelKind::Gre => 47,
            };
            let outer =
                HeaderKeys { src: t.src, dst: t.dst, proto, src_port: 0, dst_port: 0, dsfield: spec.dsfield };
            (Some(outer), Some(inner))
        }
    }
}

fn check_roundtrip(spec: &FrameSpec) {
    let frame = spec.build().unwrap();
    let p = parse_frame(&frame, ParseOptions::default()).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
    let (outer, inner) = expected(spec);
    assert_eq!(p.keys.outer, outer, "{spec:?}");
    assert_eq!(p.keys.inner, inner, "{spec:?}");
    assert_eq!(p.tunnel, spec.tunnel.map(|t| t.kind));
    assert_eq!(p.len as usize, frame.len());
    assert_eq!(p.dsfield, spec.dsfield);
    let ip_version_first = if outer.unwrap().src.is_ipv4() { ETH_P_IP } else { ETH_P_IPV6 };
    assert_eq!(p.keys.ethertype, ip_version_first);
    let tags = match spec.vlan {
        None => 0,
        Some(VlanTags::Single(_)) => 1,
        Some(VlanTags::Double { .. }) => 2,
    };
    assert_eq!(usize::from(p.keys.network_offset), 14 + 4 * tags);
    assert_eq!(
        p.keys.vlan_tci,
        spec.vlan.map(|v| match v {
            VlanTags::Single(t) => t,
            VlanTags::Double { outer, .. } => outer,
        })
    );
    let innermost = inner.or(outer).unwrap();
    assert_eq!(p.flow_hash, flow_hash(&innermost, 0));
    assert_eq!(p.src_host_hash, host_hash(&spec.src, 0));
    assert_eq!(p.dst_host_hash, host_hash(&spec.dst, 0));

    // The same packet from the IP header on parses to the same keys.
    let ip = spec.build_ip().unwrap();
    let q = parse_frame(&ip, ParseOptions::raw_ip()).unwrap();
    assert_eq!((q.keys.outer, q.keys.inner), (outer, inner));
    assert_eq!(q.keys.network_offset, 0);
    assert_eq!(q.flow_hash, p.flow_hash);
    assert_eq!(
        usize::from(p.keys.transport_offset.unwrap()) - usize::from(p.keys.network_offset),
        usize::from(q.keys.transport_offset.unwrap())
    );
}

fn tunnel(kind: TunnelKind, gre: GreOptions) -> Tunnel {
    let (src, dst) = match kind {
        TunnelKind::Ipip | TunnelKind::Sit6in4 => (v4(101), v4(102)),
        TunnelKind::Ip4in6 | TunnelKind::Ip6in6 => (v6(101), v6(102)),
        TunnelKind::Gre => (v4(201), v4(202)),
    };
    Tunnel { kind, src, dst, gre }
}

/// Every tunnel kind × inner family × transport × VLAN layout.
fn all_specs() -> Vec<FrameSpec> {
    let mut out = Vec::new();
    let gres = [
        GreOptions::default(),
        GreOptions { checksum: true, key: Some(0xC0FFEE), seq: Some(7), ethernet: false },
        GreOptions { key: Some(1), ethernet: true, ..GreOptions::default() },
    ];
    let mut tunnels: Vec<Option<Tunnel>> = vec![None];
    for kind in [TunnelKind::Ipip, TunnelKind::Sit6in4, TunnelKind::Ip4in6, TunnelKind::Ip6in6] {
        tunnels.push(Some(tunnel(kind, GreOptions::default())));
    }
    for g in gres {
        tunnels.push(Some(tunnel(TunnelKind::Gre, g)));
        // GRE over IPv6 too.
        tunnels.push(Some(Tunnel { src: v6(201), dst: v6(202), ..tunnel(TunnelKind::Gre, g) }));
    }
    for t in tunnels {
        for inner_v4 in [true, false] {
            let fits = match t.map(|t| t.kind) {
                Some(TunnelKind::Ipip | TunnelKind::Ip4in6) => inner_v4,
                Some(TunnelKind::Sit6in4 | TunnelKind::Ip6in6) => !inner_v4,
                _ => true,
            };
            if !fits {
                continue;
            }
            let l4s = if inner_v4 {
                [L4::Tcp, L4::Udp, L4::Icmp, L4::Other(132)]
            } else {
                [L4::Tcp, L4::Udp, L4::Icmpv6, L4::Other(253)]
            };
            for l4 in l4s {
                for vlan in [
                    None,
                    Some(VlanTags::Single(0x2005)),
                    Some(VlanTags::Double { outer: 0x0064, inner: 0xE00A }),
                ] {
                    for ip_options in [false, true] {
                        let (src, dst) = if inner_v4 { (v4(1), v4(2)) } else { (v6(1), v6(2)) };
                        let mut s = FrameSpec::udp(src, dst, 40_000, 443, 33);
                        s.proto = l4;
                        s.vlan = vlan;
                        s.tunnel = t;
                        s.dsfield = 0xB9; // EF + ECT(1)
                        s.ip_options = ip_options;
                        if l4 == L4::Other(132) {
                            // SCTP: ports are the first four payload bytes (0x0001, 0x0203).
                            s.payload_len = 12;
                        }
                        out.push(s);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_kind_roundtrips() {
    let specs = all_specs();
    assert!(specs.len() > 200, "{}", specs.len());
    for s in &specs {
        if s.proto == L4::Other(132) {
            // SCTP ports come from the payload pattern, not the spec.
            let frame = s.build().unwrap();
            let p = parse_frame(&frame, ParseOptions::default()).unwrap();
            let k = p.keys.innermost().unwrap();
            assert_eq!((k.src_port, k.dst_port), (0x0001, 0x0203));
            continue;
        }
        check_roundtrip(s);
    }
}

#[test]
fn ipip_tunnel_keys_separate_icmp_from_bulk_flow() {
    // Seed 003: inside one IPIP tunnel an scp upload and pings share the outer 5-tuple; only the
    // inner keys tell them apart.
    let t = Some(tunnel(TunnelKind::Ipip, GreOptions::default()));
    let mut bulk = FrameSpec::udp(v4(10), v4(20), 50_000, 22, 1400);
    bulk.proto = L4::Tcp;
    bulk.tunnel = t;
    let mut ping = FrameSpec::udp(v4(10), v4(30), 1, 1, 56);
    ping.proto = L4::Icmp;
    ping.tunnel = t;
    let pb = parse_frame(&bulk.build().unwrap(), ParseOptions::default()).unwrap();
    let pp = parse_frame(&ping.build().unwrap(), ParseOptions::default()).unwrap();
    assert_eq!(pb.keys.outer, pp.keys.outer);
    assert_ne!(pb.keys.inner, pp.keys.inner);
    assert_ne!(pb.flow_hash, pp.flow_hash);
    // proto-src/dst of ICMP are 0 (seed 003's second bug), not anything derived from routing.
    assert_eq!(pp.keys.inner.unwrap().src_port, 0);
    assert_eq!(pp.keys.outer.unwrap().dst_port, 0);
}

#[test]
fn fill_packet_copies_metadata() {
    let mut s = FrameSpec::udp(v4(1), v4(2), 1, 2, 100);
    s.dsfield = 0x02;
    let p =
        parse_frame(&s.build().unwrap(), ParseOptions { hash_seed: 99, ..ParseOptions::default() }).unwrap();
    let mut pkt = Packet::new(0, 5);
    fill_packet(&p, &mut pkt);
    assert_eq!(pkt.len, 14 + 20 + 8 + 100);
    assert_eq!(pkt.dsfield, 0x02);
    assert_eq!(pkt.flow_hash, flow_hash(p.keys.outer.as_ref().unwrap(), 99));
    assert_ne!(pkt.flow_hash, flow_hash(p.keys.outer.as_ref().unwrap(), 0));
    assert_eq!(p.to_packet(5), pkt);
}

#[test]
fn non_ip_is_not_an_error() {
    // ARP request, padded to the Ethernet minimum.
    let mut arp = vec![0xFF; 6];
    arp.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(60, 0);
    let mut stats = ParseStats::default();
    let r = parse_frame(&arp, ParseOptions::default());
    stats.record(&r);
    let p = r.unwrap();
    assert_eq!(p.keys.ethertype, 0x0806);
    assert_eq!(p.keys.outer, None);
    assert_eq!(p.len, 60);
    assert_eq!(stats.non_ip, 1);
    assert_eq!(stats.total_errors(), 0);
}

/// Sets IPv4 fragment fields at `off` and refreshes the header checksum.
fn set_v4_fragment(frame: &mut [u8], off: usize, offset_units: u16, more: bool) {
    let v = (offset_units & 0x1FFF) | if more { 0x2000 } else { 0 };
    frame[off + 6..off + 8].copy_from_slice(&v.to_be_bytes());
    frame[off + 10..off + 12].copy_from_slice(&[0, 0]);
    let ihl = usize::from(frame[off] & 0x0F) * 4;
    let c = internet_checksum(&frame[off..off + ihl]);
    frame[off + 10..off + 12].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn only_the_first_ipv4_fragment_has_ports() {
    let s = FrameSpec::udp(v4(1), v4(2), 1234, 53, 100);
    let mut f = s.build().unwrap();
    set_v4_fragment(&mut f, 14, 0, true);
    let p = parse_frame(&f, ParseOptions::default()).unwrap();
    assert_eq!(p.fragment, Fragment::First);
    assert_eq!(p.keys.outer.unwrap().dst_port, 53);
    set_v4_fragment(&mut f, 14, 3, false);
    let p = parse_frame(&f, ParseOptions::default()).unwrap();
    assert_eq!(p.fragment, Fragment::Later);
    let k = p.keys.outer.unwrap();
    assert_eq!((k.proto, k.src_port, k.dst_port), (17, 0, 0));
    // A later fragment of a tunnel is not decoded as a tunnel.
    let mut t = s;
    t.tunnel = Some(tunnel(TunnelKind::Ipip, GreOptions::default()));
    let mut f = t.build().unwrap();
    set_v4_fragment(&mut f, 14, 0, true);
    let p = parse_frame(&f, ParseOptions::default()).unwrap();
    assert_eq!((p.keys.inner, p.tunnel), (None, None));
}

/// An IPv6 UDP packet with a fragment header (offset in 8-byte units).
fn v6_fragment(offset_units: u16, more: bool) -> Vec<u8> {
    let mut udp =
        etherparse::UdpHeader { source_port: 5000, destination_port: 4789, length: 16, checksum: 0 }
            .to_bytes()
            .to_vec();
    udp.extend_from_slice(&[0; 8]);
    let frag = etherparse::Ipv6FragmentHeader::new(
        etherparse::IpNumber::UDP,
        etherparse::IpFragOffset::try_new(offset_units).unwrap(),
        more,
        77,
    );
    let ip = etherparse::Ipv6Header {
        traffic_class: 0,
        flow_label: Default::default(),
        payload_length: (8 + udp.len()) as u16,
        next_header: etherparse::IpNumber::IPV6_FRAGMENTATION_HEADER,
        hop_limit: 64,
        source: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        destination: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    };
    let mut out = ip.to_bytes().to_vec();
    out.extend_from_slice(&frag.to_bytes());
    out.extend_from_slice(&udp);
    out
}

#[test]
fn only_the_first_ipv6_fragment_has_ports() {
    let p = parse_frame(&v6_fragment(0, true), ParseOptions::raw_ip()).unwrap();
    assert_eq!(p.fragment, Fragment::First);
    assert_eq!(p.keys.outer.unwrap().dst_port, 4789);
    assert_eq!(p.keys.transport_offset, Some(48));
    let p = parse_frame(&v6_fragment(10, false), ParseOptions::raw_ip()).unwrap();
    assert_eq!(p.fragment, Fragment::Later);
    assert_eq!(p.keys.outer.unwrap().dst_port, 0);
    // An atomic fragment is a whole datagram.
    let p = parse_frame(&v6_fragment(0, false), ParseOptions::raw_ip()).unwrap();
    assert_eq!(p.fragment, Fragment::None);
    assert_eq!(p.keys.outer.unwrap().src_port, 5000);
}

#[test]
fn ethernet_padding_is_not_payload() {
    // A 1-byte UDP payload frame padded to 60 bytes: the IP length, not the frame, bounds it.
    let s = FrameSpec::udp(v4(1), v4(2), 7, 9, 1);
    let mut f = s.build().unwrap();
    f.resize(60, 0xEE);
    let p = parse_frame(&f, ParseOptions::default()).unwrap();
    assert_eq!(p.len, 60);
    assert_eq!(p.keys.outer.unwrap().dst_port, 9);
}

#[test]
fn every_truncation_is_a_counted_error() {
    let mut stats = ParseStats::default();
    let mut n = 0;
    for s in all_specs() {
        let f = s.build().unwrap();
        for cut in 0..f.len() {
            let r = parse_frame(&f[..cut], ParseOptions::default());
            stats.record(&r);
            n += 1;
            let e = r.expect_err("a cut frame must not parse (IP length fields cover the end)");
            assert_eq!(e.kind, ErrorKind::Truncated, "{s:?} cut at {cut}: {e}");
            assert!(e.offset <= cut, "{e}");
        }
    }
    assert_eq!(stats.errors(ErrorKind::Truncated), n);
    assert_eq!(stats.total(), n);
}

#[test]
fn malformed_headers_have_their_own_kinds() {
    let s = FrameSpec::udp(v4(1), v4(2), 7, 9, 20);
    let good = s.build().unwrap();
    let parse = |f: &[u8]| parse_frame(f, ParseOptions::default()).unwrap_err();

    let mut f = good.clone();
    f[14] = 0x65; // version 6 under EtherType IPv4
    assert_eq!(parse(&f).kind, ErrorKind::BadIpVersion);
    let mut f = good.clone();
    f[14] = 0x44; // IHL 4
    assert_eq!(parse(&f).kind, ErrorKind::BadIpv4Header);

    let mut t = s;
    t.proto = L4::Tcp;
    let mut f = t.build().unwrap();
    f[14 + 20 + 12] = 0x40; // TCP data offset 4
    let e = parse(&f);
    assert_eq!((e.kind, e.layer, e.offset), (ErrorKind::BadTcpHeader, Layer::Tcp, 34));

    // Hop-by-hop after a destination options header.
    let mut v = FrameSpec::udp(v6(1), v6(2), 7, 9, 20);
    v.ip_options = true;
    let mut f = v.build().unwrap();
    assert_eq!(f[14 + 6], 0, "hop-by-hop first");
    f[14 + 6] = 60; // IPv6 next header: destination options
    f[14 + 40] = 0; // its next header: hop-by-hop (not at the start)
    assert_eq!(parse(&f).kind, ErrorKind::BadIpv6Extension);

    // A broken inner header of a tunnel is an error flagged as tunnelled.
    let mut t = s;
    t.tunnel = Some(tunnel(TunnelKind::Ipip, GreOptions::default()));
    let mut f = t.build().unwrap();
    f[14 + 20] = 0x43;
    let e = parse(&f);
    assert!(e.tunnelled);
    assert_eq!(e.kind, ErrorKind::BadIpv4Header);

    assert_eq!(parse_frame(&[], ParseOptions::raw_ip()).unwrap_err().kind, ErrorKind::Truncated);
    assert_eq!(parse_frame(&[0x50; 40], ParseOptions::raw_ip()).unwrap_err().kind, ErrorKind::BadIpVersion);
}

#[test]
fn opaque_gre_keeps_outer_keys_only() {
    let mut s = FrameSpec::udp(v4(1), v4(2), 7, 9, 20);
    s.tunnel = Some(tunnel(TunnelKind::Gre, GreOptions::default()));
    let mut f = s.build().unwrap();
    f[14 + 20 + 1] = 1; // GRE version 1 (PPTP)
    let p = parse_frame(&f, ParseOptions::default()).unwrap();
    assert_eq!(p.keys.outer.unwrap().proto, 47);
    assert_eq!((p.keys.inner, p.tunnel), (None, None));
}

#[test]
fn apply_dsfield_marks_the_outer_header_of_a_real_frame() {
    for t in [None, Some(tunnel(TunnelKind::Gre, GreOptions::default()))] {
        for (src, dst) in [(v4(1), v4(2)), (v6(1), v6(2))] {
            let mut s = FrameSpec::udp(src, dst, 1, 2, 30);
            s.vlan = Some(VlanTags::Single(5));
            s.dsfield = 0x29; // AF11 + ECT(1)
            s.tunnel = t;
            let mut f = s.build().unwrap();
            let keys: FlowKeys = parse_frame(&f, ParseOptions::default()).unwrap().keys;
            let mut pkt = Packet::new(f.len() as u32, 0);
            pkt.dsfield = s.dsfield;
            assert!(pkt.set_ce());
            assert_eq!(apply_dsfield(&mut f, &keys, pkt.dsfield), Ok(true));
            assert_eq!(apply_dsfield(&mut f, &keys, pkt.dsfield), Ok(false));
            let after = parse_frame(&f, ParseOptions::default()).unwrap();
            assert_eq!(after.dsfield, 0x2B);
            let off = usize::from(keys.network_offset);
            if f[off] >> 4 == 4 {
                let ihl = usize::from(f[off] & 0x0F) * 4;
                assert_eq!(internet_checksum(&f[off..off + ihl]), 0, "checksum still valid");
            }
            assert_eq!(mark_ce(&mut f, off), Ok(MarkOutcome::AlreadyCe));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_specs_roundtrip(
        sport in any::<u16>(), dport in any::<u16>(), ds in any::<u8>(), len in 0usize..1500,
        which in 0usize..1000, seed in any::<u64>(),
    ) {
        let specs = all_specs();
        let mut s = specs[which % specs.len()];
        if s.proto == L4::Other(132) { s.proto = L4::Udp; }
        s.src_port = sport;
        s.dst_port = dport;
        s.dsfield = ds;
        s.payload_len = len;
        check_roundtrip(&s);
        let f = s.build().unwrap();
        let p = parse_frame(&f, ParseOptions { hash_seed: seed, ..ParseOptions::default() }).unwrap();
        prop_assert_eq!(p.flow_hash, flow_hash(p.keys.innermost().unwrap(), seed));
    }
}

#[test]
fn tcp_header_fields_reach_the_packet_for_the_ack_filter() {
    // A pure ACK with timestamps, built by etherparse, as CAKE's ACK filter reads it.
    let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
        .ipv4([198, 18, 0, 2], [198, 18, 1, 1], 64)
        .tcp(40000, 443, 7, 1000)
        .ack(123_456)
        .options(&[etherparse::TcpOptionElement::Timestamp(11, 22)])
        .unwrap();
    let mut frame = Vec::new();
    b.write(&mut frame, &[]).unwrap();
    let p = parse_frame(&frame, ParseOptions::default()).unwrap().to_packet(0);
    let t = p.tcp.expect("TCP parsed");
    assert_eq!((t.sport, t.dport, t.ack, t.payload_len, t.ip_version), (40000, 443, 123_456, 0, 4));
    assert!(t.has_ts && t.tsval == 11 && t.tsecr == 22 && t.may_drop(11, 22));
    // UDP has none.
    let u = FrameSpec::udp(v4(1), v4(2), 1, 2, 10).build().unwrap();
    assert!(parse_frame(&u, ParseOptions::default()).unwrap().tcp.is_none());
}
