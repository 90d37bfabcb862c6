//! The flow classifier (kernel `cls_flow.c`, tc-flow(8)): a class from selected header fields,
//! either one field mapped arithmetically (`map`) or several hashed (`hash`).
//!
//! `classid = baseclass.major : (baseclass.minor + v) mod 2¹⁶`, where `v` is
//! - map mode: `(((key & and) ^ xor) >> rshift) + addend`, then `% divisor` if a divisor is set;
//! - hash mode: a keyed hash of the selected keys (in key-number order, as the kernel), then
//!   `% divisor` if set. The key of the hash changes every `perturb` period when one is set
//!   (periods are aligned to multiples of `perturb` on the caller's clock).
//!
//! Deviations from the kernel, on purpose:
//! - **proto-src / proto-dst are 0 for protocols without ports** (ICMP, IPIP, ...). The kernel
//!   returns a value derived from the local socket or the route cache entry, and since Linux keeps
//!   one route entry per (destination, TOS), ICMP flows with different TOS values were hashed apart
//!   (seed 003). [`FlowConfig::legacy_proto_ports`] emulates that: proto-dst of a portless packet
//!   becomes a fold of (destination, TOS bits) xor the byte-swapped EtherType.
//! - **Tunnel keys** (seed 003): `tunnel-src`, `tunnel-dst`, `tunnel-proto`, `tunnel-proto-src`,
//!   `tunnel-proto-dst` read the inner header of an IPIP/6in4/4in6/6in6/GRE packet and fall back to
//!   the outer header when there is no tunnel. The plain keys always read the outer header.
//! - In hash mode an IPv6 address contributes all 128 bits (the kernel hashes only the last 32);
//!   map mode uses the last 32 bits, as the kernel does.
//! - Keys that need kernel state behave as for a forwarded packet without conntrack, routing realm
//!   or local socket: `nfct`, `rt-classid`, `sk-uid`, `sk-gid` are 0, and `nfct-src`, `nfct-dst`,
//!   `nfct-proto-src`, `nfct-proto-dst` fall back to `src`, `dst`, `proto-src`, `proto-dst` (the
//!   kernel's own fallback without a conntrack entry).
//! - The hash is Sluice's own (see [`hash_words`]), not jhash: bucket numbers differ from Linux.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::flow_keys::HeaderKeys;
use crate::handle::Handle;
use crate::time::{Span, Time};
use std::fmt;
use std::net::IpAddr;

/// A flow key, numbered as in the kernel (`FLOW_KEY_*`); the tunnel keys follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs)] // the tc names say it all
pub enum FlowKey {
    Src = 0,
    Dst,
    Proto,
    ProtoSrc,
    ProtoDst,
    Iif,
    Priority,
    Mark,
    Nfct,
    NfctSrc,
    NfctDst,
    NfctProtoSrc,
    NfctProtoDst,
    RtClassid,
    SkUid,
    SkGid,
    VlanTag,
    Rxhash,
    TunnelSrc,
    TunnelDst,
    TunnelProto,
    TunnelProtoSrc,
    TunnelProtoDst,
}

const ALL_KEYS: [FlowKey; 23] = [
    FlowKey::Src,
    FlowKey::Dst,
    FlowKey::Proto,
    FlowKey::ProtoSrc,
    FlowKey::ProtoDst,
    FlowKey::Iif,
    FlowKey::Priority,
    FlowKey::Mark,
    FlowKey::Nfct,
    FlowKey::NfctSrc,
    FlowKey::NfctDst,
    FlowKey::NfctProtoSrc,
    FlowKey::NfctProtoDst,
    FlowKey::RtClassid,
    FlowKey::SkUid,
    FlowKey::SkGid,
    FlowKey::VlanTag,
    FlowKey::Rxhash,
    FlowKey::TunnelSrc,
    FlowKey::TunnelDst,
    FlowKey::TunnelProto,
    FlowKey::TunnelProtoSrc,
    FlowKey::TunnelProtoDst,
];

