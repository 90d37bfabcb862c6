//! prio and pfifo_fast: strict-priority bands chosen by a priomap (tc-prio(8), kernel
//! `net/sched/sch_prio.c` and `pfifo_fast` in `net/sched/sch_generic.c`).
//!
//! # Which priority a packet has
//!
//! Both qdiscs index their priomap with `skb->priority & 15`. In Linux a forwarded IPv4 packet
//! gets that priority from its TOS byte (`rt_tos2priority`, the `ip_tos2prio` table in
//! `net/ipv4/route.c`), and a local one from its socket (`SO_PRIORITY`, or `IP_TOS`). Sluice has
//! no routing step, so [`effective_priority`] does the same here: a packet whose
//! [`Packet::priority`] is non-zero keeps it (an explicit socket or filter priority wins); one
//! with priority 0 gets the priority its dsfield maps to, under a [`TosMapping`].
//!
//! # The ECN fix (seed 003)
//!
//! `ip_tos2prio` reads the byte as RFC 1349 TOS: bits 0x1E are the TOS field and 0x02 is
//! "minimise monetary cost", mapped to `TC_PRIO_FILLER`, which pfifo_fast puts in band 2. Since
//! RFC 3168 that bit is half of the ECN field, so an ECT(0) (or CE) packet with DSCP 0 — ordinary
//! traffic from an ECN-enabled host — was sent to the lowest band behind non-ECN traffic.
//! [`TosMapping::Dscp`] (the default) reads only the DSCP, the upper six bits, so the ECN field
//! never changes the band; [`TosMapping::LegacyTos`] keeps the table with the FILLER entry, for
//! comparison.

use crate::fifo::{Fifo, DEFAULT_TXQUEUELEN};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ClassView, ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::time::Time;
use std::collections::VecDeque;

/// `TC_PRIO_MAX`: priorities are taken modulo 16.
pub const TC_PRIO_MAX: u32 = 15;
/// The kernel's default priomap (prio and pfifo_fast).
pub const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
/// Fewest bands prio accepts (`TCQ_MIN_PRIO_BANDS`).
pub const MIN_BANDS: usize = 2;
/// Most bands prio accepts (`TCQ_PRIO_BANDS`).
pub const MAX_BANDS: usize = 16;
/// pfifo_fast's fixed number of bands.
pub const PFIFO_FAST_BANDS: usize = 3;

/// `TC_PRIO_*` values used by the TOS tables.
const BESTEFFORT: u8 = 0;
const FILLER: u8 = 1;
const BULK: u8 = 2;
const INTERACTIVE_BULK: u8 = 4;
const INTERACTIVE: u8 = 6;

/// `ip_tos2prio` as Linux had it when seed 003 was written: index `(tos & 0x1E) >> 1`, and
/// index 1 (TOS 0x02, today the ECT(0) codepoint) is FILLER.
const LEGACY_TOS2PRIO: [u8; 16] = [
    BESTEFFORT,
    FILLER,
    BESTEFFORT,
    BESTEFFORT,
    BULK,
    BULK,
    BULK,
    BULK,
    INTERACTIVE,
    INTERACTIVE,
    INTERACTIVE,
    INTERACTIVE,
    INTERACTIVE_BULK,
    INTERACTIVE_BULK,
    INTERACTIVE_BULK,
    INTERACTIVE_BULK,
];

/// How a packet with priority 0 gets a priority from its dsfield.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TosMapping {
    /// Sluice default: the RFC 1349 table applied to the DSCP only (ECN bits cleared), so
    /// ECT(0), ECT(1) and CE never change the band.
    #[default]
    Dscp,
    /// The kernel's historical `rt_tos2priority` on the whole byte: TOS 0x02 (ECT(0)) and 0x03
    /// (CE) map to FILLER, i.e. pfifo_fast band 2 (`legacy_tos`).
    LegacyTos,
    /// Ignore the dsfield; use `Packet::priority` only (a packet that never went through
    /// routing, like a locally generated one without `IP_TOS`).
    PriorityOnly,
}

/// The `TC_PRIO_*` value the routing code would give a packet with this dsfield.
pub fn tos_to_priority(dsfield: u8, mapping: TosMapping) -> u32 {
    match mapping {
        TosMapping::Dscp => LEGACY_TOS2PRIO[((dsfield & 0xFC & 0x1E) >> 1) as usize] as u32,
        TosMapping::LegacyTos => LEGACY_TOS2PRIO[((dsfield & 0x1E) >> 1) as usize] as u32,
        TosMapping::PriorityOnly => 0,
    }
}

