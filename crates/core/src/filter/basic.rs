//! The basic classifier (kernel `cls_basic.c`) and the extended matches it runs (`ematch.c`,
//! `em_cmp.c`, `em_u32.c`, `em_meta.c`, `em_nbyte.c`, `em_canid.c`).
//!
//! A basic priority holds elements told apart by handle, newest first (the kernel adds each new
//! one at the head of its list); the first element whose ematch tree matches and whose actions do
//! not say `continue` decides. An element without a tree matches every packet.
//!
//! A tree is a sequence of matches joined by `and`/`or`, each possibly inverted, a match being a
//! kind with its data or a parenthesised sub-sequence. As in the kernel there is no precedence:
//! the sequence is read left to right and stops early when an `and` follows a false result or an
//! `or` follows a true one; the last result read is the answer.
//!
//! What each kind reads:
//! - `cmp`: 1, 2 or 4 bytes (big-endian; `trans` swaps them, as on a little-endian host) at an
//!   offset from the link, network or transport header, masked when a mask is set, compared.
//! - `u32`: the 32-bit word at an offset from the network header, masked, equal to the key.
//!   Under `basic` the kernel hands no packet info to the match, so `nexthdr+` adds nothing.
//! - `nbyte`: bytes equal to a needle at an offset from a layer.
//! - `meta`: packet metadata against a value or other metadata (see [`MetaId`]); ids the
//!   model has no value for fail as the kernel's do when there is no socket (`sk_*`).
//! - `canid`: CAN frames only: never matches the Ethernet frames Sluice carries.
//!
//! Nothing here allocates per packet.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::handle::Handle;
use crate::time::Time;

/// How deep parenthesised sub-sequences may nest (the kernel's `CONFIG_NET_EMATCH_STACK`).
pub const EMATCH_STACK: usize = 32;

/// How a match's result combines with the next one (`TCF_EM_REL_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The last match of its sequence.
    End,
    /// `and`.
    And,
    /// `or`.
    Or,
}

/// A comparison (`TCF_EM_OPND_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opnd {
    /// `eq`.
    Eq,
    /// `gt`: the packet's value is greater.
    Gt,
    /// `lt`: the packet's value is smaller.
    Lt,
}

impl Opnd {
    fn holds(self, ord: std::cmp::Ordering) -> bool {
        match self {
            Opnd::Eq => ord.is_eq(),
            Opnd::Gt => ord.is_gt(),
            Opnd::Lt => ord.is_lt(),
        }
    }
}

/// `cmp(ALIGN at OFF layer L mask M [trans] eq|gt|lt V)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmp {
    /// Bytes read: 1, 2 or 4.
    pub align: u8,
    /// Offset from the layer's header.
    pub off: u16,
    /// 0 link, 1 network, 2 transport.
    pub layer: u8,
    /// Applied when non-zero.
    pub mask: u32,
    /// `trans`: the bytes are swapped after reading (host order on a little-endian machine).
    pub trans: bool,
    /// The comparison.
    pub opnd: Opnd,
    /// The value.
    pub val: u32,
}

/// `u32(...)`: a `tc_u32_key`, already shifted and aligned as iproute2 sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct U32Key {
    /// Key (host order), already masked.
    pub val: u32,
    /// Mask (host order).
    pub mask: u32,
    /// Offset from the network header, a multiple of 4.
    pub off: i32,
    /// `nexthdr+`: kept for show; `basic` gives the match no next-header offset.
    pub nexthdr: bool,
}

/// `nbyte("NEEDLE" at OFF layer L)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nbyte {
    /// The bytes to find.
    pub needle: Vec<u8>,
    /// Offset from the layer's header.
    pub off: u16,
    /// 0 link, 1 network, 2 transport.
    pub layer: u8,
}

/// One CAN rule (`struct can_filter`), with the kernel's flag bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanRule {
    /// `can_id` (bit 31: extended frame).
    pub id: u32,
    /// `can_mask`.
    pub mask: u32,
}

/// The CAN extended-frame flag.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;

/// A meta id (`TCF_META_ID_*`), numbered as the kernel numbers them.
pub type MetaId = u16;

/// Kernel meta ids Sluice gives a value (others are refused when built).
pub mod meta_id {
    /// A constant.
    pub const VALUE: u16 = 0;
    /// `dev`: the device's index (or name).
    pub const DEV: u16 = 5;
    /// `priority`: `skb->priority`.
    pub const PRIORITY: u16 = 6;
    /// `protocol`: the EtherType as the kernel stores it (network order read on a little-endian host).
    pub const PROTOCOL: u16 = 7;
    /// `pkt_type`: 0 host, 1 broadcast, 2 multicast (from the destination MAC).
    pub const PKTTYPE: u16 = 8;
    /// `pkt_len`: the frame's length.
    pub const PKTLEN: u16 = 9;
    /// `mac_len`: the link-layer header's length.
    pub const MACLEN: u16 = 11;
    /// `nf_mark`/`fwmark`: `skb->mark`.
    pub const NFMARK: u16 = 12;
    /// `tc_index`: always 0 here.
    pub const TCINDEX: u16 = 13;
    /// `rt_iif`: the input interface.
    pub const RTIIF: u16 = 15;
    /// `vlan`: the tag (TCI); fails on an untagged frame.
    pub const VLAN_TAG: u16 = 46;
}

