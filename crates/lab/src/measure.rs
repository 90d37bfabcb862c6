//! Experiments on the lab: `rate-sweep` (seed 000), `rrul` (4 bulk flows + probes) and
//! `home-uplink` (the six scenarios of seed 003, scaled to the lab), on three backends:
//! the live Sluice shaper, kernel tc programmed through netlink, or nothing.
//!
//! The kernel backend runs with tc's defaults unless told otherwise (`kernel_burst=sluice`), so
//! "kernel HTB default settings" means burst = mtu = 1600 b. A leaf the kernel lacks (fq_codel on
//! this machine) is refused by the kernel and the class keeps HTB's default leaf, a pfifo of
//! txqueuelen packets; the case's params record what the kernel actually ran.

use crate::results::{Case, ClassResult, FlowResult, QdiscResult, Results};
use crate::testbed::{Lab, PathMode, IF_SHAPER_SERVER};
use crate::traffic::{self, Direction, Endpoints, ProbeResult, Window};
use crate::LabError;
use sluice_core::units::{format_rate, parse_rate};
use sluice_core::Rate;
use sluice_kernel::kernel::{self, KStats};
use sluice_kernel::netns;
use sluice_tc::burst::BurstPolicy;
use sluice_tc::model::State;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// Counters a running shaper reports (bytes and packets dequeued, drops).
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    /// Bytes sent (frames including the Ethernet header).
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Drops.
    pub drops: u64,
    /// Overlimits.
    pub overlimits: u64,
}

/// A running shaper.
pub trait Running {
    /// Counters now.
    fn counters(&self) -> Result<Counters, LabError>;
    /// Stop and return the final counters.
    fn stop(self: Box<Self>) -> Result<Counters, LabError>;
}

/// Something that can shape the lab's client → server direction with a configuration whose
/// device is [`IF_SHAPER_SERVER`].
pub trait Shaper {
    /// Start shaping (the lab path is already open).
    fn start(&self, lab: &Lab, config: &State) -> Result<Box<dyn Running>, LabError>;
}

/// Which backend shapes.
pub enum Backend<'a> {
    /// The live Sluice shaper.
    Sluice(&'a dyn Shaper),
    /// Kernel tc through netlink.
    Kernel,
    /// Nothing (kernel bridge, no qdisc): the baseline.
    None,
}

impl Backend<'_> {
    /// Name in results.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sluice(_) => "live-sluice",
            Backend::Kernel => "kernel",
            Backend::None => "none",
        }
    }
}

