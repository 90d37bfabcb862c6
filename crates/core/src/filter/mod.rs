//! Filters (tc classifiers) and their actions.
//!
//! A qdisc or class (the *parent*) has a [`FilterList`]: filter priorities ("tps") ordered by chain
//! then `pref`. Each priority has one kind (u32, flow, fw, matchall, dsfield) and a protocol, and
//! holds one or more elements told apart by handle (a u32 node, an fw mark, a flow handle).
//! [`FilterList::classify`] runs them as the kernel's `tcf_classify` does:
//! - priorities of chain 0 in `pref` order, skipping those whose protocol does not match;
//! - the first element that matches and whose actions do not say `continue` decides;
//! - `reclassify` restarts at chain 0 and `goto chain N` jumps to chain N, at most
//!   [`MAX_RECLASSIFY`] times (then the packet is dropped, as the kernel does);
//! - `drop` drops; `ok`/`pass`/`pipe` take the element's class.
//!
//! ## tc options: supported and not
//!
//! - **u32**: `match u32|u16|u8 VAL MASK at [nexthdr+]OFF`; the `ip` (src, dst, tos/dsfield,
//!   protocol, sport, dport, icmp_type, icmp_code), `ip6` (src, dst, priority, protocol, flowlabel,
//!   sport, dport), `tcp`/`udp` (src, dst) and `icmp` (type, code) shorthands as builders on
//!   [`U32Selector`]; `classid`/`flowid`, `ht`, `handle`, `order`, `divisor`, `link`,
//!   `hashkey mask M at N`, `offset plus/at/mask/shift/eat`, `sample` (as
//!   [`u32::sample_bucket`]), `mark`, `indev` (as an ifindex). Not supported: `skip_hw`/`skip_sw`
//!   and `police` on the node itself other than as an action (same thing), `ip nofrag`/`firstfrag`
//!   style shorthands (expressible as `u16` matches at offset 6).
//! - **flow**: `map`/`hash`, every key (see [`flow`] for how kernel-state keys behave), `and`,
//!   `or`, `xor`, `rshift`, `addend`, `divisor`, `baseclass`, `perturb`; plus the tunnel keys and
//!   the `legacy_proto_ports` switch. Not supported: ematches (`match 'cmp(...)'`).
//! - **fw**: `handle MARK[/MASK]`, `classid`, `indev`, actions; the old method without handles.
//! - **matchall**: `classid`, actions. **dsfield**: Sluice's own (see [`dsfield`]).
//! - **Actions**: `gact` (`ok`/`pass`, `pipe`, `drop`/`shot`, `reclassify`, `continue`,
//!   `goto chain N`) and `police` (`rate`, `burst`, `mtu`, `peakrate`, `overhead`, `mpu`,
//!   `linklayer`, `conform-exceed EXCEED[/CONFORM]`). Not supported: `avrate` (needs a rate
//!   estimator), `pkts_rate`/`pkts_burst`, `stolen`/`trap`/`jump`, other action kinds (mirred,
//!   skbedit, ...).
//! - Chains, `protocol` (all, ip, ipv6, arp, 802.1q, 802.1ad, or a hex EtherType), automatic
//!   priorities (49152, then one below the lowest) and the reclassify limit follow the kernel.
//!
//! Nothing here allocates per packet. Filters read a [`ClassifyInput`]: the packet descriptor,
//! its parsed [`FlowKeys`] and the frame's bytes (for u32).

pub mod action;
pub mod basic;
pub mod dsfield;
pub mod flow;
pub mod fw;
pub mod matchall;
pub mod police;
pub mod u32;

use crate::flow_keys::FlowKeys;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::time::Time;
use std::cell::Cell;
use std::fmt;

pub use action::{Action, ActionStats, Actions, MirredTarget, Verdict};
pub use basic::{BasicConfig, BasicTp};
pub use dsfield::{DsfieldConfig, DsfieldTp};
pub use flow::{FlowConfig, FlowKey, FlowMode, FlowTp};
pub use fw::{FwConfig, FwTp};
pub use matchall::{MatchallConfig, MatchallTp};
pub use police::{Police, PoliceConfig};
pub use u32::{U32Block, U32Config, U32Selector};

/// How many `reclassify`/`goto chain` restarts one packet may take (kernel
/// `max_reclassify_loop`); the next one drops it.
pub const MAX_RECLASSIFY: u32 = 16;

