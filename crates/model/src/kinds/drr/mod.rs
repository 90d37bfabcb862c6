//! drr, the qdisc: deficit round robin over its classes (whose quanta are
//! `crate::model::ClassOpts::Drr`). The qdisc itself has no options. tc's `q_drr.c`, the kernel's
//! `sch_drr.c`; the algorithm is `sluice_core::drr`.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{what_is, Cur};
use crate::json::J;
use crate::model::{ClassOpts, Device, QdiscNode};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::classify::{ClassShape, Fallback, QdiscShape, ShapeKind};
use sluice_core::drr::Drr as Core;
use sluice_core::Qdisc;

/// drr's options: none (state files write `{"kind":"drr"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrOpts {}

/// The kind.
pub struct Drr;

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

    /// Its classes (quantum, default pfifo or the grafted qdisc) and the classifier's shape. DRR
    /// has no default class: what no filter (or `skb->priority`) sends to a class is dropped.
    fn build(_o: &DrrOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let dev = cx.dev;
        let mut drr = Core::new(q.handle, dev.txqueuelen);
        let mut shapes = Vec::new();
        for c in dev.classes.iter().filter(|c| c.classid.qdisc() == q.handle) {
            let ClassOpts::Drr { quantum } = &c.opts else { continue };
            drr.add_class(c.classid, quantum.unwrap_or(dev.psched_mtu()))?;
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
