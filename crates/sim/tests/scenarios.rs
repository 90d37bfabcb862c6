//! Built-in scenarios, run with reduced durations, checked for their qualitative result.

use sluice_report::Results;
use sluice_sim::run::{run, RunOptions};
use sluice_sim::scenario::Scenario;

fn sim(name: &str, set: &[(&str, &str)]) -> Results {
    let sc = Scenario::find(name).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions {
        overrides: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        seed: None,
        force: false,
    };
    run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0
}

fn case<'a>(r: &'a Results, parts: &[&str]) -> &'a sluice_report::Case {
    r.cases.iter().find(|c| parts.iter().all(|p| c.name.split(',').any(|x| x == *p))).unwrap_or_else(|| {
        panic!("no case {parts:?} in {:?}", r.cases.iter().map(|c| &c.name).collect::<Vec<_>>())
    })
}

fn err_pct(c: &sluice_report::Case) -> f64 {
    let cl = &c.classes[0];
    (cl.achieved_bps - cl.ceil_bps as f64) / cl.ceil_bps as f64 * 100.0
}

#[test]
fn every_builtin_parses_and_lists() {
    let list = sluice_sim::builtin::list();
    assert!(list.len() >= 4);
    for (name, desc) in list {
        assert!(!desc.starts_with("(invalid"), "{name}: {desc}");
        let sc = Scenario::find(name).unwrap();
        assert!(!sc.points(&[]).unwrap().is_empty());
    }
}

#[test]
fn rate_sweep_sluice_is_exact_and_legacy_is_stepped() {
    let r = sim(
        "rate-sweep",
        &[("rate", "100mbit,700mbit,3gbit,6.1gbit,9.9gbit"), ("duration", "300ms"), ("warmup", "50ms")],
    );
    let mut legacy = Vec::new();
    for c in &r.cases {
        let e = err_pct(c);
        if c.params["variant"] == "sluice" {
            assert!(e.abs() < 0.1, "{}: sluice error {e}%", c.name);
        } else {
            legacy.push(e);
        }
    }
    // The old arithmetic errs by more than 0.5% somewhere and not by the same amount everywhere.
    let max = legacy.iter().cloned().fold(f64::MIN, f64::max);
    let min = legacy.iter().cloned().fold(f64::MAX, f64::min);
    assert!(max > 0.5, "legacy max error {max}%");
    assert!(max - min > 0.5, "legacy error is flat: {legacy:?}");
}

#[test]
fn send_credits_policies_differ_at_high_rates() {
    let r = sim("send-credits", &[("rate", "1mbit,100mbit"), ("duration", "1s")]);
    let get = |rate: &str, timer: &str, credit: &str| {
        case(&r, &[&format!("rate={rate}"), &format!("timer={timer}"), &format!("credit={credit}")]).flows[0]
            .achieved_bps
    };
    // Without a credit limit the sender reaches its idealised rate whatever the timer.
    for t in ["1ms", "4ms"] {
        assert!((get("100mbit", t, "none") - 100e6).abs() / 100e6 < 0.02);
        assert!((get("1mbit", t, "none") - 1e6).abs() / 1e6 < 0.02);
    }
    // Limiting credit to one t_ipi (or one short RTT) collapses it when t_ipi << timer tick.
    assert!(get("100mbit", "1ms", "ipi") < 0.3 * 100e6);
    assert!(get("100mbit", "4ms", "rtt") < 0.1 * 100e6);
    // ... and costs less at low rates, where t_ipi (12 ms) exceeds the tick.
    assert!(get("1mbit", "1ms", "ipi") > 0.9e6);
}

#[test]
fn home_uplink_unshaped_rows_show_bufferbloat_and_flood_loss() {
    let r = sim("home-uplink", &[("shaper", "off"), ("test", "voip"), ("duration", "6s")]);
    let idle = case(&r, &["load=none"]);
    let voip = idle.flows.iter().find(|f| f.name == "voip").unwrap();
    assert_eq!(voip.loss_pct, 0.0);
    assert!(voip.latency_ms.p50 < 15.0, "{:?}", voip.latency_ms);
    let flood = case(&r, &["load=flood"]);
    let voip = flood.flows.iter().find(|f| f.name == "voip").unwrap();
    assert!(voip.loss_pct > 10.0, "unshaped flood should hurt VoIP: {}", voip.loss_pct);
    let ping = case(&r, &["load=scp"]).flows.iter().find(|f| f.name == "ping").unwrap().clone();
    assert!(ping.latency_ms.p50 > 100.0, "bufferbloat expected under scp: {:?}", ping.latency_ms);
}

#[test]
fn errors_point_at_line_and_column_of_the_unknown_key() {
    let src =
        "name = \"x\"\ndescription = \"d\"\nduration = \"1s\"\n[[link]]\nname = \"l\"\nrat = \"5mbit\"\n";
    let e = Scenario::parse("bad.toml", src).unwrap_err();
    assert_eq!((e.line, e.col), (6, 1), "{e}");
    assert!(e.message.contains("rat"), "{e}");
    assert!(e.to_string().starts_with("bad.toml:6:1:"));
}

