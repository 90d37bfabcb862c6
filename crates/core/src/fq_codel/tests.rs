use super::*;
use crate::packet::Ecn;

const MS: u64 = 1_000_000;

/// Hash that lands in bucket `b` of 1024.
fn hash_for(b: u32) -> u32 {
    ((b as u64) << 32).div_ceil(1024) as u32
}

fn fpkt(len: u32, flow: u32, id: u64) -> Packet {
    let mut p = Packet::new(len, id);
    p.flow_hash = hash_for(flow);
    p
}

fn fq(cfg: FqCodelConfig) -> FqCodel {
    FqCodel::new(cfg).unwrap()
}

#[test]
fn defaults_match_the_kernel() {
    let q = fq(FqCodelConfig::default());
    let c = q.config();
    assert_eq!(c.limit, 10240);
    assert_eq!(c.flows, 1024);
    assert_eq!(c.quantum, 1514);
    assert_eq!(c.target(), Span::from_millis(5));
    assert_eq!(c.interval(), Span::from_millis(100));
    assert_eq!(c.memory_limit, 32 * 1024 * 1024);
    assert!(c.ecn());
    assert_eq!(c.drop_batch, 64);
    assert_eq!(c.ce_threshold(), None);
    assert_eq!(c.params.mtu, 1514);
    assert_eq!(c.isolation, FlowIsolation::Flows);
    assert_eq!(q.kind(), "fq_codel");
    assert_eq!(crate::units::format_size(c.memory_limit as u64), "32Mb");
}

#[test]
fn config_is_validated_and_clamped_like_the_kernel() {
    let base = FqCodelConfig::default();
    for flows in [0, 65537] {
        assert!(FqCodel::new(FqCodelConfig { flows, ..base }).is_err());
    }
    assert!(FqCodel::new(FqCodelConfig { flows: 65536, ..base }).is_ok());
    assert!(FqCodel::new(FqCodelConfig { limit: 0, ..base }).is_err());
    assert!(FqCodel::new(FqCodelConfig { quantum: (1 << 20) + 1, ..base }).is_err());
    let c =
        FqCodelConfig { quantum: 100, drop_batch: 0, memory_limit: u32::MAX, ..base }.normalized().unwrap();
    assert_eq!((c.quantum, c.drop_batch, c.memory_limit), (256, 1, 1 << 31));
    let e = FqCodel::new(FqCodelConfig { flows: 0, ..base }).unwrap_err();
    assert!(e.to_string().contains("flows"), "{e}");
}

#[test]
fn isolation_keywords_round_trip() {
    for m in FlowIsolation::ALL {
        assert_eq!(m.to_string().parse::<FlowIsolation>().unwrap(), m);
    }
    assert_eq!("dual-srchost".parse::<FlowIsolation>().unwrap(), FlowIsolation::DualSrcHost);
    assert!("dual-host".parse::<FlowIsolation>().is_err());
}

#[test]
fn truesize_estimate() {
    assert_eq!(truesize(&Packet::new(1514, 0)), 2304);
    assert_eq!(truesize(&Packet::new(64, 0)), 768);
    assert_eq!(truesize(&Packet::new(65536, 0)), 69632 + 256);
}

#[test]
fn hashing_uses_reciprocal_scale() {
    let q = fq(FqCodelConfig::default());
    for b in [0, 1, 511, 1023] {
        assert_eq!(q.bucket_of(&fpkt(100, b, 0)), Some(b));
    }
    assert_eq!(reciprocal_scale(u32::MAX, 1024), 1023);
}

