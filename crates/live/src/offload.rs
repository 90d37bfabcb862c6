//! Offloads: the `virtio_net_hdr` that packet sockets exchange with `PACKET_VNET_HDR`, what a
//! GSO/GRO super-packet costs on the wire, and completing a partial checksum in software.
//!
//! With offloads on, the frames a packet socket sees are not always wire frames: a TCP sender
//! with TSO (or GRO on the receiving side) hands over one super-packet of up to 64 KiB whose
//! segments the driver (or the kernel's software GSO) cuts later, and a frame whose checksum
//! was left to the NIC carries only the pseudo-header sum (`CHECKSUM_PARTIAL`). The header says
//! which: `gso_type`/`gso_size` for the segments, `NEEDS_CSUM` with `csum_start`/`csum_offset`
//! for the checksum. The shaper keeps the header with the frame and sends it back with it, so
//! the kernel segments and fills the checksum on the way out, as it would have for a bridge.

/// Bytes of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

/// `struct virtio_net_hdr` (little-endian fields: packet sockets use the legacy layout in the
/// host's byte order, and every host this runs on is little-endian).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// [`VnetHdr::NEEDS_CSUM`], [`VnetHdr::DATA_VALID`].
    pub flags: u8,
    /// [`VnetHdr::GSO_TCPV4`] etc., with [`VnetHdr::GSO_ECN`] or'ed in.
    pub gso_type: u8,
    /// Length of the headers before the payload (a hint; the kernel recomputes it).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed range starts (the transport header), from the frame's start.
    pub csum_start: u16,
    /// Where in that range the checksum field is.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// The checksum is partial: sum from `csum_start`, store at `csum_start + csum_offset`.
    pub const NEEDS_CSUM: u8 = 1;
    /// The checksum was verified on receipt.
    pub const DATA_VALID: u8 = 2;
    /// TCP over IPv4 segments.
    pub const GSO_TCPV4: u8 = 1;
    /// UDP fragmentation offload (UFO, gone from Linux).
    pub const GSO_UDP: u8 = 3;
    /// TCP over IPv6 segments.
    pub const GSO_TCPV6: u8 = 4;
    /// UDP segmentation (USO, `UDP_SEGMENT`).
    pub const GSO_UDP_L4: u8 = 5;
    /// Flag: the TCP segments carry ECN's CWR.
    pub const GSO_ECN: u8 = 0x80;

    /// Reads a header.
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        }
    }

    /// Writes a header.
    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        for (i, v) in [self.hdr_len, self.gso_size, self.csum_start, self.csum_offset].into_iter().enumerate()
        {
            b[2 + 2 * i..4 + 2 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// A super-packet the kernel must segment.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !Self::GSO_ECN != 0
    }

    /// The checksum still has to be filled in.
    pub fn needs_csum(&self) -> bool {
        self.flags & Self::NEEDS_CSUM != 0
    }

    /// The header to send `frame` with: the segmentation and partial checksum as received (the
    /// kernel rebuilds its skb from them). `DATA_VALID` means nothing on transmit and is dropped.
    pub fn for_send(&self) -> VnetHdr {
        VnetHdr { flags: self.flags & Self::NEEDS_CSUM, ..*self }
    }
}

/// Why a frame cannot be forwarded correctly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A super-packet whose checksum is not marked partial: the kernel could not fill the
    /// segments' checksums, so its segments would leave with wrong ones.
    GsoWithoutPartialChecksum,
    /// A segmentation type the shaper does not know how to account for.
    UnknownGso,
    /// A partial checksum whose range lies outside the frame.
    BadChecksumRange,
    /// netem chose to corrupt a super-packet: its segments' checksums are computed after the
    /// corruption, so the receiver could not catch it (the kernel segments first; not done here).
    CorruptSuperPacket,
}

impl Refusal {
    /// Every refusal, in the order of [`Refusal::index`].
    pub const ALL: [Refusal; 4] = [
        Refusal::GsoWithoutPartialChecksum,
        Refusal::UnknownGso,
        Refusal::BadChecksumRange,
        Refusal::CorruptSuperPacket,
    ];

    /// Index into a counter array.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Name in stats.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::GsoWithoutPartialChecksum => "gso-without-partial-checksum",
            Refusal::UnknownGso => "unknown-gso-type",
            Refusal::BadChecksumRange => "bad-checksum-range",
            Refusal::CorruptSuperPacket => "netem-corrupt-super-packet",
        }
    }
}

