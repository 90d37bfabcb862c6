//! Root-only integration tests on real namespaces: the kernel backend's netlink round trip and
//! real TCP/UDP traffic through the lab. They skip loudly when namespaces are unavailable.

use sluice_core::Rate;
use sluice_kernel::kernel::{self, ApplyReport, ObjectId, Plan};
use sluice_kernel::netns::{self, ip};
use sluice_lab::testbed::{Lab, LabOptions, IF_SHAPER_SERVER};
use sluice_lab::traffic::{self, Direction, Endpoints, Window};
use sluice_tc::burst::BurstPolicy;
use sluice_tc::model::{ClassOpts, State};
use std::collections::HashMap;
use std::time::Duration;

mod common;
use common::lab_or_skip;

fn netns_or_skip(test: &str) -> bool {
    match netns::netns_available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("\n*** SKIPPING {test}: network namespaces unavailable ({why}) ***\n");
            false
        }
    }
}

/// Removes the lab even when the test fails.
struct Guard(Lab);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

/// A namespace of the test's own with a veth pair `slc-a`/`slc-b`, removed on drop.
struct VethNs(&'static str);
impl VethNs {
    fn new(ns: &'static str) -> VethNs {
        let _ = ip(&["netns", "del", ns]);
        ip(&["netns", "add", ns]).unwrap();
        let g = VethNs(ns);
        ip(&["-n", ns, "link", "add", "slc-a", "type", "veth", "peer", "name", "slc-b"]).unwrap();
        ip(&["-n", ns, "link", "set", "slc-a", "up"]).unwrap();
        g
    }
    /// Applies `config` to slc-a and reads it back.
    fn apply(&self, config: &State, policy: BurstPolicy) -> (ApplyReport, Vec<kernel::KObject>) {
        let config = config.clone();
        netns::in_netns(Some(self.0), move || {
            let rep = kernel::apply(&Plan::new(&config, "slc-a", policy)?)?;
            Ok((rep, kernel::read_back("slc-a")?))
        })
        .unwrap()
    }
}
impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", self.0]);
    }
}

fn script(text: &str) -> State {
    kernel::script_state(text, &[("DEV", "slc-a")]).unwrap()
}

/// Every netlink request a plan makes, in order.
fn messages(plan: &Plan<'_>) -> Vec<Vec<u8>> {
    let q = plan.qdiscs().map(|q| kernel::qdisc_msg(1, q, true).bytes().to_vec());
    q.chain(plan.classes().map(|c| kernel::class_msg(1, c).bytes().to_vec())).collect()
}

#[test]
fn apply_round_trips_through_netlink_on_a_veth() {
    if !netns_or_skip("apply_round_trips_through_netlink_on_a_veth") {
        return;
    }
    let ns = VethNs::new("slc-tapply-x");
    let text = "tc qdisc add dev $DEV root handle 1: htb default 20 r2q 100\n\
        tc class add dev $DEV parent 1: classid 1:1 htb rate 20gbit\n\
        tc class add dev $DEV parent 1:1 classid 1:10 htb rate 5gbit ceil 20gbit prio 1\n\
        tc class add dev $DEV parent 1:1 classid 1:20 htb rate 2mbit ceil 10mbit burst 3000 prio 3\n\
        tc qdisc add dev $DEV parent 1:10 handle 10: pfifo limit 77\n\
        tc qdisc add dev $DEV parent 1:20 handle 20: tbf rate 1mbit burst 4k limit 30000\n";
    let state = script(text);
    // The TOML form of the same configuration plans the same requests (apply takes either).
    let toml_path = std::env::temp_dir().join(format!("slc-tapply-{}.toml", std::process::id()));
    std::fs::write(&toml_path, sluice_tc::export::to_toml(&state).unwrap()).unwrap();
    let from_toml = sluice_tc::script::load_file(&toml_path, &Default::default());
    let _ = std::fs::remove_file(&toml_path);
    let from_toml = from_toml.unwrap().state;
    let plan = Plan::new(&state, "slc-a", BurstPolicy::Sluice).unwrap();
    let plan_toml = Plan::new(&from_toml, "slc-a", BurstPolicy::Sluice).unwrap();
    assert_eq!(messages(&plan_toml), messages(&plan));
    assert_eq!(plan_toml.tc_commands(), plan.tc_commands());

    let (rep, objs) = ns.apply(&state, BurstPolicy::Sluice);
    assert!(rep.refused.is_empty(), "{:?}", rep.refused);
    assert_eq!(rep.applied.len(), 6);
    assert_eq!(plan.compare(&objs), vec![]);
    // 20 Gbit needs the 64-bit attributes; the kernel must report the same rate back.
    let c1 = objs.iter().find(|o| !o.is_qdisc && o.handle == 0x1_0001).unwrap();
    assert_eq!(c1.rate, Some(Rate::from_bps(20_000_000_000)));
    // The comparison is not vacuous: a different model is reported as different.
    let mut other = state.clone();
    let ClassOpts::Htb(h) = &mut other.devices[0].classes[1].opts else { panic!("htb class") };
    h.ceil = 19_000_000_000;
    let diffs = Plan::new(&other, "slc-a", BurstPolicy::Sluice).unwrap().compare(&objs);
    // The ceil differs; with the cburst left to the rule, its size in time may differ by the
    // rule's rounding to whole KiB too, and nothing else does.
    assert!(diffs.iter().any(|d| d.text.contains("rate/ceil")), "{diffs:?}");
    assert!(diffs.iter().all(|d| d.object == ObjectId::Class(0x1_0010)), "{diffs:?}");
    assert!(
        diffs.iter().all(|d| d.text.contains("rate/ceil") || d.text.contains("buffer/cbuffer")),
        "{diffs:?}"
    );

    // A qdisc this kernel may lack is sent with its options and reported with the kernel's own
    // error, never dropped.
    let (rep, _) = ns.apply(&script("tc qdisc add dev x root handle 1: sfq perturb 10"), BurstPolicy::Sluice);
    assert_eq!(rep.applied.len() + rep.refused.len(), 1, "{rep:?}");
    if !std::path::Path::new("/sys/module/sch_sfq").exists() {
        assert_eq!(rep.refused.len(), 1, "{rep:?}");
        assert!(rep.refused[0].text.contains("kernel said"), "{rep:?}");
    }
    // Clearing is idempotent.
    netns::in_netns(Some(ns.0), || kernel::clear("slc-a").and_then(|_| kernel::clear("slc-a"))).unwrap();
}