#[test]
fn sparse_flow_is_served_before_bulk_flows() {
    // Four bulk flows keep ~20 packets each queued on a 10 Mbit/s link (1.2 ms per 1500-byte
    // packet); a sparse flow sends one 100-byte packet every 25 ms. (It must be sparse: a flow
    // whose next packet arrives before it has left old_flows, about one DRR round of ~10 ms here,
    // queues behind the bulk flows, as RFC 8290 §1.3 notes.)
    let mut q = fq(FqCodelConfig::default());
    let service = 1_200_000u64;
    let mut id = 0;
    let mut queued = [0u32; 4];
    let mut next_sparse = 5 * MS;
    let mut sparse_wait = Vec::new();
    let mut bulk_wait = Span::ZERO;
    let mut t = 0;
    while t < 5_000 * MS {
        for (f, n) in queued.iter_mut().enumerate() {
            while *n < 20 {
                q.enqueue(fpkt(1500, f as u32 + 10, id), Time::from_nanos(t)).unwrap();
                id += 1;
                *n += 1;
            }
        }
        while next_sparse <= t {
            let mut p = fpkt(100, 500, u64::MAX);
            p.enqueue_time = Time::from_nanos(next_sparse);
            q.enqueue(p, Time::from_nanos(next_sparse)).unwrap();
            next_sparse += 25 * MS;
        }
        if let Some(p) = q.dequeue(Time::from_nanos(t)) {
            let wait = Time::from_nanos(t) - p.enqueue_time;
            if p.payload == u64::MAX {
                sparse_wait.push(wait);
            } else {
                queued[((p.flow_hash as u64 * 1024) >> 32) as usize - 10] -= 1;
                bulk_wait = bulk_wait.max(wait);
            }
        }
        while let Some(d) = q.take_dropped() {
            queued[((d.pkt.flow_hash as u64 * 1024) >> 32) as usize - 10] -= 1;
        }
        t += service;
    }
    assert!(sparse_wait.len() > 190);
    // A sparse packet waits at most until the next transmission opportunity. (Not the first one:
    // at start-up the bulk flows are new flows themselves and it queues behind them.)
    let worst = *sparse_wait[1..].iter().max().unwrap();
    assert!(worst <= Span::from_nanos(service), "sparse flow waited {worst:?}");
    assert!(bulk_wait > Span::from_millis(20), "bulk flows should queue: {bulk_wait:?}");
}

#[test]
fn bulk_flows_share_by_bytes() {
    // Flow 1 sends 1500-byte packets, flow 2 300-byte packets; both always backlogged.
    let mut q = fq(FqCodelConfig {
        params: CodelParams { ecn: true, ..CodelParams::default() },
        ..Default::default()
    });
    let mut bytes = [0u64; 2];
    let mut id = 0;
    let now = Time::ZERO;
    for _ in 0..200 {
        q.enqueue(fpkt(1500, 1, id), now).unwrap();
        id += 1;
    }
    for _ in 0..1000 {
        q.enqueue(fpkt(300, 2, id), now).unwrap();
        id += 1;
    }
    // Dequeue at one instant (no CoDel drops: sojourn 0) until one flow runs low.
    // DRR keeps the byte counts within one quantum plus one packet of each other at all times.
    for _ in 0..600 {
        let p = q.dequeue(now).unwrap();
        bytes[(p.len != 1500) as usize] += p.len as u64;
        assert!(bytes[0].abs_diff(bytes[1]) <= 1514 + 1500, "bytes {bytes:?}");
    }
    assert!(bytes[0] > 100_000 && bytes[1] > 100_000, "bytes {bytes:?}");
}

#[test]
fn overflow_drops_half_the_fattest_flow_from_its_head() {
    let mut q = fq(FqCodelConfig { limit: 10, ..Default::default() });
    let now = Time::ZERO;
    for i in 0..8 {
        q.enqueue(fpkt(1000, 1, i), now).unwrap();
    }
    for i in 8..10 {
        q.enqueue(fpkt(1000, 2, i), now).unwrap();
    }
    assert!(q.take_dropped().is_none());
    q.enqueue(fpkt(1000, 2, 10), now).unwrap();
    let gone: Vec<(u64, DropReason)> =
        std::iter::from_fn(|| q.take_dropped()).map(|d| (d.pkt.payload, d.reason)).collect();
    assert_eq!(gone, (0..4).map(|i| (i, DropReason::FattestFlow)).collect::<Vec<_>>());
    assert_eq!(q.xstats().drop_overlimit, 4);
    assert_eq!(q.class_stats(2, now).unwrap().count, 4, "CoDel count rises by the drops");
    let s = q.stats();
    assert_eq!((s.qlen, s.drops, s.backlog_bytes), (7, 4, 7000));

    // drop_batch caps the packets dropped per overflow.
    let mut q = fq(FqCodelConfig { limit: 10, drop_batch: 2, ..Default::default() });
    for i in 0..11 {
        q.enqueue(fpkt(1000, 1, i), now).unwrap();
    }
    assert_eq!(std::iter::from_fn(|| q.take_dropped()).count(), 2);
}

