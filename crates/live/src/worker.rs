//! Several worker threads: each runs the forwarding loop of [`crate::shaper`] with its own
//! sockets, buffer pool and engines built from the same configuration; a coordinator keeps the
//! classes they share exact ([`crate::rebalance`]).
//!
//! - **Sharding.** Every worker's receive ring on an interface joins one `PACKET_FANOUT` group
//!   whose classic BPF program hashes the subscriber's address ([`crate::sys::fanout_program`]): the
//!   source of frames arriving on `in_if` and the destination of those arriving on `out_if` (or
//!   the other way round, [`crate::shaper::Options::shard_by`]). A subscriber's frames, all
//!   flows, in each direction, go to one worker, so its leaf classes are whole in one engine.
//!   Workers join both groups in turn, so worker `i` is member `i` of both and a subscriber's two
//!   directions meet on the same worker.
//! - **Shared classes.** Inner, top-level and default HTB classes span workers
//!   ([`crate::rebalance::shared_classes`]); a root that limits a rate and is not HTB cannot be
//!   shared, and runs in one worker ([`crate::rebalance::shardable`]). Each worker reports, for each,
//!   what its copy sent and whether it is held back with a backlog; every
//!   [`crate::rebalance::PERIOD`] the coordinator (the calling thread) splits the class's rate
//!   and ceil between the workers and they apply their shares with
//!   [`sluice_engine::Engine::set_class_rate`]. Lock-free: atomics only, the engines never leave
//!   their threads.
//! - **Control.** `stats` sums the workers' snapshots; `reload` is refused with several workers
//!   (not yet done: each worker would need the new program and the shares reset).

use crate::control::{self, Request};
use crate::rebalance::{shared_classes, Rebalancer, Report, SharedClass, PERIOD};
use crate::shaper::{run_worker, Dir, DirSnapshot, Options, PacingStats, Port, Snapshot};
use crate::sys::FanoutKey;
use crate::timing::Calibration;
use crate::LiveError;
use sluice_core::htb::ActiveLeaves;
use sluice_core::{Rate, Span, Time};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One shared class in one worker and direction: the worker's report and its share.
#[derive(Default)]
struct Slot {
    bytes: AtomicU64,
    hungry: AtomicBool,
    /// The worker's backlogged leaves: count, rates, quanta.
    leaves: AtomicU64,
    leaf_rates: AtomicU64,
    leaf_quanta: AtomicU64,
    rate: AtomicU64,
    ceil: AtomicU64,
}

/// What the workers and the coordinator share.
struct Link {
    /// Shared classes per direction (forward, reverse).
    classes: [Vec<SharedClass>; 2],
    /// `slots[(worker * 2 + dir) * stride + k]`.
    slots: Vec<Slot>,
    stride: usize,
    /// Bumped after new shares are written.
    generation: AtomicU64,
    /// Workers that joined their fanout groups (they join in order).
    joined: AtomicUsize,
}

impl Link {
    fn slot(&self, worker: usize, dir: usize, k: usize) -> &Slot {
        &self.slots[(worker * 2 + dir) * self.stride + k]
    }
}

/// A worker's end of the [`Link`], given to [`run_worker`].
pub(crate) struct Shard {
    index: usize,
    group: u16,
    link: Arc<Link>,
    seen: u64,
    reported: Time,
    snapshots: Receiver<SyncSender<Snapshot>>,
    warned: bool,
}

