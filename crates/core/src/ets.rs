//! ETS: Enhanced Transmission Selection (tc-ets(8), IEEE 802.1Qaz), prio and DRR in one qdisc.
//!
//! The kernel's semantics (`net/sched/sch_ets.c`):
//! - `nbands` bands (1..=16), classes `major:1` to `major:nbands`, fixed when the qdisc is set
//!   up (classes are neither added nor deleted, only their quantum changed). The first `nstrict`
//!   bands are strict; the others share by deficit round robin with a quantum in bytes each
//!   (never zero; the kernel's default is the device's `psched_mtu`).
//! - Each band holds a child qdisc, a `pfifo` of `txqueuelen` packets unless another is grafted.
//! - Classification as prio's (see [`crate::prio::classify_band`]): `skb->priority` naming a
//!   band, else the filters' result (a minor that is no band falls back to `priomap[0]`), else
//!   the priomap indexed by the priority. Bands a priomap does not name are unused by it; tc's
//!   priomap entries not given name the last band.
//! - Dequeue: the strict bands in order, the first that releases a packet; then the DRR bands.
//!   A DRR band joins the tail of the active list with `deficit = quantum` when its child goes
//!   from empty to non-empty; the head band sends its head packet if it fits the deficit (which
//!   shrinks), else gains a quantum and goes to the tail. A head band whose child holds its
//!   packet back (a shaping child) stops the DRR part until it releases it, as `ets_qdisc_dequeue`
//!   does, while strict bands keep being served.
//!
//! Classification of filters happens outside (the [`crate::classify::Classifier`] records the
//! class in the packet's class path); this qdisc reads it with [`Packet::class_for`].

use crate::fifo::Fifo;
use crate::packet::Packet;
use crate::prio::{classify_band, TosMapping};
use crate::qdisc::{ClassView, ConfigError, Dropped, Qdisc, QdiscStats};
use crate::time::Time;
use std::collections::VecDeque;

/// Most bands (`TCQ_ETS_MAX_BANDS`).
pub const MAX_BANDS: usize = 16;

/// ETS parameters, as the kernel keeps them (every band's quantum resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtsConfig {
    /// Number of bands, 1..=16.
    pub nbands: usize,
    /// How many of them (the first) are strict, 0..=nbands.
    pub nstrict: usize,
    /// Quantum in bytes of each band (entries of strict bands are ignored); `nbands` entries.
    pub quanta: Vec<u32>,
    /// Band of each priority 0..=15.
    pub priomap: [u8; 16],
    /// Handle major of this qdisc (for `skb->priority` and filter results).
    pub major: u16,
    /// How priority-0 packets get a priority from their dsfield.
    pub tos_mapping: TosMapping,
    /// Packets each default `pfifo` child holds (`txqueuelen`; 0 counts as 1).
    pub default_limit: u32,
}

impl EtsConfig {
    /// Checks the configuration as `ets_qdisc_change` does.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_BANDS).contains(&self.nbands) {
            return Err(ConfigError::invalid("ets", "bands", self.nbands, "Invalid number of bands"));
        }
        if self.nstrict > self.nbands {
            return Err(ConfigError::invalid(
                "ets",
                "strict",
                self.nstrict,
                "Invalid number of strict bands",
            ));
        }
        if self.quanta.len() != self.nbands {
            return Err(ConfigError::invalid(
                "ets",
                "quanta",
                self.quanta.len(),
                format!("one quantum per band ({} bands)", self.nbands),
            ));
        }
        if let Some(b) = (self.nstrict..self.nbands).find(|&b| self.quanta[b] == 0) {
            return Err(ConfigError::invalid(
                "ets",
                "quanta",
                format!("0 (band {b})"),
                "ETS quantum cannot be zero",
            ));
        }
        if let Some(&b) = self.priomap.iter().find(|&&b| b as usize >= self.nbands) {
            return Err(ConfigError::invalid("ets", "priomap", b, "Invalid band number in ETS priomap"));
        }
        Ok(())
    }
}

