//! The [`Engine`]: one direction's packet path (see the crate docs for the contract).

use crate::program::{EngineError, Program};
use serde::Serialize;
use sluice_core::classify::{Classifier, ClassifyOutcome};
use sluice_core::filter::{ClassifyInput, FilterList, MirredTarget, Mirrors, TcfOutcome};
use sluice_core::htb::{ActiveLeaves, Htb, HtbMode};
use sluice_core::netem::{Duplicates, DUPLICATE_FLAG};
use sluice_core::packet::MAX_CLASS_PATH;
use sluice_core::{DropReason, Dropped, FlowKeys, Handle, Packet, Qdisc, QdiscStats, Rate, Time};
use sluice_wire::{parse_frame, ParseOptions, Start};
use std::collections::VecDeque;

/// Shortest frame forwarded when frames start at an Ethernet header.
const ETH_HLEN: usize = 14;

/// What happened to a packet offered to [`Engine::ingress`] or [`Engine::ingress_frame`].
///
/// Informational only: a dropped payload comes back from [`Engine::take_dropped`] whatever the
/// verdict says, and a `Queued` packet may have pushed others out (head drop, fq_codel's fattest
/// flow), which come back the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Accepted by the root qdisc.
    Queued,
    /// Not accepted, for this reason.
    Dropped(DropReason),
    /// A mirred redirect took it for another device: it comes back from
    /// [`Engine::take_redirected`].
    Redirected,
}

/// What the ingress hook did with a packet offered to [`Engine::receive`].
#[derive(Debug)]
pub enum Received {
    /// No filter took it: deliver it up (the payload is the caller's again).
    Pass(Packet),
    /// Dropped ([`Engine::take_dropped`]) or redirected ([`Engine::take_redirected`]).
    Taken(Verdict),
}

/// A packet a mirred redirect took: hand it to `target`'s engine ([`Engine::ingress`] for its
/// egress side, [`Engine::receive`] for its ingress side). [`Engine::device_name`] names it.
#[derive(Debug)]
pub struct Redirected {
    /// The packet (its payload handle moves with it).
    pub pkt: Packet,
    /// The device and side it goes to.
    pub target: MirredTarget,
}

/// A copy of a packet the engine made: a netem duplicate or a mirred mirror. `pkt.payload` is
/// its original's handle: the caller copies the bytes under a handle of its own, then hands the
/// copy on ([`CopyTo`]). A copy the caller does not want is simply not handed on.
#[derive(Debug)]
pub struct Copied {
    /// The copy's descriptor (the original's payload handle).
    pub pkt: Packet,
    /// Where it goes.
    pub to: CopyTo,
}

/// Where a [`Copied`] packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyTo {
    /// A netem duplicate: back to this engine's root qdisc, with [`Engine::ingress_copy`] (the
    /// kernel re-enqueues it at the root of the tree).
    Root,
    /// A mirred mirror: to a device, as [`Redirected::target`] (the original went on).
    Device(MirredTarget),
}

