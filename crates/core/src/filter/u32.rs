//! The u32 classifier (kernel `cls_u32.c`, tc-u32(8)): 32-bit value/mask matches on the frame's
//! bytes, organised in hash tables that filters can `link` to.
//!
//! Handles are `htid:bucket:node` (12:8:12 bits). Each u32 filter priority owns a root table
//! (`800:`, `801:`, ... with divisor 1); tables made with `handle X: u32 divisor N` and every
//! node live in one [`U32Block`] per attachment point, shared by all u32 priorities there, as
//! in the kernel. Offsets are relative to the network header. A key at `nexthdr+N` is relative
//! to the offset computed by an `offset` clause of the filter that linked here (zero at the
//! root, as in the kernel: `match tcp dport` only works below such a link).
//!
//! Classification walks a table's bucket in node order. A node whose keys all match either
//! descends into its linked table (choosing the bucket by `hashkey`), or, if it has a class or
//! actions, ends the walk. When a linked table yields nothing the walk comes back and the linking
//! node itself may end it. Nesting is bounded (8 levels). Reading past the end of the frame ends
//! the whole walk without a match, as the kernel does.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::handle::Handle;
use crate::time::Time;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Maximum nesting of linked tables (kernel `TC_U32_MAXDEPTH`).
pub const MAX_DEPTH: usize = 8;
/// Maximum keys in one selector (iproute2's limit).
pub const MAX_KEYS: usize = 128;

/// The hash-table part (upper 12 bits) of a u32 handle.
pub const fn htid_of(handle: u32) -> u32 {
    handle & 0xFFF0_0000
}
/// The bucket part (middle 8 bits) of a u32 handle.
pub const fn bucket_of(handle: u32) -> u32 {
    (handle >> 12) & 0xFF
}
/// The node part (lower 12 bits) of a u32 handle.
pub const fn node_of(handle: u32) -> u32 {
    handle & 0xFFF
}
/// Formats a u32 handle as tc does: `800:`, `800::800`, `1:40:800`.
pub fn format_handle(handle: u32) -> String {
    let (h, b, n) = (htid_of(handle) >> 20, bucket_of(handle), node_of(handle));
    match (b, n) {
        (0, 0) => format!("{h:x}:"),
        (b, 0) => format!("{h:x}:{b:x}:"),
        (0, n) => format!("{h:x}::{n:x}"),
        (b, n) => format!("{h:x}:{b:x}:{n:x}"),
    }
}

/// The bucket that tc's `sample` keyword computes for a value and mask: the masked value shifted
/// down to the mask's lowest set bit, modulo the divisor (iproute2 `f_u32.c`). With the same
/// mask as the linking filter's `hashkey`, it is the bucket the kernel will look in.
pub fn sample_bucket(val: u32, mask: u32, divisor: u32) -> u32 {
    let shift = if mask == 0 { 0 } else { mask.trailing_zeros() };
    ((val & mask) >> shift) % divisor.max(1)
}

/// One 32-bit match: `(word_at(off) ^ val) & mask == 0`, with `val` and `mask` in the byte order
/// of the frame read as a big-endian word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct U32Key {
    /// Value (already masked).
    pub val: u32,
    /// Mask.
    pub mask: u32,
    /// Byte offset, a multiple of 4; may be negative (into the link-layer header).
    pub off: i32,
    /// `at nexthdr+off`: relative to the offset computed by the linking filter.
    pub nexthdr: bool,
}

impl fmt::Display for U32Key {
    /// `match 7f000001/ffffffff at 12`, `match 00160000/ffff0000 at nexthdr+0` (tc's format).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "match {:08x}/{:08x} at {}{}",
            self.val,
            self.mask,
            if self.nexthdr { "nexthdr+" } else { "" },
            self.off
        )
    }
}

/// The variable part of an `offset` clause: `at OFF mask M shift S` reads a 16-bit word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarOffset {
    /// Where to read the 16-bit word, relative to the current header.
    pub at: i16,
    /// Mask on the word.
    pub mask: u16,
    /// Right shift after masking.
    pub shift: u8,
}

/// `offset [plus P] [at OFF mask M shift S] [eat]`: how a linking filter moves the header offset
/// for the table below. The result is rounded up to a multiple of 4, as in the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct U32Offset {
    /// `plus P`.
    pub plus: Option<i16>,
    /// `at OFF mask M shift S`.
    pub var: Option<VarOffset>,
    /// `eat`: move the base offset itself (keys below use plain offsets) instead of `nexthdr`.
    pub eat: bool,
}

