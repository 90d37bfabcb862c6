//! A naive reference HTB: the kernel's HTB semantics written as plainly as possible, to check the
//! fast [`crate::htb`] scheduler against (differential tests) and to measure it against (benches).
//!
//! Every dequeue scans every backlogged leaf: it walks up from the leaf to find its *lender* (the
//! leaf itself if it can send on its own rate, else the first ancestor that can, provided every
//! class on the way may borrow), keys the leaf by (lender level, prio), and serves the smallest key
//! by deficit round robin in classid order, nested as in the kernel: the row of that level picks a
//! lender, whose feed of borrowing children picks a child, and so on down to a leaf. The members
//! of every row and feed are recomputed from the modes at each dequeue; only the cursors (the
//! classid the kernel's pointer points at, or "past the end") are kept. They follow the kernel's
//! pointer rules: a list never used yet is past the end (the zeroed pointer); a turn's end
//! points the cursor at the class after the holder at that moment, or past the end after the
//! last (the next lookup rewinds and, in a feed, moves the list above on); a row's turn holder
//! that stops being a member passes the cursor to the class after it; a feed's cursor whose
//! class left resumes at the first class at or above it (`last_ptr_id`). A feed has one cursor
//! per prio whatever level it is served at (the kernel's `inner.clprio[prio].ptr`), so a turn
//! ended while the class sent on its own rate can cost it its next turn in its parent's feed:
//! with quantum > packet size, borrowing siblings' shares wander around the fluid share as the
//! kernel's do (see `tests/htb_three_level_sites.rs`). [`Qdisc::next_event`] is the earliest mode change of a
//! class on the path of a backlogged leaf, kept in a [`BinaryHeap`]. Per packet this is
//! O(backlogged leaves × depth): the old O(N) HTB of seed 001, on purpose.
//!
//! Semantics (tc-htb(8), `sch_htb.c`):
//! - modes from two [`TokenBucket`]s per class: ceil tokens < 0 → `CANT_SEND`; else rate tokens
//!   < 0 → `MAY_BORROW`; else `CAN_SEND`;
//! - leaves whose lender is the leaf itself go first, then lenders by depth, deepest first; within
//!   that, lower `prio` first; among equals, DRR by `quantum` with a deficit per (leaf, level),
//!   where an inner class's turn in a row or feed lasts one round of its own feed;
//! - the packet is charged to the ceil bucket of the leaf and every ancestor, and to the rate
//!   bucket of the lender and every class above it; classes below the lender only borrow.
//!
//! Simplifications, none of which the differential tests reach: no 60 s `mbuffer` cap on debt
//! or idle credit, no direct queue (unclassified packets are dropped), pfifo leaves only, no class
//! changes at run time.

use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::{ConfigError, DropReason, Dropped, Qdisc, QdiscStats};
use crate::rate::{Rate, TokenBucket, WireSpec};
use crate::time::Time;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// Resolved parameters of one reference class (no defaults are applied here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefClassParams {
    /// Guaranteed rate.
    pub rate: Rate,
    /// Borrowing limit (>= rate).
    pub ceil: Rate,
    /// Rate bucket in bytes.
    pub burst: u64,
    /// Ceil bucket in bytes.
    pub cburst: u64,
    /// 0 (first) to 7.
    pub prio: u8,
    /// DRR quantum in bytes.
    pub quantum: u32,
    /// Packet limit of the leaf's pfifo.
    pub limit: u32,
}

