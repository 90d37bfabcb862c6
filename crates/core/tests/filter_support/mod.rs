//! Hand-built frames and their flow keys for the filter tests (no parser dependency).
#![allow(dead_code)]

use sluice_core::flow_keys::{FlowKeys, HeaderKeys};
use sluice_core::Packet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A transport header to put in a frame.
#[derive(Clone, Copy, Debug)]
pub enum L4 {
    Tcp(u16, u16),
    Udp(u16, u16),
    Icmp(u8, u8),
    /// Any protocol number with no parsed ports, with this many payload bytes.
    Raw(u8, usize),
}

impl L4 {
    fn proto(self) -> u8 {
        match self {
            L4::Tcp(..) => 6,
            L4::Udp(..) => 17,
            L4::Icmp(..) => 1,
            L4::Raw(p, _) => p,
        }
    }
    fn ports(self) -> (u16, u16) {
        match self {
            L4::Tcp(s, d) | L4::Udp(s, d) => (s, d),
            _ => (0, 0),
        }
    }
    fn bytes(self) -> Vec<u8> {
        match self {
            L4::Tcp(s, d) => {
                let mut b = vec![0u8; 20];
                b[0..2].copy_from_slice(&s.to_be_bytes());
                b[2..4].copy_from_slice(&d.to_be_bytes());
                b[12] = 5 << 4;
                b
            }
            L4::Udp(s, d) => {
                let mut b = vec![0u8; 8];
                b[0..2].copy_from_slice(&s.to_be_bytes());
                b[2..4].copy_from_slice(&d.to_be_bytes());
                b[4..6].copy_from_slice(&8u16.to_be_bytes());
                b
            }
            L4::Icmp(t, c) => vec![t, c, 0, 0, 0, 1, 0, 1],
            L4::Raw(_, n) => vec![0xAB; n],
        }
    }
}

/// A frame with its keys and descriptor.
#[derive(Clone, Debug)]
pub struct Built {
    pub frame: Vec<u8>,
    pub keys: FlowKeys,
    pub pkt: Packet,
}

fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    tos: u8,
    options: usize,
    payload_len: usize,
) -> Vec<u8> {
    let ihl = 5 + options / 4;
    let mut h = vec![0u8; ihl * 4];
    h[0] = 0x40 | ihl as u8;
    h[1] = tos;
    h[2..4].copy_from_slice(&((ihl * 4 + payload_len) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    for b in h.iter_mut().skip(20) {
        *b = 1; // NOP options
    }
    h
}

fn ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, next: u8, tclass: u8, payload_len: usize) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    let w = (6u32 << 28) | ((tclass as u32) << 20) | 0x12345;
    h[0..4].copy_from_slice(&w.to_be_bytes());
    h[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
    h[6] = next;
    h[7] = 64;
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
    h
}

fn ethernet(ethertype: u16, vlan: Option<u16>) -> Vec<u8> {
    let mut e = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
    if let Some(tci) = vlan {
        e.extend_from_slice(&0x8100u16.to_be_bytes());
        e.extend_from_slice(&tci.to_be_bytes());
    }
    e.extend_from_slice(&ethertype.to_be_bytes());
    e
}

fn finish(frame: Vec<u8>, keys: FlowKeys, dsfield: u8) -> Built {
    let mut pkt = Packet::new(frame.len() as u32, 0);
    pkt.dsfield = dsfield;
    Built { frame, keys, pkt }
}

/// Ethernet + IPv4 (with `options` bytes of IP options) + transport.
pub fn v4_opts(src: [u8; 4], dst: [u8; 4], l4: L4, tos: u8, options: usize, vlan: Option<u16>) -> Built {
    let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
    let l4b = l4.bytes();
    let mut frame = ethernet(0x0800, vlan);
    let net = frame.len();
    frame.extend(ipv4_header(src, dst, l4.proto(), tos, options, l4b.len()));
    let tr = frame.len();
    frame.extend(l4b);
    let (sp, dp) = l4.ports();
    let keys = FlowKeys {
        ethertype: 0x0800,
        vlan_tci: vlan,
        outer: Some(HeaderKeys {
            src: IpAddr::V4(src),
            dst: IpAddr::V4(dst),
            proto: l4.proto(),
            src_port: sp,
            dst_port: dp,
            dsfield: tos,
        }),
        inner: None,
        network_offset: net as u16,
        transport_offset: Some(tr as u16),
        iif: 0,
    };
    finish(frame, keys, tos)
}

/// Ethernet + IPv4 + transport.
pub fn v4(src: [u8; 4], dst: [u8; 4], l4: L4) -> Built {
    v4_opts(src, dst, l4, 0, 0, None)
}

/// Ethernet + IPv6 + transport.
pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, l4: L4, tclass: u8) -> Built {
    let l4b = l4.bytes();
    let mut frame = ethernet(0x86DD, None);
    let net = frame.len();
    frame.extend(ipv6_header(src, dst, l4.proto(), tclass, l4b.len()));
    let tr = frame.len();
    frame.extend(l4b);
    let (sp, dp) = l4.ports();
    let keys = FlowKeys {
        ethertype: 0x86DD,
        vlan_tci: None,
        outer: Some(HeaderKeys {
            src: IpAddr::V6(src),
            dst: IpAddr::V6(dst),
            proto: l4.proto(),
            src_port: sp,
            dst_port: dp,
            dsfield: tclass,
        }),
        inner: None,
        network_offset: net as u16,
        transport_offset: Some(tr as u16),
        iif: 0,
    };
    finish(frame, keys, tclass)
}

/// Ethernet + IPv4 (proto 4) + IPv4 + transport: an IPIP tunnel packet.
pub fn ipip(
    outer_src: [u8; 4],
    outer_dst: [u8; 4],
    inner_src: [u8; 4],
    inner_dst: [u8; 4],
    l4: L4,
    inner_tos: u8,
) -> Built {
    let inner = v4_opts(inner_src, inner_dst, l4, inner_tos, 0, None);
    let inner_ip = &inner.frame[14..];
    let (os, od) = (Ipv4Addr::from(outer_src), Ipv4Addr::from(outer_dst));
    let mut frame = ethernet(0x0800, None);
    frame.extend(ipv4_header(os, od, 4, inner_tos, 0, inner_ip.len()));
    frame.extend_from_slice(inner_ip);
    let keys = FlowKeys {
        ethertype: 0x0800,
        vlan_tci: None,
        outer: Some(HeaderKeys {
            src: IpAddr::V4(os),
            dst: IpAddr::V4(od),
            proto: 4,
            src_port: 0,
            dst_port: 0,
            dsfield: inner_tos,
        }),
        inner: inner.keys.outer,
        network_offset: 14,
        transport_offset: Some(34),
        iif: 0,
    };
    finish(frame, keys, inner_tos)
}
