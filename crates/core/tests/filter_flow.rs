//! The flow classifier: map mode with every key and op, hash mode, perturbation, the seed-003
//! tunnel keys and the proto-dst-on-ICMP fix, and per-host hashing.

mod filter_support;

use filter_support::{ipip, v4, v4_opts, v6, Built, L4};
use sluice_core::filter::flow::{hash_words, FlowConfig, FlowKey, FlowMode};
use sluice_core::filter::{
    ClassifyInput, FilterConfig, FilterList, FilterResult, FilterSpec, TcfOutcome, Upsert,
};
use sluice_core::{Handle, Span, Time};
use std::collections::HashSet;
use std::net::Ipv6Addr;

fn h(s: &str) -> Handle {
    Handle::parse(s).unwrap()
}

fn list(cfg: FlowConfig) -> FilterList {
    let mut l = FilterList::new();
    l.apply(FilterSpec { handle: Some(1), ..FilterSpec::new(1, FilterConfig::Flow(cfg)) }, Upsert::Add, 1)
        .unwrap();
    l
}

fn class_at(l: &mut FilterList, b: &Built, now: Time) -> Handle {
    match l.classify(&ClassifyInput::new(&b.pkt, &b.keys, &b.frame), now) {
        TcfOutcome::Classified(FilterResult { classid }) => classid,
        other => panic!("flow always classifies, got {other:?}"),
    }
}

fn class(l: &mut FilterList, b: &Built) -> Handle {
    class_at(l, b, Time::ZERO)
}

/// The minor that map mode gives for one key (baseclass 1:1 → minor = 1 + value).
fn mapped(key: FlowKey, b: &Built) -> u32 {
    let mut l = list(FlowConfig::map(key));
    class(&mut l, b).minor() - 1
}

#[test]
fn map_mode_reads_every_key() {
    let mut b = v4_opts([198, 18, 3, 4], [198, 19, 5, 6], L4::Tcp(0x1234, 0x0050), 0, 0, Some(0x2005));
    b.pkt.mark = 0x77;
    b.pkt.priority = 0x10003;
    b.pkt.flow_hash = 0xBEEF;
    b.keys.iif = 9;
    // The minor is 16 bits: keys are reduced by the addition onto the base class.
    assert_eq!(mapped(FlowKey::Src, &b), 0x0304);
    assert_eq!(mapped(FlowKey::Dst, &b), 0x0506);
    assert_eq!(mapped(FlowKey::Proto, &b), 6);
    assert_eq!(mapped(FlowKey::ProtoSrc, &b), 0x1234);
    assert_eq!(mapped(FlowKey::ProtoDst, &b), 0x50);
    assert_eq!(mapped(FlowKey::Iif, &b), 9);
    assert_eq!(mapped(FlowKey::Priority, &b), 3);
    assert_eq!(mapped(FlowKey::Mark, &b), 0x77);
    assert_eq!(mapped(FlowKey::VlanTag, &b), 5, "VID only, PCP stripped");
    assert_eq!(mapped(FlowKey::Rxhash, &b), 0xBEEF);
    // Without conntrack, realms or a local socket.
    assert_eq!(mapped(FlowKey::Nfct, &b), 0);
    assert_eq!(mapped(FlowKey::NfctSrc, &b), 0x0304);
    assert_eq!(mapped(FlowKey::NfctDst, &b), 0x0506);
    assert_eq!(mapped(FlowKey::NfctProtoSrc, &b), 0x1234);
    assert_eq!(mapped(FlowKey::NfctProtoDst, &b), 0x50);
    assert_eq!(mapped(FlowKey::RtClassid, &b), 0);
    assert_eq!(mapped(FlowKey::SkUid, &b), 0);
    assert_eq!(mapped(FlowKey::SkGid, &b), 0);
    // No tunnel: tunnel keys read the outer header.
    assert_eq!(mapped(FlowKey::TunnelSrc, &b), 0x0304);
    assert_eq!(mapped(FlowKey::TunnelProto, &b), 6);
    assert_eq!(mapped(FlowKey::TunnelProtoDst, &b), 0x50);
    // IPv6: the last 32 bits of the address, as the kernel.
    let six = v6("2001:db8::a:b".parse().unwrap(), Ipv6Addr::LOCALHOST, L4::Udp(7, 8), 0);
    assert_eq!(mapped(FlowKey::Src, &six), 0x000b);
    assert_eq!(mapped(FlowKey::Dst, &six), 1);
}

