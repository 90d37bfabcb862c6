//! What every filter kind shares: the contexts of [`super::FilterKind`]'s hooks, the kernel's
//! `change` for classifiers keyed by one handle, and the words every kind's grammar uses
//! (`classid`, a plain handle, an ematch tree).

use super::{FilterKind, FilterOpts, Unencodable};
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, Cur};
use crate::model::{Action, Device, FilterNode, Handle};
use crate::nlattr::Attrs;

/// What a kind's parser hands to the command grammar: the `action` list and the filter's own
/// `police` keyword are the grammar's (the action table is generic).
pub trait FilterParseCx {
    /// The words after `action` (`cur` on the first of them): one action list.
    fn action(&mut self, cur: &mut Cur) -> Result<(), TcError>;
    /// The words after the filter's own `police` keyword: one policer.
    fn police(&mut self, cur: &mut Cur) -> Result<(), TcError>;
}

/// A parsed filter request: the options and what else the request carries.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterParsed<O> {
    /// Options.
    pub opts: O,
    /// The handle as the kind reads it (0: none).
    pub handle: u32,
    /// The hash table (and bucket) the filter is to go in (u32's `ht`, `sample`).
    pub table: Option<u32>,
    /// Which attributes the request carries, for a `change` that keeps the others.
    pub given: Vec<&'static str>,
}

impl<O> FilterParsed<O> {
    /// A request with options and handle only.
    pub fn new(opts: O, handle: u32) -> FilterParsed<O> {
        FilterParsed { opts, handle, table: None, given: Vec::new() }
    }

    /// The same request with other options.
    pub fn map<P>(self, f: impl FnOnce(O) -> P) -> FilterParsed<P> {
        FilterParsed { opts: f(self.opts), handle: self.handle, table: self.table, given: self.given }
    }
}

/// How generic code reaches a kind's options inside [`FilterOpts`] (made by the registry).
pub struct FilterReg<O> {
    /// The kind's variant.
    pub wrap: fn(O) -> FilterOpts,
    /// The kind's options, when `f` is of the kind.
    pub get: fn(&FilterOpts) -> Option<&O>,
}

/// One add, change or replace on a classifier instance (block, chain, priority), after the
/// generic checks: what the kind's `change` works on.
pub struct FilterChange<'a> {
    /// The device.
    pub dev: &'a mut Device,
    /// The block.
    pub block: Handle,
    /// The chain.
    pub chain: u32,
    /// The priority (the automatic one already chosen).
    pub prio: u16,
    /// The instance's protocol.
    pub protocol: u16,
    /// The classifier instance is new (no filter at this priority yet).
    pub new_tp: bool,
    /// `NLM_F_CREATE`.
    pub create: bool,
    /// `NLM_F_EXCL`.
    pub excl: bool,
    /// The names of the namespace's devices (`indev`).
    pub devices: &'a [String],
    /// The filter's actions, bound in the action table.
    pub actions: Vec<Action>,
    /// The actions are the filter's own `police` keyword.
    pub police_keyword: bool,
    /// The handle the request named (0: none).
    pub handle: u32,
    /// [`FilterParsed::table`].
    pub table: Option<u32>,
    /// [`FilterParsed::given`].
    pub given: Vec<&'static str>,
}

impl FilterChange<'_> {
    /// `f` belongs to this classifier instance.
    pub fn in_tp(&self, f: &FilterNode) -> bool {
        f.parent == self.block && f.chain == self.chain && f.prio == self.prio
    }

    /// A node of this instance with the request's actions (a table holds none).
    pub fn node(&self, opts: FilterOpts, handle: u32, prio: u16) -> FilterNode {
        let table = opts.is_table();
        FilterNode {
            police_keyword: self.police_keyword && !table,
            parent: self.block,
            chain: self.chain,
            prio,
            protocol: self.protocol,
            handle,
            actions: if table { Vec::new() } else { self.actions.clone() },
            opts,
        }
    }
}

/// The kernel's `change` of a classifier whose filters are keyed by one handle (flow, fw,
/// matchall, basic): an existing handle is changed (what it keeps: [`FilterKind::merge`]), a
/// new one added ([`FilterKind::new_handle`], [`FilterKind::create`]).
pub fn change_by_handle<K: FilterKind>(
    cx: &mut FilterChange<'_>,
    o: K::Opts,
    reg: &FilterReg<K::Opts>,
) -> Result<(), TcError> {
    K::check(&o, cx)?;
    let handle = cx.handle;
    let existing = cx.dev.filters.iter().position(|f| cx.in_tp(f) && handle != 0 && f.handle == handle);
    match existing {
        Some(pos) => {
            if cx.excl {
                return Err(TcError::kernel("Filter already exists"));
            }
            let opts = match (reg.get)(&cx.dev.filters[pos].opts) {
                Some(old) => K::merge(o, old, &cx.given),
                None => o,
            };
            cx.dev.filters[pos] = cx.node((reg.wrap)(opts), handle, cx.prio);
        }
        None => {
            if !cx.create {
                return Err(TcError::kernel(
                    "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter",
                ));
            }
            let handle = if handle != 0 { handle } else { K::new_handle(cx)? };
            let opts = K::create(o, cx, !cx.new_tp)?;
            let n = cx.node((reg.wrap)(opts), handle, cx.prio);
            cx.dev.filters.push(n);
        }
    }
    Ok(())
}

