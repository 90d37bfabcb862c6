use super::*;
use crate::packet::NatOrig;
use crate::time::Span;

fn pkt(len: u32, flow: u32, src: u32, dscp: u8, seq: u64) -> Packet {
    let mut p = Packet::new(len, seq);
    p.flow_hash = flow.wrapping_mul(0x9E37_79B9);
    p.src_host_hash = src.wrapping_mul(0x85EB_CA6B);
    p.dst_host_hash = 0x1234_5678;
    p.dsfield = dscp << 2;
    p
}

/// Runs `secs` of backlogged senders (`flows`: (flow id, source host, dscp, bytes per packet))
/// offering `offer` packets per ms each, and returns bytes delivered per flow.
fn run(cake: &mut Cake, flows: &[(u32, u32, u8, u32)], offer: u32, ms: u64) -> Vec<u64> {
    run_with(cake, flows, offer, ms, pkt)
}

/// [`run`] with packets made by `make` (same arguments as [`pkt`]).
fn run_with(
    cake: &mut Cake,
    flows: &[(u32, u32, u8, u32)],
    offer: u32,
    ms: u64,
    make: impl Fn(u32, u32, u32, u8, u64) -> Packet,
) -> Vec<u64> {
    let mut got = vec![0u64; flows.len()];
    let mut seq = 0u64;
    let mut now = Time::ZERO;
    for _ in 0..ms {
        for (fi, &(f, s, d, len)) in flows.iter().enumerate() {
            for _ in 0..offer {
                seq += 1;
                cake.enqueue(make(len, f, s, d, (fi as u64) << 32 | seq), now).unwrap();
                while cake.take_dropped().is_some() {}
            }
        }
        let end = Time::from_nanos(now.as_nanos() + 1_000_000);
        while let Some(t) = cake.next_event(now) {
            if t > end {
                break;
            }
            now = now.max(t);
            match cake.dequeue(now) {
                Some(p) => got[(p.payload >> 32) as usize] += p.len as u64,
                None => {
                    if cake.next_event(now).is_some_and(|t| t <= now) {
                        break;
                    }
                }
            }
            while cake.take_dropped().is_some() {}
        }
        now = end;
    }
    got
}

#[test]
fn shapes_to_the_configured_rate() {
    // 10 Mbit/s, one bulk flow offered 24 Mbit/s for 2 s.
    let cfg = CakeConfig { rate: 1_250_000, tin_mode: TinMode::Besteffort, ..CakeConfig::default() };
    let mut c = Cake::new(cfg, 1);
    let got = run(&mut c, &[(1, 1, 0, 1500)], 2, 2000);
    let rate = got[0] as f64 / 2.0;
    assert!((rate - 1_250_000.0).abs() / 1_250_000.0 < 0.02, "{rate}");
    assert!(c.stats().drops > 0, "an unresponsive flow is dropped by COBALT or the limit");
}

#[test]
fn flows_share_equally_and_hosts_share_in_dual_srchost() {
    // Host A with three flows, host B with one, under dual-srchost: hosts get half each.
    let cfg = CakeConfig {
        rate: 1_250_000,
        tin_mode: TinMode::Besteffort,
        flow_mode: FlowMode::DualSrchost,
        ..CakeConfig::default()
    };
    let mut c = Cake::new(cfg, 1);
    let got = run(&mut c, &[(1, 1, 0, 1500), (2, 1, 0, 1500), (3, 1, 0, 1500), (4, 2, 0, 1500)], 1, 3000);
    let a: u64 = got[..3].iter().sum();
    let b = got[3];
    let share = b as f64 / (a + b) as f64;
    assert!((share - 0.5).abs() < 0.05, "host B share {share} ({got:?})");
    // The same traffic under plain `flows`: B gets a quarter.
    let cfg = CakeConfig { flow_mode: FlowMode::Flows, ..cfg };
    let mut c = Cake::new(cfg, 1);
    let got = run(&mut c, &[(1, 1, 0, 1500), (2, 1, 0, 1500), (3, 1, 0, 1500), (4, 2, 0, 1500)], 1, 3000);
    let share = got[3] as f64 / got.iter().sum::<u64>() as f64;
    assert!((share - 0.25).abs() < 0.04, "flow share {share} ({got:?})");
}

