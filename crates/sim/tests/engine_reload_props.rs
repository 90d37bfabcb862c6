//! Random sequences of ingress, dequeue, time steps and reloads to random small configurations
//! (HTB, DRR, RED, TBF, pfifo, bfifo, fq_codel, with tiny limits so that drops happen, filters
//! and policers), checked against the engine's contract:
//!
//! - every payload comes back exactly once: sent, dropped, or flushed at the end;
//! - the engine's drop counter equals the payloads `take_dropped` handed back, its sent counter
//!   the packets `dequeue` returned, and `received = sent + dropped + queued` after every step;
//! - the root qdiscs' `tc -s` drop counters agree with the engine's;
//! - no flow is reordered, across any number of reloads.

use proptest::prelude::*;
use sluice_core::{Span, Time};
use sluice_engine::{Engine, Program, ProgramOptions};
use sluice_tc::script::load_tc_script;
use sluice_wire::{FrameSpec, L4};
use std::net::{IpAddr, Ipv4Addr};

#[derive(Clone, Debug)]
enum Leaf {
    Pfifo(u32),
    Bfifo(u32),
    FqCodel(u32),
}

impl Leaf {
    fn tc(&self) -> String {
        match self {
            Leaf::Pfifo(n) => format!("pfifo limit {n}"),
            Leaf::Bfifo(b) => format!("bfifo limit {b}"),
            // A 1 ms target over a 5 ms interval: CoDel drops on its own under these rates.
            Leaf::FqCodel(n) => format!("fq_codel limit {n} target 1ms interval 5ms noecn"),
        }
    }
}

#[derive(Clone, Debug)]
enum Cfg {
    Pfifo(u32),
    Tbf {
        kbit: u32,
        limit: u32,
    },
    FqCodel(u32),
    /// Two classes under a parent; UDP to port 2 goes to 1:20 by a u32 filter, and optionally a
    /// policer on everything drops what exceeds its rate.
    Htb {
        kbit: u32,
        leaf: Leaf,
        police_kbit: Option<u32>,
    },
    /// Two DRR classes (UDP to port 2 in 1:20 by u32); with `catch_all`, a matchall sends the
    /// rest to 1:10, otherwise it has no class and is dropped.
    Drr {
        quantum: u32,
        leaf: Leaf,
        catch_all: bool,
    },
    /// RED with small thresholds and limit, optionally marking ECN.
    Red {
        limit: u32,
        ecn: bool,
    },
}

impl Cfg {
    fn script(&self) -> String {
        let d = "tc qdisc add dev e";
        match self {
            Cfg::Pfifo(n) => format!("{d} root pfifo limit {n}\n"),
            Cfg::Tbf { kbit, limit } => format!("{d} root tbf rate {kbit}kbit burst 3000 limit {limit}\n"),
            Cfg::FqCodel(n) => format!("{d} root {}\n", Leaf::FqCodel(*n).tc()),
            Cfg::Htb { kbit, leaf, police_kbit } => {
                let c = "tc class add dev e";
                let mut s = format!(
                    "{d} root handle 1: htb default 10\n\
                     {c} parent 1: classid 1:1 htb rate {kbit}kbit\n\
                     {c} parent 1:1 classid 1:10 htb rate {}kbit ceil {kbit}kbit\n\
                     {c} parent 1:1 classid 1:20 htb rate {}kbit ceil {kbit}kbit\n\
                     {d} parent 1:10 {}\n{d} parent 1:20 {}\n\
                     tc filter add dev e parent 1: protocol ip prio 2 u32 match ip dport 2 0xffff flowid 1:20\n",
                    kbit / 2,
                    kbit / 2,
                    leaf.tc(),
                    leaf.tc()
                );
                if let Some(p) = police_kbit {
                    s += &format!(
                        "tc filter add dev e parent 1: protocol all prio 1 matchall action police rate {p}kbit burst 3000 conform-exceed drop/continue\n"
                    );
                }
                s
            }
            Cfg::Drr { quantum, leaf, catch_all } => Cfg::drr_script(*quantum, leaf, *catch_all),
            Cfg::Red { limit, ecn } => format!(
                "{d} root red limit {limit} min 1500 max 4500 avpkt 500 burst 5 bandwidth 1mbit{}\n",
                if *ecn { " ecn" } else { "" }
            ),
        }
    }

