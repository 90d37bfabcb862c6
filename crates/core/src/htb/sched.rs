//! The scheduler proper: rows and feeds, class modes, the wait queue, leaf lookup, DRR and
//! charging. It mirrors `sch_htb.c`'s algorithm (see the module docs for where it differs).

use super::class::{HtbMode, NONE, PARKED};
use super::rr::RrList;
use super::Htb;
use crate::packet::Packet;
use crate::time::{Span, Time};

/// Which list: a row of self-feeding classes (row index, see [`Htb::row_of`]) or an inner
/// class's feed of borrowing children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListRef {
    Row(u32),
    Feed(u32),
}

/// Inner-only state: the children in rank order and one feed per priority.
#[derive(Debug, Default)]
pub(super) struct Inner {
    pub children: Children,
    pub feeds: [RrList; 8],
}

/// The arena indices of an inner class's children, by rank. Children created one after the other
/// (as generated trees create them) have consecutive indices: that run is kept as its start
/// alone, so finding a feed's member costs no memory access and no table (4 bytes per class
/// saved). Any other order, or a deletion, turns it into an explicit list.
#[derive(Debug, Default)]
pub(super) struct Children {
    /// `list` is empty while the children are `start..start + len`.
    start: u32,
    len: u32,
    list: Vec<u32>,
}

impl Children {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The child of rank `rank`.
    #[inline]
    pub fn get(&self, rank: u32) -> u32 {
        if self.list.is_empty() {
            self.start + rank
        } else {
            self.list[rank as usize]
        }
    }

    /// Adds child `c`; returns its rank.
    pub fn push(&mut self, c: u32) -> u32 {
        if self.len == 0 {
            self.start = c;
        } else if !self.list.is_empty() || c != self.start.wrapping_add(self.len) {
            self.materialize();
            self.list.push(c);
        }
        self.len += 1;
        self.len - 1
    }

    /// Removes the child of rank `rank`; the last child takes its rank and is returned.
    pub fn swap_remove(&mut self, rank: u32) -> Option<u32> {
        self.materialize();
        self.list.swap_remove(rank as usize);
        self.len -= 1;
        self.list.get(rank as usize).copied()
    }

    fn materialize(&mut self) {
        if self.list.is_empty() {
            self.list = (self.start..self.start + self.len).collect();
        }
    }

    /// Ranks a feed's bitmap should have room for.
    pub fn room(&self) -> u32 {
        if self.list.is_empty() {
            self.len.next_power_of_two()
        } else {
            self.list.capacity() as u32
        }
    }

    pub fn shrink_to_fit(&mut self) {
        self.list.shrink_to_fit();
    }
}

impl Htb {
    /// Row index of a class: 0 for leaves, `1 + depth` for inner classes. The kernel's levels
    /// order the same way (leaves first, then inner classes deepest first) without a depth cap.
    #[inline]
    pub(super) fn row_of(&self, c: u32) -> u32 {
        let cl = &self.classes[c as usize];
        if cl.is_leaf() {
            0
        } else {
            1 + cl.depth as u32
        }
    }

    pub(super) fn ensure_rows(&mut self, depth: u32) {
        let need = depth as usize + 2;
        if self.rows.len() < need {
            self.rows.resize_with(need, Default::default);
            self.row_mask.resize(need, 0);
        }
    }

    #[inline]
    fn inner_of(&self, c: u32) -> &Inner {
        &self.inners[self.classes[c as usize].ext as usize]
    }

    #[inline]
    fn list_mut(&mut self, r: ListRef, prio: usize) -> &mut RrList {
        match r {
            ListRef::Row(row) => &mut self.rows[row as usize][prio],
            ListRef::Feed(c) => {
                let ext = self.classes[c as usize].ext as usize;
                &mut self.inners[ext].feeds[prio]
            }
        }
    }

    /// The class at `rank` of a list.
    #[inline]
    fn member(&self, r: ListRef, rank: u32) -> u32 {
        match r {
            ListRef::Row(_) => rank,
            ListRef::Feed(p) => self.inner_of(p).children.get(rank),
        }
    }

