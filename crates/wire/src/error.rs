//! Parse errors and the per-kind counters a caller keeps.

use std::fmt;

/// The header in which a parse error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// An 802.1Q / 802.1ad tag.
    Vlan,
    /// IPv4 header (with options and AH).
    Ipv4,
    /// IPv6 header.
    Ipv6,
    /// IPv6 extension headers (hop-by-hop, routing, fragment, destination options, AH).
    Ipv6Ext,
    /// TCP header.
    Tcp,
    /// UDP header.
    Udp,
    /// ICMP header.
    Icmp,
    /// ICMPv6 header.
    Icmpv6,
    /// The ports of another port-carrying transport (SCTP, DCCP, UDP-Lite).
    Ports,
    /// GRE header.
    Gre,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "VLAN",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Ipv6Ext => "IPv6 extension",
            Layer::Tcp => "TCP",
            Layer::Udp => "UDP",
            Layer::Icmp => "ICMP",
            Layer::Icmpv6 => "ICMPv6",
            Layer::Ports => "transport ports",
            Layer::Gre => "GRE",
        };
        f.write_str(s)
    }
}

/// What went wrong, independent of where. [`ParseStats`] counts by this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The frame ends inside a header, or before the length an IP header claims.
    Truncated,
    /// The IP version nibble does not match the EtherType (or is neither 4 nor 6 for raw IP).
    BadIpVersion,
    /// IPv4 IHL below 5, or total length shorter than the header.
    BadIpv4Header,
    /// IPv6 extension chain is invalid (hop-by-hop not first, AH with zero length).
    BadIpv6Extension,
    /// IPv4 authentication header with zero length.
    BadIpAuth,
    /// TCP data offset below 5.
    BadTcpHeader,
    /// A header offset does not fit the 16-bit offsets of [`sluice_core::FlowKeys`].
    OffsetOverflow,
}

impl ErrorKind {
    /// Number of kinds (size of the counter array in [`ParseStats`]).
    pub const COUNT: usize = 7;

    /// All kinds, in counter order.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::Truncated,
        ErrorKind::BadIpVersion,
        ErrorKind::BadIpv4Header,
        ErrorKind::BadIpv6Extension,
        ErrorKind::BadIpAuth,
        ErrorKind::BadTcpHeader,
        ErrorKind::OffsetOverflow,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// A short snake_case name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Truncated => "truncated",
            ErrorKind::BadIpVersion => "bad_ip_version",
            ErrorKind::BadIpv4Header => "bad_ipv4_header",
            ErrorKind::BadIpv6Extension => "bad_ipv6_extension",
            ErrorKind::BadIpAuth => "bad_ip_auth",
            ErrorKind::BadTcpHeader => "bad_tcp_header",
            ErrorKind::OffsetOverflow => "offset_overflow",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame that could not be parsed. Never a panic: every malformed input ends here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} in the {}{layer} header at byte {offset}", if *.tunnelled { "inner " } else { "" })]
pub struct ParseError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// The header being parsed.
    pub layer: Layer,
    /// Offset of that header from the start of the frame.
    pub offset: usize,
    /// True if the header is inside a tunnel (the outer headers were fine).
    pub tunnelled: bool,
}

impl ParseError {
    pub(crate) fn new(kind: ErrorKind, layer: Layer, offset: usize) -> ParseError {
        ParseError { kind, layer, offset, tunnelled: false }
    }
}

/// Counters of parse outcomes, kept by the caller (one per interface or per run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Frames parsed into IP flow keys.
    pub ip: u64,
    /// Frames that carry no IP (ARP, LLDP, ...): not an error.
    pub non_ip: u64,
    /// Frames whose outer IP header carried a decoded tunnel.
    pub tunnelled: u64,
    errors: [u64; ErrorKind::COUNT],
}

impl ParseStats {
    /// Records the outcome of one [`crate::parse_frame`] call.
    pub fn record(&mut self, result: &Result<crate::Parsed, ParseError>) {
        match result {
            Ok(p) if p.keys.outer.is_none() => self.non_ip += 1,
            Ok(p) => {
                self.ip += 1;
                if p.keys.inner.is_some() {
                    self.tunnelled += 1;
                }
            }
            Err(e) => self.errors[e.kind.index()] += 1,
        }
    }

    /// Errors of one kind.
    pub fn errors(&self, kind: ErrorKind) -> u64 {
        self.errors[kind.index()]
    }

    /// All errors.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// All frames seen.
    pub fn total(&self) -> u64 {
        self.ip + self.non_ip + self.total_errors()
    }

    /// `(name, count)` for every error kind, in a fixed order (for `-s` style output).
    pub fn error_counts(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ErrorKind::ALL.iter().map(move |k| (k.name(), self.errors(*k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_index_their_own_slot() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn error_message_names_layer_and_offset() {
        let mut e = ParseError::new(ErrorKind::Truncated, Layer::Tcp, 34);
        assert_eq!(e.to_string(), "truncated in the TCP header at byte 34");
        e.tunnelled = true;
        assert_eq!(e.to_string(), "truncated in the inner TCP header at byte 34");
    }
}
