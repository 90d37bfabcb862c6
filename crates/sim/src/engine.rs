//! The discrete-event engine: hops (queue + transmitter + wire), sources, receivers.
//!
//! Every hop's queue is a packet engine ([`sluice_engine::Engine`]): it classifies each packet
//! (the shaper's filters and policers act per packet, on the flow's cached keys and template
//! frame), enqueues it, counts and hands back every drop. The simulator only moves slots: a slot
//! index is the payload handle, freed when the engine hands it back dropped.
//!
//! A hop never polls: after each enqueue or transmission it asks its engine for a packet and, if
//! the engine is throttled, schedules one wake-up at `next_event`. Stale wake-ups are recognised
//! by their time and ignored.

use crate::event::{Ev, EventQueue};
use crate::model::{CongestionControl, CreditPolicy, FlowSpec, SimSpec, StreamSpec, TrafficSpec};
use crate::recorder::Recorder;
use crate::tcp::{AckMsg, Tcp};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sluice_core::tcp_info::{TCP_ACK, TCP_ECE};
use sluice_core::{FlowKeys, Handle, Packet, Rate, Span, TcpInfo, Time, WireSpec};
use sluice_engine::{CopyTo, Engine, Received, Verdict};
use std::collections::HashMap;
use std::sync::Arc;

const ACK_LEN: u32 = 66;
/// Dequeues allowed at one instant on an unlimited-rate hop before yielding 1 ns.
const MAX_BURST_AT_INSTANT: u32 = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Data,
    Ack,
    EchoReq,
    EchoRep,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    pkt: Packet,
    flow: u32,
    class: u32,
    seq: u64,
    sent: Time,
    echo: Time,
    kind: Kind,
    ece: bool,
    /// An ACK's D-SACK flag.
    dsack: bool,
    route: u8,
    /// An ACK's SACK block, as offsets from its cumulative ACK (`seq`).
    sack: (u32, u32),
    /// A copy (netem duplicate, mirred mirror): not sent by its flow, so its loss is not the
    /// flow's.
    copy: bool,
}

/// How many times a packet may be received again through `mirred ingress` (the kernel's
/// `MIRRED_NEST_LIMIT`) before it is dropped.
const MIRRED_NEST_LIMIT: u32 = 4;

struct Hop {
    e: Engine,
    /// Ingress shaping: the receiving device's engine (its ingress filters run first), the
    /// index of this hop's device (an IFB) among its redirect targets and its own index.
    rx: Option<(Engine, u16, u16)>,
    rate: Option<Rate>,
    delay: Span,
    overhead: u64,
    is_shaper: bool,
    route: u8,
    pos: u16,
    busy: Option<u32>,
    kicking: bool,
    wake_at: Time,
    /// Carried remainder of bit·ns / rate, so serialisation times never drift.
    ser_rem: u128,
}

enum Src {
    Cbr { rate: Rate, k: u64 },
    Poisson { mean_ns: f64 },
    OnOff { rate: Rate, on: Span, off: Span, cycle: Time, k: u64 },
    Backlog { depth: u32 },
    Tcp(Box<Tcp>),
    Paced { t_ipi: Span, timer: Span, credit: CreditPolicy, t_nom: Time },
    Probe { interval: Span },
    Group { rate: Rate, streams: Vec<StreamSpec>, cur: usize, left: u32, rem: u128 },
    Member,
}

struct Flow {
    tmpl: Packet,
    /// What the shaper's filters see (see [`crate::model::FlowSpec::keys`]).
    keys: FlowKeys,
    frame: Arc<[u8]>,
    /// The last classification results seen at the shaper and the reported class they mean.
    class_of: ([Handle; sluice_core::packet::MAX_CLASS_PATH], u32, u32),
    src: Src,
    seq: u64,
    start: Time,
    stop: Time,
    /// Data on the reverse route, ACKs on the forward one (see [`FlowSpec::download`]).
    download: bool,
    /// TCP ports of the data direction (source, destination).
    ports: (u16, u16),
    /// ACKs sent, and those the shaper dropped: by its ACK filter, and otherwise.
    acks: [u64; 3],
}

/// Per-run counters about the engine itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineStats {
    /// Events processed.
    pub events: u64,
    /// Packets that left a hop (one per hop traversal).
    pub transmissions: u64,
}

/// A simulation in progress.
pub struct Sim {
    now: Time,
    end: Time,
    step: Span,
    ev: EventQueue,
    hops: Vec<Hop>,
    nfwd: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    flows: Vec<Flow>,
    /// Reported class index by id, and the index of the shaper's default class.
    class_index: HashMap<Handle, u32>,
    default_class: u32,
    /// The keys of packets on the reverse route (no filter looks at them).
    no_keys: FlowKeys,
    shaper_wire: WireSpec,
    rng: ChaCha8Rng,
    pub(crate) rec: Recorder,
    pub(crate) stats: EngineStats,
    pub(crate) spec_names: (Vec<String>, Vec<String>),
    burst_guard: (Time, u32),
    profile: bool,
    /// Reused buffer for the segments a TCP sender wants sent.
    tcp_buf: Vec<u64>,
    /// Wall-clock nanoseconds spent inside the shaper's enqueue/dequeue (profile runs only).
    pub(crate) shaper_ns: u64,
}

