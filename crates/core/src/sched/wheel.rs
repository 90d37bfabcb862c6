//! A hierarchical timing wheel of exact nanosecond deadlines for up to 2³² timers addressed by
//! index: O(1) insert, move and cancel, amortised O(1) expiry. A drop-in for the binary event heap
//! of a shaper whose classes wait for tokens (issue 7): the heap costs O(log N) per re-keyed class.
//!
//! Eleven levels of 64 slots (6 bits of the deadline each) with a `u64` occupancy mask per level,
//! as in tokio's `runtime/time/wheel`. A timer sits at the level of the highest bit in which its
//! deadline differs from the wheel's current time, so every timer of level `l` is due before every
//! timer of level `l + 1`; the earliest timer is in the first non-empty slot of the first
//! non-empty level. Level-0 slots are one nanosecond wide, so a timer never fires early: it
//! fires exactly at its deadline or, if polled late, at the first poll after it. Slots hold
//! intrusive doubly-linked lists of indices in an arena, so nothing allocates once the arena
//! has grown to the number of timers.

const LEVELS: usize = 11;
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    deadline: u64,
    prev: u32,
    next: u32,
    /// Level * 64 + slot, or `u16::MAX` when not scheduled.
    at: u16,
}

const ABSENT: u16 = u16::MAX;

/// The timing wheel. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct TimerWheel {
    /// Current time: no timer is due before it.
    elapsed: u64,
    occupied: [u64; LEVELS],
    heads: Vec<u32>,
    entries: Vec<Entry>,
    len: usize,
    /// No timer is due before this (a lower bound, refreshed when a poll finds nothing due), so
    /// that a poll with nothing due costs one comparison.
    quiet_until: u64,
}

impl Default for TimerWheel {
    fn default() -> Self {
        TimerWheel::new()
    }
}

impl TimerWheel {
    /// An empty wheel at time 0.
    pub fn new() -> TimerWheel {
        TimerWheel {
            elapsed: 0,
            occupied: [0; LEVELS],
            heads: Vec::new(),
            entries: Vec::new(),
            len: 0,
            quiet_until: u64::MAX,
        }
    }

    /// Makes room for timer indices below `n` (so that `insert` does not allocate).
    pub fn reserve(&mut self, n: usize) {
        if self.entries.len() < n {
            self.entries.resize(n, Entry { deadline: 0, prev: NONE, next: NONE, at: ABSENT });
        }
    }

    /// Number of scheduled timers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no timer is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The deadline of timer `id`, if scheduled.
    pub fn deadline(&self, id: u32) -> Option<u64> {
        self.entries.get(id as usize).filter(|e| e.at != ABSENT).map(|e| e.deadline)
    }

    /// Schedules timer `id` at `deadline` (ns), moving it if already scheduled. A deadline in the
    /// past is due at the next poll.
    pub fn insert(&mut self, id: u32, deadline: u64) {
        self.cancel(id);
        self.reserve(id as usize + 1);
        self.entries[id as usize].deadline = deadline;
        self.link(id);
        self.len += 1;
        self.quiet_until = self.quiet_until.min(deadline.max(self.elapsed));
    }

