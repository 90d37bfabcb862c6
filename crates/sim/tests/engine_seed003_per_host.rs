//! Seed 003's composition, end to end through the real components: a tc script (HTB classes
//! chosen by `flow hash keys src divisor N`, fq_codel under each class) is loaded, built into an
//! engine program, and fed real frames (sluice-wire builds them, the engine parses them). Host A runs three greedy
//! flows and host B one; per-host hashing must give the two hosts equal shares, while a plain
//! fq_codel (per-flow fairness only) gives host A three quarters.

use sluice_core::{Rate, Time};
use sluice_engine::{Engine, Program, ProgramOptions, Verdict};
use sluice_tc::script::load_tc_script;
use sluice_tc::shell::Vars;
use sluice_wire::FrameSpec;
use std::net::{IpAddr, Ipv4Addr};

const PER_HOST: &str = "\
DEV=eth0
tc qdisc add dev $DEV root handle 1: htb default 10
tc class add dev $DEV parent 1: classid 1:1 htb rate 4600kbit ceil 4600kbit
for i in 10 11 12 13 14 15 16 17; do :; done
tc class add dev $DEV parent 1:1 classid 1:10 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:11 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:12 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:13 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:14 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:15 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:16 htb rate 575kbit ceil 4600kbit
tc class add dev $DEV parent 1:1 classid 1:17 htb rate 575kbit ceil 4600kbit
tc qdisc add dev $DEV parent 1:10 fq_codel
tc qdisc add dev $DEV parent 1:11 fq_codel
tc qdisc add dev $DEV parent 1:12 fq_codel
tc qdisc add dev $DEV parent 1:13 fq_codel
tc qdisc add dev $DEV parent 1:14 fq_codel
tc qdisc add dev $DEV parent 1:15 fq_codel
tc qdisc add dev $DEV parent 1:16 fq_codel
tc qdisc add dev $DEV parent 1:17 fq_codel
tc filter add dev $DEV parent 1: protocol all prio 1 handle 1 flow hash keys src divisor 8 baseclass 1:10
";

const PER_FLOW_ONLY: &str = "\
tc qdisc add dev eth0 root handle 1: htb default 10
tc class add dev eth0 parent 1: classid 1:10 htb rate 4600kbit ceil 4600kbit
tc qdisc add dev eth0 parent 1:10 fq_codel
";

struct Flow {
    host: usize,
    frame: Vec<u8>,
    queued: u32,
}

/// Runs four greedy TCP-sized flows (three from host A, one from host B) for `secs` of virtual
/// time and returns host A's share of the bytes the shaper sent, plus the classes they used.
fn host_a_share(script: &str, secs: u64) -> (f64, Vec<String>) {
    let loaded = load_tc_script("test.tc", script, &Vars::new()).expect("script loads");
    let program =
        Program::from_model(&loaded.state, "eth0", &ProgramOptions::default()).expect("tree builds");
    let mut engine = Engine::new(program, Time::ZERO);

    let a = IpAddr::V4(Ipv4Addr::new(198, 18, 1, 10));
    let b = IpAddr::V4(Ipv4Addr::new(198, 18, 1, 20));
    let server = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1));
    let mut flows: Vec<Flow> = [(0, a, 40001), (0, a, 40002), (0, a, 40003), (1, b, 50001)]
        .into_iter()
        .map(|(host, src, port)| {
            let mut spec = FrameSpec::udp(src, server, port, 5001, 1472);
            spec.proto = sluice_wire::L4::Tcp;
            Flow { host, frame: spec.build().expect("frame builds"), queued: 0 }
        })
        .collect();

    let link = Rate::from_bps(5_000_000);
    let end = Time::from_secs(secs);
    let warmup = Time::from_secs(2);
    let mut now = Time::ZERO;
    let mut sent = [0u64; 2];
    let mut classes = vec![String::new(); flows.len()];
    while now < end {
        // Greedy senders keep 30 packets each in the shaper (a window), like bulk TCP in steady state.
        for (i, f) in flows.iter_mut().enumerate() {
            while f.queued < 30 {
                // In flight until it comes back from `dequeue` or `take_dropped`.
                f.queued += 1;
                if engine.ingress_frame(&f.frame, i as u64, now) != Verdict::Queued {
                    break;
                }
            }
        }
        // Every dropped payload comes back once (fq_codel drops from the fattest flow).
        while let Some(d) = engine.take_dropped() {
            flows[d.pkt.payload as usize].queued -= 1;
        }
        match engine.dequeue(now) {
            Some(pkt) => {
                let i = pkt.payload as usize;
                if classes[i].is_empty() {
                    classes[i] = format!("{:?}", pkt.class_path[0]);
                }
                let f = &mut flows[i];
                f.queued -= 1;
                if now >= warmup {
                    sent[f.host] += pkt.len as u64;
                }
                now += link.time_to_send(pkt.len as u64);
            }
            None => match engine.next_event(now) {
                Some(t) if t > now => now = t,
                _ => now += link.time_to_send(1),
            },
        }
        while let Some(d) = engine.take_dropped() {
            flows[d.pkt.payload as usize].queued -= 1;
        }
    }
    let s = engine.stats();
    assert_eq!(s.received, s.sent_packets + s.dropped + s.queued, "{s:?}");
    (sent[0] as f64 / (sent[0] + sent[1]) as f64, classes)
}

#[test]
fn per_host_hashing_gives_two_hosts_equal_shares() {
    let (share, classes) = host_a_share(PER_HOST, 20);
    eprintln!("per-host: host A share {share:.4}, classes {classes:?}");
    // The filter puts all of host A's flows in one class and host B in another.
    assert_eq!(classes[0], classes[1]);
    assert_eq!(classes[1], classes[2]);
    assert_ne!(classes[0], classes[3], "the two hosts must hash to different classes: {classes:?}");
    assert!((share - 0.5).abs() < 0.03, "host A share {share:.4} (3 flows) vs host B (1 flow)");
}

#[test]
fn per_flow_fairness_alone_favours_the_host_with_more_flows() {
    let (share, _) = host_a_share(PER_FLOW_ONLY, 20);
    eprintln!("per-flow only: host A share {share:.4}");
    assert!((share - 0.75).abs() < 0.03, "host A share {share:.4}");
}
