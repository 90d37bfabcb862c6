//! The forwarding loop: frames in from one interface's ring, through the packet engine
//! ([`sluice_engine::Engine`]), out of the other interface, timed by the engine's `next_event`.
//!
//! Each frame is copied into a [`Pool`] slot whose index is the payload handle given to the
//! engine; the slot is freed when the engine hands the payload back, sent or dropped.
//! One thread does everything (rx, enqueue, dequeue, tx, control), so the engine needs no locks.
//! The reverse direction is forwarded unshaped unless a reverse configuration is given
//! (`--bidirectional`): TCP acknowledgements must get through either way.

use crate::control::{self, Request};
use crate::frame::Pool;
use crate::io::{self, IoMode, Rx};
use crate::offload::{self, Refusal, VnetHdr};
use crate::pacing::{self, Pacing};
use crate::sys::{self, FanoutKey, Out};
use crate::timing::{Calibration, SPIN_BELOW};
use crate::worker::Shard;
use crate::LiveError;
use serde::Serialize;
use sluice_core::filter::MirredTarget;
use sluice_core::{Span, Time};
use sluice_engine::{CopyTo, Engine, EngineStats, Received};
use sluice_tc::model::State;
use sluice_wire::ParseOptions;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most frames taken from one ring per turn of the loop.
const RX_PER_TURN: usize = 256;
/// Most bytes of frame buffers held at once (queued frames; super-packets take up to 64 KiB).
const POOL_BYTES: usize = 512 << 20;

/// Reads a configuration file for `reload PATH` into the model, for the forward direction's
/// device (`$DEV` = the out interface).
pub type ConfigLoader = Box<dyn Fn(&str) -> Result<State, String> + Send>;

/// How to run the shaper.
pub struct Options {
    /// Interface frames arrive on (shaped toward `out_if`).
    pub in_if: String,
    /// Interface frames leave by.
    pub out_if: String,
    /// Configuration for in → out: the tree of device `out_if` in this model.
    pub forward: State,
    /// Configuration for out → in: the tree of device `in_if` (None: forwarded unshaped, unless
    /// `forward` shapes `out_if`'s ingress through an IFB, sqm's way: then the frames coming in
    /// on `out_if` cross its ingress filters and what they redirect to the IFB is shaped by the
    /// IFB's tree).
    pub reverse: Option<State>,
    /// Control socket path (None: no control socket).
    pub control: Option<PathBuf>,
    /// Prometheus endpoint (loopback only).
    pub metrics: Option<SocketAddr>,
    /// Stop after this long (None: until `stop`).
    pub max_duration: Option<Duration>,
    /// Set to stop (signals, tests).
    pub stop: Arc<AtomicBool>,
    /// Reads a configuration file for `reload PATH` (e.g. [`crate::config::load`]).
    pub load_config: ConfigLoader,
    /// Print start-up and event lines to stderr.
    pub verbose: bool,
    /// Network namespace to forward in (the calling thread enters it; metrics stay outside).
    pub netns: Option<String>,
    /// How deadlines are waited for and late ones caught up ([`Pacing::default`] is right for
    /// most uses).
    pub pacing: Pacing,
    /// Worker threads (at least 1), each with its own engines and sockets; frames are spread
    /// by subscriber address (see [`crate::worker`]).
    pub workers: usize,
    /// Which address of the frames arriving on `in_if` is the subscriber's (the other direction
    /// uses the other address): what keeps a subscriber on one worker.
    pub shard_by: FanoutKey,
    /// Frame I/O per interface: AF_PACKET, AF_XDP, or per driver ([`crate::io`]). Several
    /// workers share an interface through a fanout group: AF_PACKET.
    pub io: IoMode,
}

/// How the loop kept time (see [`crate::pacing`]).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct PacingStats {
    /// Services that found a deadline already past (the loop woke late or was descheduled).
    pub late_services: u64,
    /// Sum of their lateness, µs.
    pub late_us_total: u64,
    /// Worst lateness, µs.
    pub late_us_max: u64,
    /// Late services by lateness: < 100 µs, < 1 ms, < 5 ms, < 20 ms, more.
    pub late_hist: [u64; 5],
    /// Time not replayed because a gap exceeded the catch-up cap, µs (rate lost for good).
    pub given_up_us: u64,
    /// `sendmmsg` calls (frames sent / calls = batch size).
    pub tx_calls: u64,
}

impl PacingStats {
    fn note_late(&mut self, l: Span) {
        let us = l.as_micros();
        self.late_services += 1;
        self.late_us_total += us;
        self.late_us_max = self.late_us_max.max(us);
        let k = [100, 1000, 5000, 20_000].iter().position(|&b| us < b).unwrap_or(4);
        self.late_hist[k] += 1;
    }

    /// One line for `stats` and the final report.
    pub fn describe(&self, p: &Pacing) -> String {
        format!(
            "pacing: catch-up {}us{}, {} late services (mean {}us, max {}us; <0.1/1/5/20ms/more: {:?}), {}us given up, {} sendmmsg calls",
            p.catch_up.as_micros(),
            if p.spin {
                ", spinning"
            } else if p.busy_poll {
                ", busy poll"
            } else {
                ""
            },
            self.late_services,
            self.late_us_total.checked_div(self.late_services).unwrap_or(0),
            self.late_us_max,
            self.late_hist,
            self.given_up_us,
            self.tx_calls
        )
    }
}