/// What a classifier looks at.
#[derive(Clone, Debug)]
pub struct ClassifyInput<'a> {
    /// The packet descriptor (mark, priority, dsfield, flow hash, length).
    pub pkt: &'a Packet,
    /// The parsed headers.
    pub keys: &'a FlowKeys,
    /// The frame from the link-layer header on; `keys.network_offset` locates the IP header.
    /// May be empty when the bytes are not available (u32 then never matches).
    pub frame: &'a [u8],
    /// `skb->mark` and `skb->priority` as actions (skbedit) left them: later filters read these,
    /// and the caller writes them back into the packet.
    pub meta: Cell<PacketMeta>,
}

/// The packet metadata an action may rewrite.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// `skb->mark`.
    pub mark: u32,
    /// `skb->priority`.
    pub priority: u32,
    /// Copies mirred actions asked for (the caller makes them).
    pub mirrors: Mirrors,
}

/// The devices mirred actions asked a copy of the packet for, in order (at most
/// [`Mirrors::MAX`]; more are counted in [`Mirrors::lost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mirrors {
    n: u8,
    /// Copies asked for beyond [`Mirrors::MAX`] (not made).
    pub lost: u8,
    to: [MirredTarget; Mirrors::MAX],
}

impl Mirrors {
    /// Copies one packet can ask for.
    pub const MAX: usize = 4;

    /// Records a copy for `t`.
    pub fn push(&mut self, t: MirredTarget) {
        match self.to.get_mut(self.n as usize) {
            Some(slot) => {
                *slot = t;
                self.n += 1;
            }
            None => self.lost = self.lost.saturating_add(1),
        }
    }

    /// Appends `o`'s copies.
    pub fn extend(&mut self, o: &Mirrors) {
        for t in o.targets() {
            self.push(*t);
        }
        self.lost = self.lost.saturating_add(o.lost);
    }

    /// The targets, in order.
    pub fn targets(&self) -> &[MirredTarget] {
        &self.to[..self.n as usize]
    }

    /// Whether no copy was asked for.
    pub fn is_empty(&self) -> bool {
        self.n == 0 && self.lost == 0
    }
}

impl<'a> ClassifyInput<'a> {
    /// The input for one packet, its metadata as the packet has it.
    pub fn new(pkt: &'a Packet, keys: &'a FlowKeys, frame: &'a [u8]) -> ClassifyInput<'a> {
        ClassifyInput {
            pkt,
            keys,
            frame,
            meta: Cell::new(PacketMeta {
                mark: pkt.mark,
                priority: pkt.priority,
                mirrors: Mirrors::default(),
            }),
        }
    }

    /// The firewall mark, as actions so far left it.
    pub fn mark(&self) -> u32 {
        self.meta.get().mark
    }

    /// `skb->priority`, as actions so far left it.
    pub fn priority(&self) -> u32 {
        self.meta.get().priority
    }
}

/// A classification result: the class chosen (`X:0` means the qdisc itself, i.e. HTB's direct
/// queue; [`Handle::UNSPEC`] means the filter gave no class).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FilterResult {
    /// The class.
    pub classid: Handle,
}

/// The outcome of running one parent's filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcfOutcome {
    /// A filter decided on a class.
    Classified(FilterResult),
    /// A filter or action said `drop` (or the reclassify limit was hit).
    Drop,
    /// A mirred action took the packet for another device.
    Redirect(MirredTarget),
    /// No filter matched.
    NoMatch,
}

/// A filter configuration that was rejected, or a filter that was not found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// A parameter is invalid.
    #[error("{kind}: invalid {what}: {reason}")]
    Invalid {
        /// Filter or action kind.
        kind: &'static str,
        /// The parameter, as tc spells it.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The filter, priority or table does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// It already exists (and the operation was not a replace).
    #[error("already exists: {0}")]
    Exists(String),
    /// It is in use.
    #[error("busy: {0}")]
    Busy(String),
}

impl FilterError {
    /// Shorthand for [`FilterError::Invalid`].
    pub fn invalid(kind: &'static str, what: &'static str, reason: impl Into<String>) -> FilterError {
        FilterError::Invalid { kind, what, reason: reason.into() }
    }
}

/// The `protocol` of a filter priority: an EtherType, or `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Protocol(pub u16);

impl Protocol {
    /// `all` (`ETH_P_ALL`).
    pub const ALL: Protocol = Protocol(0x0003);
    /// `ip`.
    pub const IP: Protocol = Protocol(0x0800);
    /// `ipv6`.
    pub const IPV6: Protocol = Protocol(0x86DD);
    /// `arp`.
    pub const ARP: Protocol = Protocol(0x0806);
    /// `802.1q`.
    pub const VLAN: Protocol = Protocol(0x8100);
    /// `802.1ad`.
    pub const QINQ: Protocol = Protocol(0x88A8);