    fn drr_script(quantum: u32, leaf: &Leaf, catch_all: bool) -> String {
        let (d, c) = ("tc qdisc add dev e", "tc class add dev e");
        let mut s = format!(
            "{d} root handle 1: drr\n\
             {c} parent 1: classid 1:10 drr quantum {quantum}\n\
             {c} parent 1: classid 1:20 drr\n\
             {d} parent 1:10 {}\n{d} parent 1:20 {}\n\
             tc filter add dev e parent 1: protocol ip prio 2 u32 match ip dport 2 0xffff flowid 1:20\n",
            leaf.tc(),
            leaf.tc()
        );
        if catch_all {
            s += "tc filter add dev e parent 1: protocol all prio 3 matchall classid 1:10\n";
        }
        s
    }

    fn program(&self) -> Program {
        let state = load_tc_script("prop.tc", &self.script(), &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", self.script()))
            .state;
        Program::from_model(&state, "e", &ProgramOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", self.script()))
    }
}

fn cfg() -> impl Strategy<Value = Cfg> {
    let leaf = prop_oneof![
        (1u32..6).prop_map(Leaf::Pfifo),
        (1500u32..6000).prop_map(Leaf::Bfifo),
        (2u32..10).prop_map(Leaf::FqCodel),
    ];
    prop_oneof![
        (1u32..6).prop_map(Cfg::Pfifo),
        (100u32..5000, 1600u32..8000).prop_map(|(kbit, limit)| Cfg::Tbf { kbit, limit }),
        (2u32..10).prop_map(Cfg::FqCodel),
        (100u32..5000, leaf.clone(), proptest::option::of(50u32..3000))
            .prop_map(|(kbit, leaf, police_kbit)| Cfg::Htb { kbit, leaf, police_kbit }),
        (100u32..4000, leaf, any::<bool>()).prop_map(|(quantum, leaf, catch_all)| Cfg::Drr {
            quantum,
            leaf,
            catch_all
        }),
        (5000u32..20000, any::<bool>()).prop_map(|(limit, ecn)| Cfg::Red { limit, ecn }),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    /// A frame of flow `flow` (0..4; flow 2 is UDP to port 2), `len` bytes.
    Ingress {
        flow: usize,
        len: usize,
    },
    /// A frame too short to forward.
    Runt,
    Dequeue,
    Advance(u64),
    Reload(Cfg),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..4, 60usize..1514).prop_map(|(flow, len)| Op::Ingress { flow, len }),
        1 => Just(Op::Runt),
        6 => Just(Op::Dequeue),
        3 => (0u64..20_000).prop_map(Op::Advance),
        1 => cfg().prop_map(Op::Reload),
    ]
}

fn frame(flow: usize, len: usize) -> Vec<u8> {
    let a = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1 + flow as u8));
    let b = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1));
    let payload = len.saturating_sub(42);
    let mut s = FrameSpec::udp(a, b, 1000 + flow as u16, flow as u16, payload);
    s.proto = L4::Udp;
    s.build().expect("frame builds")
}

/// What happened to each payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Queued,
    Sent,
    Dropped,
}

struct World {
    e: Engine,
    now: Time,
    /// Per payload: its flow and fate.
    fate: Vec<(usize, Fate)>,
    /// Per flow: the last payload sent (no reordering: payloads of a flow are sent in order).
    last_sent: [Option<u64>; 5],
    dropped_seen: u64,
    sent_seen: u64,
}

impl World {
    fn drain_drops(&mut self) -> Result<(), TestCaseError> {
        while let Some(d) = self.e.take_dropped() {
            let id = d.pkt.payload as usize;
            prop_assert!(id < self.fate.len(), "unknown payload {id}");
            prop_assert_eq!(self.fate[id].1, Fate::Queued, "payload {} came back twice", id);
            self.fate[id].1 = Fate::Dropped;
            self.dropped_seen += 1;
        }
        Ok(())
    }