    /// A class's rank in a list, and the size the list's bitmap should grow to.
    #[inline]
    fn rank(&self, r: ListRef, c: u32) -> (u32, u32) {
        match r {
            ListRef::Row(_) => (c, self.classes.capacity() as u32),
            ListRef::Feed(p) => (self.classes[c as usize].srank, self.inner_of(p).children.room()),
        }
    }

    fn list_push(&mut self, r: ListRef, prio: usize, c: u32) {
        let (rank, room) = self.rank(r, c);
        self.list_mut(r, prio).push(rank, room);
    }

    fn list_remove(&mut self, r: ListRef, prio: usize, c: u32) {
        let (rank, _) = self.rank(r, c);
        self.list_mut(r, prio).remove(rank, matches!(r, ListRef::Feed(_)));
    }

    // ---- activation (htb_activate_prios / htb_deactivate_prios) -------------------------------

    fn add_to_row(&mut self, c: u32, mask: u8) {
        let r = self.row_of(c);
        self.row_mask[r as usize] |= mask;
        let mut m = mask;
        while m != 0 {
            let prio = m.trailing_zeros() as usize;
            m &= m - 1;
            self.list_push(ListRef::Row(r), prio, c);
        }
    }

    fn remove_from_row(&mut self, c: u32, mask: u8) {
        let r = self.row_of(c);
        let mut emptied = 0u8;
        let mut m = mask;
        while m != 0 {
            let prio = m.trailing_zeros() as usize;
            m &= m - 1;
            self.list_remove(ListRef::Row(r), prio, c);
            if self.rows[r as usize][prio].is_empty() {
                emptied |= 1 << prio;
            }
        }
        self.row_mask[r as usize] &= !emptied;
    }

