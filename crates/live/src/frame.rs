//! The buffer pool that holds frames while the engine holds their payload handles, and the
//! write-back of a TOS byte a qdisc changed (CE marks).
//!
//! Parsing and classification are the engine's ([`sluice_engine::Engine::ingress_frame`]).

use crate::offload::{complete_checksum, Refusal, VnetHdr};
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
    /// Per slot: the frame's `virtio_net_hdr`, network header offset and the TOS byte as
    /// received (to rewrite a CE mark).
    meta: Vec<Meta>,
    free: Vec<u32>,
    max: usize,
    /// Bytes the slots' buffers hold, and the most they may (super-packets grow a slot to 64 KiB).
    bytes: usize,
    max_bytes: usize,
}

#[derive(Clone, Copy, Default)]
struct Meta {
    vnet: VnetHdr,
    net_off: u16,
    ds: u8,
}

/// Bytes a slot starts with: one MTU frame.
const SLOT_BYTES: usize = 2048;

impl Pool {
    /// A pool that holds at most `max` frames and `max_bytes` of buffers at once.
    pub fn new(max: usize, max_bytes: usize) -> Pool {
        Pool { slots: Vec::new(), meta: Vec::new(), free: Vec::new(), max, bytes: 0, max_bytes }
    }

    /// Copy `frame` in with its header; None when the pool is full.
    pub fn put(&mut self, frame: &[u8], vnet: VnetHdr) -> Option<u64> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if self.slots.len() < self.max && self.bytes + SLOT_BYTES <= self.max_bytes => {
                self.slots.push(Vec::with_capacity(SLOT_BYTES));
                self.bytes += SLOT_BYTES;
                self.meta.push(Meta::default());
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let s = &mut self.slots[id as usize];
        s.clear();
        if frame.len() > s.capacity() {
            let old = s.capacity();
            if self.bytes - old + frame.len() > self.max_bytes {
                self.free.push(id);
                return None;
            }
            s.reserve_exact(frame.len());
            self.bytes = self.bytes - old + s.capacity();
        }
        s.extend_from_slice(frame);
        let off = network_offset(frame);
        let ds = if off > 0 { sluice_wire::read_dsfield(frame, off).unwrap_or(0) } else { 0 };
        self.meta[id as usize] = Meta { vnet, net_off: off as u16, ds };
        Some(id as u64)
    }