#[test]
fn apply_nests_htb_in_order_and_reports_what_it_did_not_install() {
    if !netns_or_skip("apply_nests_htb_in_order_and_reports_what_it_did_not_install") {
        return;
    }
    let ns = VethNs::new("slc-tapply-n");
    // A nested HTB (as examples/home-003.tc): its classes can only follow the qdisc, which can
    // only follow its parent class.
    let state = script(
        "tc qdisc add dev $DEV root handle 1: htb default 20\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 900kbit\n\
         tc class add dev $DEV parent 1:1 classid 1:10 htb rate 300kbit ceil 900kbit\n\
         tc class add dev $DEV parent 1:1 classid 1:20 htb rate 600kbit ceil 900kbit prio 1\n\
         tc qdisc add dev $DEV parent 1:10 handle 10: pfifo\n\
         tc qdisc add dev $DEV parent 1:20 handle 20: htb default 1\n\
         tc class add dev $DEV parent 20: classid 20:1 htb rate 150kbit ceil 900kbit\n\
         tc class add dev $DEV parent 20: classid 20:2 htb rate 150kbit ceil 900kbit\n\
         tc qdisc add dev $DEV parent 20:1 handle 201: bfifo limit 30000\n\
         tc qdisc add dev $DEV parent 20:2 handle 202: pfifo limit 50\n\
         tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10\n",
    );
    let (rep, objs) = ns.apply(&state, BurstPolicy::Sluice);
    let plan = Plan::new(&state, "slc-a", BurstPolicy::Sluice).unwrap();
    assert_eq!(rep.applied.len(), 11, "{rep:?}");
    assert!(rep.refused.is_empty(), "{rep:?}");
    assert_eq!(plan.compare(&objs), vec![]);
    assert!(
        rep.applied[10].starts_with("filter dev slc-a parent 1: protocol ip prio 1 handle 800::800 u32"),
        "{rep:?}"
    );
    assert_eq!(plan.unclassified_destination(), "class 1:20, the default of htb 1:");

    // Below a refused qdisc nothing is sent, and each object says why.
    if !std::path::Path::new("/sys/module/sch_prio").exists() {
        let (rep, _) = ns.apply(
            &script(
                "tc qdisc add dev $DEV root handle 1: prio\n\
                 tc qdisc add dev $DEV parent 1:1 handle 10: pfifo\n",
            ),
            BurstPolicy::Sluice,
        );
        assert_eq!(rep.refused.len(), 2, "{rep:?}");
        assert!(rep.refused[0].text.contains("kernel said"), "{rep:?}");
        assert!(rep.refused[1].text.contains("not sent, its parent qdisc 1: was refused"), "{rep:?}");
    }
}