/// Counters of an [`Engine`], over every configuration it has run.
///
/// Conservation: `received = sent_packets + dropped + queued + redirected + delivered` at every
/// moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EngineStats {
    /// The root qdisc's counters as `tc -s qdisc show` prints them, summed over every generation
    /// (backlog: the generations still queueing). `drops` also counts packets a filter dropped,
    /// as the kernel counts them at the root qdisc.
    pub qdisc: QdiscStats,
    /// Packets offered (frames and pre-parsed packets).
    pub received: u64,
    /// Frames sluice-wire could not parse: classified with empty flow keys and queued (counted
    /// here, and as `runts` too when they were too short to forward).
    pub parse_errors: u64,
    /// Frames shorter than a link-layer header: dropped ([`DropReason::Malformed`]).
    pub runts: u64,
    /// Packets a filter or action dropped ([`DropReason::Policed`]).
    pub classify_drops: u64,
    /// Packets a mirred redirect took (handed back by [`Engine::take_redirected`]).
    pub redirected: u64,
    /// Copies a mirred mirror asked for ([`Engine::take_copy`]; not in the conservation sum: a
    /// copy is a new packet once its owner offers it somewhere).
    pub mirrored: u64,
    /// Mirror copies not made: a packet asked for more than [`Mirrors::MAX`].
    pub mirrors_lost: u64,
    /// Duplicates netem made ([`Engine::take_copy`], [`CopyTo::Root`]).
    pub duplicated: u64,
    /// Packets offered to [`Engine::receive`] (also counted in `received`).
    pub rx_packets: u64,
    /// Their bytes (the ingress qdisc's `Sent` counter).
    pub rx_bytes: u64,
    /// Packets [`Engine::receive`] passed back to be delivered.
    pub delivered: u64,
    /// Packets the root qdisc refused on enqueue.
    pub enqueue_drops: u64,
    /// Packets a qdisc dropped on its own initiative (AQM, head drop, another flow's overflow).
    pub qdisc_drops: u64,
    /// Packets removed by [`Engine::flush`].
    pub flushed: u64,
    /// Every payload handed back by [`Engine::take_dropped`] or waiting there: the sum of
    /// `runts`, `classify_drops`, `enqueue_drops`, `qdisc_drops` and `flushed`.
    pub dropped: u64,
    /// Packets handed out by [`Engine::dequeue`] (descriptors: a GSO packet counts once here and
    /// once per segment in `qdisc.packets`).
    pub sent_packets: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Packets queued now, over every generation.
    pub queued: u64,
    /// Configurations loaded by [`Engine::reload`].
    pub reloads: u64,
    /// Old configurations still sending their backlog.
    pub draining: u64,
}

/// A running HTB class's load ([`Engine::class_load`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLoad {
    /// Bytes the class has sent (an inner class: all of its descendants').
    pub bytes: u64,
    /// Its rate bucket is empty: it sends at its rate or waits for tokens (HTB's mode is not
    /// `CAN_SEND`).
    pub limited: bool,
    /// The HTB's backlogged leaves, summed (all of the tree's, not only the class's).
    pub active: ActiveLeaves,
}

/// One direction's packet engine: root qdisc, classifier, payload ownership and counters. See the
/// [crate docs](crate) for the calling order.
pub struct Engine {
    current: Box<dyn Qdisc>,
    classifier: Classifier,
    /// The classifier has a root qdisc to walk from (else every result is the qdiscs' fallback).
    classify: bool,
    summary: String,
    /// Older generations still sending their backlog, oldest first.
    draining: VecDeque<Box<dyn Qdisc>>,
    /// Counters of generations that were replaced and have drained.
    retired: QdiscStats,
    dropped: VecDeque<Dropped>,
    ingress_hook: Option<FilterList>,
    egress_hook: Option<FilterList>,
    devices: Vec<String>,
    redirected: VecDeque<Redirected>,
    copies: VecDeque<Copied>,
    /// Where the tree's duplicating netems put their copies.
    duplicates: Option<Duplicates>,
    parse: ParseOptions,
    now: Time,
    c: EngineStats,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("root", &self.current.kind())
            .field("summary", &self.summary)
            .field("draining", &self.draining.len())
            .field("stats", &self.c)
            .finish()
    }
}

/// Runs a hook's filters (ingress, or clsact's egress) on a packet. What skbedit wrote there is
/// what the qdiscs (and fw) see next; the mirrors asked for come back with the outcome.
#[inline]
fn run_hook(
    hook: &mut FilterList,
    pkt: &mut Packet,
    keys: &FlowKeys,
    frame: &[u8],
    now: Time,
) -> (TcfOutcome, Mirrors) {
    let (outcome, meta) = {
        let input = ClassifyInput::new(pkt, keys, frame);
        (hook.classify(&input, now), input.meta.get())
    };
    pkt.mark = meta.mark;
    pkt.priority = meta.priority;
    (outcome, meta.mirrors)
}

