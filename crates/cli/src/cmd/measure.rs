//! `sluice measure SCENARIO --backend sluice|kernel|none`: run an experiment on the lab and write
//! the results JSON, plots and report.html with the simulator's writer (`sluice-report`).

use anyhow::{bail, Context, Result};
use sluice_lab::measure::{self, Backend, Counters, Running, Settings, Shaper};
use sluice_lab::testbed::{Lab, IF_SHAPER_CLIENT, IF_SHAPER_SERVER};
use sluice_lab::LabError;
use sluice_live::shaper::{self, Options};
use sluice_tc::model::State;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Arguments of `sluice measure`.
#[derive(clap::Args)]
pub struct Args {
    /// rate-sweep | rrul | home-uplink | tcp
    scenario: String,
    /// Who shapes: sluice (live shaper), kernel (tc via netlink), none.
    #[arg(long, default_value = "sluice")]
    backend: String,
    /// Print the results JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Directory for results.json, plots and report.html (default: results/measure-SCENARIO-BACKEND).
    #[arg(long)]
    out: Option<PathBuf>,
    /// key=value settings: targets=100mbit,1gbit  duration=3  warmup=1  flows=1  rate=50mbit
    /// leaf=fq_codel|pfifo|cake (rrul; cake: CAKE at the root instead of HTB)  shape_pct=90  kernel_burst=tc|sluice  cc=cubic|bbr (rate-sweep, tcp)  spin=1 (live shaper never sleeps)  workers=N (live shaper threads)  io=auto|xdp|packet (its frame I/O); tcp: flows=1 cc=cubic|reno|bbr limit=1000 leaf=pfifo|fq_codel|netem delay=10ms.
    #[arg(long = "set")]
    set: Vec<String>,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
    /// Lab tag.
    #[arg(long, default_value = "lab")]
    tag: String,
}

/// The live shaper as a measurement backend: a thread in the shaper namespace, counters over its
/// control socket.
pub(crate) struct LiveShaper {
    /// Poll the rings without sleeping (`--set spin=1`).
    pub spin: bool,
    /// Worker threads (`--set workers=N`, default 1); the lab's client is the subscriber side.
    pub workers: usize,
    /// Frame I/O (`--set io=auto|xdp|packet`).
    pub io: sluice_live::io::IoMode,
}

struct LiveRunning {
    stop: Arc<AtomicBool>,
    sock: PathBuf,
    handle: Option<JoinHandle<Result<shaper::Snapshot, sluice_live::LiveError>>>,
}

fn counters_of(s: &serde_json::Value) -> Counters {
    let q = &s["directions"][0]["qdisc"];
    let g = |k: &str| q[k].as_u64().unwrap_or(0);
    Counters { bytes: g("bytes"), packets: g("packets"), drops: g("drops"), overlimits: g("overlimits") }
}

impl Running for LiveRunning {
    fn counters(&self) -> Result<Counters, LabError> {
        let text = sluice_live::control::request(&self.sock, "stats json")?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| LabError::Lab(format!("stats json: {e}")))?;
        Ok(counters_of(&v))
    }
    fn stop(mut self: Box<Self>) -> Result<Counters, LabError> {
        self.stop.store(true, Ordering::Relaxed);
        let snap = self
            .handle
            .take()
            .map(|h| h.join())
            .transpose()
            .map_err(|_| LabError::Lab("shaper thread panicked".into()))?
            .transpose()
            .map_err(|e| LabError::Lab(e.to_string()))?;
        let v = snap.map(|s| serde_json::to_value(&s).unwrap_or_default()).unwrap_or_default();
        Ok(counters_of(&v))
    }
}

impl Drop for LiveRunning {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Shaper for LiveShaper {
    fn start(&self, lab: &Lab, config: &State) -> Result<Box<dyn Running>, LabError> {
        // The model's tree of the shaper's out interface runs in the live shaper's engine.
        let forward = config.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let sock = std::env::temp_dir()
            .join(format!("sluice-measure-{}", std::process::id()))
            .join(format!("{}.sock", lab.tag()));
        let opts = Options {
            in_if: IF_SHAPER_CLIENT.into(),
            out_if: IF_SHAPER_SERVER.into(),
            forward,
            reverse: None,
            control: Some(sock.clone()),
            metrics: None,
            max_duration: Some(Duration::from_secs(600)),
            stop: stop.clone(),
            load_config: Box::new(|_| Err("reload is not used by measure".into())),
            verbose: false,
            netns: Some(lab.shaper_ns()),
            pacing: sluice_live::pacing::Pacing { spin: self.spin, ..Default::default() },
            workers: self.workers,
            shard_by: sluice_live::sys::FanoutKey::Source,
            io: self.io,
        };
        let handle = std::thread::spawn(move || shaper::run(opts));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if handle.is_finished() {
                let e = handle.join().map_err(|_| LabError::Lab("shaper panicked".into()))?.err();
                return Err(LabError::Lab(format!(
                    "the shaper stopped: {}",
                    e.map(|e| e.to_string()).unwrap_or_default()
                )));
            }
            if sluice_live::control::request(&sock, "ping").is_ok_and(|a| a.starts_with("pong")) {
                return Ok(Box::new(LiveRunning { stop, sock, handle: Some(handle) }));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        Err(LabError::Lab("the shaper did not come up within 5 s".into()))
    }
}

/// Runs `sluice measure`.
pub fn run(args: Args) -> Result<ExitCode> {
    let lab = Lab::new(&args.tag)?;
    let io = match args.set.iter().find_map(|kv| kv.strip_prefix("io=")) {
        Some(v) => v.parse().map_err(anyhow::Error::msg)?,
        None => Default::default(),
    };
    let workers = args
        .set
        .iter()
        .filter_map(|kv| kv.strip_prefix("workers="))
        .map(|v| v.parse::<usize>().ok().filter(|n| (1..=64).contains(n)))
        .next_back()
        .map(|n| n.context("workers=N: N from 1 to 64"))
        .transpose()?
        .unwrap_or(1);
    let live = LiveShaper { spin: args.set.iter().any(|kv| kv == "spin=1"), workers, io };
    let backend = match args.backend.as_str() {
        "sluice" => Backend::Sluice(&live),
        "kernel" => Backend::Kernel,
        "none" => Backend::None,
        o => bail!("unknown backend `{o}` (sluice, kernel, none)"),
    };
    let mut set = HashMap::new();
    for kv in &args.set {
        let (k, v) = kv.split_once('=').with_context(|| format!("--set {kv}: expected key=value"))?;
        set.insert(k.to_string(), v.to_string());
    }
    if !args.quiet {
        eprintln!("measure {} on lab `{}` with backend {}", args.scenario, lab.tag(), backend.name());
    }
    let results = measure::run(&args.scenario, &lab, &backend, &Settings { set, progress: !args.quiet })?;
    let dir = args
        .out
        .unwrap_or_else(|| PathBuf::from(format!("results/measure-{}-{}", args.scenario, args.backend)));
    // The simulator's writer: results.json, flent files, PNG/SVG plots and report.html.
    let files =
        sluice_report::write_report(&results, &dir).with_context(|| format!("writing {}", dir.display()))?;
    if args.json {
        println!("{}", results.to_json());
    }
    if !args.quiet {
        eprintln!("wrote {files} files to {} (report.html, results.json, plots)", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}