impl Shard {
    /// Joins the fanout groups of both interfaces, after the workers before this one.
    pub(crate) fn join(&mut self, ports: &mut [Port; 2], opts: &Options) -> Result<(), LiveError> {
        let t0 = Instant::now();
        while self.link.joined.load(Ordering::Acquire) != self.index {
            if t0.elapsed() > Duration::from_secs(10) || opts.stop.load(Ordering::Relaxed) {
                return Err(LiveError::Io("worker start-up: an earlier worker did not come up".into()));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let other = match opts.shard_by {
            FanoutKey::Source => FanoutKey::Destination,
            FanoutKey::Destination => FanoutKey::Source,
        };
        // A group belongs to one interface: one id each.
        for (i, (port, key)) in ports.iter_mut().zip([opts.shard_by, other]).enumerate() {
            port.join_fanout(self.group.wrapping_add(i as u16), key)
                .map_err(|e| LiveError::Io(format!("{}: PACKET_FANOUT: {e}", port.name)))?;
        }
        self.link.joined.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Once per turn: applies new shares, reports the shared classes' load (every half period)
    /// and answers snapshot requests.
    pub(crate) fn exchange(
        &mut self,
        dirs: &mut [Dir; 2],
        now: Time,
        snapshot: &dyn Fn(&[Dir; 2]) -> Snapshot,
    ) {
        let link = &*self.link;
        let g = link.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.seen = g;
            for (d, dir) in dirs.iter_mut().enumerate() {
                let Some(e) = dir.engine.as_mut() else { continue };
                for (k, c) in link.classes[d].iter().enumerate() {
                    let s = link.slot(self.index, d, k);
                    let (rate, ceil) = (s.rate.load(Ordering::Relaxed), s.ceil.load(Ordering::Relaxed));
                    if let Err(err) =
                        e.set_class_rate(c.classid, Rate::from_bps(rate), Rate::from_bps(ceil), now)
                    {
                        if !self.warned {
                            eprintln!("sluice shape: worker {}: {err}", self.index);
                            self.warned = true;
                        }
                    }
                }
            }
        }
        if now - self.reported >= Span::from_nanos(PERIOD.as_nanos() / 2) {
            self.reported = now;
            for (d, dir) in dirs.iter().enumerate() {
                let Some(e) = dir.engine.as_ref() else { continue };
                let backlog = e.backlog_bytes() > 0;
                for (k, c) in link.classes[d].iter().enumerate() {
                    let Some(l) = e.class_load(c.classid, now) else { continue };
                    let s = link.slot(self.index, d, k);
                    s.bytes.store(l.bytes, Ordering::Relaxed);
                    s.hungry.store(l.limited && backlog, Ordering::Relaxed);
                    s.leaves.store(l.active.leaves as u64, Ordering::Relaxed);
                    s.leaf_rates.store(l.active.rate_bps, Ordering::Relaxed);
                    s.leaf_quanta.store(l.active.quantum, Ordering::Relaxed);
                }
            }
        }
        while let Ok(reply) = self.snapshots.try_recv() {
            let _ = reply.send(snapshot(dirs));
        }
    }

    /// The longest the loop may sleep: a period while a shared class holds a backlog (its share
    /// may grow any time), else the usual 20 ms.
    pub(crate) fn longest_sleep(&self, dirs: &[Dir; 2]) -> Span {
        let busy = dirs.iter().enumerate().any(|(d, dir)| {
            !self.link.classes[d].is_empty() && dir.engine.as_ref().is_some_and(|e| e.qlen() > 0)
        });
        if busy {
            PERIOD
        } else {
            Span::from_millis(20)
        }
    }
}

/// The classes shared in each direction (what [`crate::shaper::run`] shapes there).
fn classes_of(opts: &Options) -> [Vec<SharedClass>; 2] {
    let reverse = match &opts.reverse {
        Some(r) => shared_classes(r, &opts.in_if),
        None => match crate::config::ingress_target(&opts.forward, &opts.out_if) {
            Some((ifb, _)) => shared_classes(&opts.forward, &ifb),
            None => Vec::new(),
        },
    };
    [shared_classes(&opts.forward, &opts.out_if), reverse]
}

/// Runs `opts.workers` workers and coordinates them until stopped; returns their summed
/// snapshot.
pub(crate) fn run_sharded(opts: Options, cal: Calibration) -> Result<Snapshot, LiveError> {
    let n = opts.workers;
    let classes = classes_of(&opts);
    let stride = classes.iter().map(Vec::len).max().unwrap_or(0);
    let link = Arc::new(Link {
        slots: (0..n * 2 * stride).map(|_| Slot::default()).collect(),
        classes: classes.clone(),
        stride,
        generation: AtomicU64::new(0),
        joined: AtomicUsize::new(0),
    });
    let mut rebalancers: [Vec<Rebalancer>; 2] =
        classes.map(|cs| cs.into_iter().map(|c| Rebalancer::new(c, n)).collect());
    publish(&link, &rebalancers);
    // Fanout group ids are per interface and namespace: one of our own.
    let group = (std::process::id() as u16) ^ 0x5a17;
    let mut workers = Vec::with_capacity(n);
    let mut requests = Vec::with_capacity(n);
    for index in 0..n {
        let (tx, rx) = mpsc::channel();
        requests.push(tx);
        let shard = Shard {
            index,
            group,
            link: link.clone(),
            seen: 0,
            reported: Time::ZERO,
            snapshots: rx,
            warned: false,
        };
        let o = Options {
            in_if: opts.in_if.clone(),
            out_if: opts.out_if.clone(),
            forward: opts.forward.clone(),
            reverse: opts.reverse.clone(),
            control: None,
            metrics: None,
            max_duration: opts.max_duration,
            stop: opts.stop.clone(),
            load_config: Box::new(|_| Err("reload is not supported with several workers".into())),
            verbose: opts.verbose && index == 0,
            netns: opts.netns.clone(),
            pacing: opts.pacing,
            workers: 1,
            shard_by: opts.shard_by,
            io: opts.io,
        };
        let h = std::thread::Builder::new()
            .name(format!("sluice-w{index}"))
            .spawn(move || run_worker(o, cal, Some(shard)))
            .map_err(|e| LiveError::Io(format!("worker thread: {e}")))?;
        workers.push(h);
    }
    if opts.verbose {
        eprintln!(
            "sluice shape: {n} workers; shared classes rebalanced every {}us: {}",
            PERIOD.as_micros(),
            link.classes.iter().flatten().map(|c| c.classid.to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    let control: Option<Receiver<Request>> = match &opts.control {
        Some(p) => Some(
            control::serve(p, opts.stop.clone())
                .map_err(|e| LiveError::Io(format!("control socket {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let metrics_text = Arc::new(Mutex::new(String::new()));
    if let Some(addr) = opts.metrics {
        control::serve_metrics(addr, metrics_text.clone(), opts.stop.clone())
            .map_err(|e| LiveError::Io(format!("metrics {addr}: {e}")))?;
    }
    let gather = |requests: &[mpsc::Sender<SyncSender<Snapshot>>]| -> Option<Snapshot> {
        let parts: Vec<Snapshot> = requests
            .iter()
            .filter_map(|r| {
                let (tx, rx) = mpsc::sync_channel(1);
                r.send(tx).ok()?;
                rx.recv_timeout(Duration::from_secs(1)).ok()
            })
            .collect();
        (parts.len() == n).then(|| merge(parts, n))
    };
    let t0 = Instant::now();
    // Reused every period (5 000 times a second): the coordinator allocates nothing per tick.
    let mut reports: Vec<Report> = Vec::with_capacity(n);
    let mut last = Instant::now();
    let mut last_metrics = Instant::now();
    while !opts.stop.load(Ordering::Relaxed)
        && opts.max_duration.is_none_or(|m| t0.elapsed() < m)
        && !workers.iter().any(|w| w.is_finished())
    {
        let due = last + Duration::from_nanos(PERIOD.as_nanos());
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let now = Instant::now();
        let period = Span::from_nanos(now.duration_since(last).as_nanos() as u64);
        last = now;
        for (d, rs) in rebalancers.iter_mut().enumerate() {
            for (k, r) in rs.iter_mut().enumerate() {
                reports.clear();
                reports.extend((0..n).map(|w| {
                    let s = link.slot(w, d, k);
                    Report {
                        bytes: s.bytes.load(Ordering::Relaxed),
                        hungry: s.hungry.load(Ordering::Relaxed),
                        active: ActiveLeaves {
                            leaves: s.leaves.load(Ordering::Relaxed) as u32,
                            rate_bps: s.leaf_rates.load(Ordering::Relaxed),
                            quantum: s.leaf_quanta.load(Ordering::Relaxed),
                        },
                    }
                }));
                r.tick(period, &reports);
            }
        }
        publish(&link, &rebalancers);
        if let Some(rx) = &control {
            while let Ok(req) = rx.try_recv() {
                let mut words = req.line.split_whitespace();
                let answer = match (words.next(), words.next()) {
                    (Some("ping"), _) => "pong\n".to_string(),
                    (Some("stats"), json) => match gather(&requests) {
                        Some(s) if json == Some("json") => serde_json::to_string_pretty(&s).unwrap_or_default() + "\n",
                        Some(s) => s.to_text(),
                        None => "error: a worker did not answer\n".into(),
                    },
                    (Some("reload"), _) => {
                        "error: reload is not supported with several workers yet; the running configuration is unchanged\n"
                            .into()
                    }
                    _ => format!("error: unknown command `{}` (stats, stats json, ping)\n", req.line),
                };
                let _ = req.reply.send(answer);
            }
        }
        if opts.metrics.is_some() && last_metrics.elapsed() >= Duration::from_millis(100) {
            last_metrics = Instant::now();
            if let (Some(s), Ok(mut t)) = (gather(&requests), metrics_text.lock()) {
                *t = s.to_prometheus();
            }
        }
    }
    opts.stop.store(true, Ordering::Relaxed);
    let mut parts = Vec::with_capacity(n);
    let mut error = None;
    for w in workers {
        match w.join() {
            Ok(Ok(s)) => parts.push(s),
            Ok(Err(e)) => error = error.or(Some(e)),
            Err(_) => error = error.or(Some(LiveError::Io("a worker panicked".into()))),
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(merge(parts, n)),
    }
}

fn publish(link: &Link, rebalancers: &[Vec<Rebalancer>; 2]) {
    for (d, rs) in rebalancers.iter().enumerate() {
        for (k, r) in rs.iter().enumerate() {
            for (w, (rate, ceil)) in r.shares().enumerate() {
                let s = link.slot(w, d, k);
                s.rate.store(rate, Ordering::Relaxed);
                s.ceil.store(ceil, Ordering::Relaxed);
            }
        }
    }
    link.generation.fetch_add(1, Ordering::Release);
}

/// The workers' snapshots summed into one (their configuration lines are the first worker's).
fn merge(parts: Vec<Snapshot>, workers: usize) -> Snapshot {
    let rx: Vec<String> = parts
        .iter()
        .map(|p| p.directions.iter().map(|d| d.counters.rx_frames).sum::<u64>().to_string())
        .collect();
    let mut it = parts.into_iter();
    let Some(mut all) = it.next() else {
        return Snapshot {
            uptime_s: 0.0,
            directions: Vec::new(),
            calibration: String::new(),
            reloads: 0,
            pacing: PacingStats::default(),
            pool_frames: 0,
        };
    };
    all.calibration =
        format!("{workers} workers (frames received: {}); worker 0: {}", rx.join(" / "), all.calibration);
    for s in it {
        all.uptime_s = all.uptime_s.max(s.uptime_s);
        all.pool_frames += s.pool_frames;
        add_pacing(&mut all.pacing, &s.pacing);
        for (a, b) in all.directions.iter_mut().zip(&s.directions) {
            add_dir(a, b);
        }
    }
    all
}

fn add_pacing(a: &mut PacingStats, b: &PacingStats) {
    a.late_services += b.late_services;
    a.late_us_total += b.late_us_total;
    a.late_us_max = a.late_us_max.max(b.late_us_max);
    for (x, y) in a.late_hist.iter_mut().zip(b.late_hist) {
        *x += y;
    }
    a.given_up_us += b.given_up_us;
    a.tx_calls += b.tx_calls;
}

fn add_dir(a: &mut DirSnapshot, b: &DirSnapshot) {
    if let (Some(x), Some(y)) = (a.qdisc.as_mut(), b.qdisc.as_ref()) {
        x.add_counts(y);
        x.requeues += y.requeues;
    }
    if let (Some(x), Some(y)) = (a.engine.as_mut(), b.engine.as_ref()) {
        x.qdisc.add_counts(&y.qdisc);
        x.qdisc.requeues += y.qdisc.requeues;
        macro_rules! sum {
            ($($f:ident),*) => { $( x.$f += y.$f; )* };
        }
        sum!(
            received,
            parse_errors,
            runts,
            classify_drops,
            redirected,
            mirrored,
            mirrors_lost,
            duplicated,
            rx_packets,
            rx_bytes,
            delivered,
            enqueue_drops,
            qdisc_drops,
            flushed,
            dropped,
            sent_packets,
            sent_bytes,
            queued,
            reloads,
            draining
        );
    }
    let (x, y) = (&mut a.counters, &b.counters);
    macro_rules! sum {
        ($($f:ident),*) => { $( x.$f += y.$f; )* };
    }
    sum!(
        rx_frames,
        pool_full,
        ring_drops,
        tx_frames,
        tx_bytes,
        tx_errors,
        rx_super_packets,
        split_segments,
        rx_partial_checksums,
        rx_truncated
    );
    for (p, q) in x.refused.iter_mut().zip(y.refused) {
        *p += q;
    }
}
