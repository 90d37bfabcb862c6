//! The wait queue: classes waiting for tokens, in a timing wheel. Wheel timers are allocated to
//! waiting classes only, so a class that is not waiting costs one 4-byte slot reference, and
//! the wheel grows to the largest number of classes ever waiting at once.

use super::class::NONE;
use crate::sched::wheel::TimerWheel;

#[derive(Debug, Default)]
pub(super) struct WaitQueue {
    wheel: TimerWheel,
    /// Timer of each class, `NONE` when not waiting.
    timer_of: Vec<u32>,
    /// Class of each timer.
    class_of: Vec<u32>,
    free: Vec<u32>,
}

impl WaitQueue {
    /// Makes room for classes below `n`.
    pub fn reserve(&mut self, n: usize) {
        if self.timer_of.len() < n {
            self.timer_of.reserve_exact(n - self.timer_of.len());
            self.timer_of.resize(n, NONE);
        }
    }

    pub fn shrink_to_fit(&mut self) {
        self.timer_of.shrink_to_fit();
    }

    /// Makes class `c` wait until `deadline` (moving it if it already waits).
    #[inline]
    pub fn insert(&mut self, c: u32, deadline: u64) {
        let mut t = self.timer_of[c as usize];
        if t == NONE {
            t = match self.free.pop() {
                Some(t) => t,
                None => {
                    self.class_of.push(NONE);
                    (self.class_of.len() - 1) as u32
                }
            };
            self.class_of[t as usize] = c;
            self.timer_of[c as usize] = t;
        }
        self.wheel.insert(t, deadline);
    }

    /// Stops class `c` waiting.
    #[inline]
    pub fn cancel(&mut self, c: u32) {
        let t = self.timer_of[c as usize];
        if t != NONE {
            self.wheel.cancel(t);
            self.release(t);
        }
    }

    fn release(&mut self, t: u32) {
        let c = self.class_of[t as usize];
        self.timer_of[c as usize] = NONE;
        self.class_of[t as usize] = NONE;
        self.free.push(t);
    }

    /// One class whose wait is over by `now`. Call until `None`.
    #[inline]
    pub fn pop_expired(&mut self, now: u64) -> Option<u32> {
        let (_, t) = self.wheel.pop_expired(now)?;
        let c = self.class_of[t as usize];
        self.release(t);
        Some(c)
    }

    /// The earliest wake-up, or a lower bound of it (see [`TimerWheel::earliest`]).
    pub fn earliest(&self) -> Option<u64> {
        self.wheel.earliest(64)
    }

    pub fn clear(&mut self) {
        self.wheel.clear();
        for t in 0..self.class_of.len() as u32 {
            if self.class_of[t as usize] != NONE {
                self.release(t);
            }
        }
    }
}
