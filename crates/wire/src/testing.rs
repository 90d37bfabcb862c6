//! Invariant checks shared by the cargo-fuzz target and the stable corpus/proptest test.
//! Compiled for tests and with the `testing` feature only.

use crate::{mark_ce, parse_frame, MarkOutcome, ParseOptions};

/// Parses `data` from layer 2 and from layer 3 and checks what must hold for any input:
/// no panic, offsets inside the frame, and that CE marking a parsed frame changes nothing but
/// the ECN bits (and the IPv4 checksum, which stays valid if it was). Panics on a violation.
pub fn check_frame(data: &[u8]) {
    for opts in [ParseOptions::default(), ParseOptions::raw_ip()] {
        let Ok(p) = parse_frame(data, opts) else {
            continue;
        };
        assert_eq!(p.len as usize, data.len());
        let net = usize::from(p.keys.network_offset);
        assert!(net <= data.len());
        let Some(outer) = p.keys.outer else {
            assert_eq!(p.keys.inner, None);
            continue;
        };
        let transport = usize::from(p.keys.transport_offset.expect("IP has a transport offset"));
        assert!(transport >= net + 20 && transport <= data.len());
        if let Some(inner) = p.inner_network_offset {
            assert!(usize::from(inner) >= transport && usize::from(inner) < data.len());
        }

        let mut copy = data.to_vec();
        let v4_checksum_ok =
            outer.src.is_ipv4() && crate::internet_checksum(&copy[net..net + ihl(&copy, net)]) == 0;
        let outcome = mark_ce(&mut copy, net).expect("a parsed IP header can be marked");
        let expect = match outer.dsfield & 3 {
            0 => MarkOutcome::NotEct,
            3 => MarkOutcome::AlreadyCe,
            _ => MarkOutcome::Marked,
        };
        assert_eq!(outcome, expect);
        if outcome != MarkOutcome::Marked {
            assert_eq!(copy, data);
            continue;
        }
        let q = parse_frame(&copy, opts).expect("marking keeps a frame parseable");
        let mut marked = outer;
        marked.dsfield |= 3;
        assert_eq!(q.keys.outer, Some(marked));
        assert_eq!(q.keys.inner, p.keys.inner);
        assert_eq!(q.flow_hash, p.flow_hash);
        if v4_checksum_ok {
            assert_eq!(crate::internet_checksum(&copy[net..net + ihl(&copy, net)]), 0);
        }
        let changed: Vec<usize> = (0..data.len()).filter(|&i| copy[i] != data[i]).collect();
        assert!(changed.iter().all(|&i| i >= net && i < net + 12), "{changed:?}");
    }
}

fn ihl(frame: &[u8], net: usize) -> usize {
    usize::from(frame[net] & 0x0F) * 4
}
