//! Netlink encoding of filters (`RTM_NEWTFILTER`) and reading them back (`RTM_GETTFILTER` dumps).
//!
//! [`filter_msg`] builds the request iproute2 6.1's tc sends for the command Sluice prints for the
//! same filter (`sluice apply --dry-run`, `sluice export`): `tcmsg` with the handle, parent and
//! `prio << 16 | protocol`, `TCA_CHAIN` when the chain is not 0, `TCA_KIND`, then what the kind
//! sends (`FilterKind::encode` in the kind registry, `sluice_model::kinds`), with the filter's
//! actions encoded here. `tests/registry_netlink.rs` checks every kind byte for byte against
//! requests captured from tc (`scripts/filters-netlink-capture.py`).
//!
//! u32's root table of each priority is the kernel's own (made with the priority's first u32
//! filter) and is not sent ([`is_implicit`]). What a kind cannot send (ematch `meta` and `canid`,
//! Sluice's own flow keys) is named by [`unencoded`], and the plan refuses it before anything is
//! sent.

use crate::actions::{self, ActionEncodeError};
use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TcObject};
use crate::Error;
use sluice_model::kinds::filter_common::FilterEncodeCx;
use sluice_model::kinds::Unencodable;
use sluice_model::nlattr::Attrs;
use sluice_tc::model::{Action, FilterNode, FilterOpts};

/// `TCA_CHAIN` (linux/rtnetlink.h).
pub const TCA_CHAIN: u16 = 11;

/// What of `f` the encoder cannot send, if anything (checked by the plan before anything is sent).
pub fn unencoded(f: &FilterNode) -> Option<String> {
    let cx = FilterEncodeCx { actions: &|_, _, _| Ok(()) };
    let e = f.opts.encode(f, &mut Attrs::new(), &cx).err()?;
    Some(format!("{} filter prio {} {}", f.opts.kind(), f.prio, e.option))
}

/// The kernel's parent handle of `f` (`ingress`/`egress` are clsact's minors).
pub fn kernel_parent(f: &FilterNode) -> Option<u32> {
    f.parent.to_tc()
}

/// A model class id as the kernel's 32-bit one (the plan has refused wider ones).
fn classid(h: sluice_core::Handle) -> u32 {
    h.to_tc().unwrap_or(0)
}

/// Whether the kernel makes `f` itself with its classifier instance (u32's root hash table of
/// each priority), so it is never sent.
pub fn is_implicit(f: &FilterNode) -> bool {
    f.opts.implicit(f.handle)
}

/// The `RTM_NEWTFILTER` request for `f` on interface `ifindex` with `msg_flags` (tc's `filter add`
/// is `REQUEST | ACK | EXCL | CREATE`). `ifindex_of` names mirred's target devices.
pub fn filter_msg(
    ifindex: i32,
    f: &FilterNode,
    msg_flags: u16,
    ifindex_of: &dyn Fn(&str) -> Option<u32>,
) -> Result<Msg, ActionEncodeError> {
    let info = (f.prio as u32) << 16 | f.protocol.to_be() as u32;
    let tc = TcMsg { ifindex, handle: f.handle, parent: kernel_parent(f).unwrap_or(0), info };
    let mut m = Msg::tc(rtm::NEWTFILTER, msg_flags, tc);
    if f.chain != 0 {
        m.attr(TCA_CHAIN, &f.chain.to_ne_bytes());
    }
    m.attr_str(tca::KIND, f.opts.kind());
    let acts: Vec<(&Action, Option<&str>)> = f.actions.iter().map(|a| (a, None)).collect();
    // The filter's actions: its own `police` keyword (TCA_*_POLICE, where the kind has one) or
    // an action list.
    let actions = |out: &mut Attrs, act: u16, police: Option<u16>| -> Result<(), Unencodable> {
        let r = match (f.police_keyword, f.actions.first(), police) {
            (true, Some(a), Some(p)) => actions::encode_police_keyword(out, p, a),
            _ if acts.is_empty() => Ok(()),
            _ => actions::encode_action_list(out, act, &acts, ifindex_of),
        };
        r.map_err(|ActionEncodeError::Kind(e)| e)
    };
    f.opts.encode(f, m.attrs(), &FilterEncodeCx { actions: &actions })?;
    Ok(m)
}

/// A filter as the kernel dumps it.
#[derive(Debug, Clone, PartialEq)]
pub struct KFilter {
    /// Parent (block) handle.
    pub parent: u32,
    /// Priority.
    pub prio: u16,
    /// Protocol (host order).
    pub protocol: u16,
    /// Chain.
    pub chain: u32,
    /// Handle (0 for the classifier instance itself, which the kernel dumps first).
    pub handle: u32,
    /// Kind.
    pub kind: String,
    /// The options, decoded by the kind (`None`: a kind Sluice does not know, or options it
    /// cannot read).
    pub opts: Option<FilterOpts>,
}

impl KFilter {
    /// The class it names (`*_CLASSID`; flow's base class), as the kernel holds it.
    pub fn classid(&self) -> Option<u32> {
        self.opts.as_ref().and_then(|o| o.target()).map(classid)
    }
}

