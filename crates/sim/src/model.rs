//! The resolved, typed description of one simulation run. Scenario files are parsed and checked
//! into this form (see [`crate::scenario`]); tests and benchmarks may build it directly.

use sluice_core::{FlowKeys, Handle, NatOrig, Qdisc, Rate, Span, WireSpec};
use sluice_engine::Program;
use std::sync::Arc;

/// Builds a fresh program (root qdisc and classifier) for a link's engine; each run and each
/// sweep case gets its own.
pub type QueueFactory = Box<dyn Fn() -> Program + Send + Sync>;

/// A [`QueueFactory`] for a plain queue: `make`'s qdisc with no filters.
pub fn queue(make: impl Fn() -> Box<dyn Qdisc> + Send + Sync + 'static) -> QueueFactory {
    Box::new(move || Program::from_parts(make(), Default::default()))
}

/// One hop of a path: a queue, then a transmitter of finite (or unlimited) rate, then a wire.
pub struct LinkSpec {
    /// Name used in results ("modem", "lan").
    pub name: String,
    /// Serialisation rate; `None` means the queue's output is not rate-limited by the wire.
    pub rate: Option<Rate>,
    /// One-way propagation delay after serialisation.
    pub delay: Span,
    /// Bytes the wire adds per frame (preamble, FCS, ...), for serialisation only.
    pub overhead: u32,
    /// The queue in front of the transmitter: every hop runs a [`sluice_engine::Engine`].
    pub queue: QueueFactory,
    /// True if this queue is the configured shaper: its dequeues are accounted per class.
    pub is_shaper: bool,
    /// Ingress shaping: packets first cross this device's receive path (its ingress filters);
    /// those redirected to the egress of the device whose index is the first `u16` (this hop's,
    /// an IFB) are queued here, those redirected to a device's receive path are received there
    /// (the IFB's or this device's own ingress filters run again, up to the kernel's nesting
    /// limit; any other device delivers them), the others go on past this hop unqueued
    /// (delivered) or, redirected to another device's egress, leave the path (counted as
    /// drops). The second `u16` is the receiving device's own index.
    pub receive: Option<(QueueFactory, u16, u16)>,
}

/// A shaper class whose rate is reported.
#[derive(Clone, Debug)]
pub struct ClassSpec {
    /// Class id.
    pub id: Handle,
    /// Configured rate.
    pub rate: Rate,
    /// Configured ceil.
    pub ceil: Rate,
}

/// TCP congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionControl {
    /// RFC 5681 Reno with RFC 6582 NewReno recovery.
    Reno,
    /// RFC 9438 CUBIC.
    Cubic,
    /// BBR v1, paced.
    Bbr,
}

/// Send-credit policy of a paced sender (seed 002).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditPolicy {
    /// A late sender catches up fully.
    None,
    /// The nominal send time may lag "now" by at most one t_ipi.
    Ipi,
    /// ... by at most one RTT (rfc3448bis).
    Rtt(Span),
}

/// One stream of an Ixia-style stream group.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    /// Index of the flow (in [`SimSpec::flows`]) that this stream's packets belong to.
    pub flow: usize,
    /// Frame size.
    pub size: u32,
    /// Packets per burst before the port moves to the next stream.
    pub burst: u32,
}

/// What a flow sends.
#[derive(Clone, Debug)]
pub enum TrafficSpec {
    /// Constant bit rate.
    Cbr {
        /// Rate counted in frame bytes.
        rate: Rate,
    },
    /// Poisson arrivals with this mean rate.
    Poisson {
        /// Mean rate.
        rate: Rate,
    },
    /// CBR during `on`, silent during `off`, repeating.
    OnOff {
        /// Rate while on.
        rate: Rate,
        /// On period.
        on: Span,
        /// Off period.
        off: Span,
    },
    /// Keeps `depth` packets queued in the first hop at all times (an always-backlogged source).
    Backlog {
        /// Packets kept queued.
        depth: u32,
    },
    /// Greedy (or size-limited) TCP.
    Tcp {
        /// Congestion control.
        cc: CongestionControl,
        /// Bytes to send (None: unlimited).
        bytes: Option<u64>,
        /// Receive window in packets.
        rwnd: u32,
    },
    /// A rate-paced sender with a coarse timer (DCCP CCID-3 style).
    Paced {
        /// Inter-packet interval.
        t_ipi: Span,
        /// Timer granularity (1 ms for HZ=1000, 4 ms for HZ=250; 0 = exact).
        timer: Span,
        /// Credit policy.
        credit: CreditPolicy,
    },
    /// Echo request/reply probes (ping); latency is the round-trip time.
    Probe {
        /// Interval between requests.
        interval: Span,
    },
    /// An Ixia port sending its streams round-robin in bursts at `rate`.
    StreamGroup {
        /// Port rate.
        rate: Rate,
        /// The streams, in service order.
        streams: Vec<StreamSpec>,
    },
    /// A member of a stream group: sends nothing by itself.
    Member,
}

