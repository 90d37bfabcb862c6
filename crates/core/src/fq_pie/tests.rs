use super::*;
use crate::time::Span;

fn pkt(len: u32, flow: u32) -> Packet {
    let mut p = Packet::new(len, flow as u64);
    p.flow_hash = flow.wrapping_mul(0x9E37_79B9);
    p
}

#[test]
fn validates_like_the_kernel() {
    assert!(FqPie::new(FqPieConfig { flows: 0, ..FqPieConfig::default() }).is_err());
    assert!(FqPie::new(FqPieConfig { flows: 65537, ..FqPieConfig::default() }).is_err());
    assert!(FqPie::new(FqPieConfig { flows: 65536, ..FqPieConfig::default() }).is_ok());
    assert!(FqPie::new(FqPieConfig { quantum: 0, ..FqPieConfig::default() }).is_err());
    assert!(FqPie::new(FqPieConfig { quantum: (1 << 20) + 1, ..FqPieConfig::default() }).is_err());
    let mut q = FqPie::new(FqPieConfig::default()).unwrap();
    assert!(q.change(FqPieConfig { flows: 512, ..FqPieConfig::default() }, Time::ZERO).is_err());
}

/// A bulk flow overloading a 10 Mbit/s link beside a sparse one: the bulk flow's PIE holds its
/// own queue near the target while the sparse flow's packets wait only for the one in service.
#[test]
fn a_sparse_flow_skips_the_bulk_queue() {
    let mut q = FqPie::new(FqPieConfig::default()).unwrap();
    let (mut t, mut link_free) = (Time::ZERO, Time::ZERO);
    let (mut bulk, mut sparse) = (Vec::new(), Vec::new());
    let mut k = 0u64;
    while t < Time::from_secs(30) {
        // Bulk: 12.5 Mbit/s; sparse: one packet every 20 ms.
        let _ = q.enqueue(pkt(1000, 1), t);
        if k.is_multiple_of(31) {
            let _ = q.enqueue(pkt(200, 2), t);
        }
        k += 1;
        t += Span::from_micros(640);
        while link_free <= t {
            let Some(p) = q.dequeue(link_free) else {
                link_free = t;
                break;
            };
            let d = link_free.since(p.enqueue_time).as_secs_f64() * 1e3;
            if link_free > Time::from_secs(15) {
                if p.payload == 1 {
                    bulk.push(d)
                } else {
                    sparse.push(d)
                }
            }
            link_free += Span::from_nanos(p.len as u64 * 800);
        }
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (b, s) = (med(bulk), med(sparse));
    assert!((10.0..=20.0).contains(&b), "bulk median {b} ms");
    assert!(s < 1.0, "sparse median {s} ms");
    let x = q.xstats();
    assert!(x.dropped > 100 && x.overlimit == 0 && x.overmemory == 0, "{x:?}");
    assert!(x.new_flow_count >= 2, "{x:?}");
}

#[test]
fn memory_limit_counts_but_does_not_drop() {
    let cfg = FqPieConfig { memory_limit: 4096, ..FqPieConfig::default() };
    let mut q = FqPie::new(cfg).unwrap();
    for i in 0..10 {
        assert!(q.enqueue(pkt(1500, i), Time::ZERO).is_ok());
    }
    let x = q.xstats();
    assert_eq!(x.packets_in, 10);
    assert!(x.overmemory >= 7, "{x:?}");
    assert_eq!(x.memory_usage, 10 * truesize(&pkt(1500, 0)));
    assert_eq!(x.new_flows_len + x.old_flows_len, 10);
}

#[test]
fn ecn_prob_is_the_marking_threshold() {
    let params = PieParams { ecn: true, ..PieParams::default() };
    let mut q = FqPie::new(FqPieConfig { params, ecn_prob: 30, ..FqPieConfig::default() }).unwrap();
    let b = q.bucket_of(&pkt(1000, 7)).unwrap() as usize;
    for _ in 0..5 {
        q.enqueue(pkt(1000, 7), Time::ZERO).unwrap();
    }
    let v = &mut q.flows[b].vars;
    v.burst_time = 0;
    v.qdelay = params.target;
    v.prob = MAX_PROB / 4; // 25%: above pie's 10%, below ecn_prob 30
    v.accu_prob = MAX_PROB * 9;
    let mut p = pkt(1000, 7);
    p.dsfield = 1;
    assert!(q.enqueue(p, Time::ZERO).is_ok());
    assert_eq!(q.xstats().ecn_mark, 1);
    q.flows[b].vars.prob = MAX_PROB / 3;
    q.flows[b].vars.accu_prob = MAX_PROB * 9;
    assert_eq!(q.enqueue(p, Time::ZERO).unwrap_err().reason, DropReason::Aqm);
}

#[test]
fn limit_and_lower_limit_on_change() {
    let params = PieParams { limit: 4, ..PieParams::default() };
    let cfg = FqPieConfig { params, ..FqPieConfig::default() };
    let mut q = FqPie::new(cfg).unwrap();
    for i in 0..6 {
        let _ = q.enqueue(pkt(100, i), Time::ZERO);
    }
    assert_eq!((q.xstats().overlimit, q.qlen()), (2, 4));
    q.change(FqPieConfig { params: PieParams { limit: 1, ..params }, ..cfg }, Time::ZERO).unwrap();
    assert_eq!(q.qlen(), 1);
    assert_eq!(std::iter::from_fn(|| q.take_dropped()).count(), 3);
}

#[test]
fn priority_picks_the_flow() {
    let mut q = FqPie::new(FqPieConfig { flows: 8, ..FqPieConfig::default() }).unwrap();
    q.set_handle(Handle::new(1, 0));
    let mut p = pkt(100, 3);
    p.priority = 0x0001_0005;
    assert_eq!(q.bucket_of(&p), Some(4));
    p.priority = 0x0001_0009;
    assert_eq!(q.bucket_of(&p), Some(reciprocal_scale(p.flow_hash, 8)));
}