    /// Parses tc's names (`all`, `ip`, `ipv6`, `arp`, `802.1q`, `802.1ad`) or a hex EtherType.
    pub fn parse(s: &str) -> Option<Protocol> {
        Some(match s.to_ascii_lowercase().as_str() {
            "all" => Protocol::ALL,
            "ip" => Protocol::IP,
            "ipv6" => Protocol::IPV6,
            "arp" => Protocol::ARP,
            "802.1q" | "802_1q" => Protocol::VLAN,
            "802.1ad" | "802_1ad" => Protocol::QINQ,
            other => Protocol(u16::from_str_radix(other.trim_start_matches("0x"), 16).ok()?),
        })
    }

    /// Whether a packet with these keys is seen by a priority of this protocol. A VLAN protocol
    /// matches a tagged packet; otherwise the EtherType after the tags must be equal.
    pub fn matches(self, keys: &FlowKeys) -> bool {
        self == Protocol::ALL
            || self.0 == keys.ethertype
            || ((self == Protocol::VLAN || self == Protocol::QINQ) && keys.vlan_tci.is_some())
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Protocol::ALL => f.write_str("all"),
            Protocol::IP => f.write_str("ip"),
            Protocol::IPV6 => f.write_str("ipv6"),
            Protocol::ARP => f.write_str("arp"),
            Protocol::VLAN => f.write_str("802.1Q"),
            Protocol::QINQ => f.write_str("802.1ad"),
            Protocol(p) => write!(f, "{p:04x}"),
        }
    }
}

/// The kind-specific configuration of one filter element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterConfig {
    /// u32.
    U32(U32Config),
    /// flow.
    Flow(FlowConfig),
    /// fw.
    Fw(FwConfig),
    /// matchall.
    Matchall(MatchallConfig),
    /// dsfield (Sluice's TOS/traffic-class match).
    Dsfield(DsfieldConfig),
    /// basic (extended matches).
    Basic(BasicConfig),
}

impl FilterConfig {
    /// The kind name (`u32`, `flow`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            FilterConfig::U32(_) => "u32",
            FilterConfig::Flow(_) => "flow",
            FilterConfig::Fw(_) => "fw",
            FilterConfig::Matchall(_) => "matchall",
            FilterConfig::Dsfield(_) => "dsfield",
            FilterConfig::Basic(_) => "basic",
        }
    }
}

/// `tc filter add|replace|change ... [chain C] [pref P] [protocol PROTO] [handle H] KIND ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterSpec {
    /// `chain` (default 0).
    pub chain: u32,
    /// `pref`/`prio`; `None` picks one below the lowest in the chain (49152 for the first).
    pub pref: Option<u16>,
    /// `protocol` (tc's default is `all`).
    pub protocol: Protocol,
    /// `handle` (kind-specific; u32 handles are `htid:bucket:node` packed as 12:8:12 bits).
    pub handle: Option<u32>,
    /// The kind and its options.
    pub config: FilterConfig,
}

impl FilterSpec {
    /// A spec with chain 0, protocol `all` and no handle.
    pub fn new(pref: u16, config: FilterConfig) -> FilterSpec {
        FilterSpec { chain: 0, pref: Some(pref), protocol: Protocol::ALL, handle: None, config }
    }
}

/// How an add treats an existing element with the same handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upsert {
    /// `tc filter add`: it must not exist.
    Add,
    /// `tc filter replace`: create or overwrite.
    Replace,
    /// `tc filter change`: it must exist.
    Change,
}

/// The elements of one filter priority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TpKind {
    /// u32: the priority's root table (elements live in the list's [`U32Block`]).
    U32 {
        /// htid of the root table.
        root: u32,
    },
    /// flow.
    Flow(FlowTp),
    /// fw.
    Fw(FwTp),
    /// matchall.
    Matchall(MatchallTp),
    /// dsfield.
    Dsfield(DsfieldTp),
    /// basic.
    Basic(BasicTp),
}

impl TpKind {
    /// The kind name.
    pub fn kind(&self) -> &'static str {
        match self {
            TpKind::U32 { .. } => "u32",
            TpKind::Flow(_) => "flow",
            TpKind::Fw(_) => "fw",
            TpKind::Matchall(_) => "matchall",
            TpKind::Dsfield(_) => "dsfield",
            TpKind::Basic(_) => "basic",
        }
    }
}

