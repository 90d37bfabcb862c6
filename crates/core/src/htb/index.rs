//! Class minor → arena index, in O(1) for any 32-bit minor.
//!
//! Generated trees create their classes in classid order with consecutive minors (`1:1` …
//! `1:f4240`): while every class so far has arena index `i0 + (minor - m0)`, the index is that
//! formula alone, with no table and no memory access per lookup. Otherwise the usual form is a
//! direct table over the minors in use, `[base, base + len)`: one load per lookup and 4 bytes per
//! slot. A sparse numbering (a few classes spread over the 32-bit space) would make that table
//! huge, so when the span of minors exceeds [`SPARSE_ABOVE`] slots per class (plus a fixed
//! allowance) the index becomes a hash map, and turns back into a table once the classes fill
//! the span again ([`DENSE_BELOW`]; the gap between the two thresholds keeps a tree that hovers
//! near the limit from converting back and forth). Nothing here runs per packet except
//! [`MinorIndex::get`].

use super::class::NONE;

/// A table may have this many slots per class (plus [`SLACK`]) before it turns into a map.
const SPARSE_ABOVE: u64 = 4;
/// A map turns back into a table when the span is at most this many slots per class (+ [`SLACK`]).
const DENSE_BELOW: u64 = 2;
/// Slots a table may always have (16 KiB), so small trees with scattered minors stay tables.
const SLACK: u64 = 4096;

type Map = crate::sched::FastMap<u32, u32>;

#[derive(Debug)]
enum Repr {
    /// Minors `m0..m0 + n` are arena indices `i0..i0 + n`.
    Linear {
        m0: u32,
        i0: u32,
        n: u32,
    },
    /// `slots[m - base]` is the index of minor `m`, or `NONE`.
    Dense {
        base: u32,
        slots: Vec<u32>,
    },
    Sparse(Map),
}

/// See the [module docs](self).
#[derive(Debug)]
pub(super) struct MinorIndex {
    repr: Repr,
    len: usize,
    /// Bounds of the minors inserted so far (not narrowed by removals).
    lo: u32,
    hi: u32,
}

impl Default for MinorIndex {
    fn default() -> Self {
        MinorIndex { repr: Repr::Linear { m0: 0, i0: 0, n: 0 }, len: 0, lo: u32::MAX, hi: 0 }
    }
}

fn fits(span: u64, classes: usize, per_class: u64) -> bool {
    span <= per_class * classes as u64 + SLACK
}

impl MinorIndex {
    /// The arena index of `minor`.
    #[inline]
    pub fn get(&self, minor: u32) -> Option<u32> {
        match &self.repr {
            Repr::Linear { m0, i0, n } => {
                let k = minor.wrapping_sub(*m0);
                (k < *n).then(|| i0 + k)
            }
            Repr::Dense { base, slots } => {
                let i = (minor as u64).wrapping_sub(*base as u64);
                slots.get(i as usize).copied().filter(|&c| c != NONE)
            }
            Repr::Sparse(map) => map.get(&minor).copied(),
        }
    }

    /// Number of minors held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a sparse (hash map) index.
    #[cfg(test)]
    pub fn is_sparse(&self) -> bool {
        matches!(self.repr, Repr::Sparse(_))
    }

    /// True while the index is a formula (no table).
    #[cfg(test)]
    pub fn is_linear(&self) -> bool {
        matches!(self.repr, Repr::Linear { .. })
    }

