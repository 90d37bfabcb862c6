//! Building the core qdisc for one direction from a configuration, and the per-direction state
//! that survives a reload.
//!
//! Until the core's HTB is available to the live path, an HTB configuration is accepted when it
//! has a single chain of classes to one leaf: it is shaped by [`Limited`], an exact token bucket at
//! the smallest ceil on that chain in front of the leaf FIFO. Anything else is refused by name.
//!
//! ## Reload
//! A reload builds the new qdisc beside the old one. New packets go to the new qdisc; the old one
//! keeps sending its backlog under the old configuration and the new one sends only once the old
//! one is empty. So no queued packet is lost and none is overtaken by a later one. Backlog of a
//! class that the new configuration removed drains with the old tree the same way.

use sluice_core::fifo::Fifo;
use sluice_core::{Dropped, Packet, Qdisc, QdiscStats, Rate, Span, Time, TokenBucket, WireSpec};
use sluice_lab::tree::{Parent, QdiscKind, Tree};

/// Why a configuration cannot run live.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EngineError(pub String);

/// A FIFO behind an exact token bucket (tokens may go negative after a charge, so a packet larger
/// than the bucket still goes; long-run rate is exact whatever the wake-up timing, as long as the
/// bucket covers the lateness of a wake-up).
pub struct Limited {
    bucket: TokenBucket,
    wire: WireSpec,
    child: Box<dyn Qdisc>,
    overlimits: u64,
    kind: &'static str,
}

impl Limited {
    /// `child` at `rate` with a `burst`-byte bucket.
    pub fn new(kind: &'static str, rate: Rate, burst: u64, wire: WireSpec, child: Box<dyn Qdisc>) -> Limited {
        Limited { bucket: TokenBucket::new(rate, burst, Time::ZERO), wire, child, overlimits: 0, kind }
    }
}

impl Qdisc for Limited {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.child.enqueue(pkt, now)
    }
    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.child.peek(now)?;
        if !self.bucket.can_send(now) {
            self.overlimits += 1;
            return None;
        }
        let p = self.child.dequeue(now)?;
        self.bucket.charge(now, self.wire.packet_cost(&p));
        Some(p)
    }
    fn peek(&mut self, now: Time) -> Option<&Packet> {
        if self.bucket.can_send(now) {
            self.child.peek(now)
        } else {
            None
        }
    }
    fn next_event(&self, now: Time) -> Option<Time> {
        let t = self.child.next_event(now)?;
        Some(t.max(self.bucket.time_until(now, 0)))
    }
    fn reset(&mut self) -> Vec<Packet> {
        self.child.reset()
    }
    fn stats(&self) -> QdiscStats {
        let mut s = self.child.stats();
        s.overlimits += self.overlimits;
        s
    }
    fn take_dropped(&mut self) -> Option<Dropped> {
        self.child.take_dropped()
    }
}

/// What a configuration turned into.
pub struct Built {
    /// The qdisc.
    pub qdisc: Box<dyn Qdisc>,
    /// One line describing it (printed at start-up and reload).
    pub summary: String,
}

fn leaf_qdisc(kind: Option<&QdiscKind>) -> Result<Box<dyn Qdisc>, EngineError> {
    Ok(match kind {
        None | Some(QdiscKind::Pfifo(None)) => Box::new(Fifo::pfifo(1000)),
        Some(QdiscKind::Pfifo(Some(l))) => Box::new(Fifo::pfifo(*l)),
        Some(QdiscKind::Bfifo(l)) => Box::new(Fifo::bfifo(l.map(|l| l as u64).unwrap_or(1000 * 1514))),
        Some(QdiscKind::Other { kind, args }) if kind == "fq_codel" => Box::new(fq_codel(args)?),
        Some(k) => {
            return Err(EngineError(format!(
                "leaf qdisc `{}` is not available on the live path yet",
                k.name()
            )))
        }
    })
}