impl RefClassParams {
    /// `rate` = `ceil`, burst and cburst 1600 bytes, prio 0, quantum 1500, limit 1000.
    pub fn new(rate: Rate) -> RefClassParams {
        RefClassParams { rate, ceil: rate, burst: 1600, cburst: 1600, prio: 0, quantum: 1500, limit: 1000 }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    CantSend,
    MayBorrow,
    CanSend,
}

struct RefClass {
    id: Handle,
    parent: Option<usize>,
    depth: u32,
    children: u32,
    params: RefClassParams,
    rate: TokenBucket,
    ceil: TokenBucket,
    queue: VecDeque<Packet>,
    /// DRR deficit per lender level: index 0 = own rate, 1 + d = ancestor at depth d.
    deficit: Vec<i64>,
    bytes: u64,
    packets: u64,
}

/// Sort key of a servable leaf: own-rate leaves first, then lenders deepest first, then prio.
type Key = (bool, Reverse<u32>, u8);

/// One round-robin list: a row (`feed == false`; index 0 for own-rate leaves, `1 + depth` for
/// lenders at that depth) or an inner class's feed of borrowing children (`feed == true`, class
/// index), at one prio.
type ListId = (bool, usize, u8);

/// Round-robin position in one list: the class holding the turn, and whether its turn is over.
#[derive(Clone, Copy)]
struct Cursor {
    id: Handle,
    turn_over: bool,
}

/// The naive reference HTB. See the [module docs](self).
pub struct RefHtb {
    handle: Handle,
    classes: Vec<RefClass>,
    index: HashMap<Handle, usize>,
    wire: WireSpec,
    cursors: HashMap<ListId, Cursor>,
    front: Option<Packet>,
    stats: QdiscStats,
    now: Time,
}

impl RefHtb {
    /// An empty reference HTB with handle `major:0`.
    pub fn new(handle: Handle) -> RefHtb {
        RefHtb {
            handle,
            classes: Vec::new(),
            index: HashMap::new(),
            wire: WireSpec::default(),
            cursors: HashMap::new(),
            front: None,
            stats: QdiscStats::default(),
            now: Time::ZERO,
        }
    }

    /// Adds a class under `parent` (the qdisc handle for a root class). The parent must exist
    /// and hold no packets. Any 32-bit classid other than 0 and the qdisc's own handle is
    /// accepted, so that trees larger than 65535 classes fit in one reference qdisc (packets then
    /// name their leaf in `priority`).
    pub fn add_class(
        &mut self,
        id: Handle,
        parent: Handle,
        params: RefClassParams,
        now: Time,
    ) -> Result<(), ConfigError> {
        let who = format!("reference htb class {id}");
        if id.is_unspec() || id == self.handle || self.find(id).is_some() {
            return Err(ConfigError::Hierarchy(format!("{who}: invalid or duplicate classid")));
        }
        if params.rate.is_zero() || params.ceil < params.rate || params.burst == 0 || params.quantum == 0 {
            return Err(ConfigError::invalid(
                who,
                "params",
                format!("{params:?}"),
                "need 0 < rate <= ceil, burst > 0",
            ));
        }
        let (parent, depth) = if parent == self.handle {
            (None, 0)
        } else {
            let p = self
                .find(parent)
                .ok_or_else(|| ConfigError::Hierarchy(format!("{who}: no parent {parent}")))?;
            if !self.classes[p].queue.is_empty() {
                return Err(ConfigError::Hierarchy(format!("{who}: parent {parent} holds packets")));
            }
            self.classes[p].children += 1;
            (Some(p), self.classes[p].depth + 1)
        };
        self.index.insert(id, self.classes.len());
        self.classes.push(RefClass {
            id,
            parent,
            depth,
            children: 0,
            params,
            rate: TokenBucket::new(params.rate, params.burst, now),
            ceil: TokenBucket::new(params.ceil, params.cburst, now),
            queue: VecDeque::new(),
            deficit: vec![0; depth as usize + 2],
            bytes: 0,
            packets: 0,
        });
        Ok(())
    }

    /// Bytes sent by a class (for an inner class, by its descendants).
    pub fn class_bytes(&self, id: Handle) -> Option<u64> {
        self.find(id).map(|c| self.classes[c].bytes)
    }

    /// Packets queued in a leaf.
    pub fn class_qlen(&self, id: Handle) -> Option<usize> {
        self.find(id).map(|c| self.classes[c].queue.len())
    }