/// Counters of one direction.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DirCounters {
    /// Frames read from the ring.
    pub rx_frames: u64,
    /// Frames dropped because the buffer pool was full.
    pub pool_full: u64,
    /// Frames the kernel dropped because our receive ring was full.
    pub ring_drops: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Sends that failed (interface down, frame too big, buffer full).
    pub tx_errors: u64,
    /// GSO/GRO super-packets received (each stands for several wire frames).
    pub rx_super_packets: u64,
    /// Segments cut from super-packets before queueing (below 1 Gbit/s, see
    /// [`crate::config::split_gso`]).
    pub split_segments: u64,
    /// Frames received with their checksum left partial (completed by the kernel or the NIC
    /// on the way out).
    pub rx_partial_checksums: u64,
    /// Frames that arrived cut short (larger than the ring's slot and not readable whole):
    /// dropped, never forwarded.
    pub rx_truncated: u64,
    /// Frames that could not be forwarded correctly, by [`Refusal`] (in [`Refusal::ALL`]'s
    /// order): dropped, never forwarded with a wrong checksum.
    pub refused: [u64; 4],
}

impl DirCounters {
    fn refuse(&mut self, r: Refusal) {
        self.refused[r.index()] += 1;
    }

    /// Frames refused, all reasons.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }
}

/// A snapshot for `sluice stats` and the final report.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Seconds since start.
    pub uptime_s: f64,
    /// One entry per direction.
    pub directions: Vec<DirSnapshot>,
    /// Calibration line.
    pub calibration: String,
    /// Reloads done.
    pub reloads: u64,
    /// How the loop kept time.
    pub pacing: PacingStats,
    /// Frames held in the buffer pool: queued in an engine or about to be sent. Once the loop
    /// has stopped, this equals the frames the engines still queue (every other slot was freed).
    pub pool_frames: u64,
}

/// One direction in a snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct DirSnapshot {
    /// `in -> out`.
    pub path: String,
    /// What shapes it ("unshaped" when nothing).
    pub config: String,
    /// Qdisc counters (`tc -s`), over every configuration loaded.
    pub qdisc: Option<sluice_core::QdiscStats>,
    /// The engine's counters (malformed frames, filter and qdisc drops...); None when unshaped.
    pub engine: Option<EngineStats>,
    /// Forwarder counters.
    pub counters: DirCounters,
}

impl Snapshot {
    /// `tc -s`-style text.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "sluice shape: up {:.1}s, {} reload(s)\n{}\n",
            self.uptime_s, self.reloads, self.calibration
        );
        for d in &self.directions {
            s += &format!("{}: {}\n", d.path, d.config);
            if let Some(q) = &d.qdisc {
                s += &format!(
                    " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues {})\n backlog {}b {}p\n",
                    q.bytes, q.packets, q.drops, q.overlimits, q.requeues, q.backlog_bytes, q.qlen
                );
            }
            if let Some(e) = &d.engine {
                s += &format!(
                    " engine: received {} sent {}; dropped {} (filters {}, enqueue {}, qdisc {}, runts {}); unparsed {}; queued {}\n",
                    e.received,
                    e.sent_packets,
                    e.dropped,
                    e.classify_drops,
                    e.enqueue_drops,
                    e.qdisc_drops,
                    e.runts,
                    e.parse_errors,
                    e.queued
                );
            }
            let c = &d.counters;
            s += &format!(
                " rx {} frames ({} super-packets, {} segments cut from them, {} partial checksums), tx {} frames {} bytes; ring full {}, truncated {}, pool full {}, tx errors {}\n",
                c.rx_frames,
                c.rx_super_packets,
                c.split_segments,
                c.rx_partial_checksums,
                c.tx_frames,
                c.tx_bytes,
                c.ring_drops,
                c.rx_truncated,
                c.pool_full,
                c.tx_errors
            );
            if c.refused_total() > 0 {
                let why: Vec<String> = Refusal::ALL
                    .iter()
                    .filter(|r| c.refused[r.index()] > 0)
                    .map(|r| format!("{} {}", r.name(), c.refused[r.index()]))
                    .collect();
                s += &format!(" refused (not forwarded): {}\n", why.join(", "));
            }
        }
        s
    }

    /// Prometheus exposition text.
    pub fn to_prometheus(&self) -> String {
        let mut s = String::new();
        let mut metric = |name: &str, help: &str, vals: Vec<(String, f64)>| {
            s += &format!("# HELP sluice_{name} {help}\n# TYPE sluice_{name} counter\n");
            for (path, v) in vals {
                s += &format!("sluice_{name}{{path=\"{path}\"}} {v}\n");
            }
        };
        let per = |f: &dyn Fn(&DirSnapshot) -> f64| {
            self.directions.iter().map(|d| (d.path.clone(), f(d))).collect::<Vec<_>>()
        };
        metric("tx_bytes_total", "Bytes forwarded.", per(&|d| d.counters.tx_bytes as f64));
        metric("tx_packets_total", "Frames forwarded.", per(&|d| d.counters.tx_frames as f64));
        metric("rx_packets_total", "Frames received.", per(&|d| d.counters.rx_frames as f64));
        metric(
            "drops_total",
            "Frames dropped by the qdisc.",
            per(&|d| d.qdisc.map(|q| q.drops).unwrap_or(0) as f64),
        );
        metric(
            "ring_drops_total",
            "Frames lost to a full receive ring.",
            per(&|d| d.counters.ring_drops as f64),
        );
        metric(
            "refused_total",
            "Frames that could not be forwarded correctly (dropped, never sent broken).",
            per(&|d| (d.counters.refused_total() + d.counters.rx_truncated) as f64),
        );
        metric(
            "malformed_total",
            "Frames sluice-wire could not parse.",
            per(&|d| d.engine.map(|e| e.parse_errors).unwrap_or(0) as f64),
        );
        metric(
            "backlog_bytes",
            "Bytes queued now.",
            per(&|d| d.qdisc.map(|q| q.backlog_bytes).unwrap_or(0) as f64),
        );
        let p = &self.pacing;
        for (name, help, v) in [
            ("late_services_total", "Services that found a deadline already past.", p.late_services),
            ("late_us_total", "Sum of their lateness, microseconds.", p.late_us_total),
            (
                "catchup_given_up_us_total",
                "Time not replayed (gap beyond the catch-up cap), microseconds.",
                p.given_up_us,
            ),
            ("sendmmsg_calls_total", "sendmmsg calls.", p.tx_calls),
        ] {
            s += &format!("# HELP sluice_{name} {help}\n# TYPE sluice_{name} counter\nsluice_{name} {v}\n");
        }
        s
    }
}