    /// Links an active class into its parent's feeds (while it borrows) or its row (when it can
    /// send), climbing as long as the ancestors borrow too.
    fn activate_prios(&mut self, c: u32) {
        let mut cl = c;
        let mut mask = self.classes[c as usize].activity;
        let mut p = self.classes[c as usize].parent;
        while self.classes[cl as usize].mode == HtbMode::MayBorrow && p != NONE && mask != 0 {
            let mut m = mask;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= m - 1;
                if !self.inner_of(p).feeds[prio].is_empty() {
                    // The parent already takes part in this prio.
                    mask &= !(1 << prio);
                }
                self.list_push(ListRef::Feed(p), prio, cl);
            }
            self.classes[p as usize].activity |= mask;
            cl = p;
            p = self.classes[cl as usize].parent;
        }
        if self.classes[cl as usize].mode == HtbMode::CanSend && mask != 0 {
            self.add_to_row(cl, mask);
        }
    }

    /// The reverse of [`Self::activate_prios`]; the class's mode must still be the old one.
    fn deactivate_prios(&mut self, c: u32) {
        let mut cl = c;
        let mut mask = self.classes[c as usize].activity;
        let mut p = self.classes[c as usize].parent;
        while self.classes[cl as usize].mode == HtbMode::MayBorrow && p != NONE && mask != 0 {
            let m0 = mask;
            mask = 0;
            let mut m = m0;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= m - 1;
                self.list_remove(ListRef::Feed(p), prio, cl);
                if self.inner_of(p).feeds[prio].is_empty() {
                    mask |= 1 << prio;
                }
            }
            self.classes[p as usize].activity &= !mask;
            cl = p;
            p = self.classes[cl as usize].parent;
        }
        if self.classes[cl as usize].mode == HtbMode::CanSend && mask != 0 {
            self.remove_from_row(cl, mask);
        }
    }

    /// Makes a backlogged leaf take part in scheduling (no-op if it already does).
    #[inline]
    pub(super) fn activate(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if cl.activity == 0 {
            let plan = self.plans.get(cl.plan);
            cl.activity = 1 << plan.prio;
            self.active.add(plan.params.rate.bps(), plan.quantum);
            self.activate_prios(c);
        }
    }

    /// Takes an active leaf out of scheduling.
    pub(super) fn deactivate(&mut self, c: u32) {
        if self.classes[c as usize].activity != 0 {
            self.deactivate_prios(c);
            self.classes[c as usize].activity = 0;
            let plan = self.plans.get(self.classes[c as usize].plan);
            self.active.remove(plan.params.rate.bps(), plan.quantum);
        }
    }

    /// Moves a child that took rank `to` in its parent's feeds (a sibling was deleted).
    pub(super) fn renumber_child(&mut self, parent: u32, child: u32, to: u32) {
        let from = self.classes[child as usize].srank;
        self.classes[child as usize].srank = to;
        let ext = self.classes[parent as usize].ext as usize;
        let room = self.inners[ext].children.room();
        for feed in self.inners[ext].feeds.iter_mut() {
            feed.renumber(from, to, room);
        }
    }

    // ---- modes and the wait queue ------------------------------------------------------------

    /// The class's mode at `now` from its buckets, and the ns until that changes (0 for CanSend).
    pub(super) fn mode_at(&self, c: u32, now: u64) -> (HtbMode, u64) {
        let cl = &self.classes[c as usize];
        let plan = self.plans.get(cl.plan);
        let d = now.saturating_sub(cl.t_c);
        let ct = cl.ctokens.saturating_add(plan.ceil.earned(d));
        if ct < 0 {
            return (HtbMode::CantSend, plan.ceil.wait_ns(ct));
        }
        let t = cl.tokens.saturating_add(plan.rate.earned(d));
        if t >= 0 {
            (HtbMode::CanSend, 0)
        } else {
            (HtbMode::MayBorrow, plan.rate.wait_ns(t))
        }
    }

    /// Puts a class in `new` mode: relinks it if it is active, counts the overlimit, and puts it
    /// in the wait queue until `now + wait` unless it can send (htb_change_class_mode plus the
    /// wait-queue update of its callers).
    fn set_mode(&mut self, c: u32, new: HtbMode, wait: u64, now: u64) {
        let old = self.classes[c as usize].mode;
        if new != old {
            if new == HtbMode::CantSend {
                self.cold[c as usize].overlimits = self.cold[c as usize].overlimits.wrapping_add(1);
                self.stats.overlimits += 1;
            }
            if self.classes[c as usize].activity != 0 {
                if old != HtbMode::CantSend {
                    self.deactivate_prios(c);
                }
                self.classes[c as usize].mode = new;
                if new != HtbMode::CantSend {
                    self.activate_prios(c);
                }
            } else {
                self.classes[c as usize].mode = new;
            }
        }
        if new == HtbMode::CanSend {
            self.waitq.cancel(c, self.classes[c as usize].timer);
        } else {
            self.waitq.insert(c, &mut self.classes[c as usize].timer, now.saturating_add(wait));
        }
    }

    /// Recomputes a class's mode at `now` (used when its wake-up fires and after changes).
    pub(super) fn update_mode(&mut self, c: u32, now: u64) {
        let (mode, wait) = self.mode_at(c, now);
        self.set_mode(c, mode, wait, now);
    }

    /// Applies every mode change due by `now` (htb_do_events, without the kernel's time budget).
    /// A class keeps the wake-up of its last mode change even when a later charge pushed its real
    /// one further (as the kernel does), so a class that fires early just goes back to waiting.
    fn run_events(&mut self, now: u64) {
        while let Some(c) = self.waitq.pop_expired(now) {
            self.update_mode(c, now);
        }
    }

    // ---- charging ---------------------------------------------------------------------------

    /// Charges a sent packet to the leaf and every ancestor (htb_charge_class). `row` is the row
    /// the packet was found in: classes at or above the lender pay rate tokens, classes below it
    /// borrowed; everybody pays ceil tokens. The wait queue is touched only on a mode change.
    fn charge(&mut self, leaf: u32, row: u32, pkt: &Packet, now: u64) {
        let segs = pkt.gso_segs.max(1) as u64;
        let mut c = leaf;
        while c != NONE {
            let cl = &mut self.classes[c as usize];
            let plan = self.plans.get(cl.plan);
            let d = now.saturating_sub(cl.t_c);
            let bytes = plan.wire.packet_cost(pkt) as i64;
            let (lender, at_or_above) = if row == 0 {
                (cl.is_leaf(), true)
            } else {
                let depth = cl.depth as u32;
                (!cl.is_leaf() && depth + 1 == row, !cl.is_leaf() && depth < row)
            };
            if at_or_above {
                cl.tokens = plan.rate.account(cl.tokens, d, bytes * plan.rate.per_byte as i64);
                if lender {
                    cl.lends = cl.lends.wrapping_add(1);
                }
            } else {
                cl.tokens = plan.rate.refill(cl.tokens, d);
                cl.borrows = cl.borrows.wrapping_add(1);
            }
            cl.ctokens = plan.ceil.account(cl.ctokens, d, bytes * plan.ceil.per_byte as i64);
            cl.t_c = now;
            cl.bytes += pkt.len as u64;
            let (mode, wait) = if cl.ctokens < 0 {
                (HtbMode::CantSend, plan.ceil.wait_ns(cl.ctokens))
            } else if cl.tokens < 0 {
                (HtbMode::MayBorrow, plan.rate.wait_ns(cl.tokens))
            } else {
                (HtbMode::CanSend, 0)
            };
            let (old, parent) = (cl.mode, cl.parent);
            // The leaf counts in its queue slot, which this packet touched already.
            if c == leaf {
                let wraps = self.leaves.count_sent(c, segs as u32);
                if wraps != 0 {
                    self.cold[c as usize].packets += wraps << 32;
                }
            } else {
                self.cold[c as usize].packets += segs;
            }
            if mode != old {
                self.set_mode(c, mode, wait, now);
            }
            c = parent;
        }
    }

    // ---- dequeue ------------------------------------------------------------------------------

    /// The list a class sits in at `prio` while active: its row if it can send, else its
    /// parent's feed.
    fn container(&self, c: u32) -> ListRef {
        if self.classes[c as usize].mode == HtbMode::CanSend {
            ListRef::Row(self.row_of(c))
        } else {
            ListRef::Feed(self.classes[c as usize].parent)
        }
    }

    /// Finds the leaf to serve in row `row` at `prio`, walking the DRR cursors down the feeds
    /// (htb_lookup_leaf). A feed whose cursor ran past its end is rewound and the cursor of the
    /// list above moves on, which makes the round robin nest correctly.
    fn lookup_leaf(&mut self, row: u32, prio: usize) -> u32 {
        let mut cur = ListRef::Row(row);
        let bound = 4 * (self.rows.len() + 4);
        for _ in 0..bound {
            let l = self.list_mut(cur, prio);
            if l.is_empty() {
                return NONE;
            }
            // The cursor is being used: an interrupted class lost its claim (kernel: pid = 0).
            l.resume = NONE;
            if l.cursor == NONE {
                l.cursor = l.first();
                if let ListRef::Feed(owner) = cur {
                    let up = self.container(owner);
                    let ul = self.list_mut(up, prio);
                    if ul.cursor == NONE {
                        return NONE;
                    }
                    ul.advance();
                    cur = up;
                }
            } else {
                let cursor = l.cursor;
                let c = self.member(cur, cursor);
                if self.classes[c as usize].is_leaf() {
                    return c;
                }
                cur = ListRef::Feed(c);
            }
        }
        NONE
    }

    /// The list a leaf served from row `row` sits in.
    fn leaf_list(&self, c: u32, row: u32) -> ListRef {
        if row > 0 {
            ListRef::Feed(self.classes[c as usize].parent)
        } else {
            ListRef::Row(0)
        }
    }

    /// Dequeues from the best leaf of row `row` at `prio` (htb_dequeue_tree). Every pass of
    /// the loop either sends or takes a leaf out of the row, so it ends.
    fn dequeue_tree(&mut self, prio: usize, row: u32, now: Time) -> Option<Packet> {
        let mut c = self.lookup_leaf(row, prio);
        let pkt = loop {
            if c == NONE {
                return None;
            }
            if self.leaves.qlen(c) == 0 {
                // Emptied behind our back (the leaf qdisc dropped or was grafted).
                self.deactivate(c);
            } else {
                let got = self.leaves.pop(c, now);
                self.drain_child_drops(c);
                if let Some(p) = got {
                    break p;
                }
                self.park(c, now);
            }
            if self.row_mask[row as usize] & (1 << prio) == 0 {
                return None;
            }
            c = self.lookup_leaf(row, prio);
        };
        let quantum = self.plans.get(self.classes[c as usize].plan).quantum.min(i32::MAX as u32) as i32;
        let deficit = self.leaves.deficit(c, row);
        *deficit = deficit.saturating_sub(pkt.len.min(i32::MAX as u32) as i32);
        if *deficit < 0 {
            *deficit = deficit.saturating_add(quantum);
            let l = self.leaf_list(c, row);
            self.list_mut(l, prio).advance();
        }
        if self.leaves.qlen(c) == 0 {
            self.deactivate(c);
        }
        self.charge(c, row, &pkt, now.as_nanos());
        Some(pkt)
    }

    /// Takes the next shaped packet (everything but the direct queue), without touching the
    /// qdisc-level counters.
    pub(super) fn dequeue_shaped(&mut self, now: Time) -> Option<Packet> {
        let n = now.as_nanos();
        self.unpark_due(n);
        self.run_events(n);
        // Leaves first, then inner rows from the deepest up: the kernel's level order.
        let rows = self.rows.len() as u32;
        for r in std::iter::once(0).chain((1..rows).rev()) {
            let mut m = self.row_mask[r as usize];
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= m - 1;
                if let Some(p) = self.dequeue_tree(prio, r, now) {
                    return Some(p);
                }
            }
        }
        None
    }

    /// Takes a leaf whose qdisc holds packets but sends none now (a shaper of its own, such as
    /// a nested HTB or TBF) out of the rows until the time it names, instead of polling it at
    /// every dequeue as the kernel does. A packet enqueued to it brings it back early.
    fn park(&mut self, c: u32, now: Time) {
        self.deactivate(c);
        if self.leaves.qlen(c) > 0 {
            let t = self.leaves.next_event(c, now).unwrap_or(now).max(now + Span::from_nanos(1));
            self.classes[c as usize].set_flag(PARKED, true);
            self.child_wake.push(std::cmp::Reverse((t.as_nanos(), c)));
        }
    }

    /// Brings back the parked leaves whose time has come.
    fn unpark_due(&mut self, now: u64) {
        while let Some(&std::cmp::Reverse((t, c))) = self.child_wake.peek() {
            if t > now {
                break;
            }
            self.child_wake.pop();
            self.unpark(c);
        }
    }

    /// Ends a leaf's parking (no-op for a class that is not parked, e.g. a stale entry).
    #[inline]
    pub(super) fn unpark(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if cl.is_parked() {
            cl.set_flag(PARKED, false);
            if cl.is_leaf() && self.leaves.qlen(c) > 0 {
                self.activate(c);
            }
        }
    }

    /// Moves drops that a leaf's qdisc made on its own into our counters and drop queue.
    #[inline]
    pub(super) fn drain_child_drops(&mut self, c: u32) {
        if !self.leaves.is_boxed(c) {
            return; // the inline pfifo only refuses at enqueue
        }
        while let Some(d) = self.leaves.take_dropped(c) {
            self.cold[c as usize].drops = self.cold[c as usize].drops.wrapping_add(1);
            self.stats.on_drop_queued(&d.pkt);
            self.dropped.push_back(d);
        }
    }

    /// Flushes a leaf's queue (class deleted, turned into an inner class, or regrafted).
    pub(super) fn flush_leaf(&mut self, c: u32) -> Vec<Packet> {
        self.deactivate(c);
        self.classes[c as usize].set_flag(PARKED, false);
        let pkts = self.leaves.flush(c);
        for p in &pkts {
            self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(p.len as u64);
            self.stats.qlen = self.stats.qlen.saturating_sub(1);
        }
        pkts
    }
}
