//! u32 on real frame bytes: shorthand matches, hash tables with link/divisor/hashkey,
//! nexthdr offsets, truncated frames, priorities.

mod filter_support;

use filter_support::{v4, v4_opts, v6, L4};
use sluice_core::filter::u32::{HashKey, U32Config, U32Selector};
use sluice_core::filter::{
    ClassifyInput, FilterConfig, FilterList, FilterResult, FilterSpec, Protocol, TcfOutcome, Upsert,
};
use sluice_core::{Handle, Time};
use std::net::{Ipv4Addr, Ipv6Addr};

fn class(h: &str) -> Handle {
    Handle::parse(h).unwrap()
}

fn run(list: &mut FilterList, b: &filter_support::Built) -> TcfOutcome {
    list.classify(&ClassifyInput::new(&b.pkt, &b.keys, &b.frame), Time::ZERO)
}

fn hit(h: &str) -> TcfOutcome {
    TcfOutcome::Classified(FilterResult { classid: class(h) })
}

fn node(sel: U32Selector, classid: &str) -> FilterConfig {
    FilterConfig::U32(U32Config { sel, classid: Some(class(classid)), ..Default::default() })
}

#[test]
fn ip_prefixes_ports_tos_and_protocol() {
    let mut l = FilterList::new();
    let mut s = U32Selector::new();
    s.ip_src(Ipv4Addr::new(198, 18, 1, 0), 24).unwrap();
    s.ip_dport(443, 0xffff).unwrap();
    l.apply(FilterSpec { protocol: Protocol::IP, ..FilterSpec::new(1, node(s, "1:10")) }, Upsert::Add, 1)
        .unwrap();
    let mut s = U32Selector::new();
    s.ip_tos(0xb8, 0xfc).unwrap(); // EF, ignoring ECN
    l.apply(FilterSpec::new(2, node(s, "1:20")), Upsert::Add, 1).unwrap();
    let mut s = U32Selector::new();
    s.ip_protocol(17, 0xff).unwrap();
    l.apply(FilterSpec::new(3, node(s, "1:30")), Upsert::Add, 1).unwrap();

    assert_eq!(run(&mut l, &v4([198, 18, 1, 7], [198, 19, 0, 1], L4::Tcp(5000, 443))), hit("1:10"));
    assert_eq!(run(&mut l, &v4([198, 18, 2, 7], [198, 19, 0, 1], L4::Tcp(5000, 443))), TcfOutcome::NoMatch);
    assert_eq!(run(&mut l, &v4([198, 18, 1, 7], [198, 19, 0, 1], L4::Tcp(5000, 80))), TcfOutcome::NoMatch);
    let ef = v4_opts([198, 18, 2, 7], [198, 19, 0, 1], L4::Tcp(1, 2), 0xb8 | 2, 0, None);
    assert_eq!(run(&mut l, &ef), hit("1:20"));
    assert_eq!(run(&mut l, &v4([198, 18, 2, 7], [198, 19, 0, 1], L4::Udp(53, 53))), hit("1:30"));
    // IPv6 UDP: its next header (17) is at offset 6, not 9, so `ip protocol 17` does not match.
    let six = v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, L4::Udp(1, 1), 0);
    assert_eq!(run(&mut l, &six), TcfOutcome::NoMatch);
    // And priority 1 (protocol ip) is skipped for IPv6 even when its bytes would match: put the
    // IPv4 source prefix bytes where an IPv6 header has them (src address bytes 4..8).
    let tricky = v6("0:0:c612:107::1bb".parse().unwrap(), Ipv6Addr::LOCALHOST, L4::Tcp(5000, 443), 0);
    assert_eq!(&tricky.frame[14 + 12..14 + 15], &[198, 18, 1]);
    assert_eq!(&tricky.frame[14 + 22..14 + 24], &443u16.to_be_bytes());
    let mut as_any = l.clone();
    as_any.delete(0, 1, None).unwrap();
    let mut s = U32Selector::new();
    s.ip_src(Ipv4Addr::new(198, 18, 1, 0), 24).unwrap();
    s.ip_dport(443, 0xffff).unwrap();
    as_any.apply(FilterSpec::new(1, node(s, "1:10")), Upsert::Add, 1).unwrap();
    assert_eq!(run(&mut as_any, &tricky), hit("1:10"), "protocol all: the bytes do match");
    assert_eq!(run(&mut l, &tricky), TcfOutcome::NoMatch);
}

#[test]
fn ipv6_shorthands() {
    let mut l = FilterList::new();
    let mut s = U32Selector::new();
    s.ip6_src("2001:db8:1::".parse().unwrap(), 48).unwrap();
    s.ip6_priority(0x28, 0xfc).unwrap();
    s.ip6_dport(53, 0xffff).unwrap();
    l.apply(FilterSpec { protocol: Protocol::IPV6, ..FilterSpec::new(1, node(s, "1:6")) }, Upsert::Add, 1)
        .unwrap();
    let a: Ipv6Addr = "2001:db8:1::5".parse().unwrap();
    let b: Ipv6Addr = "2001:db8:2::5".parse().unwrap();
    assert_eq!(run(&mut l, &v6(a, b, L4::Udp(999, 53), 0x29)), hit("1:6"));
    assert_eq!(run(&mut l, &v6(b, a, L4::Udp(999, 53), 0x28)), TcfOutcome::NoMatch);
    assert_eq!(run(&mut l, &v6(a, b, L4::Udp(999, 53), 0x00)), TcfOutcome::NoMatch);
}

