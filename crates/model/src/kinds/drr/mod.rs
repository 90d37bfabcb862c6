//! drr: deficit round robin over its classes ([`DrrClass`]: a quantum each). The qdisc itself
//! has no options. tc's `q_drr.c`, the kernel's `sch_drr.c`; the algorithm is `sluice_core::drr`.

use super::{
    block_at, new_classid, set_class_opts, BuildCx, ClassChange, ClassKind, ClassList, ClassShowCx,
    DecodeError, QdiscKind, Unencodable, TCA_OPTIONS,
};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{size_arg, what_is, Cur};
use crate::json::J;
use crate::model::{ClassNode, ClassOpts, Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::classify::{ClassShape, Fallback, QdiscShape, ShapeKind};
use sluice_core::drr::Drr as Core;
use sluice_core::units::format_size;
use sluice_core::{Handle, Qdisc};

/// drr's options: none (state files write `{"kind":"drr"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrOpts {}

/// A DRR class's options (state files write `{"kind":"drr","quantum":N}`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClassOpts {
    /// Quantum bytes (psched_mtu when not given).
    pub quantum: Option<u32>,
}

/// The kind.
pub struct Drr;

/// DRR classes.
pub struct DrrClass;

/// `TCA_DRR_QUANTUM`.
const TCA_DRR_QUANTUM: u16 = 1;

const CLASS_USAGE: &str = "Usage: ... drr quantum SIZE";

const USAGE: &str = "Usage: ... drr";

impl QdiscKind for Drr {
    const NAME: &'static str = "drr";
    const CLASSFUL: bool = true;
    type Opts = DrrOpts;

    fn parse(cur: &mut Cur) -> Result<DrrOpts, TcError> {
        if let Some((at, w)) = cur.next_word() {
            if w == "help" {
                return Err(TcError::usage(USAGE, Some(at)));
            }
            return Err(what_is(w, at, USAGE));
        }
        Ok(DrrOpts {})
    }

    fn args(_o: &DrrOpts) -> String {
        String::new()
    }

    fn show(_o: &DrrOpts, _dev: &Device, _d: bool) -> String {
        String::new()
    }

    fn json(_o: &DrrOpts, _dev: &Device, _d: bool) -> J {
        J::obj()
    }

    /// tc sends the kind alone.
    fn encode(_o: &DrrOpts, _out: &mut Attrs) -> Result<(), Unencodable> {
        Ok(())
    }

    fn decode(_options: Option<&[u8]>) -> Result<DrrOpts, DecodeError> {
        Ok(DrrOpts {})
    }

    const CLASS_OPS: bool = true;

    fn has_class(_o: &DrrOpts, dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        dev.class(classid).is_some()
    }

    fn classes(_o: &DrrOpts, _dev: &Device, _q: &QdiscNode) -> ClassList {
        ClassList::Nodes { root_class: false }
    }

    fn class_in_use(_o: &DrrOpts, _q: &QdiscNode, _clid: Handle) -> Result<&'static str, TcError> {
        Ok("DRR class is in use")
    }

    /// Filters go on the qdisc only.
    fn filter_block(_o: &DrrOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("DRR classid must be zero")))
    }

    /// Its classes (quantum, default pfifo or the grafted qdisc) and the classifier's shape. DRR
    /// has no default class: what no filter (or `skb->priority`) sends to a class is dropped.
    fn build(_o: &DrrOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let dev = cx.dev;
        let mut drr = Core::new(q.handle, dev.txqueuelen);
        let mut shapes = Vec::new();
        for c in dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle) {
            let ClassOpts::Drr(o) = &c.opts else { continue };
            drr.add_class(c.classid, o.quantum.unwrap_or(dev.psched_mtu()))?;
            let child = dev.qdisc_at(c.classid);
            if let Some(l) = child {
                drr.set_class_qdisc(c.classid, Some(cx.child(l)?))?;
            }
            let classful_child = child.filter(|l| l.opts.is_classful()).map(|l| l.handle);
            shapes.push(ClassShape { classid: c.classid, inner: false, child: classful_child });
        }
        cx.cls
            .set_shape(QdiscShape {
                handle: q.handle,
                kind: ShapeKind::Htb,
                classes: shapes,
                fallback: Fallback::Class(q.handle),
            })
            .map_err(BuildError::Filter)?;
        Ok(Box::new(drr))
    }
}

impl ClassKind for DrrClass {
    type Qdisc = Drr;
    type Opts = DrrClassOpts;

    fn parse(cur: &mut Cur) -> Result<DrrClassOpts, TcError> {
        let mut o = DrrClassOpts::default();
        while let Some((at, w)) = cur.next_word() {
            if w == "quantum" {
                // Zero is the kernel's to refuse.
                o.quantum = Some(size_arg(cur, "quantum")?);
            } else if w == "help" {
                return Err(TcError::usage(CLASS_USAGE, Some(at)));
            } else {
                return Err(what_is(w, at, CLASS_USAGE));
            }
        }
        Ok(o)
    }

    fn args(o: &DrrClassOpts) -> String {
        o.quantum.map(|q| format!(" quantum {q}")).unwrap_or_default()
    }

    fn show(o: Option<&DrrClassOpts>, _qo: &DrrOpts, cx: &ClassShowCx<'_>) -> (String, String) {
        let Some(o) = o else { return (String::new(), String::new()) };
        let quantum = o.quantum.unwrap_or(cx.dev.psched_mtu());
        (format!("quantum {} ", format_size(quantum as u64)), " deficit 0b \n".into())
    }

    /// `drr_change_class`: a quantum of 0 is refused; a change without one keeps the class's.
    fn change(o: DrrClassOpts, cx: ClassChange<'_>) -> Result<Vec<String>, TcError> {
        if o.quantum == Some(0) {
            return Err(TcError::kernel("Specified DRR quantum cannot be zero"));
        }
        if cx.exists {
            if o.quantum.is_some() {
                set_class_opts(cx.dev, cx.clid, ClassOpts::Drr(o));
            }
            return Ok(Vec::new());
        }
        new_classid(cx.clid)?;
        cx.dev.classes.push(ClassNode {
            classid: cx.clid,
            parent: cx.q.handle,
            opts: ClassOpts::Drr(o),
            stats: Default::default(),
        });
        Ok(Vec::new())
    }

    /// `TCA_OPTIONS` always, `TCA_DRR_QUANTUM` only when given.
    fn encode(o: &DrrClassOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        if let Some(q) = o.quantum {
            out.put_u32(TCA_DRR_QUANTUM, q);
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<DrrClassOpts, DecodeError> {
        let mut o = DrrClassOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            if ty == TCA_DRR_QUANTUM {
                o.quantum =
                    Some(u32_of(p).ok_or_else(|| DecodeError::new("drr", "TCA_DRR_QUANTUM is short"))?);
            }
        }
        Ok(o)
    }

    fn label(o: &DrrClassOpts) -> Vec<String> {
        vec![format!("quantum {}", o.quantum.map(|q| q.to_string()).unwrap_or("mtu".into()))]
    }
}