fn decode_filter(o: &TcObject) -> KFilter {
    let kind = o.kind_str();
    let opts = netlink::find(&o.attrs, tca::OPTIONS);
    KFilter {
        parent: o.tc.parent,
        prio: (o.tc.info >> 16) as u16,
        protocol: u16::from_be(o.tc.info as u16),
        chain: netlink::find(&o.attrs, TCA_CHAIN).and_then(|b| netlink::u32_at(b, 0)).unwrap_or(0),
        handle: o.tc.handle,
        opts: FilterOpts::decode(&kind, opts).and_then(|r| r.ok()),
        kind,
    }
}

/// Every filter the kernel holds on `parent` (a qdisc, a class, or clsact's ingress/egress) of
/// interface `ifindex`, every chain, in dump order; the classifier instances themselves (handle 0)
/// are left out.
pub fn dump_filters(nl: &mut Netlink, ifindex: i32, parent: u32) -> Result<Vec<KFilter>, Error> {
    let mut m =
        Msg::tc(rtm::GETTFILTER, flags::REQUEST | flags::DUMP, TcMsg { ifindex, handle: 0, parent, info: 0 });
    let objs = nl.dump(&mut m)?;
    Ok(objs
        .iter()
        .filter(|o| o.kind == rtm::NEWTFILTER && o.tc.ifindex == ifindex && o.tc.handle != 0)
        .map(decode_filter)
        .collect())
}

/// Every filter of `dev` (calling thread's namespace): on each qdisc and class the kernel reports,
/// and on clsact's two hooks.
pub fn read_filters(dev: &str) -> Result<Vec<KFilter>, Error> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(dev)?;
    let mut parents = Vec::new();
    for ty in [rtm::GETQDISC, rtm::GETTCLASS] {
        let objs =
            nl.dump(&mut Msg::tc(ty, flags::REQUEST | flags::DUMP, TcMsg { ifindex, ..TcMsg::default() }))?;
        for o in objs.iter().filter(|o| o.tc.ifindex == ifindex && o.tc.handle != 0) {
            match o.kind_str().as_str() {
                "clsact" => parents.extend([0xFFFF_FFF2, 0xFFFF_FFF3]),
                _ => parents.push(o.tc.handle),
            }
        }
    }
    parents.dedup();
    let mut out = Vec::new();
    for p in parents {
        out.extend(dump_filters(&mut nl, ifindex, p)?);
    }
    Ok(out)
}

/// How the kernel's filters differ from the model's (`filters`): one line per model filter the
/// kernel lacks or holds differently. u32 root tables are the kernel's own and not compared.
pub fn compare(filters: &[&FilterNode], kernel: &[KFilter]) -> Vec<String> {
    let mut out = Vec::new();
    for f in filters.iter().filter(|f| !is_implicit(f)) {
        let parent = kernel_parent(f).unwrap_or(0);
        let what = format!("{} filter prio {} handle {:#x} on {parent:#x}", f.opts.kind(), f.prio, f.handle);
        // A node of a priority's root table: the kernel numbers the table (see `fdiff`).
        let tables = FilterOpts::nl(f.opts.kind()).is_some_and(|n| n.tables.is_some());
        let root_node = |h: u32| tables && !f.opts.is_table() && h >> 20 >= 0x800;
        let same_handle = |h: u32| {
            h == f.handle || (root_node(h) && root_node(f.handle) && h & 0xF_FFFF == f.handle & 0xF_FFFF)
        };
        let Some(k) = kernel.iter().find(|k| {
            k.parent == parent
                && same_handle(k.handle)
                && k.kind == f.opts.kind()
                && k.chain == f.chain
                && k.prio == f.prio
        }) else {
            out.push(format!("{what}: missing in the kernel"));
            continue;
        };
        let mut diffs = Vec::new();
        if k.prio != f.prio {
            diffs.push(format!("prio {} (model {})", k.prio, f.prio));
        }
        if k.protocol != f.protocol {
            diffs.push(format!("protocol {:#06x} (model {:#06x})", k.protocol, f.protocol));
        }
        let want_class = f.opts.target().map(classid);
        if k.classid() != want_class {
            diffs.push(format!("class {:?} (model {want_class:?})", k.classid()));
        }
        if let Some(ko) = &k.opts {
            diffs.extend(f.opts.differs(ko));
        }
        if !diffs.is_empty() {
            out.push(format!("{what}: {}", diffs.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::kernel::{script_state, Plan};
    use sluice_tc::burst::BurstPolicy;

    #[test]
    fn ematches_are_refused_before_anything_is_sent() {
        let st = script_state(
            "tc qdisc add dev $DEV root handle 1: htb default 1\n\
             tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
             tc filter add dev $DEV parent 1: prio 3 handle 1 basic match 'meta(priority eq 1)' classid 1:1\n",
            &[("DEV", "eth0")],
        )
        .unwrap();
        let e = Plan::new(&st, "eth0", BurstPolicy::Sluice).unwrap_err().to_string();
        assert!(e.contains("basic filter prio 3 ematch `meta(...)`") && e.contains("not encoded"), "{e}");
    }
}