    /// Adds `minor` → `idx`; `minor` must not be present.
    pub fn insert(&mut self, minor: u32, idx: u32) {
        debug_assert!(self.get(minor).is_none());
        self.lo = self.lo.min(minor);
        self.hi = self.hi.max(minor);
        self.len += 1;
        let span = self.hi as u64 - self.lo as u64 + 1;
        if let Repr::Linear { m0, i0, n } = &mut self.repr {
            if *n == 0 {
                (*m0, *i0, *n) = (minor, idx, 1);
                return;
            }
            if Some(minor) == m0.checked_add(*n) && Some(idx) == i0.checked_add(*n) {
                *n += 1;
                return;
            }
            // The bounds and count include `minor` already: a table if it is compact enough.
            if fits(span, self.len, SPARSE_ABOVE) {
                self.make_dense();
            } else {
                self.make_sparse();
            }
        }
        match &mut self.repr {
            Repr::Linear { .. } => unreachable!("made dense above"),
            Repr::Dense { base, slots } if slots.is_empty() => {
                *base = minor;
                slots.push(idx);
            }
            Repr::Dense { base, slots } => {
                let (b, end) = (*base as u64, *base as u64 + slots.len() as u64);
                let m = minor as u64;
                if (b..end).contains(&m) {
                    slots[(m - b) as usize] = idx;
                } else if !fits(end.max(m + 1) - b.min(m), self.len, SPARSE_ABOVE) {
                    self.make_sparse();
                    self.insert_sparse(minor, idx);
                } else if m >= end {
                    slots.resize((m - b) as usize + 1, NONE);
                    slots[(m - b) as usize] = idx;
                } else {
                    // Below the table: grow at the front with headroom (as much again as the
                    // table holds, within the limit), so descending inserts stay amortised O(1).
                    let limit = SPARSE_ABOVE * self.len as u64 + SLACK;
                    let room = (slots.len() as u64).min(limit - (end - m)).min(m);
                    let new_base = m - room;
                    let mut grown = vec![NONE; (b - new_base) as usize];
                    grown.reserve_exact(slots.len());
                    grown.extend_from_slice(slots);
                    *slots = grown;
                    *base = new_base as u32;
                    slots[room as usize] = idx;
                }
            }
            Repr::Sparse(map) => {
                map.insert(minor, idx);
                if fits(span, self.len, DENSE_BELOW) {
                    self.make_dense();
                }
            }
        }
    }

    fn insert_sparse(&mut self, minor: u32, idx: u32) {
        if let Repr::Sparse(map) = &mut self.repr {
            map.insert(minor, idx);
        }
    }

    /// Removes `minor` (no-op if absent).
    pub fn remove(&mut self, minor: u32) {
        if matches!(self.repr, Repr::Linear { .. }) {
            self.make_dense();
        }
        let gone = match &mut self.repr {
            Repr::Linear { .. } => false,
            Repr::Dense { base, slots } => {
                match slots.get_mut((minor as u64).wrapping_sub(*base as u64) as usize) {
                    Some(s) if *s != NONE => {
                        *s = NONE;
                        true
                    }
                    _ => false,
                }
            }
            Repr::Sparse(map) => map.remove(&minor).is_some(),
        };
        if gone {
            self.len -= 1;
        }
    }

    fn make_sparse(&mut self) {
        let mut map = Map::with_capacity_and_hasher(self.len, Default::default());
        map.extend(self.entries());
        self.repr = Repr::Sparse(map);
    }

    fn make_dense(&mut self) {
        let mut slots = vec![NONE; (self.hi - self.lo) as usize + 1];
        for (m, i) in self.entries() {
            slots[(m - self.lo) as usize] = i;
        }
        self.repr = Repr::Dense { base: self.lo, slots };
    }

    /// `(minor, index)` pairs in no particular order.
    fn entries(&self) -> Vec<(u32, u32)> {
        match &self.repr {
            Repr::Linear { m0, i0, n } => (0..*n).map(|k| (m0 + k, i0 + k)).collect(),
            Repr::Dense { base, slots } => slots
                .iter()
                .enumerate()
                .filter(|(_, &c)| c != NONE)
                .map(|(k, &c)| (*base + k as u32, c))
                .collect(),
            Repr::Sparse(map) => map.iter().map(|(&m, &c)| (m, c)).collect(),
        }
    }

    /// Arena indices in minor order.
    pub fn sorted_indices(&self) -> Vec<u32> {
        let mut e = self.entries();
        if matches!(self.repr, Repr::Sparse(_)) {
            e.sort_unstable();
        }
        e.into_iter().map(|(_, c)| c).collect()
    }

    /// Makes room for `n` more minors.
    pub fn reserve(&mut self, n: usize) {
        match &mut self.repr {
            Repr::Linear { .. } => {}
            Repr::Dense { slots, .. } => slots.reserve(n),
            Repr::Sparse(map) => map.reserve(n),
        }
    }