/// fq_codel from tc options (limit, flows, quantum, target, interval, ecn/noecn, memory_limit).
fn fq_codel(args: &[String]) -> Result<sluice_core::fq_codel::FqCodel, EngineError> {
    use sluice_core::units::{parse_size, parse_time};
    let mut cfg = sluice_core::fq_codel::FqCodelConfig::default();
    let mut i = 0;
    let bad = |k: &str, e: String| EngineError(format!("fq_codel {k}: {e}"));
    while i < args.len() {
        let v = args.get(i + 1).map(String::as_str).unwrap_or("");
        let num = |k: &str| v.parse::<u32>().map_err(|e| bad(k, e.to_string()));
        match args[i].as_str() {
            "ecn" => cfg.params.ecn = true,
            "noecn" => cfg.params.ecn = false,
            "limit" => cfg.limit = num("limit")?,
            "flows" => cfg.flows = num("flows")?,
            "quantum" => cfg.quantum = num("quantum")?,
            "drop_batch" => cfg.drop_batch = num("drop_batch")?,
            "memory_limit" => {
                cfg.memory_limit = parse_size(v).map_err(|e| bad("memory_limit", e.to_string()))? as u32
            }
            "target" => cfg.params.target = parse_time(v).map_err(|e| bad("target", e.to_string()))?,
            "interval" => cfg.params.interval = parse_time(v).map_err(|e| bad("interval", e.to_string()))?,
            o => return Err(EngineError(format!("fq_codel option `{o}` is not supported on the live path"))),
        }
        i += if matches!(args[i].as_str(), "ecn" | "noecn") { 1 } else { 2 };
    }
    sluice_core::fq_codel::FqCodel::new(cfg).map_err(|e| EngineError(e.to_string()))
}

/// A configuration built by `sluice-config` (the full tc grammar: any qdisc the core has, and
/// filters): its root qdisc and the classifier that runs the filters.
pub struct ModelBuilt {
    /// The root qdisc.
    pub qdisc: Box<dyn Qdisc>,
    /// The filters and tree shape.
    pub classifier: sluice_core::classify::Classifier,
    /// One line describing it.
    pub summary: String,
}

/// Load a tc script with `sluice-config` for device `dev` (`$DEV` is set to it), raise every HTB
/// bucket to `max(burst, rate × 1 ms, rate × floor)` (tc's default would be the mtu), and build
/// the core objects.
pub fn build_model(path: &str, text: &str, dev: &str, floor: Span) -> Result<ModelBuilt, EngineError> {
    use sluice_config::model::ClassOpts;
    let mut vars = sluice_config::shell::Vars::new();
    vars.insert("DEV".into(), dev.into());
    let mut loaded =
        sluice_config::script::load_tc_script(path, text, &vars).map_err(|e| EngineError(e.to_string()))?;
    let device = loaded
        .state
        .devices
        .iter_mut()
        .find(|d| d.name == dev)
        .ok_or_else(|| EngineError(format!("{path} configures no qdisc on {dev} (use $DEV)")))?;
    let mut raised = 0;
    for c in device.classes.iter_mut() {
        if let ClassOpts::Htb(o) = &mut c.opts {
            let want = |rate: u64, mtu: u32| {
                let r = Rate::from_bps(rate);
                sluice_config::burst::auto_burst(r, mtu, sluice_config::burst::BurstPolicy::Sluice)
                    .max(r.bytes_in(floor))
            };
            let (b, cb) = (want(o.rate, o.mtu), want(o.ceil, o.mtu));
            if (o.burst as u64) < b || (o.cburst as u64) < cb {
                raised += 1;
            }
            o.burst = o.burst.max(b.min(u32::MAX as u64) as u32);
            o.cburst = o.cburst.max(cb.min(u32::MAX as u64) as u32);
        }
    }
    let filters = device.filters.len();
    let classes = device.classes.len();
    let built =
        sluice_config::build::build_device(&loaded.state, dev).map_err(|e| EngineError(e.to_string()))?;
    Ok(ModelBuilt {
        summary: format!(
            "{} root, {classes} classes ({raised} buckets raised to rate x max(1ms, {}us)), {filters} filters (sluice-config)",
            built.root.kind(),
            floor.as_micros()
        ),
        qdisc: built.root,
        classifier: built.classifier,
    })
}

