//! Root-only: `sluice shape`'s loop forwarding real TCP and UDP through the lab. Skips loudly
//! without network namespaces.

use sluice_core::Rate;
use sluice_lab::testbed::{Lab, LabOptions, PathMode, IF_SHAPER_SERVER};
use sluice_lab::traffic::{self, Direction, Endpoints, Window};
use sluice_live::shaper::{self, Options, Snapshot};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

mod common;
use common::{lab_or_skip, shaper_options};

struct Guard(Lab, Arc<AtomicBool>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.1.store(true, Ordering::Relaxed);
        let _ = self.0.down();
    }
}

/// One HTB class at `rate` with a pfifo of `limit` packets, as a tc script.
fn single_htb(rate: &str, limit: u32) -> String {
    format!(
        "tc qdisc add dev $DEV root handle 1: htb default 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate {rate}\n\
         tc qdisc add dev $DEV parent 1:1 pfifo limit {limit}\n"
    )
}

fn start(
    lab: &Lab,
    script: &str,
    control: Option<std::path::PathBuf>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Snapshot> {
    let opts = Options { control, ..shaper_options(lab, script, stop) };
    let h = std::thread::spawn(move || shaper::run(opts).expect("shaper runs"));
    std::thread::sleep(Duration::from_millis(400)); // calibration + ring set-up
    h
}

#[test]
fn shapes_real_tcp_to_the_configured_rate_and_reloads() {
    if !lab_or_skip("shapes_real_tcp_to_the_configured_rate_and_reloads") {
        return;
    }
    let lab = Lab::new("tshape").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    let sock = std::env::temp_dir().join(format!("sluice-test-{}/shape.sock", std::process::id()));
    let h = start(&lab, &single_htb("30mbit", 300), Some(sock.clone()), stop.clone());
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(800), measure: Duration::from_secs(2) };
    let ep2 = ep.clone();
    let prober = std::thread::spawn(move || {
        traffic::probes(&ep2, Duration::from_millis(20), 64, None, 7201, Duration::from_millis(2800))
    });
    let flows = traffic::bulk_tcp(&ep, 2, Direction::Up, None, 7200, win).unwrap();
    let probe = prober.join().unwrap().unwrap().to_result();
    let total: f64 = flows.iter().map(|f| f.bps()).sum();
    let ideal = 30e6 * 1448.0 / 1514.0;
    eprintln!(
        "sluice 30mbit: TCP goodput {:.2} Mbit/s (ideal {:.2}); probe {:?}",
        total / 1e6,
        ideal / 1e6,
        probe.latency_ms
    );
    assert!(total > 0.8 * ideal && total < 1.1 * ideal, "goodput {total} vs ideal {ideal}");
    assert!(probe.loss_pct < 50.0 && probe.latency_ms.p50 > 1.0, "{probe:?}");

    // Stats over the control socket, then a reload to 60 Mbit while traffic runs.
    let stats = sluice_live::control::request(&sock, "stats").unwrap();
    assert!(stats.contains("Sent") && stats.contains("rate 30Mbit"), "{stats}");
    let cfg = std::env::temp_dir().join(format!("sluice-test-{}/60.tc", std::process::id()));
    std::fs::write(&cfg, single_htb("60mbit", 300)).unwrap();
    let ep3 = ep.clone();
    let load = std::thread::spawn(move || {
        traffic::bulk_tcp(
            &ep3,
            2,
            Direction::Up,
            None,
            7202,
            Window { warmup: Duration::from_millis(1200), measure: Duration::from_secs(2) },
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let ans = sluice_live::control::request(&sock, &format!("reload {}", cfg.display())).unwrap();
    assert!(ans.starts_with("reloaded"), "{ans}");
    let after: f64 = load.join().unwrap().unwrap().iter().map(|f| f.bps()).sum();
    eprintln!("after reload to 60mbit: {:.2} Mbit/s", after / 1e6);
    assert!(after > 0.8 * 60e6 * 1448.0 / 1514.0 && after < 1.1 * 60e6, "{after}");
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    let d = &snap.directions[0];
    assert_eq!(snap.reloads, 1);
    // The reload under load lost no count and leaked no buffer: every frame the engine received
    // was sent, dropped (and its slot freed) or is still queued.
    let e = d.engine.unwrap();
    assert_eq!(e.received, e.sent_packets + e.dropped + e.queued, "{e:?}");
    assert_eq!(e.qdisc.drops, e.enqueue_drops + e.qdisc_drops + e.classify_drops, "{e:?}");
    assert_eq!(snap.pool_frames, e.queued, "pool slots held vs frames queued");
    assert!(d.counters.tx_frames > 1000 && d.counters.tx_errors == 0, "{:?}", d.counters);
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
}

#[test]
fn udp_flood_is_held_to_rate_and_the_loop_survives_a_vanishing_interface() {
    if !lab_or_skip("udp_flood_is_held_to_rate_and_the_loop_survives_a_vanishing_interface") {
        return;
    }
    let lab = Lab::new("tflood").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    let h = start(&lab, &single_htb("20mbit", 100), None, stop.clone());
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(300), measure: Duration::from_millis(1500) };
    let f = traffic::udp_stream(&ep, Some(Rate::from_bps(60_000_000)), 1200, None, 7300, win, "udp").unwrap();
    eprintln!(
        "60 Mbit offered into 20 Mbit: {:.2} Mbit/s delivered, sent {} received {}",
        f.bps() / 1e6,
        f.sent,
        f.received
    );
    // Payload share of the wire: 1200 / (1200 + 42).
    let ideal = 20e6 * 1200.0 / 1242.0;
    assert!(f.bps() > 0.85 * ideal && f.bps() < 1.1 * ideal, "{f:?}");
    // Pull the server-side link out from under the shaper: it must report and keep running.
    sluice_kernel::netns::ip(&["-n", &lab.shaper_ns(), "link", "del", IF_SHAPER_SERVER]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!h.is_finished(), "the shaper must survive a vanished interface");
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    assert!(snap.directions[0].qdisc.unwrap().drops > 0);
}

#[test]
fn filters_from_a_tc_script_steer_traffic_on_the_live_path() {
    if !lab_or_skip("filters_from_a_tc_script_steer_traffic_on_the_live_path") {
        return;
    }
    let lab = Lab::new("tfilt").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    // UDP to port 7401 is held to 5 Mbit by a u32 filter; everything else gets 40 Mbit.
    let script = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
         tc class add dev $DEV parent 1: classid 1:10 htb rate 5mbit\n\
         tc class add dev $DEV parent 1: classid 1:20 htb rate 40mbit\n\
         tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dport 7401 0xffff flowid 1:10\n";
    let h = start(&lab, script, None, stop.clone());
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(400), measure: Duration::from_millis(1500) };
    let ep2 = ep.clone();
    let other = std::thread::spawn(move || {
        traffic::udp_stream(&ep2, Some(Rate::from_bps(30_000_000)), 1200, None, 7402, win, "other")
    });
    let slow = traffic::udp_stream(&ep, Some(Rate::from_bps(20_000_000)), 1200, None, 7401, win, "filtered")
        .unwrap();
    let other = other.join().unwrap().unwrap();
    eprintln!("filtered: {:.2} Mbit/s, other: {:.2} Mbit/s", slow.bps() / 1e6, other.bps() / 1e6);
    assert!(slow.bps() < 5.5e6 && slow.bps() > 3.5e6, "{slow:?}");
    assert!(other.bps() > 25e6, "{other:?}");
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    let d = &snap.directions[0];
    assert!(d.config.contains("1 filters"), "{}", d.config);
    // Every frame the engine received is accounted for: sent, dropped or still queued.
    let e = d.engine.unwrap();
    assert_eq!(e.received, e.sent_packets + e.dropped + e.queued, "{e:?}");
    assert!(e.dropped > 0 && e.qdisc.drops == e.enqueue_drops + e.qdisc_drops + e.classify_drops, "{e:?}");
}

#[test]
fn an_sqm_style_script_shapes_both_ways_the_download_through_its_ifb() {
    if !lab_or_skip("an_sqm_style_script_shapes_both_ways_the_download_through_its_ifb") {
        return;
    }
    let lab = Lab::new("tifb").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    // simple.qos's layout: the upload on $DEV's root, the download redirected from $DEV's
    // ingress to ifb4dev and shaped there.
    let sqm = |down: &str| {
        format!(
            "ip link add ifb4dev type ifb\n\
             ip link set dev ifb4dev up\n\
             tc qdisc add dev $DEV root handle 1: htb default 1\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 20mbit\n\
             tc qdisc add dev $DEV parent 1:1 pfifo limit 200\n\
             tc qdisc add dev ifb4dev root handle 1: htb default 1\n\
             tc class add dev ifb4dev parent 1: classid 1:1 htb rate {down}\n\
             tc qdisc add dev ifb4dev parent 1:1 pfifo limit 200\n\
             tc qdisc add dev $DEV handle ffff: ingress\n\
             tc filter add dev $DEV parent ffff: protocol all prio 10 u32 match u32 0 0 flowid 1:1 \
             action mirred egress redirect dev ifb4dev\n"
        )
    };
    let sock = std::env::temp_dir().join(format!("sluice-test-{}/ifb.sock", std::process::id()));
    let h = start(&lab, &sqm("10mbit"), Some(sock.clone()), stop.clone());
    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(800), measure: Duration::from_secs(2) };
    let down: f64 =
        traffic::bulk_tcp(&ep, 2, Direction::Down, None, 7500, win).unwrap().iter().map(|f| f.bps()).sum();
    let up: f64 =
        traffic::bulk_tcp(&ep, 2, Direction::Up, None, 7502, win).unwrap().iter().map(|f| f.bps()).sum();
    let goodput = 1448.0 / 1514.0;
    eprintln!(
        "sqm-style: download {:.2} Mbit/s (ifb 10mbit), upload {:.2} Mbit/s (20mbit)",
        down / 1e6,
        up / 1e6
    );
    assert!(down > 0.8 * 10e6 * goodput && down < 1.1 * 10e6, "download {down}");
    assert!(up > 0.8 * 20e6 * goodput && up < 1.1 * 20e6, "upload {up}");
    // A reload changes the IFB's tree too.
    let cfg = sock.with_file_name("5.tc");
    std::fs::write(&cfg, sqm("5mbit")).unwrap();
    let ans = sluice_live::control::request(&sock, &format!("reload {}", cfg.display())).unwrap();
    assert!(ans.contains("download reloaded: htb root"), "{ans}");
    let down5: f64 =
        traffic::bulk_tcp(&ep, 2, Direction::Down, None, 7504, win).unwrap().iter().map(|f| f.bps()).sum();
    eprintln!("after reloading the IFB to 5mbit: download {:.2} Mbit/s", down5 / 1e6);
    assert!(down5 > 0.8 * 5e6 * goodput && down5 < 1.1 * 5e6, "download {down5}");
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
    assert_eq!(snap.reloads, 1);
    let d = &snap.directions[1];
    assert!(d.config.contains("htb root"), "the download runs the IFB's tree: {}", d.config);
    let e = d.engine.unwrap();
    assert_eq!(e.received, e.sent_packets + e.dropped + e.queued, "{e:?}");
    assert!(e.sent_packets > 1000, "{e:?}");
}