pub(crate) struct Port {
    pub(crate) name: String,
    rx: Option<Rx>,
    tx: Option<io::Tx>,
    gone_reported: bool,
    /// The fanout group this port's ring joins (several workers), and its key.
    fanout: Option<(u16, FanoutKey)>,
    io: IoMode,
    verbose: bool,
}

impl Port {
    fn open(name: &str, io: IoMode, verbose: bool) -> Result<Port, LiveError> {
        let mut p = Port {
            name: name.to_string(),
            rx: None,
            tx: None,
            gone_reported: false,
            fanout: None,
            io,
            verbose,
        };
        p.reopen().map_err(|e| LiveError::Io(format!("{name}: {e}")))?;
        Ok(p)
    }

    fn reopen(&mut self) -> std::io::Result<()> {
        let (rx, tx, how) = io::open(&self.name, self.io)?;
        // A fallback from an asked-for AF_XDP is said even when quiet.
        if self.verbose || (self.io == IoMode::Xdp && matches!(rx, Rx::Packet(_))) {
            eprintln!("sluice shape: {how}");
        }
        if let Some((group, key)) = self.fanout {
            rx.join_fanout(group, &sys::fanout_program(key))?;
        }
        (self.rx, self.tx) = (Some(rx), Some(tx));
        self.gone_reported = false;
        Ok(())
    }

    /// Joins fanout group `group` (now and after every reopen), keyed on `key`.
    pub(crate) fn join_fanout(&mut self, group: u16, key: FanoutKey) -> std::io::Result<()> {
        self.fanout = Some((group, key));
        match self.rx.as_ref() {
            Some(rx) => rx.join_fanout(group, &sys::fanout_program(key)),
            None => Err(std::io::Error::from_raw_os_error(libc::ENODEV)),
        }
    }

    fn close(&mut self, verbose: bool, why: &str) {
        if !self.gone_reported && verbose {
            eprintln!("sluice shape: interface {} unusable ({why}); frames to it are dropped, retrying every second", self.name);
        }
        self.gone_reported = true;
        self.rx = None;
        self.tx = None;
    }
}

pub(crate) struct Dir {
    /// None: forwarded unshaped.
    pub(crate) engine: Option<Engine>,
    /// Ingress shaping: the receiving device's engine (its ingress filters) and the index of the
    /// IFB `engine` runs; frames its filters do not redirect there go straight through.
    rx: Option<(Engine, u16)>,
    /// Cut super-packets into segments before queueing them ([`crate::config::split_gso`]).
    split: bool,
    /// Where a segment is built.
    seg_buf: Vec<u8>,
    c: DirCounters,
}

impl Dir {
    fn new(config: Option<&State>, dev: &str, floor: Span, now: Time) -> Result<Dir, LiveError> {
        let engine = match config {
            Some(state) => Some(Engine::new(crate::config::program(state, dev, floor)?, now)),
            None => None,
        };
        let split = config.is_some_and(|s| crate::config::split_gso(s, dev));
        Ok(Dir { engine, rx: None, split, seg_buf: Vec::new(), c: DirCounters::default() })
    }

    /// The download direction of an sqm-style configuration: `wan`'s ingress filters, then the
    /// IFB they redirect to.
    fn through_ifb(state: &State, wan: &str, floor: Span, now: Time) -> Result<Option<Dir>, LiveError> {
        let Some((ifb, idx)) = crate::config::ingress_target(state, wan) else { return Ok(None) };
        let rx = Engine::new(crate::config::program(state, wan, floor)?, now);
        let engine = Engine::new(crate::config::program(state, &ifb, floor)?, now);
        Ok(Some(Dir {
            engine: Some(engine),
            rx: Some((rx, idx)),
            split: crate::config::split_gso(state, &ifb),
            seg_buf: Vec::new(),
            c: DirCounters::default(),
        }))
    }

