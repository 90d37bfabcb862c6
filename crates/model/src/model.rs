//! The configuration model: emulated devices holding qdiscs, classes and filters.
//!
//! Plain data (serde) close to what tc sends the kernel, so that the tc grammar, the TOML form,
//! the printer, lint, viz, `build` (live core objects) and `apply` (netlink) all read one tree.
//! Handles are [`Handle`]s: 16-bit majors and 32-bit minors. The tc grammar only produces minors
//! up to `ffff` (tc's own limit); the native TOML form accepts minors up to `ffffffff`, so that one
//! HTB can hold millions of classes (the kernel cannot: `apply` must refuse or nest such trees).
//! Rates are bit/s; sizes bytes;
//! times microseconds (tc's `TIME_UNITS`). `None` options mean "not given": the kernel default
//! applies, and `change` keeps the previous value where the kernel does.

use serde::{Deserialize, Serialize};
pub use sluice_core::Handle;
use sluice_core::QdiscStats;

/// The deepest chain of nested qdiscs Sluice builds and draws (each level recurses per
/// packet; real trees are a few levels deep).
pub const MAX_QDISC_DEPTH: usize = 256;

/// `TC_H_ROOT`.
pub const H_ROOT: Handle = Handle::ROOT;
/// `TC_H_INGRESS` (parent of ingress/clsact qdiscs).
pub const H_INGRESS: Handle = Handle::INGRESS;
/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)`: the `ingress` filter parent.
pub const H_MIN_INGRESS: Handle = Handle::from_tc(0xFFFF_FFF2);
/// `TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)`: the `egress` filter parent.
pub const H_MIN_EGRESS: Handle = Handle::from_tc(0xFFFF_FFF3);
/// `ETH_P_ALL`, the protocol of filters added without `protocol`.
pub const ETH_P_ALL: u16 = 0x0003;
/// `ETH_P_IP`.
pub const ETH_P_IP: u16 = 0x0800;

/// Everything Sluice emulates: a set of network devices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Devices in creation order.
    #[serde(default)]
    pub devices: Vec<Device>,
    /// Next ifindex to hand out.
    #[serde(default = "first_ifindex")]
    pub next_ifindex: u32,
    /// The namespace's actions (the kernel's per-kind action tables): those made with
    /// `tc actions` and those filters made inline, by kind and index. Filters keep a copy of the
    /// parameters of the actions they bind (as tc sends them); `tc actions replace` updates both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionEntry>,
    /// Next automatic qdisc handle major: the kernel has one counter for the whole machine
    /// (`qdisc_alloc_handle`'s static `autohandle`), starting at 0x8001.
    #[serde(default = "first_auto_handle")]
    pub next_auto_handle: u32,
    /// Named network namespaces (`ip netns add NAME`), each with its own devices and actions,
    /// reached with `tc -n NAME`, `ip -n NAME` and `ip netns exec NAME`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub netns: std::collections::BTreeMap<String, State>,
}

fn first_ifindex() -> u32 {
    2
}

impl Default for State {
    fn default() -> Self {
        State {
            devices: Vec::new(),
            next_ifindex: first_ifindex(),
            actions: Vec::new(),
            next_auto_handle: first_auto_handle(),
            netns: Default::default(),
        }
    }
}

/// The kind of an emulated device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "type")]
pub enum DevKind {
    /// `ip link add type dummy`.
    Dummy,
    /// One end of a veth pair.
    Veth {
        /// The other end.
        peer: String,
    },
    /// `ip link add type ifb`: an intermediate functional block. What mirred redirects to its
    /// egress leaves through its root qdisc and goes back where it came from.
    Ifb,
}

/// One emulated device and its traffic-control tree.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Interface name.
    pub name: String,
    /// dummy or veth.
    #[serde(flatten)]
    pub kind: DevKind,
    /// Interface index.
    pub ifindex: u32,
    /// MTU (1500).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// txqueuelen (1000): default pfifo limit and HTB direct_qlen.
    #[serde(default = "default_txqlen")]
    pub txqueuelen: u32,
    /// Transmit queues (`ip link add ... numtxqueues N`): one `mq` class each.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub num_tx_queues: u32,
    /// Line rate of the link behind this device in bit/s, when known (lint: shaper vs modem).
    pub link_rate: Option<u64>,
    /// Qdiscs in creation order (root, children, ingress).
    #[serde(default)]
    pub qdiscs: Vec<QdiscNode>,
    /// Classes of classful qdiscs (HTB, DRR). Prio/TBF bands are implicit.
    #[serde(default)]
    pub classes: Vec<ClassNode>,
    /// Filters in creation order.
    #[serde(default)]
    pub filters: Vec<FilterNode>,
    /// u32 hash-table ids handed out per block (for `800:`, `801:` ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub u32_blocks: Vec<U32Block>,
    /// Next automatic qdisc handle major (kernel starts at 0x8001).
    #[serde(default = "first_auto_handle")]
    pub next_auto_handle: u32,
    /// The device has had an ingress or clsact qdisc (the kernel then keeps its ingress queue,
    /// and deleting a missing ingress qdisc fails differently).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ingress_queue: bool,
    /// The parent named by the last filter add or change on the `ingress` qdisc: the kernel
    /// dumps all of that qdisc's filters with it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub ingress_filter_parent: Option<Handle>,
    /// Counters of the classes that have no [`ClassNode`] (prio's and ETS's bands, the HFSC
    /// root class), by classid: imported from a run like the nodes' `stats`, and not saved.
    #[serde(skip)]
    pub implicit_class_stats: std::collections::BTreeMap<Handle, QdiscStats>,
}

fn default_mtu() -> u32 {
    1500
}
fn default_txqlen() -> u32 {
    1000
}
fn first_auto_handle() -> u32 {
    0x8001
}
fn one() -> u32 {
    1
}
fn is_one(v: &u32) -> bool {
    *v == 1
}

/// The u32 classifier's per-block state: which root hash tables were handed out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Block {
    /// The block (qdisc handle, or a class id for filters on HTB classes).
    #[serde(with = "crate::serde_units::handle")]
    pub block: Handle,
    /// Number of u32 root tables created so far on this block (first is 800:).
    pub roots_created: u32,
}

impl Device {
    /// A new device without any qdisc (noqueue, as for dummy and veth).
    pub fn new(name: &str, kind: DevKind, ifindex: u32) -> Device {
        Device {
            name: name.to_string(),
            kind,
            ifindex,
            mtu: default_mtu(),
            txqueuelen: default_txqlen(),
            num_tx_queues: 1,
            link_rate: None,
            qdiscs: Vec::new(),
            classes: Vec::new(),
            filters: Vec::new(),
            u32_blocks: Vec::new(),
            next_auto_handle: first_auto_handle(),
            ingress_queue: false,
            ingress_filter_parent: None,
            implicit_class_stats: Default::default(),
        }
    }

    /// `psched_mtu`: MTU plus the Ethernet header.
    pub fn psched_mtu(&self) -> u32 {
        self.mtu + 14
    }

    /// The qdisc with handle `major:0`.
    pub fn qdisc(&self, handle: Handle) -> Option<&QdiscNode> {
        self.qdiscs.iter().find(|q| q.handle == handle.qdisc())
    }

    /// The qdisc attached at `parent` (root, ingress, or a class).
    pub fn qdisc_at(&self, parent: Handle) -> Option<&QdiscNode> {
        self.qdiscs.iter().find(|q| q.parent == parent)
    }

    /// How many qdiscs deep the deepest chain of qdiscs grafted on classes is (the root alone
    /// is 1), counting at most to `cap`. Iterative: a deep tree costs no stack here.
    pub fn qdisc_depth(&self, cap: usize) -> usize {
        let mut deepest = 0;
        for q in &self.qdiscs {
            let (mut depth, mut parent) = (1, q.parent);
            while depth < cap && parent != H_ROOT && parent != H_INGRESS {
                match self.qdisc(parent.qdisc()) {
                    Some(p) => {
                        depth += 1;
                        parent = p.parent;
                    }
                    None => break,
                }
            }
            deepest = deepest.max(depth);
            if deepest >= cap {
                break;
            }
        }
        deepest
    }

    /// The root qdisc, if one was added.
    pub fn root(&self) -> Option<&QdiscNode> {
        self.qdisc_at(H_ROOT)
    }

    /// The explicit class `classid`.
    pub fn class(&self, classid: Handle) -> Option<&ClassNode> {
        self.classes.iter().find(|c| c.classid == classid)
    }

    /// Explicit children classes of `parent` (a class id, or a qdisc handle for top-level classes).
    pub fn child_classes(&self, parent: Handle) -> impl Iterator<Item = &ClassNode> {
        self.classes.iter().filter(move |c| c.parent == parent)
    }

    /// Removes qdisc `handle` and everything below it (classes, child qdiscs, filters).
    pub fn remove_qdisc_tree(&mut self, handle: Handle) {
        let dev = self;
        let mut doomed_q = vec![handle];
        let mut i = 0;
        while i < doomed_q.len() {
            let h = doomed_q[i];
            for q in &dev.qdiscs {
                if q.parent != H_ROOT
                    && q.parent != H_INGRESS
                    && q.parent.qdisc() == h
                    && !doomed_q.contains(&q.handle)
                {
                    doomed_q.push(q.handle);
                }
            }
            i += 1;
        }
        let is_ingress = dev.qdisc(handle).is_some_and(|q| q.parent == H_INGRESS);
        dev.qdiscs.retain(|q| !doomed_q.contains(&q.handle));
        dev.classes.retain(|c| !doomed_q.contains(&c.classid.qdisc()));
        dev.filters.retain(|f| {
            let block_q = if f.parent == H_MIN_INGRESS || f.parent == H_MIN_EGRESS {
                Handle::new(0xFFFF, 0)
            } else {
                f.parent.qdisc()
            };
            if is_ingress && block_q == Handle::new(0xFFFF, 0) {
                return false;
            }
            !doomed_q.contains(&block_q)
        });
        dev.u32_blocks.retain(|b| {
            dev.filters
                .iter()
                .any(|f| f.parent == b.block || (b.block == H_MIN_INGRESS && f.parent == H_MIN_EGRESS))
        });
    }
}

/// A qdisc in the tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QdiscNode {
    /// `major:0`.
    #[serde(with = "crate::serde_units::handle")]
    pub handle: Handle,
    /// [`H_ROOT`], [`H_INGRESS`] or a class id.
    #[serde(with = "crate::serde_units::handle")]
    pub parent: Handle,
    /// Kind and options.
    pub opts: QdiscOpts,
    /// Size table (`stab`), if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stab: Option<SizeTable>,
    /// Counters (zero unless imported from a run).
    #[serde(default, skip_serializing_if = "is_zero_stats")]
    pub stats: QdiscStats,
}

/// True when no counter is set (keeps files short).
pub fn is_zero_stats(s: &QdiscStats) -> bool {
    *s == QdiscStats::default()
}

/// A class of a classful qdisc.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassNode {
    /// `major:minor`.
    #[serde(with = "crate::serde_units::handle")]
    pub classid: Handle,
    /// The parent class id, or the qdisc handle for a top-level class.
    #[serde(with = "crate::serde_units::handle")]
    pub parent: Handle,
    /// Kind and options.
    pub opts: ClassOpts,
    /// Counters.
    #[serde(default, skip_serializing_if = "is_zero_stats")]
    pub stats: QdiscStats,
}

/// A filter (one classifier instance, or a u32 hash table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilterNode {
    /// The block: the qdisc handle, a class id, or [`H_MIN_INGRESS`]/[`H_MIN_EGRESS`].
    #[serde(with = "crate::serde_units::handle")]
    pub parent: Handle,
    /// Filter chain (0).
    #[serde(default)]
    pub chain: u32,
    /// Preference: lower runs first.
    pub prio: u16,
    /// Ethertype the filter applies to ([`ETH_P_ALL`] for all).
    pub protocol: u16,
    /// Filter handle (u32: `ht:bucket:node` packed; flow/fw/matchall: a number).
    pub handle: u32,
    /// Kind and options.
    pub opts: FilterOpts,
    /// Actions run on a match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// The action is a policer given with the filter's own `police` keyword (the kernel's
    /// `TCA_*_POLICE`, printed without `action order`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub police_keyword: bool,
}

/// Link-layer framing for rate computations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkLayer {
    /// Ethernet (and everything else).
    #[default]
    Ethernet,
    /// ATM cells (ADSL).
    Atm,
}

/// Qdisc kinds and their options: one variant per line of the kind registry.
pub use crate::kinds::QdiscOpts;

/// A size table (`stab ...`): how a qdisc computes packet sizes (tc's `struct tc_sizespec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeTable {
    /// Link layer (`None`: not given; tc sends it unspecified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linklayer: Option<LinkLayer>,
    /// Per-packet overhead.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub overhead: i32,
    /// Minimum packet unit.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mpu: u32,
    /// Largest size in the table (0 when tc sends no table).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub mtu: u32,
    /// Table slots (0 when tc sends no table).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub tsize: u32,
}

