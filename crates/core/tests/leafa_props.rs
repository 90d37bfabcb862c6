//! Property tests for TBF, prio and pfifo_fast: sequences of Enqueue / Dequeue / Advance checked
//! for conservation, limits and (TBF) the rate bound over every window.

use proptest::prelude::*;
use sluice_core::prio::{PfifoFast, PfifoFastConfig, Prio, PrioConfig, TosMapping};
use sluice_core::tbf::{Tbf, TbfConfig};
use sluice_core::{LinkLayer, Packet, Qdisc, Rate, Span, Time, WireSpec};

#[derive(Clone, Debug)]
enum Op {
    Enqueue { len: u32, ds: u8, prio: u32, segs: u16 },
    Dequeue,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u32..3000, any::<u8>(), prop_oneof![Just(0u32), 0u32..20], prop_oneof![3 => Just(1u16), 1 => 2u16..6])
            .prop_map(|(len, ds, prio, segs)| Op::Enqueue { len, ds, prio, segs }),
        3 => Just(Op::Dequeue),
        2 => (0u64..5_000_000).prop_map(Op::Advance),
    ]
}

/// Byte-level bookkeeping shared by every run.
#[derive(Default)]
struct Ledger {
    in_bytes: u64,
    out_bytes: u64,
    dropped_bytes: u64,
    /// (time, charged bytes) of every dequeue.
    sent: Vec<(Time, u64)>,
}

fn make_packet(len: u32, ds: u8, prio: u32, segs: u16, id: u64) -> Packet {
    let mut p = Packet::new(len, id);
    p.dsfield = ds;
    p.priority = prio;
    if segs > 1 {
        // A GSO packet of `segs` segments of up to 1514 bytes.
        p.gso_segs = segs;
        p.gso_size = 1514;
        p.len = 1514 * (segs as u32 - 1) + len.min(1514);
    }
    p
}

fn run(q: &mut dyn Qdisc, ops: &[Op], wire: WireSpec, mut check: impl FnMut(&dyn Qdisc)) -> Ledger {
    let mut l = Ledger::default();
    let mut now = Time::ZERO;
    for (i, o) in ops.iter().enumerate() {
        match *o {
            Op::Enqueue { len, ds, prio, segs } => {
                let p = make_packet(len, ds, prio, segs, i as u64);
                l.in_bytes += p.len as u64;
                if let Err(d) = q.enqueue(p, now) {
                    l.dropped_bytes += d.pkt.len as u64;
                }
            }
            Op::Dequeue => {
                if let Some(p) = q.dequeue(now) {
                    l.out_bytes += p.len as u64;
                    l.sent.push((now, wire.packet_cost(&p)));
                }
            }
            Op::Advance(ns) => {
                now += Span::from_nanos(ns);
                // Honour the qdisc's own wake-up if it comes first.
                while let Some(t) = q.next_event(now) {
                    if t > now {
                        break;
                    }
                    match q.dequeue(now) {
                        Some(p) => {
                            l.out_bytes += p.len as u64;
                            l.sent.push((now, wire.packet_cost(&p)));
                        }
                        None => break,
                    }
                }
            }
        }
        while let Some(d) = q.take_dropped() {
            l.dropped_bytes += d.pkt.len as u64;
        }
        let s = q.stats();
        assert_eq!(l.in_bytes, l.out_bytes + l.dropped_bytes + s.backlog_bytes, "conservation after op {i}");
        check(q);
    }
    l
}