#[test]
fn nat_restores_host_fairness_behind_a_masquerading_router() {
    // The same four flows after source NAT: every packet has the router's address as its
    // source; conntrack's pre-NAT hashes travel in `nat_orig`.
    let natted = |len, flow, src, dscp, seq| {
        let inside = pkt(len, flow, src, dscp, seq);
        let mut p = pkt(len, flow + 100, 99, dscp, seq);
        p.nat_orig = Some(NatOrig {
            flow_hash: inside.flow_hash,
            src_host_hash: inside.src_host_hash,
            dst_host_hash: inside.dst_host_hash,
        });
        p
    };
    let flows = [(1, 1, 0, 1500), (2, 1, 0, 1500), (3, 1, 0, 1500), (4, 2, 0, 1500)];
    let base = CakeConfig {
        rate: 1_250_000,
        tin_mode: TinMode::Besteffort,
        flow_mode: FlowMode::DualSrchost,
        ..CakeConfig::default()
    };
    let share = |nat| {
        let mut c = Cake::new(CakeConfig { nat, ..base }, 1);
        let got = run_with(&mut c, &flows, 1, 3000, natted);
        got[3] as f64 / got.iter().sum::<u64>() as f64
    };
    let (without, with) = (share(false), share(true));
    assert!((without - 0.25).abs() < 0.04, "one source host after NAT: flow fairness, {without}");
    assert!((with - 0.5).abs() < 0.05, "nat: host fairness on the inside addresses, {with}");
}

#[test]
fn voice_tin_gets_priority_up_to_its_threshold() {
    // diffserv4: EF flow offered 1 Mbit/s beside a 20 Mbit/s best-effort flow on a 10 Mbit/s
    // link: EF gets all it asks (below its 1/4 threshold) with little delay.
    let cfg = CakeConfig { rate: 1_250_000, tin_mode: TinMode::Diffserv4, ..CakeConfig::default() };
    let mut c = Cake::new(cfg, 1);
    let mut now = Time::ZERO;
    let mut seq = 0;
    let mut voice_delay_max = Span::ZERO;
    let mut voice_bytes = 0u64;
    for ms in 0..2000u64 {
        for _ in 0..2 {
            seq += 1;
            c.enqueue(pkt(1500, 1, 1, 0, seq), now).unwrap();
        }
        if ms % 2 == 0 {
            seq += 1;
            let mut v = pkt(250, 2, 2, 46, 1 << 40 | seq);
            v.enqueue_time = now;
            c.enqueue(v, now).unwrap();
        }
        let end = Time::from_nanos(now.as_nanos() + 1_000_000);
        while let Some(t) = c.next_event(now) {
            if t > end {
                break;
            }
            now = now.max(t);
            if let Some(p) = c.dequeue(now) {
                if p.payload >> 40 == 1 {
                    voice_bytes += p.len as u64;
                    voice_delay_max = voice_delay_max.max(now.since(p.enqueue_time));
                }
            } else if c.next_event(now).is_some_and(|t| t <= now) {
                break;
            }
            while c.take_dropped().is_some() {}
        }
        while c.take_dropped().is_some() {}
        now = end;
    }
    assert!(voice_bytes >= 999 * 250, "{voice_bytes}");
    assert!(voice_delay_max < Span::from_millis(5), "{voice_delay_max:?}");
    let x = c.xstats();
    assert_eq!(x.tins.len(), 4);
    assert!(x.tins[3].sent_packets >= 999, "voice tin is printed last: {:?}", x.tins[3]);
}