#[test]
fn kernel_htb_shapes_real_tcp_and_probes_see_it() {
    if !lab_or_skip("kernel_htb_shapes_real_tcp_and_probes_see_it") {
        return;
    }
    let lab = Lab::new("tkern").unwrap();
    let _g = Guard(lab.clone());
    lab.up(&LabOptions::default()).unwrap();
    let config = kernel::script_state(
        "tc qdisc add dev $DEV root handle 1: htb default 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 40mbit\n\
         tc qdisc add dev $DEV parent 1:1 handle 10: pfifo limit 200\n",
        &[("DEV", IF_SHAPER_SERVER)],
    )
    .unwrap();
    let rep = netns::in_netns(Some(&lab.shaper_ns()), move || {
        kernel::apply(&Plan::new(&config, IF_SHAPER_SERVER, BurstPolicy::Sluice)?)
    })
    .unwrap();
    assert!(rep.refused.is_empty(), "{rep:?}");
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(700), measure: Duration::from_secs(2) };
    let ep2 = ep.clone();
    let prober = std::thread::spawn(move || {
        traffic::probes(&ep2, Duration::from_millis(20), 64, None, 7001, Duration::from_millis(2700))
    });
    let flows = traffic::bulk_tcp(&ep, 2, Direction::Up, None, 7000, win).unwrap();
    let probe = prober.join().unwrap().unwrap();
    let total: f64 = flows.iter().map(|f| f.bps()).sum();
    let ideal = 40e6 * 1448.0 / 1514.0;
    eprintln!(
        "kernel HTB 40mbit: TCP goodput {:.2} Mbit/s (ideal {:.2}), probe p50 {:.2} ms",
        total / 1e6,
        ideal / 1e6,
        probe.to_result().latency_ms.p50
    );
    assert!(total > 0.8 * ideal && total < 1.1 * ideal, "goodput {total} vs ideal {ideal}");
    // Probes share the 200-packet FIFO with the bulk flows: they must see queueing delay
    // (200 × 1514 B at 40 Mbit/s is up to 60 ms), and most must get through.
    let r = probe.to_result();
    assert!(r.loss_pct < 50.0, "{r:?}");
    assert!(r.latency_ms.p50 > 1.0, "probes should queue behind bulk traffic: {r:?}");
}

#[test]
fn udp_cbr_and_flood_cross_the_bridge() {
    if !lab_or_skip("udp_cbr_and_flood_cross_the_bridge") {
        return;
    }
    let lab = Lab::new("tudp").unwrap();
    let _g = Guard(lab.clone());
    lab.up(&LabOptions { modem: Some(Rate::from_bps(30_000_000)), offloads: false }).unwrap();
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(300), measure: Duration::from_millis(1500) };
    // 10 Mbit CBR under a 30 Mbit modem: all of it arrives.
    let cbr =
        traffic::udp_stream(&ep, Some(Rate::from_bps(10_000_000)), 1000, None, 7100, win, "cbr").unwrap();
    eprintln!("cbr: {:.2} Mbit/s sent {} received {}", cbr.bps() / 1e6, cbr.sent, cbr.received);
    assert!((cbr.bps() / 1e6 - 10.0 * 1000.0 / 1028.0).abs() < 1.5, "{cbr:?}");
    assert!(cbr.to_result().loss_pct < 2.0, "{cbr:?}");
    // A flood is held to the modem's 30 Mbit (payload share 1400/1442 of the wire bytes ± slack).
    let flood = traffic::udp_stream(&ep, None, 1400, None, 7101, win, "flood").unwrap();
    eprintln!("flood: {:.2} Mbit/s sent {} received {}", flood.bps() / 1e6, flood.sent, flood.received);
    assert!(flood.bps() > 0.8 * 30e6 * 1400.0 / 1442.0 && flood.bps() < 1.1 * 30e6, "{flood:?}");
    assert!(flood.sent > flood.received, "a flood above the modem rate must lose packets");
}

#[test]
fn measure_rate_sweep_writes_results_for_kernel_and_none() {
    if !lab_or_skip("measure_rate_sweep_writes_results_for_kernel_and_none") {
        return;
    }
    use sluice_lab::measure::{self, Backend, Settings};
    let lab = Lab::new("tmeas").unwrap();
    let _g = Guard(lab.clone());
    lab.up(&LabOptions::default()).unwrap();
    let set: HashMap<String, String> =
        [("targets", "30mbit"), ("warmup", "0.5"), ("duration", "1.5"), ("load", "udp")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let s = Settings { set, progress: true };
    let k = measure::run("rate-sweep", &lab, &Backend::Kernel, &s).unwrap();
    assert_eq!(k.backend, "kernel");
    let c = &k.cases[0];
    let wire = c.classes[0].achieved_bps;
    // The kernel's own counters over the window: 36 Mbit offered, 30 Mbit allowed.
    assert!(wire > 0.9 * 30e6 && wire < 1.05 * 30e6, "{c:?}");
    assert!(c.params["kernel"].contains("TcDefault"));
    let n = measure::run("rate-sweep", &lab, &Backend::None, &s).unwrap();
    // Unshaped: the 36 Mbit offered all arrive (payload share 1472/1514).
    let g = n.cases[0].extra["goodput_bps"];
    assert!(g > 0.9 * 36e6 * 1472.0 / 1514.0, "{:?}", n.cases[0]);
    let json = k.to_json();
    assert!(sluice_lab::results::Results::from_json(&json).is_ok());
    assert!(matches!(measure::run("nope", &lab, &Backend::None, &s), Err(sluice_lab::LabError::Config(_))));
}
