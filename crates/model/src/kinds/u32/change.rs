//! The kernel's rules for u32 (cls_u32.c `u32_change`, `gen_new_htid`, `gen_new_kid`): a root
//! hash table per classifier instance, hash tables of their own, key nodes in a table's bucket.

use super::{U32Filter, U32TableOpts};
use crate::error::TcError;
use crate::kinds::filter_common::{FilterChange, FilterReg};
use crate::model::{Device, FilterNode, Handle, U32Block, H_INGRESS, H_MIN_EGRESS, H_MIN_INGRESS};

fn is_table(f: &FilterNode, reg: &FilterReg<U32Filter>) -> bool {
    matches!((reg.get)(&f.opts), Some(U32Filter::Table(_)))
}

fn is_key(f: &FilterNode, reg: &FilterReg<U32Filter>) -> bool {
    matches!((reg.get)(&f.opts), Some(U32Filter::Key(_)))
}

fn tables<'a>(
    dev: &'a Device,
    block: Handle,
    reg: &'a FilterReg<U32Filter>,
) -> impl Iterator<Item = &'a FilterNode> + 'a {
    dev.filters.iter().filter(move |f| f.parent == block && is_table(f, reg))
}

/// The other hook of a clsact qdisc (whose u32 filters share hash-table ids with `block`'s).
pub(super) fn sibling_hook(dev: &Device, block: Handle) -> Option<Handle> {
    if dev.qdisc_at(H_INGRESS).is_none_or(|q| q.opts.kind() != "clsact") {
        return None;
    }
    match block {
        H_MIN_INGRESS => Some(H_MIN_EGRESS),
        H_MIN_EGRESS => Some(H_MIN_INGRESS),
        _ => None,
    }
}

fn table<'a>(
    dev: &'a Device,
    block: Handle,
    htid: u32,
    reg: &'a FilterReg<U32Filter>,
) -> Option<&'a FilterNode> {
    tables(dev, block, reg).find(|f| f.handle == htid & 0xFFF0_0000)
}

/// Hash-table id allocator: the first u32 root on a block is 800:, later ones cycle from 801:.
fn new_htid(dev: &mut Device, block: Handle, reg: &FilterReg<U32Filter>) -> u32 {
    let mut in_use: Vec<u32> = tables(dev, block, reg).map(|f| f.handle >> 20).collect();
    // u32's hash tables belong to the qdisc: clsact's two hooks draw from one allocator.
    let block = match sibling_hook(dev, block) {
        Some(other) => {
            in_use.extend(tables(dev, other, reg).map(|f| f.handle >> 20));
            H_MIN_INGRESS
        }
        None => block,
    };
    let entry = match dev.u32_blocks.iter().position(|b| b.block == block) {
        Some(i) => i,
        None => {
            dev.u32_blocks.push(U32Block { block, roots_created: 0 });
            dev.u32_blocks.len() - 1
        }
    };
    if in_use.is_empty() {
        dev.u32_blocks[entry].roots_created = 0;
        return 0x800 << 20;
    }
    let mut id = dev.u32_blocks[entry].roots_created;
    for _ in 0..0x7FF {
        id = if id >= 0x7FF { 1 } else { id + 1 };
        if !in_use.contains(&(id | 0x800)) {
            dev.u32_blocks[entry].roots_created = id;
            return (id | 0x800) << 20;
        }
    }
    0
}

/// [`change_inner`], leaving the hash-table id allocator as it was when the request fails.
pub(super) fn change(
    cx: &mut FilterChange<'_>,
    o: U32Filter,
    reg: &FilterReg<U32Filter>,
) -> Result<(), TcError> {
    let saved = cx.dev.u32_blocks.clone();
    let r = change_inner(cx, o, reg);
    if r.is_err() {
        cx.dev.u32_blocks = saved;
    }
    r
}

