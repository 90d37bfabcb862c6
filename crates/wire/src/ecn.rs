//! Rewriting the TOS / traffic-class byte in real frames (ECN CE marking, DSCP rewrite).
//!
//! IPv4 keeps its header checksum valid by the incremental update of RFC 1624 eqn. 3,
//! `HC' = ~(~HC + ~m + m')`, where `m` is the 16-bit word holding version/IHL and TOS. IPv6 has no
//! header checksum; its traffic class straddles the first two bytes.

use sluice_core::FlowKeys;

/// Why a header could not be rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// The frame ends before the end of the fixed IP header.
    #[error("frame of {len} bytes too short for an IP header at offset {offset}")]
    Truncated {
        /// Frame length.
        len: usize,
        /// Network header offset.
        offset: usize,
    },
    /// The version nibble is neither 4 nor 6.
    #[error("no IP header at offset {offset} (version nibble {version})")]
    NotIp {
        /// Network header offset.
        offset: usize,
        /// Version found.
        version: u8,
    },
    /// IPv4 IHL below 5.
    #[error("IPv4 header at offset {offset} has IHL {ihl} < 5")]
    BadIhl {
        /// Network header offset.
        offset: usize,
        /// IHL found.
        ihl: u8,
    },
}

/// What [`mark_ce`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkOutcome {
    /// The packet was ECT(0) or ECT(1) and is now CE.
    Marked,
    /// The packet was already CE; nothing changed.
    AlreadyCe,
    /// The packet is Not-ECT; nothing changed (the caller drops it instead).
    NotEct,
}

/// Ones'-complement sum of 16-bit big-endian words (odd length padded with a zero byte), folded
/// and complemented: the Internet checksum (RFC 1071). A message that includes its correct
/// checksum sums to 0.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// RFC 1624 eqn. 3: the new checksum after the 16-bit word `old` became `new`.
fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    !(sum as u16)
}

/// Reads the TOS / traffic-class byte of the IP header at `offset`.
pub fn read_dsfield(frame: &[u8], offset: usize) -> Result<u8, RewriteError> {
    match check_ip(frame, offset)? {
        4 => Ok(frame[offset + 1]),
        _ => Ok((frame[offset] << 4) | (frame[offset + 1] >> 4)),
    }
}

/// Validates that a fixed IP header fits at `offset`; returns its version.
fn check_ip(frame: &[u8], offset: usize) -> Result<u8, RewriteError> {
    let truncated = RewriteError::Truncated { len: frame.len(), offset };
    let first = *frame.get(offset).ok_or(truncated)?;
    let version = first >> 4;
    let min = match version {
        4 => {
            let ihl = first & 0x0F;
            if ihl < 5 {
                return Err(RewriteError::BadIhl { offset, ihl });
            }
            20
        }
        6 => 40,
        _ => return Err(RewriteError::NotIp { offset, version }),
    };
    if frame.len().saturating_sub(offset) < min {
        return Err(truncated);
    }
    Ok(version)
}

/// Writes `dsfield` into the IP header at `offset`, updating the IPv4 header checksum
/// incrementally. Returns the old byte.
pub fn write_dsfield(frame: &mut [u8], offset: usize, dsfield: u8) -> Result<u8, RewriteError> {
    match check_ip(frame, offset)? {
        4 => {
            let old = frame[offset + 1];
            if old != dsfield {
                let ver_ihl = frame[offset];
                let hc = u16::from_be_bytes([frame[offset + 10], frame[offset + 11]]);
                let hc = checksum_update(
                    hc,
                    u16::from_be_bytes([ver_ihl, old]),
                    u16::from_be_bytes([ver_ihl, dsfield]),
                );
                frame[offset + 1] = dsfield;
                frame[offset + 10..offset + 12].copy_from_slice(&hc.to_be_bytes());
            }
            Ok(old)
        }
        _ => {
            let (b0, b1) = (frame[offset], frame[offset + 1]);
            let old = (b0 << 4) | (b1 >> 4);
            frame[offset] = (b0 & 0xF0) | (dsfield >> 4);
            frame[offset + 1] = (dsfield << 4) | (b1 & 0x0F);
            Ok(old)
        }
    }
}

/// Sets Congestion Experienced (RFC 3168) in the IP header at `network_offset` if the packet is
/// ECN-capable. IPv4 checksums stay valid.
pub fn mark_ce(frame: &mut [u8], network_offset: usize) -> Result<MarkOutcome, RewriteError> {
    let ds = read_dsfield(frame, network_offset)?;
    match ds & 3 {
        0 => Ok(MarkOutcome::NotEct),
        3 => Ok(MarkOutcome::AlreadyCe),
        _ => {
            write_dsfield(frame, network_offset, ds | 3)?;
            Ok(MarkOutcome::Marked)
        }
    }
}

