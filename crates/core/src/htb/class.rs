//! Class storage: an arena of hot scheduling state addressed by `u32` index, with leaf- and
//! inner-only parts in side arenas and cold data (config, counters) kept apart.

use super::config::{ClassParams, HtbClassConfig, NUM_PRIO};
use crate::handle::Handle;
use crate::qdisc::Qdisc;
use crate::rate::WireSpec;

/// "No index".
pub(super) const NONE: u32 = u32::MAX;
/// Token units per byte: bit·ns, as in [`crate::rate`] (one ns at R bit/s earns R units).
pub(super) const UNITS_PER_BYTE: i128 = 8_000_000_000;

/// A class's mode, as in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum HtbMode {
    /// Over ceil: may not send, not even by borrowing.
    CantSend = 0,
    /// Over rate, under ceil: may send only with tokens borrowed from an ancestor.
    MayBorrow = 1,
    /// Under rate: may send on its own tokens.
    CanSend = 2,
}

/// One link of an intrusive doubly-linked list of class indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Link {
    pub prev: u32,
    pub next: u32,
}

impl Link {
    pub const EMPTY: Link = Link { prev: NONE, next: NONE };
}

/// A round-robin list (a kernel "row" or "feed") in classid order, with its DRR cursor.
/// `cursor == NONE` means "past the end", like the kernel's NULL `ptr`. `resume` is the classid
/// of the class that held a feed's cursor when it left (the kernel's `last_ptr_id`, `NONE` if
/// unset): until the cursor is used, it points at the first class whose classid is at least that
/// one, so the class gets its turn back if it returns in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct List {
    pub first: u32,
    pub last: u32,
    pub cursor: u32,
    pub resume: u32,
}

impl List {
    pub const EMPTY: List = List { first: NONE, last: NONE, cursor: NONE, resume: NONE };
}

/// Hot per-class scheduling state.
#[derive(Debug)]
pub(super) struct Class {
    /// Rate tokens in bit·ns (may be negative).
    pub tokens: i128,
    /// Ceil tokens in bit·ns.
    pub ctokens: i128,
    /// Rate bucket size in bit·ns.
    pub buffer: i128,
    /// Ceil bucket size in bit·ns.
    pub cbuffer: i128,
    /// Last time the tokens were brought up to date (the kernel's `t_c`), ns.
    pub t_c: u64,
    /// Rate in bit/s.
    pub rate: u64,
    /// Ceil in bit/s.
    pub ceil: u64,
    pub parent: u32,
    /// Distance from the root (root classes have depth 0).
    pub depth: u32,
    pub children: u32,
    /// Index into `leaves` or `inners`.
    pub ext: u32,
    pub quantum: u32,
    /// A leaf's membership in its row or parent's feed (at `aprio`).
    pub link: Link,
    pub wire: WireSpec,
    pub mode: HtbMode,
    pub prio: u8,
    /// Priority the leaf was activated with.
    pub aprio: u8,
    /// Bit p set = the class takes part in priority p (leaf: backlogged; inner: a feed is non-empty).
    pub activity: u8,
    pub leaf: bool,
}

/// Leaf-only state.
pub(super) struct LeafData {
    pub qdisc: Box<dyn Qdisc>,
    /// DRR deficit per lending row (index 0: own row; 1 + d: ancestor at depth d).
    pub deficit: Vec<i64>,
}

/// Inner-only state.
#[derive(Debug)]
pub(super) struct InnerData {
    pub feed: [List; NUM_PRIO as usize],
    pub links: [Link; NUM_PRIO as usize],
}

impl InnerData {
    pub fn new() -> InnerData {
        InnerData { feed: [List::EMPTY; NUM_PRIO as usize], links: [Link::EMPTY; NUM_PRIO as usize] }
    }
}

/// Cold per-class data: identity, configuration and counters.
#[derive(Clone, Debug)]
pub(super) struct ClassCold {
    pub classid: Handle,
    pub config: HtbClassConfig,
    pub params: ClassParams,
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub lends: u64,
    pub borrows: u64,
}

/// Counters and state of one class, as `tc -s class show` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HtbClassStats {
    /// Bytes sent by the class (a leaf's, or all of an inner class's descendants').
    pub bytes: u64,
    /// Packets sent (GSO packets count their segments).
    pub packets: u64,
    /// Packets dropped by the leaf's qdisc (refused at enqueue or dropped by it later).
    pub drops: u64,
    /// Times the class went over its ceil (entered CANT_SEND).
    pub overlimits: u64,
    /// Bytes queued in the leaf.
    pub backlog: u64,
    /// Packets queued in the leaf.
    pub qlen: u64,
    /// Packets this class sent on its own rate tokens (for a leaf) or lent to a descendant.
    pub lends: u64,
    /// Packets this class sent (or relayed) with tokens borrowed from an ancestor.
    pub borrows: u64,
    /// Always 0: the kernel stopped counting giants when it dropped rate tables.
    pub giants: u64,
    /// Rate tokens at the last update, in psched ticks (64 ns of transmission at `rate`), clamped
    /// to `i32` like the kernel's xstats.
    pub tokens: i32,
    /// Ceil tokens at the last update, in psched ticks.
    pub ctokens: i32,
    /// Mode at the last update.
    pub mode: Option<HtbMode>,
}

/// One class, as listed by [`super::Htb::classes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    /// `major:minor`.
    pub classid: Handle,
    /// The parent class, or the qdisc handle (`major:0`) for a root class.
    pub parent: Handle,
    /// The configuration as given.
    pub config: HtbClassConfig,
    /// The effective parameters after defaults.
    pub params: ClassParams,
    /// Kernel-style level: 0 for leaves; inner classes count down from 7 at the root
    /// (from `depth_of_deepest_inner + 1` when the tree is deeper than the kernel allows).
    pub level: u32,
    /// Distance from the root (root classes are at 0).
    pub depth: u32,
    /// True for leaf classes (those with a qdisc).
    pub is_leaf: bool,
}

/// Transmission time in ns of `units` bit·ns at `rate` bit/s, floored (the kernel's ns tokens).
pub(super) fn units_to_ns(units: i128, rate: u64) -> i64 {
    if rate == 0 {
        return 0;
    }
    units.div_euclid(rate as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// ns → psched ticks (arithmetic shift by 6, as `PSCHED_NS2TICKS`), clamped to `i32`.
pub(super) fn ns_to_ticks(ns: i64) -> i32 {
    (ns >> 6).clamp(i32::MIN as i64, i32::MAX as i64) as i32
}