    /// A class's mode at `now` (`"can_send"`, `"may_borrow"`, `"cant_send"`), for debugging.
    pub fn class_mode(&self, id: Handle, now: Time) -> Option<&'static str> {
        self.find(id).map(|c| match self.mode(c, now) {
            Mode::CanSend => "can_send",
            Mode::MayBorrow => "may_borrow",
            Mode::CantSend => "cant_send",
        })
    }

    fn find(&self, id: Handle) -> Option<usize> {
        self.index.get(&id).copied()
    }

    fn is_leaf(&self, c: usize) -> bool {
        self.classes[c].children == 0
    }

    fn mode(&self, c: usize, now: Time) -> Mode {
        let cl = &self.classes[c];
        if !cl.ceil.can_send(now) {
            Mode::CantSend
        } else if !cl.rate.can_send(now) {
            Mode::MayBorrow
        } else {
            Mode::CanSend
        }
    }

    /// The class whose rate pays for a packet of `leaf` at `now`, if the leaf may send at all.
    fn lender(&self, leaf: usize, now: Time) -> Option<usize> {
        let mut c = leaf;
        loop {
            match self.mode(c, now) {
                Mode::CanSend => return Some(c),
                Mode::CantSend => return None,
                Mode::MayBorrow => c = self.classes[c].parent?,
            }
        }
    }

    fn key(&self, leaf: usize, lender: usize) -> Key {
        let prio = self.classes[leaf].params.prio;
        if lender == leaf {
            // Every leaf sending on its own rate is in the one leaf row, whatever its depth.
            (false, Reverse(0), prio)
        } else {
            (true, Reverse(self.classes[lender].depth), prio)
        }
    }

    /// Picks the leaf to serve at `now` and the lender, or `None` if no backlogged leaf may send.
    fn select(&self, now: Time) -> Option<(usize, usize, Key)> {
        let mut best: Option<Key> = None;
        let mut cands: Vec<(Handle, usize, usize)> = Vec::new();
        for c in 0..self.classes.len() {
            if self.classes[c].queue.is_empty() {
                continue;
            }
            let Some(lender) = self.lender(c, now) else { continue };
            let k = self.key(c, lender);
            if best.is_none_or(|b| k < b) {
                best = Some(k);
                cands.clear();
            }
            if best == Some(k) {
                cands.push((self.classes[c].id, c, lender));
            }
        }
        let key = best?;
        Some((cands[0].1, cands[0].2, key))
    }

    /// True if class `c` takes part in prio `p`: a backlogged leaf of that prio, or an inner
    /// class with such a class among its borrowing children (the kernel's non-empty feed).
    fn active(&self, c: usize, p: u8, now: Time) -> bool {
        if self.is_leaf(c) {
            return !self.classes[c].queue.is_empty() && self.classes[c].params.prio == p;
        }
        (0..self.classes.len()).any(|ch| {
            self.classes[ch].parent == Some(c)
                && self.mode(ch, now) == Mode::MayBorrow
                && self.active(ch, p, now)
        })
    }

    /// The members of a list at `now`, in classid order.
    fn members(&self, list: ListId, now: Time) -> Vec<usize> {
        let (feed, idx, p) = list;
        let mut m: Vec<usize> = (0..self.classes.len())
            .filter(|&c| {
                let cl = &self.classes[c];
                if feed {
                    cl.parent == Some(idx) && self.mode(c, now) == Mode::MayBorrow && self.active(c, p, now)
                } else if idx == 0 {
                    self.is_leaf(c) && self.mode(c, now) == Mode::CanSend && self.active(c, p, now)
                } else {
                    !self.is_leaf(c)
                        && cl.depth + 1 == idx as u32
                        && self.mode(c, now) == Mode::CanSend
                        && self.active(c, p, now)
                }
            })
            .collect();
        m.sort_unstable_by_key(|&c| self.classes[c].id);
        m
    }

