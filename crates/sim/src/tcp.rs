//! A TCP model that behaves like Linux's where it matters for queueing: ACK clocking, loss
//! recovery, timeouts and fairness.
//!
//! Sequence numbers count segments. The receiver delays ACKs as Linux does (every second
//! in-order segment, a 40 ms delayed-ACK timer, sixteen quick ACKs at the start, an immediate ACK
//! for anything out of order or filling a hole) and reports the SACK block (RFC 2018) that holds
//! the segment that triggered the ACK. Every ACK echoes the send time of the earliest segment it
//! acknowledges, like the timestamp option (RFC 7323), so every ACK gives an unambiguous RTT
//! sample.
//!
//! The sender keeps a SACK scoreboard and Linux's accounting (`in_flight = packets_out -
//! sacked_out - lost_out + retrans_out`). Losses are detected by RACK (RFC 8985, with Linux's
//! reordering window: zero once three segments are SACKed or in recovery, else min_rtt/4, and a
//! reordering timer) over a time-ordered transmission list, so a lost retransmission is detected
//! like any other loss. Recovery follows RFC 6675 with Proportional Rate Reduction (RFC 6937).
//! The retransmission timer follows RFC 6298: it is started when data is sent and none is
//! running, restarted only when new data is cumulatively acknowledged, backed off exponentially,
//! with Linux's 200 ms minimum and 120 s maximum; on expiry every unSACKed segment is marked
//! lost (Linux's behaviour). A tail loss probe (RACK-TLP, RFC 8985 §7, as Linux schedules it:
//! two smoothed RTTs after the last send or ACK in the open state, plus 200 ms with one segment
//! out) sends new data or the last segment again, so a lost tail is repaired without a timeout;
//! the receiver reports duplicates (D-SACK, RFC 2883) so a probe that repaired nothing costs no
//! reduction. ECN halves once per window (RFC 3168 §6.1.2). Window growth is Reno, CUBIC (RFC
//! 9438, with HyStart's delay increase detection as Linux enables it by default) or BBR v1
//! (`crate::bbr`), which also paces every transmission. Every delivered segment feeds a
//! delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation).
//!
//! Every operation is O(1) amortised per segment; nothing allocates per packet once the
//! scoreboard has grown to the flow's largest window.

use crate::bbr::{Bbr, RateSample};
use crate::model::CongestionControl;
use sluice_core::{Span, Time};
use std::collections::{BTreeMap, VecDeque};

const MS: u64 = 1_000_000;
const MIN_RTO: u64 = 200 * MS;
const MAX_RTO: u64 = 120_000 * MS;
const INITIAL_RTO: u64 = 1_000 * MS;
const DELACK: u64 = 40 * MS;
const QUICKACKS: u32 = 16;
const INITIAL_CWND: f64 = 10.0; // RFC 6928
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;
const HYSTART_LOW_WINDOW: f64 = 16.0;
const HYSTART_MIN_SAMPLES: u32 = 8;
/// Linux's `TCP_RTO_MIN`, added to the probe timeout when one segment is out (a delayed ACK).
const TLP_ONE_SEG_EXTRA: u64 = 200 * MS;
/// Linux's `TCP_TIMEOUT_MIN` (2 jiffies), added otherwise.
const TLP_EXTRA: u64 = 2 * MS;

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// A retransmission of this segment is in flight.
const RETRANS: u8 = 4;

#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    /// Time of the latest transmission, ns.
    xmit: u64,
    /// Delivery-rate state at that transmission: segments delivered, the time of the latest
    /// delivery, and the send time of the latest delivered segment.
    delivered: u64,
    delivered_time: u64,
    first_sent: u64,
    flags: u8,
    app_limited: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// Fast recovery until `snd_una` reaches the recovery point.
    Recovery,
    /// After a retransmission timeout, until `snd_una` reaches the recovery point.
    Loss,
}

/// An acknowledgement as the receiver sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckMsg {
    /// Cumulative ACK: the next segment expected.
    pub ack: u64,
    /// One SACK block `[lo, hi)` (empty when `lo == hi`).
    pub sack: (u64, u64),
    /// Send time of the earliest segment this ACK acknowledges (the timestamp echo).
    pub echo: Time,
    /// ECN-Echo.
    pub ece: bool,
    /// The segment that triggered this ACK had already arrived (D-SACK, RFC 2883).
    pub dsack: bool,
}

/// What the receiver did with a data segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvOutcome {
    /// Segments newly delivered in order to the application.
    pub in_order: u64,
    /// The ACK to send now, if any (otherwise it is delayed).
    pub ack: Option<AckMsg>,
}