    fn check_counters(&self) -> Result<(), TestCaseError> {
        let s = self.e.stats();
        let queued = self.fate.iter().filter(|f| f.1 == Fate::Queued).count() as u64;
        prop_assert_eq!(s.received, self.fate.len() as u64);
        prop_assert_eq!(s.dropped, self.dropped_seen);
        prop_assert_eq!(s.sent_packets, self.sent_seen);
        prop_assert_eq!(s.queued, queued);
        prop_assert_eq!(s.received, s.sent_packets + s.dropped + s.queued);
        prop_assert_eq!(s.dropped, s.runts + s.classify_drops + s.enqueue_drops + s.qdisc_drops + s.flushed);
        // tc -s: the qdiscs' own drop counters plus the filter drops the engine adds.
        prop_assert_eq!(s.qdisc.drops, s.enqueue_drops + s.qdisc_drops + s.classify_drops, "{:?}", s);
        prop_assert_eq!(s.qdisc.qlen, s.queued);
        Ok(())
    }

    fn dequeue(&mut self) -> Result<(), TestCaseError> {
        while let Some(p) = self.e.dequeue(self.now) {
            let id = p.payload as usize;
            prop_assert!(id < self.fate.len(), "unknown payload {id}");
            let (flow, fate) = self.fate[id];
            prop_assert_eq!(fate, Fate::Queued, "payload {} sent after {:?}", id, fate);
            self.fate[id].1 = Fate::Sent;
            self.sent_seen += 1;
            if let Some(prev) = self.last_sent[flow] {
                prop_assert!(prev < p.payload, "flow {} reordered: {} after {}", flow, p.payload, prev);
            }
            self.last_sent[flow] = Some(p.payload);
        }
        self.drain_drops()
    }
}

fn run(initial: Cfg, ops: Vec<Op>, flush_at_end: bool) -> Result<(), TestCaseError> {
    let frames: Vec<Vec<Vec<u8>>> =
        (0..4).map(|f| (0..15).map(|k| frame(f, 60 + k * 100)).collect()).collect();
    let mut w = World {
        e: Engine::new(initial.program(), Time::ZERO),
        now: Time::ZERO,
        fate: Vec::new(),
        last_sent: [None; 5],
        dropped_seen: 0,
        sent_seen: 0,
    };
    for op in ops {
        match op {
            Op::Ingress { flow, len } => {
                let id = w.fate.len() as u64;
                w.fate.push((flow, Fate::Queued));
                let _ = w.e.ingress_frame(&frames[flow][(len - 60) / 100], id, w.now);
            }
            Op::Runt => {
                let id = w.fate.len() as u64;
                w.fate.push((4, Fate::Queued));
                let _ = w.e.ingress_frame(&[0u8; 9], id, w.now);
            }
            Op::Dequeue => w.dequeue()?,
            Op::Advance(us) => w.now += Span::from_micros(us),
            Op::Reload(c) => w.e.reload(c.program(), w.now),
        }
        w.drain_drops()?;
        w.check_counters()?;
    }
    // Serve everything out (the old generations drain first), or flush.
    if !flush_at_end {
        let mut guard = 0;
        while let Some(t) = w.e.next_event(w.now) {
            w.now = w.now.max(t);
            w.dequeue()?;
            guard += 1;
            prop_assert!(guard < 1_000_000, "never drained");
        }
    } else {
        w.e.flush(w.now);
        w.drain_drops()?;
    }
    w.check_counters()?;
    prop_assert!(w.fate.iter().all(|f| f.1 != Fate::Queued), "a payload never came back");
    prop_assert_eq!(w.e.stats().draining, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn every_payload_comes_back_once_and_every_drop_is_counted_once(
        initial in cfg(),
        ops in proptest::collection::vec(op(), 1..300),
        flush_at_end in any::<bool>(),
    ) {
        run(initial, ops, flush_at_end)?;
    }
}