/// A packet on its way out of the engine: the mark [`Engine::ingress_copy`] set is the engine's
/// own, not the caller's.
#[inline]
fn own(mut p: Packet) -> Packet {
    p.payload &= !DUPLICATE_FLAG;
    p
}

impl Engine {
    /// An engine running `program`, its clock at `now`. Frames start at an Ethernet header.
    pub fn new(program: Program, now: Time) -> Engine {
        let Program { root, classifier, summary, ingress_hook, egress_hook, devices, .. } = program;
        Engine {
            ingress_hook,
            egress_hook,
            devices,
            redirected: VecDeque::with_capacity(16),
            copies: VecDeque::with_capacity(16),
            duplicates: classifier.duplicates().cloned(),
            current: root,
            classify: classifier.root().is_some(),
            classifier,
            summary,
            draining: VecDeque::new(),
            retired: QdiscStats::default(),
            dropped: VecDeque::with_capacity(64),
            parse: ParseOptions::default(),
            now,
            c: EngineStats::default(),
        }
    }

    /// How [`Engine::ingress_frame`] parses (where frames start, the hash seed).
    pub fn with_parse_options(mut self, parse: ParseOptions) -> Engine {
        self.parse = parse;
        self
    }

    /// Time never goes backwards: an earlier `now` is taken as the latest seen.
    #[inline]
    fn observe(&mut self, now: Time) -> Time {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    /// Offers a frame: parses it with sluice-wire, classifies and enqueues it. `payload` is the
    /// caller's handle for the bytes; it comes back exactly once, from [`Engine::dequeue`] or
    /// from [`Engine::take_dropped`]. A frame that does not parse is classified with empty flow
    /// keys (the filters still see its bytes) and queued; one shorter than an Ethernet header is
    /// dropped as [`DropReason::Malformed`].
    pub fn ingress_frame(&mut self, frame: &[u8], payload: u64, now: Time) -> Verdict {
        self.c.received += 1;
        match parse_frame(frame, self.parse) {
            Ok(parsed) => {
                let pkt = parsed.to_packet(payload);
                self.admit(pkt, &parsed.keys, frame, now)
            }
            Err(_) => {
                self.c.parse_errors += 1;
                let pkt = Packet::new(frame.len() as u32, payload);
                if self.parse.start == Start::Ethernet && frame.len() < ETH_HLEN {
                    self.c.runts += 1;
                    return self.drop_now(pkt, DropReason::Malformed);
                }
                self.admit(pkt, &FlowKeys::default(), frame, now)
            }
        }
    }

    /// Offers a packet that is already described: `keys` and `frame` are what the filters look
    /// at (a simulator caches them per flow; `frame` may be empty when no filter reads bytes).
    /// The packet's `class_path` is recomputed; its `mark`, `priority`, `dsfield` and hashes are
    /// what the filters and qdiscs see. Same ownership rule as [`Engine::ingress_frame`].
    #[inline]
    pub fn ingress(&mut self, pkt: Packet, keys: &FlowKeys, frame: &[u8], now: Time) -> Verdict {
        self.c.received += 1;
        self.admit(pkt, keys, frame, now)
    }

    /// Offers a netem duplicate ([`CopyTo::Root`] from [`Engine::take_copy`]) under the caller's
    /// new payload handle: classified and enqueued at the root, as the kernel re-enqueues it
    /// (clsact's egress hook is not run again, and the netem that made it does not duplicate it
    /// again). Same ownership rule as [`Engine::ingress`]; counted in `received`.
    pub fn ingress_copy(&mut self, mut pkt: Packet, keys: &FlowKeys, frame: &[u8], now: Time) -> Verdict {
        self.c.received += 1;
        let now = self.observe(now);
        pkt.payload |= DUPLICATE_FLAG;
        self.enqueue_root(pkt, keys, frame, now)
    }

    #[inline]
    fn admit(&mut self, mut pkt: Packet, keys: &FlowKeys, frame: &[u8], now: Time) -> Verdict {
        let now = self.observe(now);
        if let Some(hook) = self.egress_hook.as_mut() {
            let (outcome, mirrors) = run_hook(hook, &mut pkt, keys, frame, now);
            if !mirrors.is_empty() {
                self.mirror(&pkt, &mirrors);
            }
            pkt = match self.hook_taken(outcome, pkt) {
                Ok(p) => p,
                Err(v) => return v,
            };
        }
        self.enqueue_root(pkt, keys, frame, now)
    }

    /// Classification and the root qdisc.
    #[inline]
    fn enqueue_root(&mut self, mut pkt: Packet, keys: &FlowKeys, frame: &[u8], now: Time) -> Verdict {
        if !self.classify {
            // What the classifier would do with no root: no results, every qdisc's fallback.
            pkt.class_path = [Handle::UNSPEC; MAX_CLASS_PATH];
        } else {
            let outcome = self.classifier.classify(&mut pkt, keys, frame, now);
            if !self.classifier.mirrors().is_empty() {
                let m = *self.classifier.mirrors();
                self.mirror(&pkt, &m);
            }
            match outcome {
                ClassifyOutcome::Enqueue => {}
                ClassifyOutcome::Drop => {
                    self.c.classify_drops += 1;
                    return self.drop_now(pkt, DropReason::Policed);
                }
                ClassifyOutcome::Redirect(target) => return self.redirect(pkt, target),
            }
        }
        pkt.enqueue_time = now;
        let verdict = match self.current.enqueue(pkt, now) {
            Ok(()) => Verdict::Queued,
            Err(d) => {
                self.c.enqueue_drops += 1;
                self.drop_now(d.pkt, d.reason)
            }
        };
        collect(&mut *self.current, &mut self.dropped, &mut self.c);
        if let Some(d) = &self.duplicates {
            while let Some(p) = d.pop() {
                self.c.duplicated += 1;
                self.copies.push_back(Copied { pkt: own(p), to: CopyTo::Root });
            }
        }
        verdict
    }

    /// Queues the copies mirred mirrors asked for.
    #[cold]
    fn mirror(&mut self, pkt: &Packet, m: &Mirrors) {
        self.c.mirrors_lost += m.lost as u64;
        for t in m.targets() {
            self.c.mirrored += 1;
            self.copies.push_back(Copied { pkt: own(*pkt), to: CopyTo::Device(*t) });
        }
    }

    /// A hook's decision: the packet back when it goes on, else what took it.
    #[inline]
    fn hook_taken(&mut self, outcome: TcfOutcome, pkt: Packet) -> Result<Packet, Verdict> {
        match outcome {
            TcfOutcome::Classified(_) | TcfOutcome::NoMatch => Ok(pkt),
            TcfOutcome::Drop => {
                self.c.classify_drops += 1;
                Err(self.drop_now(pkt, DropReason::Policed))
            }
            TcfOutcome::Redirect(target) => Err(self.redirect(pkt, target)),
        }
    }

    fn redirect(&mut self, pkt: Packet, target: MirredTarget) -> Verdict {
        self.c.redirected += 1;
        self.redirected.push_back(Redirected { pkt: own(pkt), target });
        Verdict::Redirected
    }

    /// Offers a packet to the device's receive path: the ingress (or clsact ingress) hook's
    /// filters run on it, as the kernel's `sch_handle_ingress` does. `Pass` gives it back to be
    /// delivered; a drop or a mirred redirect keeps it (see [`Received::Taken`]). With no ingress
    /// filters every packet passes.
    pub fn receive(&mut self, mut pkt: Packet, keys: &FlowKeys, frame: &[u8], now: Time) -> Received {
        let now = self.observe(now);
        self.c.received += 1;
        self.c.rx_packets += 1;
        self.c.rx_bytes += pkt.len as u64;
        if let Some(hook) = self.ingress_hook.as_mut() {
            let (outcome, mirrors) = run_hook(hook, &mut pkt, keys, frame, now);
            if !mirrors.is_empty() {
                self.mirror(&pkt, &mirrors);
            }
            pkt = match self.hook_taken(outcome, pkt) {
                Ok(p) => p,
                Err(v) => return Received::Taken(v),
            };
        }
        self.c.delivered += 1;
        Received::Pass(pkt)
    }

    /// [`Engine::receive`] for a frame: parsed by sluice-wire as [`Engine::ingress_frame`] does (a
    /// frame that does not parse is offered with empty flow keys).
    pub fn receive_frame(&mut self, frame: &[u8], payload: u64, now: Time) -> Received {
        match parse_frame(frame, self.parse) {
            Ok(parsed) => {
                let pkt = parsed.to_packet(payload);
                self.receive(pkt, &parsed.keys, frame, now)
            }
            Err(_) => {
                self.c.parse_errors += 1;
                self.receive(Packet::new(frame.len() as u32, payload), &FlowKeys::default(), frame, now)
            }
        }
    }

    /// A packet a mirred redirect took since the last call: route it to its target. Drain it
    /// after every ingress and receive, as [`Engine::take_dropped`].
    #[inline]
    pub fn take_redirected(&mut self) -> Option<Redirected> {
        self.redirected.pop_front()
    }

    /// A copy made since the last call (a netem duplicate or a mirred mirror; see [`Copied`]).
    /// Drain it after every ingress and receive, as [`Engine::take_redirected`].
    #[inline]
    pub fn take_copy(&mut self) -> Option<Copied> {
        self.copies.pop_front()
    }

    /// Whether [`Engine::take_copy`] has something (a cheap check for hot loops).
    #[inline]
    pub fn has_copies(&self) -> bool {
        !self.copies.is_empty()
    }

    /// The name of a redirect's target device (the configuration's device table).
    pub fn device_name(&self, index: u16) -> Option<&str> {
        self.devices.get(index as usize).map(String::as_str)
    }

    fn drop_now(&mut self, pkt: Packet, reason: DropReason) -> Verdict {
        self.c.dropped += 1;
        self.dropped.push_back(Dropped { pkt: own(pkt), reason });
        Verdict::Dropped(reason)
    }

    /// The next packet to send at `now`, if any may go. While a reload drains, the older
    /// configuration sends its backlog first and the new one waits, so nothing is reordered.
    #[inline]
    pub fn dequeue(&mut self, now: Time) -> Option<Packet> {
        let now = self.observe(now);
        if !self.draining.is_empty() {
            if let Some(p) = self.dequeue_draining(now) {
                return p;
            }
        }
        let got = self.current.dequeue(now);
        collect(&mut *self.current, &mut self.dropped, &mut self.c);
        got.map(|p| self.sent(p))
    }

    /// Serves the older generations: `Some(result)` while one of them still holds packets
    /// (the new generation must wait), `None` once they have all drained.
    #[cold]
    fn dequeue_draining(&mut self, now: Time) -> Option<Option<Packet>> {
        while let Some(old) = self.draining.front_mut() {
            if old.qlen() > 0 {
                let got = old.dequeue(now);
                collect(&mut **old, &mut self.dropped, &mut self.c);
                if let Some(p) = got {
                    return Some(Some(self.sent(p)));
                }
                if old.qlen() > 0 {
                    if old.next_event(now).is_some() {
                        return Some(None); // throttled: the new configuration waits behind it
                    }
                    // Holding packets it will never release: give them back rather than block
                    // the direction for ever.
                    let held = old.reset();
                    self.flush_packets(held);
                }
            }
            self.retire_front();
        }
        None
    }

    #[inline]
    fn sent(&mut self, p: Packet) -> Packet {
        self.c.sent_packets += 1;
        self.c.sent_bytes += p.len as u64;
        own(p)
    }

    fn retire_front(&mut self) {
        if let Some(mut old) = self.draining.pop_front() {
            collect(&mut *old, &mut self.dropped, &mut self.c);
            add_stats(&mut self.retired, &old.stats());
        }
    }

    /// When to call [`Engine::dequeue`] next: `None` if nothing is queued, `Some(t <= now)` for
    /// at once, `Some(t > now)` when every queued packet is throttled until `t`. Calling
    /// `dequeue` early is harmless; calling it late delays packets.
    #[inline]
    pub fn next_event(&self, now: Time) -> Option<Time> {
        let now = now.max(self.now);
        if self.draining.is_empty() {
            return self.current.next_event(now);
        }
        for old in &self.draining {
            if old.qlen() > 0 {
                // A generation that holds packets but names no time is flushed by `dequeue`.
                return Some(old.next_event(now).unwrap_or(now));
            }
        }
        self.current.next_event(now)
    }

    /// A payload dropped since the last call, whatever dropped it (parse, filter, enqueue
    /// refusal, a qdisc's own decision, [`Engine::flush`]). Drain it after every ingress,
    /// dequeue, reload and flush: each dropped payload comes out exactly once.
    #[inline]
    pub fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.pop_front()
    }

