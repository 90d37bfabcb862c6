//! `sluice lab up|down|status`: the netns testbed (client ↔ shaper ↔ server).

use anyhow::Result;
use sluice_core::units::parse_rate;
use sluice_lab::testbed::{Lab, LabOptions, CLIENT_ADDR, SERVER_ADDR};
use std::process::ExitCode;

/// Arguments of `sluice lab`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Lab tag: namespaces are named slc-<tag>-{cli,shp,srv,mdm}.
    #[arg(long, default_value = "lab", global = true)]
    tag: String,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Build the lab (removes leftovers of an earlier run first).
    Up {
        /// Emulate a slower access link ("modem") with kernel tbf before the server, e.g. 20mbit.
        #[arg(long)]
        modem: Option<String>,
        /// Keep TSO/GSO/GRO and checksum offloads on (both backends handle them).
        #[arg(long)]
        offloads: bool,
    },
    /// Remove the lab (idempotent).
    Down {
        /// Remove every slc-* namespace, including other labs and crashed test runs.
        #[arg(long)]
        all: bool,
    },
    /// Show what exists.
    Status,
    /// Run built-in traffic client -> server and print what arrived (bulk TCP, UDP, probes).
    Load {
        /// Bulk TCP uploads.
        #[arg(long, default_value_t = 1)]
        tcp: usize,
        /// Also a UDP stream at this rate ("flood" for as fast as possible).
        #[arg(long)]
        udp: Option<String>,
        /// UDP datagram size.
        #[arg(long, default_value_t = 1400)]
        size: usize,
        /// Seconds to measure (after a 1 s warm-up).
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        /// DSCP for the TCP flows.
        #[arg(long)]
        dscp: Option<u8>,
        /// Congestion control of the TCP senders, set per socket (`TCP_CONGESTION`): cubic, bbr,
        /// reno (default: the client namespace's).
        #[arg(long)]
        cc: Option<String>,
    },
    /// Set the shaper namespace's path: `bridge` (kernel forwards; kernel/none backends) or
    /// `open` (nothing forwards; run `sluice shape --netns slc-<tag>-shp --in slc-sc --out slc-ss`).
    Path {
        /// bridge | open
        mode: String,
    },
}

/// Runs `sluice lab`.
pub fn run(args: Args) -> Result<ExitCode> {
    let lab = Lab::new(&args.tag)?;
    match args.action {
        Action::Up { modem, offloads } => {
            let modem = modem.map(|m| parse_rate(&m)).transpose()?;
            let removed = lab.up(&LabOptions { modem, offloads })?;
            if !removed.is_empty() {
                println!("removed leftovers: {}", removed.join(" "));
            }
            println!(
                "lab `{}` up: {} ({CLIENT_ADDR}) <-> {} <-> {} ({SERVER_ADDR}){}",
                lab.tag(),
                lab.client_ns(),
                lab.shaper_ns(),
                lab.server_ns(),
                modem.map(|m| format!(", modem tbf {m}")).unwrap_or_default()
            );
        }
        Action::Down { all } => {
            let removed = if all { Lab::down_all()? } else { lab.down()? };
            if removed.is_empty() {
                println!("nothing to remove");
            } else {
                println!("removed: {}", removed.join(" "));
            }
        }
        Action::Load { tcp, udp, size, secs, dscp, cc } => {
            use sluice_lab::traffic::{self, Direction, Endpoints, Window};
            lab.require_up()?;
            let ep = Endpoints::of_lab(&lab);
            let win = Window {
                warmup: std::time::Duration::from_secs(1),
                measure: std::time::Duration::from_secs_f64(secs),
            };
            let udp_rate = match udp.as_deref() {
                None => None,
                Some("flood") => Some(None),
                Some(r) => Some(Some(parse_rate(r)?)),
            };
            let ep2 = ep.clone();
            let udp_h = udp_rate.map(|r| {
                std::thread::spawn(move || traffic::udp_stream(&ep2, r, size, None, 8801, win, "udp"))
            });
            let ep3 = ep.clone();
            let probe = std::thread::spawn(move || {
                traffic::probes(&ep3, std::time::Duration::from_millis(20), 64, None, 8802, win.total())
            });
            let flows = if tcp > 0 {
                traffic::bulk_tcp_cc(&ep, tcp, Direction::Up, dscp, cc.as_deref(), 8800, win)?
            } else {
                vec![]
            };
            for f in &flows {
                println!("{:<10} {:>10.3} Mbit/s", f.name, f.bps() / 1e6);
            }
            if let Some(h) = udp_h {
                let f = h.join().map_err(|_| anyhow::anyhow!("udp thread panicked"))??;
                println!(
                    "{:<10} {:>10.3} Mbit/s  sent {} received {} ({:.1}% lost)",
                    f.name,
                    f.bps() / 1e6,
                    f.sent,
                    f.received,
                    f.to_result().loss_pct
                );
            }
            let p = probe.join().map_err(|_| anyhow::anyhow!("probe thread panicked"))??.to_result();
            println!(
                "probe      RTT p50 {:.3} ms p90 {:.3} p99 {:.3} max {:.3}, jitter {:.3} ms, loss {:.1}%",
                p.latency_ms.p50,
                p.latency_ms.p90,
                p.latency_ms.p99,
                p.latency_ms.max,
                p.jitter_ms,
                p.loss_pct
            );
        }
        Action::Path { mode } => {
            let m = match mode.as_str() {
                "bridge" => sluice_lab::testbed::PathMode::Bridge,
                "open" => sluice_lab::testbed::PathMode::Open,
                other => anyhow::bail!("path mode `{other}`: use bridge or open"),
            };
            lab.require_up()?;
            lab.set_path(m)?;
            println!("shaper path: {m:?}");
        }
        Action::Status => {
            let s = lab.status();
            if s.namespaces.is_empty() {
                println!("lab `{}` is down", lab.tag());
            } else {
                println!(
                    "lab `{}`: {}",
                    lab.tag(),
                    if s.complete { "up" } else { "INCOMPLETE (run `sluice lab up` to rebuild)" }
                );
                println!("  namespaces: {}", s.namespaces.join(" "));
                if let Some(p) = s.path {
                    println!("  shaper path: {p:?}");
                }
                if let Some(m) = s.modem {
                    println!("  modem: tbf {m}");
                }
                for q in &s.shaper_qdiscs {
                    println!("  {}", q.replace('\n', "\n  "));
                }
            }
            if !s.others.is_empty() {
                println!("other slc-* namespaces: {}", s.others.join(" "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