    /// Unschedules timer `id`; returns whether it was scheduled.
    pub fn cancel(&mut self, id: u32) -> bool {
        match self.entries.get(id as usize) {
            Some(e) if e.at != ABSENT => {
                self.unlink(id);
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// A time at or before the earliest deadline (exact when that timer is within 64 ns of the
    /// wheel's current time, otherwise the start of its slot). `None` if empty.
    pub fn next_wake(&self) -> Option<u64> {
        self.first_slot().map(|(_, _, start)| start)
    }

    /// The earliest deadline: exact when it lies in a level-0 slot or in a slot of at most
    /// `scan` timers (which are then scanned), otherwise the start of its slot, a lower bound
    /// (the wheel only sorts timers finely as they come near). `None` if empty.
    pub fn earliest(&self, scan: usize) -> Option<u64> {
        let (level, slot, start) = self.first_slot()?;
        if level == 0 {
            return Some(start);
        }
        let mut id = self.heads[level * 64 + slot];
        let mut min = u64::MAX;
        for _ in 0..scan {
            if id == NONE {
                return Some(min);
            }
            let e = &self.entries[id as usize];
            min = min.min(e.deadline.max(self.elapsed));
            id = e.next;
        }
        Some(if id == NONE { min } else { start })
    }

    /// Unschedules every timer.
    pub fn clear(&mut self) {
        for level in 0..LEVELS {
            let mut occ = self.occupied[level];
            while occ != 0 {
                let slot = occ.trailing_zeros() as usize;
                occ &= occ - 1;
                let mut id = self.heads[level * 64 + slot];
                while id != NONE {
                    let next = self.entries[id as usize].next;
                    self.entries[id as usize].at = ABSENT;
                    id = next;
                }
                self.heads[level * 64 + slot] = NONE;
            }
            self.occupied[level] = 0;
        }
        self.len = 0;
        self.quiet_until = u64::MAX;
    }

    /// Takes one timer due at or before `now`, with its deadline. Call until `None`.
    pub fn pop_expired(&mut self, now: u64) -> Option<(u64, u32)> {
        if now < self.quiet_until {
            return None;
        }
        loop {
            let Some((level, slot, start)) = self.first_slot() else {
                self.quiet_until = u64::MAX;
                return None;
            };
            if start > now {
                self.quiet_until = start;
                return None;
            }
            self.elapsed = self.elapsed.max(start);
            let head = self.heads[level * 64 + slot];
            if level == 0 {
                let d = self.entries[head as usize].deadline;
                self.unlink(head);
                self.len -= 1;
                return Some((d, head));
            }
            // Cascade: spread the slot over the lower levels, now that time has reached it.
            let mut id = head;
            while id != NONE {
                let next = self.entries[id as usize].next;
                self.unlink(id);
                self.link(id);
                id = next;
            }
        }
    }

    fn level_and_slot(&self, deadline: u64) -> (usize, usize) {
        let d = deadline.max(self.elapsed);
        let significant = 63 - ((self.elapsed ^ d) | 63).leading_zeros() as usize;
        let level = significant / 6;
        (level, ((d >> (6 * level)) & 63) as usize)
    }

    fn link(&mut self, id: u32) {
        if self.heads.is_empty() {
            // Allocated at the first timer: an idle wheel (one per nested HTB) costs nothing.
            self.heads = vec![NONE; LEVELS * 64];
        }
        let (level, slot) = self.level_and_slot(self.entries[id as usize].deadline);
        let k = level * 64 + slot;
        let head = self.heads[k];
        if head != NONE {
            self.entries[head as usize].prev = id;
        }
        let e = &mut self.entries[id as usize];
        e.prev = NONE;
        e.next = head;
        e.at = k as u16;
        self.heads[k] = id;
        self.occupied[level] |= 1 << slot;
    }

    fn unlink(&mut self, id: u32) {
        let e = self.entries[id as usize];
        let k = e.at as usize;
        if e.prev == NONE {
            self.heads[k] = e.next;
        } else {
            self.entries[e.prev as usize].next = e.next;
        }
        if e.next != NONE {
            self.entries[e.next as usize].prev = e.prev;
        }
        if self.heads[k] == NONE {
            self.occupied[k / 64] &= !(1 << (k % 64));
        }
        self.entries[id as usize].at = ABSENT;
    }

    /// The earliest non-empty slot: (level, slot, time its range starts).
    fn first_slot(&self) -> Option<(usize, usize, u64)> {
        for level in 0..LEVELS {
            let occ = self.occupied[level];
            if occ == 0 {
                continue;
            }
            let shift = 6 * level as u32;
            let cur = (self.elapsed >> shift) & 63;
            // Timers are never behind the current slot of their level (deadline >= elapsed and
            // the same higher bits), so the first set bit at or after `cur` is the earliest.
            let ahead = occ & (u64::MAX << cur);
            let slot = if ahead != 0 { ahead.trailing_zeros() } else { occ.trailing_zeros() } as u64;
            let block = if shift + 6 >= 64 { 0 } else { self.elapsed >> (shift + 6) << (shift + 6) };
            let start = (block | (slot << shift)).max(self.elapsed);
            return Some((level, slot as usize, start));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn fires_in_order_exactly_at_deadlines() {
        let mut w = TimerWheel::new();
        for (id, d) in [(0u32, 5_000_000u64), (1, 3), (2, 64), (3, 4096), (4, u64::MAX - 1), (5, 63)] {
            w.insert(id, d);
        }
        assert_eq!(w.pop_expired(2), None);
        let mut got = Vec::new();
        while let Some(x) = w.pop_expired(u64::MAX) {
            got.push(x);
        }
        assert_eq!(got, vec![(3, 1), (63, 5), (64, 2), (4096, 3), (5_000_000, 0), (u64::MAX - 1, 4)]);
        assert!(w.is_empty());
    }

    #[test]
    fn matches_an_ordered_set_under_random_operations() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut w = TimerWheel::new();
        let mut model: BTreeSet<(u64, u32)> = BTreeSet::new();
        let mut at: Vec<Option<u64>> = vec![None; 512];
        let mut now = 0u64;
        for _ in 0..200_000 {
            let id = (rng.next() % 512) as u32;
            match rng.next() % 4 {
                0 | 1 => {
                    let span = [10u64, 1_000, 100_000, 10_000_000_000][(rng.next() % 4) as usize];
                    let d = now + rng.next() % span;
                    if let Some(old) = at[id as usize].replace(d) {
                        model.remove(&(old, id));
                    }
                    model.insert((d, id));
                    w.insert(id, d);
                }
                2 => {
                    let was = at[id as usize].take();
                    if let Some(old) = was {
                        model.remove(&(old, id));
                    }
                    assert_eq!(w.cancel(id), was.is_some());
                }
                _ => {
                    now += rng.next() % 50_000;
                    while let Some((d, id)) = w.pop_expired(now) {
                        let first = model.pop_first().expect("model has it");
                        assert!(d <= now);
                        assert_eq!(first.0, d, "fired out of order");
                        // Equal deadlines may fire in any order.
                        if first.1 != id {
                            assert!(model.remove(&(d, id)));
                            model.insert(first);
                        }
                        at[id as usize] = None;
                    }
                    assert!(model.first().is_none_or(|&(d, _)| d > now), "a due timer did not fire");
                    if let (Some(wake), Some(&(d, _))) = (w.next_wake(), model.first()) {
                        assert!(wake <= d, "next_wake {wake} after the earliest deadline {d}");
                        let exact = w.earliest(usize::MAX).unwrap();
                        assert_eq!(exact, d.max(now), "earliest with a full scan is exact");
                        assert!(w.earliest(1).unwrap() <= d);
                    }
                }
            }
            assert_eq!(w.len(), model.len());
        }
    }
}
