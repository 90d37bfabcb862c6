//! The fanout program on a real socket (root only; skipped otherwise): two receive rings on the
//! loopback device of a fresh network namespace, joined to one `PACKET_FANOUT` group keyed on the
//! source address. Every frame of one source lands in the same ring, and the ring is the one the
//! program's hash names.

use sluice_live::sys::{fanout_program, ifindex, FanoutKey, RxRing};
use std::net::{Ipv4Addr, UdpSocket};

/// The program's hash, as the kernel runs it (then modulo the group's size).
fn hash(addr: Ipv4Addr) -> u32 {
    let x = u32::from(addr).wrapping_mul(0x9E37_79B1);
    (x >> 16) ^ x
}

#[test]
fn frames_of_one_source_go_to_one_ring_chosen_by_the_hash() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: needs root (a network namespace and packet sockets)");
        return;
    }
    // A thread of its own enters a new namespace, so the test process keeps its own.
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let up = std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status().expect("ip");
        assert!(up.success());
        let lo = ifindex("lo").unwrap();
        let mut rings = [RxRing::open(lo).unwrap(), RxRing::open(lo).unwrap()];
        for r in &rings {
            r.join_fanout(0x5117, &fanout_program(FanoutKey::Source)).unwrap();
        }
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        let sources: Vec<Ipv4Addr> = (1..=8).map(|k| Ipv4Addr::new(127, 0, 0, k)).collect();
        for s in &sources {
            let u = UdpSocket::bind((*s, 0)).unwrap();
            for _ in 0..20 {
                u.send_to(b"sluice fanout", ("127.0.0.1", port)).unwrap();
            }
        }
        // (ring, source) counts of our datagrams.
        let mut seen = [[0u32; 8]; 2];
        for (i, r) in rings.iter_mut().enumerate() {
            r.drain(10_000, |f, _, _| {
                let udp = f.len() >= 14 + 28 && f[12..14] == [8, 0] && f[14 + 9] == 17;
                if udp && u16::from_be_bytes([f[14 + 22], f[14 + 23]]) == port {
                    let src = Ipv4Addr::new(f[26], f[27], f[28], f[29]);
                    if let Some(k) = sources.iter().position(|s| *s == src) {
                        seen[i][k] += 1;
                    }
                }
            });
        }
        for (k, s) in sources.iter().enumerate() {
            let want = (hash(*s) % 2) as usize;
            assert_eq!((seen[want][k], seen[1 - want][k]), (20, 0), "{s}: {seen:?}");
        }
        // The eight sources do not all land on one side.
        assert!(seen.iter().all(|r| r.iter().any(|&n| n > 0)), "{seen:?}");
    })
    .join()
    .unwrap();
}
