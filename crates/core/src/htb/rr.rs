//! A round-robin list (a kernel "row" or "feed"): the set of active members as ranks in a
//! hierarchical bitmap, and the DRR cursor. Members are served in rank order, a fixed order of
//! the classes (see the module docs of [`super`]), so a class that leaves and comes back finds
//! its place again, which is what keeps the excess shared by quantum.
//!
//! `cursor == NONE` means "past the end", like the kernel's NULL `ptr`. `resume` is the rank of
//! the class that held a feed's cursor when it left (the kernel's `last_ptr_id`, `NONE` if
//! unset): until the cursor is used again it points at the first member at or after that rank,
//! so the class gets its turn back if it returns in time.

use super::class::NONE;
use crate::sched::bitmap::RankSet;

#[derive(Clone, Debug)]
pub(super) struct RrList {
    members: RankSet,
    pub cursor: u32,
    pub resume: u32,
}

impl Default for RrList {
    fn default() -> Self {
        RrList { members: RankSet::default(), cursor: NONE, resume: NONE }
    }
}

impl RrList {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    #[inline]
    pub fn first(&self) -> u32 {
        self.members.first().unwrap_or(NONE)
    }

    /// Adds `rank`, growing the bitmap to `room` if needed (only the first time a list is used
    /// past its size, never in steady state). `is_feed` applies the `last_ptr_id` rule.
    #[inline]
    pub fn push(&mut self, rank: u32, room: u32) {
        if rank >= self.members.capacity() {
            self.members.grow(room.max(rank + 1));
        }
        self.members.insert(rank);
        if self.resume != NONE && rank >= self.resume && (self.cursor == NONE || rank < self.cursor) {
            self.cursor = rank;
        }
    }

    /// Removes `rank`. If the cursor was on it, the cursor moves to the next member; a feed also
    /// remembers the rank (only the first time: the kernel's pointer is NULL from then on).
    #[inline]
    pub fn remove(&mut self, rank: u32, is_feed: bool) {
        self.members.remove(rank);
        if self.cursor == rank {
            self.cursor = self.members.next_from(rank).unwrap_or(NONE);
            if is_feed && self.resume == NONE {
                self.resume = rank;
            }
        }
    }

    /// Moves the cursor one member on (to "past the end" after the last).
    #[inline]
    pub fn advance(&mut self) {
        if self.cursor != NONE {
            self.cursor = self.members.next_from(self.cursor + 1).unwrap_or(NONE);
        }
    }

    /// Moves member `from` to rank `to` (a sibling took another place), keeping cursor and
    /// resume on it.
    pub fn renumber(&mut self, from: u32, to: u32, room: u32) {
        if self.members.contains(from) {
            self.members.remove(from);
            if to >= self.members.capacity() {
                self.members.grow(room.max(to + 1));
            }
            self.members.insert(to);
        }
        if self.cursor == from {
            self.cursor = to;
        }
        if self.resume == from {
            self.resume = to;
        }
    }

    pub fn clear(&mut self) {
        self.members.clear();
        self.cursor = NONE;
        self.resume = NONE;
    }
}
