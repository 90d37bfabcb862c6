//! Root-only: CAKE on the live shaper (the kernel here lacks sch_cake, so only Sluice's backend
//! runs it). Four bulk TCP uploads and a probe every 20 ms through `cake bandwidth 30mbit`: the
//! goodput is the shaped rate's, and the probe's latency stays low where a 1000-packet FIFO
//! behind the same rate (HTB + pfifo) fills. Skips loudly without network namespaces.

use sluice_lab::testbed::{Lab, LabOptions, PathMode};
use sluice_lab::traffic::{self, Direction, Endpoints, Window};
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

/// Runs `script` on the live shaper while 4 TCP uploads and 20 ms probes cross it: returns
/// (goodput bit/s, probe p50 ms, probe p99 ms, packets the qdisc dropped).
fn run(lab: &Lab, script: &str, port: u16) -> (f64, f64, f64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let opts =
        Options { max_duration: Some(Duration::from_secs(30)), ..shaper_options(lab, script, stop.clone()) };
    let h = std::thread::spawn(move || shaper::run(opts).expect("shaper runs"));
    std::thread::sleep(Duration::from_millis(400)); // calibration + ring set-up
    let ep = Endpoints::of_lab(lab);
    let win = Window { warmup: Duration::from_millis(1500), measure: Duration::from_secs(3) };
    let ep2 = ep.clone();
    // Probes from the middle of the warm-up to the end: the queue has built by then.
    let prober = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        traffic::probes(&ep2, Duration::from_millis(20), 64, None, port + 10, Duration::from_millis(3400))
    });
    let flows = traffic::bulk_tcp(&ep, 4, Direction::Up, None, port, win).unwrap();
    let probe = prober.join().unwrap().unwrap().to_result();
    stop.store(true, Ordering::Relaxed);
    let snap = h.join().unwrap();
    let drops = snap.directions[0].qdisc.map(|q| q.drops).unwrap_or(0);
    let total: f64 = flows.iter().map(|f| f.bps()).sum();
    (total, probe.latency_ms.p50, probe.latency_ms.p99, drops)
}

#[test]
fn cake_on_the_live_shaper_shapes_to_its_bandwidth_with_low_latency() {
    if !lab_or_skip("cake_on_the_live_shaper_shapes_to_its_bandwidth_with_low_latency") {
        return;
    }
    let lab = Lab::new("tcake").unwrap();
    let _g = Guard(lab.clone(), Arc::new(AtomicBool::new(false)));
    lab.up(&LabOptions::default()).unwrap();
    lab.set_path(PathMode::Open).unwrap();
    let ideal = 30e6 * 1448.0 / 1514.0;
    let cake = run(&lab, "tc qdisc add dev $DEV root handle 1: cake bandwidth 30mbit besteffort\n", 7600);
    let fifo = run(
        &lab,
        "tc qdisc add dev $DEV root handle 1: htb default 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 30mbit\n\
         tc qdisc add dev $DEV parent 1:1 pfifo limit 1000\n",
        7620,
    );
    eprintln!(
        "cake 30mbit: TCP goodput {:.2} Mbit/s (ideal {:.2}), probe p50 {:.2} p99 {:.2} ms, {} drops; \
         htb+pfifo 1000: {:.2} Mbit/s, probe p50 {:.2} p99 {:.2} ms",
        cake.0 / 1e6,
        ideal / 1e6,
        cake.1,
        cake.2,
        cake.3,
        fifo.0 / 1e6,
        fifo.1,
        fifo.2
    );
    assert!(cake.0 > 0.85 * ideal && cake.0 < 1.05 * ideal, "goodput {} vs ideal {ideal}", cake.0);
    assert!(cake.3 > 0, "COBALT held the queue by dropping or marking");
    // CAKE's target is 5 ms; the FIFO's queue grows as far as TCP's windows take it.
    assert!(cake.2 < 15.0, "cake probe p99 {} ms", cake.2);
    assert!(fifo.1 > 3.0 * cake.1.max(1.0), "fifo p50 {} ms vs cake p50 {} ms", fifo.1, cake.1);
}