    /// Ends the turn of a list's cursor holder: the cursor moves to the class after it *now*
    /// (the kernel's `htb_next_rb_node`, a pointer to that node: a class joining in between
    /// later does not get the turn first). With no class after it, the cursor is past the end
    /// (the kernel's NULL pointer): the next lookup rewinds, even if a class joins after it.
    fn end_turn(&mut self, list: ListId, now: Time) {
        let Some(cur) = self.cursors.get(&list).copied() else { return };
        let next = self.members(list, now).into_iter().map(|c| self.classes[c].id).find(|&id| id > cur.id);
        let cursor = match next {
            Some(id) => Cursor { id, turn_over: false },
            None => Cursor { id: Handle::new(u16::MAX, u32::MAX), turn_over: true },
        };
        self.cursors.insert(list, cursor);
    }

    /// Finds the leaf to serve for `key`, walking the row and the feeds below it with their
    /// cursors (htb_lookup_leaf): a feed whose round is over is rewound and the list above moves
    /// on to its next member.
    fn lookup(&mut self, key: Key, now: Time) -> Option<usize> {
        let (borrowed, Reverse(depth), p) = key;
        let row: ListId = (false, if borrowed { depth as usize + 1 } else { 0 }, p);
        let mut stack = vec![row];
        for _ in 0..10_000 {
            let list = *stack.last()?;
            let m = self.members(list, now);
            if m.is_empty() {
                return None;
            }
            let pick = match self.cursors.get(&list) {
                // A list never used yet has the kernel's zeroed (NULL) pointer: past the end.
                None => None,
                Some(cur) => m.iter().copied().find(|&c| {
                    let id = self.classes[c].id;
                    if cur.turn_over {
                        id > cur.id
                    } else {
                        id >= cur.id
                    }
                }),
            };
            match pick {
                None => {
                    self.cursors.insert(list, Cursor { id: self.classes[m[0]].id, turn_over: false });
                    if stack.len() > 1 {
                        stack.pop();
                        let up = *stack.last()?;
                        self.end_turn(up, now);
                    }
                }
                Some(c) => {
                    self.cursors.insert(list, Cursor { id: self.classes[c].id, turn_over: false });
                    if self.is_leaf(c) {
                        return Some(c);
                    }
                    stack.push((true, c, p));
                }
            }
        }
        None
    }

    fn dequeue_shaped(&mut self, now: Time) -> Option<Packet> {
        let (_, _, key) = self.select(now)?;
        let leaf = self.lookup(key, now)?;
        let lender = self.lender(leaf, now)?;
        let pkt = self.classes[leaf].queue.pop_front()?;
        // DRR: the turn ends when the deficit for this level goes negative.
        let slot = if lender == leaf { 0 } else { 1 + self.classes[lender].depth as usize };
        let quantum = self.classes[leaf].params.quantum as i64;
        let d = &mut self.classes[leaf].deficit[slot];
        *d -= pkt.len as i64;
        let turn_over = *d < 0;
        if turn_over {
            *d += quantum;
        }
        if turn_over {
            let list: ListId = match self.classes[leaf].parent {
                Some(p) if lender != leaf => (true, p, key.2),
                _ => (false, 0, key.2),
            };
            self.end_turn(list, now);
        }
        // Charge: ceil everywhere, rate at the lender and above.
        let cost = self.wire.packet_cost(&pkt);
        let lender_depth = self.classes[lender].depth;
        let mut c = Some(leaf);
        while let Some(i) = c {
            let cl = &mut self.classes[i];
            if lender == leaf || cl.depth <= lender_depth {
                cl.rate.charge(now, cost);
            } else {
                cl.rate.refill(now);
            }
            cl.ceil.charge(now, cost);
            cl.bytes += pkt.len as u64;
            cl.packets += pkt.gso_segs.max(1) as u64;
            c = cl.parent;
        }
        // A class leaves a row only here (charged below its rate, or emptied). When it held the
        // row's turn, the turn passes to the next class (the kernel moves the row's pointer on;
        // a feed's pointer instead remembers the classid, which the cursor does as it is).
        let rows: Vec<ListId> = self.cursors.keys().copied().filter(|l| !l.0).collect();
        for list in rows {
            let cur = self.cursors[&list];
            if !cur.turn_over {
                let gone = self.find(cur.id).is_none_or(|c| !self.members(list, now).contains(&c));
                if gone {
                    self.end_turn(list, now);
                }
            }
        }
        Some(pkt)
    }
}