/// Counters of one ETS band as `tc -s class show` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EtsBandStats {
    /// Its child qdisc's counters (the kernel reports the child's).
    pub stats: QdiscStats,
    /// Deficit in bytes of a DRR band (0 while idle and for strict bands).
    pub deficit: u32,
}

struct Band {
    child: Box<dyn Qdisc>,
    quantum: u32,
    deficit: u32,
    /// In the DRR active list.
    active: bool,
    /// Counters of children this band had before (a grafted qdisc replaced them).
    retired: QdiscStats,
}

/// The ETS qdisc.
pub struct Ets {
    cfg: EtsConfig,
    bands: Vec<Band>,
    /// DRR bands with packets, in round order; each at most once.
    active: VecDeque<usize>,
    stats: QdiscStats,
}

impl std::fmt::Debug for Ets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ets").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl Ets {
    /// An ETS qdisc with a default `pfifo` in every band.
    pub fn new(cfg: EtsConfig) -> Result<Ets, ConfigError> {
        cfg.validate()?;
        let limit = cfg.default_limit.max(1);
        let bands = cfg
            .quanta
            .iter()
            .map(|&quantum| Band {
                child: Box::new(Fifo::pfifo(limit)),
                quantum,
                deficit: 0,
                active: false,
                retired: QdiscStats::default(),
            })
            .collect();
        Ok(Ets { active: VecDeque::with_capacity(cfg.nbands), cfg, bands, stats: QdiscStats::default() })
    }

    /// The configuration.
    pub fn config(&self) -> &EtsConfig {
        &self.cfg
    }

    fn is_strict(&self, band: usize) -> bool {
        band < self.cfg.nstrict
    }

    fn band_index(&self, band: usize) -> Result<usize, ConfigError> {
        if band < self.bands.len() {
            Ok(band)
        } else {
            Err(ConfigError::Hierarchy(format!(
                "ets {:x}: has no class {:x}:{:x} (classes are :1 to :{:x})",
                self.cfg.major,
                self.cfg.major,
                band + 1,
                self.bands.len()
            )))
        }
    }

    /// `tc class change ... ets quantum N` on band `band` (0-based): from its next turn.
    pub fn set_quantum(&mut self, band: usize, quantum: u32) -> Result<(), ConfigError> {
        let b = self.band_index(band)?;
        if self.is_strict(b) {
            return Err(ConfigError::invalid(
                "ets",
                "quantum",
                quantum,
                "Strict bands do not have a configurable quantum",
            ));
        }
        if quantum == 0 {
            return Err(ConfigError::invalid("ets", "quantum", 0, "ETS quantum cannot be zero"));
        }
        self.bands[b].quantum = quantum;
        self.cfg.quanta[b] = quantum;
        Ok(())
    }

    /// Grafts `child` on band `band` (0-based); `None` puts a default pfifo back. Returns the old
    /// child with whatever it held (the caller drains or drops it).
    pub fn set_band_qdisc(
        &mut self,
        band: usize,
        child: Option<Box<dyn Qdisc>>,
    ) -> Result<Box<dyn Qdisc>, ConfigError> {
        let b = self.band_index(band)?;
        let limit = self.cfg.default_limit.max(1);
        let child = child.unwrap_or_else(|| Box::new(Fifo::pfifo(limit)));
        let old = std::mem::replace(&mut self.bands[b].child, child);
        let o = old.stats();
        let band_ref = &mut self.bands[b];
        band_ref.retired.bytes += o.bytes;
        band_ref.retired.packets += o.packets;
        band_ref.retired.drops += o.drops;
        band_ref.retired.overlimits += o.overlimits;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(o.backlog_bytes);
        self.stats.qlen = self.stats.qlen.saturating_sub(o.qlen);
        if self.bands[b].active && self.bands[b].child.qlen() == 0 {
            self.bands[b].active = false;
            self.active.retain(|&x| x != b);
        }
        Ok(old)
    }

    /// Band `band`'s child qdisc.
    pub fn band_qdisc(&self, band: usize) -> Option<&dyn Qdisc> {
        self.bands.get(band).map(|b| b.child.as_ref())
    }

    /// Counters of band `band` (0-based).
    pub fn band_stats(&self, band: usize) -> Option<EtsBandStats> {
        let b = self.bands.get(band)?;
        let mut stats = b.retired;
        stats.add_counts(&b.child.stats());
        stats.requeues = b.child.stats().requeues;
        Some(EtsBandStats { stats, deficit: if b.active { b.deficit } else { 0 } })
    }

    /// The band (0-based) a packet goes to.
    pub fn classify(&self, pkt: &Packet) -> usize {
        classify_band(pkt, self.cfg.major, self.bands.len(), &self.cfg.priomap, self.cfg.tos_mapping)
    }

    fn activate(&mut self, b: usize) {
        if self.is_strict(b) {
            return;
        }
        let band = &mut self.bands[b];
        if !band.active && band.child.qlen() > 0 {
            band.active = true;
            band.deficit = band.quantum;
            self.active.push_back(b);
        }
    }

    /// Runs the DRR round until the head band may send its head packet; `None` when no DRR band
    /// has a packet or the head band's child holds its packet back.
    fn select_drr(&mut self, now: Time) -> Option<usize> {
        loop {
            let b = *self.active.front()?;
            let band = &mut self.bands[b];
            if band.child.qlen() == 0 {
                // Emptied by its own AQM: it leaves the round.
                band.active = false;
                self.active.pop_front();
                continue;
            }
            let len = band.child.peek(now)?.len;
            if len <= band.deficit {
                return Some(b);
            }
            band.deficit = band.deficit.saturating_add(band.quantum);
            self.active.rotate_left(1);
        }
    }

    fn sent(&mut self, pkt: &Packet) {
        self.stats.bytes += pkt.len as u64;
        self.stats.packets += pkt.gso_segs.max(1) as u64;
        self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(pkt.len as u64);
        self.stats.qlen = self.stats.qlen.saturating_sub(1);
    }
}