/// `hashkey mask M at OFF`: which bits choose the bucket of the linked table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashKey {
    /// Mask on the 32-bit word.
    pub mask: u32,
    /// Offset of the word, relative to the current header.
    pub at: i32,
}

impl fmt::Display for HashKey {
    /// `hash mask 0000ff00 at 12` (tc's format).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hash mask {:08x} at {}", self.mask, self.at)
    }
}

impl fmt::Display for U32Offset {
    /// `offset 0f00>>6 at 0 plus 4 eat` (tc's format, parts present only when set).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("offset")?;
        if let Some(v) = self.var {
            write!(f, " {:04x}>>{} at {}", v.mask, v.shift, v.at)?;
        }
        if let Some(p) = self.plus {
            write!(f, " plus {p}")?;
        }
        if self.eat {
            f.write_str(" eat")?;
        }
        Ok(())
    }
}

/// A u32 selector: the keys (all must match) and the link options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct U32Selector {
    /// The keys, in order.
    pub keys: Vec<U32Key>,
    /// The `offset` clause.
    pub offset: Option<U32Offset>,
    /// The `hashkey` clause.
    pub hashkey: Option<HashKey>,
}

fn prefix_mask(bits: u8) -> u32 {
    match bits {
        0 => 0,
        b if b >= 32 => u32::MAX,
        b => u32::MAX << (32 - b),
    }
}

/// Defines `pub fn NAME(&mut self, val, mask)` for each `NAME: u8|u16 at [nexthdr +] OFF;` row:
/// the one builder behind tc's fixed-offset shorthands, each shorthand a row of the table.
macro_rules! field_shorthands {
    (@add u8) => { U32Selector::add_u8 };
    (@add u16) => { U32Selector::add_u16 };
    (@nexthdr) => { false };
    (@nexthdr nexthdr) => { true };
    ($($(#[$doc:meta])* $name:ident: $ty:ident at $($nh:ident +)? $off:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&mut self, val: $ty, mask: $ty) -> Result<(), FilterError> {
                field_shorthands!(@add $ty)(self, val, mask, $off, field_shorthands!(@nexthdr $($nh)?))
            }
        )*
    };
}

impl U32Selector {
    /// An empty selector (matches everything).
    pub fn new() -> U32Selector {
        U32Selector::default()
    }

    /// Adds a 32-bit key, merging it with an existing key at the same offset as iproute2 does
    /// (`pack_key`). Conflicting bits or an unaligned offset are an error.
    pub fn add_u32(&mut self, val: u32, mask: u32, off: i32, nexthdr: bool) -> Result<(), FilterError> {
        let val = val & mask;
        if let Some(k) = self.keys.iter_mut().find(|k| k.off == off && k.nexthdr == nexthdr) {
            if (val ^ k.val) & mask & k.mask != 0 {
                return Err(FilterError::invalid(
                    "u32",
                    "match",
                    format!("conflicts with an earlier match at offset {off}"),
                ));
            }
            k.val |= val;
            k.mask |= mask;
            return Ok(());
        }
        if off % 4 != 0 {
            return Err(FilterError::invalid(
                "u32",
                "match",
                format!("u32 offset {off} is not a multiple of 4"),
            ));
        }
        if self.keys.len() >= MAX_KEYS {
            return Err(FilterError::invalid("u32", "match", format!("more than {MAX_KEYS} keys")));
        }
        self.keys.push(U32Key { val, mask, off, nexthdr });
        Ok(())
    }

    /// `match u16 VAL MASK at OFF` (OFF must be even).
    pub fn add_u16(&mut self, val: u16, mask: u16, off: i32, nexthdr: bool) -> Result<(), FilterError> {
        if off % 2 != 0 {
            return Err(FilterError::invalid(
                "u32",
                "match u16",
                format!("offset {off} is not a multiple of 2"),
            ));
        }
        let shift = if off & 3 == 0 { 16 } else { 0 };
        self.add_u32((val as u32) << shift, (mask as u32) << shift, off & !3, nexthdr)
    }

    /// `match u8 VAL MASK at OFF`.
    pub fn add_u8(&mut self, val: u8, mask: u8, off: i32, nexthdr: bool) -> Result<(), FilterError> {
        let shift = 8 * (3 - (off & 3)) as u32;
        self.add_u32((val as u32) << shift, (mask as u32) << shift, off & !3, nexthdr)
    }

