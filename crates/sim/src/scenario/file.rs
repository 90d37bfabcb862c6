//! The serde form of a scenario file. Every table rejects unknown keys; every value that may hold
//! a unit or a `${param}` is kept with its span so errors can point at it.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// A scalar as written: quantities are resolved later, after `${param}` substitution.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Scalar {
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string, e.g. `"5mbit"` or `"${rate}"`.
    Str(String),
}

impl Scalar {
    /// As text (numbers printed plainly).
    pub fn text(&self) -> String {
        match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Str(s) => s.clone(),
        }
    }
}

/// A spanned scalar.
pub type Q = Spanned<Scalar>;

/// A sweep: a list of values, or a range.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SweepFile {
    /// Explicit values.
    List(Vec<Scalar>),
    /// `{ from, to, step }`, inclusive, in the parameter's unit (rate, time, size or number).
    Range(RangeFile),
}

/// A range sweep.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeFile {
    /// First value.
    pub from: Scalar,
    /// Last value (inclusive).
    pub to: Scalar,
    /// Increment.
    pub step: Scalar,
}

/// The top-level scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Short name.
    pub name: String,
    /// One line shown by `sluice scenarios`.
    pub description: String,
    /// The seed document this reproduces, e.g. "003".
    #[serde(default)]
    pub seed_doc: Option<String>,
    /// Default RNG seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Simulated time per case.
    pub duration: Q,
    /// Time excluded from totals at the start.
    #[serde(default)]
    pub warmup: Option<Q>,
    /// Time-series step (default 100ms).
    #[serde(default)]
    pub step: Option<Q>,
    /// Record time series (default true).
    #[serde(default)]
    pub series: Option<Q>,
    /// Every flow starts up to this much later than its `start`, uniformly at random from the
    /// seed, as real hosts never start in the same nanosecond (default 10ms; "0s": exact).
    #[serde(default)]
    pub start_jitter: Option<Q>,
    /// Time the shaper's enqueue/dequeue with the wall clock (default false).
    #[serde(default)]
    pub profile: Option<bool>,
    /// Named parameters, referenced as `${name}` in values.
    #[serde(default)]
    pub params: BTreeMap<String, Spanned<Scalar>>,
    /// Parameters to sweep (cartesian product), each a list or a range.
    #[serde(default)]
    pub sweep: BTreeMap<String, Spanned<SweepFile>>,
    /// Forward path, in order.
    #[serde(default)]
    pub link: Vec<LinkFile>,
    /// Reverse path (ACKs and echo replies), in order.
    #[serde(default)]
    pub reverse: Vec<LinkFile>,
    /// The shaper under test.
    #[serde(default)]
    pub shaper: Option<ShaperFile>,
    /// Traffic.
    #[serde(default)]
    pub flow: Vec<FlowFile>,
    /// Plot hints.
    #[serde(default)]
    pub report: Option<ReportFile>,
    /// Figures from the seed document, shown beside ours (`extra["seed_mbit.<flow>"]`).
    #[serde(default)]
    pub reference: Vec<ReferenceFile>,
    /// Source NAT on the shaper's router: the hosts' packets leave with one address.
    #[serde(default)]
    pub nat: Option<NatFile>,
    /// Conditions (as in `when`) naming sweep points not worth running: a point where any
    /// of them holds is left out.
    #[serde(default)]
    pub skip: Vec<Q>,
}

/// Source NAT (masquerading) on the router whose egress holds the shaper: every flow's packets
/// reach the shaper with `address` as their source (ports kept), and connection tracking keeps
/// the original tuple, which CAKE's `nat` option looks up.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatFile {
    /// Condition, e.g. `"nat=on"`.
    #[serde(default)]
    pub when: Option<Q>,
    /// The router's WAN address (IPv4).
    pub address: Q,
}

/// A published figure for one flow in the cases where `when` holds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceFile {
    /// Condition.
    #[serde(default)]
    pub when: Option<Q>,
    /// Flow name.
    pub flow: String,
    /// The seed's throughput, Mbit/s.
    pub mbit: f64,
}

/// A link (hop).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFile {
    /// Name in results.
    pub name: String,
    /// Condition, e.g. `"direction=download"`: the hop is on the path only when it holds.
    #[serde(default)]
    pub when: Option<Q>,
    /// Rate (omit for an unlimited transmitter).
    #[serde(default)]
    pub rate: Option<Q>,
    /// Propagation delay.
    #[serde(default)]
    pub delay: Option<Q>,
    /// `"shaper"`, `"pfifo [N]"`, `"bfifo [SIZE]"`, `"pfifo_head_drop [N]"` (default pfifo 1000).
    #[serde(default)]
    pub queue: Option<Q>,
    /// Wire bytes per frame added for serialisation.
    #[serde(default)]
    pub overhead: Option<Q>,
}