#[test]
fn map_mode_ops_and_divisor_and_baseclass() {
    let b = v4([198, 18, 3, 0xF4], [10, 0, 0, 0xAB], L4::Udp(1, 2));
    let base = |cfg: FlowConfig| FlowConfig { baseclass: Some(h("1:100")), ..cfg };
    let mut c = FlowConfig::map(FlowKey::Dst);
    c.and = 0xff;
    assert_eq!(class(&mut list(base(c.clone())), &b), h("1:1ab"));
    c.xor = 0x0f;
    assert_eq!(class(&mut list(base(c.clone())), &b), h("1:1a4"));
    c.rshift = 4;
    assert_eq!(class(&mut list(base(c.clone())), &b), h("1:10a"));
    c.addend = 3;
    assert_eq!(class(&mut list(base(c.clone())), &b), h("1:10d"));
    c.divisor = 4;
    assert_eq!(class(&mut list(base(c.clone())), &b), h("1:101"), "(0xa + 3) % 4 = 1");
    let mut o = FlowConfig::map(FlowKey::Src);
    o.set_or(0xff);
    // 0xc61203f4 | 0xff = 0xc61203ff; + minor 1 = 0x0400 in 16 bits.
    assert_eq!(class(&mut list(o), &b), h("1:400"), "or sets the low byte");
    // Default base class: the qdisc's major, minor 1; a base class without major takes it too.
    let d = FlowConfig { divisor: 16, ..FlowConfig::map(FlowKey::Proto) };
    assert_eq!(class(&mut list(d), &b), h("1:2"), "17 % 16 + 1");
    let d = FlowConfig { baseclass: Some(h(":10")), ..FlowConfig::map(FlowKey::Proto) };
    assert_eq!(class(&mut list(d), &b), h("1:21"));
}

#[test]
fn config_validation() {
    let mut l = FilterList::new();
    let bad = |cfg: FlowConfig, l: &mut FilterList| {
        l.apply(FilterSpec::new(1, FilterConfig::Flow(cfg)), Upsert::Add, 1).is_err()
    };
    assert!(bad(FlowConfig::default(), &mut l), "no keys");
    assert!(
        bad(FlowConfig { keys: FlowKey::parse_list("src,dst").unwrap(), ..FlowConfig::default() }, &mut l),
        "map takes one key"
    );
    assert!(bad(FlowConfig { perturb: Some(Span::from_secs(1)), ..FlowConfig::map(FlowKey::Src) }, &mut l));
    assert!(bad(FlowConfig { rshift: 32, ..FlowConfig::map(FlowKey::Src) }, &mut l));
    assert!(bad(FlowConfig { baseclass: Some(h("1:0")), ..FlowConfig::map(FlowKey::Src) }, &mut l));
    assert!(FlowKey::parse_list("src,bogus").is_err());
    assert!(l.is_empty(), "failed adds leave no priority behind");
    for k in FlowKey::all() {
        assert_eq!(FlowKey::parse(k.name()), Some(*k));
    }
}

#[test]
fn hash_mode_is_stable_and_depends_on_every_selected_key() {
    let cfg = FlowConfig::hash("src,dst,proto,proto-src,proto-dst", 0, None).unwrap();
    let mut l = list(cfg);
    let a = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 443));
    let first = class(&mut l, &a);
    assert_eq!(class(&mut l, &a), first);
    let variants = [
        v4([198, 18, 0, 2], [198, 19, 0, 1], L4::Tcp(40000, 443)),
        v4([198, 18, 0, 1], [198, 19, 0, 2], L4::Tcp(40000, 443)),
        v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(40000, 443)),
        v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40001, 443)),
        v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(40000, 444)),
    ];
    for v in &variants {
        assert_ne!(class(&mut l, v), first, "{:?}", v.keys.outer);
    }
    // Keys not selected do not matter.
    let mut marked = a.clone();
    marked.pkt.mark = 99;
    marked.pkt.priority = 5;
    assert_eq!(class(&mut l, &marked), first);
}

#[test]
fn hash_spreads_evenly() {
    // 65536 distinct 5-tuples into 64 buckets: every bucket within 15% of the mean.
    let mut counts = [0u32; 64];
    for i in 0..65536u32 {
        let b = hash_words(7, &[0xC612_0000 | (i >> 8), 0xC613_0001, 6, 1024 + (i & 0xff), 443]);
        counts[(b % 64) as usize] += 1;
    }
    let mean = 1024.0;
    for c in counts {
        assert!((c as f64 - mean).abs() < 0.15 * mean, "bucket count {c}");
    }
}