    /// `match ip src A.B.C.D/LEN`.
    pub fn ip_src(&mut self, addr: Ipv4Addr, len: u8) -> Result<(), FilterError> {
        self.add_u32(u32::from(addr), prefix_mask(len), 12, false)
    }
    /// `match ip dst A.B.C.D/LEN`.
    pub fn ip_dst(&mut self, addr: Ipv4Addr, len: u8) -> Result<(), FilterError> {
        self.add_u32(u32::from(addr), prefix_mask(len), 16, false)
    }
    /// `match ip6 src ADDR/LEN` (one key per 32-bit word the prefix covers).
    pub fn ip6_src(&mut self, addr: Ipv6Addr, len: u8) -> Result<(), FilterError> {
        self.ip6_addr(addr, len, 8)
    }
    /// `match ip6 dst ADDR/LEN`.
    pub fn ip6_dst(&mut self, addr: Ipv6Addr, len: u8) -> Result<(), FilterError> {
        self.ip6_addr(addr, len, 24)
    }
    fn ip6_addr(&mut self, addr: Ipv6Addr, len: u8, base: i32) -> Result<(), FilterError> {
        let o = addr.octets();
        for i in 0..4usize {
            let bits = (len as i32 - 32 * i as i32).clamp(0, 32) as u8;
            if bits == 0 {
                break;
            }
            let w = u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]);
            self.add_u32(w, prefix_mask(bits), base + 4 * i as i32, false)?;
        }
        Ok(())
    }
    /// `match ip6 priority|dsfield VAL MASK`: the traffic class, bits 20..27 of the first word.
    pub fn ip6_priority(&mut self, val: u8, mask: u8) -> Result<(), FilterError> {
        self.add_u32((val as u32) << 20, (mask as u32) << 20, 0, false)
    }
    /// `match ip6 flowlabel VAL MASK`.
    pub fn ip6_flowlabel(&mut self, val: u32, mask: u32) -> Result<(), FilterError> {
        self.add_u32(val & 0x000F_FFFF, mask & 0x000F_FFFF, 0, false)
    }

    field_shorthands! {
        /// `match ip tos|dsfield|precedence VAL MASK`.
        ip_tos: u8 at 1;
        /// `match ip protocol VAL MASK`.
        ip_protocol: u8 at 9;
        /// `match ip sport VAL MASK` (fixed offset 20: assumes no IP options, as tc does).
        ip_sport: u16 at 20;
        /// `match ip dport VAL MASK` (fixed offset 22).
        ip_dport: u16 at 22;
        /// `match ip icmp_type VAL MASK` (offset 20).
        ip_icmp_type: u8 at 20;
        /// `match ip icmp_code VAL MASK` (offset 21).
        ip_icmp_code: u8 at 21;
        /// `match ip6 protocol VAL MASK` (next header at offset 6).
        ip6_protocol: u8 at 6;
        /// `match ip6 sport VAL MASK` (offset 40: assumes no extension headers).
        ip6_sport: u16 at 40;
        /// `match ip6 dport VAL MASK` (offset 42).
        ip6_dport: u16 at 42;
        /// `match tcp|udp src VAL MASK` (`at nexthdr+0`).
        l4_src: u16 at nexthdr + 0;
        /// `match tcp|udp dst VAL MASK` (`at nexthdr+2`).
        l4_dst: u16 at nexthdr + 2;
        /// `match icmp type VAL MASK` (`at nexthdr+0`).
        icmp_type: u8 at nexthdr + 0;
        /// `match icmp code VAL MASK` (`at nexthdr+1`).
        icmp_code: u8 at nexthdr + 1;
    }

    /// The usual IPv4 link to a table of transport matches: `offset at 0 mask 0x0f00 shift 6`
    /// (header length × 4), so that `nexthdr+N` lands in the transport header.
    pub fn ipv4_nexthdr_offset(&mut self, eat: bool) {
        self.offset =
            Some(U32Offset { plus: None, var: Some(VarOffset { at: 0, mask: 0x0F00, shift: 6 }), eat });
    }
}

/// What a u32 filter element is configured with (`tc filter add ... u32 ...`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct U32Config {
    /// `ht HTID:[BUCKET:]`: the table and bucket to insert into, as a u32 handle; `None` is the
    /// root table of this priority.
    pub ht: Option<u32>,
    /// `order N`: the node id (otherwise the handle's node bits, or the next free id from 0x800).
    pub order: Option<u32>,
    /// `divisor N`: make a hash table (with `handle X:`, or a fresh id) instead of a node.
    pub divisor: Option<u32>,
    /// The selector.
    pub sel: U32Selector,
    /// `link HTID:`.
    pub link: Option<u32>,
    /// `classid`/`flowid`.
    pub classid: Option<Handle>,
    /// Actions (`action ...`, `police ...`).
    pub actions: Actions,
    /// `indev`: the input interface index the packet must have come from.
    pub indev: Option<u32>,
    /// `mark VAL MASK`: `(pkt.mark & MASK) == VAL`.
    pub mark: Option<(u32, u32)>,
}