    fn summary(&self) -> &str {
        self.engine.as_ref().map(|e| e.summary()).unwrap_or("unshaped")
    }
}

/// Run until stopped; returns the final snapshot.
pub fn run(opts: Options) -> Result<Snapshot, LiveError> {
    // Refuse a configuration the engine cannot run before spending time on calibration.
    crate::config::program(&opts.forward, &opts.out_if, Span::ZERO)?;
    match &opts.reverse {
        Some(r) => {
            crate::config::program(r, &opts.in_if, Span::ZERO)?;
        }
        None => {
            Dir::through_ifb(&opts.forward, &opts.out_if, Span::ZERO, Time::ZERO)?;
        }
    }
    let cal = Calibration::measure(300);
    if opts.verbose {
        eprintln!("sluice shape: {cal}");
    }
    if opts.workers > 1 {
        let fwd = crate::rebalance::shardable(&opts.forward, &opts.out_if);
        let rev = opts.reverse.as_ref().is_none_or(|r| crate::rebalance::shardable(r, &opts.in_if));
        let ifb = crate::config::ingress_target(&opts.forward, &opts.out_if)
            .is_none_or(|(ifb, _)| crate::rebalance::shardable(&opts.forward, &ifb));
        if fwd && rev && ifb {
            if opts.verbose || opts.io == IoMode::Xdp {
                eprintln!(
                    "sluice shape: {} workers share each interface through PACKET_FANOUT: AF_PACKET \
                     (AF_XDP would need a receive queue per worker; --workers 1 for AF_XDP)",
                    opts.workers
                );
            }
            return crate::worker::run_sharded(opts, cal);
        }
        if opts.verbose {
            eprintln!("sluice shape: one worker: only an HTB root keeps its rates across several workers");
        }
    }
    run_worker(opts, cal, None)
}