/// Sender and receiver state of one connection.
#[derive(Debug, Clone)]
pub(crate) struct Tcp {
    cc: CongestionControl,
    bbr: Option<Box<Bbr>>,
    ecn: bool,
    limit: Option<u64>,
    rwnd: u64,
    // ---- sender ----
    pub cwnd: f64,
    ssthresh: f64,
    pub snd_una: u64,
    pub snd_nxt: u64,
    segs: VecDeque<Seg>,
    sacked_out: u64,
    lost_out: u64,
    retrans_out: u64,
    /// Lost segments awaiting retransmission, in sequence order (may hold stale entries).
    rexmit_q: VecDeque<u64>,
    /// Every transmission (segment, time) in time order, for RACK (may hold stale entries).
    tsorted: VecDeque<(u64, u64)>,
    /// RACK: send time and segment of the most recently sent segment known delivered, and the
    /// RTT measured for it.
    rack_xmit: u64,
    rack_seq: u64,
    rack_rtt: u64,
    state: State,
    high: u64,
    prr_delivered: u64,
    prr_out: u64,
    recover_fs: u64,
    cwnd_limited: bool,
    cwr_until: u64,
    srtt: Option<f64>,
    rttvar: f64,
    min_rtt: u64,
    rto: u64,
    rto_at: Option<u64>,
    reo_at: Option<u64>,
    // Tail loss probe: its timer, and the snd_nxt and kind of the probe in flight.
    tlp_at: Option<u64>,
    tlp_high: Option<u64>,
    tlp_retrans: bool,
    // Delivery rate (segments delivered, time of the latest delivery, send time of the
    // latest delivered segment, app-limited mark) and this ACK's sample.
    delivered: u64,
    delivered_time: u64,
    first_sent_time: u64,
    app_limited: u64,
    rs: RateSample,
    rs_seq: u64,
    rs_send_elapsed: u64,
    rs_prior_time: Option<u64>,
    // Pacing (BBR): earliest time of the next send, its timer.
    pace_next: u64,
    pace_at: Option<u64>,
    // CUBIC (RFC 9438)
    w_max: f64,
    k: f64,
    epoch: Option<u64>,
    origin: f64,
    w_est: f64,
    cwnd_epoch: f64,
    // HyStart delay increase
    round_end: u64,
    round_min: u64,
    last_round_min: u64,
    round_samples: u32,
    // ---- receiver ----
    pub rcv_nxt: u64,
    /// Out-of-order blocks, start → end (exclusive).
    ooo: BTreeMap<u64, u64>,
    unacked: u32,
    pending_echo: Option<Time>,
    pending_ce: bool,
    delack_at: Option<u64>,
    quickacks: u32,
    // ---- counters ----
    /// Segments sent again.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Fast recoveries entered.
    pub recoveries: u64,
    /// Tail loss probes sent.
    pub probes: u64,
    /// The time of the timer event the simulator has queued for this connection (`MAX`: none).
    pub armed: Time,
}

impl Tcp {
    /// A connection sending `limit_segs` segments (unlimited when `None`), with a receive window
    /// of `rwnd` segments. `seed` drives the connection's random choices (BBR's
    /// first ProbeBW phase).
    pub(crate) fn new(
        cc: CongestionControl,
        ecn: bool,
        limit_segs: Option<u64>,
        rwnd: u32,
        seed: u64,
    ) -> Tcp {
        let bbr = (cc == CongestionControl::Bbr).then(|| {
            let mut b = Box::new(Bbr::new(seed));
            b.init_pacing(INITIAL_CWND, None);
            b
        });
        Tcp {
            cc,
            bbr,
            ecn,
            limit: limit_segs,
            rwnd: rwnd.max(2) as u64,
            cwnd: INITIAL_CWND,
            ssthresh: f64::INFINITY,
            snd_una: 0,
            snd_nxt: 0,
            segs: VecDeque::new(),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            rexmit_q: VecDeque::new(),
            tsorted: VecDeque::new(),
            rack_xmit: 0,
            rack_seq: 0,
            rack_rtt: 0,
            state: State::Open,
            high: 0,
            prr_delivered: 0,
            prr_out: 0,
            recover_fs: 0,
            cwnd_limited: false,
            cwr_until: 0,
            srtt: None,
            rttvar: 0.0,
            min_rtt: u64::MAX,
            rto: INITIAL_RTO,
            rto_at: None,
            reo_at: None,
            tlp_at: None,
            tlp_high: None,
            tlp_retrans: false,
            delivered: 0,
            delivered_time: 0,
            first_sent_time: 0,
            app_limited: 0,
            rs: RateSample::default(),
            rs_seq: 0,
            rs_send_elapsed: 0,
            rs_prior_time: None,
            pace_next: 0,
            pace_at: None,
            w_max: 0.0,
            k: 0.0,
            epoch: None,
            origin: 0.0,
            w_est: 0.0,
            cwnd_epoch: 0.0,
            round_end: 0,
            round_min: u64::MAX,
            last_round_min: u64::MAX,
            round_samples: 0,
            rcv_nxt: 0,
            ooo: BTreeMap::new(),
            unacked: 0,
            pending_echo: None,
            pending_ce: false,
            delack_at: None,
            quickacks: QUICKACKS,
            retransmits: 0,
            timeouts: 0,
            recoveries: 0,
            probes: 0,
            armed: Time::MAX,
        }
    }

    // ---- sender ------------------------------------------------------------------------------

    fn packets_out(&self) -> u64 {
        self.snd_nxt - self.snd_una
    }