/// A filter node in a hash table bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U32Node {
    /// Full handle `htid:bucket:node`.
    pub handle: u32,
    /// Keys and link options.
    pub sel: U32Selector,
    /// Linked table (its htid).
    pub link: Option<u32>,
    /// Result class.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
    /// Required input interface.
    pub indev: Option<u32>,
    /// Mark match.
    pub mark: Option<(u32, u32)>,
    /// Packets for which this node ended the walk with a verdict (tc's `success`).
    pub hits: u64,
}

impl U32Node {
    /// The head of its `tc filter show` line, after `chain N `:
    /// `fh 800::800 order 2048 key ht 800 bkt 0 [link 43:] [flowid 1:1]`.
    pub fn show_head(&self) -> String {
        let mut s = format!(
            "fh {} order {} key ht {:x} bkt {:x}",
            format_handle(self.handle),
            node_of(self.handle),
            htid_of(self.handle) >> 20,
            bucket_of(self.handle)
        );
        if let Some(l) = self.link {
            s.push_str(&format!(" link {}", format_handle(l)));
        }
        if let Some(c) = self.classid {
            s.push_str(&format!(" flowid {c}"));
        }
        s
    }

    /// A node ends the walk when it has a class or actions (tc sets `TC_U32_TERMINAL`).
    pub fn is_terminal(&self) -> bool {
        self.classid.is_some() || !self.actions.is_empty()
    }
}

/// A u32 hash table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U32Table {
    /// Its handle (`htid:` form, bucket and node bits zero).
    pub htid: u32,
    /// Number of buckets, 1..=256.
    pub divisor: u32,
    /// The filter priority that owns it (for listing).
    pub pref: u16,
    /// True for a priority's root table.
    pub is_root: bool,
    /// Nodes per bucket, sorted by node id.
    pub buckets: Vec<Vec<U32Node>>,
}

/// All u32 tables and nodes of one attachment point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct U32Block {
    tables: Vec<U32Table>,
}

#[derive(Clone, Copy)]
struct Frame {
    table: usize,
    bucket: usize,
    node: usize,
    off: i64,
}

