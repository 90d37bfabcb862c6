//! `legacy-2.6.30`: a model of one HTB class as Linux 2.6.30 and iproute2 ss080725 shaped it,
//! for showing the old stepped rate error beside Sluice's exact arithmetic (seed 000).
//!
//! What is modelled (and why it errs):
//! - **psched ticks of 1024 ns** (`PSCHED_SHIFT` 10). Token state and the clock are in ticks;
//!   the clock is truncated to a tick.
//! - **the 256-slot rate table**: tc computes `rtab[i] = xmittime((i+1) << cell_log)` in ticks,
//!   truncating to whole microseconds, then to ticks with `tick_in_usec = 1000/1024`. `cell_log` is the smallest with
//!   `mtu >> cell_log <= 255`. The kernel looks a packet up as
//!   `slot = (len - 1) >> cell_log`, and for `slot > 255` uses `rtab[255]·(slot>>8) + rtab[slot&255]`.
//!   The truncation makes each packet cheaper than it is, and by a step that changes with the
//!   rate: the seed's staircase.
//! - **u32 bytes/s rates** and tc's default burst `rate/HZ + mtu` with HZ read as 10⁹ from
//!   `/proc/net/psched` on a high-resolution kernel (so burst ≈ mtu).
//! - **the timer**: wake-ups at the computed tick, rounded up to `timer` (one tick by default,
//!   as the hrtimer watchdog did; set 1 ms to model a jiffy-granular timer).
//!
//! Not modelled: HTB's hysteresis, the DRR among several classes, `mbuffer` effects beyond
//! clamping, and the device. This is a model of the arithmetic, not of the whole kernel.

use sluice_core::fifo::Fifo;
use sluice_core::{Dropped, Packet, Qdisc, QdiscStats, Rate, Span, Time};

/// Nanoseconds per psched tick in 2.6.30 (`PSCHED_SHIFT` 10).
pub const TICK_NS: u64 = 1024;
/// tc's ticks per microsecond for /proc/net/psched "000003e8 00000400 000f4240 ...".
const TICK_IN_USEC: f64 = 1000.0 / 1024.0;

/// The rate table tc would send for `rate` and class `mtu`.
#[derive(Clone, Debug)]
pub struct RateTable {
    /// Transmission time in ticks of `(i+1) << cell_log` bytes.
    pub data: [u32; 256],
    /// log2 of the cell size.
    pub cell_log: u32,
    /// Rate in bytes per second as the u32 the netlink API carried.
    pub bytes_per_sec: u32,
}

/// tc's `tc_calc_xmittime` with 2.6.30's ticks: ticks for `size` bytes at `bps` bytes/s,
/// truncated to whole microseconds, then to ticks (the one `xmittime` of `sluice_model::tcmath`).
pub fn xmittime(bps: u32, size: u64) -> u32 {
    sluice_model::tcmath::xmittime_at(TICK_IN_USEC, bps as u64, u32::try_from(size).unwrap_or(u32::MAX))
}

impl RateTable {
    /// tc's `tc_calc_rtable` for `rate` and `mtu` (mpu 0, Ethernet).
    pub fn new(rate: Rate, mtu: u32) -> RateTable {
        let bps = rate.bytes_per_sec().min(u32::MAX as u64) as u32;
        let mtu = if mtu == 0 { 2047 } else { mtu };
        let mut cell_log = 0;
        while (mtu >> cell_log) > 255 {
            cell_log += 1;
        }
        let mut data = [0u32; 256];
        for (i, d) in data.iter_mut().enumerate() {
            *d = xmittime(bps, ((i as u64) + 1) << cell_log);
        }
        RateTable { data, cell_log, bytes_per_sec: bps }
    }

    /// The kernel's `qdisc_l2t`: ticks charged for a packet of `len` bytes.
    pub fn l2t(&self, len: u32) -> u64 {
        let slot = (len as i64 - 1).max(0) as u64 >> self.cell_log;
        if slot > 255 {
            self.data[255] as u64 * (slot >> 8) + self.data[(slot & 0xFF) as usize] as u64
        } else {
            self.data[slot as usize] as u64
        }
    }
}

/// One legacy HTB class (rate = ceil) over a pfifo.
pub struct LegacyHtbClass {
    rtab: RateTable,
    buffer: i64,
    mbuffer: i64,
    tokens: i64,
    t_c: i64,
    timer_ns: u64,
    q: Fifo,
    overlimits: u64,
}