impl FlowKey {
    /// Every key, in key-number order.
    pub fn all() -> &'static [FlowKey] {
        &ALL_KEYS
    }

    /// tc's name of the key.
    pub fn name(self) -> &'static str {
        match self {
            FlowKey::Src => "src",
            FlowKey::Dst => "dst",
            FlowKey::Proto => "proto",
            FlowKey::ProtoSrc => "proto-src",
            FlowKey::ProtoDst => "proto-dst",
            FlowKey::Iif => "iif",
            FlowKey::Priority => "priority",
            FlowKey::Mark => "mark",
            FlowKey::Nfct => "nfct",
            FlowKey::NfctSrc => "nfct-src",
            FlowKey::NfctDst => "nfct-dst",
            FlowKey::NfctProtoSrc => "nfct-proto-src",
            FlowKey::NfctProtoDst => "nfct-proto-dst",
            FlowKey::RtClassid => "rt-classid",
            FlowKey::SkUid => "sk-uid",
            FlowKey::SkGid => "sk-gid",
            FlowKey::VlanTag => "vlan-tag",
            FlowKey::Rxhash => "rxhash",
            FlowKey::TunnelSrc => "tunnel-src",
            FlowKey::TunnelDst => "tunnel-dst",
            FlowKey::TunnelProto => "tunnel-proto",
            FlowKey::TunnelProtoSrc => "tunnel-proto-src",
            FlowKey::TunnelProtoDst => "tunnel-proto-dst",
        }
    }

    /// Parses tc's name.
    pub fn parse(name: &str) -> Option<FlowKey> {
        ALL_KEYS.iter().copied().find(|k| k.name() == name)
    }

    /// Parses a comma-separated key list (`src,dst,proto`) into a key mask.
    pub fn parse_list(list: &str) -> Result<u32, FilterError> {
        let mut mask = 0u32;
        for name in list.split(',') {
            let k = FlowKey::parse(name)
                .ok_or_else(|| FilterError::invalid("flow", "keys", format!("unknown key \"{name}\"")))?;
            mask |= 1 << k as u32;
        }
        Ok(mask)
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `map` or `hash`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FlowMode {
    /// One key, mapped with and/xor/rshift/addend.
    #[default]
    Map,
    /// Several keys, hashed.
    Hash,
}

/// What a flow filter is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowConfig {
    /// Mode.
    pub mode: FlowMode,
    /// Selected keys as a bit mask (bit = key number); see [`FlowKey::parse_list`].
    pub keys: u32,
    /// `and` (map mode): mask applied first. `or V` is `and !V` plus `xor V`.
    pub and: u32,
    /// `xor` (map mode).
    pub xor: u32,
    /// `rshift` (map mode), below 32.
    pub rshift: u8,
    /// `addend` (map mode).
    pub addend: u32,
    /// `divisor` (0 = none).
    pub divisor: u32,
    /// `baseclass`: `None` is `QDISC_MAJOR:1`; a major of 0 means the qdisc's major.
    pub baseclass: Option<Handle>,
    /// `perturb` (hash mode): rekey the hash every period.
    pub perturb: Option<Span>,
    /// The hash key (the kernel draws one at random; Sluice is deterministic).
    pub seed: u32,
    /// Kernel behaviour for proto-src/proto-dst of portless protocols (see the module docs).
    pub legacy_proto_ports: bool,
    /// Actions.
    pub actions: Actions,
    /// Native configurations: `baseclass.minor + v` keeps all 32 bits (tc's grammar and the
    /// kernel keep 16, unless the base class is already wide).
    pub wide: bool,
}

impl Default for FlowConfig {
    fn default() -> FlowConfig {
        FlowConfig {
            mode: FlowMode::Map,
            keys: 0,
            and: u32::MAX,
            xor: 0,
            rshift: 0,
            addend: 0,
            divisor: 0,
            baseclass: None,
            perturb: None,
            seed: 0x5eed_f10e,
            legacy_proto_ports: false,
            actions: Actions::none(),
            wide: false,
        }
    }
}

impl FlowConfig {
    /// A hash-mode filter over `keys` (e.g. `"src"`), with a divisor and base class.
    pub fn hash(keys: &str, divisor: u32, baseclass: Option<Handle>) -> Result<FlowConfig, FilterError> {
        Ok(FlowConfig {
            mode: FlowMode::Hash,
            keys: FlowKey::parse_list(keys)?,
            divisor,
            baseclass,
            ..FlowConfig::default()
        })
    }

    /// A map-mode filter over one key.
    pub fn map(key: FlowKey) -> FlowConfig {
        FlowConfig { mode: FlowMode::Map, keys: 1 << key as u32, ..FlowConfig::default() }
    }