#[test]
fn bad_values_and_unknown_parameters_are_reported_with_hints() {
    let src = "name = \"x\"\ndescription = \"d\"\nduration = \"1s\"\n[[link]]\nname = \"l\"\nrate = \"5 parsecs\"\n[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n";
    let sc = Scenario::parse("v.toml", src).unwrap();
    let e = sluice_sim::run::run(&sc, &RunOptions::default(), &|_| {}).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    assert!(e.hint.is_some());
    let e = sc.points(&[("nope".into(), "1".into())]).unwrap_err();
    assert!(e.message.contains("nope"));
}

#[test]
fn sweeps_expand_ranges_and_set_lists() {
    let sc = Scenario::find("rate-sweep").unwrap();
    let pts = sc.points(&[]).unwrap();
    assert_eq!(pts.len(), 100 * 2 * 2);
    let pts =
        sc.points(&[("rate".into(), "1gbit,2gbit".into()), ("variant".into(), "sluice".into())]).unwrap();
    assert_eq!(pts.len(), 2 * 2);
}

/// Ranges whose bounds or step are not finite, or that hold more points than a usize (a tiny
/// step), are refused by value instead of giving zero cases.
#[test]
fn degenerate_sweep_ranges_are_refused_by_value() {
    let base = "name = \"b\"\ndescription = \"d\"\nduration = \"2s\"\n[params]\nn = \"1\"\n[[link]]\nname = \"l\"\nrate = \"10mbit\"\n[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n";
    for (range, says) in [
        ("{ from = 0, to = inf, step = 1 }", "not finite"),
        ("{ from = 0, to = 1, step = nan }", "not finite"),
        ("{ from = 0, to = 1, step = 1e-300 }", "points"),
        ("{ from = \"1mbit\", to = \"2mbit\", step = \"0bit\" }", "step > 0"),
    ] {
        let src = format!("{base}[sweep]\nn = {range}\n");
        let e = match Scenario::parse("b.toml", &src) {
            Ok(sc) => sc.points(&[]).map(|p| format!("{} cases", p.len())).unwrap_or_else(|e| e.to_string()),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(says), "{range}: {e}");
    }
}

#[test]
fn ecn_priority_legacy_deprioritises_ect_and_sluice_does_not() {
    let r = sim("ecn-priority", &[("duration", "10s")]);
    let udp = |v: &str| {
        case(&r, &[&format!("variant={v}")]).flows.iter().find(|f| f.name == "udp-ecn").unwrap().clone()
    };
    let (legacy, sluice) = (udp("legacy"), udp("sluice"));
    assert!(legacy.loss_pct > 10.0, "legacy pfifo_fast should starve ECT(0) traffic: {}", legacy.loss_pct);
    // With Sluice's mapping all flows share one FIFO: the UDP flow loses only what the full
    // FIFO refuses, like the TCP flows beside it.
    assert!(sluice.loss_pct < legacy.loss_pct / 5.0, "{} vs {}", sluice.loss_pct, legacy.loss_pct);
    let goodput = |v: &str, f: &str| case(&r, &[&format!("variant={v}")]).extra[&format!("{f}.goodput_bps")];
    assert!(
        goodput("legacy", "tcp-ecn") < goodput("legacy", "tcp-plain") / 4.0,
        "legacy: the ECN flow is starved by the plain one"
    );
    assert!(goodput("sluice", "tcp-ecn") > 2e6 && goodput("sluice", "tcp-plain") > 2e6, "sluice: both share");
}

#[test]
fn tunnel_keys_separate_the_ping_from_the_bulk_upload() {
    let r = sim("tunnel-flows", &[("duration", "10s")]);
    let ping =
        |k: &str| case(&r, &[&format!("keys={k}")]).flows.iter().find(|f| f.name == "ping").unwrap().clone();
    let (outer, inner) = (ping("outer"), ping("inner"));
    assert!(inner.latency_ms.p99 < outer.latency_ms.p99, "{:?} vs {:?}", inner.latency_ms, outer.latency_ms);
    assert!(inner.jitter_ms < outer.jitter_ms);
}

#[test]
fn home_uplink_shaper_protects_voip_and_splits_hosts_evenly() {
    let r = sim("home-uplink", &[("load", "flood"), ("duration", "6s")]);
    let voip = |sh: &str| {
        case(&r, &[&format!("shaper={sh}"), "test=voip"])
            .flows
            .iter()
            .find(|f| f.name == "voip")
            .unwrap()
            .clone()
    };
    assert!(voip("off").loss_pct > 30.0, "unshaped flood: {}", voip("off").loss_pct);
    assert_eq!(voip("on").loss_pct, 0.0, "shaped VoIP must not lose packets");
    assert!(voip("on").latency_ms.p99 < 30.0, "{:?}", voip("on").latency_ms);
    // HostB's single upload gets half the shaped rate beside HostA's flood.
    let b =
        case(&r, &["shaper=on", "test=scp"]).flows.iter().find(|f| f.name == "scpB").unwrap().achieved_bps;
    assert!(b > 0.4 * 4.6e6 && b < 0.6 * 4.6e6, "HostB share {b}");
    let b_off =
        case(&r, &["shaper=off", "test=scp"]).flows.iter().find(|f| f.name == "scpB").unwrap().achieved_bps;
    assert!(b_off < 0.1 * 4.6e6, "unshaped flood should drown HostB: {b_off}");
}