/// The priority used to index a priomap: `pkt.priority` if non-zero, else derived from the
/// dsfield (see the module docs).
pub fn effective_priority(pkt: &Packet, mapping: TosMapping) -> u32 {
    if pkt.priority != 0 {
        pkt.priority
    } else {
        tos_to_priority(pkt.dsfield, mapping)
    }
}

/// `bands N priomap P0 ... P15` as `tc qdisc show` prints it for prio and pfifo_fast.
pub fn tc_priomap_options(bands: usize, priomap: &[u8; 16]) -> String {
    let map: Vec<String> = priomap.iter().map(|b| b.to_string()).collect();
    format!("bands {bands} priomap {}", map.join(" "))
}

/// The band (0-based) of a qdisc with `bands` bands and handle `major:`, following the kernel's
/// `prio_classify` (and `ets_classify`, which is the same): a `pkt.priority` that is a classid of
/// this qdisc, then a filter result for this qdisc, then the priomap. A classid whose minor is not
/// a band falls back to `priomap[0]`.
pub fn classify_band(pkt: &Packet, major: u16, bands: usize, priomap: &[u8; 16], tos: TosMapping) -> usize {
    let by_minor = |minor: u32| -> usize {
        let b = (minor as usize).wrapping_sub(1);
        if b < bands {
            b
        } else {
            priomap[0] as usize
        }
    };
    // `skb->priority` is a 32-bit tc handle.
    let prio = Handle::from_tc(pkt.priority);
    if major != 0 && prio.major() == major {
        return by_minor(prio.minor());
    }
    if let Some(h) = pkt.class_for(major).filter(|_| major != 0) {
        return by_minor(h.minor());
    }
    if prio.major() != 0 {
        // A classid of some other qdisc: the kernel uses priomap[0].
        return priomap[0] as usize;
    }
    let prio = effective_priority(pkt, tos);
    priomap[(prio & TC_PRIO_MAX) as usize] as usize
}

/// prio parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrioConfig {
    /// Number of bands, 2..=16 (default 3).
    pub bands: usize,
    /// Band for each priority 0..=15.
    pub priomap: [u8; 16],
    /// Handle major of this qdisc, for classids in `pkt.priority` and filter results.
    pub major: u16,
    /// How priority-0 packets get a priority from their dsfield.
    pub tos_mapping: TosMapping,
}

impl Default for PrioConfig {
    fn default() -> Self {
        PrioConfig { bands: 3, priomap: DEFAULT_PRIOMAP, major: 0, tos_mapping: TosMapping::Dscp }
    }
}