#[test]
fn overflow_can_drop_the_arriving_packet() {
    let mut q = fq(FqCodelConfig { limit: 1, ..Default::default() });
    let now = Time::ZERO;
    q.enqueue(fpkt(100, 1, 0), now).unwrap();
    let d = q.enqueue(fpkt(1000, 2, 1), now).unwrap_err();
    assert_eq!((d.pkt.payload, d.reason), (1, DropReason::FattestFlow));
    assert!(q.take_dropped().is_none());
    assert_eq!(q.stats().drops, 1);
    assert_eq!(q.dequeue(now).unwrap().payload, 0);
}

#[test]
fn memory_limit_drops_and_counts_overmemory() {
    let mut q = fq(FqCodelConfig { memory_limit: 10 * 2304, ..Default::default() });
    let now = Time::ZERO;
    for i in 0..10 {
        q.enqueue(fpkt(1514, 1, i), now).unwrap();
    }
    assert_eq!(q.xstats().memory_usage, 10 * 2304);
    assert!(q.take_dropped().is_none());
    q.enqueue(fpkt(1514, 1, 10), now).unwrap();
    let gone: Vec<DropReason> = std::iter::from_fn(|| q.take_dropped()).map(|d| d.reason).collect();
    // Half of 11 × 1514 bytes is 8327: six packets.
    assert_eq!(gone, vec![DropReason::MemoryLimit; 6]);
    let x = q.xstats();
    assert_eq!((x.drop_overmemory, x.drop_overlimit, x.memory_usage), (6, 6, 5 * 2304));
}

#[test]
fn ecn_is_on_by_default_and_marks_instead_of_dropping() {
    for (ecn, dscp_ecn) in [(true, 0b10u8), (true, 0), (false, 0b10)] {
        let mut cfg = FqCodelConfig::default();
        cfg.params.ecn = ecn;
        let mut q = fq(cfg);
        let (mut marked, mut aqm) = (0, 0);
        // 20% overload of one flow for 2 s.
        let (mut next_arr, mut next_srv, mut id) = (0u64, 0u64, 0u64);
        while next_arr.min(next_srv) < 2_000 * MS {
            if next_arr <= next_srv {
                let mut p = fpkt(1500, 3, id);
                p.dsfield = dscp_ecn;
                let _ = q.enqueue(p, Time::from_nanos(next_arr));
                id += 1;
                next_arr += MS;
            } else {
                if let Some(p) = q.dequeue(Time::from_nanos(next_srv)) {
                    marked += (p.ecn() == Ecn::Ce) as u64;
                }
                next_srv += 1_200_000;
            }
            while let Some(d) = q.take_dropped() {
                assert_eq!(d.reason, DropReason::Aqm);
                aqm += 1;
            }
        }
        if ecn && dscp_ecn != 0 {
            assert_eq!(aqm, 0);
            assert!(marked > 0);
            assert_eq!(q.xstats().ecn_mark, marked);
        } else {
            assert!(aqm > 0, "ecn {ecn} tos {dscp_ecn}");
            assert_eq!(marked, 0);
        }
    }
}

#[test]
fn ce_threshold_marks_without_dropping() {
    let mut cfg = FqCodelConfig::default();
    cfg.params.ce_threshold = Some(Span::from_millis(1));
    let mut q = fq(cfg);
    let mut p = fpkt(1500, 1, 0);
    p.dsfield = 0b01;
    q.enqueue(p, Time::ZERO).unwrap();
    q.enqueue(p, Time::ZERO).unwrap();
    assert_eq!(q.dequeue(Time::from_micros(900)).unwrap().ecn(), Ecn::Ect1);
    assert_eq!(q.dequeue(Time::from_micros(1100)).unwrap().ecn(), Ecn::Ce);
    assert_eq!(q.xstats().ce_mark, 1);
}