impl Sim {
    /// Builds the world for `spec` at t = 0.
    pub fn new(spec: &SimSpec) -> Sim {
        let mut hops = Vec::new();
        for (route, links) in [(0u8, &spec.forward), (1u8, &spec.reverse)] {
            for (pos, l) in links.iter().enumerate() {
                hops.push(Hop {
                    e: Engine::new((l.queue)(), Time::ZERO),
                    rx: l.receive.as_ref().map(|(f, ifb, own)| (Engine::new(f(), Time::ZERO), *ifb, *own)),
                    rate: l.rate.filter(|r| !r.is_zero()),
                    delay: l.delay,
                    overhead: l.overhead as u64,
                    is_shaper: l.is_shaper,
                    route,
                    pos: pos as u16,
                    busy: None,
                    kicking: false,
                    wake_at: Time::MAX,
                    ser_rem: 0,
                });
            }
        }
        let names = spec.forward.iter().chain(spec.reverse.iter()).map(|l| l.name.clone()).collect();
        let end = Time::ZERO + spec.duration;
        let class_index: HashMap<Handle, u32> =
            spec.classes.iter().enumerate().map(|(i, c)| (c.id, i as u32)).collect();
        let default_class = spec.default_class.and_then(|d| class_index.get(&d).copied()).unwrap_or(u32::MAX);
        let flows = spec
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut flow =
                    Self::make_flow(f, end, spec.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i as u64);
                flow.tmpl.sock = i as u64 + 1; // each flow is its sender's socket (sch_fq's flow)
                flow
            })
            .collect();
        let rec = Recorder::new(
            spec.flows.len(),
            spec.classes.len(),
            hops.len(),
            spec.warmup,
            spec.duration,
            spec.step,
            spec.series,
        );
        let mut sim = Sim {
            now: Time::ZERO,
            end,
            step: spec.step,
            ev: EventQueue::default(),
            nfwd: spec.forward.len(),
            hops,
            slots: Vec::new(),
            free: Vec::new(),
            flows,
            class_index,
            default_class,
            no_keys: FlowKeys::default(),
            shaper_wire: spec.shaper_wire,
            rng: ChaCha8Rng::seed_from_u64(spec.seed),
            rec,
            stats: EngineStats::default(),
            spec_names: (names, spec.flows.iter().map(|f| f.name.clone()).collect()),
            burst_guard: (Time::ZERO, 0),
            profile: spec.profile,
            shaper_ns: 0,
            tcp_buf: Vec::new(),
        };
        if spec.series {
            // One sample per step: reserved now, so sampling never allocates.
            let n = spec.duration.as_nanos().div_ceil(spec.step.as_nanos().max(1)) as usize + 1;
            for h in sim.rec.hops.iter_mut() {
                h.samples.reserve(n);
            }
            for (i, f) in sim.flows.iter().enumerate() {
                if matches!(f.src, Src::Tcp(_)) {
                    sim.rec.flows[i].cwnd.reserve(n);
                    sim.rec.flows[i].srtt_ns.reserve(n);
                }
            }
        }
        for (i, f) in sim.flows.iter().enumerate() {
            if !matches!(f.src, Src::Member) {
                sim.ev.push(f.start, Ev::Emit(i as u32));
            }
        }
        // Occupancy is sampled every step even without time series, for the maximum backlog.
        sim.ev.push(Time::ZERO, Ev::Sample);
        sim
    }

    /// `seed` drives the flow's random choices (the run's seed mixed with the flow's index).
    fn make_flow(f: &FlowSpec, end: Time, seed: u64) -> Flow {
        let tmpl = template(f);
        let start = Time::ZERO + f.start;
        let src = match &f.traffic {
            TrafficSpec::Cbr { rate } => Src::Cbr { rate: *rate, k: 0 },
            TrafficSpec::Poisson { rate } => {
                Src::Poisson { mean_ns: rate.time_to_send(tmpl.len as u64).as_nanos() as f64 }
            }
            TrafficSpec::OnOff { rate, on, off } => {
                Src::OnOff { rate: *rate, on: *on, off: *off, cycle: start, k: 0 }
            }
            TrafficSpec::Backlog { depth } => Src::Backlog { depth: *depth },
            TrafficSpec::Tcp { cc, bytes, rwnd } => {
                let limit = bytes.map(|b| b.div_ceil(f.size.max(1) as u64));
                Src::Tcp(Box::new(Tcp::new(*cc, f.ecn, limit, *rwnd, seed)))
            }
            TrafficSpec::Paced { t_ipi, timer, credit } => {
                Src::Paced { t_ipi: *t_ipi, timer: *timer, credit: *credit, t_nom: start }
            }
            TrafficSpec::Probe { interval } => Src::Probe { interval: *interval },
            TrafficSpec::StreamGroup { rate, streams } => {
                let left = streams.first().map(|s| s.burst).unwrap_or(0);
                Src::Group { rate: *rate, streams: streams.clone(), cur: 0, left, rem: 0 }
            }
            TrafficSpec::Member => Src::Member,
        };
        Flow {
            tmpl,
            keys: f.keys,
            frame: f.frame.clone(),
            // Never a real packet's: the first packet at the shaper resolves its class.
            class_of: ([Handle::ROOT; sluice_core::packet::MAX_CLASS_PATH], u32::MAX, u32::MAX),
            src,
            seq: 0,
            start,
            stop: f.stop.map(|s| Time::ZERO + s).unwrap_or(end),
            download: f.download,
            ports: match f.keys.outer {
                Some(k) if k.src_port != 0 => (k.src_port, k.dst_port),
                _ => (10000 + (f.flow_hash as u16 & 0x3FFF), 5001),
            },
            acks: [0; 3],
        }
    }

    /// Runs to the end. `progress` is called now and then with the fraction of virtual time done.
    pub fn run(&mut self, progress: &mut dyn FnMut(f64)) {
        let end_ns = self.end.as_nanos().max(1) as f64;
        while let Some((t, ev)) = self.ev.pop() {
            if t > self.end {
                break;
            }
            self.now = t;
            self.stats.events += 1;
            if self.stats.events & 0xFFFF == 0 {
                progress(t.as_nanos() as f64 / end_ns);
            }
            match ev {
                Ev::Emit(f) => self.on_emit(f as usize),
                Ev::TxDone(h) => self.on_tx_done(h as usize),
                Ev::Wake(h) => {
                    let h = h as usize;
                    if self.hops[h].wake_at == t {
                        self.hops[h].wake_at = Time::MAX;
                        self.kick(h);
                    }
                }
                Ev::Arrive { slot, pos } => self.arrive(slot, pos as usize),
                Ev::TcpTimer(flow) => self.on_tcp_timer(flow as usize),
                Ev::Sample => {
                    let series = self.rec.series;
                    for (i, h) in self.hops.iter().enumerate() {
                        let b = h.e.backlog_bytes();
                        let r = &mut self.rec.hops[i];
                        if series {
                            r.samples.push(b);
                        }
                        r.max_backlog = r.max_backlog.max(b);
                    }
                    if series {
                        for (i, f) in self.flows.iter().enumerate() {
                            if let Src::Tcp(tcp) = &f.src {
                                let r = &mut self.rec.flows[i];
                                r.cwnd.push(tcp.cwnd);
                                r.srtt_ns.push(tcp.srtt().map_or(0, |s| s.as_nanos()));
                            }
                        }
                    }
                    self.ev.push(t + self.step, Ev::Sample);
                }
            }
        }
        progress(1.0);
    }

    // ---- packets -------------------------------------------------------------------------

    fn alloc(&mut self, s: Slot) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = s;
            i
        } else {
            self.slots.push(s);
            (self.slots.len() - 1) as u32
        }
    }

    fn hop_index(&self, route: u8, pos: usize) -> Option<usize> {
        let (base, len) = if route == 0 { (0, self.nfwd) } else { (self.nfwd, self.hops.len() - self.nfwd) };
        (pos < len).then_some(base + pos)
    }

    /// Creates a packet of `flow` and offers it to the first hop of its route.
    fn inject(&mut self, flow: usize, kind: Kind, seq: u64, echo: Time, ece: bool) {
        self.inject_full(flow, kind, seq, echo, ece, None);
    }

    /// `ack`: the ACK a TCP receiver sends (for `Kind::Ack`).
    fn inject_full(
        &mut self,
        flow: usize,
        kind: Kind,
        seq: u64,
        echo: Time,
        ece: bool,
        ack: Option<&AckMsg>,
    ) {
        let f = &self.flows[flow];
        let mut pkt = f.tmpl;
        let up = matches!(kind, Kind::Data | Kind::EchoReq) != f.download;
        let route = if up { 0 } else { 1 };
        let mut sack = (0, 0);
        let mut dsack = false;
        if kind == Kind::Ack {
            pkt = Packet { len: ACK_LEN, gso_segs: 1, gso_size: 0, ..pkt };
            pkt.dsfield &= !3;
            if let Some(a) = ack {
                let off = |x: u64| x.saturating_sub(a.ack).min(u32::MAX as u64) as u32;
                sack = if a.sack.0 < a.sack.1 { (off(a.sack.0), off(a.sack.1)) } else { (0, 0) };
                dsack = a.dsack;
            }
        }
        if matches!(f.src, Src::Tcp(_)) {
            pkt.tcp = Some(self.tcp_header(flow, kind, ack));
        }
        // The shaper's class is known once its engine has classified the packet.
        let slot = Slot {
            pkt,
            flow: flow as u32,
            class: u32::MAX,
            seq,
            sent: self.now,
            echo,
            kind,
            ece,
            dsack,
            route,
            sack,
            copy: false,
        };
        if matches!(kind, Kind::Data | Kind::EchoReq) {
            self.rec.on_sent(flow as u32, self.now);
        }
        let i = self.alloc(slot);
        self.slots[i as usize].pkt.payload = i as u64;
        self.arrive(i, 0);
    }

    /// The TCP header fields of a segment of TCP flow `flow` (sequence numbers in bytes of
    /// `tmpl.len`-sized segments, timestamps in ms): what CAKE's ACK filter reads.
    fn tcp_header(&self, flow: usize, kind: Kind, ack: Option<&AckMsg>) -> TcpInfo {
        let f = &self.flows[flow];
        let seg = f.tmpl.len as u64;
        let bytes = |n: u64| n.wrapping_mul(seg) as u32;
        let ms = |t: Time| (t.as_nanos() / 1_000_000) as u32;
        let mut t = TcpInfo {
            sport: f.ports.0,
            dport: f.ports.1,
            flags: TCP_ACK,
            ip_version: 4,
            has_ts: true,
            tsval: ms(self.now),
            ..TcpInfo::default()
        };
        match (kind, ack) {
            (Kind::Ack, Some(a)) => {
                (t.sport, t.dport) = (f.ports.1, f.ports.0);
                t.ack = bytes(a.ack);
                t.tsecr = ms(a.echo);
                if a.ece {
                    t.flags |= TCP_ECE;
                }
                let mut blocks = [(0, 0); 2];
                let mut n = 0;
                if a.dsack {
                    // A duplicate below the cumulative ACK: a D-SACK block first (RFC 2883).
                    blocks[n] = (bytes(a.ack.saturating_sub(1)), bytes(a.ack));
                    n += 1;
                }
                if a.sack.0 < a.sack.1 {
                    blocks[n] = (bytes(a.sack.0), bytes(a.sack.1));
                    n += 1;
                }
                t.sack[..n].copy_from_slice(&blocks[..n]);
                t.sack_blocks = n as u8;
            }
            _ => t.payload_len = f.tmpl.len.saturating_sub(ACK_LEN).max(1),
        }
        t
    }

    /// Sends a TCP ACK of `flow` back to its sender.
    fn inject_ack(&mut self, flow: usize, a: AckMsg) {
        if self.rec.in_window(self.now) {
            self.flows[flow].acks[0] += 1;
        }
        self.inject_full(flow, Kind::Ack, a.ack, a.echo, a.ece, Some(&a));
    }

    /// Slot `slot` reaches position `pos` of its route (enqueue there, or deliver at the end).
    fn arrive(&mut self, slot: u32, pos: usize) {
        let s = self.slots[slot as usize];
        let Some(h) = self.hop_index(s.route, pos) else { return self.deliver(slot) };
        let t0 = self.profile_start(h);
        let pkt = s.pkt;
        if let Some((_, _, own)) = self.hops[h].rx {
            self.receive_at(h, slot, pkt, own, 0);
        } else {
            self.enqueue_at(h, slot, pkt);
        }
        self.profile_end(t0);
        self.kick(h);
    }

    /// Hop `h`'s queue takes the packet of `slot`; copies and redirects are routed, drops freed.
    fn enqueue_at(&mut self, h: usize, slot: u32, pkt: Packet) {
        let (keys, frame) = view(&self.flows, &self.no_keys, &self.slots[slot as usize]);
        let _ = self.hops[h].e.ingress(pkt, keys, frame, self.now);
        self.after_egress(h, slot);
    }

    /// What hop `h`'s egress engine handed back after taking `slot`'s packet: redirects leave
    /// the simulated path; a netem duplicate gets a slot of its own and goes back to the root; a
    /// mirror copy leaves the path (no simulated device receives it); drops are freed.
    #[inline]
    fn after_egress(&mut self, h: usize, slot: u32) {
        while let Some(r) = self.hops[h].e.take_redirected() {
            self.drop_slot(r.pkt.payload as u32);
        }
        while let Some(c) = self.hops[h].e.take_copy() {
            if c.to == CopyTo::Root {
                let dup = self.copy_slot(slot, c.pkt);
                let pkt = self.slots[dup as usize].pkt;
                let (keys, frame) = view(&self.flows, &self.no_keys, &self.slots[slot as usize]);
                let _ = self.hops[h].e.ingress_copy(pkt, keys, frame, self.now);
                while let Some(r) = self.hops[h].e.take_redirected() {
                    self.drop_slot(r.pkt.payload as u32);
                }
            }
        }
        self.drain_drops(h);
    }

    /// A new slot: a copy of `slot` carrying `pkt` (its own payload handle).
    fn copy_slot(&mut self, slot: u32, pkt: Packet) -> u32 {
        let s = Slot { pkt, copy: true, ..self.slots[slot as usize] };
        let i = self.alloc(s);
        self.slots[i as usize].pkt.payload = i as u64;
        i
    }

    /// The packet of `slot` is received by device `dev` of hop `h`'s ingress-shaping pair (the
    /// receiving device or the IFB; any other device delivers it): its ingress filters run; what
    /// they redirect to the IFB's egress is queued on the hop, what passes goes on unqueued.
    fn receive_at(&mut self, h: usize, slot: u32, pkt: Packet, dev: u16, depth: u32) {
        let Some((_, ifb, own)) = self.hops[h].rx else { return };
        let pos = self.hops[h].pos as usize;
        if depth > MIRRED_NEST_LIMIT {
            return self.drop_slot(slot);
        }
        let (keys, frame) = view(&self.flows, &self.no_keys, &self.slots[slot as usize]);
        let now = self.now;
        let hop = &mut self.hops[h];
        let e = if dev == own {
            &mut hop.rx.as_mut().expect("checked").0
        } else if dev == ifb {
            &mut hop.e
        } else {
            // Received on a device the simulation does not model: up the stack it goes.
            return self.arrive(slot, pos + 1);
        };
        let got = e.receive(pkt, keys, frame, now);
        let redirected = e.take_redirected();
        while e.take_dropped().is_some() {}
        // Mirror copies: a copy for the IFB's egress is shaped there; any other leaves the path.
        let mut to_ifb = Vec::new();
        while let Some(c) = e.take_copy() {
            if c.to == CopyTo::Device(sluice_core::filter::MirredTarget { dev: ifb, ingress: false }) {
                to_ifb.push(c.pkt);
            }
        }
        for p in to_ifb {
            let copy = self.copy_slot(slot, p);
            let p = self.slots[copy as usize].pkt;
            self.enqueue_at(h, copy, p);
        }
        match (got, redirected) {
            // Not redirected: delivered without this hop's queue.
            (Received::Pass(_), _) => self.arrive(slot, pos + 1),
            (Received::Taken(Verdict::Redirected), Some(r)) if r.target.ingress => {
                self.receive_at(h, slot, r.pkt, r.target.dev, depth + 1)
            }
            (Received::Taken(Verdict::Redirected), Some(r)) if r.target.dev == ifb => {
                self.enqueue_at(h, slot, r.pkt)
            }
            // Dropped by an ingress filter, or redirected off the simulated path.
            _ => self.drop_slot(slot),
        }
    }

    /// Frees the slots of the payloads hop `h`'s engine dropped.
    #[inline]
    fn drain_drops(&mut self, h: usize) {
        if self.hops[h].e.has_dropped() {
            self.free_dropped(h);
        }
    }

    #[cold]
    fn free_dropped(&mut self, h: usize) {
        while let Some(d) = self.hops[h].e.take_dropped() {
            let slot = d.pkt.payload as u32;
            if self.hops[h].is_shaper {
                let s = self.slots[slot as usize];
                let class = self.class_of(s.flow as usize, &d.pkt);
                self.slots[slot as usize].class = class;
                if s.kind == Kind::Ack && self.rec.in_window(s.sent) {
                    let k = if d.reason == sluice_core::DropReason::AckFilter { 1 } else { 2 };
                    self.flows[s.flow as usize].acks[k] += 1;
                }
            }
            self.drop_slot(slot);
        }
    }

    /// The reported class a packet classified by the shaper is accounted to: the innermost
    /// reported class among its classification results, else the class its `priority` names
    /// (HTB honours it without recording it), else the shaper's default class. Cached per flow.
    #[inline]
    fn class_of(&mut self, flow: usize, pkt: &Packet) -> u32 {
        let f = &mut self.flows[flow];
        if f.class_of.0 == pkt.class_path && f.class_of.1 == pkt.priority {
            return f.class_of.2;
        }
        let idx = &self.class_index;
        let class = pkt
            .class_path
            .iter()
            .rev()
            .filter(|h| !h.is_unspec())
            .find_map(|h| idx.get(h).copied())
            .or_else(|| {
                (pkt.priority != 0).then(|| idx.get(&Handle::from_tc(pkt.priority)).copied()).flatten()
            })
            .unwrap_or(self.default_class);
        f.class_of = (pkt.class_path, pkt.priority, class);
        class
    }

    fn drop_slot(&mut self, slot: u32) {
        let s = self.slots[slot as usize];
        if matches!(s.kind, Kind::Data | Kind::EchoReq) && !s.copy {
            self.rec.on_drop(s.flow, s.class, s.sent, self.now);
        }
        self.free.push(slot);
    }

    #[inline]
    fn profile_start(&self, h: usize) -> Option<std::time::Instant> {
        (self.profile && self.hops[h].is_shaper).then(std::time::Instant::now)
    }

    #[inline]
    fn profile_end(&mut self, t0: Option<std::time::Instant>) {
        if let Some(t0) = t0 {
            self.shaper_ns += t0.elapsed().as_nanos() as u64;
        }
    }

    /// Serves hop `h` if its transmitter is idle. Re-entrant calls (a zero-delay path that
    /// feeds back into the same hop) return at once; the outer call keeps serving.
    fn kick(&mut self, h: usize) {
        if self.hops[h].kicking || self.hops[h].busy.is_some() {
            return;
        }
        self.hops[h].kicking = true;
        self.serve(h);
        self.hops[h].kicking = false;
    }

    fn serve(&mut self, h: usize) {
        loop {
            if self.hops[h].busy.is_some() {
                return;
            }
            let now = self.now;
            let t0 = self.profile_start(h);
            let got = self.hops[h].e.dequeue(now);
            self.profile_end(t0);
            self.drain_drops(h);
            let Some(pkt) = got else {
                let hop = &mut self.hops[h];
                if let Some(t) = hop.e.next_event(now) {
                    // A qdisc that says "now" but gave nothing is retried 1 ns later, never spun.
                    let t = if t > now { t } else { now + Span::from_nanos(1) };
                    if t < hop.wake_at {
                        hop.wake_at = t;
                        self.ev.push(t, Ev::Wake(h as u32));
                    }
                }
                return;
            };
            self.stats.transmissions += 1;
            let slot = pkt.payload as u32;
            self.slots[slot as usize].pkt = pkt;
            if self.hops[h].is_shaper {
                let class = self.class_of(self.slots[slot as usize].flow as usize, &pkt);
                self.slots[slot as usize].class = class;
                let cost = self.shaper_wire.packet_cost(&pkt);
                if class == u32::MAX {
                    let flow = self.slots[slot as usize].flow;
                    self.rec.on_unclassified(flow, cost, now);
                } else {
                    self.rec.on_class_tx(class, cost, pkt.gso_segs.max(1) as u64, now);
                }
            }
            let s = self.slots[slot as usize];
            let hop = &mut self.hops[h];
            let ser = match hop.rate {
                Some(r) => {
                    let bits = (pkt.len as u128 + hop.overhead as u128 * pkt.gso_segs.max(1) as u128) * 8;
                    let num = bits * 1_000_000_000 + hop.ser_rem;
                    let rate = r.bps() as u128;
                    hop.ser_rem = num % rate;
                    (num / rate) as u64
                }
                None => 0,
            };
            let refill = hop.route == 0 && hop.pos == 0 && s.kind == Kind::Data;
            if ser > 0 {
                hop.busy = Some(slot);
                self.ev.push(now + Span::from_nanos(ser), Ev::TxDone(h as u32));
            }
            if refill {
                if let Src::Backlog { .. } = self.flows[s.flow as usize].src {
                    self.backlog_refill(s.flow as usize);
                }
            }
            if ser == 0 {
                self.depart(h, slot);
                if self.burst_guard.0 == now {
                    self.burst_guard.1 += 1;
                    if self.burst_guard.1 > MAX_BURST_AT_INSTANT {
                        let t = now + Span::from_nanos(1);
                        let hop = &mut self.hops[h];
                        if t < hop.wake_at {
                            hop.wake_at = t;
                            self.ev.push(t, Ev::Wake(h as u32));
                        }
                        return;
                    }
                } else {
                    self.burst_guard = (now, 1);
                }
            } else {
                return;
            }
        }
    }

    fn on_tx_done(&mut self, h: usize) {
        if let Some(slot) = self.hops[h].busy.take() {
            self.depart(h, slot);
        }
        self.kick(h);
    }

    /// `slot` finished serialisation on hop `h`: put it on the wire to the next position.
    fn depart(&mut self, h: usize, slot: u32) {
        let hop = &self.hops[h];
        let next = hop.pos as usize + 1;
        let at = self.now + hop.delay;
        let route = hop.route;
        let last = self.hop_index(route, next).is_none();
        let s = &self.slots[slot as usize];
        if last && s.kind == Kind::Data && !matches!(self.flows[s.flow as usize].src, Src::Tcp(_)) {
            if s.pkt.payload & sluice_core::netem::CORRUPT_FLAG != 0 {
                self.drop_slot(slot); // see `deliver`
                return;
            }
            // Open-loop data needs no reaction at the receiver: record it now, no event.
            let lat = at - s.sent;
            self.rec.on_recv(s.flow, s.pkt.len as u64, s.sent, at, lat);
            self.free.push(slot);
            return;
        }
        if hop.delay == Span::ZERO {
            self.arrive(slot, next);
        } else {
            self.ev.push(at, Ev::Arrive { slot, pos: next as u16 });
        }
    }

    /// The packet reached the end of its route.
    fn deliver(&mut self, slot: u32) {
        let s = self.slots[slot as usize];
        if s.pkt.payload & sluice_core::netem::CORRUPT_FLAG != 0 {
            // netem corrupted it on the way: the receiver's checksum discards it.
            self.drop_slot(slot);
            return;
        }
        self.free.push(slot);
        let fi = s.flow as usize;
        match s.kind {
            Kind::Data => {
                self.rec.on_recv(s.flow, s.pkt.len as u64, s.sent, self.now, self.now - s.sent);
                let ce = s.pkt.ecn() == sluice_core::Ecn::Ce;
                let now = self.now;
                if let Src::Tcp(t) = &mut self.flows[fi].src {
                    let r = t.on_data(s.seq, s.sent, ce, now);
                    let seg = self.flows[fi].tmpl.len as u64;
                    self.rec.on_goodput(s.flow, r.in_order * seg, now);
                    if let Some(a) = r.ack {
                        self.inject_ack(fi, a);
                    }
                    self.tcp_arm(fi);
                }
            }
            Kind::EchoReq => self.inject_reply(fi, s),
            Kind::EchoRep => {
                self.rec.on_recv(s.flow, s.pkt.len as u64, s.echo, self.now, self.now - s.echo);
            }
            Kind::Ack => {
                let now = self.now;
                let mut out = std::mem::take(&mut self.tcp_buf);
                if let Src::Tcp(t) = &mut self.flows[fi].src {
                    let sack = (s.seq + s.sack.0 as u64, s.seq + s.sack.1 as u64);
                    let a = AckMsg { ack: s.seq, sack, echo: s.echo, ece: s.ece, dsack: s.dsack };
                    t.on_ack(&a, now, &mut out);
                }
                self.tcp_send(fi, out);
            }
        }
    }

    fn inject_reply(&mut self, flow: usize, req: Slot) {
        let mut pkt = req.pkt;
        pkt.enqueue_time = self.now;
        let slot = Slot { pkt, kind: Kind::EchoRep, echo: req.sent, sent: self.now, route: 1, ..req };
        let i = self.alloc(slot);
        self.slots[i as usize].pkt.payload = i as u64;
        let _ = flow;
        self.arrive(i, 0);
    }

    // ---- sources -------------------------------------------------------------------------

    fn backlog_refill(&mut self, flow: usize) {
        if self.now >= self.flows[flow].stop {
            return;
        }
        let seq = self.flows[flow].seq;
        self.flows[flow].seq += 1;
        self.inject(flow, Kind::Data, seq, Time::ZERO, false);
    }

    fn on_emit(&mut self, fi: usize) {
        let now = self.now;
        if now >= self.flows[fi].stop {
            return;
        }
        let len = self.flows[fi].tmpl.len as u64;
        let seq = self.flows[fi].seq;
        let start = self.flows[fi].start;
        let next: Option<Time> = match &mut self.flows[fi].src {
            Src::Cbr { rate, k } => {
                *k += 1;
                let bits = len as u128 * 8 * (*k as u128) * 1_000_000_000;
                Some(start + Span::from_nanos((bits / rate.bps().max(1) as u128) as u64))
            }
            Src::Poisson { mean_ns } => {
                let u: f64 = self.rng.gen::<f64>();
                let gap = -(1.0 - u).ln() * *mean_ns;
                Some(now + Span::from_nanos(gap.max(1.0) as u64))
            }
            Src::OnOff { rate, on, off, cycle, k } => {
                *k += 1;
                let bits = len as u128 * 8 * (*k as u128) * 1_000_000_000;
                let mut t = *cycle + Span::from_nanos((bits / rate.bps().max(1) as u128) as u64);
                if t >= *cycle + *on {
                    *cycle = *cycle + *on + *off;
                    *k = 0;
                    t = *cycle;
                }
                Some(t)
            }
            Src::Backlog { depth } => {
                let d = *depth;
                self.flows[fi].seq += d as u64;
                for i in 0..d as u64 {
                    self.inject(fi, Kind::Data, seq + i, Time::ZERO, false);
                }
                return;
            }
            Src::Tcp(t) => {
                let mut out = std::mem::take(&mut self.tcp_buf);
                t.fill(now, &mut out);
                self.tcp_send(fi, out);
                return;
            }
            Src::Paced { t_ipi, timer, credit, t_nom } => {
                let cap = match credit {
                    CreditPolicy::None => None,
                    CreditPolicy::Ipi => Some(*t_ipi),
                    CreditPolicy::Rtt(r) => Some(*r),
                };
                if let Some(cap) = cap {
                    if now.as_nanos() > t_nom.as_nanos() + cap.as_nanos() {
                        *t_nom = Time::from_nanos(now.as_nanos() - cap.as_nanos());
                    }
                }
                let mut n = 0u64;
                while *t_nom <= now {
                    *t_nom += *t_ipi;
                    n += 1;
                }
                let g = timer.as_nanos();
                let wake = if g == 0 { *t_nom } else { Time::from_nanos(t_nom.as_nanos().div_ceil(g) * g) };
                self.flows[fi].seq += n;
                for i in 0..n {
                    self.inject(fi, Kind::Data, seq + i, Time::ZERO, false);
                }
                self.ev.push(wake, Ev::Emit(fi as u32));
                return;
            }
            Src::Probe { interval } => {
                let t = now + *interval;
                self.flows[fi].seq += 1;
                self.inject(fi, Kind::EchoReq, seq, Time::ZERO, false);
                self.ev.push(t, Ev::Emit(fi as u32));
                return;
            }
            Src::Group { rate, streams, cur, left, rem } => {
                if streams.is_empty() {
                    return;
                }
                let st = &streams[*cur];
                let member = st.flow;
                let size = st.size as u128;
                let num = size * 8 * 1_000_000_000 + *rem;
                let r = rate.bps().max(1) as u128;
                *rem = num % r;
                let gap = (num / r) as u64;
                *left = left.saturating_sub(1);
                if *left == 0 {
                    *cur = (*cur + 1) % streams.len();
                    *left = streams[*cur].burst.max(1);
                }
                self.ev.push(now + Span::from_nanos(gap), Ev::Emit(fi as u32));
                let mseq = self.flows[member].seq;
                self.flows[member].seq += 1;
                self.inject(member, Kind::Data, mseq, Time::ZERO, false);
                return;
            }
            Src::Member => return,
        };
        self.flows[fi].seq += 1;
        self.inject(fi, Kind::Data, seq, Time::ZERO, false);
        if let Some(t) = next {
            self.ev.push(t, Ev::Emit(fi as u32));
        }
    }

    /// Transmits the segments a TCP sender asked for, then arms its timer.
    fn tcp_send(&mut self, fi: usize, mut out: Vec<u64>) {
        for &seq in &out {
            self.inject(fi, Kind::Data, seq, Time::ZERO, false);
        }
        out.clear();
        self.tcp_buf = out;
        self.tcp_arm(fi);
    }

    /// Keeps one timer event per connection, at or before its earliest deadline: a new event is
    /// pushed only when the deadline moves earlier; a late one re-arms when it fires.
    fn tcp_arm(&mut self, fi: usize) {
        if let Src::Tcp(t) = &mut self.flows[fi].src {
            if let Some(at) = t.next_timer() {
                if at < t.armed {
                    t.armed = at;
                    self.ev.push(at, Ev::TcpTimer(fi as u32));
                }
            }
        }
    }

    fn on_tcp_timer(&mut self, fi: usize) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.tcp_buf);
        let mut ack = None;
        if let Src::Tcp(t) = &mut self.flows[fi].src {
            if t.armed != now {
                self.tcp_buf = out;
                return; // superseded by an earlier event
            }
            t.armed = Time::MAX;
            ack = t.on_timer(now, &mut out);
        }
        if let Some(a) = ack {
            self.inject_ack(fi, a);
        }
        self.tcp_send(fi, out);
    }

    // ---- results -------------------------------------------------------------------------

    pub(crate) fn hop_stats(&self) -> Vec<(String, &'static str, sluice_core::QdiscStats, u64)> {
        self.hops
            .iter()
            .enumerate()
            .map(|(i, h)| {
                (self.spec_names.0[i].clone(), h.e.kind(), h.e.stats().qdisc, self.rec.hops[i].max_backlog)
            })
            .collect()
    }

    /// A TCP flow's retransmissions, timeouts, tail loss probes and smoothed RTT.
    pub(crate) fn tcp_counters(&self, flow: usize) -> Option<(u64, u64, u64, Option<Span>)> {
        match &self.flows[flow].src {
            Src::Tcp(t) => Some((t.retransmits, t.timeouts, t.probes, t.srtt())),
            _ => None,
        }
    }

    /// For a download flow (its ACKs cross the shaper): ACKs sent after the warm-up, and those
    /// of them the shaper's ACK filter removed or dropped otherwise.
    pub(crate) fn ack_counters(&self, flow: usize) -> Option<[u64; 3]> {
        let f = &self.flows[flow];
        f.download.then_some(f.acks)
    }

    /// `tc -s qdisc show` and `tc -s class show` of each hop that runs a tc configuration, with
    /// the counters its engine kept (see [`sluice_tc::runstats`]).
    pub fn tc_stats(&self, views: &[crate::scenario::TcView]) -> String {
        let mut out = String::new();
        for v in views {
            let h = if v.hop.0 { self.nfwd + v.hop.1 } else { v.hop.1 };
            let Some(hop) = self.hops.get(h) else { continue };
            let mut state = (*v.state).clone();
            if let Some(d) = state.devices.iter_mut().find(|d| d.name == v.dev) {
                let st = hop.e.stats();
                sluice_tc::runstats::import(d, hop.e.root(), st.qdisc);
                out += &format!("# link {}: {}\n", v.link, hop.e.summary());
                out += &sluice_tc::runstats::tc_stats(d);
            }
            if let (Some(rx_dev), Some((rx, _, _))) = (&v.rx_dev, &hop.rx) {
                if let Some(d) = state.devices.iter_mut().find(|d| &d.name == rx_dev) {
                    let st = rx.stats();
                    sluice_tc::runstats::import_ingress(d, st.rx_bytes, st.rx_packets, st.classify_drops);
                    out += &format!("# link {}: the receive path of {rx_dev}\n", v.link);
                    out += &sluice_tc::runstats::tc_stats_ingress(d);
                }
            }
        }
        out
    }

    /// Packets the shaper hop(s) dequeued.
    pub(crate) fn shaper_packets(&self) -> u64 {
        self.hops.iter().filter(|h| h.is_shaper).map(|h| h.e.stats().qdisc.packets).sum()
    }

    /// Engine counters.
    pub fn engine_stats(&self) -> EngineStats {
        self.stats
    }

    /// Events still queued (for tests).
    pub fn pending(&self) -> usize {
        self.ev.len()
    }
}