/// One filter priority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tp {
    /// Chain index.
    pub chain: u32,
    /// Priority (lower runs first).
    pub pref: u16,
    /// Protocol.
    pub protocol: Protocol,
    /// Elements.
    pub kind: TpKind,
}

/// The filters attached to one parent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterList {
    tps: Vec<Tp>,
    u32: U32Block,
    /// Packets that reached this list but matched no filter.
    pub unmatched: u64,
}

impl FilterList {
    /// An empty list.
    pub fn new() -> FilterList {
        FilterList::default()
    }

    /// The priorities, ordered by chain then pref.
    pub fn tps(&self) -> &[Tp] {
        &self.tps
    }

    /// The u32 tables and nodes of this parent.
    pub fn u32_block(&self) -> &U32Block {
        &self.u32
    }

    /// True when no filter is attached.
    pub fn is_empty(&self) -> bool {
        self.tps.is_empty()
    }

    /// The priority `pref` of `chain`.
    pub fn tp(&self, chain: u32, pref: u16) -> Option<&Tp> {
        self.tps.iter().find(|t| t.chain == chain && t.pref == pref)
    }

    /// Adds, replaces or changes one filter element. `qdisc_major` is the major of the qdisc the
    /// parent belongs to (flow's default base class, fw's old method). Returns `(pref, handle)`.
    pub fn apply(
        &mut self,
        spec: FilterSpec,
        mode: Upsert,
        qdisc_major: u16,
    ) -> Result<(u16, u32), FilterError> {
        let kind = spec.config.kind();
        let pref = match spec.pref {
            Some(0) => return Err(FilterError::invalid("filter", "pref", "0 is reserved")),
            Some(p) => p,
            None => {
                let lowest = self.tps.iter().filter(|t| t.chain == spec.chain).map(|t| t.pref).min();
                match lowest {
                    Some(1) => {
                        return Err(FilterError::invalid(
                            "filter",
                            "pref",
                            "no free priority below the lowest one",
                        ))
                    }
                    Some(p) => p - 1,
                    None => 0xC000,
                }
            }
        };
        let (replace, must_exist) = (mode == Upsert::Replace, mode == Upsert::Change);
        let mut created = false;
        let idx = match self.tps.iter().position(|t| t.chain == spec.chain && t.pref == pref) {
            Some(i) => {
                let t = &self.tps[i];
                if t.kind.kind() != kind {
                    return Err(FilterError::invalid(
                        "filter",
                        "kind",
                        format!("priority {pref} already holds a {} filter", t.kind.kind()),
                    ));
                }
                if spec.protocol != t.protocol && spec.protocol != Protocol::ALL {
                    return Err(FilterError::invalid(
                        "filter",
                        "protocol",
                        format!("priority {pref} already has protocol {}", t.protocol),
                    ));
                }
                i
            }
            None => {
                if must_exist {
                    return Err(FilterError::NotFound(format!(
                        "no filter with priority {pref} in chain {}",
                        spec.chain
                    )));
                }
                let kind = match &spec.config {
                    FilterConfig::U32(_) => TpKind::U32 { root: self.u32.new_root(pref)? },
                    FilterConfig::Flow(_) => TpKind::Flow(FlowTp::default()),
                    FilterConfig::Fw(_) => TpKind::Fw(FwTp::new(qdisc_major)),
                    FilterConfig::Matchall(_) => TpKind::Matchall(MatchallTp::default()),
                    FilterConfig::Dsfield(_) => TpKind::Dsfield(DsfieldTp::default()),
                    FilterConfig::Basic(_) => TpKind::Basic(BasicTp::default()),
                };
                let pos = self.tps.partition_point(|t| (t.chain, t.pref) < (spec.chain, pref));
                self.tps.insert(pos, Tp { chain: spec.chain, pref, protocol: spec.protocol, kind });
                created = true;
                pos
            }
        };
        let u32 = &mut self.u32;
        let result = match (&mut self.tps[idx].kind, spec.config) {
            (TpKind::U32 { root }, FilterConfig::U32(c)) => {
                u32.apply(*root, pref, spec.handle, c, replace, must_exist)
            }
            (TpKind::Flow(t), FilterConfig::Flow(c)) => {
                t.apply(spec.handle, c, qdisc_major, replace, must_exist)
            }
            (TpKind::Fw(t), FilterConfig::Fw(c)) => t.apply(spec.handle, c, replace, must_exist),
            (TpKind::Matchall(t), FilterConfig::Matchall(c)) => t.apply(spec.handle, c, replace, must_exist),
            (TpKind::Dsfield(t), FilterConfig::Dsfield(c)) => t.apply(spec.handle, c, replace, must_exist),
            (TpKind::Basic(t), FilterConfig::Basic(c)) => t.apply(spec.handle, c, replace, must_exist),
            _ => unreachable!("kind checked above"),
        };
        match result {
            Ok(h) => Ok((pref, h)),
            Err(e) => {
                // A priority created for this element alone goes away with it (kernel behaviour).
                if created {
                    self.remove_tp(idx);
                }
                Err(e)
            }
        }
    }

