//! BBR v1 congestion control (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM
//! Queue 2016; draft-cardwell-iccrg-bbr-congestion-control-00), with the choices Linux's
//! `tcp_bbr.c` makes: a max-bandwidth filter over ten round trips, a 10 s min-RTT filter, a
//! startup gain of 2/ln 2, three rounds without 25% growth end startup, an eight-phase
//! ProbeBW gain cycle entered at a random phase other than the draining one, ProbeRTT at four
//! segments for 200 ms and one round, packet conservation in the first round of recovery, and a
//! pacing rate 1% below the estimate, and the ACK-aggregation allowance Linux adds to the window
//! (the most data ACKed beyond the bandwidth estimate in one aggregation epoch, over the last
//! five to ten rounds, capped at 100 ms of the estimate). Not modelled: the long-term (policer)
//! bandwidth sampling and the idle-restart path.
//!
//! Units: segments, nanoseconds; bandwidth in segments per nanosecond.

const HIGH_GAIN: f64 = 2.885; // 2/ln(2)
const DRAIN_GAIN: f64 = 1.0 / HIGH_GAIN;
const CWND_GAIN: f64 = 2.0;
const PACING_GAIN: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
const BW_ROUNDS: usize = 10;
const MIN_RTT_WIN: u64 = 10_000_000_000;
const PROBE_RTT_TIME: u64 = 200_000_000;
const MIN_CWND: f64 = 4.0;
const FULL_BW_THRESH: f64 = 1.25;
const FULL_BW_ROUNDS: u32 = 3;
const PACING_MARGIN: f64 = 0.99;
const INIT_CWND: f64 = 10.0;
const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
const EXTRA_ACKED_MAX: u64 = 100_000_000;
const ACK_EPOCH_RESET: f64 = (1u64 << 20) as f64;

/// A delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation) taken on one ACK.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RateSample {
    /// `delivered` when the most recently sent of the newly delivered segments was sent.
    pub prior_delivered: u64,
    /// Segments delivered over the interval.
    pub delivered: u64,
    /// The sample's interval, ns (0: invalid sample).
    pub interval: u64,
    /// The sample was taken while the sender was application-limited.
    pub app_limited: bool,
    /// Segments newly marked lost on this ACK.
    pub losses: u64,
    /// RTT sample of this ACK, ns (0: none).
    pub rtt: u64,
    /// Segments in flight before this ACK.
    pub prior_in_flight: u64,
    /// Segments this ACK newly delivered.
    pub acked: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// BBR's state for one connection.
#[derive(Clone, Debug)]
pub(crate) struct Bbr {
    mode: Mode,
    /// Per-round maximum delivery rate of the last [`BW_ROUNDS`] rounds, by round number.
    bw_win: [(u64, f64); BW_ROUNDS],
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    min_rtt: u64,
    min_rtt_stamp: u64,
    full_bw: f64,
    full_bw_cnt: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_stamp: u64,
    pacing_gain: f64,
    cwnd_gain: f64,
    prior_cwnd: f64,
    packet_conservation: bool,
    /// Recovery (or loss) state seen on the previous ACK.
    prev_recovering: bool,
    probe_rtt_done: Option<u64>,
    probe_rtt_round_done: bool,
    // ACK aggregation: the two windows' maxima, rounds in the current one, which is current,
    // and the epoch (start, segments ACKed since).
    extra_acked: [f64; 2],
    extra_acked_rounds: u32,
    extra_acked_idx: usize,
    ack_epoch_stamp: u64,
    ack_epoch_acked: f64,
    /// Pacing rate, segments per ns (0: not set yet).
    pub pacing_rate: f64,
    rng: u64,
}