fn change_inner(cx: &mut FilterChange<'_>, o: U32Filter, reg: &FilterReg<U32Filter>) -> Result<(), TcError> {
    let block = cx.block;
    let prio = cx.prio;
    let mut pending: Vec<FilterNode> = Vec::new();
    if cx.new_tp {
        let root = new_htid(cx.dev, block, reg);
        pending.push(cx.node((reg.wrap)(U32Filter::Table(U32TableOpts { divisor: 1 })), root, prio));
    }
    // Tables visible from this request include a root created just now.
    let lookup = |dev: &Device, pending: &[FilterNode], ht: u32| -> Option<FilterNode> {
        table(dev, block, ht, reg)
            .cloned()
            .or_else(|| pending.iter().find(|f| f.handle == ht & 0xFFF0_0000).cloned())
    };
    let tp_root = pending
        .first()
        .cloned()
        .or_else(|| {
            cx.dev
                .filters
                .iter()
                .find(|f| cx.in_tp(f) && is_table(f, reg) && f.handle >> 20 >= 0x800)
                .cloned()
        })
        .ok_or_else(|| TcError::errno("Invalid argument"))?;
    let handle = cx.handle;
    if cx.given.contains(&"empty") {
        if handle != 0 {
            return Err(TcError::kernel("cls_u32: Filter handle requires options"));
        }
        cx.dev.filters.extend(pending);
        return Ok(());
    }
    // The kernel's `get(handle)`: an existing table or key node.
    let existing = if handle != 0 {
        match lookup(cx.dev, &pending, handle) {
            Some(t) if handle & 0xFFFFF == 0 => Some(t),
            Some(_) => cx
                .dev
                .filters
                .iter()
                .find(|f| f.parent == block && is_key(f, reg) && f.handle == handle)
                .cloned(),
            None => None,
        }
    } else {
        None
    };
    if let Some(e) = &existing {
        if cx.excl {
            return Err(TcError::kernel("Filter already exists"));
        }
        if handle & 0xFFFFF == 0 {
            return Err(TcError::kernel("cls_u32: Key node id cannot be zero"));
        }
        let U32Filter::Key(k) = &o else {
            return Err(TcError::kernel("cls_u32: Divisor can only be used on a hash table"));
        };
        check_refs(cx, &pending, k, reg)?;
        let mut n = e.clone();
        n.opts = (reg.wrap)(o.clone());
        n.actions = cx.actions.clone();
        if let Some(f) =
            cx.dev.filters.iter_mut().find(|f| f.parent == block && f.handle == e.handle && is_key(f, reg))
        {
            *f = n;
        }
        cx.dev.filters.extend(pending);
        return Ok(());
    }
    if !cx.create {
        return Err(TcError::kernel("Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter"));
    }
    match &o {
        U32Filter::Table(t) => {
            if t.divisor > 256 {
                return Err(TcError::kernel("cls_u32: Exceeded maximum 256 hash buckets"));
            }
            if handle & 0xFFFFF != 0 {
                return Err(TcError::kernel("cls_u32: Divisor can only be used on a hash table"));
            }
            let h = if handle == 0 {
                let h = new_htid(cx.dev, block, reg);
                if h == 0 {
                    return Err(TcError::errno("Cannot allocate memory"));
                }
                h
            } else {
                if lookup(cx.dev, &pending, handle).is_some() {
                    return Err(TcError::errno("No space left on device"));
                }
                handle
            };
            pending.push(cx.node((reg.wrap)(o.clone()), h, prio));
        }
        U32Filter::Key(k) => {
            let (ht, htid) = match cx.table {
                Some(t) if t >> 20 != 0 => {
                    let ht = lookup(cx.dev, &pending, t)
                        .ok_or_else(|| TcError::kernel("cls_u32: Specified hash table not found"))?;
                    (ht, t)
                }
                Some(t) => (tp_root.clone(), tp_root.handle | (t & 0xFF000)),
                None => (tp_root.clone(), tp_root.handle),
            };
            let Some(U32Filter::Table(U32TableOpts { divisor })) = (reg.get)(&ht.opts) else {
                return Err(TcError::errno("Invalid argument"));
            };
            if (htid >> 12) & 0xFF > divisor - 1 {
                return Err(TcError::kernel("cls_u32: Specified hash table bucket exceeds size"));
            }
            let h = if handle != 0 {
                if handle >> 20 != 0 && (handle ^ htid) >> 20 != 0 {
                    return Err(TcError::kernel("cls_u32: Handle specified hash table address mismatch"));
                }
                (htid & 0xFFFFF000) | (handle & 0xFFF)
            } else {
                // The kernel's gen_new_kid: the lowest free node id from 0x800, then from 1,
                // else 0xfff (which then exists already).
                let used: std::collections::HashSet<u32> = cx
                    .dev
                    .filters
                    .iter()
                    .filter(|f| {
                        f.parent == block && is_key(f, reg) && f.handle & 0xFFFF_F000 == htid & 0xFFFF_F000
                    })
                    .map(|f| f.handle & 0xFFF)
                    .collect();
                let id = (0x800..=0xFFF).chain(1..0x800).find(|i| !used.contains(i)).unwrap_or(0xFFF);
                (htid & 0xFFFFF000) | id
            };
            if !cx.given.contains(&"sel") {
                return Err(TcError::kernel("cls_u32: Selector not specified"));
            }
            check_refs(cx, &pending, k, reg)?;
            // Key nodes belong to their table's classifier instance.
            pending.push(cx.node((reg.wrap)(o.clone()), h, ht.prio));
        }
    }
    cx.dev.filters.extend(pending);
    Ok(())
}

fn check_refs(
    cx: &FilterChange<'_>,
    pending: &[FilterNode],
    k: &super::U32Opts,
    reg: &FilterReg<U32Filter>,
) -> Result<(), TcError> {
    if let Some(l) = k.link {
        let found = table(cx.dev, cx.block, l, reg).is_some() || pending.iter().any(|p| p.handle == l);
        if !found {
            return Err(TcError::kernel("cls_u32: Link hash table not found"));
        }
    }
    if let Some(i) = &k.indev {
        if !cx.devices.contains(i) {
            return Err(TcError::kernel("Network device not found"));
        }
    }
    Ok(())
}
