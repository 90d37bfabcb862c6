//! What a qdisc may read of a TCP segment's header without the packet's bytes: the fields CAKE's
//! ACK filter compares (`cake_ack_filter` in `sch_cake.c`), parsed once when the packet is
//! described (by the frame parser on the live path, by the simulator from its TCP model).

/// FIN.
pub const TCP_FIN: u16 = 0x01;
/// SYN.
pub const TCP_SYN: u16 = 0x02;
/// RST.
pub const TCP_RST: u16 = 0x04;
/// PSH.
pub const TCP_PSH: u16 = 0x08;
/// ACK.
pub const TCP_ACK: u16 = 0x10;
/// URG.
pub const TCP_URG: u16 = 0x20;
/// ECE.
pub const TCP_ECE: u16 = 0x40;
/// CWR.
pub const TCP_CWR: u16 = 0x80;

/// Most SACK blocks one option can hold (40 option bytes: (40 - 2) / 8).
pub const MAX_SACK_BLOCKS: usize = 4;

/// The header fields of one TCP segment that CAKE's ACK filter reads.
///
/// Two segments belong to the same connection when their ports, IP version and flow hash
/// ([`crate::Packet::flow_hash`], a hash of the 5-tuple) are equal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The flag byte (`TCP_*`) with the header's four reserved bits above it (bits 8-11).
    pub flags: u16,
    /// IP version (4 or 6).
    pub ip_version: u8,
    /// True if an option forbids dropping this segment as a redundant ACK: MSS, window scale,
    /// SACK-permitted, Fast Open, experimental or unknown options, a SACK option whose length
    /// is not 2 + 8n, or a timestamp option whose length is not 10.
    pub keep_options: bool,
    /// True if the first timestamp option found has the right length (`tsval`, `tsecr` valid).
    pub has_ts: bool,
    /// Cumulative acknowledgement number.
    pub ack: u32,
    /// Bytes of segment data after the TCP header.
    pub payload_len: u32,
    /// Timestamp value (0 without a valid timestamp option).
    pub tsval: u32,
    /// Timestamp echo reply.
    pub tsecr: u32,
    /// Blocks of the first SACK option (`start`, `end`), `sack_blocks` of them valid.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    /// Number of valid SACK blocks.
    pub sack_blocks: u8,
}

/// `a` is later than `b` in sequence space (`after()`).
#[inline]
pub fn seq_after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

/// `a` is earlier than `b` in sequence space (`before()`).
#[inline]
pub fn seq_before(a: u32, b: u32) -> bool {
    seq_after(b, a)
}

impl TcpInfo {
    /// Parses the TCP header at the start of `seg` (header, then its data: `seg` ends where the
    /// IP payload ends). `None` if it is too short or its data offset is below 5 words.
    pub fn parse(seg: &[u8], ip_version: u8) -> Option<TcpInfo> {
        if seg.len() < 20 {
            return None;
        }
        let doff = (seg[12] >> 4) as usize * 4;
        if doff < 20 || doff > seg.len() {
            return None;
        }
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let mut t = TcpInfo {
            sport: u16::from_be_bytes([seg[0], seg[1]]),
            dport: u16::from_be_bytes([seg[2], seg[3]]),
            flags: ((seg[12] & 0x0F) as u16) << 8 | seg[13] as u16,
            ip_version,
            ack: be32(&seg[8..]),
            payload_len: (seg.len() - doff) as u32,
            ..TcpInfo::default()
        };
        // The option walk of `tcp_parse_options`: it stops at EOL or at a malformed length.
        let opts = &seg[20..doff];
        let mut i = 0;
        let mut seen_ts = false;
        let mut seen_sack = false;
        while i < opts.len() {
            let code = opts[i];
            if code == 0 {
                break;
            }
            if code == 1 {
                i += 1;
                continue;
            }
            let left = opts.len() - i;
            if left < 2 {
                break;
            }
            let size = opts[i + 1] as usize;
            if size < 2 || size > left {
                break;
            }
            let body = &opts[i + 2..i + size];
            match code {
                19 => {} // MD5 signature: no state
                5 => {
                    if size % 8 != 2 {
                        t.keep_options = true;
                    }
                    if !seen_sack {
                        seen_sack = true;
                        let n = ((size - 2) / 8).min(MAX_SACK_BLOCKS);
                        for (k, b) in body.chunks_exact(8).take(n).enumerate() {
                            t.sack[k] = (be32(b), be32(&b[4..]));
                        }
                        t.sack_blocks = n as u8;
                    }
                }
                8 => {
                    if size != 10 {
                        t.keep_options = true;
                    } else if seen_ts {
                        // A second timestamp: the kernel compares each; keep it to be safe.
                        t.keep_options = true;
                    } else {
                        t.has_ts = true;
                        t.tsval = be32(body);
                        t.tsecr = be32(&body[4..]);
                    }
                    seen_ts = true;
                }
                _ => t.keep_options = true,
            }
            i += size;
        }
        Some(t)
    }

