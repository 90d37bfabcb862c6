//! The real flent (the Python package) opens our `.flent.gz` files: its summary lists our series
//! with the means we wrote, and it draws its own plots from them.
//!
//! flent is looked for in `$SLUICE_FLENT`, then `.venv/bin/flent` at the workspace root, then on
//! PATH. Without it the test says SKIPPED loudly and passes, except under CI (`CI` set), where
//! `.ci/run` installs it and a missing flent is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn find_flent() -> Option<PathBuf> {
    let works = |p: &Path| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    if let Some(p) = std::env::var_os("SLUICE_FLENT") {
        let p = PathBuf::from(p);
        return works(&p).then_some(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/flent");
    if works(&venv) {
        return Some(venv);
    }
    let path = PathBuf::from("flent");
    works(&path).then_some(path)
}

fn flent(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("running flent");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "flent {args:?} failed:\n{text}");
    assert!(!text.contains("ERROR"), "flent {args:?}:\n{text}");
    text
}

/// flent's summary line for `series`: its "avg" column.
fn summary_avg(summary: &str, series: &str) -> Option<f64> {
    summary.lines().find_map(|l| {
        let (name, rest) = l.split_once(" : ")?;
        (name.trim() == series).then(|| rest.split_whitespace().next()?.parse().ok())?
    })
}

#[test]
fn flent_opens_and_plots_our_files() {
    let Some(bin) = find_flent() else {
        if std::env::var_os("CI").is_some() {
            panic!("flent not found under CI: .ci/run should have installed it (set SLUICE_FLENT)");
        }
        eprintln!("\n*** SKIPPED flent_opens_and_plots_our_files: flent not found ***");
        eprintln!(
            "*** install it with: python3 -m venv .venv && .venv/bin/pip install flent matplotlib ***\n"
        );
        return;
    };
    let mut opened = 0;
    let mut plotted = 0;
    for name in ["home-uplink", "sfq-perturb"] {
        let r = common::simulate(name);
        let dir = common::fresh_dir(&format!("flent-{name}"));
        for c in &r.cases {
            let Some(gz) = sluice_report::flent::flent_gz(&r, c) else { continue };
            let file = dir.join(format!("{}.flent.gz", sluice_report::figures::slug(&c.name)));
            std::fs::write(&file, gz).unwrap();
            let f = file.to_str().unwrap();
            let test = sluice_report::flent::flent_test(c);
            let summary = flent(&bin, &["-i", f, "-f", "summary"]);
            assert!(
                summary.contains(&format!("Summary of {test} test run")),
                "{name}/{}:\n{summary}",
                c.name
            );
            // Every flow's throughput as flent computes its mean from our file.
            let s = c.series.as_ref().unwrap();
            for fl in &c.flows {
                if fl.kind == "probe" || test == "udp_flood" {
                    continue;
                }
                let series = if fl.kind.starts_with("tcp") {
                    format!("TCP upload::{}", fl.name)
                } else {
                    format!("UDP upload::{}", fl.name)
                };
                let v = &s.flow_bps[&fl.name];
                let ours = v.iter().sum::<f64>() / v.len() as f64 / 1e6;
                let theirs = summary_avg(&summary, &series)
                    .unwrap_or_else(|| panic!("{name}/{}: no {series} in\n{summary}", c.name));
                assert!(
                    (ours - theirs).abs() <= 0.006,
                    "{name}/{} {series}: ours {ours:.3}, flent {theirs}",
                    c.name
                );
            }
            if test == "tcp_nup" {
                assert!(
                    summary_avg(&summary, "TCP upload sum").is_some(),
                    "flent computed no sum:\n{summary}"
                );
            }
            opened += 1;
            // flent's own plots: throughput and ping for TCP cases, the ping CDF wherever there is a ping.
            let plots: &[&str] = match test {
                "tcp_nup" if c.flows.iter().any(|f| f.kind == "probe") => &["totals", "ping_cdf"],
                "tcp_nup" => &["upload"],
                "ping" => &["ping_cdf"],
                _ => &[],
            };
            if plotted < 6 {
                for p in plots {
                    let png = dir.join(format!("{}-{p}.png", sluice_report::figures::slug(&c.name)));
                    flent(&bin, &["-i", f, "-p", p, "-o", png.to_str().unwrap()]);
                    let len = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
                    assert!(len > 10_000, "{name}/{}: flent's {p} plot is empty ({len} bytes)", c.name);
                    plotted += 1;
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(opened >= 10, "only {opened} files opened");
    assert!(plotted >= 4, "only {plotted} flent plots drawn");
    eprintln!("flent ({}) opened {opened} files and drew {plotted} plots", bin.display());
}