/// What a frame stands for on the wire: [`sluice_core::Packet`]'s `len`, `gso_segs` and
/// `gso_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wire {
    /// Layer-2 bytes of every segment, headers repeated (the kernel's `qdisc_pkt_len_init`).
    pub len: u32,
    /// Segments (1 for an ordinary frame).
    pub segs: u16,
    /// Layer-2 bytes of each full segment (0 for an ordinary frame).
    pub seg_len: u32,
}

impl Wire {
    /// An ordinary frame.
    pub fn single(frame: &[u8]) -> Wire {
        Wire { len: u32::try_from(frame.len()).unwrap_or(u32::MAX), segs: 1, seg_len: 0 }
    }

    /// Sets `pkt`'s length and segments.
    pub fn apply(&self, pkt: &mut sluice_core::Packet) {
        (pkt.len, pkt.gso_segs, pkt.gso_size) = (self.len, self.segs, self.seg_len);
    }
}

/// Checks that `frame` with header `v` can be sent as it is, and returns what it stands for on
/// the wire.
pub fn check(v: &VnetHdr, frame: &[u8]) -> Result<Wire, Refusal> {
    let single = Wire::single(frame);
    if v.needs_csum() {
        let at = v.csum_start as usize + v.csum_offset as usize;
        if at + 2 > frame.len() {
            return Err(Refusal::BadChecksumRange);
        }
    }
    if !v.is_gso() {
        return Ok(single);
    }
    if !v.needs_csum() {
        return Err(Refusal::GsoWithoutPartialChecksum);
    }
    let l4 = v.csum_start as usize;
    let l4_len = match v.gso_type & !VnetHdr::GSO_ECN {
        VnetHdr::GSO_TCPV4 | VnetHdr::GSO_TCPV6 => match frame.get(l4 + 12) {
            Some(b) => ((b >> 4) as usize * 4).max(20),
            None => return Err(Refusal::BadChecksumRange),
        },
        VnetHdr::GSO_UDP_L4 => 8,
        _ => return Err(Refusal::UnknownGso),
    };
    let hdr = l4 + l4_len;
    let mss = v.gso_size as usize;
    if mss == 0 || hdr > frame.len() {
        return Err(Refusal::UnknownGso);
    }
    let segs = (frame.len() - hdr).div_ceil(mss).max(1);
    if segs == 1 {
        return Ok(single);
    }
    let Ok(segs16) = u16::try_from(segs) else { return Err(Refusal::UnknownGso) };
    let len = frame.len() + (segs - 1) * hdr;
    Ok(Wire { len: u32::try_from(len).unwrap_or(u32::MAX), segs: segs16, seg_len: (hdr + mss) as u32 })
}