fn wire_strategy() -> impl Strategy<Value = WireSpec> {
    (prop_oneof![Just(0i32), -14i32..100], prop_oneof![Just(0u32), 0u32..200], any::<bool>()).prop_map(
        |(overhead, mpu, atm)| WireSpec {
            overhead,
            mpu,
            linklayer: if atm { LinkLayer::Atm } else { LinkLayer::Ethernet },
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tbf_conserves_and_never_exceeds_rate_plus_burst(
        ops in prop::collection::vec(op(), 1..300),
        rate_kbit in 8u64..100_000,
        burst in 1000u64..20_000,
        limit in 1u64..30_000,
        peak in prop::option::of((2u64..10, 1600u64..4000)),
        wire in wire_strategy(),
    ) {
        let rate = Rate::from_bps(rate_kbit * 1000);
        let cfg = TbfConfig {
            peakrate: peak.map(|(m, _)| Rate::from_bps(rate.bps() * m)),
            mtu: peak.map(|(_, mtu)| mtu),
            wire,
            ..TbfConfig::new(rate, burst, limit)
        };
        let mut t = Tbf::new(cfg).unwrap();
        let cap = t.burst_shown();
        let ledger = run(&mut t, &ops, wire, |q| {
            assert!(q.stats().backlog_bytes <= limit, "bfifo limit respected");
        });
        // Rate bound over every window [a, b] of dequeue instants: sum <= R*(b-a) + burst.
        let s = &ledger.sent;
        for a in 0..s.len() {
            let mut sum = 0u128;
            for b in a..s.len() {
                sum += s[b].1 as u128;
                let span = (s[b].0 - s[a].0).as_nanos() as u128;
                let allowed = rate.bps() as u128 * span / 8_000_000_000 + cap as u128;
                prop_assert!(sum <= allowed, "window {a}..={b}: {sum} > {allowed}");
                if let Some((m, mtu)) = peak {
                    let pcap = wire.wire_len(mtu as u32) as u128;
                    let pallowed = (rate.bps() * m) as u128 * span / 8_000_000_000 + pcap;
                    prop_assert!(sum <= pallowed, "peak window {a}..={b}: {sum} > {pallowed}");
                }
            }
        }
    }

    #[test]
    fn prio_conserves_and_respects_band_limits(
        ops in prop::collection::vec(op(), 1..300),
        bands in 2usize..=16,
        map in prop::collection::vec(0u8..16, 0..=16),
    ) {
        let map: Vec<u8> = map.into_iter().map(|b| b % bands as u8).collect();
        let mut full = [0u8; 16];
        full[..map.len()].copy_from_slice(&map);
        let cfg = PrioConfig { bands, priomap: full, major: 1, tos_mapping: TosMapping::Dscp };
        let mut p = Prio::new(cfg).unwrap();
        for b in 0..bands {
            p.set_band_qdisc(b, Box::new(sluice_core::fifo::Fifo::pfifo(5))).unwrap();
        }
        run(&mut p, &ops, WireSpec::default(), |q| {
            assert!(q.stats().qlen <= 5 * bands as u64);
        });
        for b in 0..bands {
            prop_assert!(p.band_stats(b).unwrap().qlen <= 5);
        }
    }

    #[test]
    fn pfifo_fast_conserves_and_serves_strictly(
        ops in prop::collection::vec(op(), 1..300),
        txq in 1u32..8,
        legacy in any::<bool>(),
    ) {
        let cfg = PfifoFastConfig {
            txqueuelen: txq,
            tos_mapping: if legacy { TosMapping::LegacyTos } else { TosMapping::Dscp },
        };
        let mut q = PfifoFast::new(cfg);
        let mut now = Time::ZERO;
        let mut in_bytes = 0u64;
        let mut out = 0u64;
        let mut dropped = 0u64;
        for (i, o) in ops.iter().enumerate() {
            match *o {
                Op::Enqueue { len, ds, prio, .. } => {
                    let p = make_packet(len, ds, prio, 1, i as u64);
                    in_bytes += p.len as u64;
                    if q.enqueue(p, now).is_err() { dropped += p.len as u64; }
                }
                Op::Dequeue => {
                    let before: Vec<u64> = (0..3).map(|b| q.band_stats(b).unwrap().qlen).collect();
                    if let Some(p) = q.dequeue(now) {
                        out += p.len as u64;
                        let band = q.classify(&p);
                        prop_assert!(before[..band].iter().all(|&n| n == 0), "a higher band was waiting");
                    }
                }
                Op::Advance(ns) => now += Span::from_nanos(ns),
            }
            for b in 0..3 {
                prop_assert!(q.band_stats(b).unwrap().qlen <= txq as u64);
            }
            prop_assert_eq!(in_bytes, out + dropped + q.stats().backlog_bytes);
        }
    }
}

#[derive(Clone, Debug)]
enum SfqOp {
    Enqueue { flow: u32, len: u32 },
    Dequeue,
    Advance(u64),
}

fn sfq_op() -> impl Strategy<Value = SfqOp> {
    prop_oneof![
        5 => (0u32..8, 40u32..2000).prop_map(|(flow, len)| SfqOp::Enqueue { flow, len }),
        4 => Just(SfqOp::Dequeue),
        1 => (0u64..700_000_000).prop_map(SfqOp::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Conservation, limit, depth; and for the Sticky and Rehash modes, every flow's packets
    /// leave in the order they arrived, across perturbations.
    #[test]
    fn sfq_conserves_respects_limits_and_keeps_flow_order(
        ops in prop::collection::vec(sfq_op(), 1..400),
        limit in 2u32..40,
        depth in 1u32..20,
        flows in 1u32..10,
        divisor_log in 0u32..6,
        headdrop in any::<bool>(),
        mode in prop_oneof![
            Just(sluice_core::sfq::PerturbMode::Sticky),
            Just(sluice_core::sfq::PerturbMode::Rehash),
            Just(sluice_core::sfq::PerturbMode::KeyOnly),
        ],
        seed in any::<u64>(),
        red in prop::option::of((500u32..5000, 1u32..20_000, 0.01f64..1.0, 0u8..8, any::<bool>(), any::<bool>())),
    ) {
        use sluice_core::sfq::{PerturbMode, Sfq, SfqConfig, SfqRed};
        let red = red.map(|(min, span, probability, ewma, ecn, harddrop)| SfqRed {
            limit: 0, min, max: min + span, probability, ewma, ecn, harddrop,
        });
        let cfg = SfqConfig {
            limit, depth, flows, divisor: 1 << divisor_log, headdrop, perturb_mode: mode, seed,
            perturb: Span::from_secs(1),
            red,
            ..SfqConfig::default()
        };
        let mut q = Sfq::new(cfg).unwrap();
        let p = q.params();
        let mut now = Time::ZERO;
        let (mut inb, mut outb, mut dropb) = (0u64, 0u64, 0u64);
        let mut last_sent = [None::<u64>; 8];
        for (i, o) in ops.iter().enumerate() {
            match *o {
                SfqOp::Enqueue { flow, len } => {
                    let mut pk = Packet::new(len, i as u64);
                    pk.dsfield = (flow & 1) as u8 * 2; // odd flows ECT(0)
                    pk.flow_hash = flow.wrapping_mul(0x9E37_79B9);
                    inb += len as u64;
                    if let Err(d) = q.enqueue(pk, now) { dropb += d.pkt.len as u64; }
                }
                SfqOp::Dequeue => {
                    if let Some(pk) = q.dequeue(now) {
                        outb += pk.len as u64;
                        let flow = (pk.flow_hash.wrapping_mul(0x144C_BC89)) as usize; // inverse of the multiplier
                        prop_assert!(flow < 8);
                        if mode != PerturbMode::KeyOnly {
                            prop_assert!(last_sent[flow].is_none_or(|l| pk.payload > l), "flow {flow} reordered");
                        }
                        last_sent[flow] = Some(pk.payload);
                    }
                }
                SfqOp::Advance(ns) => now += Span::from_nanos(ns),
            }
            while let Some(d) = q.take_dropped() { dropb += d.pkt.len as u64; }
            let s = q.stats();
            prop_assert_eq!(inb, outb + dropb + s.backlog_bytes);
            prop_assert!(s.qlen <= p.limit as u64);
            for (_, n, _, _) in q.flow_stats() {
                prop_assert!(n <= p.depth as u64);
            }
            prop_assert_eq!(q.flow_stats().iter().map(|f| f.1).sum::<u64>(), s.qlen);
        }
    }
}
