//! Writes the committed seed corpus of the `parse_frame` fuzz target: a dozen frames of each kind
//! the parser knows, built with `FrameSpec`.
//!
//! Run from the repository root: `cargo run -p sluice-wire --example gen_corpus -- fuzz/corpus/parse_frame`

use sluice_wire::{internet_checksum, FrameSpec, GreOptions, Tunnel, TunnelKind, VlanTags, L4};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, last))
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

fn tunnel(kind: TunnelKind, src: IpAddr, dst: IpAddr, gre: GreOptions) -> Option<Tunnel> {
    Some(Tunnel { kind, src, dst, gre })
}

/// Frame `i` (0..12) of a kind: ports, payload length, TOS and transport vary with `i`.
fn spec(kind: &str, i: usize) -> FrameSpec {
    let inner_v6 = matches!(kind, "ipv6" | "ipv6-exts" | "raw-ipv6" | "sit" | "6in6" | "gre6");
    let (src, dst) = if inner_v6 { (v6(1), v6(2)) } else { (v4(1), v4(2)) };
    let mut s = FrameSpec::udp(src, dst, 1024 + i as u16, 80 + i as u16, i * 3);
    s.proto = match (i % 3, inner_v6) {
        (0, _) => L4::Udp,
        (1, _) => L4::Tcp,
        (_, false) => L4::Icmp,
        (_, true) => L4::Icmpv6,
    };
    s.dsfield = [0x00, 0x01, 0x02, 0x03, 0xB8, 0xB9, 0x28, 0x2A][i % 8];
    let gre = GreOptions {
        checksum: i % 2 == 1,
        key: (i % 3 == 1).then_some(i as u32),
        seq: (i % 4 == 2).then_some(1000 + i as u32),
        ethernet: false,
    };
    match kind {
        "vlan" => s.vlan = Some(VlanTags::Single(0x2000 | i as u16)),
        "qinq" => s.vlan = Some(VlanTags::Double { outer: 100, inner: 0xA000 | i as u16 }),
        "ipv4-options" | "ipv6-exts" => s.ip_options = true,
        "ipip" => s.tunnel = tunnel(TunnelKind::Ipip, v4(101), v4(102), gre),
        "sit" => s.tunnel = tunnel(TunnelKind::Sit6in4, v4(101), v4(102), gre),
        "4in6" => s.tunnel = tunnel(TunnelKind::Ip4in6, v6(101), v6(102), gre),
        "6in6" => s.tunnel = tunnel(TunnelKind::Ip6in6, v6(101), v6(102), gre),
        "gre4" | "gre6" => s.tunnel = tunnel(TunnelKind::Gre, v4(101), v4(102), gre),
        "gre-over-v6" => s.tunnel = tunnel(TunnelKind::Gre, v6(101), v6(102), gre),
        "gre-eth" => {
            s.tunnel = tunnel(TunnelKind::Gre, v4(101), v4(102), GreOptions { ethernet: true, ..gre })
        }
        _ => {}
    }
    s
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus/parse_frame".into());
    std::fs::create_dir_all(&dir).expect("create corpus directory");
    let kinds = [
        "ipv4",
        "ipv6",
        "vlan",
        "qinq",
        "ipv4-options",
        "ipv6-exts",
        "ipip",
        "sit",
        "4in6",
        "6in6",
        "gre4",
        "gre6",
        "gre-over-v6",
        "gre-eth",
        "raw-ipv4",
        "raw-ipv6",
        "fragment",
        "arp",
    ];
    let mut n = 0;
    for kind in kinds {
        for i in 0..12 {
            let s = spec(kind, i);
            let frame = match kind {
                "raw-ipv4" | "raw-ipv6" => s.build_ip(),
                "arp" => {
                    let mut f = vec![0xFF; 6];
                    f.extend_from_slice(&[0x02, 0, 0, 0, 0, i as u8, 0x08, 0x06]);
                    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1 + (i % 2) as u8]);
                    f.resize(42 + i, 0);
                    Ok(f)
                }
                "fragment" => s.build().map(|mut f| {
                    // First fragments (more-fragments set) and later fragments (offset > 0).
                    let v: u16 = if i % 2 == 0 { 0x2000 } else { 3 + i as u16 };
                    f[20..22].copy_from_slice(&v.to_be_bytes());
                    f[24..26].copy_from_slice(&[0, 0]);
                    let c = internet_checksum(&f[14..34]);
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                    f
                }),
                _ => s.build(),
            }
            .expect("corpus specs are valid");
            std::fs::write(format!("{dir}/valid-{kind}-{i:02}"), frame).expect("write corpus file");
            n += 1;
        }
    }
    println!("wrote {n} frames to {dir}");
}
