//! The scheduler proper: rows and feeds, class modes, the wait queue, leaf lookup, DRR and
//! charging. It mirrors `sch_htb.c`'s algorithm (see the module docs for where it differs).

use super::class::{HtbMode, Link, List, NONE, UNITS_PER_BYTE};
use super::config::MBUFFER;
use super::Htb;
use crate::packet::Packet;
use crate::time::Time;

/// Which list: a row of self-feeding classes (row index, see [`Htb::row_of`]) or an inner
/// class's feed of borrowing children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListRef {
    Row(u32),
    Feed(u32),
}

const MBUFFER_NS: u64 = MBUFFER.as_nanos();

fn ceil_div(a: i128, b: i128) -> i128 {
    (a + b - 1) / b
}

impl Htb {
    /// Row index of a class: 0 for leaves, `1 + depth` for inner classes. The kernel's levels
    /// order the same way (leaves first, then inner classes deepest first) without a depth cap.
    pub(super) fn row_of(&self, c: u32) -> u32 {
        let cl = &self.classes[c as usize];
        if cl.leaf {
            0
        } else {
            1 + cl.depth
        }
    }

    pub(super) fn ensure_rows(&mut self, depth: u32) {
        let need = depth as usize + 2;
        if self.rows.len() < need {
            self.rows.resize(need, [List::EMPTY; 8]);
            self.row_mask.resize(need, 0);
        }
    }

    // ---- intrusive lists -------------------------------------------------------------------

    fn link(&self, c: u32, prio: usize) -> Link {
        let cl = &self.classes[c as usize];
        if cl.leaf {
            cl.link
        } else {
            self.inner(c).links[prio]
        }
    }

    fn set_link(&mut self, c: u32, prio: usize, l: Link) {
        let cl = &mut self.classes[c as usize];
        if cl.leaf {
            cl.link = l;
        } else {
            let ext = cl.ext as usize;
            self.inners[ext].as_mut().expect("inner class has inner data").links[prio] = l;
        }
    }

    pub(super) fn list(&self, r: ListRef, prio: usize) -> List {
        match r {
            ListRef::Row(row) => self.rows[row as usize][prio],
            ListRef::Feed(c) => self.inner(c).feed[prio],
        }
    }

    fn set_list(&mut self, r: ListRef, prio: usize, l: List) {
        match r {
            ListRef::Row(row) => self.rows[row as usize][prio] = l,
            ListRef::Feed(c) => {
                let ext = self.classes[c as usize].ext as usize;
                self.inners[ext].as_mut().expect("inner class has inner data").feed[prio] = l;
            }
        }
    }

    /// Inserts a class into a list at its classid position (the kernel's rbtrees are ordered by
    /// classid). The cursor stays on the class it points at, so a class inserted before it waits
    /// for the next round. If the cursor's class left a feed and the cursor has not been used since
    /// (the kernel's `last_ptr_id`), the cursor is the first class whose classid is at least the
    /// departed one's (`htb_id_find_next_upper`), which the newcomer may now be.
    fn list_push(&mut self, r: ListRef, prio: usize, c: u32) {
        let mut l = self.list(r, prio);
        let id = self.cold[c as usize].classid.0;
        let mut before = l.first;
        while before != NONE && self.cold[before as usize].classid.0 < id {
            before = self.link(before, prio).next;
        }
        if before == NONE {
            self.set_link(c, prio, Link { prev: l.last, next: NONE });
            if l.last == NONE {
                l.first = c;
            } else {
                let mut prev = self.link(l.last, prio);
                prev.next = c;
                self.set_link(l.last, prio, prev);
            }
            l.last = c;
        } else {
            let mut next = self.link(before, prio);
            self.set_link(c, prio, Link { prev: next.prev, next: before });
            if next.prev == NONE {
                l.first = c;
            } else {
                let mut prev = self.link(next.prev, prio);
                prev.next = c;
                self.set_link(next.prev, prio, prev);
            }
            next.prev = c;
            self.set_link(before, prio, next);
        }
        if l.resume != NONE
            && id >= l.resume
            && (l.cursor == NONE || id < self.cold[l.cursor as usize].classid.0)
        {
            l.cursor = c;
        }
        self.set_list(r, prio, l);
    }