impl SizeTable {
    /// The size the qdisc accounts for a packet of `len` bytes (`qdisc_calculate_pkt_len` with
    /// tc's table: overhead, mpu, then ATM cells).
    pub fn pkt_len(&self, len: u32) -> u32 {
        let mut l = (len as i64 + self.overhead as i64).max(0) as u64;
        if l < self.mpu as u64 {
            l = self.mpu as u64;
        }
        if self.linklayer == Some(LinkLayer::Atm) {
            l = l.div_ceil(48) * 53;
        }
        l.min(u32::MAX as u64) as u32
    }
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

pub(crate) fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
pub(crate) fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
pub(crate) fn is_ethernet(l: &LinkLayer) -> bool {
    *l == LinkLayer::Ethernet
}

pub use crate::kinds::cake::CakeOpts;
pub use crate::kinds::clsact::ClsactOpts;
pub use crate::kinds::codel::CodelOpts;
pub use crate::kinds::drr::DrrOpts;
pub use crate::kinds::ets::EtsOpts;
pub use crate::kinds::fifo::FifoOpts;
pub use crate::kinds::fq_codel::FqCodelOpts;
pub use crate::kinds::fq_pie::FqPieOpts;
pub use crate::kinds::hfsc::{HfscClassOpts, HfscOpts};
pub use crate::kinds::htb::HtbOpts;
pub use crate::kinds::ingress::IngressOpts;
pub use crate::kinds::mq::MqOpts;
pub use crate::kinds::netem::{
    NetemCorr, NetemDist, NetemLoss, NetemOpts, NetemProb, NetemRateOpts, NetemSlotOpts,
};
pub use crate::kinds::pfifo_fast::PfifoFastOpts;
pub use crate::kinds::pie::{PieOpts, PieShared};
pub use crate::kinds::prio::{PrioOpts, DEFAULT_PRIOMAP};
pub use crate::kinds::red::RedOpts;
pub use crate::kinds::sfq::{SfqOpts, SfqRed};
pub use crate::kinds::tbf::TbfOpts;

pub use crate::kinds::drr::DrrClassOpts;
pub use crate::kinds::ets::EtsClassOpts;
pub use crate::kinds::htb::HtbClassOpts;
pub use crate::kinds::ClassOpts;

pub use crate::kinds::basic::BasicOpts;
pub use crate::kinds::cls_u32::{U32Filter, U32Key, U32OffsetOpts, U32Opts, U32TableOpts};
pub use crate::kinds::flow::{flow_key_name, FlowOpts, FLOW_KEYS, FLOW_TUNNEL_KEYS};
pub use crate::kinds::fw::FwOpts;
pub use crate::kinds::matchall::SimpleResult;
/// Filter kinds and their options: one variant per line of the filter registry.
pub use crate::kinds::FilterOpts;

/// What a gact or police action does with a packet (`TC_ACT_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Stop classification and accept (`ok`, `pass`).
    #[default]
    Pass,
    /// Drop (`drop`, `shot`).
    Drop,
    /// Continue with the next filter.
    Continue,
    /// Re-start classification.
    Reclassify,
    /// Go to the next action.
    Pipe,
    /// The action took the packet (`TC_ACT_STOLEN`): mirred's default after a redirect. tc prints
    /// it but does not parse it.
    Stolen,
    /// Hand to the CPU (hardware paths); dropped in software (`trap`).
    Trap,
    /// Continue with the first filter of a chain (`goto chain N`).
    Goto(u32),
    /// Skip this many actions ahead (`jump N`).
    Jump(u32),
}