/// The shaper: a tc script (inline or by file), or the structured form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShaperFile {
    /// Condition, e.g. `"shaper=on"`; when false the link gets a default pfifo.
    #[serde(default)]
    pub when: Option<Q>,
    /// `htb` (default) or `legacy-2.6.30` (a model of the old kernel, single class).
    #[serde(default)]
    pub kind: Option<Q>,
    /// A tc script (`tc qdisc add ...` lines).
    #[serde(default)]
    pub tc: Option<Q>,
    /// Path of a tc script, relative to the scenario file.
    #[serde(default)]
    pub file: Option<Q>,
    /// Bytes added per packet for rate accounting (tc `overhead`).
    #[serde(default)]
    pub overhead: Option<Q>,
    /// Minimum packet unit (tc `mpu`).
    #[serde(default)]
    pub mpu: Option<Q>,
    /// `ethernet` or `atm`.
    #[serde(default)]
    pub linklayer: Option<Q>,
    /// Default class for unclassified traffic (HTB `default`).
    #[serde(default)]
    pub default: Option<Q>,
    /// legacy-2.6.30: class mtu (sets the rate table's cell_log).
    #[serde(default)]
    pub mtu: Option<Q>,
    /// legacy-2.6.30: timer granularity (default one 1024 ns tick).
    #[serde(default)]
    pub timer: Option<Q>,
    /// Classes (structured form).
    #[serde(default)]
    pub class: Vec<ClassFile>,
    /// Many identical leaves, generated (seed 001's n leaves).
    #[serde(default)]
    pub leaves: Option<LeavesFile>,
    /// Classification rules, first match wins.
    #[serde(default, rename = "match")]
    pub matches: Vec<MatchFile>,
    /// Hash hosts or flows over a set of classes (like `flow hash keys src divisor N`).
    #[serde(default)]
    pub hash: Option<HashFile>,
}

/// A class (structured form).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassFile {
    /// Condition: the class exists only in cases where it holds.
    #[serde(default)]
    pub when: Option<Q>,
    /// Class id, `major:minor`.
    pub id: Q,
    /// Parent id (default: the root qdisc).
    #[serde(default)]
    pub parent: Option<Q>,
    /// Guaranteed rate.
    pub rate: Q,
    /// Ceiling (default = rate).
    #[serde(default)]
    pub ceil: Option<Q>,
    /// Burst bytes.
    #[serde(default)]
    pub burst: Option<Q>,
    /// Ceil burst bytes.
    #[serde(default)]
    pub cburst: Option<Q>,
    /// Priority 0..7.
    #[serde(default)]
    pub prio: Option<Q>,
    /// DRR quantum.
    #[serde(default)]
    pub quantum: Option<Q>,
    /// Leaf qdisc: `pfifo [N]`, `bfifo [SIZE]`, `fq_codel`, `sfq`, ...
    #[serde(default)]
    pub leaf: Option<Q>,
}

/// `count` identical leaves `major:first`, `major:first+1`, ... (32-bit minors, one qdisc) under
/// `parent`, or in two levels (site classes, then subscribers) when `sites` asks for it or there
/// are more than 65 000 leaves.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeavesFile {
    /// How many.
    pub count: Q,
    /// `"auto"` (default: 1 up to 65 000 leaves, else about sqrt(count)), 1 (flat) or the number
    /// of sites. Site `s` is the inner class `major:(first+count+s)` under `parent`.
    #[serde(default)]
    pub sites: Option<Q>,
    /// Rate of each site (default: the parent's rate / sites).
    #[serde(default)]
    pub site_rate: Option<Q>,
    /// Ceil of each site (default: the parent's ceil).
    #[serde(default)]
    pub site_ceil: Option<Q>,
    /// Parent class.
    pub parent: Q,
    /// First class id.
    pub first: Q,
    /// Rate of each.
    pub rate: Q,
    /// Ceil of each (default = rate).
    #[serde(default)]
    pub ceil: Option<Q>,
    /// Leaf qdisc (default pfifo 1000).
    #[serde(default)]
    pub leaf: Option<Q>,
    /// List them among the results' classes: `true` (default), `false`, or `"active"` (only the
    /// leaves some flow is sent to, with an accuracy summary of the backlogged ones in `extra`).
    #[serde(default)]
    pub report: Option<Q>,
}

/// A classification rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchFile {
    /// Flow name.
    #[serde(default)]
    pub flow: Option<Q>,
    /// Source host.
    #[serde(default)]
    pub host: Option<Q>,
    /// DSCP value.
    #[serde(default)]
    pub dscp: Option<Q>,
    /// Firewall mark.
    #[serde(default)]
    pub mark: Option<Q>,
    /// Class to put matching flows in.
    pub class: Q,
}