#[test]
fn htb_scaling_shares_the_root_among_backlogged_leaves() {
    let r = sim(
        "htb-scaling",
        &[("n", "1200"), ("k", "10"), ("variant", "sluice"), ("duration", "2s"), ("warmup", "500ms")],
    );
    let c = &r.cases[0];
    assert_eq!(c.flows.len(), 10);
    for f in &c.flows {
        // 30 Mbit/s shared by 10 backlogged leaves (1000-byte frames).
        assert!((f.achieved_bps - 3e6).abs() / 3e6 < 0.02, "{} got {}", f.name, f.achieved_bps);
    }
    assert!(c.extra["shaper_ns_per_pkt"] > 0.0);
}

#[test]
fn htb_scaling_two_levels_share_the_root_evenly_among_backlogged_subscribers() {
    // 100 000 leaves: 317 sites of 315-316 subscribers, every site an inner class of the one
    // HTB qdisc. 10 backlogged leaves, one per site, share the 30 Mbit/s root.
    let r = sim(
        "htb-scaling",
        &[("n", "100000"), ("k", "10"), ("variant", "sluice"), ("duration", "1500ms"), ("warmup", "500ms")],
    );
    let c = &r.cases[0];
    assert_eq!(c.extra["leaves.count"], 100_000.0);
    assert_eq!(c.extra["leaves.sites"], 317.0);
    assert_eq!(c.extra["leaves.backlogged"], 10.0);
    assert_eq!(c.classes.len(), 10, "only the backlogged leaves are listed");
    // Flow j goes to leaf number 10 000 j, which is class 1:(0x10 + 10 000 j) of the one qdisc.
    let ids: Vec<String> = (0..10u64).map(|j| format!("1:{:x}", 0x10 + j * 10_000)).collect();
    assert_eq!(c.classes.iter().map(|cl| cl.id.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(c.extra["leaves.ideal_bps"], 3e6);
    // A leaf's rate is measured from its first to its last departure in the 1 s window, so its
    // error is the scheduler's, not the window edges'. Sites borrow the root's rate by DRR, a
    // turn being one quantum (site rate / r2q = 30 Mbit/s / 317 / 8 / 10 = 1183 B) overshot by
    // at most one 1000-byte packet, so a window that cuts turns unevenly is off by at most one
    // turn: 2183 B * 8 over 1 s of 3 Mbit/s, 0.58%.
    let tol_pct = (1183.0 + 1000.0) * 8.0 / 3e6 * 100.0;
    assert!(c.extra["leaves.err_max_pct"] < tol_pct, "{:?}", c.extra);
    for cl in &c.classes {
        assert!((cl.achieved_bps - 3e6).abs() / 3e6 * 100.0 < tol_pct, "{} got {}", cl.id, cl.achieved_bps);
    }
    let total: f64 = c.classes.iter().map(|cl| cl.achieved_bps).sum();
    assert!((total - 30e6).abs() / 30e6 < 0.005, "the leaves share the whole root: {total}");
}

#[test]
fn htb_scaling_reference_refuses_trees_it_would_take_hours_on() {
    let sc = Scenario::find("htb-scaling").unwrap();
    let opts = RunOptions {
        overrides: vec![("n".into(), "100000".into()), ("variant".into(), "reference-htb".into())],
        seed: None,
        force: false,
    };
    let e = run(&sc, &opts, &|_| {}).expect_err("the reference is limited");
    assert!(e.message.contains("reference"), "{}", e.message);
}

#[test]
fn htb_scaling_small_two_level_tree_runs_on_both_schedulers() {
    // 12 sites of 20 leaves; 6 backlogged leaves (0, 40, ... 200), one in every other site,
    // so each gets 30 Mbit/s / 6 = 5 Mbit/s.
    let get = |variant: &str| {
        let r = sim(
            "htb-scaling",
            &[
                ("n", "240"),
                ("k", "6"),
                ("sites", "12"),
                ("variant", variant),
                ("duration", "1500ms"),
                ("warmup", "500ms"),
            ],
        );
        let c = r.cases[0].clone();
        assert_eq!(c.extra["leaves.sites"], 12.0);
        assert_eq!(c.extra["leaves.ideal_bps"], 5e6);
        let total: f64 = c.classes.iter().map(|cl| cl.achieved_bps).sum();
        assert!((total - 30e6).abs() / 30e6 < 0.005, "{variant}: the leaves share the whole root: {total}");
        c
    };
    // Sluice (nested qdiscs): each leaf within one DRR turn of its site (quantum 2.5 Mbit/s / 8
    // / r2q 10 = 31 250 B, plus one packet) of 5 Mbit/s over the 1 s window: 5.2%. (Seen: 0.3%.)
    let c = get("sluice");
    assert!(c.extra["leaves.err_max_pct"] < (31_250.0 + 1000.0) * 8.0 / 5e6 * 100.0, "{:?}", c.extra);
    // The reference (one qdisc, three levels of classes) gets the same resolved parameters (leaf
    // quantum 1000 B from r2q, one packet per turn), which shares evenly: the same bound. (Seen:
    // 0.16%.) With a quantum above the packet size both schedulers, and Linux, share unevenly
    // between sites for a while: see crates/core/tests/htb_three_level_sites.rs.
    let c = get("reference-htb");
    assert!(c.extra["leaves.err_max_pct"] < (31_250.0 + 1000.0) * 8.0 / 5e6 * 100.0, "{:?}", c.extra);
}

#[test]
fn benita_rows_are_exact_whatever_burst_and_packet_size() {
    let r = sim("benita", &[("row", "t4-15k-512,t5-4.8k-64,t6,t8"), ("duration", "3s")]);
    for c in &r.cases {
        assert!(c.extra.keys().any(|k| k.starts_with("seed_mbit.")), "{}: no seed figures", c.name);
    }
    // Tables 4/5: the paper saw 25.3 and 8.96 Mbit/s; exact arithmetic gives the configured rate.
    for (row, rate) in [("row=t4-15k-512", 30e6), ("row=t5-4.8k-64", 8e6)] {
        let f = &case(&r, &[row]).flows[0];
        assert!((f.achieved_bps - rate).abs() / rate < 0.005, "{row}: {}", f.achieved_bps);
    }
    // Table 6: class 1:2 gets its 2 Mbit/s, the two streams of 1:3 share 28 Mbit/s.
    let t6 = case(&r, &["row=t6"]);
    let get = |n: &str| t6.flows.iter().find(|f| f.name == n).unwrap().achieved_bps;
    assert!((get("s3") - 2e6).abs() < 0.05e6, "{}", get("s3"));
    assert!((get("s1") + get("s2") - 28e6).abs() < 0.3e6);
    // Table 8: three equal streams in one class share it evenly.
    let t8 = case(&r, &["row=t8"]);
    let rates: Vec<f64> = t8.flows.iter().map(|f| f.achieved_bps).collect();
    let (lo, hi) =
        (rates.iter().cloned().fold(f64::MAX, f64::min), rates.iter().cloned().fold(0.0, f64::max));
    assert!(hi / lo < 1.1, "{rates:?}");
}

#[test]
fn sfq_key_only_perturbation_spikes_ping_latency_and_sticky_does_not() {
    let r = sim("sfq-perturb", &[("perturb", "5s"), ("duration", "21s")]);
    let worst = |m: &str| {
        case(&r, &[&format!("mode={m}")])
            .flows
            .iter()
            .filter(|f| f.name.starts_with("ping"))
            .map(|f| f.latency_ms.max)
            .fold(0.0, f64::max)
    };
    let (legacy, sluice) = (worst("keyonly"), worst("sticky"));
    assert!(legacy > 1.3 * sluice, "legacy max {legacy} ms vs sticky {sluice} ms");
}

#[test]
fn tc_script_shaper_is_parsed_built_and_classifies_real_frames() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/home-uplink-tc.toml");
    let sc = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions {
        overrides: vec![
            ("load".into(), "flood".into()),
            ("test".into(), "voip".into()),
            ("duration".into(), "5s".into()),
        ],
        seed: None,
        force: false,
    };
    let r = run(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}")).0;
    let on = case(&r, &["shaper=on"]);
    assert_eq!(on.classes.len(), 2, "leaf classes 1:10 and 1:11 from the script");
    let voip = on.flows.iter().find(|f| f.name == "voip").unwrap();
    assert_eq!(voip.loss_pct, 0.0);
    let off = case(&r, &["shaper=off"]);
    assert!(off.flows.iter().find(|f| f.name == "voip").unwrap().loss_pct > 30.0);
}

#[test]
fn tc_script_errors_point_into_the_scenario() {
    let src = "name = \"x\"\ndescription = \"d\"\nduration = \"1s\"\n[[link]]\nname = \"l\"\nqueue = \"shaper\"\n[shaper]\ntc = \"tc qdisc add dev eth0 root handle 1: htb default 10\\ntc class add dev eth0 parent 1: classid 1:1 htb rate lots\"\n";
    let sc = Scenario::parse("t.toml", src).unwrap();
    let e = run(&sc, &RunOptions::default(), &|_| {}).unwrap_err();
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("tc script"), "{e}");
}