impl Qdisc for Ets {
    fn kind(&self) -> &'static str {
        "ets"
    }

    fn enqueue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        let b = self.classify(&pkt);
        let len = pkt.len as u64;
        self.bands[b].child.enqueue(pkt, now)?;
        self.stats.backlog_bytes += len;
        self.stats.qlen += 1;
        self.activate(b);
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        for b in 0..self.cfg.nstrict {
            if let Some(pkt) = self.bands[b].child.dequeue(now) {
                self.sent(&pkt);
                return Some(pkt);
            }
        }
        let b = self.select_drr(now)?;
        let band = &mut self.bands[b];
        let pkt = band.child.dequeue(now)?;
        band.deficit -= pkt.len.min(band.deficit);
        if band.child.qlen() == 0 {
            band.active = false;
            self.active.pop_front();
        }
        self.sent(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        let strict = (0..self.cfg.nstrict).find(|&b| self.bands[b].child.peek(now).is_some());
        let b = match strict {
            Some(b) => b,
            None => self.select_drr(now)?,
        };
        self.bands[b].child.peek(now)
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        let strict = self.bands[..self.cfg.nstrict].iter().filter_map(|b| b.child.next_event(now)).min();
        let head = self.active.iter().map(|&b| &self.bands[b].child).find(|c| c.qlen() > 0);
        match (strict, head.and_then(|c| c.next_event(now))) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out = Vec::new();
        for b in &mut self.bands {
            out.extend(b.child.reset());
            b.active = false;
            b.deficit = 0;
        }
        self.active.clear();
        self.stats.backlog_bytes = 0;
        self.stats.qlen = 0;
        out
    }

    fn qlen(&self) -> u64 {
        self.stats.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.stats.backlog_bytes
    }

    fn stats(&self) -> QdiscStats {
        let mut s = self.stats;
        s.drops = 0;
        s.overlimits = 0;
        for b in &self.bands {
            let c = b.child.stats();
            s.drops += c.drops + b.retired.drops;
            s.overlimits += c.overlimits + b.retired.overlimits;
        }
        s
    }

    fn take_dropped(&mut self) -> Option<Dropped> {
        for b in 0..self.bands.len() {
            if let Some(d) = self.bands[b].child.take_dropped() {
                self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(d.pkt.len as u64);
                self.stats.qlen = self.stats.qlen.saturating_sub(1);
                return Some(d);
            }
        }
        None
    }

    /// Class `major:b+1` of band `b`: its qdisc's counters, as `ets_class_dump_stats` copies
    /// them (a qdisc grafted in place of another starts from zero, as in the kernel).
    fn for_each_class<'a>(&'a self, f: &mut dyn FnMut(ClassView<'a>)) {
        for (b, band) in self.bands.iter().enumerate() {
            let q = band.child.as_ref();
            f(ClassView { minor: b as u32 + 1, stats: Some(q.stats()), child: Some(q) });
        }
    }

    fn requeue(&mut self, pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.stats.requeues += 1;
        self.stats.bytes = self.stats.bytes.saturating_sub(pkt.len as u64);
        self.stats.packets = self.stats.packets.saturating_sub(pkt.gso_segs.max(1) as u64);
        let b = self.classify(&pkt);
        let len = pkt.len;
        self.bands[b].child.requeue(pkt, now)?;
        self.stats.backlog_bytes += len as u64;
        self.stats.qlen += 1;
        if !self.is_strict(b) {
            let band = &mut self.bands[b];
            if band.active {
                band.deficit = band.deficit.saturating_add(len);
            } else {
                // Back at the head of the round with the credit it just spent.
                band.active = true;
                band.deficit = len.max(band.quantum);
                self.active.push_front(b);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Handle;

    fn cfg(nbands: usize, nstrict: usize, quanta: &[u32]) -> EtsConfig {
        let mut q = vec![1514; nbands];
        q[nstrict..nstrict + quanta.len()].copy_from_slice(quanta);
        EtsConfig {
            nbands,
            nstrict,
            quanta: q,
            priomap: [nbands as u8 - 1; 16],
            major: 1,
            tos_mapping: TosMapping::Dscp,
            default_limit: 1000,
        }
    }

    fn pkt(len: u32, band: u32, id: u64) -> Packet {
        let mut p = Packet::new(len, id);
        p.push_class(Handle::new(1, band + 1));
        p
    }

    #[test]
    fn strict_bands_go_first_in_order() {
        let mut e = Ets::new(cfg(3, 2, &[1500])).unwrap();
        e.enqueue(pkt(100, 2, 1), Time::ZERO).unwrap();
        e.enqueue(pkt(100, 1, 2), Time::ZERO).unwrap();
        e.enqueue(pkt(100, 0, 3), Time::ZERO).unwrap();
        let order: Vec<u64> = std::iter::from_fn(|| e.dequeue(Time::ZERO).map(|p| p.payload)).collect();
        assert_eq!(order, vec![3, 2, 1]);
        assert_eq!(e.stats().qlen, 0);
    }

    #[test]
    fn drr_bands_share_bytes_by_quantum() {
        let mut e = Ets::new(cfg(3, 0, &[1000, 2000, 3000])).unwrap();
        for i in 0..600 {
            for b in 0..3 {
                e.enqueue(pkt(500, b, b as u64 * 10_000 + i), Time::ZERO).unwrap();
            }
        }
        let mut sent = [0u64; 3];
        for _ in 0..600 {
            let p = e.dequeue(Time::ZERO).unwrap();
            sent[(p.payload / 10_000) as usize] += p.len as u64;
        }
        assert_eq!((sent[0] * 2, sent[0] * 3), (sent[1], sent[2]), "{sent:?}");
    }

    #[test]
    fn a_band_returns_with_a_fresh_quantum() {
        let mut e = Ets::new(cfg(2, 0, &[3000, 3000])).unwrap();
        e.enqueue(pkt(1000, 0, 1), Time::ZERO).unwrap();
        assert_eq!(e.band_stats(0).unwrap().deficit, 3000);
        e.dequeue(Time::ZERO).unwrap();
        assert_eq!(e.band_stats(0).unwrap().deficit, 0);
        e.enqueue(pkt(1000, 0, 2), Time::ZERO).unwrap();
        assert_eq!(e.band_stats(0).unwrap().deficit, 3000);
    }

    #[test]
    fn priomap_and_priority_choose_bands_as_prio_does() {
        let mut c = cfg(4, 1, &[]);
        c.priomap = [0, 0, 1, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 3, 3];
        let e = Ets::new(c).unwrap();
        let mut p = Packet::new(100, 1);
        p.priority = 5;
        assert_eq!(e.classify(&p), 2);
        p.priority = 9;
        assert_eq!(e.classify(&p), 3);
        // `skb->priority` naming a class of this qdisc; a minor past the bands is priomap[0].
        p.priority = 0x0001_0002;
        assert_eq!(e.classify(&p), 1);
        p.priority = 0x0001_0009;
        assert_eq!(e.classify(&p), 0);
        // A filter result.
        let p = pkt(100, 3, 2);
        assert_eq!(e.classify(&p), 3);
    }

    #[test]
    fn config_is_checked_like_the_kernel() {
        assert!(Ets::new(cfg(1, 1, &[])).is_ok());
        let mut c = cfg(2, 0, &[1500, 1500]);
        c.nbands = 17;
        assert!(Ets::new(c).is_err());
        let mut c = cfg(2, 0, &[1500, 0]);
        assert!(Ets::new(c.clone()).is_err());
        c.quanta[1] = 10;
        c.priomap[3] = 2;
        assert!(Ets::new(c).is_err());
        let mut e = Ets::new(cfg(3, 1, &[])).unwrap();
        assert!(e.set_quantum(0, 100).is_err(), "strict");
        assert!(e.set_quantum(1, 0).is_err());
        assert!(e.set_quantum(3, 100).is_err());
        e.set_quantum(2, 100).unwrap();
        assert_eq!(e.config().quanta[2], 100);
    }

    #[test]
    fn a_throttled_drr_head_waits_while_strict_bands_still_send() {
        let mut e = Ets::new(cfg(3, 1, &[1514, 1514])).unwrap();
        let tbf = crate::tbf::holding_child();
        e.set_band_qdisc(1, Some(Box::new(tbf))).unwrap();
        e.enqueue(pkt(1500, 1, 1), Time::ZERO).unwrap();
        e.enqueue(pkt(1500, 1, 2), Time::ZERO).unwrap();
        e.enqueue(pkt(1500, 2, 3), Time::ZERO).unwrap();
        assert_eq!(e.dequeue(Time::ZERO).unwrap().payload, 1);
        assert!(e.dequeue(Time::ZERO).is_none(), "band 1 heads the round and holds packet 2 back");
        e.enqueue(pkt(100, 0, 4), Time::ZERO).unwrap();
        assert_eq!(e.next_event(Time::ZERO), Some(Time::ZERO));
        assert_eq!(e.dequeue(Time::ZERO).unwrap().payload, 4, "strict band served meanwhile");
        let t = e.next_event(Time::ZERO).unwrap();
        assert!(t > Time::ZERO);
        // Released, packet 2 does not fit band 1's 14 bytes of deficit: band 2 goes first.
        assert_eq!(e.dequeue(t).unwrap().payload, 3);
        assert_eq!(e.dequeue(t).unwrap().payload, 2);
        assert_eq!((e.qlen(), e.backlog_bytes()), (0, 0));
    }

    #[test]
    fn overflow_counts_and_requeue_goes_back_first() {
        let mut c = cfg(2, 0, &[1514, 1514]);
        c.default_limit = 1;
        let mut e = Ets::new(c).unwrap();
        e.enqueue(pkt(100, 0, 1), Time::ZERO).unwrap();
        assert!(e.enqueue(pkt(100, 0, 2), Time::ZERO).is_err());
        e.enqueue(pkt(100, 1, 3), Time::ZERO).unwrap();
        assert_eq!(e.stats().drops, 1);
        assert_eq!(e.band_stats(0).unwrap().stats.drops, 1);
        let p = e.dequeue(Time::ZERO).unwrap();
        e.requeue(p, Time::ZERO).unwrap();
        assert_eq!(e.dequeue(Time::ZERO).unwrap().payload, 1);
        assert_eq!(e.dequeue(Time::ZERO).unwrap().payload, 3);
        assert_eq!(e.stats().requeues, 1);
        assert_eq!(e.stats().packets, 2);
    }
}