fn read_be32(frame: &[u8], pos: i64) -> Option<u32> {
    let p = usize::try_from(pos).ok()?;
    let b = frame.get(p..p.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn read_be16(frame: &[u8], pos: i64) -> Option<u16> {
    let p = usize::try_from(pos).ok()?;
    let b = frame.get(p..p.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

impl U32Block {
    /// The tables, in creation order.
    pub fn tables(&self) -> &[U32Table] {
        &self.tables
    }

    /// The table with this htid.
    pub fn table(&self, htid: u32) -> Option<&U32Table> {
        self.tables.iter().find(|t| t.htid == htid_of(htid))
    }

    fn index(&self, htid: u32) -> Option<usize> {
        self.tables.iter().position(|t| t.htid == htid_of(htid))
    }

    /// True when no table exists.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Creates the root table of a new u32 priority (`800:`, then the next free id).
    pub fn new_root(&mut self, pref: u16) -> Result<u32, FilterError> {
        let htid = self.free_htid()?;
        self.tables.push(U32Table { htid, divisor: 1, pref, is_root: true, buckets: vec![Vec::new()] });
        Ok(htid)
    }

    fn free_htid(&self) -> Result<u32, FilterError> {
        (0x800u32..=0xFFF)
            .map(|id| id << 20)
            .find(|h| self.index(*h).is_none())
            .ok_or_else(|| FilterError::invalid("u32", "handle", "no free hash table id"))
    }

    /// Removes a priority's root table; when `last` (no u32 priority left) removes every table.
    pub fn remove_root(&mut self, htid: u32, last: bool) {
        if last {
            self.tables.clear();
        } else {
            self.tables.retain(|t| t.htid != htid);
        }
    }

    /// True if any node has this class as its result.
    pub fn references_class(&self, class: Handle) -> bool {
        self.nodes().any(|n| n.classid == Some(class))
    }

    /// Every node, table by table.
    pub fn nodes(&self) -> impl Iterator<Item = &U32Node> {
        self.tables.iter().flat_map(|t| t.buckets.iter().flatten())
    }

    /// Finds a node by handle.
    pub fn node(&self, handle: u32) -> Option<&U32Node> {
        let t = self.table(handle)?;
        t.buckets.get(bucket_of(handle) as usize)?.iter().find(|n| n.handle == handle)
    }

    /// Adds, replaces or changes one element (table or node) for the priority whose root is
    /// `root`. Returns the element's handle. `replace`: an existing handle is overwritten;
    /// `must_exist`: it must exist (tc `change`).
    pub fn apply(
        &mut self,
        root: u32,
        pref: u16,
        handle: Option<u32>,
        cfg: U32Config,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        let handle = handle.filter(|h| *h != 0);
        if let Some(div) = cfg.divisor {
            return self.make_table(handle, div, pref, replace || must_exist);
        }
        // Choose the table and bucket.
        let target = cfg.ht.unwrap_or(root);
        let ti =
            if htid_of(target) == 0 { self.index(root) } else { self.index(target) }.ok_or_else(|| {
                FilterError::NotFound(format!("u32: hash table {} not found", format_handle(htid_of(target))))
            })?;
        let htid = self.tables[ti].htid;
        let bucket = bucket_of(target);
        if bucket >= self.tables[ti].divisor {
            return Err(FilterError::invalid(
                "u32",
                "ht",
                format!(
                    "bucket {bucket:x} exceeds the divisor {} of table {}",
                    self.tables[ti].divisor,
                    format_handle(htid)
                ),
            ));
        }
        let mut node_id = cfg.order.unwrap_or(0);
        if node_id > 0xFFF {
            return Err(FilterError::invalid("u32", "order", format!("{node_id} exceeds 0xfff")));
        }
        if let Some(h) = handle {
            if htid_of(h) != 0 && htid_of(h) != htid {
                return Err(FilterError::invalid("u32", "handle", "handle's hash table differs from \"ht\""));
            }
            if htid_of(h) != 0 && bucket_of(h) != 0 && bucket_of(h) != bucket && cfg.ht.is_some() {
                return Err(FilterError::invalid("u32", "handle", "handle's bucket differs from \"ht\""));
            }
            if node_of(h) != 0 {
                if node_id != 0 && node_id != node_of(h) {
                    return Err(FilterError::invalid("u32", "order", "differs from the handle's node id"));
                }
                node_id = node_of(h);
            }
        }
        // The bucket comes from `ht`, else from the handle.
        let bucket = if cfg.ht.is_none() { handle.map(bucket_of).unwrap_or(0) } else { bucket };
        if bucket >= self.tables[ti].divisor {
            return Err(FilterError::invalid(
                "u32",
                "handle",
                format!("bucket {bucket:x} exceeds the divisor"),
            ));
        }
        if let Some(l) = cfg.link {
            if htid_of(l) != l {
                return Err(FilterError::invalid("u32", "link", "link handle must be a hash table (X:)"));
            }
            let li = self.index(l).ok_or_else(|| {
                FilterError::NotFound(format!("u32: link hash table {} not found", format_handle(l)))
            })?;
            if self.tables[li].is_root {
                return Err(FilterError::invalid("u32", "link", "cannot link to a root table"));
            }
        }
        if let Some(hk) = cfg.sel.hashkey {
            if hk.at % 4 != 0 {
                return Err(FilterError::invalid("u32", "hashkey", "offset must be a multiple of 4"));
            }
        }
        let existing = if node_id != 0 {
            self.tables.iter().enumerate().find_map(|(i, t)| {
                if t.htid != htid {
                    return None;
                }
                t.buckets
                    .iter()
                    .enumerate()
                    .find_map(|(b, v)| v.iter().position(|n| node_of(n.handle) == node_id).map(|p| (i, b, p)))
            })
        } else {
            None
        };
        let make = |handle: u32, hits: u64| U32Node {
            handle,
            sel: cfg.sel.clone(),
            link: cfg.link,
            classid: cfg.classid,
            actions: cfg.actions.clone(),
            indev: cfg.indev,
            mark: cfg.mark,
            hits,
        };
        match existing {
            Some((i, b, p)) => {
                if !replace && !must_exist {
                    return Err(FilterError::Exists(format!(
                        "u32 filter {} already exists",
                        format_handle(self.tables[i].buckets[b][p].handle)
                    )));
                }
                if b as u32 != bucket {
                    return Err(FilterError::invalid("u32", "ht", "cannot move a filter to another bucket"));
                }
                let old = &mut self.tables[i].buckets[b][p];
                let h = old.handle;
                *old = make(h, old.hits);
                Ok(h)
            }
            None => {
                if must_exist {
                    return Err(FilterError::NotFound("u32: no filter with that handle to change".into()));
                }
                if node_id == 0 {
                    node_id = (0x800..=0xFFF)
                        .find(|id| self.tables[ti].buckets.iter().flatten().all(|n| node_of(n.handle) != *id))
                        .ok_or_else(|| {
                            FilterError::invalid("u32", "handle", "no free node id in the table")
                        })?;
                }
                let h = htid | (bucket << 12) | node_id;
                let v = &mut self.tables[ti].buckets[bucket as usize];
                let pos = v.partition_point(|n| node_of(n.handle) < node_id);
                v.insert(pos, make(h, 0));
                Ok(h)
            }
        }
    }

    fn make_table(
        &mut self,
        handle: Option<u32>,
        divisor: u32,
        pref: u16,
        replace: bool,
    ) -> Result<u32, FilterError> {
        if divisor == 0 || divisor > 256 {
            return Err(FilterError::invalid("u32", "divisor", format!("{divisor}: must be 1..256")));
        }
        let htid = match handle {
            Some(h) if htid_of(h) != h => {
                return Err(FilterError::invalid(
                    "u32",
                    "handle",
                    format!("{}: a divisor needs a hash table handle (X:)", format_handle(h)),
                ))
            }
            Some(h) => h,
            None => self.free_htid()?,
        };
        if self.index(htid).is_some() {
            let what = if replace { "cannot change an existing hash table" } else { "already exists" };
            return Err(FilterError::Exists(format!("u32 hash table {}: {what}", format_handle(htid))));
        }
        self.tables.push(U32Table {
            htid,
            divisor,
            pref,
            is_root: false,
            buckets: vec![Vec::new(); divisor as usize],
        });
        Ok(htid)
    }

    /// Deletes a node, or a (non-root) table that nothing links to.
    pub fn delete(&mut self, handle: u32) -> Result<(), FilterError> {
        if node_of(handle) == 0 && bucket_of(handle) == 0 {
            let i = self
                .index(handle)
                .ok_or_else(|| FilterError::NotFound(format!("u32 table {}", format_handle(handle))))?;
            if self.tables[i].is_root {
                return Err(FilterError::Busy(
                    "u32: a root table goes with its priority; delete the priority".into(),
                ));
            }
            if self.nodes().any(|n| n.link == Some(handle)) {
                return Err(FilterError::Busy(format!("u32 table {} is linked to", format_handle(handle))));
            }
            self.tables.remove(i);
            return Ok(());
        }
        let not_found = || FilterError::NotFound(format!("u32 filter {}", format_handle(handle)));
        let i = self.index(handle).ok_or_else(not_found)?;
        let v = self.tables[i].buckets.get_mut(bucket_of(handle) as usize).ok_or_else(not_found)?;
        let p = v.iter().position(|n| n.handle == handle).ok_or_else(not_found)?;
        v.remove(p);
        Ok(())
    }

    /// Classifies starting at the root table `root`. Returns the verdict and class of the node
    /// that ended the walk, or `None`.
    pub fn classify(&mut self, root: u32, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        let frame = input.frame;
        let flen = frame.len() as i64;
        let mut stack = [Frame { table: 0, bucket: 0, node: 0, off: 0 }; MAX_DEPTH];
        let mut depth = 0usize;
        let mut cur =
            Frame { table: self.index(root)?, bucket: 0, node: 0, off: input.keys.network_offset as i64 };
        let mut off2: i64 = 0;
        loop {
            let node_count = self.tables[cur.table].buckets[cur.bucket].len();
            if cur.node >= node_count {
                // Bucket exhausted: go back to the linking node, which may end the walk itself.
                if depth == 0 {
                    return None;
                }
                depth -= 1;
                cur = stack[depth];
                if let Some(r) = self.terminal(&mut cur, input, now) {
                    return Some(r);
                }
                continue;
            }
            let n = &self.tables[cur.table].buckets[cur.bucket][cur.node];
            if let Some((val, mask)) = n.mark {
                if input.mark() & mask != val {
                    cur.node += 1;
                    continue;
                }
            }
            let mut matched = true;
            for k in &n.sel.keys {
                let toff = cur.off + k.off as i64 + if k.nexthdr { off2 } else { 0 };
                let word = read_be32(frame, toff)?; // past the end: the whole walk fails
                if (word ^ k.val) & k.mask != 0 {
                    matched = false;
                    break;
                }
            }
            if !matched {
                cur.node += 1;
                continue;
            }
            let Some(down) = n.link.and_then(|l| self.index(l)) else {
                if let Some(r) = self.terminal(&mut cur, input, now) {
                    return Some(r);
                }
                continue;
            };
            if depth >= MAX_DEPTH {
                return None; // kernel: "u32: dead loop"
            }
            stack[depth] = cur;
            depth += 1;
            let divisor = self.tables[down].divisor;
            let mut bucket = 0;
            if divisor > 1 {
                let hk = n.sel.hashkey.unwrap_or(HashKey { mask: 0, at: 0 });
                let word = read_be32(frame, cur.off + hk.at as i64)?;
                let shift = if hk.mask == 0 { 0 } else { hk.mask.trailing_zeros() };
                bucket = (((word & hk.mask) >> shift) & (divisor - 1)) as usize;
            }
            let mut off = cur.off;
            if let Some(o) = n.sel.offset {
                if o.plus.is_some() || o.var.is_some() {
                    off2 = o.plus.unwrap_or(0) as i64 + 3;
                    if let Some(v) = o.var {
                        let w = read_be16(frame, off + v.at as i64)?;
                        off2 += ((w & v.mask) >> v.shift.min(15)) as i64;
                    }
                    off2 &= !3;
                }
                if o.eat {
                    off += off2;
                    off2 = 0;
                }
                if off >= flen {
                    // Nothing left to look at: come back to the linking node.
                    depth -= 1;
                    if let Some(r) = self.terminal(&mut cur, input, now) {
                        return Some(r);
                    }
                    continue;
                }
            }
            cur =
                Frame { table: down, bucket: bucket.min(self.tables[down].buckets.len() - 1), node: 0, off };
        }
    }

    /// The node at `cur` matched: if terminal, run its actions. Returns the result, or advances
    /// `cur` to the next node.
    fn terminal(
        &mut self,
        cur: &mut Frame,
        input: &ClassifyInput<'_>,
        now: Time,
    ) -> Option<(Verdict, Handle)> {
        let n = &mut self.tables[cur.table].buckets[cur.bucket][cur.node];
        if n.is_terminal() && n.indev.is_none_or(|i| i == input.keys.iif) {
            let v = n.actions.run(input, now);
            if v != Verdict::Continue {
                n.hits += 1;
                return Some((v, n.classid.unwrap_or(Handle::UNSPEC)));
            }
        }
        cur.node += 1;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorthand_packing_matches_tc() {
        let mut s = U32Selector::new();
        s.ip_src(Ipv4Addr::new(127, 0, 0, 1), 32).unwrap();
        assert_eq!(s.keys[0].to_string(), "match 7f000001/ffffffff at 12");
        let mut s = U32Selector::new();
        s.l4_src(22, 0xFFFF).unwrap();
        assert_eq!(s.keys[0].to_string(), "match 00160000/ffff0000 at nexthdr+0");
        s.l4_dst(80, 0xFFFF).unwrap();
        assert_eq!(s.keys.len(), 1, "same word: merged");
        assert_eq!(s.keys[0].to_string(), "match 00160050/ffffffff at nexthdr+0");
        let mut s = U32Selector::new();
        s.ip_src(Ipv4Addr::new(192, 168, 0, 0), 16).unwrap();
        assert_eq!(s.keys[0].to_string(), "match c0a80000/ffff0000 at 12");
        s.ip_tos(0x10, 0xff).unwrap();
        assert_eq!(s.keys[1].to_string(), "match 00100000/00ff0000 at 0");
        s.ip_protocol(6, 0xff).unwrap();
        assert_eq!(s.keys[2].to_string(), "match 00060000/00ff0000 at 8");
        assert!(s.add_u8(17, 0xff, 9, false).is_err(), "conflicting protocol");
        assert!(s.add_u16(1, 0xffff, 3, false).is_err());
    }

    #[test]
    fn every_field_shorthand_packs_where_tc_puts_it() {
        type Add = fn(&mut U32Selector) -> Result<(), FilterError>;
        let cases: [(Add, &str); 11] = [
            (|s| s.ip_sport(80, 0xffff), "match 00500000/ffff0000 at 20"),
            (|s| s.ip_dport(80, 0xffff), "match 00000050/0000ffff at 20"),
            (|s| s.ip_icmp_type(8, 0xff), "match 08000000/ff000000 at 20"),
            (|s| s.ip_icmp_code(3, 0xff), "match 00030000/00ff0000 at 20"),
            (|s| s.ip6_protocol(6, 0xff), "match 00000600/0000ff00 at 4"),
            (|s| s.ip6_sport(80, 0xffff), "match 00500000/ffff0000 at 40"),
            (|s| s.ip6_dport(80, 0xffff), "match 00000050/0000ffff at 40"),
            (|s| s.l4_src(80, 0xffff), "match 00500000/ffff0000 at nexthdr+0"),
            (|s| s.l4_dst(80, 0xffff), "match 00000050/0000ffff at nexthdr+0"),
            (|s| s.icmp_type(8, 0xff), "match 08000000/ff000000 at nexthdr+0"),
            (|s| s.icmp_code(1, 0xff), "match 00010000/00ff0000 at nexthdr+0"),
        ];
        for (add, want) in cases {
            let mut s = U32Selector::new();
            add(&mut s).unwrap();
            assert_eq!(s.keys.len(), 1);
            assert_eq!(s.keys[0].to_string(), want);
        }
    }

    #[test]
    fn sample_buckets_as_tdc_expects() {
        for m in [0xff, 0xffff, 0xffffff, 0xffffffff, 0xff00ff, 0xff0000ff, 0xffff00ff] {
            assert_eq!(sample_bucket(0x10203040, m, 256), 0x40, "mask {m:x}");
        }
        for m in [0x70, 0xf0, 0xff0, 0xfff0, 0xff00f0] {
            assert_eq!(sample_bucket(0x10203040, m, 256), 4, "mask {m:x}");
        }
    }

    #[test]
    fn show_head_matches_tdc_patterns() {
        let mut b = U32Block::default();
        let root = b.new_root(1).unwrap();
        let mut sel = U32Selector::new();
        sel.ip_src(Ipv4Addr::new(127, 0, 0, 1), 32).unwrap();
        let cfg = U32Config { sel, classid: Some(Handle::new(1, 1)), ..Default::default() };
        let h = b.apply(root, 1, None, cfg, false, false).unwrap();
        let n = b.node(h).unwrap();
        assert_eq!(n.show_head(), "fh 800::800 order 2048 key ht 800 bkt 0 flowid 1:1");
        assert_eq!(n.sel.keys[0].to_string(), "match 7f000001/ffffffff at 12");
        assert_eq!(HashKey { mask: 0xff00, at: 12 }.to_string(), "hash mask 0000ff00 at 12");
    }

    #[test]
    fn handles_format_like_tc() {
        assert_eq!(format_handle(0x8000_0000), "800:");
        assert_eq!(format_handle(0x8000_0800), "800::800");
        assert_eq!(format_handle(0x0014_0800), "1:40:800");
        assert_eq!(format_handle(0x0430_0000), "43:");
    }

    #[test]
    fn table_and_node_rules() {
        let mut b = U32Block::default();
        let r99 = b.new_root(99).unwrap();
        assert_eq!(r99, 0x800 << 20);
        let cfg = |div| U32Config { divisor: Some(div), ..Default::default() };
        assert_eq!(b.apply(r99, 99, Some(0x042 << 20), cfg(256), false, false).unwrap(), 0x042 << 20);
        // handle 42:42 with a divisor is refused.
        assert!(b.apply(r99, 99, Some((0x042 << 20) | (0x42 << 12)), cfg(128), true, false).is_err());
        let r98 = b.new_root(98).unwrap();
        assert_eq!(r98, 0x801 << 20);
        // Unknown table, and bucket beyond the divisor.
        let node = |ht| U32Config { ht: Some(ht), classid: Some(Handle::new(1, 1)), ..Default::default() };
        assert!(matches!(
            b.apply(r98, 98, None, node(0x047 << 20 | 0x47 << 12), true, false),
            Err(FilterError::NotFound(_))
        ));
        b.apply(r99, 99, Some(0x043 << 20), cfg(1), false, false).unwrap();
        assert!(b.apply(r98, 98, None, node(0x043 << 20 | 1 << 12), true, false).is_err());
        let h = b.apply(r98, 98, None, node(0x043 << 20), false, false).unwrap();
        assert_eq!(format_handle(h), "43::800");
        assert_eq!(
            format_handle(b.apply(r98, 98, None, node(0x043 << 20), false, false).unwrap()),
            "43::801"
        );
        assert!(b.references_class(Handle::new(1, 1)));
        // A linked table cannot be deleted.
        let link = U32Config { link: Some(0x042 << 20), ..Default::default() };
        b.apply(r98, 98, None, link, false, false).unwrap();
        assert!(matches!(b.delete(0x042 << 20), Err(FilterError::Busy(_))));
        b.delete(h).unwrap();
        assert!(b.node(h).is_none());
    }
}
