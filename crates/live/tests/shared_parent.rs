//! Two (or three) subscribers under one parent class, in virtual time: once in one engine (exact
//! HTB), once spread over two engines whose copies of the parent are rebalanced every
//! [`PERIOD`] as the live shaper's workers do. The shares are compared (`--nocapture` prints
//! them): how close to exact HTB sharing the sharded shaper stays.

use sluice_core::{Handle, Packet, Span, Time};
use sluice_engine::{Engine, Program, ProgramOptions};
use sluice_live::rebalance::{shared_classes, Rebalancer, Report, PERIOD};

const PARENT_BPS: u64 = 100_000_000;
const LEN: u32 = 1500;
/// The simulation step (a 1500-byte frame takes 120 µs at 100 Mbit/s).
const STEP: Span = Span::from_micros(10);

/// A subscriber: its leaf, what it offers (None: as much as it can send), its shard.
struct Sub {
    leaf: u32,
    offered_bps: Option<u64>,
    shard: usize,
    /// When it starts sending, s.
    from_s: u64,
}

fn model(leaves: &[(u32, &str)]) -> sluice_tc::model::State {
    let mut s = format!(
        // Packets name their leaf (skb priority); no default class, which would be shared.
        "tc qdisc add dev $DEV root handle 1: htb\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate {PARENT_BPS}bit\n"
    );
    for (minor, opts) in leaves {
        s += &format!("tc class add dev $DEV parent 1:1 classid 1:{minor:x} htb {opts}\n");
    }
    sluice_live::config::from_script("t", &s, "e").unwrap()
}

fn engine(state: &sluice_tc::model::State) -> Engine {
    // The live path's buckets: at least 1 ms of the rate.
    let opts = ProgramOptions { burst_floor: Some(Span::from_micros(1000)), seed: 1 };
    Engine::new(Program::from_model(state, "e", &opts).unwrap(), Time::ZERO)
}

/// Runs `subs` for `secs` over `shards` engines (1: exact HTB); returns each subscriber's
/// throughput in bit/s over the last `secs - 1` seconds.
fn run(state: &sluice_tc::model::State, subs: &[Sub], shards: usize, secs: u64) -> Vec<f64> {
    run_window(state, subs, shards, Time::from_secs(1), Time::from_secs(secs))
}

/// [`run`], counting what is sent in `[start, end)` only.
fn run_window(
    state: &sluice_tc::model::State,
    subs: &[Sub],
    shards: usize,
    start: Time,
    end: Time,
) -> Vec<f64> {
    let mut engines: Vec<Engine> = (0..shards).map(|_| engine(state)).collect();
    let mut rebalancers: Vec<Rebalancer> =
        shared_classes(state, "e").into_iter().map(|c| Rebalancer::new(c, shards)).collect();
    let shard_of = |s: &Sub| if shards == 1 { 0 } else { s.shard };
    let mut outstanding = vec![0u32; subs.len()];
    let mut credit = vec![0f64; subs.len()];
    let mut sent = vec![0u64; subs.len()];
    let mut next_id = 0u64;
    let mut next_tick = Time::ZERO + PERIOD;
    let mut now = Time::ZERO;
    while now < end {
        for (k, s) in subs.iter().enumerate() {
            if now < Time::from_secs(s.from_s) {
                continue;
            }
            let e = &mut engines[shard_of(s)];
            let mut offer = |e: &mut Engine| {
                let mut p = Packet::new(LEN, (k as u64) << 48 | next_id);
                p.priority = Handle::new(1, s.leaf).to_tc().unwrap();
                next_id += 1;
                let _ = e.ingress(p, &Default::default(), &[], now);
            };
            match s.offered_bps {
                None => {
                    while outstanding[k] < 64 {
                        offer(e);
                        outstanding[k] += 1;
                    }
                }
                Some(bps) => {
                    credit[k] += bps as f64 * STEP.as_nanos() as f64 / 8e9;
                    while credit[k] >= LEN as f64 {
                        credit[k] -= LEN as f64;
                        offer(e);
                        outstanding[k] += 1;
                    }
                }
            }
        }
        for e in engines.iter_mut() {
            while let Some(p) = e.dequeue(now) {
                let k = (p.payload >> 48) as usize;
                outstanding[k] -= 1;
                if now >= start {
                    sent[k] += p.len as u64;
                }
            }
            while let Some(d) = e.take_dropped() {
                outstanding[(d.pkt.payload >> 48) as usize] -= 1;
            }
        }
        if shards > 1 && now >= next_tick {
            next_tick += PERIOD;
            for r in rebalancers.iter_mut() {
                let class = r.class().classid;
                let reports: Vec<Report> = engines
                    .iter()
                    .map(|e| {
                        let l = e.class_load(class, now).unwrap();
                        Report {
                            bytes: l.bytes,
                            hungry: l.limited && e.backlog_bytes() > 0,
                            active: l.active,
                        }
                    })
                    .collect();
                r.tick(PERIOD, &reports);
                for (e, (rate, ceil)) in engines.iter_mut().zip(r.shares()) {
                    e.set_class_rate(class, rate.into_rate(), ceil.into_rate(), now).unwrap();
                }
            }
        }
        now += STEP;
    }
    let secs = (end - start).as_nanos() as f64 / 1e9;
    sent.iter().map(|&b| b as f64 * 8.0 / secs).collect()
}

trait IntoRate {
    fn into_rate(self) -> sluice_core::Rate;
}
impl IntoRate for u64 {
    fn into_rate(self) -> sluice_core::Rate {
        sluice_core::Rate::from_bps(self)
    }
}