/// A traffic flow.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Name in results.
    pub name: String,
    /// Source host name (hashed into `src_host_hash`).
    pub host: String,
    /// Destination host name.
    pub dst: String,
    /// Traffic model.
    pub traffic: TrafficSpec,
    /// Frame size in bytes as the qdisc sees it (layer 2, no FCS). For GSO: segment size.
    pub size: u32,
    /// GSO segments per packet (1 = none).
    pub gso_segs: u16,
    /// TOS byte (DSCP << 2 | ECN).
    pub dsfield: u8,
    /// Firewall mark (`skb->mark`), as the sending host sets it (`fw` filters match it).
    pub mark: u32,
    /// `skb->priority` as the sending host sets it (0: none), e.g. with `SO_PRIORITY` or
    /// iptables `CLASSIFY`: HTB takes it as a classid of its own before running filters.
    pub priority: u32,
    /// What the shaper's filters see of each packet of the flow: the flow keys and a template
    /// frame (headers; `size` stays the packet length). Parsed once per flow, so the engine
    /// classifies every packet without building or parsing a frame.
    pub keys: FlowKeys,
    /// The template frame (empty when no filter reads bytes).
    pub frame: Arc<[u8]>,
    /// Flow hash as the parser would compute it for the outer headers.
    pub flow_hash: u32,
    /// Start time.
    pub start: Span,
    /// Stop time (None: run to the end).
    pub stop: Option<Span>,
    /// TCP only: reacts to CE marks (ECN).
    pub ecn: bool,
    /// Source and destination host hashes as the parser computed them (None: from the names).
    pub host_hashes: Option<(u32, u32)>,
    /// TCP only: the data travels the reverse path to `host` (a download) and its ACKs the
    /// forward path, through the shaper.
    pub download: bool,
    /// The pre-NAT hashes conntrack keeps for the flow, when a router masquerades it; the
    /// packets then carry the post-NAT ones (`flow_hash`, `host_hashes`).
    pub nat_orig: Option<NatOrig>,
}

/// A complete run description.
pub struct SimSpec {
    /// Simulated duration.
    pub duration: Span,
    /// Measurements start after this.
    pub warmup: Span,
    /// Time-series step.
    pub step: Span,
    /// RNG seed.
    pub seed: u64,
    /// Forward path, in order.
    pub forward: Vec<LinkSpec>,
    /// Reverse path (ACKs, echo replies), in order.
    pub reverse: Vec<LinkSpec>,
    /// Classes to report.
    pub classes: Vec<ClassSpec>,
    /// The class the shaper queues packets in when neither its filters nor `priority` name one
    /// (HTB's `default`), for per-class accounting.
    pub default_class: Option<Handle>,
    /// Wire accounting of the shaper (overhead, mpu, linklayer) for `achieved_bps`.
    pub shaper_wire: WireSpec,
    /// Flows.
    pub flows: Vec<FlowSpec>,
    /// Record time series (disable for runs with very many flows).
    pub series: bool,
    /// Measure wall-clock time spent in the shaper's enqueue and dequeue (seed 001).
    pub profile: bool,
}

impl FlowSpec {
    /// A flow with defaults: 1514-byte frames, best effort, from t = 0.
    pub fn new(name: &str, host: &str, traffic: TrafficSpec) -> FlowSpec {
        FlowSpec {
            name: name.to_string(),
            host: host.to_string(),
            dst: "server".to_string(),
            traffic,
            size: 1514,
            gso_segs: 1,
            dsfield: 0,
            mark: 0,
            priority: 0,
            keys: FlowKeys::default(),
            frame: Arc::from(&[][..]),
            flow_hash: 0,
            start: Span::ZERO,
            stop: None,
            ecn: false,
            host_hashes: None,
            download: false,
            nat_orig: None,
        }
    }
}

/// FNV-1a, used to turn names into stable host and flow hashes.
pub fn name_hash(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}
