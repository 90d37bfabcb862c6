//! A compact TCP model: enough to show ACK clocking, bufferbloat and fairness.
//!
//! Sequence numbers count segments. The receiver ACKs every segment cumulatively (no delayed
//! ACKs, no SACK) and echoes the send time of the segment that triggered the ACK (like the
//! timestamp option), which gives an RTT sample on every ACK. The sender implements slow start
//! and congestion avoidance (RFC 5681), NewReno fast retransmit/recovery (RFC 6582), the RTO of
//! RFC 6298 with Linux's 200 ms minimum, ECN's once-per-window response (RFC 3168 §6.1.2), and
//! either Reno or CUBIC (RFC 8312) window growth.

use crate::model::CongestionControl;
use sluice_core::{Span, Time};
use std::collections::BTreeSet;

const MIN_RTO: u64 = 200_000_000;
const MAX_RTO: u64 = 60_000_000_000;
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

/// Sender and receiver state of one connection.
#[derive(Debug, Clone)]
pub(crate) struct Tcp {
    cc: CongestionControl,
    pub ecn: bool,
    limit: Option<u64>,
    rwnd: f64,
    pub cwnd: f64,
    ssthresh: f64,
    pub snd_una: u64,
    pub snd_nxt: u64,
    high_tx: u64,
    dupacks: u32,
    recovery: Option<u64>,
    cwr_until: u64,
    srtt: Option<f64>,
    rttvar: f64,
    min_rtt: f64,
    pub rto: u64,
    pub rto_gen: u32,
    pub rto_deadline: Option<Time>,
    // CUBIC
    w_max: f64,
    w_last_max: f64,
    k: f64,
    epoch: Option<Time>,
    origin: f64,
    w_est: f64,
    // receiver
    pub rcv_nxt: u64,
    ooo: BTreeSet<u64>,
    /// Counters.
    pub retransmits: u64,
    pub timeouts: u64,
}

/// What the sender wants done after an event.
#[derive(Debug, Default)]
pub(crate) struct Out {
    /// Segment numbers to transmit now, in order.
    pub send: Vec<u64>,
    /// Re-arm (Some) or cancel (None) the retransmission timer.
    pub rearm: bool,
}

impl Tcp {
    pub(crate) fn new(cc: CongestionControl, ecn: bool, limit_segs: Option<u64>, rwnd: u32) -> Tcp {
        Tcp {
            cc,
            ecn,
            limit: limit_segs,
            rwnd: rwnd.max(2) as f64,
            cwnd: 10.0, // RFC 6928 initial window
            ssthresh: f64::INFINITY,
            snd_una: 0,
            snd_nxt: 0,
            high_tx: 0,
            dupacks: 0,
            recovery: None,
            cwr_until: 0,
            srtt: None,
            rttvar: 0.0,
            min_rtt: f64::INFINITY,
            rto: 1_000_000_000,
            rto_gen: 0,
            rto_deadline: None,
            w_max: 0.0,
            w_last_max: 0.0,
            k: 0.0,
            epoch: None,
            origin: 0.0,
            w_est: 0.0,
            rcv_nxt: 0,
            ooo: BTreeSet::new(),
            retransmits: 0,
            timeouts: 0,
        }
    }

    fn flight(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    fn done(&self) -> bool {
        self.limit.is_some_and(|l| self.snd_una >= l)
    }

    /// Segments the window allows now.
    pub(crate) fn fill(&mut self, out: &mut Out) {
        let wnd = self.cwnd.min(self.rwnd).max(1.0) as u64;
        while self.flight() < wnd {
            if let Some(l) = self.limit {
                if self.snd_nxt >= l {
                    break;
                }
            }
            let s = self.snd_nxt;
            if s < self.high_tx {
                self.retransmits += 1;
            }
            out.send.push(s);
            self.snd_nxt += 1;
            self.high_tx = self.high_tx.max(self.snd_nxt);
            out.rearm = true;
        }
    }

    /// Receiver: a data segment arrived. Returns the cumulative ACK to send.
    pub(crate) fn on_data(&mut self, seq: u64) -> u64 {
        if seq == self.rcv_nxt {
            self.rcv_nxt += 1;
            while self.ooo.remove(&self.rcv_nxt) {
                self.rcv_nxt += 1;
            }
        } else if seq > self.rcv_nxt {
            self.ooo.insert(seq);
        }
        self.rcv_nxt
    }

    fn on_rtt(&mut self, r: f64) {
        self.min_rtt = self.min_rtt.min(r);
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = ((s + 4.0 * self.rttvar) as u64).clamp(MIN_RTO, MAX_RTO);
    }

    /// Smoothed RTT, if sampled.
    pub(crate) fn srtt(&self) -> Option<Span> {
        self.srtt.map(|s| Span::from_nanos(s as u64))
    }

    fn reduce(&mut self, now: Time) {
        let _ = now;
        let beta = match self.cc {
            CongestionControl::Reno => 0.5,
            CongestionControl::Cubic => CUBIC_BETA,
        };
        if self.cc == CongestionControl::Cubic {
            // RFC 8312 §4.6 fast convergence.
            self.w_max =
                if self.cwnd < self.w_last_max { self.cwnd * (1.0 + CUBIC_BETA) / 2.0 } else { self.cwnd };
            self.w_last_max = self.cwnd;
            self.epoch = None;
        }
        self.ssthresh = (self.cwnd * beta).max(2.0);
    }

    fn grow(&mut self, acked: u64, now: Time) {
        for _ in 0..acked {
            if self.cwnd < self.ssthresh {
                self.cwnd += 1.0;
                continue;
            }
            match self.cc {
                CongestionControl::Reno => self.cwnd += 1.0 / self.cwnd,
                CongestionControl::Cubic => self.cubic_ack(now),
            }
        }
    }

    fn cubic_ack(&mut self, now: Time) {
        let rtt = if self.min_rtt.is_finite() { self.min_rtt } else { 100e6 };
        let epoch = match self.epoch {
            Some(e) => e,
            None => {
                self.epoch = Some(now);
                if self.cwnd < self.w_max {
                    self.k = ((self.w_max - self.cwnd) / CUBIC_C).cbrt();
                    self.origin = self.w_max;
                } else {
                    self.k = 0.0;
                    self.origin = self.cwnd;
                }
                self.w_est = self.cwnd;
                now
            }
        };
        let t = (now - epoch).as_nanos() as f64 / 1e9 + rtt / 1e9;
        let target = self.origin + CUBIC_C * (t - self.k).powi(3);
        // RFC 8312 §4.2: TCP-friendly region.
        self.w_est += 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) / self.cwnd;
        let goal = target.max(self.w_est);
        if goal > self.cwnd {
            self.cwnd += ((goal - self.cwnd) / self.cwnd).min(1.0);
        } else {
            self.cwnd += 0.01 / self.cwnd;
        }
    }

