//! Class storage: an arena of one-cache-line hot states addressed by `u32` index, with leaf- and
//! inner-only parts in side arenas, configuration in shared plans and `tc -s` counters apart.

use super::config::{ClassParams, HtbClassConfig};
use crate::handle::Handle;

/// "No index".
pub(super) const NONE: u32 = u32::MAX;

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

/// Hot per-class state: everything a packet touches in the leaf and each ancestor, in one cache
/// line. Tokens are in the units of the class's [`super::plan::Bucket`]s.
#[derive(Clone, Debug)]
#[repr(align(64))]
pub(super) struct Class {
    pub tokens: i64,
    pub ctokens: i64,
    /// Last time the tokens were brought up to date (the kernel's `t_c`), ns.
    pub t_c: u64,
    /// Bytes sent (a leaf's own, or all of an inner class's descendants').
    pub bytes: u64,
    pub parent: u32,
    /// Index into the plans.
    pub plan: u32,
    /// Index into the inner slots (inner class; `NONE` for a leaf, whose queue slot is its own
    /// arena index).
    pub ext: u32,
    /// Position among the parent's children: the class's bit in the parent's feeds.
    pub srank: u32,
    pub lends: u32,
    pub borrows: u32,
    /// The class's timer in the wait queue while it waits (stale otherwise, see `waitq`).
    pub timer: u32,
    /// Distance from the root (root classes have depth 0).
    pub depth: u8,
    pub mode: HtbMode,
    /// Bit p set = the class takes part in priority p (leaf: backlogged; inner: a feed is non-empty).
    pub activity: u8,
    /// [`LEAF`] and [`PARKED`] (two flags in one byte keep the 32-bit minor in the cache line).
    pub flags: u8,
}

/// `Class::flags`: a leaf (has a queue), not an inner class.
pub(super) const LEAF: u8 = 1;
/// `Class::flags`: a leaf whose qdisc is throttled, out of the rows until its wake-up (see `park`).
pub(super) const PARKED: u8 = 2;

impl Class {
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.flags & LEAF != 0
    }
    #[inline]
    pub fn is_parked(&self) -> bool {
        self.flags & PARKED != 0
    }
    #[inline]
    pub fn set_flag(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }
}

// A packet touches one cache line per class on its path.
const _: () = assert!(size_of::<Class>() == 64);

/// Per-class counters read only by `tc -s`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ClassCold {
    /// Packets sent; a leaf adds the counter in its queue slot (`Leaves::sent`), which a packet
    /// touches anyway.
    pub packets: u64,
    pub drops: u32,
    pub overlimits: u32,
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

/// ns → psched ticks (arithmetic shift by 6, as `PSCHED_NS2TICKS`), clamped to `i32`.
pub(super) fn ns_to_ticks(ns: i64) -> i32 {
    (ns >> 6).clamp(i32::MIN as i64, i32::MAX as i64) as i32
}
