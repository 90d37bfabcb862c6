//! Parses the benchmark frames a fixed number of times, for instruction counts under callgrind
//! (deterministic, unlike wall-clock time on a shared machine):
//!
//! ```sh
//! cargo build --release -p sluice-wire --example parse_icount
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='sluice_wire::parse::parse_frame' \
//!     target/release/examples/parse_icount udp 10000
//! ```
//! Instructions per parse = the reported `Collected` / the count.

use sluice_wire::{parse_frame, FrameSpec, GreOptions, ParseOptions, Tunnel, TunnelKind, L4};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 0, last))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "udp".into());
    let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let frame = match kind.as_str() {
        "udp" => FrameSpec::udp(v4(1), v4(2), 40_000, 53, 22).build(),
        "ipip" => {
            let mut s = FrameSpec::udp(v4(1), v4(2), 40_000, 22, 1400);
            s.proto = L4::Tcp;
            s.tunnel = Some(Tunnel {
                kind: TunnelKind::Ipip,
                src: v4(101),
                dst: v4(102),
                gre: GreOptions::default(),
            });
            s.build()
        }
        other => panic!("unknown frame kind {other} (udp or ipip)"),
    }
    .expect("valid spec");
    let mut ok = 0u32;
    for _ in 0..n {
        ok += u32::from(parse_frame(black_box(&frame), ParseOptions::default()).is_ok());
    }
    println!("{kind}: {} bytes, parsed {ok}/{n}", frame.len());
}