/// One worker's loop: all of the shaper when it runs alone, one shard of it otherwise.
pub(crate) fn run_worker(
    opts: Options,
    cal: Calibration,
    mut shard: Option<Shard>,
) -> Result<Snapshot, LiveError> {
    let epoch = Instant::now();
    let clock = || Time::from_nanos(epoch.elapsed().as_nanos() as u64);
    let mut dirs = [
        Dir::new(Some(&opts.forward), &opts.out_if, cal.floor, clock())?,
        match &opts.reverse {
            Some(r) => Dir::new(Some(r), &opts.in_if, cal.floor, clock())?,
            None => match Dir::through_ifb(&opts.forward, &opts.out_if, cal.floor, clock())? {
                Some(d) => d,
                None => Dir::new(None, &opts.in_if, cal.floor, clock())?,
            },
        },
    ];
    let metrics_text = Arc::new(Mutex::new(String::new()));
    if let Some(addr) = opts.metrics {
        control::serve_metrics(addr, metrics_text.clone(), opts.stop.clone())
            .map_err(|e| LiveError::Io(format!("metrics {addr}: {e}")))?;
    }
    if let Some(ns) = &opts.netns {
        crate::netns::enter(ns)?;
    }
    // Workers share each interface through a fanout group, which only packet sockets have.
    let io = if shard.is_some() { IoMode::Packet } else { opts.io };
    let mut ports = [Port::open(&opts.in_if, io, opts.verbose)?, Port::open(&opts.out_if, io, opts.verbose)?];
    if let Some(sh) = shard.as_mut() {
        sh.join(&mut ports, &opts)?;
    }
    let control: Option<Receiver<Request>> = match &opts.control {
        Some(p) => Some(
            control::serve(p, opts.stop.clone())
                .map_err(|e| LiveError::Io(format!("control socket {}: {e}", p.display())))?,
        ),
        None => None,
    };
    if opts.verbose {
        eprintln!("sluice shape: {} -> {}: {}", opts.in_if, opts.out_if, dirs[0].summary());
        eprintln!("sluice shape: {} -> {}: {}", opts.out_if, opts.in_if, dirs[1].summary());
    }
    let mut pool = Pool::new(1 << 17, POOL_BYTES);
    let pacing = opts.pacing;
    let mut reloads = 0u64;
    let mut last_house = Time::ZERO;
    let floor = cal.floor;
    let mut pstats = PacingStats::default();
    // Per direction: the time its qdisc was last served up to (the replay starts there).
    let mut served = [clock(); 2];
    let mut pending: Vec<sluice_core::Packet> = Vec::with_capacity(sys::MAX_BATCH);
    let max_duration = opts.max_duration.map(|m| Time::from_nanos(m.as_nanos() as u64));
    let paths = [format!("{} -> {}", opts.in_if, opts.out_if), format!("{} -> {}", opts.out_if, opts.in_if)];
    let snapshot = |dirs: &[Dir; 2], reloads: u64, p: &PacingStats, pool_frames: u64| Snapshot {
        uptime_s: epoch.elapsed().as_secs_f64(),
        calibration: format!("{cal}; {}", p.describe(&pacing)),
        reloads,
        pacing: *p,
        pool_frames,
        directions: dirs
            .iter()
            .zip(paths.iter())
            .map(|(d, p)| {
                let engine = d.engine.as_ref().map(|e| e.stats());
                DirSnapshot {
                    path: p.clone(),
                    config: d.summary().to_string(),
                    qdisc: engine.map(|e| e.qdisc),
                    engine,
                    counters: d.c,
                }
            })
            .collect(),
    };
    loop {
        let now = clock();
        if opts.stop.load(Ordering::Relaxed) || max_duration.is_some_and(|m| now >= m) {
            break;
        }
        // Replay the deadlines that passed while the loop was away (asleep past its deadline or
        // descheduled), before new arrivals are enqueued at `now`.
        // Per direction: frames are enqueued at their receive timestamps, each after replaying the
        // qdisc up to that time (deadlines missed while the loop was away, see `pacing`), then the
        // qdisc is served up to now. Sends go out in `sendmmsg` batches. The kernel stamps frames
        // with CLOCK_REALTIME: map to our clock with the offset read now, and clamp into
        // [served, now] so the qdisc's clock never goes back.
        let real_off = realtime_ns() as i128 - now.as_nanos() as i128;
        let mut got = 0;
        for i in 0..2 {
            let (a, b) = ports.split_at_mut(1);
            let (src, dst) = if i == 0 { (&mut a[0], &mut b[0]) } else { (&mut b[0], &mut a[0]) };
            let d = &mut dirs[i];
            let served = &mut served[i];
            let mut tx = Tx {
                pool: &mut pool,
                pacing: &pacing,
                stats: &mut pstats,
                pending: &mut pending,
                noted: false,
                wall: now,
                verbose: opts.verbose,
            };
            if let Some(rx) = src.rx.as_mut() {
                // A bounded number per turn: the ring (8192 slots) is the buffer.
                got += rx.drain(RX_PER_TURN, |f, ts, v| {
                    let stamp = Time::from_nanos((ts as i128 - real_off).max(0) as u64);
                    let t = pacing::arrival_time(stamp, *served, now);
                    serve(d, dst, served, t, usize::MAX, &mut tx);
                    ingest(f, v, t, d, tx.pool, dst);
                });
            }
            // At most 8192 frames at `now`, so a huge backlog cannot starve the receive side
            // (everything is served at `now`, so stopping early leaves nothing to replay).
            serve(d, dst, served, now, 8192, &mut tx);
            flush(d, dst, &mut tx);
        }
        if let Some(sh) = shard.as_mut() {
            sh.exchange(&mut dirs, now, &|d| snapshot(d, reloads, &pstats, pool.in_use() as u64));
        }
        // Control requests are answered at once (they time measurement windows).
        if let Some(rx) = &control {
            while let Ok(req) = rx.try_recv() {
                let in_use = pool.in_use() as u64;
                let answer =
                    handle_request(&req.line, &mut dirs, &opts, floor, clock(), &mut reloads, &|d, r| {
                        snapshot(d, r, &pstats, in_use)
                    });
                let _ = req.reply.send(answer);
            }
        }
        // Housekeeping: metrics, ring statistics, lost interfaces.
        if now - last_house >= Span::from_millis(100) {
            last_house = now;
            for (i, p) in ports.iter_mut().enumerate() {
                if let Some(rx) = p.rx.as_mut() {
                    let st = rx.take_stats();
                    dirs[i].c.ring_drops += st.drops;
                    dirs[i].c.rx_truncated += st.truncated;
                }
                if p.rx.is_none() && p.reopen().is_ok() && opts.verbose {
                    eprintln!("sluice shape: interface {} is back", p.name);
                }
                if p.rx.is_some() && sys::ifindex(&p.name).is_err() {
                    p.close(opts.verbose, "it disappeared");
                }
            }
            if opts.metrics.is_some() {
                if let Ok(mut t) = metrics_text.lock() {
                    *t = snapshot(&dirs, reloads, &pstats, pool.in_use() as u64).to_prometheus();
                }
            }
        }
        if got > 0 {
            continue; // more may be waiting in the rings
        }
        // Sleep until the next deadline, waking for new frames. A late wake-up costs no rate (the
        // next turn replays it), so near deadlines are slept for too unless busy polling.
        let now = clock();
        let next = dirs.iter().filter_map(|d| d.engine.as_ref().and_then(|e| e.next_event(now))).min();
        let most = shard.as_ref().map_or(Span::from_millis(20), |sh| sh.longest_sleep(&dirs));
        let wait = match next {
            Some(t) if t <= now => Span::ZERO,
            Some(t) => (t - now).min(most),
            None => most,
        };
        if wait.as_nanos() == 0 || (pacing.busy_poll && wait < SPIN_BELOW) {
            continue;
        }
        if pacing.spin {
            // Never sleep: a frame is picked up as soon as it lands in a ring (the wake-up of a
            // sleeping thread costs tens of microseconds here), at the price of a busy core.
            std::hint::spin_loop();
            continue;
        }
        let mut fds: Vec<nix::poll::PollFd> = ports
            .iter()
            .filter_map(|p| p.rx.as_ref())
            .map(|r| nix::poll::PollFd::new(r.as_fd(), nix::poll::PollFlags::POLLIN))
            .collect();
        let ts = nix::sys::time::TimeSpec::from_duration(Duration::from_nanos(wait.as_nanos()));
        let _ = nix::poll::ppoll(&mut fds, Some(ts), None);
        let bad: Vec<bool> = fds
            .iter()
            .map(|f| {
                f.revents().is_some_and(|r| {
                    r.intersects(
                        nix::poll::PollFlags::POLLERR
                            | nix::poll::PollFlags::POLLHUP
                            | nix::poll::PollFlags::POLLNVAL,
                    )
                })
            })
            .collect();
        drop(fds);
        let mut k = 0;
        for p in ports.iter_mut() {
            if p.rx.is_some() {
                if bad[k] {
                    p.close(opts.verbose, "socket error");
                }
                k += 1;
            }
        }
    }
    Ok(snapshot(&dirs, reloads, &pstats, pool.in_use() as u64))
}