impl Verdict {
    /// tc's name (`goto` and `jump` without their number).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Drop => "drop",
            Verdict::Continue => "continue",
            Verdict::Reclassify => "reclassify",
            Verdict::Pipe => "pipe",
            Verdict::Stolen => "stolen",
            Verdict::Trap => "trap",
            Verdict::Goto(_) => "goto",
            Verdict::Jump(_) => "jump",
        }
    }

    /// As tc's `print_action_control` prints it: `pass`, `goto chain 42`, `jump 3`.
    pub fn text(self) -> String {
        match self {
            Verdict::Goto(c) => format!("goto chain {c}"),
            Verdict::Jump(n) => format!("jump {n}"),
            v => v.name().to_string(),
        }
    }

    /// The kernel's value (`TC_ACT_*`, with the chain or jump count in the low 28 bits).
    pub fn code(self) -> i32 {
        match self {
            Verdict::Continue => -1,
            Verdict::Pass => 0,
            Verdict::Reclassify => 1,
            Verdict::Drop => 2,
            Verdict::Pipe => 3,
            Verdict::Stolen => 4,
            Verdict::Trap => 8,
            Verdict::Jump(n) => (1 << 28) | (n & 0x0FFF_FFFF) as i32,
            Verdict::Goto(c) => (2 << 28) | (c & 0x0FFF_FFFF) as i32,
        }
    }
}