impl Qdisc for RefHtb {
    fn kind(&self) -> &'static str {
        "htb-reference"
    }

    fn enqueue(&mut self, mut pkt: Packet, now: Time) -> Result<(), Dropped> {
        self.now = self.now.max(now);
        if pkt.enqueue_time == Time::ZERO {
            pkt.enqueue_time = self.now;
        }
        let target = [Some(Handle::from_tc(pkt.priority)), pkt.class_for(self.handle.major())]
            .into_iter()
            .flatten()
            .filter_map(|h| self.find(h))
            .find(|&c| self.is_leaf(c));
        let Some(c) = target else {
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::Unclassified });
        };
        if self.classes[c].queue.len() >= self.classes[c].params.limit as usize {
            self.stats.drops += 1;
            return Err(Dropped { pkt, reason: DropReason::QueueFull });
        }
        self.stats.on_enqueue(&pkt);
        self.classes[c].queue.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, now: Time) -> Option<Packet> {
        self.now = self.now.max(now);
        let pkt = self.front.take().or_else(|| self.dequeue_shaped(self.now))?;
        self.stats.on_dequeue(&pkt);
        Some(pkt)
    }

    fn peek(&mut self, now: Time) -> Option<&Packet> {
        self.now = self.now.max(now);
        if self.front.is_none() {
            self.front = self.dequeue_shaped(self.now);
        }
        self.front.as_ref()
    }

    fn next_event(&self, now: Time) -> Option<Time> {
        let now = now.max(self.now);
        if self.stats.qlen == 0 {
            return None;
        }
        if self.front.is_some() || self.select(now).is_some() {
            return Some(now);
        }
        // Nothing may send: wake at the earliest mode change on the path of a backlogged leaf.
        let mut wake = BinaryHeap::new();
        for leaf in (0..self.classes.len()).filter(|&c| !self.classes[c].queue.is_empty()) {
            let mut c = Some(leaf);
            while let Some(i) = c {
                let cl = &self.classes[i];
                match self.mode(i, now) {
                    Mode::CantSend => wake.push(Reverse(cl.ceil.time_until(now, 0))),
                    Mode::MayBorrow => wake.push(Reverse(cl.rate.time_until(now, 0))),
                    Mode::CanSend => {}
                }
                c = cl.parent;
            }
        }
        wake.pop().map(|Reverse(t)| t)
    }

    fn reset(&mut self) -> Vec<Packet> {
        let mut out: Vec<Packet> = self.front.take().into_iter().collect();
        for c in &mut self.classes {
            out.extend(c.queue.drain(..));
        }
        self.stats.qlen = 0;
        self.stats.backlog_bytes = 0;
        out
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(minor: u32) -> Handle {
        Handle::new(1, minor)
    }

    fn pkt(class: u32, len: u32) -> Packet {
        let mut p = Packet::new(len, 0);
        p.push_class(h(class));
        p
    }

    /// Drains `q` on a virtual clock that jumps to each next event, for `secs` seconds, keeping
    /// the given leaves backlogged with `len`-byte packets.
    fn run_greedy(q: &mut RefHtb, leaves: &[u32], len: u32, secs: u64) {
        let mut now = Time::ZERO;
        for &l in leaves {
            for _ in 0..10 {
                q.enqueue(pkt(l, len), now).unwrap();
            }
        }
        let end = Time::from_secs(secs);
        while now < end {
            match q.dequeue(now) {
                Some(p) => q.enqueue(p, now).unwrap(),
                None => now = q.next_event(now).unwrap(),
            }
        }
    }

    #[test]
    fn a_lone_class_sends_at_its_rate() {
        let mut q = RefHtb::new(h(0));
        q.add_class(h(1), h(0), RefClassParams::new(Rate::from_bps(8_000_000)), Time::ZERO).unwrap();
        run_greedy(&mut q, &[1], 1000, 10);
        // 1 MB/s for 10 s, plus the burst, within a packet.
        let b = q.class_bytes(h(1)).unwrap() as i64;
        assert!((b - 10_000_000 - 1600).abs() <= 1000, "{b}");
    }

    #[test]
    fn children_share_the_parents_excess_by_quantum_and_respect_ceil() {
        let mut q = RefHtb::new(h(0));
        let mbit = |m: u64| Rate::from_bps(m * 1_000_000);
        q.add_class(h(1), h(0), RefClassParams::new(mbit(10)), Time::ZERO).unwrap();
        let a = RefClassParams { ceil: mbit(10), quantum: 1000, ..RefClassParams::new(mbit(1)) };
        let b = RefClassParams { ceil: mbit(10), quantum: 3000, ..RefClassParams::new(mbit(1)) };
        let c = RefClassParams { ceil: mbit(2), quantum: 3000, ..RefClassParams::new(mbit(1)) };
        q.add_class(h(0x10), h(1), a, Time::ZERO).unwrap();
        q.add_class(h(0x11), h(1), b, Time::ZERO).unwrap();
        q.add_class(h(0x12), h(1), c, Time::ZERO).unwrap();
        run_greedy(&mut q, &[0x10, 0x11, 0x12], 1000, 20);
        let mb = |m: u32| q.class_bytes(h(m)).unwrap() as f64 * 8.0 / 20e6;
        // c is capped at 2 Mbit; a and b split the remaining 6 Mbit of excess 1:3.
        assert!((mb(0x12) - 2.0).abs() < 0.01, "{}", mb(0x12));
        assert!((mb(0x10) - 2.5).abs() < 0.01, "{}", mb(0x10));
        assert!((mb(0x11) - 5.5).abs() < 0.01, "{}", mb(0x11));
    }

    #[test]
    fn lower_prio_number_takes_the_excess() {
        let mut q = RefHtb::new(h(0));
        let mbit = |m: u64| Rate::from_bps(m * 1_000_000);
        q.add_class(h(1), h(0), RefClassParams::new(mbit(10)), Time::ZERO).unwrap();
        let hi = RefClassParams { ceil: mbit(10), prio: 0, ..RefClassParams::new(mbit(1)) };
        let lo = RefClassParams { ceil: mbit(10), prio: 1, ..RefClassParams::new(mbit(1)) };
        q.add_class(h(0x10), h(1), hi, Time::ZERO).unwrap();
        q.add_class(h(0x11), h(1), lo, Time::ZERO).unwrap();
        run_greedy(&mut q, &[0x10, 0x11], 1000, 10);
        let mb = |m: u32| q.class_bytes(h(m)).unwrap() as f64 * 8.0 / 10e6;
        assert!((mb(0x10) - 9.0).abs() < 0.01 && (mb(0x11) - 1.0).abs() < 0.01, "{} {}", mb(0x10), mb(0x11));
    }

    #[test]
    fn bad_hierarchies_are_errors() {
        let mut q = RefHtb::new(h(0));
        let p = RefClassParams::new(Rate::from_bps(1000));
        assert!(q.add_class(h(1), h(7), p, Time::ZERO).is_err());
        q.add_class(h(1), h(0), p, Time::ZERO).unwrap();
        assert!(q.add_class(h(1), h(0), p, Time::ZERO).is_err());
        let bad = RefClassParams { ceil: Rate::from_bps(10), ..p };
        assert!(q.add_class(h(2), h(0), bad, Time::ZERO).is_err());
        assert!(q.enqueue(pkt(9, 100), Time::ZERO).is_err());
    }
}