    /// Whether [`Engine::take_dropped`] has something (a cheap check for hot loops).
    #[inline]
    pub fn has_dropped(&self) -> bool {
        !self.dropped.is_empty()
    }

    /// Switches to `program` without losing or reordering anything: new packets are classified
    /// and queued by `program`; packets already queued leave first, under the configuration that
    /// queued them (a reload during a reload keeps the older generation first). A generation is
    /// retired, its counters kept in [`Engine::stats`], once it is empty.
    pub fn reload(&mut self, program: Program, now: Time) {
        self.observe(now);
        let Program { root, classifier, summary, ingress_hook, egress_hook, devices, .. } = program;
        self.duplicates = classifier.duplicates().cloned();
        self.ingress_hook = ingress_hook;
        self.egress_hook = egress_hook;
        self.devices = devices;
        let mut old = std::mem::replace(&mut self.current, root);
        self.classify = classifier.root().is_some();
        self.classifier = classifier;
        self.summary = summary;
        self.c.reloads += 1;
        collect(&mut *old, &mut self.dropped, &mut self.c);
        if old.qlen() == 0 {
            add_stats(&mut self.retired, &old.stats());
        } else {
            self.draining.push_back(old);
        }
    }

    /// Drops everything queued, in every generation ([`DropReason::Flushed`]); the payloads come
    /// back from [`Engine::take_dropped`]. Returns how many.
    pub fn flush(&mut self, now: Time) -> usize {
        self.observe(now);
        let mut n = 0;
        while let Some(old) = self.draining.front_mut() {
            let held = old.reset();
            n += held.len();
            self.flush_packets(held);
            self.retire_front();
        }
        let held = self.current.reset();
        n += held.len();
        self.flush_packets(held);
        collect(&mut *self.current, &mut self.dropped, &mut self.c);
        n
    }