    /// The selected keys, in key-number order.
    pub fn key_list(&self) -> impl Iterator<Item = FlowKey> + '_ {
        ALL_KEYS.iter().copied().filter(|k| self.keys & (1 << *k as u32) != 0)
    }

    /// `or V` in tc's terms.
    pub fn set_or(&mut self, v: u32) {
        self.and = !v;
        self.xor = v;
    }

    fn validate(&self) -> Result<(), FilterError> {
        let bad = |what, reason: &str| Err(FilterError::invalid("flow", what, reason));
        if self.keys == 0 {
            return bad("keys", "at least one key is required");
        }
        if self.keys >> ALL_KEYS.len() != 0 {
            return bad("keys", "unknown key number");
        }
        if self.mode == FlowMode::Map && self.keys.count_ones() != 1 {
            return bad("keys", "map mode takes exactly one key");
        }
        if self.mode == FlowMode::Map && self.perturb.is_some() {
            return bad("perturb", "only valid in hash mode");
        }
        if self.perturb.is_some_and(|p| p.as_nanos() == 0) {
            return bad("perturb", "must be positive");
        }
        if self.rshift >= 32 {
            return bad("rshift", "must be below 32");
        }
        if self.baseclass.is_some_and(|b| b.minor() == 0) {
            return bad("baseclass", "the minor number must not be 0");
        }
        Ok(())
    }
}

/// Sluice's flow hash: a keyed multiply-xorshift over 32-bit words with a 64-bit finaliser
/// (splitmix64). Good avalanche, no allocation, a handful of instructions per word.
pub fn hash_words(seed: u32, words: &[u32]) -> u32 {
    let mut h = WordHasher::new(seed);
    for &w in words {
        h.push(w);
    }
    h.finish()
}

/// The streaming form of [`hash_words`].
#[derive(Clone, Copy, Debug)]
pub struct WordHasher {
    h: u64,
    n: u64,
}

impl WordHasher {
    /// Starts a hash with a key.
    pub fn new(seed: u32) -> WordHasher {
        WordHasher { h: (seed as u64) << 32 ^ 0x9E37_79B9_7F4A_7C15, n: 0 }
    }
    /// Feeds one word.
    pub fn push(&mut self, w: u32) {
        self.h = (self.h ^ w as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        self.h ^= self.h >> 31;
        self.n += 1;
    }
    /// The 32-bit result.
    pub fn finish(self) -> u32 {
        let mut h = self.h ^ self.n;
        h ^= h >> 30;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
        (h ^ (h >> 32)) as u32
    }
}

/// Where key words go: the hasher (hash mode) or the first word only (map mode).
trait Sink {
    fn push(&mut self, w: u32);
}

impl Sink for WordHasher {
    fn push(&mut self, w: u32) {
        WordHasher::push(self, w)
    }
}

struct First(Option<u32>);

impl Sink for First {
    fn push(&mut self, w: u32) {
        self.0.get_or_insert(w);
    }
}

/// One flow filter element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowFilter {
    /// Handle.
    pub handle: u32,
    /// Configuration, with `baseclass` resolved.
    pub cfg: FlowConfig,
    /// Packets classified by it.
    pub hits: u64,
}

/// Words of one address: the last 32 bits (map) or all of it (hash).
fn addr_words(a: IpAddr, full: bool, out: &mut impl Sink) {
    match a {
        IpAddr::V4(v4) => out.push(u32::from(v4)),
        IpAddr::V6(v6) => {
            let o = v6.octets();
            let start = if full { 0 } else { 3 };
            for i in start..4 {
                out.push(u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]));
            }
        }
    }
}

impl FlowFilter {
    fn key_words(&self, key: FlowKey, input: &ClassifyInput<'_>, full: bool, out: &mut impl Sink) {
        let keys = input.keys;
        let hdr = |tunnel: bool| -> Option<&HeaderKeys> {
            if tunnel {
                keys.innermost()
            } else {
                keys.outer.as_ref()
            }
        };
        let tunnel = matches!(
            key,
            FlowKey::TunnelSrc
                | FlowKey::TunnelDst
                | FlowKey::TunnelProto
                | FlowKey::TunnelProtoSrc
                | FlowKey::TunnelProtoDst
        );
        let v = match key {
            FlowKey::Src | FlowKey::NfctSrc | FlowKey::TunnelSrc => match hdr(tunnel) {
                Some(h) => return addr_words(h.src, full, out),
                None => 0,
            },
            FlowKey::Dst | FlowKey::NfctDst | FlowKey::TunnelDst => match hdr(tunnel) {
                Some(h) => return addr_words(h.dst, full, out),
                None if self.cfg.legacy_proto_ports => (keys.ethertype.swap_bytes()) as u32,
                None => 0,
            },
            FlowKey::Proto | FlowKey::TunnelProto => hdr(tunnel).map_or(0, |h| h.proto as u32),
            FlowKey::ProtoSrc | FlowKey::NfctProtoSrc | FlowKey::TunnelProtoSrc => {
                hdr(tunnel).map_or(0, |h| h.src_port as u32)
            }
            FlowKey::ProtoDst | FlowKey::NfctProtoDst | FlowKey::TunnelProtoDst => {
                match hdr(tunnel) {
                    Some(h) if self.cfg.legacy_proto_ports && h.src_port == 0 && h.dst_port == 0 => {
                        // The kernel's value: the route cache entry (one per destination and TOS)
                        // folded to 32 bits, xor the EtherType as stored in the skb.
                        let mut w = WordHasher::new(0x0d57_e417);
                        addr_words(h.dst, true, &mut w);
                        w.push((h.dsfield & 0x1E) as u32);
                        w.finish() ^ keys.ethertype.swap_bytes() as u32
                    }
                    Some(h) => h.dst_port as u32,
                    None => 0,
                }
            }
            FlowKey::Iif => keys.iif,
            FlowKey::Priority => input.priority(),
            FlowKey::Mark => input.mark(),
            FlowKey::Nfct | FlowKey::RtClassid | FlowKey::SkUid | FlowKey::SkGid => 0,
            FlowKey::VlanTag => keys.vlan_tci.map_or(0, |t| (t & 0x0FFF) as u32),
            FlowKey::Rxhash => input.pkt.flow_hash,
        };
        out.push(v);
    }