/// Options of a measurement (`--set key=value`).
pub struct Settings {
    /// key=value pairs.
    pub set: HashMap<String, String>,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Settings {
    fn get(&self, k: &str) -> Option<&str> {
        self.set.get(k).map(String::as_str)
    }
    fn secs(&self, k: &str, d: f64) -> Result<Duration, LabError> {
        match self.get(k) {
            Some(v) => v
                .parse::<f64>()
                .map(Duration::from_secs_f64)
                .map_err(|e| LabError::Config(format!("{k}={v}: {e}"))),
            None => Ok(Duration::from_secs_f64(d)),
        }
    }
    fn rate(&self, k: &str, d: &str) -> Result<Rate, LabError> {
        parse_rate(self.get(k).unwrap_or(d)).map_err(|e| LabError::Config(format!("{k}: {e}")))
    }
    fn usize(&self, k: &str, d: usize) -> Result<usize, LabError> {
        self.get(k).map(|v| v.parse().map_err(|e| LabError::Config(format!("{k}={v}: {e}")))).unwrap_or(Ok(d))
    }
    fn note(&self, s: &str) {
        if self.progress {
            eprintln!("{s}");
        }
    }
}

/// The scenarios `measure` knows.
pub const SCENARIOS: &[&str] = &["rate-sweep", "rrul", "home-uplink", "tcp"];

/// Run `scenario` on `lab` with `backend`.
pub fn run(scenario: &str, lab: &Lab, backend: &Backend<'_>, s: &Settings) -> Result<Results, LabError> {
    lab.require_up()?;
    let mut r =
        Results { scenario: scenario.into(), seed: 0, backend: backend.name().into(), ..Default::default() };
    r.schema_version = sluice_report::schema::SCHEMA_VERSION;
    match scenario {
        "rate-sweep" => rate_sweep(lab, backend, s, &mut r)?,
        "rrul" => rrul(lab, backend, s, &mut r)?,
        "home-uplink" => home_uplink(lab, backend, s, &mut r)?,
        "tcp" => tcp(lab, backend, s, &mut r)?,
        o => {
            return Err(LabError::Config(format!("unknown scenario `{o}` (known: {})", SCENARIOS.join(", "))))
        }
    }
    // Leave the lab as a plain bridge.
    let _ = unshape(lab, backend);
    Ok(r)
}

/// One shaped run: what shaped it and the counters over the measurement window.
struct Active {
    running: Option<Box<dyn Running>>,
    kernel_note: String,
    kind: String,
}

fn kernel_counters(lab: &Lab) -> Result<Counters, LabError> {
    let objs = netns::in_netns(Some(&lab.shaper_ns()), || kernel::read_back(IF_SHAPER_SERVER))?;
    // The root qdisc carries the totals.
    let root: KStats = objs
        .iter()
        .find(|o| o.is_qdisc && o.parent == sluice_kernel::netlink::TC_H_ROOT)
        .map(|o| o.stats)
        .unwrap_or_default();
    Ok(Counters { bytes: root.bytes, packets: root.packets, drops: root.drops, overlimits: root.overlimits })
}

fn shape(lab: &Lab, backend: &Backend<'_>, config: Option<&State>, s: &Settings) -> Result<Active, LabError> {
    match (backend, config) {
        (Backend::Sluice(sh), Some(t)) => {
            lab.set_path(PathMode::Open)?;
            Ok(Active { running: Some(sh.start(lab, t)?), kernel_note: String::new(), kind: "sluice".into() })
        }
        (Backend::Sluice(sh), None) => {
            // Unshaped rows still go through Sluice, with one unlimited FIFO.
            lab.set_path(PathMode::Open)?;
            let t = shaper_config("tc qdisc add dev $DEV root handle 1: pfifo limit 10000\n")?;
            Ok(Active {
                running: Some(sh.start(lab, &t)?),
                kernel_note: String::new(),
                kind: "sluice-unlimited".into(),
            })
        }
        (Backend::Kernel, Some(t)) => {
            lab.set_path(PathMode::Bridge)?;
            let policy = if s.get("kernel_burst") == Some("sluice") {
                BurstPolicy::Sluice
            } else {
                BurstPolicy::TcDefault
            };
            let config = t.clone();
            let rep = netns::in_netns(Some(&lab.shaper_ns()), move || {
                kernel::apply(&kernel::Plan::new(&config, IF_SHAPER_SERVER, policy)?)
            })?;
            let mut note = format!("burst policy {policy:?}");
            if !rep.refused.is_empty() {
                let refused: Vec<String> = rep.refused.iter().map(ToString::to_string).collect();
                note += &format!("; refused: {}", refused.join("; "));
                s.note(&format!("  kernel: {}", refused.join("; ")));
            }
            Ok(Active { running: None, kernel_note: note, kind: "kernel".into() })
        }
        (_, _) => {
            lab.set_path(PathMode::Bridge)?;
            netns::in_netns(Some(&lab.shaper_ns()), || kernel::clear(IF_SHAPER_SERVER))?;
            Ok(Active { running: None, kernel_note: String::new(), kind: "none".into() })
        }
    }
}

impl Active {
    fn counters(&self, lab: &Lab) -> Result<Counters, LabError> {
        match (&self.running, self.kind.as_str()) {
            (Some(r), _) => r.counters(),
            (None, "kernel") => kernel_counters(lab),
            _ => Ok(Counters::default()),
        }
    }
    fn stop(self) -> Result<(), LabError> {
        if let Some(r) = self.running {
            r.stop()?;
        }
        Ok(())
    }
}

fn unshape(lab: &Lab, backend: &Backend<'_>) -> Result<(), LabError> {
    if matches!(backend, Backend::Kernel) {
        netns::in_netns(Some(&lab.shaper_ns()), || kernel::clear(IF_SHAPER_SERVER))?;
    }
    lab.set_path(PathMode::Bridge)
}

/// A tc script for the shaper's server-facing port (`$DEV`) as a model.
fn shaper_config(script: &str) -> Result<State, LabError> {
    kernel::script_state(script, &[("DEV", IF_SHAPER_SERVER)])
}

/// HTB `1:` default 1, class 1:1 at `rate` (bursts left to the backend's rule), with `leaf`
/// (`fq_codel`, or a 1000-packet pfifo) under it as `10:`; `leaf=cake` is instead CAKE at
/// the root, shaping to `rate` itself (`cake bandwidth RATE diffserv4`).
fn htb_with_leaf(rate: Rate, leaf: &str) -> Result<State, LabError> {
    if leaf == "cake" {
        return shaper_config(&format!(
            "tc qdisc add dev $DEV root handle 1: cake bandwidth {}bit diffserv4\n",
            rate.bps()
        ));
    }
    let leaf = if leaf == "fq_codel" { "fq_codel" } else { "pfifo limit 1000" };
    shaper_config(&format!(
        "tc qdisc add dev $DEV root handle 1: htb default 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate {}bit\n\
         tc qdisc add dev $DEV parent 1:1 handle 10: {leaf}\n",
        rate.bps()
    ))
}

fn class_result(id: &str, rate: Rate, delta: Counters, secs: f64) -> ClassResult {
    ClassResult {
        id: id.into(),
        rate_bps: rate.bps(),
        ceil_bps: rate.bps(),
        achieved_bps: delta.bytes as f64 * 8.0 / secs,
        bytes: delta.bytes,
        packets: delta.packets,
        drops: delta.drops,
    }
}

fn diff(a: Counters, b: Counters) -> Counters {
    Counters {
        bytes: b.bytes.saturating_sub(a.bytes),
        packets: b.packets.saturating_sub(a.packets),
        drops: b.drops.saturating_sub(a.drops),
        overlimits: b.overlimits.saturating_sub(a.overlimits),
    }
}

/// Run `load` while sampling the shaper's counters at the window's edges.
fn with_window<T>(
    lab: &Lab,
    act: &Active,
    win: Window,
    load: impl FnOnce() -> Result<T, LabError> + Send,
) -> Result<(T, Counters), LabError>
where
    T: Send,
{
    std::thread::scope(|sc| {
        let h = sc.spawn(load);
        std::thread::sleep(win.warmup);
        let a = act.counters(lab).unwrap_or_default();
        std::thread::sleep(win.measure);
        let b = act.counters(lab).unwrap_or_default();
        let out = h.join().map_err(|_| LabError::Lab("load thread panicked".into()))??;
        Ok((out, diff(a, b)))
    })
}

fn rate_sweep(lab: &Lab, backend: &Backend<'_>, s: &Settings, r: &mut Results) -> Result<(), LabError> {
    r.description = "Seed 000: TCP goodput through one HTB class at each target rate.".into();
    // Plot hint for sluice-report: target on the x axis of the target-vs-achieved plot.
    r.plot.x = Some("target".into());
    let targets: Vec<Rate> = s
        .get("targets")
        .unwrap_or("10mbit,50mbit,100mbit,200mbit,500mbit")
        .split(',')
        .map(|t| parse_rate(t.trim()).map_err(|e| LabError::Config(format!("targets: {e}"))))
        .collect::<Result<_, _>>()?;
    let flows = s.usize("flows", 1)?;
    // The senders' congestion control, set per socket (a namespace may not set cubic as default).
    let cc: Option<String> = s.get("cc").map(str::to_string);
    let win = Window { warmup: s.secs("warmup", 2.0)?, measure: s.secs("duration", 4.0)? };
    let ep = Endpoints::of_lab(lab);
    for (i, &target) in targets.iter().enumerate() {
        let config = htb_with_leaf(target, "pfifo")?;
        let act = shape(lab, backend, Some(&config), s)?;
        let csum_before = lab.checksum_errors().unwrap_or(0);
        let port = 9000 + (i as u16) * 4;
        let ep2 = ep.clone();
        let udp = s.get("load") == Some("udp");
        let cc2 = cc.clone();
        let (fl, delta) = with_window(lab, &act, win, move || {
            if udp {
                // 20 % more than the target in 1472-byte datagrams (1514-byte frames).
                let offered = Rate::from_bps(target.bps() / 5 * 6);
                Ok(vec![traffic::udp_stream(&ep2, Some(offered), 1472, None, port, win, "udp-up")?])
            } else {
                traffic::bulk_tcp_cc(&ep2, flows, Direction::Up, None, cc2.as_deref(), port, win)
            }
        })?;
        let goodput: f64 = fl.iter().map(|f| f.bps()).sum();
        // Frames a forwarder broke: the receivers' checksum errors over the case.
        let csum_errors = lab.checksum_errors().unwrap_or(0).saturating_sub(csum_before);
        let ideal = target.bps() as f64 * if udp { 1472.0 } else { 1448.0 } / 1514.0;
        let err = (goodput / ideal - 1.0) * 100.0;
        let wire = delta.bytes as f64 * 8.0 / win.measure.as_secs_f64();
        s.note(&format!(
            "  {} {:>10}: goodput {:>9.2} Mbit/s, ideal {:>9.2}, error {:+.2}%; shaper sent {:>9.2} Mbit/s ({:+.2}% of target); {} checksum errors",
            backend.name(),
            format_rate(target),
            goodput / 1e6,
            ideal / 1e6,
            err,
            wire / 1e6,
            (wire / target.bps() as f64 - 1.0) * 100.0,
            csum_errors
        ));
        let mut params = BTreeMap::new();
        params.insert("backend".into(), backend.name().into());
        params.insert("target".into(), format_rate(target));
        params.insert("target_bps".into(), target.bps().to_string());
        params.insert("flows".into(), flows.to_string());
        if let Some(c) = &cc {
            params.insert("cc".into(), c.clone());
        }
        params.insert("load".into(), if udp { "udp-1.2x".into() } else { "tcp".into() });
        params.insert("duration_s".into(), format!("{}", win.measure.as_secs_f64()));
        if !act.kernel_note.is_empty() {
            params.insert("kernel".into(), act.kernel_note.clone());
        }
        let mut extra = BTreeMap::new();
        extra.insert("goodput_bps".into(), goodput);
        extra.insert("ideal_goodput_bps".into(), ideal);
        extra.insert("error_pct".into(), err);
        extra.insert("checksum_errors".into(), csum_errors as f64);
        // What the shaper itself sent (frames incl. Ethernet header) against the target.
        extra.insert("wire_error_pct".into(), (wire / target.bps() as f64 - 1.0) * 100.0);
        r.cases.push(Case {
            name: format_rate(target),
            params,
            measured_s: win.measure.as_secs_f64(),
            classes: vec![class_result("1:1", target, delta, win.measure.as_secs_f64())],
            flows: fl.iter().map(|f| f.to_result()).collect(),
            qdiscs: vec![QdiscResult {
                link: "shaper".into(),
                kind: act.kind.clone(),
                bytes: delta.bytes,
                packets: delta.packets,
                drops: delta.drops,
                overlimits: delta.overlimits,
                max_backlog_bytes: 0,
            }],
            extra,
            ..Default::default()
        });
        act.stop()?;
    }
    Ok(())
}

fn probes_pair(
    ep: &Endpoints,
    port: u16,
    dur: Duration,
) -> impl FnOnce() -> Result<Vec<ProbeResult>, LabError> + Send {
    let ep = ep.clone();
    move || {
        let ep2 = ep.clone();
        let ef = std::thread::spawn(move || {
            traffic::probes(&ep2, Duration::from_millis(20), 64, Some(46), port + 1, dur)
        });
        let be = traffic::probes(&ep, Duration::from_millis(20), 64, None, port, dur)?;
        let ef = ef.join().map_err(|_| LabError::Lab("probe panicked".into()))??;
        Ok(vec![be, ef])
    }
}

fn rrul(lab: &Lab, backend: &Backend<'_>, s: &Settings, r: &mut Results) -> Result<(), LabError> {
    r.description = "RRUL-style: 4 bulk TCP uploads (BE, CS1, CS5, EF marks) plus BE and EF UDP probes, through one HTB class (leaf=cake: through CAKE diffserv4 at the rate).".into();
    let rate = s.rate("rate", "50mbit")?;
    let leaf = s.get("leaf").unwrap_or("fq_codel").to_string();
    let win = Window { warmup: s.secs("warmup", 2.0)?, measure: s.secs("duration", 5.0)? };
    let ep = Endpoints::of_lab(lab);
    let config = htb_with_leaf(rate, &leaf)?;
    let act = shape(lab, backend, Some(&config), s)?;
    let (out, delta) = with_window(lab, &act, win, {
        let ep = ep.clone();
        move || {
            let marks = [None, Some(8u8), Some(40), Some(46)];
            let mut hs = Vec::new();
            for (i, m) in marks.into_iter().enumerate() {
                let ep = ep.clone();
                hs.push(std::thread::spawn(move || {
                    traffic::bulk_tcp(&ep, 1, Direction::Up, m, 9100 + i as u16, win)
                }));
            }
            std::thread::sleep(Duration::from_millis(300));
            let pr = probes_pair(&ep, 9110, win.total() - Duration::from_millis(300))()?;
            let mut flows = Vec::new();
            for (i, h) in hs.into_iter().enumerate() {
                let mut f = h.join().map_err(|_| LabError::Lab("bulk panicked".into()))??;
                for x in f.iter_mut() {
                    x.name = format!("tcp-up-{}", ["be", "cs1", "cs5", "ef"][i]);
                }
                flows.extend(f);
            }
            Ok((flows, pr))
        }
    })?;
    let kernel_note = act.kernel_note.clone();
    act.stop()?;
    let (bulk, pr) = out;
    let mut flows: Vec<FlowResult> = bulk.iter().map(|f| f.to_result()).collect();
    flows.extend(pr.iter().map(|p| p.to_result()));
    for f in &flows {
        s.note(&format!(
            "  {:<14} {:>8.2} Mbit/s  p50 {:>7.2} ms p99 {:>7.2} ms loss {:.1}%",
            f.name,
            f.achieved_bps / 1e6,
            f.latency_ms.p50,
            f.latency_ms.p99,
            f.loss_pct
        ));
    }
    let mut params = BTreeMap::new();
    params.insert("backend".into(), backend.name().into());
    params.insert("rate".into(), format_rate(rate));
    let leaf = leaf_that_ran(&leaf, &kernel_note);
    params.insert("leaf".into(), leaf.clone());
    if !kernel_note.is_empty() {
        params.insert("kernel".into(), kernel_note);
    }
    r.cases.push(Case {
        name: format!("rrul {} {}", format_rate(rate), leaf),
        params,
        measured_s: win.measure.as_secs_f64(),
        classes: vec![class_result("1:1", rate, delta, win.measure.as_secs_f64())],
        flows,
        series: crate::results::probe_cdf_series(
            &pr.iter().map(|p| (p.name.as_str(), p.rtts_ms.as_slice())).collect::<Vec<_>>(),
        ),
        ..Default::default()
    });
    Ok(())
}

/// `flows` bulk TCP uploads with congestion control `cc` through one HTB class at `rate` with
/// `leaf` (`pfifo`, a FIFO of `limit` packets; `fq_codel`; or `netem`, a FIFO of `limit`
/// packets that holds each packet `delay` first, for a path with a real RTT: Sluice's live
/// shaper only), and 64-byte UDP probes every 20 ms during the measured window: the lab half of
/// the simulator-against-Linux comparison (`scenarios/lab-tcp.toml` is the simulated half).
fn tcp(lab: &Lab, backend: &Backend<'_>, s: &Settings, r: &mut Results) -> Result<(), LabError> {
    let rate = s.rate("rate", "20mbit")?;
    let flows = s.usize("flows", 1)?;
    let limit = s.usize("limit", 1000)?;
    let cc = s.get("cc").unwrap_or("cubic").to_string();
    let leaf = s.get("leaf").unwrap_or("pfifo").to_string();
    let win = Window { warmup: s.secs("warmup", 3.0)?, measure: s.secs("duration", 10.0)? };
    r.description = format!(
        "{flows} {cc} TCP upload(s) through HTB {} with {leaf}, probes every 20 ms",
        format_rate(rate)
    );
    let leaf_tc = match leaf.as_str() {
        "fq_codel" => "fq_codel".to_string(),
        "pfifo" => format!("pfifo limit {limit}"),
        "netem" => format!("netem delay {} limit {limit}", s.get("delay").unwrap_or("10ms")),
        o => return Err(LabError::Config(format!("leaf `{o}`: pfifo, fq_codel or netem"))),
    };
    let config = shaper_config(&format!(
        "tc qdisc add dev $DEV root handle 1: htb default 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate {}bit\n\
         tc qdisc add dev $DEV parent 1:1 handle 10: {leaf_tc}\n",
        rate.bps()
    ))?;
    let ep = Endpoints::of_lab(lab);
    let act = shape(lab, backend, Some(&config), s)?;
    let (out, delta) = with_window(lab, &act, win, {
        let (ep, cc) = (ep.clone(), cc.clone());
        move || {
            let pep = ep.clone();
            let probe = std::thread::spawn(move || {
                std::thread::sleep(win.warmup);
                traffic::probes(&pep, Duration::from_millis(20), 64, None, 9311, win.measure)
            });
            let bulk = traffic::bulk_tcp_cc(&ep, flows, Direction::Up, None, Some(&cc), 9300, win)?;
            let probe = probe.join().map_err(|_| LabError::Lab("probe panicked".into()))??;
            Ok((bulk, probe))
        }
    })?;
    let kernel_note = act.kernel_note.clone();
    act.stop()?;
    let (bulk, probe) = out;
    let mut fl: Vec<FlowResult> = bulk.iter().map(|f| f.to_result()).collect();
    let mut pr = probe.to_result();
    pr.name = "ping".into();
    s.note(&format!(
        "  {} {flows}x{cc} {leaf} {}: goodput {} Mbit/s; probe p50 {:.2} ms p99 {:.2} ms",
        backend.name(),
        format_rate(rate),
        fl.iter().map(|f| format!("{:.3}", f.achieved_bps / 1e6)).collect::<Vec<_>>().join(" "),
        pr.latency_ms.p50,
        pr.latency_ms.p99
    ));
    fl.push(pr);
    let mut params = BTreeMap::new();
    params.insert("backend".into(), backend.name().into());
    params.insert("rate".into(), format_rate(rate));
    params.insert("flows".into(), flows.to_string());
    params.insert("cc".into(), cc.clone());
    params.insert("leaf".into(), leaf_that_ran(&leaf, &kernel_note));
    params.insert("limit".into(), limit.to_string());
    params.insert("leaf_tc".into(), leaf_tc.clone());
    if !kernel_note.is_empty() {
        params.insert("kernel".into(), kernel_note);
    }
    r.cases.push(Case {
        name: format!("{flows}x{cc} {leaf} {}", format_rate(rate)),
        params,
        measured_s: win.measure.as_secs_f64(),
        classes: vec![class_result("1:1", rate, delta, win.measure.as_secs_f64())],
        flows: fl,
        series: crate::results::probe_cdf_series(&[("ping", probe.rtts_ms.as_slice())]),
        ..Default::default()
    });
    Ok(())
}

fn home_uplink(lab: &Lab, backend: &Backend<'_>, s: &Settings, r: &mut Results) -> Result<(), LabError> {
    let modem = lab
        .status()
        .modem
        .ok_or_else(|| LabError::Lab("home-uplink needs the modem: `sluice lab up --modem 20mbit`".into()))?;
    let modem_rate = parse_rate(&modem.replace(' ', ""))
        .map_err(|e| LabError::Config(format!("modem rate {modem}: {e}")))?;
    r.description = format!(
        "Seed 003 scaled: modem tbf {modem}; shaper HTB at {}% of it with fq_codel; host B: 200 kbit/s UDP of 500 B plus BE probes; host A: nothing, 3 bulk TCP, or a UDP flood at 1.2x the modem.",
        s.usize("shape_pct", 90)?
    );
    let shaped = Rate::from_bps(modem_rate.bps() * s.usize("shape_pct", 90)? as u64 / 100);
    let win = Window { warmup: s.secs("warmup", 2.0)?, measure: s.secs("duration", 5.0)? };
    let ep = Endpoints::of_lab(lab);
    let config = htb_with_leaf(shaped, s.get("leaf").unwrap_or("fq_codel"))?;
    let rows: [(&str, &str, bool); 6] = [
        ("1 unloaded", "none", false),
        ("2 unloaded, shaped", "none", true),
        ("3 three bulk TCP", "bulk", false),
        ("4 three bulk TCP, shaped", "bulk", true),
        ("5 UDP flood", "flood", false),
        ("6 UDP flood, shaped", "flood", true),
    ];
    for (i, (name, load, shaped_row)) in rows.iter().enumerate() {
        let act = shape(lab, backend, if *shaped_row { Some(&config) } else { None }, s)?;
        let base = 9200 + i as u16 * 10;
        let (ep2, load2) = (ep.clone(), load.to_string());
        let flood_rate = Rate::from_bps(modem_rate.bps() * 12 / 10);
        let (out, delta) = with_window(lab, &act, win, move || {
            let hostb_ep = ep2.clone();
            let cbr = std::thread::spawn(move || {
                traffic::udp_stream(
                    &hostb_ep,
                    Some(Rate::from_bps(200_000)),
                    500,
                    None,
                    base + 1,
                    win,
                    "hostB-udp-200k",
                )
            });
            let probe_ep = ep2.clone();
            let probe = std::thread::spawn(move || {
                traffic::probes(&probe_ep, Duration::from_millis(20), 64, None, base + 2, win.total())
            });
            let mut counts = match load2.as_str() {
                "bulk" => traffic::bulk_tcp(&ep2, 3, Direction::Up, None, base + 3, win)?,
                "flood" => vec![traffic::udp_stream(
                    &ep2,
                    Some(flood_rate),
                    1400,
                    None,
                    base + 4,
                    win,
                    "hostA-udp-flood",
                )?],
                _ => vec![],
            };
            for c in counts.iter_mut() {
                c.name = format!("hostA-{}", c.name.trim_start_matches("hostA-"));
            }
            let cbr = cbr.join().map_err(|_| LabError::Lab("cbr panicked".into()))??;
            let probe = probe.join().map_err(|_| LabError::Lab("probe panicked".into()))??;
            Ok((counts, cbr, probe))
        })?;
        let kernel_note = act.kernel_note.clone();
        act.stop()?;
        let (counts, cbr, probe) = out;
        let mut flows: Vec<FlowResult> = counts.iter().map(|c| c.to_result()).collect();
        let mut cbr_r = cbr.to_result();
        cbr_r.host = "hostB".into();
        let mut pr = probe.to_result();
        pr.name = "hostB-probe".into();
        pr.host = "hostB".into();
        cbr_r.jitter_ms = pr.jitter_ms;
        s.note(&format!(
            "  {:<26} hostB udp loss {:>5.1}%  probe p50 {:>7.2} ms p99 {:>7.2} ms jitter {:.2} ms",
            name, cbr_r.loss_pct, pr.latency_ms.p50, pr.latency_ms.p99, pr.jitter_ms
        ));
        flows.push(cbr_r);
        flows.push(pr);
        let mut params = BTreeMap::new();
        params.insert("backend".into(), backend.name().into());
        params.insert("modem".into(), modem.clone());
        params.insert("shaped".into(), shaped_row.to_string());
        params.insert("shaper_rate".into(), format_rate(shaped));
        params.insert("load".into(), load.to_string());
        if *shaped_row {
            let ran = leaf_that_ran(s.get("leaf").unwrap_or("fq_codel"), &kernel_note);
            if ran != s.get("leaf").unwrap_or("fq_codel") {
                r.description = r.description.replacen("with fq_codel", &format!("with {ran}"), 1);
            }
            params.insert("leaf".into(), ran);
        }
        if !kernel_note.is_empty() {
            params.insert("kernel".into(), kernel_note);
        }
        let classes = if *shaped_row {
            vec![class_result("1:1", shaped, delta, win.measure.as_secs_f64())]
        } else {
            vec![]
        };
        r.cases.push(Case {
            name: name.to_string(),
            params,
            measured_s: win.measure.as_secs_f64(),
            classes,
            flows,
            series: crate::results::probe_cdf_series(&[("hostB-probe", probe.rtts_ms.as_slice())]),
            ..Default::default()
        });
    }
    Ok(())
}

/// The leaf qdisc that actually ran: `leaf`, or HTB's default pfifo when the kernel refused it
/// (the apply note lists what was refused), so titles never name a qdisc that did not run.
fn leaf_that_ran(leaf: &str, kernel_note: &str) -> String {
    let kind = leaf.split_whitespace().next().unwrap_or(leaf);
    match kernel_note.split_once("refused: ") {
        Some((_, refused)) if refused.contains(kind) => format!("pfifo (the kernel refused {kind})"),
        _ => leaf.to_string(),
    }
}

#[cfg(test)]
mod leaf_tests {
    use super::leaf_that_ran;

    #[test]
    fn a_refused_leaf_is_named_as_refused() {
        let note =
            "burst policy TcDefault; refused: qdisc fq_codel 10: (Error: Specified qdisc kind is unknown.)";
        assert_eq!(leaf_that_ran("fq_codel", note), "pfifo (the kernel refused fq_codel)");
        assert_eq!(leaf_that_ran("fq_codel", "burst policy TcDefault"), "fq_codel");
        assert_eq!(leaf_that_ran("pfifo limit 1000", note), "pfifo limit 1000");
    }
}