    fn flush_packets(&mut self, held: Vec<Packet>) {
        for pkt in held {
            self.c.flushed += 1;
            self.c.dropped += 1;
            self.dropped.push_back(Dropped { pkt: own(pkt), reason: DropReason::Flushed });
        }
    }

    /// Counters over every configuration run so far (see [`EngineStats`]).
    pub fn stats(&self) -> EngineStats {
        let mut s = self.c;
        let mut q = self.retired;
        q.qlen = 0;
        q.backlog_bytes = 0;
        add_stats(&mut q, &self.current.stats());
        for d in &self.draining {
            add_stats(&mut q, &d.stats());
        }
        q.drops += self.c.classify_drops;
        s.queued = q.qlen;
        s.qdisc = q;
        s.draining = self.draining.len() as u64;
        s
    }

    /// Packets queued now, over every generation.
    pub fn qlen(&self) -> u64 {
        self.current.qlen() + self.draining.iter().map(|d| d.qlen()).sum::<u64>()
    }

    /// Bytes queued now, over every generation.
    pub fn backlog_bytes(&self) -> u64 {
        self.current.backlog_bytes() + self.draining.iter().map(|d| d.backlog_bytes()).sum::<u64>()
    }

    /// The running configuration's summary.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// The running root qdisc (its counters are this configuration's only; [`Engine::stats`]
    /// sums every generation).
    pub fn root(&self) -> &dyn Qdisc {
        &*self.current
    }