/// What sending needs besides the direction: the frames, how to batch, where to count.
struct Tx<'a> {
    pool: &'a mut Pool,
    pacing: &'a Pacing,
    stats: &'a mut PacingStats,
    /// Released, not yet sent (their pool slots are still held).
    pending: &'a mut Vec<sluice_core::Packet>,
    /// Whether this turn's lateness was recorded.
    noted: bool,
    /// The real time of this turn.
    wall: Time,
    verbose: bool,
}

/// Release what direction `d`'s qdisc makes eligible from `served` up to `to` (replaying missed
/// deadlines, see [`crate::pacing`]), at most `budget` frames, sending to `dst` whenever a
/// `sendmmsg` batch is full.
fn serve(d: &mut Dir, dst: &mut Port, served: &mut Time, to: Time, budget: usize, tx: &mut Tx<'_>) {
    let Some(q) = d.engine.as_mut() else { return };
    let per_call = tx.pacing.tx_batch.clamp(1, sys::MAX_BATCH);
    let mut budget = budget;
    loop {
        let want = per_call.saturating_sub(tx.pending.len()).max(1).min(budget);
        let r = pacing::release(q, *served, to, tx.pacing.catch_up, want, tx.pending);
        // The next call starts where this one stopped.
        *served = r.reached;
        tx.stats.given_up_us += r.given_up.as_micros();
        if let (false, Some(due)) = (tx.noted, r.first_due) {
            // Lateness against the real time of the turn, once per turn and direction.
            tx.stats.note_late(tx.wall - due);
            tx.noted = true;
        }
        budget -= r.packets.min(budget);
        free_dropped(q, tx.pool);
        if tx.pending.len() >= per_call {
            flush_to(&mut d.c, dst, tx);
        }
        if r.packets < want || budget == 0 {
            break;
        }
    }
}

/// Send the released frames of direction `d`.
fn flush(d: &mut Dir, dst: &mut Port, tx: &mut Tx<'_>) {
    flush_to(&mut d.c, dst, tx);
}