    /// Gives back spare capacity.
    pub fn shrink_to_fit(&mut self) {
        match &mut self.repr {
            Repr::Linear { .. } => {}
            Repr::Dense { slots, .. } => slots.shrink_to_fit(),
            Repr::Sparse(map) => map.shrink_to_fit(),
        }
    }

    /// Bytes of heap held (for the memory budget tests).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Linear { .. } => 0,
            Repr::Dense { slots, .. } => slots.capacity() * 4,
            Repr::Sparse(map) => map.capacity() * 9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(ix: &MinorIndex, want: &std::collections::BTreeMap<u32, u32>) {
        assert_eq!(ix.len(), want.len());
        for (&m, &i) in want {
            assert_eq!(ix.get(m), Some(i), "minor {m:#x}");
        }
        let sorted: Vec<u32> = want.values().copied().collect();
        assert_eq!(ix.sorted_indices(), sorted);
    }

    #[test]
    fn minors_in_creation_order_need_no_table() {
        let mut ix = MinorIndex::default();
        for m in 1..=1_000_000u32 {
            ix.insert(m, m + 6);
        }
        assert!(ix.is_linear());
        assert_eq!(ix.heap_bytes(), 0);
        assert_eq!((ix.get(0), ix.get(1), ix.get(1_000_000)), (None, Some(7), Some(1_000_006)));
        assert_eq!((ix.get(1_000_001), ix.get(u32::MAX)), (None, None));
        assert_eq!(ix.sorted_indices().len(), 1_000_000);
        // Out of order: a table of 4 bytes per minor, same answers.
        ix.insert(0, 3);
        assert!(!ix.is_linear() && !ix.is_sparse());
        ix.shrink_to_fit();
        assert!(ix.heap_bytes() <= 4 * 1_000_001 + 64);
        assert_eq!((ix.get(0), ix.get(1), ix.get(1_000_000)), (Some(3), Some(7), Some(1_000_006)));
        // Removal from a linear index makes a table too.
        let mut l = MinorIndex::default();
        (10..20).for_each(|m| l.insert(m, m));
        l.remove(15);
        assert!(!l.is_linear());
        assert_eq!((l.get(14), l.get(15), l.get(16), l.len()), (Some(14), None, Some(16), 9));
        // A linear index meeting a far minor becomes a map, not a 4-billion-slot table.
        let mut f = MinorIndex::default();
        (1..5).for_each(|m| f.insert(m, m));
        f.insert(u32::MAX, 9);
        assert!(f.is_sparse());
        assert_eq!((f.get(4), f.get(u32::MAX)), (Some(4), Some(9)));
    }

    #[test]
    fn scattered_minors_become_a_map_and_come_back() {
        let mut ix = MinorIndex::default();
        let mut want = std::collections::BTreeMap::new();
        for (k, m) in [5u32, u32::MAX, 0x8000_0000, 1].into_iter().enumerate() {
            ix.insert(m, k as u32);
            want.insert(m, k as u32);
        }
        assert!(ix.is_sparse());
        check(&ix, &want);
        assert!(ix.heap_bytes() < 4096);
        // Filling a compact range keeps it sparse while the extremes stay, ...
        ix.remove(u32::MAX);
        ix.remove(0x8000_0000);
        want.remove(&u32::MAX);
        want.remove(&0x8000_0000);
        check(&ix, &want);
        assert!(ix.is_sparse());
        // ... and descending inserts into a table stay correct.
        let mut t = MinorIndex::default();
        let mut w = std::collections::BTreeMap::new();
        for m in (1..20_000u32).rev() {
            t.insert(m * 3, m);
            w.insert(m * 3, m);
        }
        assert!(!t.is_sparse());
        check(&t, &w);
        assert!(t.heap_bytes() <= 4 * (SPARSE_ABOVE as usize * 20_000 + SLACK as usize));
    }

    #[test]
    fn a_map_turns_into_a_table_when_filled() {
        let mut ix = MinorIndex::default();
        let mut want = std::collections::BTreeMap::new();
        ix.insert(1, 0);
        ix.insert(1_000_000, 1);
        want.insert(1, 0);
        want.insert(1_000_000, 1);
        assert!(ix.is_sparse());
        for m in 2..600_000u32 {
            ix.insert(m, m);
            want.insert(m, m);
        }
        assert!(!ix.is_sparse());
        check(&ix, &want);
    }
}