impl PrioConfig {
    /// Builds a config the way tc parses `bands N priomap P1 P2 ...`: entries not given keep the
    /// default map (so `bands 2` alone is rejected, as the kernel rejects it, because the default
    /// map names band 2).
    pub fn from_tc(bands: Option<usize>, priomap: &[u8], major: u16) -> Result<PrioConfig, ConfigError> {
        if priomap.len() > 16 {
            return Err(ConfigError::invalid(
                "prio",
                "priomap",
                format!("({} entries)", priomap.len()),
                "at most 16 entries (priorities 0-15)",
            ));
        }
        let mut cfg = PrioConfig { bands: bands.unwrap_or(3), major, ..PrioConfig::default() };
        cfg.priomap[..priomap.len()].copy_from_slice(priomap);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks bands and priomap as the kernel's `prio_tune` does.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_BANDS..=MAX_BANDS).contains(&self.bands) {
            return Err(ConfigError::invalid(
                "prio",
                "bands",
                self.bands,
                format!("must be between {MIN_BANDS} and {MAX_BANDS}"),
            ));
        }
        for (prio, &band) in self.priomap.iter().enumerate() {
            if band as usize >= self.bands {
                return Err(ConfigError::invalid(
                    "prio",
                    "priomap",
                    band,
                    format!(
                        "entry {prio} names band {band} but bands are 0-{}; give a priomap of {} entries",
                        self.bands - 1,
                        16
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The prio qdisc: strict priority over `bands` child qdiscs.
pub struct Prio {
    cfg: PrioConfig,
    bands: Vec<Box<dyn Qdisc>>,
    /// Counters of band qdiscs that were replaced, so totals never go backwards.
    retired: QdiscStats,
    requeues: u64,
}

impl std::fmt::Debug for Prio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prio").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl Prio {
    /// A prio qdisc with a `pfifo` of `txqueuelen` (1000) packets in each band, as the kernel
    /// creates them.
    pub fn new(cfg: PrioConfig) -> Result<Prio, ConfigError> {
        cfg.validate()?;
        let bands =
            (0..cfg.bands).map(|_| Box::new(Fifo::pfifo(DEFAULT_TXQUEUELEN)) as Box<dyn Qdisc>).collect();
        Ok(Prio { cfg, bands, retired: QdiscStats::default(), requeues: 0 })
    }

    /// The configuration.
    pub fn config(&self) -> &PrioConfig {
        &self.cfg
    }

    /// Number of bands.
    pub fn bands(&self) -> usize {
        self.bands.len()
    }

    /// `tc qdisc change`: new bands and priomap. As in the kernel's `prio_tune`, bands that
    /// remain keep their qdisc and packets, new bands get a pfifo, and the qdiscs of removed
    /// bands are dropped: their packets are returned (the caller counts them as dropped).
    pub fn change(&mut self, cfg: PrioConfig) -> Result<Vec<Packet>, ConfigError> {
        cfg.validate()?;
        let mut flushed = Vec::new();
        while self.bands.len() > cfg.bands {
            let mut old = self.bands.pop().expect("more bands than wanted");
            let lost = old.reset();
            let s = old.stats();
            self.retired.bytes += s.bytes;
            self.retired.packets += s.packets;
            self.retired.drops += s.drops + lost.len() as u64;
            flushed.extend(lost);
            self.retired.overlimits += s.overlimits;
            self.retired.requeues += s.requeues;
        }
        while self.bands.len() < cfg.bands {
            self.bands.push(Box::new(Fifo::pfifo(DEFAULT_TXQUEUELEN)));
        }
        self.cfg = cfg;
        Ok(flushed)
    }

    /// Replaces band `band`'s qdisc (class `major:band+1`), returning the old one with whatever
    /// it still holds (the caller drains or drops it).
    pub fn set_band_qdisc(&mut self, band: usize, q: Box<dyn Qdisc>) -> Result<Box<dyn Qdisc>, ConfigError> {
        if band >= self.bands.len() {
            return Err(ConfigError::invalid(
                "prio",
                "parent",
                format!("{:x}:{:x}", self.cfg.major, band + 1),
                format!("no such band; classes are :1 to :{:x}", self.bands.len()),
            ));
        }
        let old = std::mem::replace(&mut self.bands[band], q);
        let s = old.stats();
        self.retired.bytes += s.bytes;
        self.retired.packets += s.packets;
        self.retired.drops += s.drops;
        self.retired.overlimits += s.overlimits;
        self.retired.requeues += s.requeues;
        Ok(old)
    }

    /// Band `band`'s qdisc.
    pub fn band_qdisc(&self, band: usize) -> Option<&dyn Qdisc> {
        self.bands.get(band).map(|b| b.as_ref())
    }

    /// Class statistics of band `band` (`tc -s class show`).
    pub fn band_stats(&self, band: usize) -> Option<QdiscStats> {
        self.bands.get(band).map(|b| b.stats())
    }

    /// The band a packet goes to, following the kernel's `prio_classify`: a `pkt.priority` that
    /// is a classid of this qdisc, then a filter result for this qdisc, then the priomap.
    /// A classid whose minor is not a band falls back to `priomap[0]`.
    pub fn classify(&self, pkt: &Packet) -> usize {
        classify_band(pkt, self.cfg.major, self.bands.len(), &self.cfg.priomap, self.cfg.tos_mapping)
    }

    fn first_ready(&mut self, now: Time) -> Option<usize> {
        (0..self.bands.len()).find(|&i| self.bands[i].peek(now).is_some())
    }
}

impl Qdisc for Prio {
    fn kind(&self) -> &'static str {
        "prio"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let b = self.classify(&pkt);
        self.bands[b].enqueue(pkt, now)
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.bands.iter_mut().find_map(|b| b.dequeue(now))
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        let i = self.first_ready(now)?;
        self.bands[i].peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        self.bands.iter().filter_map(|b| b.next_event(now)).min()
    }

    fn reset(&mut self) -> Vec<Packet> {
        self.bands.iter_mut().flat_map(|b| b.reset()).collect()
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.retired;
        s.requeues += self.requeues;
        s.backlog_bytes = 0;
        s.qlen = 0;
        for b in &self.bands {
            s.add_counts(&b.stats());
        }
        s
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        self.bands.iter_mut().find_map(|b| b.take_dropped())
    }

    /// Class `major:b+1` of band `b`: its qdisc's counters, as `prio_dump_class_stats` copies them.
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        for (b, q) in self.bands.iter().enumerate() {
            f(ClassView { minor: b as u32 + 1, stats: Some(q.stats()), child: Some(q.as_ref()) });
        }
    }

    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let b = self.classify(&pkt);
        self.bands[b].requeue(pkt, now)
    }
}

/// pfifo_fast parameters (the kernel has none; these make Sluice's choices explicit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfifoFastConfig {
    /// Packets each band may hold: the device's `txqueuelen` (the kernel sizes each band's ring
    /// to `tx_queue_len`, so the limit is per band, not total).
    pub txqueuelen: u32,
    /// How priority-0 packets get a priority from their dsfield.
    pub tos_mapping: TosMapping,
}

impl Default for PfifoFastConfig {
    fn default() -> Self {
        PfifoFastConfig { txqueuelen: DEFAULT_TXQUEUELEN, tos_mapping: TosMapping::Dscp }
    }
}

impl PfifoFastConfig {
    /// The kernel's mapping, ECN bug included (`legacy_tos`).
    pub fn legacy() -> PfifoFastConfig {
        PfifoFastConfig { tos_mapping: TosMapping::LegacyTos, ..PfifoFastConfig::default() }
    }
}

/// pfifo_fast: three FIFO bands served in strict priority, fixed priomap [`DEFAULT_PRIOMAP`].
#[derive(Debug)]
pub struct PfifoFast {
    cfg: PfifoFastConfig,
    bands: [VecDeque<Packet>; PFIFO_FAST_BANDS],
    band_stats: [QdiscStats; PFIFO_FAST_BANDS],
    stats: QdiscStats,
}

impl PfifoFast {
    /// A pfifo_fast qdisc. A txqueuelen of 0 is treated as 1, as the kernel's FIFOs do.
    pub fn new(cfg: PfifoFastConfig) -> PfifoFast {
        let cfg = PfifoFastConfig { txqueuelen: cfg.txqueuelen.max(1), ..cfg };
        PfifoFast {
            cfg,
            bands: Default::default(),
            band_stats: Default::default(),
            stats: QdiscStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PfifoFastConfig {
        &self.cfg
    }

    /// The band (0 = highest) a packet goes to.
    pub fn classify(&self, pkt: &Packet) -> usize {
        let prio = effective_priority(pkt, self.cfg.tos_mapping);
        DEFAULT_PRIOMAP[(prio & TC_PRIO_MAX) as usize] as usize
    }

    /// Counters of one band.
    pub fn band_stats(&self, band: usize) -> Option<QdiscStats> {
        self.band_stats.get(band).copied()
    }
}

impl Qdisc for PfifoFast {
    fn kind(&self) -> &'static str {
        "pfifo_fast"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        let b = self.classify(&pkt);
        if self.bands[b].len() >= self.cfg.txqueuelen as usize {
            self.stats.drops += 1;
            self.band_stats[b].drops += 1;
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = now;
        }
        self.stats.on_enqueue(&pkt);
        self.band_stats[b].on_enqueue(&pkt);
        self.bands[b].push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, _now: Time) -> Option<Packet> {
        let b = self.bands.iter().position(|q| !q.is_empty())?;
        let pkt = self.bands[b].pop_front()?;
        self.stats.on_dequeue(&pkt);
        self.band_stats[b].on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, _now: Time) -> Option<&Packet> {
        self.bands.iter().find_map(|q| q.front())
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        self.bands.iter().any(|q| !q.is_empty()).then_some(now)
    }

    fn reset(&mut self) -> Vec<Packet> {
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        for s in &mut self.band_stats {
            s.qlen = 0;
            s.backlog_bytes = 0;
        }
        self.bands.iter_mut().flat_map(|q| q.drain(..)).collect()
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }

    fn requeue(&mut self, pkt: Packet, _now: Time) -> Result<(), Dropped> {
        let b = self.classify(&pkt);
        self.stats.on_enqueue(&pkt);
        self.stats.requeues += 1;
        self.band_stats[b].on_enqueue(&pkt);
        self.bands[b].push_front(pkt);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;

    fn with_ds(ds: u8, id: u64) -> Packet {
        let mut p = Packet::new(100, id);
        p.dsfield = ds;
        p
    }

    #[test]
    fn defaults_match_the_kernel() {
        let c = PrioConfig::default();
        assert_eq!((c.bands, c.priomap), (3, [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]));
        let p = Prio::new(c).unwrap();
        for b in 0..3 {
            assert_eq!(p.band_qdisc(b).unwrap().kind(), "pfifo");
        }
        let f = PfifoFast::new(PfifoFastConfig::default());
        assert_eq!((f.config().txqueuelen, f.config().tos_mapping), (1000, TosMapping::Dscp));
        let zero = PfifoFast::new(PfifoFastConfig { txqueuelen: 0, ..Default::default() });
        assert_eq!(zero.config().txqueuelen, 1);
    }

    #[test]
    fn show_matches_tc() {
        let p = PrioConfig::from_tc(Some(4), &[1, 1, 2, 2, 3, 3, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0], 1).unwrap();
        assert_eq!(
            tc_priomap_options(p.bands, &p.priomap),
            "bands 4 priomap 1 1 2 2 3 3 0 0 1 2 3 0 0 0 0 0"
        );
        assert_eq!(
            tc_priomap_options(PFIFO_FAST_BANDS, &DEFAULT_PRIOMAP),
            "bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"
        );
    }

    #[test]
    fn legacy_table_matches_the_seed() {
        // Seed 003's table: TOS field (bits 0x1E) -> band.
        let expect = [1, 2, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1];
        let q = PfifoFast::new(PfifoFastConfig::legacy());
        for (tos_field, &band) in expect.iter().enumerate() {
            assert_eq!(q.classify(&with_ds((tos_field as u8) << 1, 0)), band, "TOS field {tos_field:04b}");
        }
    }

    #[test]
    fn ecn_bits_never_change_the_band_by_default() {
        let fixed = PfifoFast::new(PfifoFastConfig::default());
        let legacy = PfifoFast::new(PfifoFastConfig::legacy());
        // ECT(0) with DSCP 0: the seed's bug.
        assert_eq!(legacy.classify(&with_ds(0x02, 0)), 2);
        assert_eq!(fixed.classify(&with_ds(0x02, 0)), 1);
        for dscp in 0u8..64 {
            let base = fixed.classify(&with_ds(dscp << 2, 0));
            for ecn in 0..4 {
                assert_eq!(fixed.classify(&with_ds((dscp << 2) | ecn, 0)), base, "dscp {dscp} ecn {ecn}");
            }
            // Without ECN bits the fix agrees with the kernel.
            assert_eq!(legacy.classify(&with_ds(dscp << 2, 0)), base);
        }
    }

    #[test]
    fn explicit_priority_wins_over_dsfield() {
        let q = PfifoFast::new(PfifoFastConfig::default());
        let mut p = with_ds(0x10, 0); // lowdelay -> band 0
        assert_eq!(q.classify(&p), 0);
        p.priority = 2; // TC_PRIO_BULK
        assert_eq!(q.classify(&p), 2);
        let only =
            PfifoFast::new(PfifoFastConfig { tos_mapping: TosMapping::PriorityOnly, ..Default::default() });
        assert_eq!(only.classify(&with_ds(0x10, 0)), 1);
    }

    #[test]
    fn pfifo_fast_limit_is_per_band() {
        let mut q = PfifoFast::new(PfifoFastConfig { txqueuelen: 2, ..Default::default() });
        let t = Time::ZERO;
        q.enqueue(with_ds(0, 1), t).unwrap();
        q.enqueue(with_ds(0, 2), t).unwrap();
        assert!(q.enqueue(with_ds(0, 3), t).is_err());
        q.enqueue(with_ds(0x10, 4), t).unwrap();
        q.enqueue(with_ds(0x08, 5), t).unwrap(); // throughput -> band 2
        assert_eq!(q.dequeue(t).unwrap().payload, 4);
        assert_eq!(q.dequeue(t).unwrap().payload, 1);
        assert_eq!(q.dequeue(t).unwrap().payload, 2);
        assert_eq!(q.dequeue(t).unwrap().payload, 5);
        assert_eq!(q.band_stats(1).unwrap().drops, 1);
    }

    #[test]
    fn prio_validation_matches_the_kernel() {
        assert!(PrioConfig::from_tc(Some(1), &[], 1).is_err());
        assert!(PrioConfig::from_tc(Some(17), &[0; 16], 1).is_err());
        // bands 2 with the default map (which names band 2) is rejected, as in the kernel.
        let e = PrioConfig::from_tc(Some(2), &[], 1).unwrap_err().to_string();
        assert!(e.contains("entry 1 names band 2"), "{e}");
        assert!(PrioConfig::from_tc(Some(2), &[0; 16], 1).is_ok());
        assert!(PrioConfig::from_tc(Some(16), &[15, 0, 3], 1).is_ok());
        assert!(PrioConfig::from_tc(None, &[0; 17], 1).is_err());
        assert!(PrioConfig::from_tc(None, &[3], 1).is_err());
    }

    #[test]
    fn prio_classifies_by_classid_filter_then_priomap() {
        let q = Prio::new(PrioConfig { major: 0x10, ..PrioConfig::default() }).unwrap();
        let mut p = Packet::new(100, 0);
        assert_eq!(q.classify(&p), 1); // priority 0 -> priomap[0]
        p.priority = 6; // TC_PRIO_INTERACTIVE
        assert_eq!(q.classify(&p), 0);
        p.priority = Handle::new(0x10, 3).to_tc().unwrap(); // classid 10:3 -> band 2
        assert_eq!(q.classify(&p), 2);
        p.priority = Handle::new(0x10, 9).to_tc().unwrap(); // no band 9 -> priomap[0]
        assert_eq!(q.classify(&p), 1);
        p.priority = Handle::new(0x20, 1).to_tc().unwrap(); // someone else's classid -> priomap[0]
        assert_eq!(q.classify(&p), 1);
        p.priority = 0;
        p.push_class(Handle::new(0x10, 1));
        assert_eq!(q.classify(&p), 0);
    }

    #[test]
    fn change_keeps_surviving_bands() {
        let mut q = Prio::new(PrioConfig { major: 1, ..PrioConfig::default() }).unwrap();
        let t = Time::ZERO;
        q.enqueue(with_ds(0x10, 1), t).unwrap(); // band 0
        q.enqueue(with_ds(0x08, 2), t).unwrap(); // band 2
        q.enqueue(with_ds(0x08, 4), t).unwrap(); // band 2
        let two = PrioConfig { bands: 2, priomap: [1; 16], ..*q.config() };
        let flushed = q.change(two).unwrap();
        assert_eq!(flushed.iter().map(|p| p.payload).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!((q.bands(), q.stats().qlen, q.stats().drops), (2, 1, 2));
        assert!(q.change(PrioConfig { bands: 2, ..PrioConfig::default() }).is_err());
        q.change(PrioConfig { bands: 5, priomap: [4; 16], major: 1, ..PrioConfig::default() }).unwrap();
        assert_eq!(q.classify(&with_ds(0, 3)), 4);
        assert_eq!(q.dequeue(t).unwrap().payload, 1);
    }

    #[test]
    fn prio_serves_bands_strictly_and_counts_per_band() {
        let mut q = Prio::new(PrioConfig { major: 1, ..PrioConfig::default() }).unwrap();
        let t = Time::ZERO;
        let mut lo = with_ds(0x08, 1); // bulk -> band 2
        lo.len = 300;
        q.enqueue(lo, t).unwrap();
        q.enqueue(with_ds(0, 2), t).unwrap();
        q.enqueue(with_ds(0x10, 3), t).unwrap();
        assert_eq!(q.peek(t).unwrap().payload, 3);
        let order: Vec<u64> = std::iter::from_fn(|| q.dequeue(t)).map(|p| p.payload).collect();
        assert_eq!(order, vec![3, 2, 1]);
        assert_eq!(q.band_stats(2).unwrap().bytes, 300);
        assert_eq!(q.stats().packets, 3);
        let old = q.set_band_qdisc(0, Box::new(Fifo::pfifo(1))).unwrap();
        assert_eq!(old.stats().packets, 1);
        assert_eq!(q.stats().packets, 3, "totals survive a graft");
        assert!(q.set_band_qdisc(3, Box::new(Fifo::pfifo(1))).is_err());
    }
}