/// The packet a flow sends, as its sending host makes it (length, TOS, mark, priority, hashes).
fn template(f: &FlowSpec) -> Packet {
    let mut tmpl = Packet::new(f.size * f.gso_segs.max(1) as u32, 0);
    if f.gso_segs > 1 {
        tmpl.gso_segs = f.gso_segs;
        tmpl.gso_size = f.size;
    }
    tmpl.dsfield = f.dsfield;
    if f.ecn {
        tmpl.dsfield = (tmpl.dsfield & !3) | 2; // ECT(0)
    }
    tmpl.mark = f.mark;
    tmpl.priority = f.priority;
    tmpl.src_host_hash = crate::model::name_hash(&f.host);
    tmpl.dst_host_hash = crate::model::name_hash(&f.dst);
    if let Some((src, dst)) = f.host_hashes {
        tmpl.src_host_hash = src;
        tmpl.dst_host_hash = dst;
    }
    tmpl.flow_hash = if f.flow_hash != 0 { f.flow_hash } else { crate::model::name_hash(&f.name) };
    tmpl.nat_orig = f.nat_orig;
    tmpl
}

/// Where the packets of forward flow `flow` go in the shaper: `Some((why, fix))` when a shaper
/// hop's HTB puts them in its direct queue, which no class limits (nothing classifies them, and
/// there is no `default` leaf to take them). Probes a fresh copy of each shaper hop's engine with
/// one packet of the flow, so the answer is the engine's own: filters, `priority`, `default`.
pub(crate) fn unshaped(spec: &SimSpec, flow: usize) -> Option<(String, String)> {
    use sluice_core::htb::Htb;
    let f = spec.flows.get(flow)?;
    let htb =
        |e: &Engine| e.root().as_any().and_then(|a| a.downcast_ref::<Htb>()).map(|h| h.direct_packets());
    for l in spec.forward.iter().filter(|l| l.is_shaper) {
        let mut e = Engine::new((l.queue)(), Time::ZERO);
        let Some(before) = htb(&e) else { continue };
        let _ = e.ingress(template(f), &f.keys, &f.frame, Time::ZERO);
        if htb(&e).is_none_or(|after| after <= before) {
            continue;
        }
        let h = e.root().as_any().and_then(|a| a.downcast_ref::<Htb>())?;
        let major = h.handle();
        let def = Handle::new(major.major(), h.htb_config().default_class);
        let at = format!("HTB {major} on link `{}`", l.name);
        let named = (f.priority != 0).then(|| Handle::from_tc(f.priority));
        return Some(match named {
            Some(p) if p.major() == major.major() && p.minor() == 0 => (
                format!("its priority {p} names the direct queue of {at}"),
                "name a class in its priority, or give a link a rate".to_string(),
            ),
            _ if def.minor() == 0 => (
                format!("{at} has no default class, and no filter or priority classifies the flow"),
                "give the HTB a `default` class, a filter for the flow, or a link a rate".to_string(),
            ),
            _ if h.class_config(def).is_none() => (
                format!(
                    "the default class {def} of {at} does not exist, and no filter or priority \
                     classifies the flow"
                ),
                format!("add class {def}, a filter for the flow, or a rate to a link"),
            ),
            _ => (
                format!(
                    "the default class {def} of {at} is an inner class (only a leaf takes packets), \
                     and no filter or priority classifies the flow"
                ),
                "make `default` name a leaf class, add a filter for the flow, or give a link a rate"
                    .to_string(),
            ),
        });
    }
    None
}