    /// True if this segment may trigger the filter: ACK set, SYN clear.
    pub fn is_ack_trigger(&self) -> bool {
        self.flags & (TCP_ACK | TCP_SYN) == TCP_ACK
    }

    /// `cake_tcph_may_drop`: a pure ACK by its flags and options, with timestamps no newer than
    /// the triggering segment's (`tsval`, `tsecr`).
    pub fn may_drop(&self, tsval: u32, tsecr: u32) -> bool {
        // Reserved bits, URG, PSH, RST, SYN, FIN clear; ACK set; ECE and CWR judged elsewhere.
        if self.flags & 0x0F3F != TCP_ACK || self.keep_options {
            return false;
        }
        !(self.has_ts && (seq_after(self.tsval, tsval) || seq_after(self.tsecr, tsecr)))
    }

    /// ECE and CWR.
    pub fn ecn_flags(&self) -> u16 {
        self.flags & (TCP_ECE | TCP_CWR)
    }

    /// `cake_tcph_sack_compare(self, b)`: 1 if `b` SACKs everything `self` does and more bytes,
    /// 0 if the same bytes (or neither SACKs), -1 if `self` SACKs something `b` does not or has
    /// a D-SACK block (below its cumulative ACK).
    pub fn sack_compare(&self, b: &TcpInfo) -> i32 {
        let sa = &self.sack[..self.sack_blocks as usize];
        let sb = &b.sack[..b.sack_blocks as usize];
        match (sa.is_empty(), sb.is_empty()) {
            (false, true) => return -1,
            (true, false) => return 1,
            (true, true) => return 0,
            (false, false) => {}
        }
        let bytes_b = sb.iter().fold(0u32, |s, &(x, y)| s.wrapping_add(y.wrapping_sub(x)));
        let mut bytes_a = 0u32;
        for &(start_a, end_a) in sa {
            if seq_before(start_a, self.ack) {
                return -1;
            }
            bytes_a = bytes_a.wrapping_add(end_a.wrapping_sub(start_a));
            let covered =
                sb.iter().any(|&(start_b, end_b)| !seq_after(start_b, start_a) && !seq_before(end_b, end_a));
            if !covered {
                return -1;
            }
        }
        if bytes_b > bytes_a {
            1
        } else {
            0
        }
    }

    /// True if `self` and `other` carry the same ports and IP version (the caller compares
    /// the flow hashes, which cover the addresses).
    pub fn same_ports(&self, other: &TcpInfo) -> bool {
        self.ip_version == other.ip_version && self.sport == other.sport && self.dport == other.dport
    }

    /// True if `self`, a segment of the same connection queued before `newer` (the triggering
    /// segment), is a pure ACK that `newer` makes redundant: no data, safe flags and options,
    /// a cumulative ACK no later than `newer`'s, and SACK blocks `newer` covers, with `newer`
    /// acknowledging more (a later cumulative ACK or more SACKed bytes).
    pub fn made_redundant_by(&self, newer: &TcpInfo) -> bool {
        if !self.may_drop(newer.tsval, newer.tsecr) || self.payload_len != 0 || seq_after(self.ack, newer.ack)
        {
            return false;
        }
        match self.sack_compare(newer) {
            c if c < 0 => false,
            0 => self.ack != newer.ack,
            _ => true,
        }
    }
}