#[test]
fn perturb_rekeys_per_period_only() {
    let cfg = FlowConfig {
        perturb: Some(Span::from_secs(10)),
        ..FlowConfig::hash("src,dst,proto-src", 1024, None).unwrap()
    };
    let mut l = list(cfg);
    let flows: Vec<Built> =
        (0..32u16).map(|p| v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Udp(1000 + p, 53))).collect();
    let at = |l: &mut FilterList, t: u64| {
        flows.iter().map(|f| class_at(l, f, Time::from_secs(t))).collect::<Vec<_>>()
    };
    let p0 = at(&mut l, 0);
    assert_eq!(at(&mut l, 9), p0, "same period, same mapping");
    let p1 = at(&mut l, 10);
    let moved = p0.iter().zip(&p1).filter(|(a, b)| a != b).count();
    assert!(moved >= 28, "a new key moves (almost) every flow: {moved} of 32");
}

/// Seed 003: inside an IPIP tunnel, ping and a bulk TCP upload between the same tunnel endpoints.
#[test]
fn tunnel_keys_separate_icmp_from_bulk_inside_ipip() {
    let ping = ipip([198, 18, 0, 1], [198, 18, 9, 9], [198, 19, 1, 10], [198, 19, 2, 20], L4::Icmp(8, 0), 0);
    let scp =
        ipip([198, 18, 0, 1], [198, 18, 9, 9], [198, 19, 1, 11], [198, 19, 2, 22], L4::Tcp(51000, 22), 0x08);
    let outer = "src,dst,proto,proto-src,proto-dst";
    let both = "src,dst,proto,proto-src,proto-dst,tunnel-src,tunnel-dst,tunnel-proto,tunnel-proto-src,tunnel-proto-dst";
    let mut same = 0;
    let mut apart = 0;
    for seed in 0..64u32 {
        let mut without = list(FlowConfig { seed, ..FlowConfig::hash(outer, 1024, None).unwrap() });
        assert_eq!(class(&mut without, &ping), class(&mut without, &scp), "one flow to the outer keys");
        let mut with = list(FlowConfig { seed, ..FlowConfig::hash(both, 1024, None).unwrap() });
        if class(&mut with, &ping) == class(&mut with, &scp) {
            same += 1;
        } else {
            apart += 1;
        }
    }
    // Two flows in 1024 buckets collide with probability 1/1024 per key.
    assert!(apart >= 62, "tunnel keys separated the flows for {apart} of 64 hash keys ({same} collisions)");
    // Traffic the router sends itself (no tunnel) is still told apart by its own ports.
    let mut with = list(FlowConfig::hash(both, 0, None).unwrap());
    let ntp = v4([198, 18, 0, 1], [198, 18, 9, 9], L4::Udp(123, 123));
    let dns = v4([198, 18, 0, 1], [198, 18, 9, 9], L4::Udp(5353, 53));
    assert_ne!(class(&mut with, &ntp), class(&mut with, &dns));
}

#[test]
fn proto_dst_of_icmp_is_zero_and_legacy_shows_the_tos_artifact() {
    let ping = |tos: u8| v4_opts([198, 18, 0, 1], [198, 19, 0, 1], L4::Icmp(8, 0), tos, 0, None);
    assert_eq!(mapped(FlowKey::ProtoDst, &ping(0)), 0);
    assert_eq!(mapped(FlowKey::ProtoSrc, &ping(0x10)), 0);
    let tunnel = ipip([1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4], L4::Tcp(5, 6), 0);
    assert_eq!(mapped(FlowKey::ProtoDst, &tunnel), 0, "outer IPIP has no ports");
    assert_eq!(mapped(FlowKey::TunnelProtoDst, &tunnel), 6);

    // Three pings that differ only in TOS (the seed's ping-exp streams).
    let tos = [0x00u8, 0x10, 0x08];
    let keys = "src,dst,proto,proto-src,proto-dst";
    let mut fixed = list(FlowConfig::hash(keys, 0, None).unwrap());
    let c: HashSet<Handle> = tos.iter().map(|t| class(&mut fixed, &ping(*t))).collect();
    assert_eq!(c.len(), 1, "fixed: one flow");
    let mut legacy =
        list(FlowConfig { legacy_proto_ports: true, ..FlowConfig::hash(keys, 0, None).unwrap() });
    let c: HashSet<Handle> = tos.iter().map(|t| class(&mut legacy, &ping(*t))).collect();
    assert_eq!(c.len(), 3, "legacy: the route entry per TOS splits them, as in the seed");
    // Legacy does not change ported traffic.
    let tcp = v4([198, 18, 0, 1], [198, 19, 0, 1], L4::Tcp(1, 2));
    let mut m_fixed = list(FlowConfig::map(FlowKey::ProtoDst));
    let mut m_legacy = list(FlowConfig { legacy_proto_ports: true, ..FlowConfig::map(FlowKey::ProtoDst) });
    assert_eq!(class(&mut m_fixed, &tcp), class(&mut m_legacy, &tcp));
}