/// The classic tc-u32(8) layout: the root links on the IP protocol byte to a 256-bucket table
/// whose bucket 6 holds TCP port matches at `nexthdr+N`, with the header length taken from IHL.
fn protocol_table(l: &mut FilterList) {
    let table = FilterConfig::U32(U32Config { divisor: Some(256), ..Default::default() });
    l.apply(FilterSpec { handle: Some(0x002 << 20), ..FilterSpec::new(10, table) }, Upsert::Add, 1).unwrap();
    let mut s = U32Selector::new();
    s.l4_dst(22, 0xffff).unwrap();
    let ssh = U32Config {
        ht: Some((0x002 << 20) | (6 << 12)),
        sel: s,
        classid: Some(class("1:22")),
        ..Default::default()
    };
    l.apply(FilterSpec::new(10, FilterConfig::U32(ssh)), Upsert::Add, 1).unwrap();
    let mut s = U32Selector::new();
    s.l4_dst(53, 0xffff).unwrap();
    let dns = U32Config {
        ht: Some((0x002 << 20) | (17 << 12)),
        sel: s,
        classid: Some(class("1:53")),
        ..Default::default()
    };
    l.apply(FilterSpec::new(10, FilterConfig::U32(dns)), Upsert::Add, 1).unwrap();
    let mut s = U32Selector::new();
    s.ip_dst(Ipv4Addr::new(198, 19, 0, 0), 16).unwrap();
    s.hashkey = Some(HashKey { mask: 0x00ff_0000, at: 8 });
    s.ipv4_nexthdr_offset(false);
    let link = U32Config { sel: s, link: Some(0x002 << 20), ..Default::default() };
    l.apply(FilterSpec::new(10, FilterConfig::U32(link)), Upsert::Add, 1).unwrap();
}

#[test]
fn hash_table_link_divisor_and_nexthdr() {
    let mut l = FilterList::new();
    protocol_table(&mut l);
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 22))), hit("1:22"));
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(40000, 53))), hit("1:53"));
    // TCP to 53 hashes to bucket 6, which has no such match; UDP to 22 likewise.
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 53))), TcfOutcome::NoMatch);
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(40000, 22))), TcfOutcome::NoMatch);
    // Outside 198.19/16 the link is not taken.
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 18, 0, 2], L4::Tcp(40000, 22))), TcfOutcome::NoMatch);
    // IP options move the transport header: nexthdr follows IHL, the fixed `ip dport` does not.
    let opts = v4_opts([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 22), 0, 8, None);
    assert_eq!(run(&mut l, &opts), hit("1:22"));
    let mut fixed = FilterList::new();
    let mut s = U32Selector::new();
    s.ip_dport(22, 0xffff).unwrap();
    fixed.apply(FilterSpec::new(1, node(s, "1:99")), Upsert::Add, 1).unwrap();
    assert_eq!(run(&mut fixed, &opts), TcfOutcome::NoMatch);
    assert_eq!(run(&mut fixed, &v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Tcp(1, 22))), hit("1:99"));
}

#[test]
fn nexthdr_at_the_root_reads_the_ip_header_as_the_kernel_does() {
    // Without a linking `offset`, nexthdr+2 is offset 2 of the IP header (the total length).
    let mut l = FilterList::new();
    let mut s = U32Selector::new();
    s.l4_dst(22, 0xffff).unwrap();
    l.apply(FilterSpec::new(1, node(s, "1:22")), Upsert::Add, 1).unwrap();
    let b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Tcp(1, 22));
    assert_eq!(run(&mut l, &b), TcfOutcome::NoMatch);
    // An IPv4 packet of total length 22 does "match".
    let mut odd = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Raw(253, 2));
    assert_eq!(u16::from_be_bytes([odd.frame[16], odd.frame[17]]), 22);
    odd.pkt.len = odd.frame.len() as u32;
    assert_eq!(run(&mut l, &odd), hit("1:22"));
}