pub use crate::kinds::gact::{GactOpts, GactRandom};
pub use crate::kinds::mirred::{MirredDirection, MirredMode, MirredOpts};
pub use crate::kinds::police::PoliceOpts;
pub use crate::kinds::skbedit::SkbeditOpts;

/// A filter action: one variant per action kind, dispatched by the registry
/// (`crate::kinds::action_registry!`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Generic action: a fixed verdict.
    Gact(GactOpts),
    /// Policer.
    Police(PoliceOpts),
    /// Mirror or redirect to a device (`action mirred egress redirect dev ifb0`).
    Mirred(MirredOpts),
    /// Packet metadata editor.
    Skbedit(SkbeditOpts),
}

impl Action {
    /// tc's kind name.
    pub fn kind(&self) -> &'static str {
        self.registry_name().expect("every action kind is in the registry")
    }

    /// The action's index in its kind's table (0: not assigned yet).
    pub fn index(&self) -> u32 {
        self.registry_index().expect("every action kind is in the registry")
    }

    /// Sets the index.
    pub fn set_index(&mut self, i: u32) {
        self.registry_set_index(i);
    }
}

/// One entry of the namespace's action table. Two entries are equal when everything but the
/// time they were made is.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ActionEntry {
    /// Kind, parameters and index.
    pub action: Action,
    /// Made with `tc actions` (the table holds a reference of its own besides the binds of
    /// filters; an action a filter made inline goes away with its last filter).
    #[serde(default, skip_serializing_if = "is_false")]
    pub standalone: bool,
    /// `cookie HEX`: opaque bytes the user attached, in hex.
    pub cookie: Option<String>,
    /// When it was made, in milliseconds since the Unix epoch (tc prints `installed N sec`).
    #[serde(default)]
    pub installed_ms: u64,
}

impl PartialEq for ActionEntry {
    fn eq(&self, o: &ActionEntry) -> bool {
        self.action == o.action && self.standalone == o.standalone && self.cookie == o.cookie
    }
}