fn flush_to(c: &mut DirCounters, dst: &mut Port, tx: &mut Tx<'_>) {
    if tx.pending.is_empty() {
        return;
    }
    // Frames that cannot go out correctly are counted and their slots freed here.
    tx.pending.retain(|p| match tx.pool.finish(p.payload, p.dsfield) {
        Ok(()) => true,
        Err(r) => {
            c.refuse(r);
            tx.pool.free(p.payload);
            false
        }
    });
    let pool = &*tx.pool;
    let mut frames = [Out::default(); sys::MAX_BATCH];
    let mut at = 0;
    while at < tx.pending.len() {
        let n = (tx.pending.len() - at).min(sys::MAX_BATCH);
        for (k, p) in tx.pending[at..at + n].iter().enumerate() {
            frames[k] = Out { vnet: pool.vnet(p.payload), frame: pool.get(p.payload) };
        }
        let mut k = 0;
        while k < n {
            let (sent, err) = match dst.tx.as_ref() {
                Some(s) => s.send_many(&frames[k..n]),
                None => (0, Some(std::io::Error::from_raw_os_error(libc::ENODEV))),
            };
            tx.stats.tx_calls += 1;
            for f in &frames[k..k + sent] {
                c.tx_frames += 1;
                c.tx_bytes += f.frame.len() as u64;
            }
            k += sent;
            if let Some(e) = err {
                // The frame at `k` failed: count it lost and go on after it.
                c.tx_errors += 1;
                k += 1;
                if matches!(e.raw_os_error(), Some(libc::ENXIO | libc::ENODEV)) && dst.tx.is_some() {
                    dst.close(tx.verbose, &e.to_string());
                }
            }
        }
        at += n;
    }
    for p in tx.pending.drain(..) {
        tx.pool.free(p.payload);
    }
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn ingest(f: &[u8], v: VnetHdr, now: Time, d: &mut Dir, pool: &mut Pool, dst: &Port) {
    d.c.rx_frames += 1;
    // What the frame stands for on the wire, or why it cannot be forwarded as it is.
    let wire = match offload::check(&v, f) {
        Ok(w) => w,
        Err(r) => {
            d.c.refuse(r);
            return;
        }
    };
    if wire.segs > 1 {
        d.c.rx_super_packets += 1;
    }
    if v.needs_csum() {
        d.c.rx_partial_checksums += 1;
    }
    if let Some((rx, ifb)) = d.rx.as_mut() {
        let ifb = *ifb;
        // The payload handle is not used: the frame is still in the ring.
        let got = rx.receive_frame(f, 0, now);
        let redirected = rx.take_redirected().map(|r| r.target);
        while rx.take_dropped().is_some() {}
        // Mirror copies for the IFB's egress are shaped there; others are not carried.
        let mut to_ifb = 0;
        while let Some(c) = rx.take_copy() {
            to_ifb += (c.to == CopyTo::Device(MirredTarget { dev: ifb, ingress: false })) as u32;
        }
        for _ in 0..to_ifb {
            shape(f, v, wire, now, d, pool);
        }
        match (got, redirected) {
            (Received::Pass(_), _) => return send_counted(f, v, dst, &mut d.c),
            // `mirred ingress redirect dev IFB`: received on the IFB (its own ingress filters,
            // if any, run), then delivered.
            (_, Some(t)) if t.ingress && t.dev == ifb => {
                let pass = d.engine.as_mut().map(|e| {
                    let got = e.receive_frame(f, 0, now);
                    while e.take_redirected().is_some()
                        || e.take_copy().is_some()
                        || e.take_dropped().is_some()
                    {}
                    matches!(got, Received::Pass(_))
                });
                if pass != Some(false) {
                    send_counted(f, v, dst, &mut d.c);
                }
                return;
            }
            (_, Some(t)) if t.dev == ifb => {}
            // Dropped by an ingress filter, or redirected to a device this loop does not run.
            _ => return,
        }
    }
    if d.engine.is_none() {
        // Unshaped direction: straight through.
        return send_counted(f, v, dst, &mut d.c);
    }
    shape(f, v, wire, now, d, pool);
}

/// Direction `d`'s engine takes frame `f`: whole, or cut into wire segments first when the
/// direction splits super-packets.
fn shape(f: &[u8], v: VnetHdr, wire: offload::Wire, now: Time, d: &mut Dir, pool: &mut Pool) {
    let Some(engine) = d.engine.as_mut() else { return };
    if d.split && wire.segs > 1 {
        let mut buf = std::mem::take(&mut d.seg_buf);
        let c = &mut d.c;
        let r = offload::segment(&v, f, &mut buf, |seg| {
            c.split_segments += 1;
            enqueue(engine, pool, c, seg, VnetHdr::default(), offload::Wire::single(seg), now)
        });
        d.seg_buf = buf;
        if let Err(r) = r {
            d.c.refuse(r);
        }
        return;
    }
    enqueue(engine, pool, &mut d.c, f, v, wire, now);
}

/// Queues one frame in `engine`, its bytes in a pool slot.
fn enqueue(
    engine: &mut Engine,
    pool: &mut Pool,
    c: &mut DirCounters,
    f: &[u8],
    v: VnetHdr,
    wire: offload::Wire,
    now: Time,
) {
    let Some(id) = pool.put(f, v) else {
        c.pool_full += 1;
        return;
    };
    // The slot is freed when the engine hands `id` back: sent (`flush_to`) or dropped (here).
    // A super-packet is charged per wire segment (headers repeated), as the kernel's qdiscs do.
    match sluice_wire::parse_frame(f, ParseOptions::default()) {
        Ok(parsed) => {
            let mut pkt = parsed.to_packet(id);
            wire.apply(&mut pkt);
            let _ = engine.ingress(pkt, &parsed.keys, f, now);
        }
        // The engine counts and classifies what does not parse.
        Err(_) => {
            let _ = engine.ingress_frame(f, id, now);
        }
    }
    // A redirect to a device this loop does not run leaves: its slot is freed.
    while let Some(r) = engine.take_redirected() {
        pool.free(r.pkt.payload);
    }
    if engine.has_copies() {
        copies(engine, f, v, pool, now);
    }
    free_dropped(engine, pool);
}

/// The copies the engine made of frame `f`: a netem duplicate goes back to the root in a pool
/// slot of its own; a mirror to a device this loop does not run is not carried (the engine
/// counts it in `mirrored`).
#[cold]
fn copies(engine: &mut Engine, f: &[u8], v: VnetHdr, pool: &mut Pool, now: Time) {
    while let Some(c) = engine.take_copy() {
        if c.to != CopyTo::Root {
            continue;
        }
        let Some(id) = pool.put(f, v) else { continue };
        let keys = sluice_wire::parse_frame(f, ParseOptions::default()).map(|p| p.keys).unwrap_or_default();
        let _ = engine.ingress_copy(sluice_core::Packet { payload: id, ..c.pkt }, &keys, f, now);
        while let Some(r) = engine.take_redirected() {
            pool.free(r.pkt.payload);
        }
    }
}

/// Frees the pool slot of every payload the engine dropped.
fn free_dropped(engine: &mut Engine, pool: &mut Pool) {
    while let Some(dr) = engine.take_dropped() {
        pool.free(dr.pkt.payload);
    }
}

fn send_counted(f: &[u8], vnet: VnetHdr, dst: &Port, c: &mut DirCounters) {
    match dst.tx.as_ref().map(|t| t.send(Out { vnet, frame: f })) {
        Some(Ok(())) => {
            c.tx_frames += 1;
            c.tx_bytes += f.len() as u64;
        }
        _ => c.tx_errors += 1,
    }
}

fn handle_request(
    line: &str,
    dirs: &mut [Dir; 2],
    opts: &Options,
    floor: Span,
    now: Time,
    reloads: &mut u64,
    snapshot: &dyn Fn(&[Dir; 2], u64) -> Snapshot,
) -> String {
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some("ping"), _) => "pong\n".into(),
        (Some("stats"), Some("json")) => {
            serde_json::to_string_pretty(&snapshot(dirs, *reloads)).unwrap_or_default() + "\n"
        }
        (Some("stats"), None) => snapshot(dirs, *reloads).to_text(),
        (Some("reload"), Some(path)) => match reload(path, dirs, opts, floor, now) {
            Ok(msg) => {
                *reloads += 1;
                msg
            }
            Err(e) => format!("error: {e}; the running configuration is unchanged\n"),
        },
        _ => format!("error: unknown command `{line}` (stats, stats json, reload PATH, ping)\n"),
    }
}

