//! What a run allocates, estimated before anything large is built: per flow (its records and
//! latency histogram), per queue and class of the shaper, per packet that can be queued at once,
//! per time-series bin. The figures are measured (`tests/memory_estimate.rs`, `calibrate*`:
//! heap bytes as glibc spends them) with a margin; the property test there checks that the
//! estimate is at least the measured peak over random scenarios.

use sluice_model::model::{QdiscOpts, State};

/// The run's fixed part: event queue, hops, results, the scenario itself.
pub(crate) const BASE: f64 = 16.0 * 1024.0 * 1024.0;
/// Per flow besides its histogram: its source state, records, name, frame template.
pub(crate) const PER_FLOW: f64 = 8192.0;
/// Per packet queued or on a wire at once (the packet slot, its frame, queue entries; measured
/// about 600 bytes with a 1 000-packet queue).
pub(crate) const PER_PACKET: f64 = 1024.0;
/// Per packet of a TCP receive window (scoreboard, time order and retransmission entries, as
/// their queues grow by doubling; measured about 250).
pub(crate) const PER_RWND_PACKET: f64 = 400.0;
/// Per class or qdisc of a shaper besides its kind's own tables (model, engine and core
/// copies; measured about 2 300 bytes a pfifo leaf with its HTB class).
pub(crate) const PER_NODE: f64 = 3072.0;
/// Packets a queue can hold when its options do not say.
const DEFAULT_QUEUE: f64 = 10240.0;

/// Bytes of a latency histogram (1 ns up, 3 significant digits) that grew to cover `max_ns`:
/// 1024 u64 counters per power of two above 2048, as hdrhistogram lays them out, in a vector
/// that grows by doubling (up to twice that). (While one grows its old and new counters
/// coexist: the caller adds one more histogram for that.)
pub(crate) fn histogram_bytes(max_ns: u64) -> f64 {
    let mut buckets = 1u32;
    let mut untrackable = 2048u128;
    while untrackable <= max_ns.max(1) as u128 {
        untrackable <<= 1;
        buckets += 1;
    }
    (buckets + 1) as f64 * 1024.0 * 8.0 * 2.0
}

/// One qdisc's own tables and how many packets it may hold.
pub(crate) fn qdisc_bytes(opts: &QdiscOpts) -> (f64, f64) {
    match opts {
        // Measured 85 KB with 1024 flows.
        QdiscOpts::FqCodel(o) => {
            let flows = o.flows.unwrap_or(1024) as f64;
            (PER_NODE + 100.0 * flows, o.limit.map_or(DEFAULT_QUEUE, |l| l as f64))
        }
        // Measured 17 KB with the default divisor 1024.
        QdiscOpts::Sfq(o) => {
            let div = o.divisor.unwrap_or(1024).max(o.flows.unwrap_or(0)) as f64;
            (PER_NODE + 20.0 * div, o.limit.map_or(127.0, |l| l as f64).max(127.0))
        }
        // Measured 640 KB (8 tins of 1024 flows); its limit is in bytes (memlimit).
        QdiscOpts::Cake(o) => {
            (PER_NODE + 800.0 * 1024.0, o.memlimit.map_or(DEFAULT_QUEUE, |m| m as f64 / 64.0))
        }
        // Measured 180 KB (its delay line and distribution tables).
        QdiscOpts::Netem(o) => (PER_NODE + 256.0 * 1024.0, (o.limit as f64).max(1000.0)),
        _ => (PER_NODE + 2048.0, DEFAULT_QUEUE),
    }
}

/// A tc configuration's qdiscs, classes and filters: (bytes, packets it may queue at once).
pub(crate) fn state_bytes(state: &State) -> (f64, f64) {
    let mut bytes = 0.0;
    let mut pkts = 0.0;
    for d in &state.devices {
        for q in &d.qdiscs {
            let (b, p) = qdisc_bytes(&q.opts);
            bytes += b;
            pkts += p;
        }
        bytes += d.classes.len() as f64 * PER_NODE;
        bytes += d.filters.len() as f64 * PER_NODE;
    }
    (bytes, pkts)
}

/// A structured-form leaf queue (`pfifo N`, `fq_codel`, `sfq`, ...): (bytes, packets).
pub(crate) fn leaf_text_bytes(text: &str) -> (f64, f64) {
    let w: Vec<&str> = text.split_whitespace().collect();
    let n = |i: usize| w.get(i).and_then(|s| s.parse::<f64>().ok());
    match w.first().copied() {
        // Kept inline by HTB (measured 160 to 290 bytes a leaf).
        Some("pfifo") => (PER_NODE, n(1).unwrap_or(1000.0)),
        Some("bfifo") => (PER_NODE, n(1).map_or(1000.0, |b| b / 64.0)),
        Some("fq_codel") => {
            let flows = w.iter().position(|&x| x == "flows").and_then(|i| n(i + 1)).unwrap_or(1024.0);
            (PER_NODE + 100.0 * flows, DEFAULT_QUEUE)
        }
        Some("sfq") => {
            let div = w.iter().position(|&x| x == "divisor").and_then(|i| n(i + 1)).unwrap_or(1024.0);
            (PER_NODE + 20.0 * div, 127.0)
        }
        _ => (PER_NODE + 2048.0, DEFAULT_QUEUE),
    }
}

/// Memory the machine can give a run: half of what is available now (8 GiB if unknown).
pub(crate) fn budget() -> f64 {
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    avail.map(|b| b / 2).unwrap_or(8 << 30) as f64
}

/// GiB, one decimal.
pub(crate) fn gib(b: f64) -> String {
    format!("{:.1} GiB", b / (1u64 << 30) as f64)
}

/// Refuses a shaper whose queues and classes alone would not fit, before it is built.
pub(crate) fn check_shaper(bytes: f64, what: &str) -> Result<(), String> {
    let budget = budget();
    if bytes > budget {
        return Err(format!(
            "the shaper's {what} need about {} of memory, more than the {} a run may use",
            gib(bytes),
            gib(budget)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_grows_by_powers_of_two() {
        assert_eq!(histogram_bytes(1000), 2.0 * 1024.0 * 8.0 * 2.0);
        // 1 s in ns: 2^30, 20 buckets above 2^11.
        let s = histogram_bytes(1_000_000_000);
        assert!(s > 300_000.0 && s < 400_000.0, "{s}");
        assert!(histogram_bytes(u64::MAX).is_finite());
    }
}