#[test]
fn eat_moves_the_base_offset() {
    let mut l = FilterList::new();
    let t = FilterConfig::U32(U32Config { divisor: Some(1), ..Default::default() });
    l.apply(FilterSpec { handle: Some(0x005 << 20), ..FilterSpec::new(5, t) }, Upsert::Add, 1).unwrap();
    // In the linked table, plain offsets are transport offsets.
    let mut s = U32Selector::new();
    s.add_u16(443, 0xffff, 2, false).unwrap();
    let c = U32Config { ht: Some(0x005 << 20), sel: s, classid: Some(class("1:443")), ..Default::default() };
    l.apply(FilterSpec::new(5, FilterConfig::U32(c)), Upsert::Add, 1).unwrap();
    let mut s = U32Selector::new();
    s.ipv4_nexthdr_offset(true);
    l.apply(
        FilterSpec::new(
            5,
            FilterConfig::U32(U32Config { sel: s, link: Some(0x005 << 20), ..Default::default() }),
        ),
        Upsert::Add,
        1,
    )
    .unwrap();
    assert_eq!(run(&mut l, &v4_opts([1, 1, 1, 1], [2, 2, 2, 2], L4::Tcp(1, 443), 0, 4, None)), hit("1:443"));
    assert_eq!(run(&mut l, &v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Tcp(1, 80))), TcfOutcome::NoMatch);
}

#[test]
fn linking_node_with_class_catches_what_the_table_misses() {
    let mut l = FilterList::new();
    protocol_table(&mut l);
    // Give the linking node (handle 800::800) a class: it is the result when the table has none.
    let mut s = U32Selector::new();
    s.ip_dst(Ipv4Addr::new(198, 19, 0, 0), 16).unwrap();
    s.hashkey = Some(HashKey { mask: 0x00ff_0000, at: 8 });
    s.ipv4_nexthdr_offset(false);
    let link =
        U32Config { sel: s, link: Some(0x002 << 20), classid: Some(class("1:2")), ..Default::default() };
    l.apply(
        FilterSpec { handle: Some(0x800 << 20 | 0x800), ..FilterSpec::new(10, FilterConfig::U32(link)) },
        Upsert::Replace,
        1,
    )
    .unwrap();
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 22))), hit("1:22"));
    assert_eq!(run(&mut l, &v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 80))), hit("1:2"));
}

#[test]
fn truncated_frames_never_match_and_never_panic() {
    let mut l = FilterList::new();
    protocol_table(&mut l);
    let full = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 22));
    for cut in 0..full.frame.len() {
        let mut b = full.clone();
        b.frame.truncate(cut);
        let r = run(&mut l, &b);
        // Only a frame that still has the 4 bytes holding the port can match.
        let needed = 14 + 20 + 4;
        assert_eq!(r == hit("1:22"), cut >= needed, "cut at {cut}");
    }
}

#[test]
fn negative_offsets_reach_the_link_layer_and_mark_and_indev_apply() {
    let mut l = FilterList::new();
    let mut s = U32Selector::new();
    s.add_u16(0x0800, 0xffff, -2, false).unwrap(); // the EtherType
    let c = U32Config {
        sel: s,
        classid: Some(class("1:8")),
        mark: Some((0x10, 0xf0)),
        indev: Some(3),
        ..Default::default()
    };
    l.apply(FilterSpec::new(1, FilterConfig::U32(c)), Upsert::Add, 1).unwrap();
    let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    assert_eq!(run(&mut l, &b), TcfOutcome::NoMatch, "mark 0");
    b.pkt.mark = 0x1f;
    assert_eq!(run(&mut l, &b), TcfOutcome::NoMatch, "wrong input interface");
    b.keys.iif = 3;
    assert_eq!(run(&mut l, &b), hit("1:8"));
    let six = v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, L4::Udp(1, 1), 0);
    let mut six = six;
    six.pkt.mark = 0x10;
    six.keys.iif = 3;
    assert_eq!(run(&mut l, &six), TcfOutcome::NoMatch);
}

#[test]
fn priorities_order_and_node_order() {
    let mut l = FilterList::new();
    let any = || U32Selector::new();
    l.apply(FilterSpec::new(20, node(any(), "1:20")), Upsert::Add, 1).unwrap();
    l.apply(FilterSpec::new(10, node(any(), "1:10")), Upsert::Add, 1).unwrap();
    let b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
    assert_eq!(run(&mut l, &b), hit("1:10"));
    // Within a priority, nodes run in node-id order: `order 0x100` (below 0x800) comes first.
    let early = U32Config { order: Some(0x100), classid: Some(class("1:5")), ..Default::default() };
    let (_, h) = l.apply(FilterSpec::new(10, FilterConfig::U32(early)), Upsert::Add, 1).unwrap();
    assert_eq!(sluice_core::filter::u32::format_handle(h), "801::100");
    assert_eq!(run(&mut l, &b), hit("1:5"));
    l.delete(0, 10, None).unwrap();
    assert_eq!(run(&mut l, &b), hit("1:20"));
    // Auto priority: below the lowest.
    let (p, _) =
        l.apply(FilterSpec { pref: None, ..FilterSpec::new(1, node(any(), "1:1")) }, Upsert::Add, 1).unwrap();
    assert_eq!(p, 19);
    assert_eq!(run(&mut l, &b), hit("1:1"));
    // A different kind at an existing priority is refused.
    let fw = FilterConfig::Fw(Default::default());
    assert!(l.apply(FilterSpec::new(19, fw), Upsert::Add, 1).is_err());
}
