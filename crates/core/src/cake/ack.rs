//! CAKE's ACK filter (`cake_ack_filter`): when a TCP segment with ACK set (and SYN clear) joins
//! a flow queue, the queue is scanned, head first, for pure ACKs of the same connection that it
//! makes redundant. In `ack-filter` mode the oldest of them is dropped once a second one is
//! found; in `ack-filter-aggressive` mode a single one is dropped too when it sits right in
//! front of the new segment with the same ECE/CWR flags. One ACK at most per enqueue, and the
//! scan is one pass over that flow queue, as in the kernel.

use super::{Cake, Entry};
use crate::sched::slab::NIL;
use crate::tcp_info::TcpInfo;

impl Cake {
    /// Unlinks and returns the ACK that the packet just queued at the tail of flow `idx` of tin
    /// `t` makes redundant, if any.
    pub(super) fn ack_filter(&mut self, t: usize, idx: usize, aggressive: bool) -> Option<Entry> {
        let q = self.tins[t].flows[idx].q;
        // The triggering segment is the tail; with only one packet queued there is nothing to do.
        let (tail_id, tail) = self.slab.back(&q)?;
        let (new_hash, new): (u32, TcpInfo) = (tail.pkt.flow_hash, tail.pkt.tcp?);
        if !new.is_ack_trigger() {
            return None;
        }
        // (prev node, node, ECE/CWR flags) of the first eligible ACK.
        let mut elig: Option<(u32, u32, u16)> = None;
        let mut found = 0u32;
        let mut prev = NIL;
        for (id, e) in self.slab.iter_nodes(&q) {
            if id == tail_id {
                break;
            }
            let this_prev = prev;
            prev = id;
            let Some(c) = e.pkt.tcp else { continue };
            if e.pkt.flow_hash != new_hash || !c.same_ports(&new) {
                continue;
            }
            // A change of ECE/CWR after the eligible ACK: dropping it would lose that signal.
            if let Some((_, _, flags)) = elig {
                if c.ecn_flags() != flags {
                    elig = None;
                    found = found.saturating_sub(1);
                }
            }
            if !c.made_redundant_by(&new) {
                continue;
            }
            if elig.is_none() {
                elig = Some((this_prev, id, c.ecn_flags()));
            }
            found += 1;
            if found > 1 {
                break;
            }
        }
        let (eprev, eid, eflags) = elig?;
        // Not two eligible ACKs: aggressive mode still drops one that is directly in front of the
        // new segment (its successor is the tail) with the same ECN flags.
        if found < 2 && !(aggressive && prev == eid && eflags == new.ecn_flags()) {
            return None;
        }
        let mut q = self.tins[t].flows[idx].q;
        let e = self.slab.remove_after(&mut q, eprev);
        self.tins[t].flows[idx].q = q;
        e
    }
}

#[cfg(test)]
mod tests {
    use crate::cake::{AckFilter, Cake, CakeConfig, FlowMode, TinMode};
    use crate::qdisc::{DropReason, Qdisc};
    use crate::tcp_info::TcpInfo;
    use crate::time::Time;
    use crate::Packet;
    use etherparse::{PacketBuilder, TcpOptionElement};

    /// Segment options of a hand-built frame.
    #[derive(Clone, Copy, Default)]
    struct Seg {
        sport: u16,
        ack: u32,
        data: usize,
        psh: bool,
        ece: bool,
        ts: Option<(u32, u32)>,
        sack: Option<(u32, u32)>,
        mss: bool,
    }

    fn ack(ack: u32) -> Seg {
        Seg { sport: 40000, ack, ..Seg::default() }
    }