/// Build the qdisc for `tree`. Buckets are raised to at least `floor` (the wake-up jitter the
/// loop measured at start-up times the rate), because a smaller bucket cannot be honoured.
pub fn build(tree: &Tree, floor: Span) -> Result<Built, EngineError> {
    let root = tree.root().ok_or_else(|| EngineError("the configuration has no root qdisc".into()))?;
    let with_floor = |rate: Rate, burst: u64| burst.max(rate.bytes_in(floor)).max(1514);
    match &root.kind {
        QdiscKind::Tbf { rate, burst, limit, .. } => {
            let child = Box::new(Fifo::bfifo(*limit));
            let b = with_floor(*rate, *burst);
            Ok(Built {
                qdisc: Box::new(Limited::new("tbf", *rate, b, WireSpec::default(), child)),
                summary: format!("tbf rate {rate} burst {b}b limit {limit}b"),
            })
        }
        QdiscKind::Pfifo(_) | QdiscKind::Bfifo(_) => Ok(Built {
            qdisc: leaf_qdisc(Some(&root.kind))?,
            summary: format!("{} (unlimited)", root.kind.name()),
        }),
        QdiscKind::Htb { default, r2q, direct_qlen } => {
            use sluice_core::htb::{Htb, HtbClassConfig, HtbConfig};
            let cfg =
                HtbConfig { r2q: *r2q, default_class: *default, direct_qlen: direct_qlen.unwrap_or(1000) };
            let policy = sluice_config::burst::BurstPolicy::Sluice;
            let classes: Vec<_> = tree
                .classes
                .iter()
                .map(|c| {
                    let burst =
                        c.burst.unwrap_or_else(|| sluice_config::burst::auto_burst(c.rate, c.mtu, policy));
                    let cburst =
                        c.cburst.unwrap_or_else(|| sluice_config::burst::auto_burst(c.ceil, c.mtu, policy));
                    let mut k = HtbClassConfig::new(c.rate);
                    k.ceil = Some(c.ceil);
                    k.burst = Some(with_floor(c.rate, burst));
                    k.cburst = Some(with_floor(c.ceil, cburst));
                    k.prio = c.prio.min(7) as u8;
                    k.quantum = c.quantum;
                    k.mtu = c.mtu;
                    k.wire = WireSpec { overhead: c.overhead, mpu: c.mpu, linklayer: Default::default() };
                    (c.classid, c.parent, k)
                })
                .collect();
            let (mut htb, warnings) =
                Htb::build(root.handle, cfg, &classes, Time::ZERO).map_err(|e| EngineError(e.to_string()))?;
            let mut leaves = Vec::new();
            for c in tree.classes.iter().filter(|c| !tree.has_children(c.classid)) {
                let leafq = tree.leaf_qdisc(c.classid).map(|q| &q.kind);
                htb.set_leaf_qdisc(c.classid, leaf_qdisc(leafq)?).map_err(|e| EngineError(e.to_string()))?;
                leaves.push(format!(
                    "{:x}:{:x} rate {} ceil {} {}",
                    c.classid.major(),
                    c.classid.minor(),
                    c.rate,
                    c.ceil,
                    leafq.map(|k| k.name()).unwrap_or("pfifo")
                ));
            }
            let mut summary = format!(
                "htb default 0x{default:x}, {} classes (leaves {}); bursts >= rate x {} us",
                tree.classes.len(),
                leaves.join(", "),
                floor.as_micros()
            );
            if !tree.filters.is_empty() {
                summary += &format!(
                    "; {} filter(s) NOT applied on the live path yet: all traffic goes to the default class",
                    tree.filters.len()
                );
            }
            for w in warnings {
                summary += &format!("; warning: {w}");
            }
            let _ = Parent::Root;
            Ok(Built { qdisc: Box::new(htb), summary })
        }
        QdiscKind::Other { kind, args } if kind == "fq_codel" => {
            Ok(Built { qdisc: Box::new(fq_codel(args)?), summary: "fq_codel (unlimited)".into() })
        }
        QdiscKind::Other { kind, .. } => {
            Err(EngineError(format!("root qdisc `{kind}` is not available on the live path yet")))
        }
    }
}