    /// Segments in the network (RFC 6675's pipe, Linux's `tcp_packets_in_flight`).
    pub(crate) fn in_flight(&self) -> u64 {
        (self.packets_out() + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    fn done(&self) -> bool {
        self.limit.is_some_and(|l| self.snd_una >= l)
    }

    fn seg(&mut self, seq: u64) -> &mut Seg {
        let i = (seq - self.snd_una) as usize;
        &mut self.segs[i]
    }

    /// Sends what the window allows now: retransmissions of lost segments first, then new data.
    /// Segment numbers to transmit are appended to `out`.
    pub(crate) fn fill(&mut self, now: Time, out: &mut Vec<u64>) {
        let now = now.as_nanos();
        let before = out.len();
        self.cwnd_limited = false;
        self.pace_at = None;
        loop {
            let wnd = self.cwnd.max(1.0) as u64;
            if self.in_flight() >= wnd {
                self.cwnd_limited = true;
                break;
            }
            if self.bbr.is_some() && now < self.pace_next {
                self.pace_at = Some(self.pace_next);
                break;
            }
            if let Some(seq) = self.next_retransmission() {
                let head = seq == self.snd_una;
                self.retransmit(seq, now);
                if head && self.reo_at.is_none() {
                    self.rto_at = Some(now + self.rto);
                }
                self.sent_one(seq, now, out);
                continue;
            }
            if !self.can_send_new() {
                // Application- or receive-window-limited: rate samples from here on say so.
                self.app_limited = (self.delivered + self.in_flight()).max(1);
                break;
            }
            let seq = self.send_new(now);
            self.sent_one(seq, now, out);
        }
        if self.rto_at.is_none() && self.packets_out() > 0 {
            self.rto_at = Some(now + self.rto);
        }
        if out.len() > before {
            self.arm_tlp(now);
        }
    }

    fn can_send_new(&self) -> bool {
        self.snd_nxt < self.snd_una + self.rwnd && self.limit.is_none_or(|l| self.snd_nxt < l)
    }

    /// Records the delivery-rate state of a transmission of `seq` at `now`.
    fn stamp_tx(&mut self, seq: u64, now: u64) {
        let (d, dt, fs, al) =
            (self.delivered, self.delivered_time, self.first_sent_time, self.app_limited != 0);
        let s = self.seg(seq);
        s.xmit = now;
        s.delivered = d;
        s.delivered_time = dt;
        s.first_sent = fs;
        s.app_limited = al;
        self.tsorted.push_back((seq, now));
    }

    /// Appends a new segment to the flight; returns its number.
    fn send_new(&mut self, now: u64) -> u64 {
        let seq = self.snd_nxt;
        let first = self.packets_out() == 0;
        self.segs.push_back(Seg::default());
        self.snd_nxt += 1;
        if first {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        self.stamp_tx(seq, now);
        seq
    }

    fn retransmit(&mut self, seq: u64, now: u64) {
        self.seg(seq).flags |= RETRANS;
        self.retrans_out += 1;
        self.retransmits += 1;
        self.stamp_tx(seq, now);
    }

    fn sent_one(&mut self, seq: u64, now: u64, out: &mut Vec<u64>) {
        if self.state == State::Recovery {
            self.prr_out += 1;
        }
        if let Some(b) = &self.bbr {
            if b.pacing_rate > 0.0 {
                self.pace_next = self.pace_next.max(now) + (1.0 / b.pacing_rate) as u64;
            }
        }
        out.push(seq);
    }

    /// (Re)schedules the tail loss probe: in the open state with data out and no probe in
    /// flight, two smoothed RTTs from now (RFC 8985 §7.2, Linux's extra time), never after the
    /// retransmission timer.
    fn arm_tlp(&mut self, now: u64) {
        self.tlp_at = None;
        if self.state != State::Open || self.packets_out() == 0 || self.tlp_high.is_some() {
            return;
        }
        let Some(srtt) = self.srtt else { return };
        let extra = if self.packets_out() == 1 { TLP_ONE_SEG_EXTRA } else { TLP_EXTRA };
        let at = now + 2 * srtt as u64 + extra;
        self.tlp_at = Some(self.rto_at.map_or(at, |r| at.min(r)));
    }

    /// The probe timeout expired: send one new segment if the receive window allows, else the
    /// last segment again, regardless of the congestion window (RFC 8985 §7.3).
    fn on_tlp(&mut self, now: u64, out: &mut Vec<u64>) {
        self.tlp_at = None;
        if self.state != State::Open || self.packets_out() == 0 || self.tlp_high.is_some() {
            return;
        }
        let seq = if self.can_send_new() {
            self.tlp_retrans = false;
            self.send_new(now)
        } else {
            let seq = self.snd_nxt - 1;
            if self.seg(seq).flags & (SACKED | RETRANS) != 0 {
                return;
            }
            self.tlp_retrans = true;
            self.retransmit(seq, now);
            seq
        };
        self.probes += 1;
        self.tlp_high = Some(self.snd_nxt);
        self.sent_one(seq, now, out);
        self.rto_at = Some(now + self.rto);
    }

    fn next_retransmission(&mut self) -> Option<u64> {
        while let Some(&seq) = self.rexmit_q.front() {
            if seq >= self.snd_una && seq < self.snd_nxt {
                let f = self.segs[(seq - self.snd_una) as usize].flags;
                if f & LOST != 0 && f & (SACKED | RETRANS) == 0 {
                    self.rexmit_q.pop_front();
                    return Some(seq);
                }
            }
            self.rexmit_q.pop_front();
        }
        None
    }

    fn on_rtt(&mut self, r: u64) {
        self.min_rtt = self.min_rtt.min(r);
        let rf = r as f64;
        match self.srtt {
            None => {
                self.srtt = Some(rf);
                self.rttvar = rf / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - rf).abs();
                self.srtt = Some(0.875 * s + 0.125 * rf);
            }
        }
        // HyStart: the minimum RTT of the first samples of each round.
        if self.round_samples < HYSTART_MIN_SAMPLES {
            self.round_min = self.round_min.min(r);
            self.round_samples += 1;
        }
    }

    fn rto_from_rtt(&self) -> u64 {
        match self.srtt {
            Some(s) => ((s + (4.0 * self.rttvar).max(1e6)) as u64).clamp(MIN_RTO, MAX_RTO),
            None => INITIAL_RTO,
        }
    }

    /// Smoothed RTT, if sampled.
    pub(crate) fn srtt(&self) -> Option<Span> {
        self.srtt.map(|s| Span::from_nanos(s as u64))
    }

    /// A segment (as it was when last sent) was delivered at `now`: updates the delivery count
    /// and takes the rate sample from the most recently sent delivered segment.
    fn rate_delivered(&mut self, seq: u64, s: Seg, now: u64) {
        self.delivered += 1;
        self.delivered_time = now;
        if self.rs_prior_time.is_none() || (s.xmit, seq) > (self.first_sent_time, self.rs_seq) {
            self.rs.prior_delivered = s.delivered;
            self.rs.app_limited = s.app_limited;
            self.rs_prior_time = Some(s.delivered_time);
            self.rs_seq = seq;
            self.rs_send_elapsed = s.xmit.saturating_sub(s.first_sent);
            self.first_sent_time = s.xmit;
        }
    }

    /// Marks `seq` (outstanding) SACKed. Returns whether it was newly delivered.
    fn mark_sacked(&mut self, seq: u64, now: u64) -> bool {
        let s = *self.seg(seq);
        if s.flags & SACKED != 0 {
            return false;
        }
        self.rate_delivered(seq, s, now);
        let f = s.flags;
        self.seg(seq).flags = SACKED;
        self.sacked_out += 1;
        if f & LOST != 0 {
            self.lost_out -= 1;
        }
        if f & RETRANS != 0 {
            self.retrans_out -= 1;
        }
        true
    }

    fn mark_lost(&mut self, seq: u64) {
        let s = self.seg(seq);
        let f = s.flags;
        if f & SACKED != 0 || f & (LOST | RETRANS) == LOST {
            return; // delivered, or already waiting for its retransmission
        }
        if f & RETRANS != 0 {
            // A retransmission (or a loss probe's copy) was lost too.
            s.flags &= !RETRANS;
            self.retrans_out -= 1;
        }
        if f & LOST == 0 {
            self.seg(seq).flags |= LOST;
            self.lost_out += 1;
        }
        self.rs.losses += 1;
        self.rexmit_q.push_back(seq);
    }

    fn reo_wnd(&self) -> u64 {
        if self.state != State::Open || self.sacked_out >= 3 || self.min_rtt == u64::MAX {
            0
        } else {
            self.min_rtt / 4
        }
    }

    /// RACK loss detection (RFC 8985 §6.2) over the time-ordered transmissions.
    fn rack_detect(&mut self, now: u64) {
        self.reo_at = None;
        let reo = self.reo_wnd();
        while let Some(&(seq, x)) = self.tsorted.front() {
            if seq < self.snd_una {
                self.tsorted.pop_front();
                continue;
            }
            let s = self.segs[(seq - self.snd_una) as usize];
            if s.xmit != x || s.flags & SACKED != 0 {
                self.tsorted.pop_front();
                continue;
            }
            // Only segments sent before the most recently delivered one can be judged.
            if (x, seq) >= (self.rack_xmit, self.rack_seq) {
                break;
            }
            let deadline = x + self.rack_rtt + reo;
            if deadline <= now {
                self.tsorted.pop_front();
                self.mark_lost(seq);
            } else {
                self.reo_at = Some(deadline);
                break;
            }
        }
    }

    /// A multiplicative decrease (Reno and CUBIC; BBR keeps its own window).
    fn reduce(&mut self) {
        let beta = match self.cc {
            CongestionControl::Reno => 0.5,
            _ => CUBIC_BETA,
        };
        if self.cc == CongestionControl::Cubic {
            // RFC 9438 §4.7 fast convergence.
            self.w_max =
                if self.cwnd < self.w_max { self.cwnd * (1.0 + CUBIC_BETA) / 2.0 } else { self.cwnd };
            self.epoch = None;
        }
        self.ssthresh = (self.cwnd * beta).max(2.0);
    }

    fn grow(&mut self, acked: u64, now: u64) {
        if acked == 0 || !self.cwnd_limited {
            return;
        }
        let mut acked = acked as f64;
        if self.cwnd < self.ssthresh {
            let room = self.ssthresh - self.cwnd;
            let used = acked.min(room);
            self.cwnd += used;
            acked -= used;
            if acked <= 0.0 {
                return;
            }
        }
        match self.cc {
            CongestionControl::Reno => self.cwnd += acked / self.cwnd,
            CongestionControl::Cubic => self.cubic_ack(acked, now),
            CongestionControl::Bbr => {}
        }
    }

    fn cubic_ack(&mut self, acked: f64, now: u64) {
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
                self.cwnd_epoch = self.cwnd;
                now
            }
        };
        let rtt = self.srtt.unwrap_or(100e6);
        let t = (now - epoch) as f64 / 1e9 + rtt / 1e9;
        let target = (self.origin + CUBIC_C * (t - self.k).powi(3)).clamp(self.cwnd, 1.5 * self.cwnd);
        // RFC 9438 §4.3: the Reno-friendly estimate.
        let alpha =
            if self.w_est >= self.w_max { 1.0 } else { 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) };
        self.w_est += alpha * acked / self.cwnd;
        let mut next = if target < self.w_est {
            self.w_est
        } else {
            self.cwnd + acked * (target - self.cwnd) / self.cwnd
        };
        if self.w_max == 0.0 {
            // Linux (`bictcp_update`): until the first loss, at least 5% growth per RTT.
            next = next.max(self.cwnd + acked / 20.0);
        }
        self.cwnd = next;
    }

    /// HyStart delay-increase detection, once per round in slow start.
    fn hystart(&mut self) {
        if self.snd_una < self.round_end {
            return;
        }
        if self.cc == CongestionControl::Cubic
            && self.cwnd < self.ssthresh
            && self.cwnd >= HYSTART_LOW_WINDOW
            && self.round_samples >= HYSTART_MIN_SAMPLES
            && self.last_round_min != u64::MAX
        {
            let eta = (self.last_round_min / 8).clamp(4 * MS, 16 * MS);
            if self.round_min >= self.last_round_min + eta {
                self.ssthresh = self.cwnd;
            }
        }
        if self.round_samples >= HYSTART_MIN_SAMPLES {
            self.last_round_min = self.last_round_min.min(self.round_min);
        }
        self.round_end = self.snd_nxt;
        self.round_min = u64::MAX;
        self.round_samples = 0;
    }

    /// Sender: an ACK arrived. Segments to (re)transmit are appended to `out`.
    pub(crate) fn on_ack(&mut self, a: &AckMsg, now: Time, out: &mut Vec<u64>) {
        let now_ns = now.as_nanos();
        let echo = a.echo.as_nanos();
        if a.ack < self.snd_una || a.ack > self.snd_nxt {
            return; // old or impossible
        }
        let prior_in_flight = self.in_flight();
        self.rs = RateSample { prior_in_flight, ..RateSample::default() };
        self.rs_prior_time = None;
        if now_ns > echo {
            self.on_rtt(now_ns - echo);
            self.rs.rtt = now_ns - echo;
        }
        let mut delivered = 0u64;
        // SACK block: mark from both ends inwards until already-SACKed segments are met.
        let lo = a.sack.0.max(a.ack);
        let hi = a.sack.1.min(self.snd_nxt);
        if lo < hi {
            let mut s = hi;
            while s > lo && self.mark_sacked(s - 1, now_ns) {
                delivered += 1;
                s -= 1;
            }
            let mut s = lo;
            while s < hi && self.mark_sacked(s, now_ns) {
                delivered += 1;
                s += 1;
            }
        }
        // Cumulative ACK.
        let newly = a.ack - self.snd_una;
        for i in 0..newly {
            let s = self.segs.pop_front().expect("acked segments are outstanding");
            if s.flags & SACKED != 0 {
                self.sacked_out -= 1;
            } else {
                delivered += 1;
                self.rate_delivered(self.snd_una + i, s, now_ns);
                if s.flags & LOST != 0 {
                    self.lost_out -= 1;
                }
                if s.flags & RETRANS != 0 {
                    self.retrans_out -= 1;
                }
            }
        }
        self.snd_una = a.ack;
        // RACK: the segment that triggered this ACK was delivered.
        if delivered > 0 {
            let trig = if a.sack.0 < a.sack.1 { a.sack.1 - 1 } else { a.ack.saturating_sub(1) };
            if (echo, trig) > (self.rack_xmit, self.rack_seq) {
                self.rack_xmit = echo;
                self.rack_seq = trig;
                self.rack_rtt = now_ns.saturating_sub(echo);
            }
        }
        if newly > 0 {
            // RFC 6298 (5.3): restart the timer only when new data is acknowledged.
            self.rto = self.rto_from_rtt();
            self.rto_at = (self.packets_out() > 0).then_some(now_ns + self.rto);
        }
        self.tlp_ack(a);
        // ECN: once per window of data (RFC 3168 §6.1.2); BBR v1 ignores it.
        if a.ece
            && self.ecn
            && self.bbr.is_none()
            && self.state == State::Open
            && self.snd_una >= self.cwr_until
        {
            self.reduce();
            self.cwnd = self.ssthresh;
            self.cwr_until = self.snd_nxt;
        }
        self.hystart();
        self.rack_detect(now_ns);
        // Recovery state machine.
        if self.state != State::Open && self.snd_una >= self.high {
            if self.state == State::Recovery && self.bbr.is_none() {
                self.cwnd = self.ssthresh.max(1.0);
            }
            self.state = State::Open;
        }
        if self.state == State::Open && self.lost_out > 0 {
            self.enter_recovery(delivered);
        }
        if self.bbr.is_some() {
            self.bbr_ack(delivered, now_ns);
        } else {
            match self.state {
                State::Recovery => self.prr(delivered),
                State::Open | State::Loss => self.grow(delivered, now_ns),
            }
        }
        if !self.done() {
            self.fill(now, out);
            self.arm_tlp(now_ns);
        } else {
            self.rto_at = None;
            self.reo_at = None;
            self.tlp_at = None;
            self.pace_at = None;
        }
    }

    /// Fast recovery begins (RFC 6675): Reno and CUBIC reduce; BBR conserves packets.
    fn enter_recovery(&mut self, delivered: u64) {
        self.state = State::Recovery;
        self.recoveries += 1;
        self.high = self.snd_nxt;
        self.recover_fs = self.in_flight() + delivered;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.tlp_at = None;
        if self.bbr.is_none() {
            self.reduce();
        }
    }

    /// RFC 6937 Proportional Rate Reduction with the slow-start reduction bound.
    fn prr(&mut self, delivered: u64) {
        self.prr_delivered += delivered;
        let pipe = self.in_flight() as f64;
        let sndcnt = if pipe > self.ssthresh {
            ((self.prr_delivered as f64 * self.ssthresh / self.recover_fs.max(1) as f64).ceil()
                - self.prr_out as f64)
                .max(0.0)
        } else {
            let limit = (self.prr_delivered.saturating_sub(self.prr_out)).max(delivered) + 1;
            (self.ssthresh - pipe).min(limit as f64).max(0.0)
        };
        self.cwnd = (pipe + sndcnt).max(1.0);
    }

    /// Completes this ACK's delivery-rate sample and runs BBR on it.
    fn bbr_ack(&mut self, delivered: u64, now: u64) {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        self.rs.acked = delivered;
        if let Some(prior) = self.rs_prior_time {
            self.rs.delivered = self.delivered - self.rs.prior_delivered;
            let ack_elapsed = self.delivered_time.saturating_sub(prior);
            let interval = self.rs_send_elapsed.max(ack_elapsed);
            // An interval shorter than the path's RTT cannot be a real rate (RFC draft §3.3).
            self.rs.interval =
                if self.min_rtt != u64::MAX && interval >= self.min_rtt { interval } else { 0 };
        }
        let (cwnd, in_flight, total) = (self.cwnd, self.in_flight(), self.delivered);
        let (recovering, fast) = (self.state != State::Open, self.state == State::Recovery);
        let srtt = self.srtt;
        if let Some(b) = self.bbr.as_mut() {
            self.cwnd = b.on_ack(&self.rs, now, cwnd, in_flight, total, recovering, fast);
            if b.max_bw() == 0.0 && srtt.is_some() {
                b.init_pacing(INITIAL_CWND, srtt);
            }
        }
    }

    /// An ACK seen while a tail loss probe is out (RFC 8985 §7.4, Linux's
    /// `tcp_process_tlp_ack`): a D-SACK says the probe repaired nothing; an ACK beyond the probe's
    /// retransmission without one says it repaired a loss, which costs one reduction.
    fn tlp_ack(&mut self, a: &AckMsg) {
        let Some(high) = self.tlp_high else { return };
        if a.ack < high && !(a.dsack && self.tlp_retrans) {
            return;
        }
        if self.tlp_retrans && !a.dsack && a.ack == high {
            return; // wait for the ACK that tells
        }
        self.tlp_high = None;
        if self.tlp_retrans && !a.dsack && self.bbr.is_none() && self.state == State::Open {
            self.reduce();
            self.cwnd = self.ssthresh;
        }
    }

    /// The retransmission timer expired.
    fn on_rto(&mut self, now: u64, out: &mut Vec<u64>) {
        self.rto_at = None;
        self.tlp_at = None;
        self.tlp_high = None;
        if self.packets_out() == 0 {
            return;
        }
        self.timeouts += 1;
        let recovering = self.state != State::Open;
        match self.bbr.as_mut() {
            Some(b) => b.on_rto(self.cwnd, recovering),
            None if self.state != State::Loss => self.reduce(),
            None => {}
        }
        self.cwnd = 1.0;
        self.state = State::Loss;
        self.high = self.snd_nxt;
        // Linux marks every unSACKed segment lost; retransmissions in flight are forgotten.
        self.rexmit_q.clear();
        self.tsorted.clear();
        self.retrans_out = 0;
        self.lost_out = 0;
        for i in 0..self.segs.len() {
            let s = &mut self.segs[i];
            if s.flags & SACKED == 0 {
                s.flags = LOST;
                self.lost_out += 1;
                self.rexmit_q.push_back(self.snd_una + i as u64);
            }
        }
        self.rto = (self.rto * 2).min(MAX_RTO);
        self.reo_at = None;
        self.pace_next = now;
        self.fill(Time::from_nanos(now), out);
        self.rto_at = Some(now + self.rto);
    }

    // ---- receiver ----------------------------------------------------------------------------

    /// Receiver: data segment `seq`, sent at `sent`, arrived (`ce`: marked Congestion
    /// Experienced).
    pub(crate) fn on_data(&mut self, seq: u64, sent: Time, ce: bool, now: Time) -> RecvOutcome {
        let before = self.rcv_nxt;
        let mut immediate = false;
        let mut block = (0, 0);
        let dup = seq < self.rcv_nxt || self.ooo.range(..=seq).next_back().is_some_and(|(_, &h)| seq < h);
        if seq == self.rcv_nxt {
            self.rcv_nxt += 1;
            if let Some((&lo, &hi)) = self.ooo.first_key_value() {
                if lo == self.rcv_nxt {
                    self.ooo.remove(&lo);
                    self.rcv_nxt = hi;
                    immediate = true; // a hole was filled
                }
            }
        } else if seq > self.rcv_nxt {
            block = self.insert_ooo(seq);
            immediate = true;
        } else {
            immediate = true; // duplicate
        }
        if !self.ooo.is_empty() {
            immediate = true;
            if block.0 == block.1 {
                if let Some((&lo, &hi)) = self.ooo.first_key_value() {
                    block = (lo, hi);
                }
            }
        }
        if ce && !self.pending_ce {
            immediate = true;
        }
        self.pending_ce |= ce;
        if self.pending_echo.is_none() {
            self.pending_echo = Some(sent);
        }
        self.unacked += 1;
        if self.quickacks > 0 {
            self.quickacks -= 1;
            immediate = true;
        }
        if self.unacked >= 2 {
            immediate = true;
        }
        let ack = if immediate {
            let mut a = self.make_ack(block, sent);
            a.dsack = dup;
            Some(a)
        } else {
            if self.delack_at.is_none() {
                self.delack_at = Some(now.as_nanos() + DELACK);
            }
            None
        };
        RecvOutcome { in_order: self.rcv_nxt - before, ack }
    }

    fn make_ack(&mut self, sack: (u64, u64), fallback: Time) -> AckMsg {
        let m = AckMsg {
            ack: self.rcv_nxt,
            sack,
            echo: self.pending_echo.take().unwrap_or(fallback),
            ece: std::mem::take(&mut self.pending_ce),
            dsack: false,
        };
        self.unacked = 0;
        self.delack_at = None;
        m
    }

    /// Inserts `seq` into the out-of-order blocks; returns the block that now holds it.
    fn insert_ooo(&mut self, seq: u64) -> (u64, u64) {
        let prev = self.ooo.range(..=seq).next_back().map(|(&l, &h)| (l, h));
        let (mut lo, mut hi) = match prev {
            Some((l, h)) if seq < h => return (l, h), // already held
            Some((l, h)) if seq == h => {
                self.ooo.remove(&l);
                (l, h + 1)
            }
            _ => (seq, seq + 1),
        };
        if let Some(next_hi) = self.ooo.remove(&hi) {
            hi = next_hi;
        }
        if lo > seq {
            lo = seq;
        }
        self.ooo.insert(lo, hi);
        (lo, hi)
    }

    // ---- timers ------------------------------------------------------------------------------

    /// The earliest time this connection needs `on_timer` (retransmission, RACK reordering,
    /// loss probe, pacing or delayed-ACK timer).
    pub(crate) fn next_timer(&self) -> Option<Time> {
        [self.rto_at, self.reo_at, self.tlp_at, self.pace_at, self.delack_at]
            .into_iter()
            .flatten()
            .min()
            .map(Time::from_nanos)
    }

    /// Runs whatever timers are due at `now`: segments to send go to `out`; a delayed ACK due is
    /// returned.
    pub(crate) fn on_timer(&mut self, now: Time, out: &mut Vec<u64>) -> Option<AckMsg> {
        let n = now.as_nanos();
        let mut ack = None;
        if self.delack_at.is_some_and(|t| t <= n) {
            ack = Some(self.make_ack((0, 0), now));
        }
        if self.reo_at.is_some_and(|t| t <= n) {
            self.rack_detect(n);
            if self.state == State::Open && self.lost_out > 0 {
                self.enter_recovery(0);
                if self.bbr.is_none() {
                    self.cwnd = self.in_flight() as f64 + 1.0;
                }
            }
            self.fill(now, out);
        }
        if self.tlp_at.is_some_and(|t| t <= n) {
            self.on_tlp(n, out);
        }
        if self.rto_at.is_some_and(|t| t <= n) {
            self.on_rto(n, out);
        }
        if self.pace_at.is_some_and(|t| t <= n) && !self.done() {
            self.fill(now, out);
        }
        ack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(a: u64, sack: (u64, u64), echo_ms: u64) -> AckMsg {
        AckMsg { ack: a, sack, echo: Time::from_millis(echo_ms), ece: false, dsack: false }
    }

    #[test]
    fn slow_start_grows_by_acked_segments() {
        let mut t = Tcp::new(CongestionControl::Reno, false, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        assert_eq!(out.len(), 10);
        for s in 0..10 {
            out.clear();
            t.on_ack(&ack(s + 1, (0, 0), 0), Time::from_millis(10), &mut out);
            assert_eq!(out.len(), 2, "each ACK of one segment releases two in slow start");
        }
        assert_eq!(t.cwnd, 20.0);
    }

    #[test]
    fn sack_loss_recovery_retransmits_the_hole_and_reduces_once() {
        let mut t = Tcp::new(CongestionControl::Reno, false, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        // Segment 0 lost; 1..=4 arrive and are SACKed. The third SACKed segment marks 0 lost.
        let mut sent = Vec::new();
        for hi in 2..=5 {
            out.clear();
            t.on_ack(&ack(0, (1, hi), 0), Time::from_millis(10), &mut out);
            if hi == 4 {
                assert_eq!(out.first(), Some(&0), "the hole is retransmitted first: {out:?}");
            }
            sent.extend_from_slice(&out);
        }
        assert_eq!(sent.iter().filter(|&&s| s == 0).count(), 1);
        assert_eq!(t.retransmits, 1);
        assert_eq!(t.recoveries, 1);
        // Reno halves the window it had when the loss was detected (10 + 2 grown by SACKs).
        assert_eq!(t.ssthresh, 6.0);
        // The retransmission arrives: everything up to snd_nxt is acked, recovery ends.
        out.clear();
        let nxt = t.snd_nxt;
        t.on_ack(&ack(nxt, (0, 0), 10), Time::from_millis(20), &mut out);
        assert_eq!(t.state, State::Open);
        assert!(t.cwnd >= 6.0 && t.cwnd < 8.0, "from ssthresh, plus congestion avoidance: {}", t.cwnd);
        assert_eq!((t.sacked_out, t.lost_out, t.retrans_out), (0, 0, 0));
    }

    #[test]
    fn a_lost_retransmission_is_detected_without_a_timeout() {
        let mut t = Tcp::new(CongestionControl::Cubic, false, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        for hi in 2..=5 {
            out.clear();
            t.on_ack(&ack(0, (1, hi), 0), Time::from_millis(10), &mut out);
        }
        assert_eq!(t.retransmits, 1);
        // The rest of the first flight arrives (sent at 0: says nothing about the
        // retransmission sent at 10 ms).
        for hi in 6..=10 {
            out.clear();
            t.on_ack(&ack(0, (1, hi), 0), Time::from_millis(15), &mut out);
            assert!(!out.contains(&0));
        }
        // Segments sent with or after the retransmission (at 10 ms) are SACKed, segment 0 is
        // not: the retransmission was lost and is sent again, before any timer.
        let mut again = Vec::new();
        for hi in 11..=14 {
            out.clear();
            t.on_ack(&ack(0, (1, hi), 10), Time::from_millis(20), &mut out);
            again.extend_from_slice(&out);
        }
        assert!(again.contains(&0), "segment 0 retransmitted again: {again:?}");
        assert_eq!(t.retransmits, 2);
        assert_eq!(t.timeouts, 0);
    }

    #[test]
    fn rto_is_not_pushed_back_by_sends() {
        let mut t = Tcp::new(CongestionControl::Reno, false, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        let first = t.rto_at;
        assert_eq!(first, Some(INITIAL_RTO));
        // SACKs keep arriving and new data keeps being sent: the timer stays where it was.
        for hi in 2..4 {
            out.clear();
            t.on_ack(&ack(0, (1, hi), 0), Time::from_millis(100 + hi), &mut out);
            assert!(!out.is_empty());
        }
        assert_eq!(t.rto_at, first);
    }

    #[test]
    fn rto_backs_off_and_retransmits_the_head() {
        let mut t = Tcp::new(CongestionControl::Reno, false, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        let first = t.next_timer().unwrap();
        assert_eq!(first, Time::from_nanos(INITIAL_RTO));
        out.clear();
        t.on_timer(first, &mut out);
        assert_eq!(t.timeouts, 1);
        assert_eq!(out, vec![0], "cwnd 1: the head only");
        let second = t.next_timer().unwrap();
        assert_eq!(second - first, Span::from_nanos(2 * INITIAL_RTO));
        out.clear();
        t.on_timer(second, &mut out);
        assert_eq!(t.timeouts, 2);
        assert_eq!(t.next_timer().unwrap() - second, Span::from_nanos(4 * INITIAL_RTO));
        // New data acknowledged: the backoff ends and the RTO comes from the RTT again.
        out.clear();
        let now = second + Span::from_millis(50);
        t.on_ack(&ack(1, (0, 0), second.as_nanos() / MS), now, &mut out);
        assert_eq!(t.rto, MIN_RTO);
        assert_eq!(t.next_timer(), Some(now + Span::from_nanos(MIN_RTO)));
    }

    #[test]
    fn receiver_delays_acks_after_quickacks_and_acks_holes_at_once() {
        let mut t = Tcp::new(CongestionControl::Cubic, false, None, 100, 1);
        let now = Time::from_millis(1);
        for s in 0..QUICKACKS as u64 {
            assert!(t.on_data(s, now, false, now).ack.is_some());
        }
        let q = QUICKACKS as u64;
        assert!(t.on_data(q, now, false, now).ack.is_none(), "delayed");
        let a = t.on_data(q + 1, now, false, now).ack.expect("every second segment");
        assert_eq!(a.ack, q + 2);
        let r = t.on_data(q + 3, now, false, now);
        assert_eq!(r.ack.map(|a| (a.ack, a.sack)), Some((q + 2, (q + 3, q + 4))));
        assert_eq!(r.in_order, 0);
        let r = t.on_data(q + 2, now, false, now);
        assert_eq!(r.in_order, 2);
        assert_eq!(r.ack.map(|a| a.ack), Some(q + 4));
        // A lone segment is acked by the delayed-ACK timer.
        assert!(t.on_data(q + 4, now, false, now).ack.is_none());
        let due = t.next_timer().unwrap();
        assert_eq!(due, now + Span::from_nanos(DELACK));
        assert_eq!(t.on_timer(due, &mut Vec::new()).map(|a| a.ack), Some(q + 5));
    }

    #[test]
    fn ooo_blocks_merge() {
        let mut t = Tcp::new(CongestionControl::Cubic, false, None, 100, 1);
        let z = Time::ZERO;
        assert_eq!(t.on_data(2, z, false, z).ack.unwrap().sack, (2, 3));
        assert_eq!(t.on_data(4, z, false, z).ack.unwrap().sack, (4, 5));
        assert_eq!(t.on_data(3, z, false, z).ack.unwrap().sack, (2, 5));
        assert_eq!(t.on_data(0, z, false, z).in_order, 1);
        let r = t.on_data(1, z, false, z);
        assert_eq!(r.in_order, 4);
        assert_eq!(r.ack.unwrap().ack, 5);
    }

    #[test]
    fn ecn_reduces_once_per_window() {
        let mut t = Tcp::new(CongestionControl::Reno, true, None, 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        let now = Time::from_millis(10);
        t.on_ack(&AckMsg { ece: true, ..ack(1, (0, 0), 0) }, now, &mut out);
        let after = t.cwnd;
        assert!(after < 10.0);
        t.on_ack(&AckMsg { ece: true, ..ack(2, (0, 0), 0) }, now, &mut out);
        assert!(t.cwnd >= after, "second CE in the same window must not reduce again");
    }

    #[test]
    fn a_tail_loss_is_probed_before_the_retransmission_timer() {
        let mut t = Tcp::new(CongestionControl::Cubic, false, Some(10), 10_000, 1);
        let mut out = Vec::new();
        t.fill(Time::ZERO, &mut out);
        assert_eq!(out.len(), 10);
        // Segments 0..=7 are acknowledged at 20 ms; 8 and 9 (the tail) are lost.
        out.clear();
        t.on_ack(&ack(8, (0, 0), 0), Time::from_millis(20), &mut out);
        assert!(out.is_empty(), "the flow has nothing new to send");
        let pto = t.next_timer().unwrap();
        assert!(pto < Time::from_millis(20) + Span::from_nanos(MIN_RTO), "probe before the RTO: {pto:?}");
        t.on_timer(pto, &mut out);
        assert_eq!(out, vec![9], "the last segment is sent again");
        assert_eq!((t.probes, t.timeouts), (1, 0));
        // The probe's ACK SACKs 9: RACK marks 8 lost, recovery repairs it, no timeout.
        out.clear();
        let now = pto + Span::from_millis(20);
        t.on_ack(&ack(8, (9, 10), pto.as_nanos() / MS), now, &mut out);
        assert_eq!(out, vec![8]);
        out.clear();
        t.on_ack(&ack(10, (0, 0), now.as_nanos() / MS), now + Span::from_millis(20), &mut out);
        assert_eq!(t.snd_una, 10);
        assert_eq!(t.timeouts, 0);
    }

    #[test]
    fn bbr_paces_and_leaves_startup_when_bandwidth_stops_growing() {
        let mut t = Tcp::new(CongestionControl::Bbr, false, None, 100_000, 1);
        // A path of 1 segment per ms (12 Mbit/s at 1500 bytes) and 20 ms RTT, no queue beyond
        // what the sender itself builds: each segment is delivered 1 ms after the previous one
        // at the earliest, and acknowledged 20 ms after it was sent.
        let mut out = Vec::new();
        let mut sent: VecDeque<(u64, u64)> = VecDeque::new(); // (seq, sent ns)
        let mut link_free = 0u64;
        let mut now = 0u64;
        t.fill(Time::ZERO, &mut out);
        for &s in &out {
            sent.push_back((s, 0));
        }
        let mut max_burst_gap_ok = true;
        while now < 3_000 * MS {
            // Next event: the next ACK, or the sender's timer (pacing).
            let ack_at = sent.front().map(|&(_, x)| link_free.max(x) + MS + 19 * MS);
            let timer = t.next_timer().map(|x| x.as_nanos());
            let next = match (ack_at, timer) {
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
                (None, None) => break,
            };
            now = next;
            out.clear();
            if ack_at == Some(now) {
                let (seq, x) = sent.pop_front().unwrap();
                link_free = link_free.max(x) + MS;
                let a = AckMsg { echo: Time::from_nanos(x), ..ack(seq + 1, (0, 0), 0) };
                t.on_ack(&a, Time::from_nanos(now), &mut out);
            } else {
                t.on_timer(Time::from_nanos(now), &mut out);
            }
            if out.len() > 3 && t.bbr.as_ref().unwrap().full_pipe() {
                max_burst_gap_ok = false;
            }
            for &s in &out {
                sent.push_back((s, now));
            }
        }
        let b = t.bbr.as_ref().unwrap();
        assert!(b.full_pipe(), "startup ended");
        let bw_per_ms = b.max_bw() * MS as f64;
        assert!((0.9..1.1).contains(&bw_per_ms), "bandwidth estimate {bw_per_ms} segments/ms");
        assert!(max_burst_gap_ok, "after startup, sends are paced, not burst");
        assert!(!b.in_probe_rtt());
    }
}
