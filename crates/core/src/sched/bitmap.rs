//! A hierarchical bitmap over the integers `0..capacity`: insert, remove and "first member at or
//! after `i`" in O(log₆₄ capacity) word operations (3 for a million members), as Eiffel's
//! find-first-set queues. Level 0 holds one bit per member; each bit of level `k + 1` says whether
//! the matching word of level `k` is non-zero. Nothing allocates except [`RankSet::grow`].

/// See the [module docs](self).
#[derive(Clone, Debug, Default)]
pub struct RankSet {
    /// All levels in one vector, level 0 first; the last level is a single word. Level starts
    /// are recomputed from the capacity on the way (a shift and an add per level), which keeps
    /// an empty set at 32 bytes: an HTB has 8 of them per row and per inner class.
    words: Vec<u64>,
    capacity: u32,
}

/// Words in level 0 of a set of `capacity`.
#[inline]
fn level0_words(capacity: u32) -> usize {
    (capacity as usize).div_ceil(64).max(1)
}

impl RankSet {
    /// An empty set that can hold `0..capacity`.
    pub fn with_capacity(capacity: u32) -> RankSet {
        let mut s = RankSet::default();
        s.grow(capacity);
        s
    }

    /// Members are below this.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Makes room for `0..capacity`, keeping the members.
    pub fn grow(&mut self, capacity: u32) {
        if capacity <= self.capacity && !self.words.is_empty() {
            return;
        }
        let members: Vec<u32> = self.iter().collect();
        let capacity = capacity.max(64);
        let (mut len, mut n) = (0, level0_words(capacity));
        loop {
            len += n;
            if n == 1 {
                break;
            }
            n = n.div_ceil(64);
        }
        self.words = vec![0; len];
        self.capacity = capacity;
        for m in members {
            self.insert(m);
        }
    }

    /// True if nothing is in the set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.last().is_none_or(|&w| w == 0)
    }

    /// True if `i` is in the set.
    #[inline]
    pub fn contains(&self, i: u32) -> bool {
        i < self.capacity && self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Adds `i` (must be below the capacity).
    #[inline]
    pub fn insert(&mut self, i: u32) {
        let (mut i, mut start, mut n) = (i as usize, 0, level0_words(self.capacity));
        loop {
            let w = &mut self.words[start + i / 64];
            let was = *w;
            *w |= 1 << (i % 64);
            if was != 0 || n == 1 {
                return;
            }
            i /= 64;
            start += n;
            n = n.div_ceil(64);
        }
    }

    /// Removes `i` (no-op if absent).
    #[inline]
    pub fn remove(&mut self, i: u32) {
        if i >= self.capacity {
            return;
        }
        let (mut i, mut start, mut n) = (i as usize, 0, level0_words(self.capacity));
        loop {
            let w = &mut self.words[start + i / 64];
            *w &= !(1 << (i % 64));
            if *w != 0 || n == 1 {
                return;
            }
            i /= 64;
            start += n;
            n = n.div_ceil(64);
        }
    }

    /// The smallest member.
    #[inline]
    pub fn first(&self) -> Option<u32> {
        self.next_from(0)
    }

    /// The smallest member at or after `i`.
    #[inline]
    pub fn next_from(&self, i: u32) -> Option<u32> {
        if i >= self.capacity {
            return None;
        }
        // Climb until a word has a member at or after the position, then descend by the lowest
        // bit, remembering each level's start for the way down.
        let mut starts = [0usize; 8];
        let (mut pos, mut level, mut n) = (i as usize, 0, level0_words(self.capacity));
        loop {
            let start = starts[level];
            let word = self.words[start + pos / 64] & (u64::MAX << (pos % 64));
            if word != 0 {
                pos = (pos / 64) * 64 + word.trailing_zeros() as usize;
                break;
            }
            // Nothing left in this word: continue from the next word, one level up.
            pos = pos / 64 + 1;
            if n == 1 || pos >= n {
                return None;
            }
            level += 1;
            starts[level] = start + n;
            n = n.div_ceil(64);
        }
        while level > 0 {
            level -= 1;
            pos = pos * 64 + self.words[starts[level] + pos].trailing_zeros() as usize;
        }
        Some(pos as u32)
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut next = self.first();
        std::iter::from_fn(move || {
            let cur = next?;
            next = self.next_from(cur + 1);
            Some(cur)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn matches_an_ordered_set_under_random_operations() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for cap in [1u32, 64, 65, 4096, 4097, 300_000] {
            let mut s = RankSet::with_capacity(cap);
            let mut model = BTreeSet::new();
            for _ in 0..20_000 {
                let i = (rnd() % cap as u64) as u32;
                match rnd() % 3 {
                    0 => {
                        s.insert(i);
                        model.insert(i);
                    }
                    1 => {
                        s.remove(i);
                        model.remove(&i);
                    }
                    _ => {
                        assert_eq!(s.next_from(i), model.range(i..).next().copied(), "cap {cap} from {i}");
                    }
                }
                assert_eq!(s.is_empty(), model.is_empty());
            }
            assert_eq!(s.first(), model.first().copied());
            assert!(s.iter().eq(model.iter().copied()));
        }
    }

    #[test]
    fn grow_keeps_members() {
        let mut s = RankSet::with_capacity(10);
        s.insert(3);
        s.insert(9);
        s.grow(1_000_000);
        s.insert(999_999);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 9, 999_999]);
        assert_eq!(s.next_from(10), Some(999_999));
        assert_eq!(s.next_from(1_000_000), None);
    }
}