#[test]
fn priority_and_filter_results_pick_the_bucket() {
    let mut q = fq(FqCodelConfig { flows: 16, ..Default::default() });
    q.set_handle(Handle::new(1, 0));
    let now = Time::ZERO;
    let mut p = Packet::new(100, 0);
    p.push_class(Handle::new(1, 5));
    assert_eq!(q.bucket_of(&p), Some(4));
    q.enqueue(p, now).unwrap();
    assert_eq!(q.class_stats(5, now).unwrap().qlen, 1);
    assert_eq!(q.active_classes().collect::<Vec<_>>(), vec![5]);

    let mut p = Packet::new(100, 1);
    p.priority = Handle::new(1, 7).to_tc().unwrap();
    assert_eq!(q.bucket_of(&p), Some(6));
    // A priority naming another qdisc is ignored; a filter result of minor 0 or > flows drops.
    p.priority = Handle::new(2, 7).to_tc().unwrap();
    p.flow_hash = u32::MAX;
    assert_eq!(q.bucket_of(&p), Some(15));
    for minor in [0, 17] {
        let mut p = Packet::new(100, 2);
        p.push_class(Handle::new(1, minor));
        let d = q.enqueue(p, now).unwrap_err();
        assert_eq!(d.reason, DropReason::Unclassified);
    }
    assert_eq!(q.stats().drops, 2);
}

#[test]
fn empty_new_flow_passes_through_old_flows() {
    let mut q = fq(FqCodelConfig::default());
    let now = Time::ZERO;
    for i in 0..5 {
        q.enqueue(fpkt(1500, 1, i), now).unwrap();
    }
    // Flow 1 uses its quantum and moves to old_flows.
    q.dequeue(now).unwrap();
    q.dequeue(now).unwrap();
    q.enqueue(fpkt(100, 2, 100), now).unwrap();
    let x = q.xstats();
    assert_eq!((x.new_flows_len, x.old_flows_len), (2, 0));
    // Flow 1 is refilled and moved to old; flow 2 (new) is served first.
    assert_eq!(q.dequeue(now).unwrap().payload, 100);
    // Flow 2 is now empty: it goes to the tail of old_flows rather than leaving, then flow 1.
    assert_eq!(q.dequeue(now).unwrap().payload, 2);
    let x = q.xstats();
    assert_eq!((x.new_flows_len, x.old_flows_len), (0, 2));
    assert_eq!(x.new_flow_count, 2);
    assert_eq!(q.active_classes().count(), 2);
    while q.dequeue(now).is_some() {}
    let x = q.xstats();
    assert_eq!((x.new_flows_len, x.old_flows_len), (0, 0));
}

#[test]
fn class_stats_report_deficit() {
    let mut q = fq(FqCodelConfig::default());
    let now = Time::ZERO;
    q.enqueue(fpkt(1000, 7, 0), now).unwrap();
    q.enqueue(fpkt(1000, 7, 1), now).unwrap();
    let c = q.class_stats(8, now).unwrap();
    assert_eq!((c.deficit, c.qlen, c.backlog), (1514, 2, 2000));
    q.dequeue(now).unwrap();
    assert_eq!(q.class_stats(8, now).unwrap().deficit, 514);
    assert!(q.class_stats(0, now).is_none());
    assert!(q.class_stats(1025, now).is_none());
}

#[test]
fn change_enforces_new_limits_and_keeps_flows() {
    let mut q = fq(FqCodelConfig::default());
    let now = Time::ZERO;
    for i in 0..10 {
        q.enqueue(fpkt(1000, (i % 3) as u32, i), now).unwrap();
    }
    let cfg = FqCodelConfig { limit: 4, ..FqCodelConfig::default() };
    q.change(cfg, now).unwrap();
    assert_eq!(std::iter::from_fn(|| q.take_dropped()).count(), 6);
    assert_eq!(q.stats().qlen, 4);
    assert!(q.change(FqCodelConfig { flows: 2048, ..cfg }, now).is_err());
}