/// Makes the outer IP header's TOS byte equal `new_dsfield` (the live path calls this on transmit
/// after a qdisc changed `Packet::dsfield`, e.g. marked CE). Only the outer header changes:
/// the tunnel egress propagates CE to the inner header (RFC 6040). Returns whether the frame
/// changed; a frame without IP (keys.outer is None) is left alone.
pub fn apply_dsfield(frame: &mut [u8], keys: &FlowKeys, new_dsfield: u8) -> Result<bool, RewriteError> {
    if keys.outer.is_none() {
        return Ok(false);
    }
    let old = write_dsfield(frame, usize::from(keys.network_offset), new_dsfield)?;
    Ok(old != new_dsfield)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::Ipv4Header;
    use proptest::prelude::*;

    fn from_scratch(header: &[u8]) -> u16 {
        let mut h = header.to_vec();
        h[10] = 0;
        h[11] = 0;
        internet_checksum(&h)
    }

    prop_compose! {
        /// A random IPv4 header (with options) carrying a correct checksum.
        fn ipv4_header()(ihl in 5u8..=15, tos in any::<u8>(), rest in proptest::collection::vec(any::<u8>(), 60))
            -> Vec<u8> {
            let len = usize::from(ihl) * 4;
            let mut h = rest[..len].to_vec();
            h[0] = 0x40 | ihl;
            h[1] = tos;
            let c = from_scratch(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn incremental_checksum_equals_recomputed(mut h in ipv4_header(), ds in any::<u8>()) {
            write_dsfield(&mut h, 0, ds).unwrap();
            prop_assert_eq!(h[1], ds);
            let stored = u16::from_be_bytes([h[10], h[11]]);
            prop_assert_eq!(stored, from_scratch(&h));
            prop_assert_eq!(internet_checksum(&h), 0);
        }

        #[test]
        fn mark_ce_keeps_checksum_and_dscp(mut h in ipv4_header()) {
            let before = h.clone();
            let outcome = mark_ce(&mut h, 0).unwrap();
            let ecn = before[1] & 3;
            let expected = match ecn { 0 => MarkOutcome::NotEct, 3 => MarkOutcome::AlreadyCe, _ => MarkOutcome::Marked };
            prop_assert_eq!(outcome, expected);
            if ecn == 0 || ecn == 3 {
                prop_assert_eq!(&h, &before);
            } else {
                prop_assert_eq!(h[1], before[1] | 3);
                prop_assert_eq!(u16::from_be_bytes([h[10], h[11]]), from_scratch(&h));
            }
            // Nothing but TOS and checksum changed.
            for i in (0..h.len()).filter(|&i| i != 1 && i != 10 && i != 11) {
                prop_assert_eq!(h[i], before[i]);
            }
        }

        #[test]
        fn ipv6_traffic_class_rewrite_touches_only_tc(tc in any::<u8>(), flow in 0u32..(1 << 20), new in any::<u8>()) {
            let mut h = vec![0u8; 40];
            h[0] = 0x60 | (tc >> 4);
            h[1] = (tc << 4) | (flow >> 16) as u8;
            h[2] = (flow >> 8) as u8;
            h[3] = flow as u8;
            prop_assert_eq!(read_dsfield(&h, 0).unwrap(), tc);
            prop_assert_eq!(write_dsfield(&mut h, 0, new).unwrap(), tc);
            prop_assert_eq!(read_dsfield(&h, 0).unwrap(), new);
            prop_assert_eq!(h[0] >> 4, 6);
            let flow_after = (u32::from(h[1] & 0x0F) << 16) | (u32::from(h[2]) << 8) | u32::from(h[3]);
            prop_assert_eq!(flow_after, flow);
        }
    }

    #[test]
    fn agrees_with_etherparse_checksum() {
        let mut hdr =
            Ipv4Header::new(100, 64, etherparse::IpNumber::UDP, [198, 18, 0, 1], [198, 18, 0, 2]).unwrap();
        hdr.ecn = etherparse::Ipv4Ecn::ONE;
        hdr.header_checksum = hdr.calc_header_checksum();
        let mut bytes = hdr.to_bytes().to_vec();
        assert_eq!(mark_ce(&mut bytes, 0), Ok(MarkOutcome::Marked));
        let (after, _) = Ipv4Header::from_slice(&bytes).unwrap();
        assert_eq!(after.ecn, etherparse::Ipv4Ecn::try_new(3).unwrap());
        assert_eq!(after.header_checksum, after.calc_header_checksum());
    }

    #[test]
    fn bad_headers_are_errors_not_panics() {
        assert!(matches!(mark_ce(&mut [], 0), Err(RewriteError::Truncated { .. })));
        assert!(matches!(mark_ce(&mut [0x45; 19], 0), Err(RewriteError::Truncated { .. })));
        assert!(matches!(mark_ce(&mut [0x44; 40], 0), Err(RewriteError::BadIhl { ihl: 4, .. })));
        assert!(matches!(mark_ce(&mut [0x60; 39], 0), Err(RewriteError::Truncated { .. })));
        assert!(matches!(mark_ce(&mut [0x50; 60], 0), Err(RewriteError::NotIp { version: 5, .. })));
        assert!(matches!(mark_ce(&mut [0x45; 20], usize::MAX), Err(RewriteError::Truncated { .. })));
    }
}