#[test]
fn with_offloads_on_super_packets_and_partial_checksums_cross_intact() {
    if !lab_or_skip("with_offloads_on_super_packets_and_partial_checksums_cross_intact") {
        return;
    }
    let lab = Lab::new("toffl").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    // TSO/GSO/GRO and checksum offload stay on: TCP crosses as 64 KiB super-packets and UDP
    // with checksums left partial.
    lab.up(&LabOptions { offloads: true, ..Default::default() }).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    // Its own directory: the other tests remove theirs when they finish.
    let sock = std::env::temp_dir().join(format!("sluice-test-offl-{}/offl.sock", std::process::id()));
    let h = start(&lab, &single_htb("200mbit", 1000), Some(sock.clone()), stop.clone());
    let ep = Endpoints::of_lab(&lab);
    let errors_before = lab.checksum_errors().unwrap();
    let win = Window { warmup: Duration::from_millis(300), measure: Duration::from_millis(1500) };
    let udp =
        traffic::udp_stream(&ep, Some(Rate::from_bps(50_000_000)), 1200, None, 7600, win, "udp").unwrap();
    // Below 1 Gbit/s super-packets are cut into segments before they are queued.
    let win = Window { warmup: Duration::from_millis(800), measure: Duration::from_secs(2) };
    let tcp: f64 =
        traffic::bulk_tcp(&ep, 2, Direction::Up, None, 7602, win).unwrap().iter().map(|f| f.bps()).sum();
    // Above it they are queued and sent whole, for the kernel to segment.
    let cfg = sock.with_file_name("2g.tc");
    std::fs::write(&cfg, single_htb("2gbit", 1000)).unwrap();
    let ans = sluice_live::control::request(&sock, &format!("reload {}", cfg.display())).unwrap();
    assert!(ans.starts_with("reloaded"), "{ans}");
    let win = Window { warmup: Duration::from_millis(300), measure: Duration::from_secs(1) };
    let fast: f64 =
        traffic::bulk_tcp(&ep, 1, Direction::Up, None, 7604, win).unwrap().iter().map(|f| f.bps()).sum();
    let errors = lab.checksum_errors().unwrap() - errors_before;
    eprintln!(
        "offloads on: UDP {} of {} datagrams, {:.2} Mbit/s; TCP {:.2} Mbit/s through 200mbit, {:.2} through 2gbit; {errors} checksum errors",
        udp.received,
        udp.sent,
        udp.bps() / 1e6,
        tcp / 1e6,
        fast / 1e6
    );
    assert_eq!(errors, 0, "the receivers saw bad checksums");
    assert!(udp.received as f64 > 0.95 * udp.sent as f64, "{udp:?}");
    let ideal = 200e6 * 1448.0 / 1514.0;
    assert!(tcp > 0.8 * ideal && tcp < 1.05 * ideal, "TCP {tcp} vs ideal {ideal}");
    assert!(fast > 2.0 * ideal, "TCP through 2gbit: {fast}");
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    let c = &snap.directions[0].counters;
    eprintln!("{}", snap.to_text());
    assert!(c.rx_super_packets > 0, "no super-packet crossed: offloads are not on? {c:?}");
    assert!(c.split_segments > c.rx_super_packets, "nothing was split at 200mbit: {c:?}");
    assert!(c.rx_partial_checksums > udp.sent / 2, "the datagrams' checksums were not partial: {c:?}");
    assert_eq!((c.refused_total(), c.rx_truncated, c.tx_errors), (0, 0, 0), "{c:?}");
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
    let e = snap.directions[0].engine.unwrap();
    // Super-packets sent whole are counted per segment, as the kernel counts them.
    assert!(e.qdisc.packets > c.tx_frames, "{e:?} vs {c:?}");
}