/// One direction's queueing: the current qdisc and, during a reload, the old one draining.
pub struct DirQueue {
    /// The current configuration.
    pub current: Box<dyn Qdisc>,
    /// The previous configuration, still sending its backlog.
    pub draining: Option<Box<dyn Qdisc>>,
    /// Counters of configurations that were replaced and fully drained.
    pub retired: QdiscStats,
}

impl DirQueue {
    /// A queue running `q`.
    pub fn new(q: Box<dyn Qdisc>) -> DirQueue {
        DirQueue { current: q, draining: None, retired: QdiscStats::default() }
    }

    /// Swap in a new qdisc (see the module docs for what happens to the backlog).
    pub fn reload(&mut self, q: Box<dyn Qdisc>) {
        let old = std::mem::replace(&mut self.current, q);
        if let Some(prev) = self.draining.take() {
            // A reload during a reload: the older one is still first in line.
            self.retire_or_keep(prev);
        }
        self.retire_or_keep(old);
    }

    fn retire_or_keep(&mut self, q: Box<dyn Qdisc>) {
        if q.qlen() == 0 && self.draining.is_none() {
            add_stats(&mut self.retired, &q.stats());
        } else if self.draining.is_none() {
            self.draining = Some(q);
        } else {
            // Two generations pending: chain the newer behind in `current`'s place is not possible
            // without reordering, so keep the older draining and move the newer's packets behind it.
            let mut q = q;
            let mut moved = q.reset();
            if let Some(d) = self.draining.as_mut() {
                for p in moved.drain(..) {
                    let _ = d.enqueue(p, p.enqueue_time);
                }
            }
            add_stats(&mut self.retired, &q.stats());
        }
    }

    /// Offer a packet to the current qdisc.
    pub fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.current.enqueue(pkt, now)
    }

    /// Next packet to send: the draining qdisc first, until it is empty.
    pub fn dequeue(&mut self, now: Time) -> Option<Packet> {
        if let Some(d) = self.draining.as_mut() {
            if d.qlen() > 0 {
                return d.dequeue(now);
            }
            if let Some(d) = self.draining.take() {
                add_stats(&mut self.retired, &d.stats());
            }
        }
        self.current.dequeue(now)
    }

    /// When to call [`DirQueue::dequeue`] next.
    pub fn next_event(&self, now: Time) -> Option<Time> {
        match &self.draining {
            Some(d) if d.qlen() > 0 => d.next_event(now),
            _ => self.current.next_event(now),
        }
    }

    /// Packets dropped on the qdiscs' own initiative.
    pub fn take_dropped(&mut self) -> Option<Dropped> {
        if let Some(d) = self.draining.as_mut().and_then(|d| d.take_dropped()) {
            return Some(d);
        }
        self.current.take_dropped()
    }

    /// Counters over every generation.
    pub fn stats(&self) -> QdiscStats {
        let mut s = self.retired;
        s.backlog_bytes = 0;
        s.qlen = 0;
        add_stats(&mut s, &self.current.stats());
        if let Some(d) = &self.draining {
            add_stats(&mut s, &d.stats());
        }
        s
    }
}