/// One side of a meta comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaObj {
    /// The id ([`meta_id::VALUE`] for a constant).
    pub id: MetaId,
    /// Compared as bytes (`TCF_META_TYPE_VAR`) rather than as an integer.
    pub var: bool,
    /// Right shift applied to an integer.
    pub shift: u8,
    /// The constant (for `VALUE`), else the mask applied when non-zero.
    pub val: u64,
    /// The constant bytes of a `VAR` value.
    pub bytes: Vec<u8>,
}

/// `meta(LEFT eq|gt|lt RIGHT)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Left side (its `op` is the comparison).
    pub left: MetaObj,
    /// The comparison.
    pub opnd: Opnd,
    /// Right side.
    pub right: MetaObj,
}

/// What one match tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmKind {
    /// A parenthesised sub-sequence.
    Container(Vec<Ematch>),
    /// `cmp`.
    Cmp(Cmp),
    /// `u32`.
    U32(U32Key),
    /// `nbyte`.
    Nbyte(Nbyte),
    /// `meta`.
    Meta(Meta),
    /// `canid`: rules in the kernel's order (extended ones first).
    Canid(Vec<CanRule>),
}

/// One match of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ematch {
    /// `not`.
    pub invert: bool,
    /// How it combines with the next match.
    pub rel: Relation,
    /// What it tests.
    pub kind: EmKind,
}

/// Runs a sequence (the kernel's `__tcf_em_tree_match`). An empty sequence matches.
pub fn tree_match(seq: &[Ematch], input: &ClassifyInput<'_>) -> bool {
    let mut res = true;
    for m in seq {
        res = one(m, input) != m.invert;
        match m.rel {
            Relation::And if !res => return false,
            Relation::Or if res => return true,
            Relation::End => return res,
            _ => {}
        }
    }
    res
}

fn one(m: &Ematch, input: &ClassifyInput<'_>) -> bool {
    match &m.kind {
        EmKind::Container(s) => tree_match(s, input),
        EmKind::Cmp(c) => cmp_match(c, input),
        EmKind::U32(k) => {
            let at = input.keys.network_offset as i64 + k.off as i64;
            read(input.frame, at, 4)
                .is_some_and(|b| (u32::from_be_bytes([b[0], b[1], b[2], b[3]]) ^ k.val) & k.mask == 0)
        }
        EmKind::Nbyte(n) => {
            let Some(base) = layer_base(input, n.layer) else { return false };
            read(input.frame, base + n.off as i64, n.needle.len()).is_some_and(|b| b == n.needle.as_slice())
        }
        EmKind::Meta(mt) => meta_match(mt, input),
        EmKind::Canid(_) => false,
    }
}

fn layer_base(input: &ClassifyInput<'_>, layer: u8) -> Option<i64> {
    match layer {
        0 => Some(0),
        1 => Some(input.keys.network_offset as i64),
        _ => input.keys.transport_offset.map(|t| t as i64),
    }
}

fn read(frame: &[u8], at: i64, len: usize) -> Option<&[u8]> {
    let at = usize::try_from(at).ok()?;
    frame.get(at..at.checked_add(len)?)
}

fn cmp_match(c: &Cmp, input: &ClassifyInput<'_>) -> bool {
    let Some(base) = layer_base(input, c.layer) else { return false };
    let Some(b) = read(input.frame, base + c.off as i64, c.align as usize) else { return false };
    let mut v = match c.align {
        1 => b[0] as u32,
        2 => {
            let v = u16::from_be_bytes([b[0], b[1]]);
            (if c.trans { v.swap_bytes() } else { v }) as u32
        }
        _ => {
            let v = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if c.trans {
                v.swap_bytes()
            } else {
                v
            }
        }
    };
    if c.mask != 0 {
        v &= c.mask;
    }
    c.opnd.holds(v.cmp(&c.val))
}