/// What encoding a filter needs beyond its options: its actions, as the nest the kind names.
pub struct FilterEncodeCx<'a> {
    /// Writes the filter's actions into `out`: the filter's own `police` keyword as the nest
    /// `police` when the kind has one, else the action list as the nest `act` (nothing when
    /// there are no actions).
    #[allow(clippy::type_complexity)]
    pub actions: &'a dyn Fn(&mut Attrs, u16, Option<u16>) -> Result<(), Unencodable>,
}

/// `classid`/`flowid CLASSID`, the result every filter kind may set.
pub fn classid_arg(cur: &mut Cur) -> Result<Option<Handle>, TcError> {
    let (i, v) = cur.value()?;
    cur.classid(v).map(Some).ok_or_else(|| illegal("classid", i, None))
}

/// A handle that is one number (flow, matchall, basic); 0 when none was given.
pub fn plain_handle(handle: Option<(usize, &str)>) -> Result<u32, TcError> {
    match handle {
        Some((i, s)) => get_u32(s).ok_or_else(|| TcError::usage("Illegal \"handle\"", Some(i))),
        None => Ok(0),
    }
}

/// A number value (`get_u32`), or tc's `Illegal "what"`.
pub fn num(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    get_u32(v).ok_or_else(|| illegal(what, i, None))
}

/// An ematch tree (see [`super::ematch`]), kept as its canonical text. The cursor is left
/// where iproute2 leaves it: on the word after the tree, or on the tree's last word when it ran
/// to the end of the command.
pub fn parse_ematch(cur: &mut Cur) -> Result<String, TcError> {
    let start = cur.pos;
    let words = &cur.argv[start..];
    if words.is_empty() {
        return Err(TcError::fatal("Command line is not complete. Try option \"help\"", Some(start)));
    }
    let (tree, used) = super::ematch::parse_words(words, start)?;
    cur.pos = start + used;
    Ok(super::ematch::canonical(&tree))
}

/// A model class id as the kernel's 32-bit one (the plan refuses wider ones).
pub fn kernel_classid(h: Handle) -> u32 {
    h.to_tc().unwrap_or(0)
}

/// The class id of a kernel's 32-bit one.
pub fn model_classid(v: u32) -> Handle {
    Handle::from_tc(v)
}

/// How a kind's options look in the kernel's dumps, by attribute type inside `TCA_OPTIONS`: what
/// `apply`'s difference of dumps and requests (`sluice_kernel::fdiff`) needs to compare them,
/// re-send them and change them in place.
#[derive(Clone, Copy, Debug)]
pub struct FilterNl {
    /// The class the filter names (`*_CLASSID`; flow's `BASECLASS`).
    pub classid: Option<u16>,
    /// The filter's own policer (`*_POLICE`).
    pub police: Option<u16>,
    /// The action list (`*_ACT`).
    pub act: Option<u16>,
    /// The attributes a dump holds as the request sent them, compared by value (`None`: the
    /// whole options are).
    pub compared: Option<&'static [u16]>,
    /// What only a dump holds (counters, padding): left out of a request made from a dump.
    pub dump_only: &'static [u16],
    /// `TCA_CLS_FLAGS_*`: only skip_hw and skip_sw are the user's (the kernel adds its in_hw and
    /// not_in_hw); they are compared, and a change in place cannot change them.
    pub flags: Option<u16>,
    /// Attributes naming other objects of the classifier (u32's table and link): left out of a
    /// probe on a scratch device.
    pub refs: &'static [u16],
    /// The kernel cannot change a filter in place (matchall: one filter per instance).
    pub no_change: bool,
    /// Attributes a change in place keeps from the old filter (u32's selector:
    /// `u32_init_knode` copies it).
    pub kept: &'static [u16],
    /// Attributes (with their value when absent) whose change needs the filter made again
    /// (fw's mask belongs to the classifier instance).
    pub remake: &'static [(u16, u32)],
    /// Handles are u32's `ht:bucket:node`, with hash tables (node 0) and each priority's root
    /// table numbered by the kernel from `800:`; the attribute naming a node's table
    /// (`TCA_U32_HASH`), which an add into a root table leaves out.
    pub tables: Option<u16>,
}