#[test]
fn a_tc_script_policer_meters_every_packet() {
    // 8 Mbit/s of UDP into a 2 Mbit/s policer on a 100 Mbit/s shaper: the engine classifies each
    // packet, so the policer passes about its rate and drops the rest (classifying once per flow
    // would pass or drop the whole flow). TCP-less, so nothing backs off.
    let src = r#"
name = "police"
description = "per-packet policing"
duration = "4s"
warmup = "1s"
[[link]]
name = "eth"
rate = "100mbit"
queue = "shaper"
[shaper]
tc = """
tc qdisc add dev eth0 root handle 1: htb default 10
tc class add dev eth0 parent 1: classid 1:10 htb rate 100mbit
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10 action police rate 2mbit burst 20k drop
"""
[[flow]]
name = "flood"
type = "cbr"
rate = "8mbit"
size = 1000
port = 5001
[[flow]]
name = "other"
type = "cbr"
rate = "8mbit"
size = 1000
port = 6000
"#;
    let sc = Scenario::parse("police.toml", src).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&sc, &RunOptions::default(), &|_| {}).unwrap_or_else(|e| panic!("{e}")).0;
    let c = &r.cases[0];
    let flow = |n: &str| c.flows.iter().find(|f| f.name == n).unwrap();
    let policed = flow("flood");
    assert!((policed.achieved_bps - 2e6).abs() < 0.1e6, "policed flow {} bit/s", policed.achieved_bps);
    assert!((policed.loss_pct - 75.0).abs() < 3.0, "loss {}", policed.loss_pct);
    assert_eq!(flow("other").loss_pct, 0.0);
    assert!((flow("other").achieved_bps - 8e6).abs() < 0.1e6);
    // The shaper's tc -s counters include the filter drops.
    let q = c.qdiscs.iter().find(|q| q.link == "eth").unwrap();
    assert!(q.drops > 1000, "{q:?}");
}

