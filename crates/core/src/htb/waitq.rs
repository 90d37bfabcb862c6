//! The wait queue: classes waiting for tokens, in a timing wheel. Wheel timers are allocated to
//! waiting classes only, so the wheel grows to the largest number of classes ever waiting at
//! once. Each class keeps its timer's number in its own cache line (`Class::timer`), and that
//! number is only trusted when the timer points back at the class (`class_of[timer] == c`): a
//! timer that expires or is cancelled is released without touching the class, which at a million
//! classes would be a cache miss.

use super::class::NONE;
use crate::sched::wheel::TimerWheel;

#[derive(Debug, Default)]
pub(super) struct WaitQueue {
    wheel: TimerWheel,
    /// Class of each timer.
    class_of: Vec<u32>,
    free: Vec<u32>,
}

impl WaitQueue {
    /// The timer `t` of class `c` if it is still the class's (the class waits).
    #[inline]
    fn owned(&self, c: u32, t: u32) -> Option<u32> {
        (self.class_of.get(t as usize) == Some(&c)).then_some(t)
    }

    /// Makes class `c`, whose timer field is `timer`, wait until `deadline` (moving it if it
    /// already waits).
    #[inline]
    pub fn insert(&mut self, c: u32, timer: &mut u32, deadline: u64) {
        let t = match self.owned(c, *timer) {
            Some(t) => t,
            None => {
                let t = match self.free.pop() {
                    Some(t) => t,
                    None => {
                        self.class_of.push(NONE);
                        (self.class_of.len() - 1) as u32
                    }
                };
                self.class_of[t as usize] = c;
                *timer = t;
                t
            }
        };
        self.wheel.insert(t, deadline);
    }

    /// Stops class `c`, whose timer field is `timer`, waiting.
    #[inline]
    pub fn cancel(&mut self, c: u32, timer: u32) {
        if let Some(t) = self.owned(c, timer) {
            self.wheel.cancel(t);
            self.release(t);
        }
    }

    /// Frees timer `t`; its class's timer field goes stale.
    fn release(&mut self, t: u32) {
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