    /// Sender: an ACK arrived (cumulative `ack`, echoing send time `echo`, ECE flag).
    pub(crate) fn on_ack(&mut self, ack: u64, echo: Time, ece: bool, now: Time, out: &mut Out) {
        if now > echo {
            self.on_rtt((now - echo).as_nanos() as f64);
        }
        if ece && self.ecn && self.snd_una >= self.cwr_until && self.recovery.is_none() {
            self.reduce(now);
            self.cwnd = self.ssthresh;
            self.cwr_until = self.snd_nxt;
        }
        if ack > self.snd_una {
            let acked = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < self.snd_una {
                self.snd_nxt = self.snd_una;
            }
            self.dupacks = 0;
            match self.recovery {
                Some(rec) if ack >= rec => {
                    self.recovery = None;
                    self.cwnd = self.ssthresh;
                }
                Some(_) => {
                    // NewReno partial ACK: retransmit the next hole, deflate by the amount acked.
                    self.retransmits += 1;
                    out.send.push(self.snd_una);
                    self.cwnd = (self.cwnd - acked as f64 + 1.0).max(1.0);
                }
                None => self.grow(acked, now),
            }
            out.rearm = true;
        } else if ack == self.snd_una && self.flight() > 0 {
            self.dupacks += 1;
            if self.dupacks == 3 && self.recovery.is_none() {
                self.reduce(now);
                self.cwnd = self.ssthresh + 3.0;
                self.recovery = Some(self.snd_nxt);
                self.retransmits += 1;
                out.send.push(self.snd_una);
                out.rearm = true;
            } else if self.recovery.is_some() {
                self.cwnd += 1.0;
            }
        }
        if !self.done() {
            self.fill(out);
        }
    }

    /// The retransmission timer fired.
    pub(crate) fn on_rto(&mut self, now: Time, out: &mut Out) {
        if self.flight() == 0 {
            return;
        }
        self.timeouts += 1;
        self.reduce(now);
        self.cwnd = 1.0;
        self.recovery = None;
        self.dupacks = 0;
        self.snd_nxt = self.snd_una; // go back N
        self.rto = (self.rto * 2).min(MAX_RTO);
        self.fill(out);
        out.rearm = true;
    }

    /// True when nothing is outstanding (the timer can stop).
    pub(crate) fn idle(&self) -> bool {
        self.flight() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_doubles_per_rtt_and_loss_halves_reno() {
        let mut t = Tcp::new(CongestionControl::Reno, false, None, 10_000);
        let mut out = Out::default();
        t.fill(&mut out);
        assert_eq!(out.send.len(), 10);
        let now = Time::from_millis(10);
        for s in 0..10 {
            let mut o = Out::default();
            t.on_ack(s + 1, Time::ZERO, false, now, &mut o);
        }
        assert_eq!(t.cwnd, 20.0);
        // Three duplicate ACKs: fast retransmit of snd_una, cwnd = ssthresh + 3.
        let una = t.snd_una;
        let mut o = Out::default();
        for _ in 0..3 {
            t.on_ack(una, Time::ZERO, false, now, &mut o);
        }
        assert_eq!(o.send[0], una);
        assert_eq!(t.ssthresh, 10.0);
    }

    #[test]
    fn receiver_reassembles_out_of_order() {
        let mut t = Tcp::new(CongestionControl::Cubic, false, None, 100);
        assert_eq!(t.on_data(0), 1);
        assert_eq!(t.on_data(2), 1);
        assert_eq!(t.on_data(3), 1);
        assert_eq!(t.on_data(1), 4);
    }

    #[test]
    fn ecn_reduces_once_per_window() {
        let mut t = Tcp::new(CongestionControl::Reno, true, None, 10_000);
        let mut out = Out::default();
        t.fill(&mut out);
        let now = Time::from_millis(10);
        let mut o = Out::default();
        t.on_ack(1, Time::ZERO, true, now, &mut o);
        let after = t.cwnd;
        assert!(after < 10.0);
        t.on_ack(2, Time::ZERO, true, now, &mut o);
        assert!(t.cwnd >= after, "second CE in the same window must not reduce again");
    }
}