    /// The running root qdisc's tc kind.
    pub fn kind(&self) -> &'static str {
        self.current.kind()
    }

    /// The running classifier (filters and their hit counters, for `show`).
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// Changes the `rate` and `ceil` of class `classid` of the running root HTB, as `tc class
    /// change ... htb rate R ceil C` with its other options kept: its queue, its place in the
    /// tree and the bytes its buckets hold are kept (see [`Htb::change_class`]). This is how the
    /// live shaper's workers share a parent class between them. A generation still draining
    /// after a reload keeps its rates. Refused: a root that is not HTB, a class it does not
    /// have, a zero rate or a ceil below the rate. Allocates only when the pair of rates is new
    /// to the tree (a plan is made for it).
    pub fn set_class_rate(
        &mut self,
        classid: Handle,
        rate: Rate,
        ceil: Rate,
        now: Time,
    ) -> Result<(), EngineError> {
        let now = self.observe(now);
        let htb = self
            .current
            .as_any_mut()
            .and_then(|a| a.downcast_mut::<Htb>())
            .ok_or_else(|| EngineError::Change(format!("class {classid}: the root qdisc is not htb")))?;
        let mut cfg = htb
            .class_config(classid)
            .ok_or_else(|| EngineError::Change(format!("htb class {classid} does not exist")))?
            .clone();
        if cfg.rate == rate && cfg.ceil.unwrap_or(cfg.rate) == ceil {
            return Ok(());
        }
        cfg.rate = rate;
        cfg.ceil = Some(ceil);
        htb.change_class(classid, cfg, now).map(|_| ()).map_err(|e| EngineError::Change(e.to_string()))?;
        collect(&mut *self.current, &mut self.dropped, &mut self.c);
        Ok(())
    }

    /// Bytes class `classid` of the running root HTB has sent (an inner class: all of its
    /// descendants'), this generation only; `None` when there is no such class.
    pub fn class_bytes(&self, classid: Handle) -> Option<u64> {
        self.class_load(classid, self.now).map(|l| l.bytes)
    }

    /// What class `classid` of the running root HTB has sent and whether its own rate limits it
    /// at `now` (see [`ClassLoad`]); `None` when the root is not HTB or has no such class.
    pub fn class_load(&self, classid: Handle, now: Time) -> Option<ClassLoad> {
        let htb = self.current.as_any()?.downcast_ref::<Htb>()?;
        let bytes = htb.class_stats(classid)?.bytes;
        let mode = htb.class_mode(classid, now.max(self.now))?;
        Some(ClassLoad { bytes, limited: mode != HtbMode::CanSend, active: htb.active_leaves() })
    }
}

/// Moves what `q` dropped on its own into the engine's queue of dropped payloads.
#[inline]
fn collect(q: &mut dyn Qdisc, out: &mut VecDeque<Dropped>, c: &mut EngineStats) {
    while let Some(mut d) = q.take_dropped() {
        c.qdisc_drops += 1;
        c.dropped += 1;
        d.pkt = own(d.pkt);
        out.push_back(d);
    }
}

fn add_stats(a: &mut QdiscStats, b: &QdiscStats) {
    a.add_counts(b);
    a.requeues += b.requeues;
}