#[test]
fn peek_requeue_reset() {
    let mut q = fq(FqCodelConfig::default());
    let now = Time::ZERO;
    for i in 0..3 {
        q.enqueue(fpkt(100, 1, i), now).unwrap();
    }
    assert_eq!(q.peek(now).unwrap().payload, 0);
    assert_eq!(q.stats().qlen, 3);
    let p = q.dequeue(now).unwrap();
    q.requeue(p, now).unwrap();
    assert_eq!(q.dequeue(now).unwrap().payload, 0);
    let s = q.stats();
    assert_eq!((s.packets, s.requeues, s.qlen), (1, 1, 2));
    assert_eq!(q.reset().len(), 2);
    assert_eq!((q.stats().qlen, q.xstats().memory_usage), (0, 0));
    assert_eq!(q.next_event(now), None);
    q.enqueue(fpkt(100, 1, 9), now).unwrap();
    assert_eq!(q.dequeue(now).unwrap().payload, 9);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Enqueue { len: u32, flow: u32, host: u32, ecn: u8 },
        Dequeue,
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u32..=3000, 0u32..8, 0u32..3, 0u8..4)
                .prop_map(|(len, flow, host, ecn)| Op::Enqueue { len, flow, host, ecn }),
            3 => Just(Op::Dequeue),
            2 => (0u64..60_000_000).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn conservation_limits_and_memory(
            ops in proptest::collection::vec(op(), 1..400),
            limit in 1u32..40,
            flows in 1u32..16,
            drop_batch in 0u32..8,
            memory_limit in 1000u32..60_000,
            quantum in 0u32..3000,
            mode in 0usize..7,
        ) {
            let cfg = FqCodelConfig {
                limit, flows, drop_batch, memory_limit, quantum,
                isolation: FlowIsolation::ALL[mode],
                ..Default::default()
            };
            let mut q = FqCodel::new(cfg).unwrap();
            let (mut now, mut id) = (0u64, 0u64);
            let (mut accepted, mut refused, mut sent, mut later) = (0u64, 0u64, 0u64, 0u64);
            let mut queued_mem: std::collections::HashMap<u64, u32> = Default::default();
            for op in ops {
                match op {
                    Op::Enqueue { len, flow, host, ecn } => {
                        let mut p = Packet::new(len, id);
                        p.flow_hash = flow.wrapping_mul(0x9E37_79B9);
                        p.src_host_hash = host.wrapping_mul(0x85EB_CA6B);
                        p.dst_host_hash = (host + 7).wrapping_mul(0xC2B2_AE35);
                        p.dsfield = ecn;
                        id += 1;
                        match q.enqueue(p, Time::from_nanos(now)) {
                            Ok(()) => { accepted += 1; queued_mem.insert(p.payload, truesize(&p)); }
                            Err(d) => {
                                prop_assert_eq!(d.pkt.payload, p.payload);
                                refused += 1;
                            }
                        }
                        prop_assert!(q.stats().qlen <= limit as u64);
                    }
                    Op::Dequeue => {
                        if let Some(p) = q.dequeue(Time::from_nanos(now)) {
                            sent += 1;
                            prop_assert!(queued_mem.remove(&p.payload).is_some());
                        }
                    }
                    Op::Advance(dt) => now += dt,
                }
                while let Some(d) = q.take_dropped() {
                    prop_assert!(queued_mem.remove(&d.pkt.payload).is_some(), "dropped twice or never queued");
                    later += 1;
                }
                let s = q.stats();
                prop_assert_eq!(accepted, sent + later + s.qlen);
                prop_assert_eq!(s.drops, refused + later);
                prop_assert_eq!(q.xstats().memory_usage, queued_mem.values().map(|&m| m as u64).sum::<u64>());
                prop_assert_eq!(s.qlen as usize, queued_mem.len());
            }
            // Everything left can be drained.
            let mut left = q.stats().qlen;
            while left > 0 {
                now += 1_000_000_000;
                match q.dequeue(Time::from_nanos(now)) {
                    Some(_) => left -= 1,
                    None => { prop_assert_eq!(q.stats().qlen, 0); break; }
                }
                while q.take_dropped().is_some() { left -= 1; }
                prop_assert_eq!(left, q.stats().qlen);
            }
            prop_assert_eq!(q.next_event(Time::from_nanos(now)), None);
        }
    }
}