/// A TCP flow is frozen when it reports throughput while its receiver gets nothing in order, or
/// when its latency never varies. Every TCP flow of every built-in scenario must deliver goodput
/// close to its wire rate and show queueing that varies, except where starvation is the point.
#[test]
fn no_builtin_tcp_flow_is_frozen() {
    let runs = [
        ("home-uplink", vec![("duration", "12s")]),
        ("tunnel-flows", vec![("duration", "10s")]),
        ("ecn-priority", vec![("duration", "10s"), ("variant", "sluice")]),
    ];
    let mut checked = 0;
    for (name, set) in runs {
        let r = sim(name, &set);
        for c in &r.cases {
            for f in c.flows.iter().filter(|f| f.kind.starts_with("tcp")) {
                let goodput = c.extra[&format!("{}.goodput_bps", f.name)];
                let what = format!("{name} {} {}: {f:?} goodput {goodput}", c.name, f.name);
                if c.name.contains("load=flood") && c.name.contains("shaper=off") {
                    // An unresponsive flood fills the shared FIFO: TCP starves (the seed's point).
                    continue;
                }
                assert!(goodput > 100e3, "no goodput: {what}");
                assert!(goodput > 0.9 * f.achieved_bps, "wire rate not delivered in order: {what}");
                assert!(
                    f.latency_ms.max - f.latency_ms.p50 > 0.5 && f.jitter_ms > 0.0,
                    "constant latency: {what}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "{checked}");
}

/// Seed 003's scp rows: three TCP flows in one 2.3 Mbit/s HTB class with fq_codel share it and
/// keep delivering; none freezes at a constant latency.
#[test]
fn three_tcp_flows_share_one_fq_codel_class() {
    let r = sim("home-uplink", &[("load", "scp"), ("shaper", "on"), ("test", "scp")]);
    let c = &r.cases[0];
    let a: Vec<_> = c.flows.iter().filter(|f| f.name.starts_with("scpA")).collect();
    assert_eq!(a.len(), 3);
    let share = 2.3e6 / 3.0;
    for f in a {
        let goodput = c.extra[&format!("{}.goodput_bps", f.name)];
        assert!((goodput - share).abs() < 0.2 * share, "{}: goodput {goodput}", f.name);
        assert!(f.latency_ms.p99 > f.latency_ms.p50 * 1.2, "{}: {:?}", f.name, f.latency_ms);
        assert!(c.extra[&format!("{}.timeouts", f.name)] < 5.0, "{}: timeouts", f.name);
    }
}

fn refused(src: &str, set: &[(&str, &str)]) -> String {
    let sc = Scenario::parse("b.toml", src).unwrap();
    let opts = RunOptions {
        overrides: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        seed: None,
        force: false,
    };
    match sluice_sim::run::run(&sc, &opts, &|_| {}) {
        Ok(_) => panic!("ran: {src}"),
        Err(e) => e.to_string(),
    }
}

const BASE: &str = "name = \"b\"\ndescription = \"d\"\nduration = \"2s\"\n[params]\nn = \"1\"\n[[link]]\nname = \"l\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n";

#[test]
fn inputs_that_would_hang_or_exhaust_memory_are_refused_before_the_run() {
    let onoff = format!(
        "{BASE}[[flow]]\nname = \"f\"\ntype = \"onoff\"\nrate = \"1mbit\"\non = \"0s\"\noff = \"0s\"\n"
    );
    assert!(refused(&onoff, &[]).contains("on period"), "{}", refused(&onoff, &[]));
    let rateless = "name = \"b\"\ndescription = \"d\"\nduration = \"2s\"\n[[link]]\nname = \"l\"\n[[flow]]\nname = \"f\"\ntype = \"backlog\"\n";
    assert!(refused(rateless, &[]).contains("without bound"), "{}", refused(rateless, &[]));
    let cbr = format!("{BASE}[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n");
    let e = refused(&cbr, &[("step", "1ns")]);
    assert!(e.contains("samples") && e.contains("step"), "{e}");
    let e = refused(&cbr, &[("duration", "18000000000s")]);
    assert!(e.contains("duration"), "{e}");
    let fast = cbr.replace("1mbit", "10gbit");
    let e = refused(&fast, &[("duration", "100000s"), ("step", "1s")]);
    assert!(e.contains("packets") && e.contains("duration"), "{e}");
    let flows = format!("{BASE}[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"10gbit\"\ncount = 65535\n");
    let e = refused(&flows, &[("duration", "60s")]);
    assert!(e.contains("packets") || e.contains("memory"), "{e}");
    let sc = Scenario::parse("b.toml", &cbr).unwrap();
    let e = sc.points(&[("n".into(), (0..400).map(|i| i.to_string()).collect::<Vec<_>>().join(","))]);
    assert!(e.is_ok(), "a few hundred points are fine");
    let big = format!("{BASE}[sweep]\na = {{ from = 1, to = 100000, step = 1 }}\nb = {{ from = 1, to = 100000, step = 1 }}\n[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n");
    match Scenario::parse("b.toml", &big) {
        Ok(sc) => {
            let e = sc.points(&[]).unwrap_err().to_string();
            assert!(e.contains("points"), "{e}");
        }
        Err(e) => assert!(e.to_string().contains("points"), "{e}"),
    }
}

/// A run that would take hours is refused with the estimate (events, wall time) and `--force`
/// in the message; `--force` (`build_case_opts(.., true)`) admits it. The issue's cases: probes
/// every 1 ns and 64-byte CBR at 1 Tbit/s, for 100 s.
#[test]
fn runs_that_would_take_hours_need_force() {
    for flow in [
        "[[flow]]\nname = \"f\"\ntype = \"probe\"\ninterval = \"1ns\"\n",
        "[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1000gbit\"\nsize = 64\n",
    ] {
        let src = format!("{BASE}{flow}").replace("duration = \"2s\"", "duration = \"100s\"");
        let e = refused(&src, &[]);
        assert!(e.contains("events") && e.contains("hours") && e.contains("--force"), "{e}");
        let sc = Scenario::parse("b.toml", &src).unwrap();
        let p = &sc.points(&[]).unwrap()[0];
        assert!(sluice_sim::scenario::build_case(&sc, p).is_err());
        let c = sluice_sim::scenario::build_case_opts(&sc, p, true).unwrap();
        assert!(c.memory > 0.0);
    }
    // An hour's worth is the limit: 10 s of 1 ns probes (1e10 events, about 33 minutes) runs.
    let src = format!("{BASE}[[flow]]\nname = \"f\"\ntype = \"probe\"\ninterval = \"1ns\"\n")
        .replace("duration = \"2s\"", "duration = \"10s\"");
    let sc = Scenario::parse("b.toml", &src).unwrap();
    assert!(sluice_sim::scenario::build_case(&sc, &sc.points(&[]).unwrap()[0]).is_ok());
}

/// A million flows or a million fq_codel leaves are refused before anything large is built,
/// with the estimate in the message (they aborted at 12 GB after an estimate of 11.2 GiB).
#[test]
fn a_million_flows_or_fq_codel_leaves_are_refused_before_building() {
    let flows = format!("{BASE}[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"10kbit\"\ncount = 1000000\n");
    let e = refused(&flows, &[]);
    assert!(e.contains("of memory"), "{e}");
    let leaves = format!(
        "{BASE}queue = \"shaper\"\n[shaper]\nkind = \"htb\"\n[[shaper.class]]\nid = \"1:1\"\nrate = \"10mbit\"\n\
         [shaper.leaves]\ncount = 1000000\nparent = \"1:1\"\nfirst = \"1:10\"\nrate = \"8bit\"\nleaf = \"fq_codel\"\n\
         [[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\nclass = \"1:10\"\n"
    );
    let t = std::time::Instant::now();
    let e = refused(&leaves, &[]);
    assert!(e.contains("of memory") && e.contains("queues and classes"), "{e}");
    assert!(t.elapsed().as_secs() < 10, "refused before the tree was built");
}

/// Runs `src` in a thread and gives up after a minute: a run whose virtual time stands still
/// fails the test instead of hanging it.
fn outcome(src: &str) -> Result<(), String> {
    let src = src.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let sc = Scenario::parse("b.toml", &src).unwrap();
        let r = run(&sc, &RunOptions { overrides: vec![], seed: None, force: false }, &|_| {});
        let _ = tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the run never ended (virtual time stands still)"))
}

/// HTB queues what nothing classifies in its `default` class, or, when that class does not
/// exist, in its direct queue, which no rate limits. On a link without a rate a greedy sender
/// there never let virtual time advance (the check before the run counted any HTB as a limit):
/// it is refused before the run, with the class named. Where the traffic does reach a class
/// (the default exists, or a filter or the host's priority names one), the run goes ahead.
#[test]
fn unclassified_traffic_in_htbs_direct_queue_on_a_rateless_link_is_refused() {
    let script = |default: &str, filter: &str| {
        format!(
            "name = \"b\"\ndescription = \"d\"\nduration = \"20ms\"\n\
             [[link]]\nname = \"l\"\nqueue = \"shaper\"\n\
             [shaper]\ntc = \"\"\"\ntc qdisc add dev eth0 root handle 1: htb{default}\n\
             tc class add dev eth0 parent 1: classid 1:10 htb rate 1mbit\n{filter}\"\"\"\n\
             [[flow]]\nname = \"bulk\"\ntype = \"backlog\"\n"
        )
    };
    let e = outcome(&script(" default 99", "")).unwrap_err();
    assert!(e.contains("`bulk`") && e.contains("default class 1:99") && e.contains("direct queue"), "{e}");
    let e = outcome(&script("", "")).unwrap_err();
    assert!(e.contains("no default class") && e.contains("direct queue"), "{e}");
    // TCP without a round trip to bound its window is refused the same way.
    let tcp = script(" default 99", "").replace("type = \"backlog\"", "type = \"tcp\"");
    assert!(outcome(&tcp).unwrap_err().contains("default class 1:99"));
    // The traffic reaches class 1:10: by default, by a filter, by the host's priority.
    outcome(&script(" default 10", "")).unwrap();
    let filter = "tc filter add dev eth0 parent 1: protocol all matchall classid 1:10\n";
    outcome(&script(" default 99", filter)).unwrap();
    // The structured form: no `default`, and a `[[shaper.match]]` rule for other traffic only.
    let structured = "name = \"b\"\ndescription = \"d\"\nduration = \"20ms\"\n\
        [[link]]\nname = \"l\"\nqueue = \"shaper\"\n\
        [shaper]\nkind = \"htb\"\n[[shaper.class]]\nid = \"1:10\"\nrate = \"1mbit\"\n\
        [[shaper.match]]\nflow = \"voip\"\nclass = \"1:10\"\n\
        [[flow]]\nname = \"bulk\"\ntype = \"backlog\"\n";
    let e = outcome(structured).unwrap_err();
    assert!(e.contains("`bulk`") && e.contains("no default class"), "{e}");
    outcome(&structured.replace("flow = \"voip\"", "flow = \"bulk\"")).unwrap();
    outcome(&structured.replace("kind = \"htb\"\n", "kind = \"htb\"\ndefault = \"1:10\"\n")).unwrap();
}

/// One flow through a 10 Mbit/s, 100-packet FIFO with 20 ms RTT: BBR fills the pipe with a
/// short queue where CUBIC fills the buffer; both report their window and RTT over time.
#[test]
fn bbr_fills_the_pipe_with_a_short_queue_and_cubic_fills_the_buffer() {
    let src =
        "name = \"b\"\ndescription = \"d\"\nduration = \"8s\"\nwarmup = \"3s\"\n[params]\ncc = \"bbr\"\n\
        [sweep]\ncc = [\"bbr\", \"cubic\"]\n\
        [[link]]\nname = \"l\"\nrate = \"10mbit\"\ndelay = \"10ms\"\nqueue = \"pfifo 100\"\n\
        [[reverse]]\nname = \"r\"\nrate = \"100mbit\"\ndelay = \"10ms\"\n\
        [[flow]]\nname = \"bulk\"\ntype = \"tcp\"\ncc = \"${cc}\"\n\
        [[flow]]\nname = \"ping\"\ntype = \"probe\"\ninterval = \"50ms\"\n";
    let sc = Scenario::parse("b.toml", src).unwrap();
    let r = run(&sc, &RunOptions { overrides: vec![], seed: None, force: false }, &|_| {}).unwrap().0;
    let ideal = 10e6 * 1460.0 / 1514.0;
    let ping = |c: &sluice_report::Case| c.flows.iter().find(|f| f.name == "ping").unwrap().latency_ms;
    let (bbr, cubic) = (case(&r, &["cc=bbr"]), case(&r, &["cc=cubic"]));
    for c in [bbr, cubic] {
        let goodput = c.extra["bulk.goodput_bps"];
        assert!(goodput > 0.95 * ideal, "{}: goodput {goodput}", c.name);
        let s = c.series.as_ref().unwrap();
        let cwnd = &s.tcp_cwnd_pkts["bulk"];
        assert!(cwnd.iter().any(|&w| w > 20.0), "{}: {cwnd:?}", c.name);
        assert!(s.tcp_srtt_ms["bulk"].iter().skip(10).all(|&r| r >= 20.0), "{}", c.name);
    }
    assert!(ping(bbr).p50 < 40.0, "BBR keeps about one BDP queued at most: {:?}", ping(bbr));
    assert!(ping(cubic).p50 > 80.0, "CUBIC fills the FIFO: {:?}", ping(cubic));
    assert_eq!(bbr.flows[0].kind, "tcp-bbr");
}

#[test]
fn home_both_ways_shapes_the_download_through_the_ifb() {
    let r = sim("home-both-ways", &[("duration", "6s")]);
    let flow = |c: &sluice_report::Case, n: &str| c.flows.iter().find(|f| f.name == n).unwrap().clone();
    let off = case(&r, &["direction=download", "shaper=off"]);
    let on = case(&r, &["direction=download", "shaper=on"]);
    // Without the IFB shaper the ISP's buffer fills; with it the queue is the IFB's fq_codel.
    let (p_off, p_on) = (flow(off, "ping").latency_ms.p50, flow(on, "ping").latency_ms.p50);
    assert!(p_off > 3.0 * p_on, "download ping p50 {p_off} ms unshaped, {p_on} ms shaped");
    // The bulk class runs at the IFB's ceil (18.4 Mbit/s), VoIP lands in the priority class.
    let bulk = on.classes.iter().find(|c| c.id == "1:12").expect("IFB class 1:12 reported");
    assert_eq!(bulk.ceil_bps, 18_400_000);
    let e = (bulk.achieved_bps - bulk.ceil_bps as f64) / bulk.ceil_bps as f64;
    assert!(e.abs() < 0.05, "bulk class at {} bit/s", bulk.achieved_bps);
    let prio = on.classes.iter().find(|c| c.id == "1:11").unwrap();
    assert!(prio.packets > 0, "VoIP and ping were not classified into 1:11 on the IFB");
    assert_eq!(flow(on, "voip").loss_pct, 0.0);
    // The upload is shaped on eth0 by the same script.
    let up = case(&r, &["direction=upload", "shaper=on"]);
    let c = up.classes.iter().find(|c| c.id == "1:12").unwrap();
    assert_eq!(c.ceil_bps, 4_600_000);
    assert!(
        flow(up, "ping").latency_ms.p50
            < 0.5 * flow(case(&r, &["direction=upload", "shaper=off"]), "ping").latency_ms.p50
    );
}

/// `sluice lint`'s checks run on a tc-script shaper before the simulation; findings come back
/// with the run.
#[test]
fn lint_findings_on_a_tc_script_shaper_come_with_the_run() {
    let src = "name = \"b\"\ndescription = \"d\"\nduration = \"1s\"\n\
        [[link]]\nname = \"l\"\nrate = \"10mbit\"\nqueue = \"shaper\"\n\
        [shaper]\ntc = \"\"\"\ntc qdisc add dev eth0 root handle 1: sfq perturb 10\n\"\"\"\n\
        [[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1mbit\"\n";
    let sc = Scenario::parse("b.toml", src).unwrap();
    let (_, info) = run(&sc, &RunOptions { overrides: vec![], seed: None, force: false }, &|_| {}).unwrap();
    assert!(info.lint.iter().any(|l| l.starts_with("L007")), "{:?}", info.lint);
    let clean = src.replace(" perturb 10", "");
    let (_, info) = run(
        &Scenario::parse("b.toml", &clean).unwrap(),
        &RunOptions { overrides: vec![], seed: None, force: false },
        &|_| {},
    )
    .unwrap();
    assert!(info.lint.is_empty(), "{:?}", info.lint);
}

/// `--seed` changes the random inputs (flow start times, BBR's first phase): different seeds
/// give different TCP results, the same seed the same ones.
#[test]
fn the_seed_changes_random_inputs_and_only_the_seed_does() {
    let set = [("load", "scp"), ("shaper", "off"), ("test", "scp")];
    let goodputs = |seed: u64| -> Vec<f64> {
        let sc = Scenario::find("home-uplink").unwrap();
        let opts = RunOptions {
            overrides: set.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            seed: Some(seed),
            force: false,
        };
        let r = run(&sc, &opts, &|_| {}).unwrap().0;
        let c = &r.cases[0];
        c.flows.iter().filter_map(|f| c.extra.get(&format!("{}.goodput_bps", f.name)).copied()).collect()
    };
    let (a, b, a2) = (goodputs(1), goodputs(2), goodputs(1));
    assert_eq!(a, a2, "deterministic for one seed");
    assert_ne!(a, b, "seeds 1 and 2 gave identical results");
}