    /// The frame in slot `id`.
    pub fn get(&self, id: u64) -> &[u8] {
        self.slots.get(slot_index(id)).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The `virtio_net_hdr` of slot `id`.
    pub fn vnet(&self, id: u64) -> VnetHdr {
        self.meta.get(slot_index(id)).map(|m| m.vnet).unwrap_or_default()
    }

    /// Prepares the frame in slot `id` for sending: the descriptor's TOS byte written back if a
    /// qdisc changed it (a CE mark from fq_codel/CoDel), and netem's corruption applied.
    /// Err: the frame cannot be sent correctly (count it, free the slot, do not send it).
    ///
    /// A payload netem chose to corrupt ([`CORRUPT_FLAG`]) has one bit flipped, in its last
    /// byte (the kernel flips a random bit of the linear data; the last byte keeps the
    /// headers the frame is forwarded by intact, so the receiver's checksum catches it). A
    /// partial checksum is completed first, as the kernel's netem does, so that it covers the
    /// data before the flip; a super-packet is refused (its segments' checksums would be
    /// computed after the flip).
    pub fn finish(&mut self, id: u64, dsfield: u8) -> Result<(), Refusal> {
        let i = slot_index(id);
        let (Some(buf), Some(m)) = (self.slots.get_mut(i), self.meta.get_mut(i)) else { return Ok(()) };
        if m.net_off > 0 && m.ds != dsfield {
            // A frame whose header cannot take the byte is sent as it is.
            let _ = sluice_wire::write_dsfield(buf, m.net_off as usize, dsfield);
            m.ds = dsfield;
        }
        if id & CORRUPT_FLAG != 0 {
            if m.vnet.is_gso() {
                return Err(Refusal::CorruptSuperPacket);
            }
            if m.vnet.needs_csum() {
                if !complete_checksum(buf, m.vnet.csum_start, m.vnet.csum_offset) {
                    return Err(Refusal::BadChecksumRange);
                }
                m.vnet.flags &= !VnetHdr::NEEDS_CSUM;
            }
            if let Some(b) = buf.last_mut() {
                *b ^= 1;
            }
        }
        Ok(())
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

    const NONE: VnetHdr =
        VnetHdr { flags: 0, gso_type: 0, hdr_len: 0, gso_size: 0, csum_start: 0, csum_offset: 0 };

    #[test]
    fn a_ce_mark_is_written_back_with_a_valid_checksum() {
        let mut pool = Pool::new(4, 1 << 20);
        let id = pool.put(&ipv4_udp(0x02, 1), NONE).unwrap(); // ECT(0)
        let mut p = sluice_wire::parse_frame(pool.get(id), Default::default()).unwrap().to_packet(id);
        assert!(p.set_ce());
        pool.finish(id, p.dsfield).unwrap();
        let again = sluice_wire::parse_frame(pool.get(id), sluice_wire::ParseOptions::default()).unwrap();
        assert_eq!(again.dsfield, 0x03);
        // Unchanged TOS: the frame goes out byte for byte.
        let id2 = pool.put(&ipv4_udp(0x00, 2), NONE).unwrap();
        pool.finish(id2, 0).unwrap();
        assert_eq!(pool.get(id2), &ipv4_udp(0x00, 2)[..]);
    }

    #[test]
    fn pool_reuses_slots_and_refuses_past_its_limits() {
        let mut p = Pool::new(2, 1 << 20);
        let a = p.put(b"aa", NONE).unwrap();
        let b = p.put(b"bbb", NONE).unwrap();
        assert!(p.put(b"c", NONE).is_none());
        assert_eq!(p.get(b), b"bbb");
        p.free(a);
        let v = VnetHdr { gso_size: 7, ..NONE };
        let c = p.put(b"c", v).unwrap();
        assert_eq!(c, a);
        assert_eq!((p.get(c), p.vnet(c)), (&b"c"[..], v));
        assert_eq!(p.in_use(), 2);
        // Bytes: a super-packet grows its slot only within the budget.
        let mut p = Pool::new(100, 3 * SLOT_BYTES);
        let big = vec![7u8; 2 * SLOT_BYTES];
        let x = p.put(&big, NONE).unwrap();
        assert_eq!(p.get(x).len(), big.len());
        assert!(p.put(&big, NONE).is_none(), "a second one does not fit");
        let y = p.put(b"small", NONE).unwrap();
        p.free(y);
        p.free(x);
        // The grown slot is reused without growing again.
        assert!(p.put(&big, NONE).is_some());
    }

    #[test]
    fn a_corrupted_payload_goes_out_with_one_bit_flipped_and_frees_its_slot() {
        let mut p = Pool::new(1, 1 << 20);
        let frame = ipv4_udp(0, 3);
        let id = p.put(&frame, NONE).unwrap() | CORRUPT_FLAG;
        p.finish(id, 0).unwrap();
        let out = p.get(id).to_vec();
        assert_eq!(out.len(), frame.len());
        let diff: Vec<usize> = (0..out.len()).filter(|&i| out[i] != frame[i]).collect();
        assert_eq!(diff, vec![frame.len() - 1]);
        assert_eq!((out[frame.len() - 1] ^ frame[frame.len() - 1]).count_ones(), 1);
        p.free(id);
        assert_eq!(p.in_use(), 0);
    }

    #[test]
    fn corruption_of_offloaded_frames_keeps_the_receiver_able_to_see_it() {
        let mut p = Pool::new(2, 1 << 20);
        // A partial checksum is completed before the flip, and the frame then goes out whole.
        let frame = ipv4_udp(0, 4);
        let partial = VnetHdr { flags: VnetHdr::NEEDS_CSUM, csum_start: 34, csum_offset: 6, ..NONE };
        let id = p.put(&frame, partial).unwrap() | CORRUPT_FLAG;
        p.finish(id, 0).unwrap();
        assert!(!p.vnet(id).needs_csum());
        // A super-packet cannot be corrupted so that the receiver sees it: refused.
        let gso = VnetHdr { gso_type: VnetHdr::GSO_UDP_L4, gso_size: 50, ..partial };
        let id2 = p.put(&frame, gso).unwrap() | CORRUPT_FLAG;
        assert_eq!(p.finish(id2, 0), Err(Refusal::CorruptSuperPacket));
    }
}