impl LegacyHtbClass {
    /// A class at `rate` with class `mtu`, tc's default burst, the given timer granularity
    /// (`Span::ZERO` or one tick = the hrtimer watchdog) and a pfifo of `limit` packets.
    pub fn new(rate: Rate, mtu: u32, timer: Span, limit: u32) -> LegacyHtbClass {
        let rtab = RateTable::new(rate, mtu);
        // q_htb.c: buffer = rate/get_hz() + mtu, get_hz() = 1e9 on this /proc/net/psched.
        let burst = rtab.bytes_per_sec as u64 / 1_000_000_000 + mtu as u64;
        let buffer = xmittime(rtab.bytes_per_sec, burst) as i64;
        LegacyHtbClass {
            rtab,
            buffer,
            mbuffer: 60 * 1_000_000_000 / TICK_NS as i64,
            tokens: buffer,
            t_c: 0,
            timer_ns: timer.as_nanos().max(TICK_NS),
            q: Fifo::pfifo(limit),
            overlimits: 0,
        }
    }

    /// The rate table in use.
    pub fn rate_table(&self) -> &RateTable {
        &self.rtab
    }

    fn ticks(now: Time) -> i64 {
        (now.as_nanos() / TICK_NS) as i64
    }

    fn toks(&self, now: Time) -> i64 {
        let diff = (Self::ticks(now) - self.t_c).min(self.mbuffer);
        (self.tokens + diff).min(self.buffer)
    }
}

impl Qdisc for LegacyHtbClass {
    fn kind(&self) -> &'static str {
        "legacy-2.6.30-htb"
    }
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.q.enqueue(pkt, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        if self.q.qlen() == 0 {
            return None;
        }
        let toks = self.toks(now);
        if toks < 0 {
            self.overlimits += 1;
            return None;
        }
        let p = self.q.dequeue(now)?;
        let mut t = toks - self.rtab.l2t(p.len) as i64;
        if t <= -self.mbuffer {
            t = 1 - self.mbuffer;
        }
        self.tokens = t;
        self.t_c = Self::ticks(now);
        Some(p)
    }
    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.toks(now) >= 0 {
            self.q.peek(now)
        } else {
            None
        }
    }
    fn next_event(&self, now: Time) -> Option<Time> {
        if self.q.qlen() == 0 {
            return None;
        }
        let toks = self.toks(now);
        if toks >= 0 {
            return Some(now);
        }
        let at_tick = (Self::ticks(now) - toks) as u64;
        let ns = at_tick * TICK_NS;
        let g = self.timer_ns;
        Some(Time::from_nanos(ns.div_ceil(g) * g).max(now + Span::from_nanos(1)))
    }
    fn reset(&mut self) -> Vec<Packet> {
        self.q.reset()
    }
    fn stats(&self) -> QdiscStats {
        QdiscStats { overlimits: self.overlimits, ..self.q.stats() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_table_truncates_ticks() {
        // 10 Gbit/s, mtu 9000: cell_log 6; 64 KB costs 4 × rtab[255] = 4 × floor(12.8) ticks.
        let t = RateTable::new(Rate::from_bps(10_000_000_000), 9000);
        assert_eq!(t.cell_log, 6);
        assert_eq!(t.data[255], 12);
        assert_eq!(t.l2t(65536), 48);
        // mtu 64000: cell_log 8, 64 KB is one slot: 52.43 µs truncated to 52 µs, then to
        // floor(52 × 1000/1024) = 50 ticks (tc truncates twice, as in 2.6.26's tc_core.c).
        let t = RateTable::new(Rate::from_bps(10_000_000_000), 64000);
        assert_eq!(t.cell_log, 8);
        assert_eq!(t.l2t(65536), 50);
    }

    #[test]
    fn long_run_rate_shows_the_truncation_error() {
        let rate = Rate::from_bps(10_000_000_000);
        let mut q = LegacyHtbClass::new(rate, 9000, Span::ZERO, 1000);
        let mut now = Time::ZERO;
        let mut sent = 0u64;
        let end = Time::from_millis(100);
        let mut i = 0;
        while now < end {
            while q.qlen() < 10 {
                q.enqueue(Packet::new(65536, i), now).unwrap();
                i += 1;
            }
            while let Some(p) = q.dequeue(now) {
                sent += p.len as u64;
            }
            now = q.next_event(now).unwrap();
        }
        let achieved = sent as f64 * 8.0 / 0.1;
        // 48 ticks (49152 ns) for 65536 B instead of 52429 ns: +6.7% fast.
        assert!(achieved > 1.06e10 && achieved < 1.075e10, "{achieved}");
    }
}