    fn remove_tp(&mut self, idx: usize) {
        let tp = self.tps.remove(idx);
        if let TpKind::U32 { root } = tp.kind {
            let last = !self.tps.iter().any(|t| matches!(t.kind, TpKind::U32 { .. }));
            self.u32.remove_root(root, last);
        }
    }

    /// Deletes a whole priority (`handle` `None`) or one element of it.
    pub fn delete(&mut self, chain: u32, pref: u16, handle: Option<u32>) -> Result<(), FilterError> {
        let idx = self.tps.iter().position(|t| t.chain == chain && t.pref == pref).ok_or_else(|| {
            FilterError::NotFound(format!("no filter with priority {pref} in chain {chain}"))
        })?;
        let Some(h) = handle else {
            self.remove_tp(idx);
            return Ok(());
        };
        match &mut self.tps[idx].kind {
            TpKind::U32 { .. } => self.u32.delete(h),
            TpKind::Flow(t) => t.delete(h),
            TpKind::Fw(t) => t.delete(h),
            TpKind::Matchall(t) => {
                if t.elem.as_ref().is_some_and(|e| e.0 == h) {
                    t.elem = None;
                    Ok(())
                } else {
                    Err(FilterError::NotFound(format!("matchall handle {h:#x}")))
                }
            }
            TpKind::Dsfield(t) => t.delete(h),
            TpKind::Basic(t) => t.delete(h),
        }
    }

    /// Deletes every filter.
    pub fn flush(&mut self) {
        self.tps.clear();
        self.u32 = U32Block::default();
    }

    /// True if any element names `class` as its result (a class in use cannot be deleted).
    pub fn references_class(&self, class: Handle) -> bool {
        self.u32.references_class(class)
            || self.tps.iter().any(|t| match &t.kind {
                TpKind::U32 { .. } => false,
                TpKind::Flow(_) => false, // flow computes classes; it does not hold a reference
                TpKind::Fw(f) => f.elems.iter().any(|e| e.classid == Some(class)),
                TpKind::Matchall(m) => m.elem.as_ref().is_some_and(|e| e.1.classid == Some(class)),
                TpKind::Dsfield(d) => d.elems.iter().any(|e| e.1.classid == Some(class)),
                TpKind::Basic(b) => b.elems.iter().any(|e| e.1.classid == Some(class)),
            })
    }

    /// Runs the filters (see the module docs).
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> TcfOutcome {
        let mut chain = 0u32;
        let mut restarts = 0u32;
        'chain: loop {
            let mut i = self.tps.partition_point(|t| t.chain < chain);
            while i < self.tps.len() && self.tps[i].chain == chain {
                let tp = &mut self.tps[i];
                i += 1;
                if !tp.protocol.matches(input.keys) {
                    continue;
                }
                let r = match &mut tp.kind {
                    TpKind::U32 { root } => self.u32.classify(*root, input, now),
                    TpKind::Flow(t) => t.classify(input, now),
                    TpKind::Fw(t) => t.classify(input, now),
                    TpKind::Matchall(t) => t.classify(input, now),
                    TpKind::Dsfield(t) => t.classify(input, now),
                    TpKind::Basic(t) => t.classify(input, now),
                };
                let Some((verdict, classid)) = r else {
                    continue;
                };
                match verdict {
                    Verdict::Ok | Verdict::Pipe | Verdict::Jump(_) => {
                        return TcfOutcome::Classified(FilterResult { classid })
                    }
                    Verdict::Drop => return TcfOutcome::Drop,
                    Verdict::Redirect(t) => return TcfOutcome::Redirect(t),
                    Verdict::Continue => continue,
                    Verdict::Reclassify | Verdict::GotoChain(_) => {
                        restarts += 1;
                        if restarts > MAX_RECLASSIFY {
                            return TcfOutcome::Drop;
                        }
                        chain = if let Verdict::GotoChain(n) = verdict { n } else { 0 };
                        continue 'chain;
                    }
                }
            }
            self.unmatched += 1;
            return TcfOutcome::NoMatch;
        }
    }
}