/// One's-complement sum of `data` folded to 16 bits (not inverted).
fn sum16(data: &[u8], mut acc: u64) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        acc += (*last as u64) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Completes a partial checksum in place, as the kernel's `skb_checksum_help` does: the field
/// holds the pseudo-header sum; the sum over `[csum_start, end)` is folded, inverted and stored.
/// Returns false (changing nothing) if the range lies outside the frame.
pub fn complete_checksum(frame: &mut [u8], csum_start: u16, csum_offset: u16) -> bool {
    let (start, at) = (csum_start as usize, csum_start as usize + csum_offset as usize);
    if at + 2 > frame.len() {
        return false;
    }
    let mut c = !sum16(&frame[start..], 0);
    // A UDP checksum of 0 means "none": the kernel's UDP code sends 0xffff instead.
    if c == 0 && csum_offset == 6 {
        c = 0xffff;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Super-packets are cut into wire segments before they are queued when the direction's
/// slowest HTB class runs below this rate (CAKE's `split-gso` rule): there, one 64 KiB
/// super-packet holds the link for milliseconds (10 ms at 50 Mbit/s) and every other flow's
/// packets wait behind it.
pub const SPLIT_BELOW_BPS: u64 = 1_000_000_000;

/// Cuts a TCP or UDP super-packet into the frames the kernel's GSO would send, with complete
/// checksums, handing each to `f` (the segment is built in `buf`, reused across calls).
/// `frame` must have passed [`check`] with more than one segment.
pub fn segment(
    v: &VnetHdr,
    frame: &[u8],
    buf: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]),
) -> Result<(), Refusal> {
    let w = check(v, frame)?;
    let l3 = crate::frame::network_offset(frame);
    let l4 = v.csum_start as usize;
    let hdr = w.seg_len as usize - v.gso_size as usize;
    let mss = v.gso_size as usize;
    let v4 = match frame.get(l3).map(|b| b >> 4) {
        Some(4) if l3 > 0 && l3 + 20 <= l4 => true,
        Some(6) if l3 > 0 && l3 + 40 <= l4 => false,
        _ => return Err(Refusal::UnknownGso),
    };
    let tcp = matches!(v.gso_type & !VnetHdr::GSO_ECN, VnetHdr::GSO_TCPV4 | VnetHdr::GSO_TCPV6);
    let proto: u8 = if tcp { 6 } else { 17 };
    let rd16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let id = rd16(frame, l3 + 4);
    let seq = if tcp {
        u32::from_be_bytes([frame[l4 + 4], frame[l4 + 5], frame[l4 + 6], frame[l4 + 7]])
    } else {
        0
    };
    let segs = w.segs as usize;
    for i in 0..segs {
        let payload = &frame[hdr + i * mss..(hdr + (i + 1) * mss).min(frame.len())];
        buf.clear();
        buf.extend_from_slice(&frame[..hdr]);
        buf.extend_from_slice(payload);
        let total = buf.len();
        if v4 {
            buf[l3 + 2..l3 + 4].copy_from_slice(&((total - l3) as u16).to_be_bytes());
            buf[l3 + 4..l3 + 6].copy_from_slice(&id.wrapping_add(i as u16).to_be_bytes());
            let ihl = (buf[l3] & 0x0f) as usize * 4;
            buf[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
            let c = !sum16(&buf[l3..l3 + ihl.max(20)], 0);
            buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            buf[l3 + 4..l3 + 6].copy_from_slice(&((total - l3 - 40) as u16).to_be_bytes());
        }
        let l4_len = total - l4;
        if tcp {
            let s = seq.wrapping_add((i * mss) as u32);
            buf[l4 + 4..l4 + 8].copy_from_slice(&s.to_be_bytes());
            if i + 1 < segs {
                buf[l4 + 13] &= !0x09; // FIN and PSH only on the last segment
            }
            if i > 0 {
                buf[l4 + 13] &= !0x80; // CWR only on the first
            }
        } else {
            buf[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        }
        // The full checksum over the pseudo-header and the segment.
        let at = l4 + v.csum_offset as usize;
        buf[at..at + 2].copy_from_slice(&[0, 0]);
        let mut acc: u64 = proto as u64 + l4_len as u64;
        let addrs = if v4 { &buf[l3 + 12..l3 + 20] } else { &buf[l3 + 8..l3 + 40] };
        acc += sum16(addrs, 0) as u64;
        let mut c = !sum16(&buf[l4..], acc);
        if c == 0 && !tcp {
            c = 0xffff;
        }
        buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
        f(buf);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn udp_frame(payload: usize) -> Vec<u8> {
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        sluice_wire::FrameSpec::udp(a, b, 1000, 2000, payload).build().unwrap()
    }

    /// The one's-complement sum over the UDP datagram and its pseudo-header: 0xffff when the
    /// checksum is right.
    fn udp_verifies(f: &[u8]) -> bool {
        let ip = &f[14..34];
        let udp = &f[34..];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        let acc = sum16(&pseudo, 0) as u64;
        sum16(udp, acc) == 0xffff
    }

    #[test]
    fn headers_round_trip_and_name_their_kind() {
        let v = VnetHdr {
            flags: 1,
            gso_type: VnetHdr::GSO_TCPV4 | VnetHdr::GSO_ECN,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        assert_eq!(VnetHdr::from_bytes(&v.to_bytes()), v);
        assert!(v.is_gso() && v.needs_csum());
        assert_eq!(VnetHdr { flags: 3, ..v }.for_send().flags, 1);
        assert!(!VnetHdr::default().is_gso());
    }

    #[test]
    fn a_partial_checksum_is_completed_like_the_kernel_does() {
        let good = udp_frame(333);
        assert!(udp_verifies(&good));
        // Make it partial: the field holds the (non-inverted) pseudo-header sum.
        let mut f = good.clone();
        let ip = &f[14..34];
        let mut pseudo = ip[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&((f.len() - 34) as u16).to_be_bytes());
        let seed = sum16(&pseudo, 0);
        f[40..42].copy_from_slice(&seed.to_be_bytes());
        assert!(!udp_verifies(&f));
        assert!(complete_checksum(&mut f, 34, 6));
        assert!(udp_verifies(&f));
        assert!(!complete_checksum(&mut f, 34, 60_000), "a range outside the frame is refused");
    }

    #[test]
    fn a_super_packet_is_charged_per_segment() {
        // Ethernet 14 + IPv4 20 + TCP 32 = 66 bytes of headers, 10 000 bytes of payload, MSS 1448.
        let mut f = vec![0u8; 66 + 10_000];
        f[34 + 12] = 8 << 4; // TCP data offset: 8 words
        let v = VnetHdr {
            flags: VnetHdr::NEEDS_CSUM,
            gso_type: VnetHdr::GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let w = check(&v, &f).unwrap();
        assert_eq!((w.segs, w.seg_len, w.len), (7, 66 + 1448, 66 * 7 + 10_000));
        // What the core charges: six full 1514-byte segments and the rest with its headers.
        let mut p = sluice_core::Packet::new(f.len() as u32, 0);
        w.apply(&mut p);
        let wire = sluice_core::WireSpec::default().packet_cost(&p);
        assert_eq!(wire, 6 * 1514 + (66 + 10_000 - 6 * 1448) as u64);
        // With a per-packet overhead, every segment pays it.
        let atm = sluice_core::WireSpec { overhead: 24, ..Default::default() };
        assert_eq!(atm.packet_cost(&p), wire + 7 * 24);
        assert_eq!(check(&VnetHdr { flags: 0, ..v }, &f), Err(Refusal::GsoWithoutPartialChecksum));
        assert_eq!(check(&VnetHdr { gso_type: 9, ..v }, &f), Err(Refusal::UnknownGso));
        assert_eq!(check(&VnetHdr { csum_start: 20_000, ..v }, &f), Err(Refusal::BadChecksumRange));
        assert_eq!(check(&VnetHdr::default(), &f).unwrap().segs, 1);
        let udp = VnetHdr { gso_type: VnetHdr::GSO_UDP_L4, csum_offset: 6, gso_size: 1000, ..v };
        let w = check(&udp, &f[..34 + 8 + 2500]).unwrap();
        assert_eq!((w.segs, w.seg_len, w.len), (3, 34 + 8 + 1000, 3 * 42 + 2500));
    }

    /// A TCP/IPv4 super-packet as TSO hands it over: headers of the whole, a partial checksum.
    fn tcp_super(payload: usize, mss: u16) -> (VnetHdr, Vec<u8>) {
        let (a, b) = (IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)));
        let mut f = sluice_wire::FrameSpec::udp(a, b, 1000, 2000, 0).build().unwrap();
        f.truncate(34);
        f[23] = 6; // protocol TCP
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&1000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&2000u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&0xffff_fff0u32.to_be_bytes()); // the sequence wraps
        tcp[12] = 5 << 4;
        tcp[13] = 0x18 | 0x80 | 0x01; // ACK PSH CWR FIN
        f.extend_from_slice(&tcp);
        f.extend((0..payload).map(|k| (k * 7 % 251) as u8));
        let tot = (f.len() - 14) as u16;
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        let v = VnetHdr {
            flags: VnetHdr::NEEDS_CSUM,
            gso_type: VnetHdr::GSO_TCPV4,
            hdr_len: 54,
            gso_size: mss,
            csum_start: 34,
            csum_offset: 16,
        };
        (v, f)
    }

    fn tcp_verifies(f: &[u8]) -> bool {
        let mut pseudo = f[26..34].to_vec();
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&((f.len() - 34) as u16).to_be_bytes());
        sum16(&f[34..], sum16(&pseudo, 0) as u64) == 0xffff && sum16(&f[14..34], 0) == 0xffff
    }

    #[test]
    fn a_super_packet_is_cut_into_the_segments_gso_would_send() {
        let (v, f) = tcp_super(3000, 1448);
        let mut buf = Vec::new();
        let mut out: Vec<Vec<u8>> = Vec::new();
        segment(&v, &f, &mut buf, |s| out.push(s.to_vec())).unwrap();
        assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), vec![1502, 1502, 54 + 104]);
        let mut payload = Vec::new();
        for (i, s) in out.iter().enumerate() {
            assert!(tcp_verifies(s), "segment {i}: bad checksum");
            assert_eq!(u16::from_be_bytes([s[16], s[17]]) as usize, s.len() - 14);
            let seq = u32::from_be_bytes([s[38], s[39], s[40], s[41]]);
            assert_eq!(seq, 0xffff_fff0u32.wrapping_add(1448 * i as u32));
            let flags = s[47];
            assert_eq!(flags & 0x80 != 0, i == 0, "CWR on the first segment only");
            assert_eq!(flags & 0x09 != 0, i == 2, "FIN/PSH on the last only");
            payload.extend_from_slice(&s[54..]);
        }
        assert_eq!(payload, f[54..].to_vec());
        // What the segments weigh is what `check` charged for the whole.
        let w = check(&v, &f).unwrap();
        assert_eq!(out.iter().map(Vec::len).sum::<usize>(), w.len as usize);
    }
}
