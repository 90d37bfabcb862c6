//! The buffer pool that holds frames while the engine holds their payload handles, and the
//! write-back of a TOS byte a qdisc changed (CE marks).
//!
//! Parsing and classification are the engine's ([`sluice_engine::Engine::ingress_frame`]).

use sluice_core::netem::CORRUPT_FLAG;

/// The pool slot a payload handle names (without netem's corruption mark).
fn slot_index(id: u64) -> usize {
    (id & !CORRUPT_FLAG) as usize
}

/// Offset of the network header after Ethernet and any VLAN tags (0 if the frame has no IP).
pub fn network_offset(frame: &[u8]) -> usize {
    if frame.len() < 14 {
        return 0;
    }
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    while matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) && frame.len() >= off + 6 {
        off += 4;
        ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
    }
    if matches!(ethertype, 0x0800 | 0x86dd) {
        off + 2
    } else {
        0
    }
}

/// Frame storage addressed by the descriptor's `payload` handle. Slots are reused; nothing is
/// allocated once the pool has grown to the working set.
pub struct Pool {
    slots: Vec<Vec<u8>>,
    /// Per slot: network header offset and the TOS byte as received (to rewrite a CE mark).
    meta: Vec<(u16, u8)>,
    free: Vec<u32>,
    max: usize,
}

impl Pool {
    /// A pool that holds at most `max` frames at once.
    pub fn new(max: usize) -> Pool {
        Pool { slots: Vec::new(), meta: Vec::new(), free: Vec::new(), max }
    }

    /// Copy `frame` in; None when the pool is full.
    pub fn put(&mut self, frame: &[u8]) -> Option<u64> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if self.slots.len() < self.max => {
                self.slots.push(Vec::with_capacity(2048));
                self.meta.push((0, 0));
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let s = &mut self.slots[id as usize];
        s.clear();
        s.extend_from_slice(frame);
        let off = network_offset(frame);
        let ds = if off > 0 { sluice_wire::read_dsfield(frame, off).unwrap_or(0) } else { 0 };
        self.meta[id as usize] = (off as u16, ds);
        Some(id as u64)
    }

    /// The frame in slot `id`.
    pub fn get(&self, id: u64) -> &[u8] {
        self.slots.get(slot_index(id)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The frame in slot `id`, with the descriptor's TOS byte written back if a qdisc changed it
    /// (a CE mark from fq_codel/CoDel). Returns the bytes to send.
    ///
    /// A payload netem chose to corrupt ([`CORRUPT_FLAG`]) has one bit flipped, in its last
    /// byte (the kernel flips a random bit of the linear data; the last byte keeps the
    /// headers the frame is forwarded by intact, so the receiver's checksum catches it).
    pub fn finish(&mut self, id: u64, dsfield: u8) -> &[u8] {
        let i = slot_index(id);
        if id & CORRUPT_FLAG != 0 {
            if let Some(b) = self.slots.get_mut(i).and_then(|s| s.last_mut()) {
                *b ^= 1;
            }
        }
        let Some(buf) = self.slots.get_mut(i) else { return &[] };
        let (off, ds) = self.meta[i];
        if off > 0 && ds != dsfield {
            // A frame whose header cannot take the byte is sent as it is.
            let _ = sluice_wire::write_dsfield(buf, off as usize, dsfield);
        }
        buf
    }

    /// Release slot `id`.
    pub fn free(&mut self, id: u64) {
        if slot_index(id) < self.slots.len() {
            self.free.push(slot_index(id) as u32);
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
        use std::net::{IpAddr, Ipv4Addr};
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        let mut spec = sluice_wire::FrameSpec::udp(a, b, sport, 9, 100);
        spec.dsfield = tos;
        spec.build().unwrap()
    }

    #[test]
    fn a_ce_mark_is_written_back_with_a_valid_checksum() {
        let mut pool = Pool::new(4);
        let id = pool.put(&ipv4_udp(0x02, 1)).unwrap(); // ECT(0)
        let mut p = sluice_wire::parse_frame(pool.get(id), Default::default()).unwrap().to_packet(id);
        assert!(p.set_ce());
        let out = pool.finish(id, p.dsfield).to_vec();
        let again = sluice_wire::parse_frame(&out, sluice_wire::ParseOptions::default()).unwrap();
        assert_eq!(again.dsfield, 0x03);
        // Unchanged TOS: the frame goes out byte for byte.
        let id2 = pool.put(&ipv4_udp(0x00, 2)).unwrap();
        assert_eq!(pool.finish(id2, 0), &ipv4_udp(0x00, 2)[..]);
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

    #[test]
    fn a_corrupted_payload_goes_out_with_one_bit_flipped_and_frees_its_slot() {
        let mut p = Pool::new(1);
        let frame = ipv4_udp(0, 3);
        let id = p.put(&frame).unwrap() | CORRUPT_FLAG;
        let out = p.finish(id, 0).to_vec();
        assert_eq!(out.len(), frame.len());
        let diff: Vec<usize> = (0..out.len()).filter(|&i| out[i] != frame[i]).collect();
        assert_eq!(diff, vec![frame.len() - 1]);
        assert_eq!((out[frame.len() - 1] ^ frame[frame.len() - 1]).count_ones(), 1);
        assert_eq!(p.get(id), &out[..]);
        p.free(id);
        assert_eq!(p.in_use(), 0);
    }
}
