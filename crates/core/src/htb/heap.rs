//! The wait queue: an indexed binary min-heap of (time, class index).
//!
//! Each class is in it at most once (its position is kept in `pos`), so a class's wake-up time
//! can be moved or removed in O(log N) without stale entries, and nothing allocates once the
//! vectors have grown to the number of classes.

pub(super) const ABSENT: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(super) struct EventHeap {
    heap: Vec<(u64, u32)>,
    pos: Vec<u32>,
}

impl EventHeap {
    /// Makes room for class indices below `n`.
    pub fn ensure(&mut self, n: usize) {
        if self.pos.len() < n {
            self.pos.resize(n, ABSENT);
            self.heap.reserve(n.saturating_sub(self.heap.len()));
        }
    }

    pub fn peek(&self) -> Option<(u64, u32)> {
        self.heap.first().copied()
    }

    #[cfg(test)]
    pub fn time_of(&self, idx: u32) -> Option<u64> {
        match self.pos.get(idx as usize) {
            Some(&p) if p != ABSENT => Some(self.heap[p as usize].0),
            _ => None,
        }
    }

    /// Inserts `idx` at `time`, or moves it there.
    pub fn set(&mut self, idx: u32, time: u64) {
        self.ensure(idx as usize + 1);
        let p = self.pos[idx as usize];
        if p == ABSENT {
            self.heap.push((time, idx));
            let at = self.heap.len() - 1;
            self.pos[idx as usize] = at as u32;
            self.up(at);
        } else {
            let p = p as usize;
            let old = self.heap[p].0;
            self.heap[p].0 = time;
            if time < old {
                self.up(p);
            } else {
                self.down(p);
            }
        }
    }

    pub fn remove(&mut self, idx: u32) {
        let Some(&p) = self.pos.get(idx as usize) else {
            return;
        };
        if p == ABSENT {
            return;
        }
        let p = p as usize;
        let last = self.heap.len() - 1;
        self.swap(p, last);
        self.heap.pop();
        self.pos[idx as usize] = ABSENT;
        if p < self.heap.len() {
            self.down(p);
            self.up(p);
        }
    }

    pub fn clear(&mut self) {
        for &(_, i) in &self.heap {
            self.pos[i as usize] = ABSENT;
        }
        self.heap.clear();
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[i] < self.heap[parent] {
                self.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    fn down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let m = if r < n && self.heap[r] < self.heap[l] { r } else { l };
            if self.heap[m] < self.heap[i] {
                self.swap(i, m);
                i = m;
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_moves_and_removes() {
        let mut h = EventHeap::default();
        for (i, t) in [50u64, 10, 40, 30, 20].iter().enumerate() {
            h.set(i as u32, *t);
        }
        assert_eq!(h.peek(), Some((10, 1)));
        h.set(1, 60); // move later
        assert_eq!(h.peek(), Some((20, 4)));
        h.remove(4);
        h.set(0, 5); // move earlier
        assert_eq!(h.peek(), Some((5, 0)));
        let mut out = Vec::new();
        while let Some((t, i)) = h.peek() {
            out.push(t);
            h.remove(i);
        }
        assert_eq!(out, vec![5, 30, 40, 60]);
        assert_eq!(h.time_of(0), None);
    }
}