/// Hash-based classification.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashFile {
    /// `src-host`, `dst-host` or `flow`.
    pub key: Q,
    /// Target classes; bucket = hash % len.
    pub classes: Vec<Q>,
}

/// A traffic flow.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFile {
    /// Name (with `count` > 1, `.1`, `.2`, ... are appended).
    pub name: String,
    /// Traffic model: cbr, poisson, onoff, backlog, tcp, paced, probe, streams.
    #[serde(rename = "type")]
    pub kind: Q,
    /// Condition, e.g. `"load=scp"`.
    #[serde(default)]
    pub when: Option<Q>,
    /// Source host.
    #[serde(default)]
    pub host: Option<Q>,
    /// Destination host.
    #[serde(default)]
    pub dst: Option<Q>,
    /// Rate (cbr, poisson, onoff, streams port rate; paced: idealised rate instead of t_ipi).
    #[serde(default)]
    pub rate: Option<Q>,
    /// Frame size in bytes (layer 2, no FCS). Default 1514.
    #[serde(default)]
    pub size: Option<Q>,
    /// GSO segments per packet (size is then the segment size).
    #[serde(default)]
    pub gso_segs: Option<Q>,
    /// DSCP (0..63).
    #[serde(default)]
    pub dscp: Option<Q>,
    /// Raw TOS byte (overrides dscp).
    #[serde(default)]
    pub tos: Option<Q>,
    /// ECN-capable (TCP reacts to CE).
    #[serde(default)]
    pub ecn: Option<Q>,
    /// Firewall mark.
    #[serde(default)]
    pub mark: Option<Q>,
    /// Destination port (default 5001; ICMP for probes). Seen by tc-script filters.
    #[serde(default)]
    pub port: Option<Q>,
    /// Class id (skips the shaper's rules).
    #[serde(default)]
    pub class: Option<Q>,
    /// With `count` flows: spread them evenly over this many consecutive classes starting at
    /// `class` (flow i gets minor `class + i·spread/count`).
    #[serde(default)]
    pub spread: Option<Q>,
    /// Start time.
    #[serde(default)]
    pub start: Option<Q>,
    /// Stop time.
    #[serde(default)]
    pub stop: Option<Q>,
    /// Number of identical flows.
    #[serde(default)]
    pub count: Option<Q>,
    /// TCP congestion control: reno, cubic or bbr.
    #[serde(default)]
    pub cc: Option<Q>,
    /// TCP bytes to send (default unlimited).
    #[serde(default)]
    pub bytes: Option<Q>,
    /// TCP receive window in packets.
    #[serde(default)]
    pub rwnd: Option<Q>,
    /// onoff: on time.
    #[serde(default)]
    pub on: Option<Q>,
    /// onoff: off time.
    #[serde(default)]
    pub off: Option<Q>,
    /// backlog: packets kept queued.
    #[serde(default)]
    pub depth: Option<Q>,
    /// paced: inter-packet interval.
    #[serde(default)]
    pub t_ipi: Option<Q>,
    /// paced: timer granularity.
    #[serde(default)]
    pub timer: Option<Q>,
    /// paced: credit policy none | ipi | rtt.
    #[serde(default)]
    pub credit: Option<Q>,
    /// paced: the RTT for credit = rtt.
    #[serde(default)]
    pub rtt: Option<Q>,
    /// probe: interval.
    #[serde(default)]
    pub interval: Option<Q>,
    /// Name of a tunnel carrying this flow: all its flows share the outer header's hash.
    #[serde(default)]
    pub tunnel: Option<Q>,
    /// `outer` (default): the flow hash is the tunnel's outer header; `inner`: the classifier
    /// sees the inner header (tunnel keys).
    #[serde(default)]
    pub tunnel_keys: Option<Q>,
    /// tcp: `up` (default: data on the forward path) or `down` (a download to `host`: data on
    /// the reverse path, its ACKs on the forward path through the shaper).
    #[serde(default)]
    pub direction: Option<Q>,
    /// streams: the member streams.
    #[serde(default)]
    pub stream: Vec<StreamFile>,
}

/// A member stream of a `streams` flow.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamFile {
    /// Name.
    pub name: String,
    /// Frame size.
    pub size: Q,
    /// Packets per burst.
    pub burst: Q,
    /// Class id.
    #[serde(default)]
    pub class: Option<Q>,
    /// DSCP.
    #[serde(default)]
    pub dscp: Option<Q>,
}

/// Plot hints.
#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReportFile {
    /// Parameter on the x axis of target-vs-achieved plots.
    #[serde(default)]
    pub x: Option<String>,
    /// Parameter that separates lines.
    #[serde(default)]
    pub group: Option<String>,
    /// Summary columns (flow names) to show in the stdout table; default all.
    #[serde(default)]
    pub flows: Option<Vec<String>>,
}