/// The integer value of a meta object for this packet, or `None` where the kernel's collector
/// fails (no socket, no VLAN tag) or Sluice has no value.
fn meta_int(o: &MetaObj, input: &ClassifyInput<'_>) -> Option<u64> {
    use meta_id::*;
    let v: u64 = match o.id {
        VALUE => return Some(o.val),
        PRIORITY => input.priority() as u64,
        PROTOCOL => input.keys.ethertype.swap_bytes() as u64,
        PKTTYPE => match input.frame.first() {
            Some(_) if input.frame.get(..6) == Some(&[0xff; 6][..]) => 1,
            Some(b) if b & 1 == 1 => 2,
            _ => 0,
        },
        PKTLEN => input.pkt.len as u64,
        MACLEN => input.keys.network_offset as u64,
        NFMARK => input.mark() as u64,
        TCINDEX => 0,
        RTIIF => input.keys.iif as u64,
        VLAN_TAG => input.keys.vlan_tci? as u64,
        _ => return None,
    };
    let v = v >> o.shift.min(63);
    Some(if o.val != 0 { v & o.val } else { v })
}

fn meta_match(m: &Meta, input: &ClassifyInput<'_>) -> bool {
    if m.left.var || m.right.var {
        // Only constants have bytes here (`dev` by name is refused when built).
        return match (m.left.id, m.right.id) {
            (meta_id::VALUE, meta_id::VALUE) => m.opnd.holds(var_cmp(&m.left.bytes, &m.right.bytes)),
            _ => false,
        };
    }
    let (Some(l), Some(r)) = (meta_int(&m.left, input), meta_int(&m.right, input)) else { return false };
    m.opnd.holds(l.cmp(&r))
}

/// The kernel's `meta_var_compare`: shorter first, then bytes.
fn var_cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Whether the engine can evaluate this tree: every meta id must be one [`meta_id`] gives a
/// value (not `dev`: a classifier does not know its device) and nesting must stay within
/// [`EMATCH_STACK`]. Returns the first id it cannot evaluate (`u16::MAX` for too deep a tree).
pub fn unsupported(seq: &[Ematch]) -> Option<MetaId> {
    fn walk(seq: &[Ematch], depth: usize) -> Option<MetaId> {
        for m in seq {
            match &m.kind {
                EmKind::Container(s) if depth < EMATCH_STACK => {
                    if let Some(id) = walk(s, depth + 1) {
                        return Some(id);
                    }
                }
                EmKind::Container(_) => return Some(u16::MAX),
                EmKind::Meta(mt) => {
                    for o in [&mt.left, &mt.right] {
                        let ok = matches!(
                            o.id,
                            meta_id::VALUE
                                | meta_id::PRIORITY
                                | meta_id::PROTOCOL
                                | meta_id::PKTTYPE
                                | meta_id::PKTLEN
                                | meta_id::MACLEN
                                | meta_id::NFMARK
                                | meta_id::TCINDEX
                                | meta_id::RTIIF
                                | meta_id::VLAN_TAG
                        );
                        if !ok {
                            return Some(o.id);
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }
    walk(seq, 0)
}

/// What a basic element is configured with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasicConfig {
    /// The ematch tree (empty: every packet).
    pub ematch: Vec<Ematch>,
    /// `classid`.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
}

/// A basic priority: elements newest first, as the kernel lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BasicTp {
    /// `(handle, config, packets classified)`.
    pub elems: Vec<(u32, BasicConfig, u64)>,
}

impl BasicTp {
    /// Adds, replaces or changes the element `handle` (0 or `None`: the lowest free handle).
    pub fn apply(
        &mut self,
        handle: Option<u32>,
        cfg: BasicConfig,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        let h = match handle.filter(|h| *h != 0) {
            Some(h) => h,
            None => (1..=u32::MAX)
                .find(|h| !self.elems.iter().any(|e| e.0 == *h))
                .ok_or_else(|| FilterError::invalid("basic", "handle", "no free handle"))?,
        };
        match self.elems.iter_mut().find(|e| e.0 == h) {
            Some(e) if replace || must_exist => e.1 = cfg,
            Some(_) => return Err(FilterError::Exists(format!("basic handle {h:#x}"))),
            None if must_exist => return Err(FilterError::NotFound(format!("basic handle {h:#x}"))),
            None => self.elems.insert(0, (h, cfg, 0)),
        }
        Ok(h)
    }

    /// Deletes one element.
    pub fn delete(&mut self, handle: u32) -> Result<(), FilterError> {
        let i = self
            .elems
            .iter()
            .position(|e| e.0 == handle)
            .ok_or_else(|| FilterError::NotFound(format!("basic handle {handle:#x}")))?;
        self.elems.remove(i);
        Ok(())
    }

    /// Classifies: the first element whose tree matches and whose actions do not continue.
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        for (_, cfg, hits) in &mut self.elems {
            if !tree_match(&cfg.ematch, input) {
                continue;
            }
            let v = cfg.actions.run(input, now);
            if v == Verdict::Continue {
                continue;
            }
            *hits += 1;
            return Some((v, cfg.classid.unwrap_or(Handle::UNSPEC)));
        }
        None
    }
}