/// Per-host fairness (seed 003): `flow hash keys src divisor N` puts every flow of a host in one
/// class and spreads hosts over classes.
#[test]
fn per_host_hashing_groups_flows_by_source() {
    let n = 1024;
    let mut l = list(FlowConfig::hash("src", n, Some(h("1:10"))).unwrap());
    let mut hosts = HashSet::new();
    for host in 0..50u8 {
        let classes: HashSet<Handle> = (0..20u16)
            .map(|f| {
                let l4 = if f % 3 == 0 { L4::Udp(3000 + f, 53) } else { L4::Tcp(40000 + f, 443 + f) };
                class(&mut l, &v4([198, 18, 1, host], [198, 19, (f % 7) as u8, 1], l4))
            })
            .collect();
        assert_eq!(classes.len(), 1, "host {host}: all flows in one class");
        let c = *classes.iter().next().unwrap();
        assert_eq!(c.major(), 1);
        assert!((0x10..0x10 + n).contains(&c.minor()));
        hosts.insert(c);
    }
    // 50 hosts in 1024 buckets: expected collisions ≈ 1.2; allow a few.
    assert!(hosts.len() >= 46, "{} distinct classes for 50 hosts", hosts.len());
    // Two specific hosts (the seed's HostA, HostB) are apart.
    let a = class(&mut l, &v4([198, 18, 1, 100], [198, 19, 0, 1], L4::Tcp(1, 2)));
    let b = class(&mut l, &v4([198, 18, 1, 101], [198, 19, 0, 1], L4::Tcp(1, 2)));
    assert_ne!(a, b);
}

#[test]
fn several_flow_filters_in_a_priority_and_replace() {
    let mut l = list(FlowConfig::map(FlowKey::Mark));
    let b = {
        let mut b = v4([1, 1, 1, 1], [2, 2, 2, 2], L4::Udp(1, 2));
        b.pkt.mark = 4;
        b
    };
    assert_eq!(class(&mut l, &b), h("1:5"));
    let spec = |cfg| FilterSpec { handle: Some(1), ..FilterSpec::new(1, FilterConfig::Flow(cfg)) };
    assert!(l.apply(spec(FlowConfig::map(FlowKey::Proto)), Upsert::Add, 1).is_err(), "handle exists");
    l.apply(spec(FlowConfig { addend: 0x22, ..FlowConfig::map(FlowKey::Mark) }), Upsert::Change, 1).unwrap();
    assert_eq!(class(&mut l, &b), h("1:27"));
    assert_eq!(FlowConfig::hash("src", 0, None).unwrap().mode, FlowMode::Hash);
}

/// 6in4 (and any other tunnel the parser reports): the tunnel keys read the IPv6 inner header.
#[test]
fn tunnel_keys_read_an_ipv6_inner_header() {
    let mut b = ipip([198, 18, 0, 1], [198, 18, 9, 9], [0; 4], [0; 4], L4::Icmp(8, 0), 0);
    let inner6 = v6("2001:db8::1:2".parse().unwrap(), "2001:db8::99".parse().unwrap(), L4::Udp(4000, 53), 0);
    b.keys.inner = inner6.keys.outer;
    b.keys.outer.as_mut().unwrap().proto = 41;
    // Last 32 bits of the inner source (0x00010002), seen through the 16-bit minor.
    assert_eq!(mapped(FlowKey::TunnelSrc, &b), 0x0002);
    assert_eq!(mapped(FlowKey::TunnelProto, &b), 17);
    assert_eq!(mapped(FlowKey::TunnelProtoDst, &b), 53);
    assert_eq!(mapped(FlowKey::Proto, &b), 41);
    assert_eq!(mapped(FlowKey::ProtoDst, &b), 0);
    // Hash mode uses the whole inner address: sources differing only in the upper 96 bits differ.
    let mut other = b.clone();
    other.keys.inner.as_mut().unwrap().src = "2001:db9::1:2".parse().unwrap();
    let mut l = list(FlowConfig::hash("tunnel-src", 0, None).unwrap());
    assert_ne!(class(&mut l, &b), class(&mut l, &other));
}