impl Bbr {
    /// A fresh connection; `seed` chooses the ProbeBW phase it starts in.
    pub(crate) fn new(seed: u64) -> Bbr {
        Bbr {
            mode: Mode::Startup,
            bw_win: [(0, 0.0); BW_ROUNDS],
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: u64::MAX,
            min_rtt_stamp: 0,
            full_bw: 0.0,
            full_bw_cnt: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            prior_cwnd: 0.0,
            packet_conservation: false,
            prev_recovering: false,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            extra_acked: [0.0; 2],
            extra_acked_rounds: 0,
            extra_acked_idx: 0,
            ack_epoch_stamp: 0,
            ack_epoch_acked: 0.0,
            pacing_rate: 0.0,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    fn rand_below(&mut self, n: u64) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }

    /// The bottleneck bandwidth estimate: the windowed maximum, segments per ns.
    pub(crate) fn max_bw(&self) -> f64 {
        let oldest = self.round.saturating_sub(BW_ROUNDS as u64 - 1);
        self.bw_win.iter().filter(|(r, _)| *r >= oldest).map(|(_, b)| *b).fold(0.0, f64::max)
    }

    /// Segments in flight `gain` times the estimated BDP would take, with Linux's allowance for
    /// send quantisation (three bursts of two segments, one more in the probing phase).
    fn inflight(&self, bw: f64, gain: f64) -> f64 {
        self.window(bw, gain, 0.0)
    }

    fn window(&self, bw: f64, gain: f64, extra: f64) -> f64 {
        if self.min_rtt == u64::MAX {
            return INIT_CWND;
        }
        let bdp = bw * self.min_rtt as f64;
        let mut cwnd = (bdp * gain + extra).ceil() + 6.0;
        cwnd += cwnd % 2.0; // even, so delayed ACKs release whole pairs
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2.0;
        }
        cwnd
    }

