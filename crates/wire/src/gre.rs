//! GRE header (RFC 2784 with the RFC 2890 key and sequence extensions).
//!
//! etherparse 0.16 has no GRE support, so this small header is read and written here.
//!
//! ```text
//!  0                   1                   2                   3
//! |C|R|K|S|s|Recur|  Flags  | Ver |         Protocol Type         |
//! |      Checksum (optional)      |       Reserved1 (optional)    |
//! |                         Key (optional)                        |
//! |                 Sequence Number (optional)                    |
//! ```

use crate::error::{ErrorKind, Layer, ParseError};

const FLAG_CSUM: u16 = 0x8000;
const FLAG_ROUTING: u16 = 0x4000;
const FLAG_KEY: u16 = 0x2000;
const FLAG_SEQ: u16 = 0x1000;
const VERSION_MASK: u16 = 0x0007;

/// A decoded GRE header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GreInfo {
    /// EtherType of the payload.
    pub(crate) protocol: u16,
    /// Bytes of GRE header before the payload.
    pub(crate) header_len: usize,
}

/// Parses a GRE header at the start of `bytes` (which starts at `off` in the frame).
/// `Ok(None)` for GRE this parser does not look into: version 1 (PPTP) and the deprecated
/// RFC 1701 source routing. Those are valid packets, just opaque.
pub(crate) fn parse(bytes: &[u8], off: usize) -> Result<Option<GreInfo>, ParseError> {
    let truncated = || ParseError::new(ErrorKind::Truncated, Layer::Gre, off);
    let [f0, f1, p0, p1, ..] = *bytes else {
        return Err(truncated());
    };
    let flags = u16::from_be_bytes([f0, f1]);
    if flags & VERSION_MASK != 0 || flags & FLAG_ROUTING != 0 {
        return Ok(None);
    }
    let mut header_len = 4;
    for flag in [FLAG_CSUM, FLAG_KEY, FLAG_SEQ] {
        if flags & flag != 0 {
            header_len += 4;
        }
    }
    if bytes.len() < header_len {
        return Err(truncated());
    }
    Ok(Some(GreInfo { protocol: u16::from_be_bytes([p0, p1]), header_len }))
}

/// Options of a GRE header written by the frame builder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GreOptions {
    /// Write the checksum field (over the GRE header and payload).
    pub checksum: bool,
    /// The key field (RFC 2890), if present.
    pub key: Option<u32>,
    /// The sequence number field (RFC 2890), if present.
    pub seq: Option<u32>,
    /// Carry the inner packet as an Ethernet frame (transparent Ethernet bridging, 0x6558)
    /// instead of as a bare IP packet.
    pub ethernet: bool,
}

/// Appends a GRE header for `protocol` followed by `payload` to `out`.
pub(crate) fn write(out: &mut Vec<u8>, opts: &GreOptions, protocol: u16, payload: &[u8]) {
    let start = out.len();
    let mut flags = 0u16;
    if opts.checksum {
        flags |= FLAG_CSUM;
    }
    if opts.key.is_some() {
        flags |= FLAG_KEY;
    }
    if opts.seq.is_some() {
        flags |= FLAG_SEQ;
    }
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&protocol.to_be_bytes());
    let csum_at = out.len();
    if opts.checksum {
        out.extend_from_slice(&[0; 4]);
    }
    if let Some(k) = opts.key {
        out.extend_from_slice(&k.to_be_bytes());
    }
    if let Some(s) = opts.seq {
        out.extend_from_slice(&s.to_be_bytes());
    }
    out.extend_from_slice(payload);
    if opts.checksum {
        let c = crate::ecn::internet_checksum(&out[start..]);
        out[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_length_follows_flags() {
        for (c, k, s) in
            [(false, false, false), (true, false, false), (true, true, true), (false, true, false)]
        {
            let opts = GreOptions { checksum: c, key: k.then_some(7), seq: s.then_some(9), ethernet: false };
            let mut out = Vec::new();
            write(&mut out, &opts, 0x0800, &[0xAA; 3]);
            let g = parse(&out, 0).unwrap().unwrap();
            assert_eq!(g.protocol, 0x0800);
            assert_eq!(g.header_len, 4 + 4 * (c as usize + k as usize + s as usize));
            assert_eq!(&out[g.header_len..], &[0xAA; 3]);
            if c {
                // A correct checksum makes the ones'-complement sum of the whole message zero.
                assert_eq!(crate::ecn::internet_checksum(&out), 0);
            }
            assert_eq!(parse(&out[..g.header_len - 1], 0).unwrap_err().kind, ErrorKind::Truncated);
        }
    }

    #[test]
    fn pptp_and_source_routed_gre_are_opaque() {
        assert_eq!(parse(&[0x30, 0x01, 0x88, 0x0B, 0, 0, 0, 0, 0, 0, 0, 0], 0), Ok(None));
        assert_eq!(parse(&[0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0], 0), Ok(None));
    }
}
