//! Keyed 32-bit hashes of flows and hosts.
//!
//! Flow-queueing qdiscs pick a bucket from these, and perturbation changes the seed, so the hash
//! must spread sequential ports and addresses evenly and change completely with the seed. It is a
//! folded 64×64→128-bit multiply per pair of words (the construction of foldhash/wyhash) and a
//! murmur3 finaliser; not cryptographic, which the kernel's `jhash` is not either.

use sluice_core::HeaderKeys;
use std::net::IpAddr;

const P0: u64 = 0x243F_6A88_85A3_08D3;
const P1: u64 = 0x1319_8A2E_0370_7344;
const P2: u64 = 0xA409_3822_299F_31D0;
const P3: u64 = 0x082E_FA98_EC4E_6C89;

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline]
fn finish(mut h: u64) -> u32 {
    // murmur3 fmix64: every input bit affects every output bit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^= h >> 33;
    (h >> 32) as u32
}

/// Streams words two at a time into the folded multiply.
struct Hasher {
    h: u64,
    k0: u64,
    k1: u64,
}

impl Hasher {
    #[inline]
    fn new(seed: u64) -> Hasher {
        Hasher { h: seed ^ P0, k0: seed.rotate_left(32) ^ P1, k1: seed ^ P2 }
    }

    #[inline]
    fn pair(&mut self, a: u64, b: u64) {
        self.h = fold_mul(a ^ self.k0 ^ self.h, b ^ self.k1).wrapping_add(P3);
    }

    #[inline]
    fn finish(self) -> u32 {
        finish(self.h)
    }
}

/// Splits an address into two words; IPv4 fills the first and tags the second so that an IPv4
/// address and an IPv6 address never collide by construction.
#[inline]
fn addr_words(a: &IpAddr) -> (u64, u64) {
    match a {
        IpAddr::V4(v4) => (u64::from(u32::from(*v4)), 4),
        IpAddr::V6(v6) => {
            let x = u128::from(*v6);
            ((x >> 64) as u64, x as u64)
        }
    }
}

/// Hash of a 5-tuple (addresses, protocol, ports) keyed by `seed`. The TOS byte is not part of
/// the flow. Protocols without ports carry ports 0 in [`HeaderKeys`], so they hash on the
/// addresses and protocol alone.
#[inline]
pub fn flow_hash(keys: &HeaderKeys, seed: u64) -> u32 {
    let mut h = Hasher::new(seed);
    let (s0, s1) = addr_words(&keys.src);
    let (d0, d1) = addr_words(&keys.dst);
    let tail = (u64::from(keys.proto) << 32) | (u64::from(keys.src_port) << 16) | u64::from(keys.dst_port);
    h.pair(s0, s1);
    h.pair(d0, d1);
    h.pair(tail, 0x5F);
    h.finish()
}

/// Hash of one host address keyed by `seed` (for per-host fairness).
#[inline]
pub fn host_hash(addr: &IpAddr, seed: u64) -> u32 {
    let mut h = Hasher::new(seed);
    let (a0, a1) = addr_words(addr);
    h.pair(a0, a1);
    h.finish()
}

/// Hash for a frame without IP: EtherType and VLAN tag, so that all ARP of one VLAN is one flow.
#[inline]
pub fn l2_hash(ethertype: u16, vlan_tci: Option<u16>, seed: u64) -> u32 {
    let mut h = Hasher::new(seed);
    let vlan = vlan_tci.map_or(0, |t| 0x1_0000 | u64::from(t & 0x0FFF));
    h.pair(u64::from(ethertype), vlan);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn k(sport: u16, dport: u16) -> HeaderKeys {
        HeaderKeys {
            src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
            proto: 6,
            src_port: sport,
            dst_port: dport,
            dsfield: 0,
        }
    }

    /// Chi-square of bucket counts against a uniform spread; for 1023 degrees of freedom the
    /// 99.9th percentile is about 1168.
    fn chi_square(counts: &[u32], n: u32) -> f64 {
        let expected = f64::from(n) / counts.len() as f64;
        counts.iter().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum()
    }

    #[test]
    fn sequential_ports_spread_evenly_over_1024_buckets() {
        for seed in [0u64, 1, 0xDEAD_BEEF] {
            let mut counts = vec![0u32; 1024];
            let n = 102_400u32;
            for i in 0..n {
                let h = flow_hash(&k(10_000 + (i % 50_000) as u16, 80 + (i / 50_000) as u16), seed);
                counts[(h % 1024) as usize] += 1;
            }
            let chi = chi_square(&counts, n);
            assert!(chi < 1250.0, "seed {seed}: chi-square {chi}");
        }
    }

    #[test]
    fn sequential_hosts_spread_evenly() {
        let mut counts = vec![0u32; 1024];
        let n = 65_536u32;
        for i in 0..n {
            let a = IpAddr::V4(Ipv4Addr::from(0xC612_0000 + i));
            counts[(host_hash(&a, 7) % 1024) as usize] += 1;
        }
        assert!(chi_square(&counts, n) < 1250.0);
    }

    #[test]
    fn seed_changes_every_bucket_assignment_independently() {
        // With a new seed about 1/1024 of flows should stay in the same bucket, not most of them.
        let same = (0..10_000u16)
            .filter(|&p| flow_hash(&k(p, 443), 1) % 1024 == flow_hash(&k(p, 443), 2) % 1024)
            .count();
        assert!(same < 40, "{same} of 10000 flows kept their bucket");
    }

    #[test]
    fn every_field_matters() {
        let base = k(1000, 80);
        let h = flow_hash(&base, 0);
        assert_ne!(h, flow_hash(&HeaderKeys { src_port: 1001, ..base }, 0));
        assert_ne!(h, flow_hash(&HeaderKeys { dst_port: 81, ..base }, 0));
        assert_ne!(h, flow_hash(&HeaderKeys { proto: 17, ..base }, 0));
        assert_ne!(h, flow_hash(&HeaderKeys { src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 3)), ..base }, 0));
        assert_ne!(h, flow_hash(&HeaderKeys { src: base.dst, dst: base.src, ..base }, 0));
        // The TOS byte is not part of the flow (seed 003: proto-dst must not depend on TOS).
        assert_eq!(h, flow_hash(&HeaderKeys { dsfield: 0xB8, ..base }, 0));
        let v6 = HeaderKeys {
            src: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            dst: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
            ..base
        };
        assert_ne!(flow_hash(&v6, 0), flow_hash(&HeaderKeys { src_port: 1, ..v6 }, 0));
    }
}