#[test]
fn ecn_capable_flows_are_marked_not_dropped() {
    let cfg = CakeConfig { rate: 125_000, tin_mode: TinMode::Besteffort, ..CakeConfig::default() };
    let mut c = Cake::new(cfg, 1);
    let mut now = Time::ZERO;
    for i in 0..400u64 {
        let mut p = pkt(1000, 1, 1, 0, i);
        p.dsfield |= 2; // ECT(0)
        c.enqueue(p, now).unwrap();
    }
    let mut marked = 0;
    for _ in 0..4000 {
        now = Time::from_nanos(now.as_nanos() + 1_000_000);
        while let Some(p) = c.dequeue(now) {
            marked += (p.ecn() == crate::packet::Ecn::Ce) as u32;
        }
    }
    assert!(marked > 0);
    assert_eq!(c.stats().drops, 0);
    assert_eq!(c.xstats().tins[0].ecn_marked, marked);
}

#[test]
fn memory_limit_drops_from_the_fattest_flow() {
    let cfg = CakeConfig {
        rate: 125_000,
        memlimit: 200_000,
        tin_mode: TinMode::Besteffort,
        ..CakeConfig::default()
    };
    let mut c = Cake::new(cfg, 1);
    let now = Time::ZERO;
    for i in 0..200u64 {
        c.enqueue(pkt(1500, 1, 1, 0, i), now).unwrap();
    }
    c.enqueue(pkt(100, 2, 2, 0, 1 << 32), now).unwrap();
    let mut dropped_small = 0;
    let mut drops = 0;
    while let Some(d) = c.take_dropped() {
        drops += 1;
        assert_eq!(d.reason, DropReason::MemoryLimit);
        dropped_small += (d.pkt.payload >> 32 == 1) as u32;
    }
    assert!(drops > 0);
    assert_eq!(dropped_small, 0);
    assert!(c.xstats().memory_used <= 200_000 + 4096);
}

#[test]
fn split_gso_queues_segments_and_unlimited_passes_at_once() {
    let mut c = Cake::new(CakeConfig::default(), 1);
    let mut g = pkt(3000, 1, 1, 0, 7);
    g.gso_segs = 2;
    g.gso_size = 1514;
    c.enqueue(g, Time::ZERO).unwrap();
    assert_eq!(c.qlen(), 2);
    let a = c.dequeue(Time::ZERO).unwrap();
    let b = c.dequeue(Time::ZERO).unwrap();
    assert_eq!((a.len, b.len), (1514, 1486));
    assert!(c.dequeue(Time::ZERO).is_none());
}

#[test]
fn change_to_fewer_tins_frees_their_packets() {
    let cfg = CakeConfig { tin_mode: TinMode::Diffserv8, rate: 125_000, ..CakeConfig::default() };
    let mut c = Cake::new(cfg, 1);
    c.enqueue(pkt(500, 1, 1, 56, 1), Time::ZERO).unwrap(); // CS7: tin 7
    c.enqueue(pkt(500, 2, 1, 0, 2), Time::ZERO).unwrap(); // tin 2
    let freed = c.change(CakeConfig { tin_mode: TinMode::Diffserv3, ..cfg });
    assert_eq!(freed.len(), 1);
    assert_eq!(freed[0].payload, 1);
    assert_eq!(c.qlen(), 1);
}

#[test]
fn a_decaying_flow_does_not_stall_dequeue() {
    // A flow dropped by the memory limit stays decaying after it empties; another flow's
    // packets must still come out.
    let cfg = CakeConfig {
        rate: 125_000,
        memlimit: 20_000,
        tin_mode: TinMode::Besteffort,
        ..CakeConfig::default()
    };
    let mut c = Cake::new(cfg, 1);
    let mut now = Time::ZERO;
    for i in 0..30u64 {
        c.enqueue(pkt(1500, 1, 1, 0, i), now).unwrap();
    }
    while c.take_dropped().is_some() {}
    let mut got = 0;
    for step in 0..2000u64 {
        if step == 500 {
            c.enqueue(pkt(200, 2, 2, 0, 99), now).unwrap();
        }
        now = Time::from_nanos(now.as_nanos() + 1_000_000);
        while let Some(_p) = c.dequeue(now) {
            got += 1;
        }
        while c.take_dropped().is_some() {}
    }
    assert_eq!(c.qlen(), 0);
    assert!(got >= 2);
}