/// `reload PATH`: the forward direction's tree and, when the configuration shapes the download
/// through an IFB (and no reverse configuration was given), the receiving device's ingress
/// filters and the IFB's tree too. Every program is built before anything changes; each engine
/// reloads hitlessly (its backlog drains under the old configuration first). A download that is
/// no longer shaped drains into an unlimited FIFO.
fn reload(
    path: &str,
    dirs: &mut [Dir; 2],
    opts: &Options,
    floor: Span,
    now: Time,
) -> Result<String, LiveError> {
    if dirs[0].engine.is_none() {
        return Err(LiveError::Config("nothing to reload".into()));
    }
    let state = (opts.load_config)(path).map_err(LiveError::Config)?;
    let forward = crate::config::program(&state, &opts.out_if, floor)?;
    let split = crate::config::split_gso(&state, &opts.out_if);
    // The download side: Ok((receiving device's program, IFB's program, IFB index)), or
    // Err(the unlimited FIFO) when it is no longer shaped.
    let download = match (&opts.reverse, crate::config::ingress_target(&state, &opts.out_if)) {
        (None, Some((ifb, idx))) => Some(Ok((
            crate::config::program(&state, &opts.out_if, floor)?,
            crate::config::program(&state, &ifb, floor)?,
            idx,
            crate::config::split_gso(&state, &ifb),
        ))),
        (None, None) if dirs[1].rx.is_some() => {
            Some(Err(crate::config::program(&crate::config::unlimited(&opts.in_if), &opts.in_if, floor)?))
        }
        _ => None,
    };
    let backlog = dirs[0].engine.as_ref().map_or(0, |e| e.qlen());
    let fwd = dirs[0].engine.as_mut().expect("checked");
    // Hitless: the backlog drains under the old configuration first, and nothing is dropped by
    // the switch itself.
    fwd.reload(forward, now);
    dirs[0].split = split;
    let mut msg = format!(
        "reloaded: {}; {backlog} queued packet(s) drain under the old configuration first\n",
        fwd.summary()
    );
    let d = &mut dirs[1];
    match download {
        Some(Ok((rx, ifb, idx, split))) => {
            d.split = split;
            match (d.rx.as_mut(), d.engine.as_mut()) {
                (Some((r, i)), Some(e)) => {
                    r.reload(rx, now);
                    e.reload(ifb, now);
                    *i = idx;
                }
                // Unshaped until now: nothing is queued, the engines start afresh.
                _ => {
                    d.rx = Some((Engine::new(rx, now), idx));
                    d.engine = Some(Engine::new(ifb, now));
                }
            }
            msg += &format!("download reloaded: {}\n", d.summary());
        }
        Some(Err(fifo)) => {
            d.rx = None;
            d.split = false;
            if let Some(e) = d.engine.as_mut() {
                e.reload(fifo, now);
            }
            msg += "download: no longer shaped (its backlog drains first)\n";
        }
        None => {}
    }
    Ok(msg)
}

/// Stop on SIGINT and SIGTERM (the loop then returns its final counters).
pub fn stop_on_signals(stop: &Arc<AtomicBool>) -> Result<(), LiveError> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| LiveError::Io(format!("signal handler: {e}")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_counters_reach_stats_and_metrics() {
        let mut p = PacingStats::default();
        for us in [50, 500, 2_000, 12_000, 30_000] {
            p.note_late(Span::from_micros(us));
        }
        assert_eq!(p.late_hist, [1, 1, 1, 1, 1]);
        assert_eq!((p.late_services, p.late_us_max, p.late_us_total), (5, 30_000, 44_550));
        p.given_up_us = 7;
        let line = p.describe(&Pacing::default());
        assert!(line.contains("mean 8910us") && line.contains("7us given up"), "{line}");
        let snap = Snapshot {
            uptime_s: 1.0,
            directions: vec![],
            calibration: line,
            reloads: 0,
            pacing: p,
            pool_frames: 0,
        };
        let prom = snap.to_prometheus();
        assert!(prom.contains("sluice_late_services_total 5\n"), "{prom}");
        assert!(prom.contains("sluice_catchup_given_up_us_total 7\n"), "{prom}");
        assert!(snap.to_text().contains("pacing: catch-up 20000us"));
    }
}