    /// Builds an IPv4/TCP frame from 198.18.0.2 to 198.18.1.1:443, parses its TCP header as
    /// the live path does and returns the packet descriptor (payload: `id`).
    fn frame(s: Seg, id: u64) -> Packet {
        let mut b = PacketBuilder::ipv4([198, 18, 0, 2], [198, 18, 1, 1], 64)
            .tcp(s.sport, 443, 1000, 65535)
            .ack(s.ack);
        if s.psh {
            b = b.psh();
        }
        if s.ece {
            b = b.ece();
        }
        let mut opts = Vec::new();
        if let Some((v, e)) = s.ts {
            opts.push(TcpOptionElement::Noop);
            opts.push(TcpOptionElement::Noop);
            opts.push(TcpOptionElement::Timestamp(v, e));
        }
        if let Some(blk) = s.sack {
            opts.push(TcpOptionElement::Noop);
            opts.push(TcpOptionElement::Noop);
            opts.push(TcpOptionElement::SelectiveAcknowledgement(blk, [None; 3]));
        }
        if s.mss {
            opts.push(TcpOptionElement::MaximumSegmentSize(1460));
        }
        let b = b.options(&opts).unwrap();
        let payload = vec![0u8; s.data];
        let mut bytes = Vec::new();
        b.write(&mut bytes, &payload).unwrap();
        let mut p = Packet::new(bytes.len() as u32 + 14, id);
        p.tcp = TcpInfo::parse(&bytes[20..], 4);
        // Same hash for the same tuple, as the parser's 5-tuple hash gives.
        p.flow_hash = 0x5EED_0000 ^ s.sport as u32;
        p.src_host_hash = 1;
        p.dst_host_hash = 2;
        p
    }

    fn cake(mode: AckFilter) -> Cake {
        // One queue for every connection (so other connections' packets sit between), shaped
        // far below the offer so nothing leaves while the test enqueues.
        let cfg = CakeConfig {
            rate: 1000,
            tin_mode: TinMode::Besteffort,
            flow_mode: FlowMode::Flowblind,
            ack_filter: mode,
            ..CakeConfig::default()
        };
        Cake::new(cfg, 1)
    }