/// Exact vs sharded shares, printed; returns the largest difference as a fraction of the parent.
fn compare(name: &str, leaves: &[(u32, &str)], subs: &[Sub]) -> f64 {
    let state = model(leaves);
    let exact = run(&state, subs, 1, 4);
    let sharded = run(&state, subs, 2, 4);
    let err = exact.iter().zip(&sharded).map(|(a, b)| (a - b).abs() / PARENT_BPS as f64).fold(0.0, f64::max);
    let total: f64 = sharded.iter().sum();
    let mbit = |v: &[f64]| v.iter().map(|x| format!("{:.1}", x / 1e6)).collect::<Vec<_>>().join(" / ");
    println!(
        "{name}: exact {} Mbit/s, 2 shards {} Mbit/s (sum {:.1}), largest error {:.1}% of the parent",
        mbit(&exact),
        mbit(&sharded),
        total / 1e6,
        err * 100.0
    );
    // The shards never send more than the parent together (beyond the buckets' 1 ms).
    assert!(total <= PARENT_BPS as f64 * 1.005, "{name}: {total}");
    err
}

#[test]
fn two_greedy_subscribers_on_two_shards_split_the_parent_as_htb_does() {
    let leaves = [(0x10, "rate 10mbit ceil 100mbit"), (0x20, "rate 10mbit ceil 100mbit")];
    let subs = [
        Sub { leaf: 0x10, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 1, from_s: 0 },
    ];
    assert!(compare("equal, both greedy", &leaves, &subs) < 0.02);
}

#[test]
fn a_light_subscriber_leaves_the_rest_to_the_other_shard() {
    let leaves = [(0x10, "rate 10mbit ceil 100mbit"), (0x20, "rate 10mbit ceil 100mbit")];
    let subs = [
        Sub { leaf: 0x10, offered_bps: Some(20_000_000), shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 1, from_s: 0 },
    ];
    assert!(compare("one at 20 Mbit/s, one greedy", &leaves, &subs) < 0.02);
}

/// HTB gives each backlogged leaf its rate, then the excess by quantum: the shards are weighted
/// by their backlogged leaves' rates and quanta, so unequal plans and uneven shards share as in
/// one HTB.
#[test]
fn unequal_rates_and_uneven_shards_share_as_in_one_htb() {
    let leaves = [(0x10, "rate 10mbit ceil 100mbit"), (0x20, "rate 40mbit ceil 100mbit")];
    let subs = [
        Sub { leaf: 0x10, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 1, from_s: 0 },
    ];
    assert!(compare("rates 10 and 40, both greedy", &leaves, &subs) < 0.02);
    let leaves = [
        (0x10, "rate 10mbit ceil 100mbit"),
        (0x20, "rate 10mbit ceil 100mbit"),
        (0x30, "rate 10mbit ceil 100mbit"),
    ];
    let subs = [
        Sub { leaf: 0x10, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x30, offered_bps: None, shard: 1, from_s: 0 },
    ];
    assert!(compare("three equal, two on one shard", &leaves, &subs) < 0.02);
}

/// Where the sharded split is not the kernel's: a subscriber held by its own ceil (30 Mbit/s)
/// gets its ceil and the other the rest, less the headroom (the textbook answer); in one HTB it
/// gets less, as in the kernel (its turn in the parent's round is lost each time it hits its
/// ceil). Measured, not hidden.
#[test]
fn a_subscriber_at_its_ceil_gets_its_ceil() {
    let leaves = [(0x10, "rate 10mbit ceil 30mbit"), (0x20, "rate 10mbit ceil 100mbit")];
    let subs = [
        Sub { leaf: 0x10, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 1, from_s: 0 },
    ];
    compare("one capped by its ceil at 30, one greedy", &leaves, &subs);
    let state = model(&leaves);
    let got = run(&state, &subs, 2, 4);
    assert!((got[0] / 30e6 - 1.0).abs() < 0.01, "{got:?}");
    assert!(got[1] > 67e6, "{got:?}");
}

/// A subscriber that starts while the other holds the whole parent: how soon the shards share,
/// and by how much they overshoot meanwhile.
#[test]
fn a_subscriber_starting_from_idle_gets_its_share_within_milliseconds() {
    let leaves = [(0x10, "rate 10mbit ceil 100mbit"), (0x20, "rate 10mbit ceil 100mbit")];
    let subs = [
        Sub { leaf: 0x10, offered_bps: None, shard: 0, from_s: 0 },
        Sub { leaf: 0x20, offered_bps: None, shard: 1, from_s: 1 },
    ];
    let state = model(&leaves);
    let ms = |m: u64| Time::from_millis(m);
    for (from, to) in [(1000, 1002), (1000, 1010), (1010, 1100)] {
        let exact = run_window(&state, &subs, 1, ms(from), ms(to));
        let sharded = run_window(&state, &subs, 2, ms(from), ms(to));
        println!(
            "newcomer over {}-{} ms after it starts: exact {:.1} / {:.1}, 2 shards {:.1} / {:.1} Mbit/s",
            from - 1000,
            to - 1000,
            exact[0] / 1e6,
            exact[1] / 1e6,
            sharded[0] / 1e6,
            sharded[1] / 1e6
        );
        let sum = sharded[0] + sharded[1];
        if from >= 1010 {
            // From 10 ms on, even shares within 2 % of the parent (one HTB is slower to get there:
            // the newcomer starts on its own rate).
            assert!((sharded[1] - 50e6).abs() < 2e6, "{exact:?} {sharded:?}");
            assert!(sum <= 100.5e6, "{sum}");
        } else {
            // The newcomer's worker starts on its full bucket: the parent is exceeded by at most
            // one bucket per worker (1 ms of the parent's rate each) over the window.
            let buckets = 2.0 * 100e6 * 0.001 / ((to - from) as f64 / 1000.0);
            assert!(sum <= 100e6 + buckets, "{sum} over {from}-{to} ms");
        }
    }
}