    /// Saves the window before a reduction (recovery, loss, ProbeRTT).
    fn save_cwnd(&mut self, cwnd: f64, recovering: bool) {
        if !recovering && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(cwnd);
        }
    }

    /// A retransmission timeout: remember the window, restart the full-bandwidth check.
    pub(crate) fn on_rto(&mut self, cwnd: f64, recovering: bool) {
        self.save_cwnd(cwnd, recovering);
        self.prev_recovering = true;
        self.full_bw = 0.0;
        self.round_start = true;
    }

    /// Initial pacing rate: the initial window over the first RTT sample (1 ms without one),
    /// at the startup gain.
    pub(crate) fn init_pacing(&mut self, cwnd: f64, srtt: Option<f64>) {
        let rtt = srtt.unwrap_or(1e6).max(1.0);
        self.pacing_rate = HIGH_GAIN * cwnd / rtt;
    }

    /// Runs BBR's model on one ACK and returns the new window. `recovering`: the sender is in
    /// fast recovery (`fast`) or after a timeout; `delivered`: the connection's delivered count;
    /// `in_flight`: segments in flight now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_ack(
        &mut self,
        rs: &RateSample,
        now: u64,
        cwnd: f64,
        in_flight: u64,
        delivered: u64,
        recovering: bool,
        fast: bool,
    ) -> f64 {
        // ---- model ----
        self.round_start = false;
        if rs.interval > 0 {
            if rs.prior_delivered >= self.next_round_delivered {
                self.next_round_delivered = delivered;
                self.round += 1;
                self.round_start = true;
                self.packet_conservation = false;
            }
            let bw = rs.delivered as f64 / rs.interval as f64;
            if !rs.app_limited || bw >= self.max_bw() {
                let slot = (self.round % BW_ROUNDS as u64) as usize;
                if self.bw_win[slot].0 != self.round {
                    self.bw_win[slot] = (self.round, 0.0);
                }
                self.bw_win[slot].1 = self.bw_win[slot].1.max(bw);
            }
        }
        let bw = self.max_bw();
        if rs.interval > 0 && rs.acked > 0 {
            self.ack_aggregation(rs, now, bw, cwnd);
        }
        // ProbeBW phase.
        if self.mode == Mode::ProbeBw && self.next_phase(rs, now, bw) {
            self.cycle_idx = (self.cycle_idx + 1) % PACING_GAIN.len();
            self.cycle_stamp = now;
        }
        // Full pipe?
        if !self.full_bw_reached && self.round_start && !rs.app_limited {
            if bw >= self.full_bw * FULL_BW_THRESH {
                self.full_bw = bw;
                self.full_bw_cnt = 0;
            } else {
                self.full_bw_cnt += 1;
                self.full_bw_reached = self.full_bw_cnt >= FULL_BW_ROUNDS;
            }
        }
        // Drain.
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && (in_flight as f64) <= self.inflight(bw, 1.0) {
            self.enter_probe_bw(now);
        }
        // Min RTT and ProbeRTT.
        let expired = self.min_rtt != u64::MAX && now > self.min_rtt_stamp + MIN_RTT_WIN;
        if rs.rtt > 0 && (rs.rtt < self.min_rtt || expired) {
            self.min_rtt = rs.rtt;
            self.min_rtt_stamp = now;
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.save_cwnd(cwnd, recovering);
            self.mode = Mode::ProbeRtt;
            self.probe_rtt_done = None;
        }
        let mut cwnd = cwnd;
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if in_flight as f64 <= MIN_CWND => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_TIME);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now >= done {
                        self.min_rtt_stamp = now;
                        cwnd = cwnd.max(self.prior_cwnd);
                        if self.full_bw_reached {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = Mode::Startup;
                        }
                    }
                }
            }
        }
        // Gains.
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw => (PACING_GAIN[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (1.0, 1.0),
        };
        // ---- pacing ----
        if bw > 0.0 {
            let rate = bw * self.pacing_gain * PACING_MARGIN;
            if self.full_bw_reached || rate > self.pacing_rate {
                self.pacing_rate = rate;
            }
        }
        // ---- window ----
        let acked = rs.acked as f64;
        if rs.losses > 0 {
            cwnd = (cwnd - rs.losses as f64).max(1.0);
        }
        let mut conserving = false;
        if fast && !self.prev_recovering {
            // First round of fast recovery: packet conservation.
            self.save_cwnd(cwnd, false);
            self.packet_conservation = true;
            self.next_round_delivered = delivered;
            cwnd = in_flight as f64 + acked;
            conserving = true;
        } else if self.prev_recovering && !recovering {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_recovering = recovering;
        if self.packet_conservation {
            cwnd = cwnd.max(in_flight as f64 + acked);
            conserving = true;
        }
        if !conserving {
            let target = self.inflight_with_aggregation(bw, self.cwnd_gain);
            if self.full_bw_reached {
                cwnd = (cwnd + acked).min(target);
            } else if cwnd < target || delivered < INIT_CWND as u64 {
                cwnd += acked;
            }
            cwnd = cwnd.max(MIN_CWND);
        }
        if self.mode == Mode::ProbeRtt {
            cwnd = cwnd.min(MIN_CWND);
        }
        cwnd
    }

    /// Linux's `bbr_update_ack_aggregation`: how much more was ACKed in this epoch than the
    /// bandwidth estimate explains.
    fn ack_aggregation(&mut self, rs: &RateSample, now: u64, bw: f64, cwnd: f64) {
        if self.round_start {
            self.extra_acked_rounds = (self.extra_acked_rounds + 1).min(31);
            if self.extra_acked_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                self.extra_acked_rounds = 0;
                self.extra_acked_idx ^= 1;
                self.extra_acked[self.extra_acked_idx] = 0.0;
            }
        }
        let acked = rs.acked as f64;
        let mut expected = bw * now.saturating_sub(self.ack_epoch_stamp) as f64;
        if self.ack_epoch_acked <= expected || self.ack_epoch_acked + acked >= ACK_EPOCH_RESET {
            self.ack_epoch_acked = 0.0;
            self.ack_epoch_stamp = now;
            expected = 0.0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + acked).min(ACK_EPOCH_RESET - 1.0);
        let extra = (self.ack_epoch_acked - expected).min(cwnd);
        let slot = &mut self.extra_acked[self.extra_acked_idx];
        *slot = slot.max(extra);
    }

    /// The window target: BDP times `gain`, plus the ACK-aggregation allowance once the pipe is
    /// full, plus the quantisation allowance.
    fn inflight_with_aggregation(&self, bw: f64, gain: f64) -> f64 {
        let aggr = if self.full_bw_reached {
            self.extra_acked[0].max(self.extra_acked[1]).min(bw * EXTRA_ACKED_MAX as f64)
        } else {
            0.0
        };
        self.window(bw, gain, aggr)
    }

    fn enter_probe_bw(&mut self, now: u64) {
        self.mode = Mode::ProbeBw;
        // A random phase other than the draining one (index 1): the next phase after
        // 2..=7 or 0.
        let len = PACING_GAIN.len() as u64;
        self.cycle_idx = ((len - 1 - self.rand_below(len - 1) + 1) % len) as usize;
        self.cycle_stamp = now;
    }

    fn next_phase(&self, rs: &RateSample, now: u64, bw: f64) -> bool {
        let full = now.saturating_sub(self.cycle_stamp) > self.min_rtt;
        let gain = PACING_GAIN[self.cycle_idx];
        if gain > 1.0 {
            full && (rs.losses > 0 || rs.prior_in_flight as f64 >= self.inflight(bw, gain))
        } else if gain < 1.0 {
            full || rs.prior_in_flight as f64 <= self.inflight(bw, 1.0)
        } else {
            full
        }
    }

    /// Whether the mode is ProbeRTT.
    #[cfg(test)]
    pub(crate) fn in_probe_rtt(&self) -> bool {
        self.mode == Mode::ProbeRtt
    }

    /// Whether startup has found the pipe full.
    #[cfg(test)]
    pub(crate) fn full_pipe(&self) -> bool {
        self.full_bw_reached
    }
}