    /// The class this filter computes for a packet (before actions).
    pub fn compute(&self, input: &ClassifyInput<'_>, now: Time) -> Handle {
        let c = &self.cfg;
        let mut v = match c.mode {
            FlowMode::Map => {
                let key = ALL_KEYS[c.keys.trailing_zeros().min(ALL_KEYS.len() as u32 - 1) as usize];
                let mut first = First(None);
                self.key_words(key, input, false, &mut first);
                let k = first.0.unwrap_or(0);
                ((k & c.and) ^ c.xor).checked_shr(c.rshift as u32).unwrap_or(0).wrapping_add(c.addend)
            }
            FlowMode::Hash => {
                let seed = match c.perturb {
                    Some(p) => {
                        let epoch = now.as_nanos() / p.as_nanos().max(1);
                        hash_words(c.seed, &[epoch as u32, (epoch >> 32) as u32])
                    }
                    None => c.seed,
                };
                let mut hasher = WordHasher::new(seed);
                let mut bits = c.keys;
                while bits != 0 {
                    let k = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(key) = ALL_KEYS.get(k) {
                        self.key_words(*key, input, true, &mut hasher);
                    }
                }
                hasher.finish()
            }
        };
        if c.divisor != 0 {
            v %= c.divisor;
        }
        let base = c.baseclass.unwrap_or(Handle::new(0, 1));
        // The kernel's TC_H_MAKE keeps 16 bits of the sum; a wide (native) base class keeps 32.
        let minor = base.minor().wrapping_add(v);
        let minor = if c.wide || base.minor() > Handle::TC_MAX_MINOR { minor } else { minor & 0xFFFF };
        Handle::new(base.major(), minor)
    }
}

/// A flow priority: its elements in insertion order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowTp {
    /// Elements.
    pub elems: Vec<FlowFilter>,
}

impl FlowTp {
    /// Adds, replaces or changes an element. `qdisc_major` resolves the default base class.
    pub fn apply(
        &mut self,
        handle: Option<u32>,
        mut cfg: FlowConfig,
        qdisc_major: u16,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        cfg.validate()?;
        let base = cfg.baseclass.unwrap_or(Handle::new(0, 1));
        cfg.baseclass = Some(if base.major() == 0 { Handle::new(qdisc_major, base.minor()) } else { base });
        let h = match handle.filter(|h| *h != 0) {
            Some(h) => h,
            None => self.elems.iter().map(|e| e.handle).max().unwrap_or(0) + 1,
        };
        match self.elems.iter_mut().find(|e| e.handle == h) {
            Some(e) if replace || must_exist => e.cfg = cfg,
            Some(_) => return Err(FilterError::Exists(format!("flow filter handle {h:#x} already exists"))),
            None if must_exist => return Err(FilterError::NotFound(format!("flow filter handle {h:#x}"))),
            None => self.elems.push(FlowFilter { handle: h, cfg, hits: 0 }),
        }
        Ok(h)
    }

    /// Deletes one element.
    pub fn delete(&mut self, handle: u32) -> Result<(), FilterError> {
        let p = self
            .elems
            .iter()
            .position(|e| e.handle == handle)
            .ok_or_else(|| FilterError::NotFound(format!("flow filter handle {handle:#x}")))?;
        self.elems.remove(p);
        Ok(())
    }

    /// Classifies: the first element whose actions do not say `continue` decides.
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        for e in self.elems.iter_mut() {
            let class = e.compute(input, now);
            let v = e.cfg.actions.run(input, now);
            if v != Verdict::Continue {
                e.hits += 1;
                return Some((v, class));
            }
        }
        None
    }
}
