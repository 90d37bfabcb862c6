//! Root-only: the live shaper forwarding through AF_XDP ports (`--io xdp`) on the veth lab, and
//! the refusal where AF_XDP would forward broken checksums. Skips loudly without network
//! namespaces or without AF_XDP.

use sluice_core::Rate;
use sluice_lab::testbed::{Lab, LabOptions, PathMode, IF_SHAPER_CLIENT, IF_SHAPER_SERVER};
use sluice_lab::traffic::{self, Direction, Endpoints, Window};
use sluice_live::config;
use sluice_live::io::{self, IoMode, Rx};
use sluice_live::shaper::{self, Options};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// Opens `dev` in `ns` the way the shaper would with `mode`; returns whether it got an AF_XDP
/// port and the line saying what was chosen.
fn probe(ns: &str, dev: &str, mode: IoMode) -> Result<(bool, String), String> {
    let (ns, dev) = (ns.to_string(), dev.to_string());
    std::thread::spawn(move || {
        sluice_live::netns::enter(&ns).map_err(|e| e.to_string())?;
        let (rx, _tx, how) = io::open(&dev, mode).map_err(|e| e.to_string())?;
        Ok((matches!(rx, Rx::Xdp { .. }), how))
    })
    .join()
    .map_err(|_| "probe panicked".to_string())?
}

/// The XDP programs attached to the shaper's two interfaces, as `ip link` shows them.
fn xdp_attached(lab: &Lab) -> Vec<String> {
    let out = sluice_kernel::netns::ip(&["-n", &lab.shaper_ns(), "link", "show"]).unwrap();
    out.lines().filter(|l| l.contains("prog/xdp")).map(str::to_string).collect()
}

const HTB_300M: &str = "tc qdisc add dev $DEV root handle 1: htb default 1\n\
     tc class add dev $DEV parent 1: classid 1:1 htb rate 300mbit\n\
     tc qdisc add dev $DEV parent 1:1 pfifo limit 1000\n";

/// The shaper between the lab's two interfaces through one HTB class at 300 Mbit/s, on AF_XDP.
fn options(lab: &Lab, stop: Arc<AtomicBool>) -> Options {
    Options { io: IoMode::Xdp, ..shaper_options(lab, HTB_300M, stop) }
}

#[test]
fn af_xdp_ports_forward_udp_and_tcp_intact_and_leave_no_program_behind() {
    if !lab_or_skip("af_xdp_ports_forward_udp_and_tcp_intact_and_leave_no_program_behind") {
        return;
    }
    let lab = Lab::new("txdp").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop.clone());
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    match probe(&lab.shaper_ns(), IF_SHAPER_CLIENT, IoMode::Xdp) {
        Ok((true, how)) => eprintln!("probe: {how}"),
        Ok((false, how)) => {
            eprintln!("\n*** SKIPPING the AF_XDP forwarding test: no AF_XDP here ({how}) ***\n");
            return;
        }
        Err(e) => panic!("opening the lab's interface: {e}"),
    }
    assert!(xdp_attached(&lab).is_empty(), "the probe left a program: {:?}", xdp_attached(&lab));
    // An error after the first port is up (the second interface does not exist) detaches the
    // first port's program on the way out.
    let failing = Options {
        out_if: "slc-none".into(),
        forward: config::from_script("test.tc", HTB_300M, "slc-none").unwrap(),
        ..options(&lab, stop.clone())
    };
    let e = std::thread::spawn(move || shaper::run(failing).err()).join().unwrap();
    assert!(
        e.is_some_and(|e| e.to_string().starts_with("slc-none: ")),
        "the shaper should fail opening slc-none"
    );
    assert!(xdp_attached(&lab).is_empty(), "a failed start left a program: {:?}", xdp_attached(&lab));
    let opts = options(&lab, stop.clone());
    let h = std::thread::spawn(move || shaper::run(opts).expect("shaper runs"));
    std::thread::sleep(Duration::from_millis(600)); // calibration + port set-up
    let attached = xdp_attached(&lab);
    assert_eq!(attached.len(), 2, "one program per interface while running: {attached:?}");
    let ep = Endpoints::of_lab(&lab);
    let errors_before = lab.checksum_errors().unwrap();
    let win = Window { warmup: Duration::from_millis(300), measure: Duration::from_millis(1500) };
    let udp =
        traffic::udp_stream(&ep, Some(Rate::from_bps(50_000_000)), 1200, None, 7700, win, "udp").unwrap();
    let win = Window { warmup: Duration::from_millis(800), measure: Duration::from_secs(2) };
    let tcp: f64 =
        traffic::bulk_tcp(&ep, 2, Direction::Up, None, 7702, win).unwrap().iter().map(|f| f.bps()).sum();
    let errors = lab.checksum_errors().unwrap() - errors_before;
    eprintln!(
        "AF_XDP: UDP {} of {} datagrams, {:.2} Mbit/s; TCP {:.2} Mbit/s through 300mbit; {errors} checksum errors",
        udp.received,
        udp.sent,
        udp.bps() / 1e6,
        tcp / 1e6
    );
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    eprintln!("{}", snap.to_text());
    // The checksums cover every payload byte: 0 errors at the receivers means nothing was
    // altered on the way.
    assert_eq!(errors, 0, "the receivers saw bad checksums");
    assert!(udp.received as f64 > 0.95 * udp.sent as f64, "{udp:?}");
    let ideal = 300e6 * 1448.0 / 1514.0;
    assert!(tcp > 0.5 * ideal && tcp < 1.05 * ideal, "TCP {tcp} vs ideal {ideal}");
    let c = &snap.directions[0].counters;
    assert_eq!((c.refused_total(), c.tx_errors), (0, 0), "{c:?}");
    assert!(c.tx_frames > udp.received, "{c:?}");
    assert!(xdp_attached(&lab).is_empty(), "a program was left attached: {:?}", xdp_attached(&lab));
}

#[test]
fn af_xdp_is_refused_on_a_veth_with_offloads_and_auto_says_why() {
    if !lab_or_skip("af_xdp_is_refused_on_a_veth_with_offloads_and_auto_says_why") {
        return;
    }
    let lab = Lab::new("txdpo").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let _g = Guard(lab.clone(), stop);
    lab.up(&LabOptions { offloads: true, ..Default::default() }).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    let (xdp, how) = probe(&lab.shaper_ns(), IF_SHAPER_SERVER, IoMode::Xdp).unwrap();
    eprintln!("--io xdp: {how}");
    assert!(!xdp && how.contains("AF_PACKET") && how.contains("checksum"), "{how}");
    let (xdp, how) = probe(&lab.shaper_ns(), IF_SHAPER_SERVER, IoMode::Auto).unwrap();
    eprintln!("--io auto: {how}");
    assert!(!xdp && how.contains("auto, veth") && how.contains("GSO"), "{how}");
    assert!(xdp_attached(&lab).is_empty(), "{:?}", xdp_attached(&lab));
}