    /// Enqueues `segs` in order; returns the ids the filter dropped and the ack_drops count.
    fn offer(mode: AckFilter, segs: &[Seg]) -> (Vec<u64>, u32) {
        let mut c = cake(mode);
        let mut dropped = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            c.enqueue(frame(*s, i as u64), Time::ZERO).unwrap();
            while let Some(d) = c.take_dropped() {
                assert_eq!(d.reason, DropReason::AckFilter);
                dropped.push(d.pkt.payload);
            }
        }
        let st = c.xstats();
        assert_eq!(st.tins[0].drops, 0, "ACK-filter drops are not tin drops");
        assert_eq!(c.stats().drops as usize, dropped.len());
        assert_eq!(c.stats().qlen as usize, segs.len() - dropped.len());
        (dropped, st.tins[0].ack_drops)
    }

    #[test]
    fn parses_flags_options_and_payload() {
        let p =
            frame(Seg { ts: Some((7, 9)), sack: Some((3000, 4000)), data: 100, psh: true, ..ack(2000) }, 0);
        let t = p.tcp.unwrap();
        assert_eq!((t.sport, t.dport, t.ack, t.payload_len), (40000, 443, 2000, 100));
        assert!(t.has_ts && (t.tsval, t.tsecr) == (7, 9));
        assert_eq!((t.sack_blocks, t.sack[0]), (1, (3000, 4000)));
        assert!(!t.keep_options && !t.may_drop(7, 9), "PSH set: not a pure ACK");
        let m = frame(Seg { mss: true, ..ack(1) }, 0).tcp.unwrap();
        assert!(m.keep_options && !m.may_drop(0, 0));
        assert!(TcpInfo::parse(&[0u8; 19], 4).is_none());
    }

    #[test]
    fn off_drops_nothing() {
        let (d, n) = offer(AckFilter::None, &[ack(100), ack(200), ack(300), ack(400)]);
        assert!(d.is_empty() && n == 0);
    }

    #[test]
    fn normal_mode_drops_the_oldest_once_two_are_redundant() {
        // Second ACK: one eligible older ACK, not enough in normal mode; third: two, the oldest goes.
        let (d, n) = offer(AckFilter::Filter, &[ack(100), ack(200), ack(300), ack(400)]);
        assert_eq!(d, vec![0, 1]);
        assert_eq!(n, 2);
    }

    #[test]
    fn aggressive_mode_drops_a_single_redundant_ack_in_front() {
        let (d, n) = offer(AckFilter::Aggressive, &[ack(100), ack(200), ack(300)]);
        assert_eq!(d, vec![0, 1]);
        assert_eq!(n, 2);
        // Not adjacent (a data segment of another connection between): normal rule only.
        let other = Seg { sport: 40001, data: 1000, ..ack(5) };
        let (d, _) = offer(AckFilter::Aggressive, &[ack(100), other, ack(200)]);
        assert!(d.is_empty(), "{d:?}");
        // ... which still drops the oldest once two are redundant.
        let (d, _) = offer(AckFilter::Aggressive, &[ack(100), other, ack(200), other, ack(300)]);
        assert_eq!(d, vec![0]);
    }

    #[test]
    fn keeps_acks_that_carry_information() {
        // An older ACK with a later cumulative ACK than the new one (reordering): kept.
        let (d, _) = offer(AckFilter::Aggressive, &[ack(300), ack(200)]);
        assert!(d.is_empty());
        // Same cumulative ACK and no more SACKed: a duplicate ACK (fast retransmit needs it).
        let (d, _) = offer(AckFilter::Aggressive, &[ack(100), ack(100)]);
        assert!(d.is_empty());
        // Data, PSH, MSS option: never dropped.
        for s in [Seg { data: 10, ..ack(100) }, Seg { psh: true, ..ack(100) }, Seg { mss: true, ..ack(100) }]
        {
            let (d, _) = offer(AckFilter::Aggressive, &[s, ack(200)]);
            assert!(d.is_empty());
        }
        // A newer timestamp on the older ACK (a wrapped or reordered clock): kept.
        let (d, _) = offer(
            AckFilter::Aggressive,
            &[Seg { ts: Some((50, 1)), ..ack(100) }, Seg { ts: Some((40, 1)), ..ack(200) }],
        );
        assert!(d.is_empty());
        let (d, _) = offer(
            AckFilter::Aggressive,
            &[Seg { ts: Some((40, 1)), ..ack(100) }, Seg { ts: Some((50, 1)), ..ack(200) }],
        );
        assert_eq!(d, vec![0]);
        // Another connection (other port): not compared.
        let (d, _) = offer(AckFilter::Aggressive, &[Seg { sport: 40001, ..ack(100) }, ack(200)]);
        assert!(d.is_empty());
    }

    #[test]
    fn sack_blocks_must_be_covered() {
        // Duplicate ACKs whose SACK grows: the newer covers more bytes, the older goes.
        let a = Seg { sack: Some((200, 300)), ..ack(100) };
        let b = Seg { sack: Some((200, 400)), ..ack(100) };
        let (d, _) = offer(AckFilter::Aggressive, &[a, b]);
        assert_eq!(d, vec![0]);
        // The newer SACKs a different range: the older's range would be lost.
        let c = Seg { sack: Some((500, 600)), ..ack(100) };
        let (d, _) = offer(AckFilter::Aggressive, &[a, c]);
        assert!(d.is_empty());
        // The older has SACK and the newer none, with the same cumulative ACK: kept.
        let (d, _) = offer(AckFilter::Aggressive, &[a, ack(100)]);
        assert!(d.is_empty());
        // A D-SACK (below the cumulative ACK) is never dropped.
        let dsack = Seg { sack: Some((50, 80)), ..ack(100) };
        let (d, _) = offer(AckFilter::Aggressive, &[dsack, ack(200)]);
        assert!(d.is_empty());
        // A later cumulative ACK covering the SACKed range, with the range still reported.
        let (d, _) = offer(AckFilter::Aggressive, &[a, Seg { sack: Some((200, 300)), ..ack(150) }]);
        assert_eq!(d, vec![0]);
    }

    #[test]
    fn an_ece_change_protects_the_earlier_ack() {
        // ECE on the second ACK: the first (no ECE) stops being eligible, so normal mode finds
        // only one eligible ACK (the ECE one) and drops nothing.
        let e = |a| Seg { ece: true, ..ack(a) };
        let (d, _) = offer(AckFilter::Filter, &[ack(100), e(200), e(300)]);
        assert!(d.is_empty(), "{d:?}");
        // Aggressive: the single eligible ACK is adjacent but its ECN flags differ from the new one.
        let (d, _) = offer(AckFilter::Aggressive, &[e(100), ack(200)]);
        assert!(d.is_empty());
    }

    #[test]
    fn accounting_follows_the_drop() {
        let mut c = cake(AckFilter::Aggressive);
        let (a, b) = (frame(ack(100), 0), frame(ack(200), 1));
        c.enqueue(a, Time::ZERO).unwrap();
        c.enqueue(b, Time::ZERO).unwrap();
        assert_eq!(c.stats().backlog_bytes, b.len as u64);
        assert_eq!(c.xstats().tins[0].backlog_bytes, b.len);
        assert_eq!(c.xstats().tins[0].sent_packets, 2);
        // What is left is the newer ACK.
        let got = c.dequeue(Time::from_nanos(10_000_000_000)).unwrap();
        assert_eq!(got.payload, 1);
    }
}