    fn list_remove(&mut self, r: ListRef, prio: usize, c: u32) {
        let me = self.link(c, prio);
        let mut l = self.list(r, prio);
        if l.cursor == c {
            // The cursor moves to the next class in classid order. For a feed the kernel instead
            // forgets the pointer and remembers the classid (only the first time: its ptr is NULL
            // from then on), which [`Self::list_push`] reproduces.
            l.cursor = me.next;
            if matches!(r, ListRef::Feed(_)) && l.resume == NONE {
                l.resume = self.cold[c as usize].classid.0;
            }
        }
        if me.prev == NONE {
            l.first = me.next;
        } else {
            let mut p = self.link(me.prev, prio);
            p.next = me.next;
            self.set_link(me.prev, prio, p);
        }
        if me.next == NONE {
            l.last = me.prev;
        } else {
            let mut n = self.link(me.next, prio);
            n.prev = me.prev;
            self.set_link(me.next, prio, n);
        }
        self.set_link(c, prio, Link::EMPTY);
        self.set_list(r, prio, l);
    }

    /// Moves a list's cursor one step on (to "past the end" after the last element).
    fn advance(&mut self, r: ListRef, prio: usize) {
        let mut l = self.list(r, prio);
        if l.cursor != NONE {
            l.cursor = self.link(l.cursor, prio).next;
            self.set_list(r, prio, l);
        }
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
            if self.rows[r as usize][prio].first == NONE {
                emptied |= 1 << prio;
            }
        }
        self.row_mask[r as usize] &= !emptied;
    }

    /// Links an active class into its parent's feeds (while it borrows) or its row (when it can
    /// send), climbing as long as the ancestors borrow too.
    pub(super) fn activate_prios(&mut self, c: u32) {
        let mut cl = c;
        let mut mask = self.classes[c as usize].activity;
        let mut p = self.classes[c as usize].parent;
        while self.classes[cl as usize].mode == HtbMode::MayBorrow && p != NONE && mask != 0 {
            let mut m = mask;
            while m != 0 {
                let prio = m.trailing_zeros() as usize;
                m &= m - 1;
                if self.inner(p).feed[prio].first != NONE {
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
    pub(super) fn deactivate_prios(&mut self, c: u32) {
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
                if self.inner(p).feed[prio].first == NONE {
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
    pub(super) fn activate(&mut self, c: u32) {
        let cl = &mut self.classes[c as usize];
        if cl.activity == 0 {
            cl.aprio = cl.prio;
            cl.activity = 1 << cl.prio;
            self.activate_prios(c);
        }
    }

    /// Takes an active leaf out of scheduling.
    pub(super) fn deactivate(&mut self, c: u32) {
        if self.classes[c as usize].activity != 0 {
            self.deactivate_prios(c);
            self.classes[c as usize].activity = 0;
        }
    }

    // ---- modes and the wait queue ------------------------------------------------------------

    /// The class's mode at `now` and, unless it can send, when that changes (always > `now`).
    pub(super) fn mode_at(&self, c: u32, now: u64) -> (HtbMode, Option<u64>) {
        let cl = &self.classes[c as usize];
        let d = now.saturating_sub(cl.t_c) as i128;
        let ct = cl.ctokens + d * cl.ceil as i128;
        if ct < 0 {
            let wait = ceil_div(-ct, cl.ceil as i128);
            return (HtbMode::CantSend, Some(now.saturating_add(wait.min(u64::MAX as i128) as u64)));
        }
        let t = cl.tokens + d * cl.rate as i128;
        if t >= 0 {
            (HtbMode::CanSend, None)
        } else {
            let wait = ceil_div(-t, cl.rate as i128);
            (HtbMode::MayBorrow, Some(now.saturating_add(wait.min(u64::MAX as i128) as u64)))
        }
    }

    /// Recomputes a class's mode at `now`, relinks it if the mode changed, and (re)schedules its
    /// wake-up (htb_change_class_mode plus the wait-queue update done by its callers).
    pub(super) fn update_mode(&mut self, c: u32, now: u64) {
        let (new, wake) = self.mode_at(c, now);
        let old = self.classes[c as usize].mode;
        if new != old {
            if new == HtbMode::CantSend {
                self.cold[c as usize].overlimits += 1;
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
        match wake {
            Some(t) => self.events.set(c, t),
            None => self.events.remove(c),
        }
    }

    /// Applies every mode change due by `now` (htb_do_events, without the kernel's time budget).
    pub(super) fn run_events(&mut self, now: u64) {
        while let Some((t, c)) = self.events.peek() {
            if t > now {
                break;
            }
            self.update_mode(c, now);
        }
    }

    // ---- charging ---------------------------------------------------------------------------

    /// Charges a sent packet to the leaf and every ancestor (htb_charge_class). `row` is the row
    /// the packet was found in: classes at or above the lender pay rate tokens, classes below it
    /// borrowed; everybody pays ceil tokens.
    pub(super) fn charge(&mut self, leaf: u32, row: u32, pkt: &Packet, now: u64) {
        let mut c = leaf;
        while c != NONE {
            let cl = &mut self.classes[c as usize];
            let d = now.saturating_sub(cl.t_c) as i128;
            let cost = cl.wire.packet_cost(pkt) as i128 * UNITS_PER_BYTE;
            let (lender, at_or_above) = if row == 0 {
                (cl.leaf, true)
            } else {
                (!cl.leaf && cl.depth + 1 == row, !cl.leaf && cl.depth < row)
            };
            if at_or_above {
                cl.tokens = account(cl.tokens, d * cl.rate as i128, cl.buffer, cost, cl.rate);
            } else {
                cl.tokens = (cl.tokens + d * cl.rate as i128).min(cl.buffer);
            }
            cl.ctokens = account(cl.ctokens, d * cl.ceil as i128, cl.cbuffer, cost, cl.ceil);
            cl.t_c = now;
            let is_leaf = cl.leaf;
            let parent = cl.parent;
            let cold = &mut self.cold[c as usize];
            if at_or_above {
                if lender {
                    cold.lends += 1;
                }
            } else {
                cold.borrows += 1;
            }
            if !is_leaf {
                cold.bytes += pkt.len as u64;
                cold.packets += pkt.gso_segs.max(1) as u64;
            }
            self.update_mode(c, now);
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
            let mut l = self.list(cur, prio);
            if l.first == NONE {
                return NONE;
            }
            if l.resume != NONE {
                // The cursor is being used: the interrupted class lost its claim (kernel: pid = 0).
                l.resume = NONE;
                self.set_list(cur, prio, l);
            }
            if l.cursor == NONE {
                self.set_list(cur, prio, List { cursor: l.first, ..l });
                if let ListRef::Feed(owner) = cur {
                    let up = self.container(owner);
                    if self.list(up, prio).cursor == NONE {
                        return NONE;
                    }
                    self.advance(up, prio);
                    cur = up;
                }
            } else if self.classes[l.cursor as usize].leaf {
                return l.cursor;
            } else {
                cur = ListRef::Feed(l.cursor);
            }
        }
        NONE
    }

    /// Dequeues from the best leaf of row `row` at `prio` (htb_dequeue_tree).
    fn dequeue_tree(&mut self, prio: usize, row: u32, now: Time) -> Option<Packet> {
        let mut start = self.lookup_leaf(row, prio);
        let mut c = start;
        let pkt = loop {
            if c == NONE {
                return None;
            }
            let ext = self.classes[c as usize].ext as usize;
            if self.leaves[ext].as_ref().expect("leaf").qdisc.qlen() == 0 {
                // Emptied behind our back (the leaf qdisc dropped or was grafted).
                self.deactivate(c);
                if self.row_mask[row as usize] & (1 << prio) == 0 {
                    return None;
                }
                let next = self.lookup_leaf(row, prio);
                if c == start {
                    start = next;
                }
                c = next;
                continue;
            }
            let q = &mut self.leaves[ext].as_mut().expect("leaf").qdisc;
            let got = q.dequeue(now);
            self.drain_child_drops(c);
            if let Some(p) = got {
                break p;
            }
            // A non-work-conserving leaf qdisc: remember when it wants to run and skip it.
            let q = &self.leaves[ext].as_ref().expect("leaf").qdisc;
            if q.qlen() > 0 {
                let t = q.next_event(now).unwrap_or(now).max(now + crate::time::Span::from_nanos(1));
                self.child_wake.push(std::cmp::Reverse((t.as_nanos(), c)));
            }
            let l = if row > 0 { ListRef::Feed(self.classes[c as usize].parent) } else { ListRef::Row(0) };
            self.advance(l, prio);
            c = self.lookup_leaf(row, prio);
            if c == start {
                return None;
            }
        };
        let cold = &mut self.cold[c as usize];
        cold.bytes += pkt.len as u64;
        cold.packets += pkt.gso_segs.max(1) as u64;
        let quantum = self.classes[c as usize].quantum as i64;
        let ext = self.classes[c as usize].ext as usize;
        let leaf = self.leaves[ext].as_mut().expect("leaf");
        let slot = (row as usize).min(leaf.deficit.len() - 1);
        leaf.deficit[slot] -= pkt.len as i64;
        if leaf.deficit[slot] < 0 {
            leaf.deficit[slot] += quantum;
            let l = if row > 0 { ListRef::Feed(self.classes[c as usize].parent) } else { ListRef::Row(0) };
            self.advance(l, prio);
        }
        if self.leaves[ext].as_ref().expect("leaf").qdisc.qlen() == 0 {
            self.deactivate(c);
        }
        self.charge(c, row, &pkt, now.as_nanos());
        Some(pkt)
    }

    /// Takes the next shaped packet (everything but the direct queue), without touching the
    /// qdisc-level counters.
    pub(super) fn dequeue_shaped(&mut self, now: Time) -> Option<Packet> {
        let n = now.as_nanos();
        while let Some(std::cmp::Reverse((t, _))) = self.child_wake.peek() {
            if *t > n {
                break;
            }
            self.child_wake.pop();
        }
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

    /// Moves drops that a leaf's qdisc made on its own into our counters and drop queue.
    pub(super) fn drain_child_drops(&mut self, c: u32) {
        let ext = self.classes[c as usize].ext as usize;
        while let Some(d) = self.leaves[ext].as_mut().expect("leaf").qdisc.take_dropped() {
            self.cold[c as usize].drops += 1;
            self.stats.on_drop_queued(&d.pkt);
            self.dropped.push_back(d);
        }
    }

    /// Flushes a leaf's queue (class deleted, turned into an inner class, or regrafted).
    pub(super) fn flush_leaf(&mut self, c: u32) -> Vec<Packet> {
        self.deactivate(c);
        let ext = self.classes[c as usize].ext as usize;
        let pkts = self.leaves[ext].as_mut().expect("leaf").qdisc.reset();
        for p in &pkts {
            self.stats.backlog_bytes = self.stats.backlog_bytes.saturating_sub(p.len as u64);
            self.stats.qlen = self.stats.qlen.saturating_sub(1);
        }
        pkts
    }
}

/// The kernel's htb_accnt_tokens in exact units: earn, cap at the bucket, pay, and never owe
/// more than `mbuffer` (60 s) worth *plus the packet just charged*. The kernel's floor is 60 s
/// flat, which forgives part of a packet that alone takes longer than 60 s (64 KiB at 8 bit/s)
/// and so breaks the rate; keeping the packet's own cost keeps the long-run rate exact.
fn account(tokens: i128, earned: i128, bucket: i128, cost: i128, rate: u64) -> i128 {
    let t = (tokens + earned).min(bucket) - cost;
    let floor = MBUFFER_NS as i128 * rate as i128 + cost;
    t.max(-floor)
}
