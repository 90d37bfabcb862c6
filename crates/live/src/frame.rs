//! From frame bytes to a [`Packet`] descriptor, and the buffer pool that holds frames while
//! their descriptors are queued.
//!
//! Parsing here is the minimum the live path needs (Ethernet, optional VLAN tags, the IPv4/IPv6
//! traffic class, a flow hash over addresses, protocol and ports) until `sluice-wire` is wired in.
//!
//! Malformed frames: a frame shorter than an Ethernet header is counted and dropped (it cannot
//! be forwarded meaningfully). A frame whose IP header is truncated or inconsistent is counted
//! as malformed and forwarded, shaped in the default class with no flow keys.

use sluice_core::Packet;

/// Result of looking at one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A descriptor to queue.
    Ok(Packet),
    /// Queue it, but its network header was malformed.
    Malformed(Packet),
    /// Too short to be an Ethernet frame: drop.
    Runt,
}

fn fnv1a(mut h: u32, bytes: &[u8]) -> u32 {
    for b in bytes {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Build a descriptor for `frame`; `payload` is the pool slot that holds it.
pub fn describe(frame: &[u8], payload: u64) -> Parsed {
    if frame.len() < 14 {
        return Parsed::Runt;
    }
    let mut p = Packet::new(frame.len() as u32, payload);
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    while (ethertype == 0x8100 || ethertype == 0x88a8) && frame.len() >= off + 6 {
        off += 4;
        ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
    }
    let l3 = off + 2;
    let ip = &frame[l3.min(frame.len())..];
    let seed = 0x811c_9dc5;
    match ethertype {
        0x0800 => {
            if ip.len() < 20
                || ip[0] >> 4 != 4
                || ((ip[0] & 0xf) as usize) * 4 < 20
                || ((ip[0] & 0xf) as usize) * 4 > ip.len()
            {
                return Parsed::Malformed(p);
            }
            p.dsfield = ip[1];
            let ihl = (ip[0] & 0xf) as usize * 4;
            let proto = ip[9];
            p.src_host_hash = fnv1a(seed, &ip[12..16]);
            p.dst_host_hash = fnv1a(seed, &ip[16..20]);
            let mut h = fnv1a(seed, &ip[12..20]);
            h = fnv1a(h, &[proto]);
            if matches!(proto, 6 | 17) && ip.len() >= ihl + 4 {
                h = fnv1a(h, &ip[ihl..ihl + 4]);
            }
            p.flow_hash = h;
            Parsed::Ok(p)
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Parsed::Malformed(p);
            }
            p.dsfield = (ip[0] << 4) | (ip[1] >> 4);
            let next = ip[6];
            p.src_host_hash = fnv1a(seed, &ip[8..24]);
            p.dst_host_hash = fnv1a(seed, &ip[24..40]);
            let mut h = fnv1a(seed, &ip[8..40]);
            h = fnv1a(h, &[next]);
            if matches!(next, 6 | 17) && ip.len() >= 44 {
                h = fnv1a(h, &ip[40..44]);
            }
            p.flow_hash = h;
            Parsed::Ok(p)
        }
        _ => Parsed::Ok(p),
    }
}

/// Frame storage addressed by the descriptor's `payload` handle. Slots are reused; nothing is
/// allocated once the pool has grown to the working set.
pub struct Pool {
    slots: Vec<Vec<u8>>,
    free: Vec<u32>,
    max: usize,
}

impl Pool {
    /// A pool that holds at most `max` frames at once.
    pub fn new(max: usize) -> Pool {
        Pool { slots: Vec::new(), free: Vec::new(), max }
    }

    /// Copy `frame` in; None when the pool is full.
    pub fn put(&mut self, frame: &[u8]) -> Option<u64> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if self.slots.len() < self.max => {
                self.slots.push(Vec::with_capacity(2048));
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let s = &mut self.slots[id as usize];
        s.clear();
        s.extend_from_slice(frame);
        Some(id as u64)
    }

    /// The frame in slot `id`.
    pub fn get(&self, id: u64) -> &[u8] {
        self.slots.get(id as usize).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Release slot `id`.
    pub fn free(&mut self, id: u64) {
        if (id as usize) < self.slots.len() {
            self.free.push(id as u32);
        }
    }

    /// Frames held now.
    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_udp(tos: u8, sport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[15] = tos;
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f
    }

    #[test]
    fn reads_dsfield_and_separates_flows() {
        let Parsed::Ok(a) = describe(&ipv4_udp(0xb8, 1000), 1) else { panic!() };
        let Parsed::Ok(b) = describe(&ipv4_udp(0, 1001), 2) else { panic!() };
        assert_eq!(a.dscp(), 46);
        assert_ne!(a.flow_hash, b.flow_hash);
        assert_eq!(a.src_host_hash, b.src_host_hash);
    }

    #[test]
    fn bad_input_is_classified_not_panicked_on() {
        assert_eq!(describe(&[0u8; 5], 0), Parsed::Runt);
        let mut f = ipv4_udp(0, 1);
        f[14] = 0x4f; // IHL 60 bytes > what is there
        assert!(matches!(describe(&f, 0), Parsed::Malformed(_)));
        f.truncate(20);
        assert!(matches!(describe(&f, 0), Parsed::Malformed(_)));
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            let _ = describe(&junk, 0);
        }
    }

    #[test]
    fn pool_reuses_slots_and_refuses_past_its_limit() {
        let mut p = Pool::new(2);
        let a = p.put(b"aa").unwrap();
        let b = p.put(b"bbb").unwrap();
        assert!(p.put(b"c").is_none());
        assert_eq!(p.get(b), b"bbb");
        p.free(a);
        let c = p.put(b"c").unwrap();
        assert_eq!(c, a);
        assert_eq!(p.get(c), b"c");
        assert_eq!(p.in_use(), 2);
    }
}