/// The filters' view of a slot's packet: its flow's keys and frame on the forward route, nothing
/// on the reverse one.
#[inline]
fn view<'a>(flows: &'a [Flow], no_keys: &'a FlowKeys, s: &Slot) -> (&'a FlowKeys, &'a [u8]) {
    match s.route {
        0 => {
            let f = &flows[s.flow as usize];
            (&f.keys, &f.frame[..])
        }
        _ => (no_keys, &[][..]),
    }
}

/// Cubic/Reno label for results.
pub(crate) fn traffic_label(t: &TrafficSpec) -> String {
    match t {
        TrafficSpec::Cbr { .. } => "cbr".into(),
        TrafficSpec::Poisson { .. } => "poisson".into(),
        TrafficSpec::OnOff { .. } => "onoff".into(),
        TrafficSpec::Backlog { .. } => "backlog".into(),
        TrafficSpec::Tcp { cc: CongestionControl::Reno, .. } => "tcp-reno".into(),
        TrafficSpec::Tcp { cc: CongestionControl::Cubic, .. } => "tcp-cubic".into(),
        TrafficSpec::Tcp { cc: CongestionControl::Bbr, .. } => "tcp-bbr".into(),
        TrafficSpec::Paced { .. } => "paced".into(),
        TrafficSpec::Probe { .. } => "probe".into(),
        TrafficSpec::StreamGroup { .. } => "stream-group".into(),
        TrafficSpec::Member => "stream".into(),
    }
}