fn add_stats(a: &mut QdiscStats, b: &QdiscStats) {
    a.bytes += b.bytes;
    a.packets += b.packets;
    a.drops += b.drops;
    a.overlimits += b.overlimits;
    a.requeues += b.requeues;
    a.backlog_bytes += b.backlog_bytes;
    a.qlen += b.qlen;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn tree(s: &str) -> Tree {
        Tree::parse_script(s, &HashMap::new(), None).unwrap()
    }

    #[test]
    fn long_run_rate_is_exact_even_with_late_wakeups() {
        let t = tree("tc qdisc add dev x root handle 1: htb default 1\ntc class add dev x parent 1: classid 1:1 htb rate 100mbit\n");
        // The floor covers the worst lateness below (3 ms), as the start-up calibration ensures.
        let mut q = build(&t, Span::from_millis(3)).unwrap().qdisc;
        let mut now = Time::ZERO;
        let mut sent = 0u64;
        let mut id = 0;
        // Keep the queue full and wake up 0..3 ms late, like a busy VM.
        while now < Time::from_secs(10) {
            while q.qlen() < 500 {
                id += 1;
                let _ = q.enqueue(Packet::new(1500, id), now);
            }
            while let Some(p) = q.dequeue(now) {
                sent += p.len as u64;
            }
            let due = q.next_event(now).unwrap();
            now = due + Span::from_micros((id * 7919) % 3000);
        }
        let bps = sent as f64 * 8.0 / 10.0;
        assert!((bps / 100e6 - 1.0).abs() < 0.005, "achieved {bps}");
        // With a bucket smaller than the lateness, the time slept past the bucket is lost.
        let mut q = build(&t, Span::from_micros(300)).unwrap().qdisc;
        let (mut now, mut sent) = (Time::ZERO, 0u64);
        while now < Time::from_secs(10) {
            while q.qlen() < 500 {
                id += 1;
                let _ = q.enqueue(Packet::new(1500, id), now);
            }
            while let Some(p) = q.dequeue(now) {
                sent += p.len as u64;
            }
            now = q.next_event(now).unwrap() + Span::from_micros((id * 7919) % 3000);
        }
        assert!((sent as f64 * 8.0 / 10.0) < 0.9 * 100e6);
    }

    #[test]
    fn reload_keeps_order_and_loses_nothing() {
        let slow = tree("tc qdisc add dev x root tbf rate 1mbit burst 2000 limit 100000");
        let fast = tree("tc qdisc add dev x root tbf rate 100mbit burst 2000 limit 100000");
        let mut d = DirQueue::new(build(&slow, Span::ZERO).unwrap().qdisc);
        let mut now = Time::ZERO;
        for i in 0..20 {
            d.enqueue(Packet::new(1000, i), now).unwrap();
        }
        d.reload(build(&fast, Span::ZERO).unwrap().qdisc);
        for i in 20..40 {
            d.enqueue(Packet::new(1000, i), now).unwrap();
        }
        d.reload(build(&slow, Span::ZERO).unwrap().qdisc);
        for i in 40..50 {
            d.enqueue(Packet::new(1000, i), now).unwrap();
        }
        let mut out = Vec::new();
        while out.len() < 50 && now < Time::from_secs(100) {
            while let Some(p) = d.dequeue(now) {
                out.push(p.payload);
            }
            now = d.next_event(now).unwrap_or(now).max(now + Span::from_micros(10));
        }
        assert_eq!(out, (0..50).collect::<Vec<u64>>());
        let s = d.stats();
        assert_eq!((s.packets, s.drops, s.qlen), (50, 0, 0));
    }

    #[test]
    fn unsupported_shapes_are_refused_by_name() {
        // A class whose parent does not exist (the loader follows the kernel and re-parents it, so
        // build a tree by hand).
        let mut orphan = tree("tc qdisc add dev x root handle 1: htb default 1\ntc class add dev x parent 1: classid 1:1 htb rate 1mbit\n");
        orphan.classes[0].parent = sluice_core::Handle::new(1, 5);
        assert!(build(&orphan, Span::ZERO).is_err());
        let sfq = tree("tc qdisc add dev x root sfq");
        assert!(build(&sfq, Span::ZERO).err().unwrap().0.contains("sfq"));
        // A bad option is refused by name when the configuration is read.
        let e = Tree::parse_script("tc qdisc add dev x root handle 1: htb default 1\ntc class add dev x parent 1: classid 1:1 htb rate 1mbit\ntc qdisc add dev x parent 1:1 fq_codel target 2ms bogus 1\n", &HashMap::new(), None).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let ok = tree("tc qdisc add dev x root handle 1: htb default 1\ntc class add dev x parent 1: classid 1:1 htb rate 1mbit\ntc qdisc add dev x parent 1:1 fq_codel target 2ms noecn\n");
        assert!(build(&ok, Span::ZERO).unwrap().summary.contains("fq_codel"));
    }
}
