//! prio: strict priority bands, a packet's band chosen by filters or by its priority through the
//! priomap. tc's `q_prio.c`, the kernel's `sch_prio.c`; the algorithm is `sluice_core::prio`.
//!
//! tc sends `struct tc_prio_qopt` (bands, then the 16-entry priomap) as the head of a "compat"
//! `TCA_OPTIONS` nest, followed by a nested `TCA_OPTIONS` holding `TCA_PRIO_MQ` when
//! `multiqueue` was given (today's kernels read the struct alone). The printers here serve
//! pfifo_fast too, whose dump is the same struct.

use super::{block_at, BuildCx, ClassList, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{illegal, what_is, Cur};
use crate::json::J;
use crate::model::{Device, Handle, QdiscNode};
use crate::nlattr::{attrs, find, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::classify::{ClassShape, Fallback, QdiscShape, ShapeKind};
use sluice_core::prio::{Prio as Core, PrioConfig};
use sluice_core::Qdisc;
use std::fmt::Write;

/// The kernel's default priomap (TOS to band), shared by prio and pfifo_fast.
pub use sluice_core::prio::DEFAULT_PRIOMAP;

/// prio options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrioOpts {
    /// Number of bands (2..=16).
    pub bands: u32,
    /// Band of each of the 16 Linux priorities.
    pub priomap: Vec<u8>,
    /// `multiqueue`: tc sends `TCA_PRIO_MQ`; the kernel no longer acts on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub multiqueue: bool,
}

impl Default for PrioOpts {
    fn default() -> Self {
        PrioOpts { bands: 3, priomap: DEFAULT_PRIOMAP.to_vec(), multiqueue: false }
    }
}

/// The kind.
pub struct Prio;

/// `TCA_PRIO_MQ` (`linux/pkt_sched.h`), in the nest after the struct.
const TCA_PRIO_MQ: u16 = 1;

/// `sizeof(struct tc_prio_qopt)`: an `int` and 16 bytes.
const QOPT_LEN: usize = 20;

const USAGE: &str = "Usage: ... prio [ bands NUMBER ] [ priomap P1 P2 ...] [multiqueue]";

impl QdiscKind for Prio {
    const NAME: &'static str = "prio";
    const CLASSFUL: bool = true;
    type Opts = PrioOpts;

    fn parse(cur: &mut Cur) -> Result<PrioOpts, TcError> {
        let mut o = PrioOpts::default();
        let mut pmap = false;
        let mut idx = 0usize;
        while let Some((at, w)) = cur.next_word() {
            match w {
                "bands" => {
                    if pmap {
                        return Err(TcError::usage(USAGE, Some(at)));
                    }
                    let (i, v) = cur.value()?;
                    o.bands = v
                        .parse::<i32>()
                        .ok()
                        .and_then(|b| u32::try_from(b).ok())
                        .ok_or_else(|| illegal("bands", i, None))?;
                }
                "priomap" => {
                    if pmap {
                        return Err(TcError::usage("Error: duplicate priomap", Some(at)));
                    }
                    pmap = true;
                }
                "multiqueue" => o.multiqueue = true,
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => {
                    if !pmap {
                        return Err(what_is(w, at, USAGE));
                    }
                    let band: u32 = w.parse().map_err(|_| illegal("priomap\" element", at, None))?;
                    if band >= o.bands || idx > 15 {
                        return Err(TcError::usage("Illegal \"priomap\" element", Some(at)));
                    }
                    o.priomap[idx] = band as u8;
                    idx += 1;
                }
            }
        }
        Ok(o)
    }

    fn args(o: &PrioOpts) -> String {
        let mut s = format!(" bands {} priomap", o.bands);
        for b in &o.priomap {
            let _ = write!(s, " {b}");
        }
        if o.multiqueue {
            s.push_str(" multiqueue");
        }
        s
    }

    fn show(o: &PrioOpts, _dev: &Device, _d: bool) -> String {
        show_priomap(o.bands, &o.priomap)
    }

    fn json(o: &PrioOpts, _dev: &Device, _d: bool) -> J {
        json_priomap(o.bands, &o.priomap)
    }

    /// `prio_tune`: 2..=16 bands, every priomap entry a band.
    fn change(_dev: &Device, n: PrioOpts, _old: Option<&PrioOpts>) -> Result<PrioOpts, TcError> {
        if !(2..=16).contains(&n.bands) || n.priomap.iter().any(|&b| b as u32 >= n.bands) {
            return Err(TcError::errno("Invalid argument"));
        }
        Ok(n)
    }

    fn encode(o: &PrioOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        if o.priomap.len() > 16 {
            return Err(Unencodable {
                kind: "prio",
                option: "priomap".into(),
                why: format!("{} entries (the kernel holds 16)", o.priomap.len()),
            });
        }
        let mut qopt = [0u8; QOPT_LEN];
        qopt[..4].copy_from_slice(&o.bands.to_ne_bytes());
        qopt[4..4 + o.priomap.len()].copy_from_slice(&o.priomap);
        out.begin_nest(TCA_OPTIONS).raw(&qopt).begin_nest(TCA_OPTIONS);
        if o.multiqueue {
            out.put_flag(TCA_PRIO_MQ);
        }
        out.end_nest().end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<PrioOpts, DecodeError> {
        let p = options.ok_or_else(|| DecodeError::new("prio", "no options"))?;
        let (bands, priomap) =
            decode_qopt(p).ok_or_else(|| DecodeError::new("prio", "short tc_prio_qopt"))?;
        let multiqueue =
            find(&p[QOPT_LEN..], TCA_OPTIONS).is_some_and(|n| attrs(n).any(|(t, _)| t == TCA_PRIO_MQ));
        Ok(PrioOpts { bands, priomap, multiqueue })
    }

    const CLASS_OPS: bool = true;

    /// Bands `1..=bands`.
    fn has_class(o: &PrioOpts, _dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        (1..=o.bands).contains(&classid.minor())
    }

    fn classes(o: &PrioOpts, _dev: &Device, q: &QdiscNode) -> ClassList {
        ClassList::Implicit((1..=o.bands).map(|b| (Handle::new(q.handle.major(), b), q.handle)).collect())
    }

    /// Filters go on the qdisc only.
    fn filter_block(_o: &PrioOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("Class doesn't support blocks")))
    }

    fn build(o: &PrioOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let major = q.handle.major();
        let mut map = [0u8; 16];
        for (m, b) in map.iter_mut().zip(&o.priomap) {
            *m = *b;
        }
        let mut prio =
            Core::new(PrioConfig { bands: o.bands as usize, priomap: map, major, ..PrioConfig::default() })?;
        let mut classes = Vec::new();
        for b in 0..o.bands {
            let id = Handle::new(major, b + 1);
            let child = cx.dev.qdisc_at(id);
            if let Some(c) = child {
                prio.set_band_qdisc(b as usize, cx.child(c)?)?;
            }
            classes.push(ClassShape {
                classid: id,
                inner: false,
                child: child.filter(|c| c.opts.is_classful()).map(|c| c.handle),
            });
        }
        let mut fb = [Handle::UNSPEC; 16];
        for (f, b) in fb.iter_mut().zip(&map) {
            *f = Handle::new(major, *b as u32 + 1);
        }
        cx.cls
            .set_shape(QdiscShape {
                handle: q.handle,
                kind: ShapeKind::Bands,
                classes,
                fallback: Fallback::Priomap(fb),
            })
            .map_err(BuildError::Filter)?;
        Ok(Box::new(prio))
    }

    fn label(o: &PrioOpts) -> Option<String> {
        Some(format!("{} bands", o.bands))
    }
}

/// `struct tc_prio_qopt` at the head of `p`: bands and the 16-entry priomap.
pub(crate) fn decode_qopt(p: &[u8]) -> Option<(u32, Vec<u8>)> {
    let q = p.get(..QOPT_LEN)?;
    Some((u32::from_ne_bytes(q[..4].try_into().ok()?), q[4..].to_vec()))
}

/// `prio_print_opt`'s text: `bands N priomap P0 ... P15`.
pub(crate) fn show_priomap(bands: u32, priomap: &[u8]) -> String {
    let mut s = format!("bands {bands} priomap");
    for b in priomap {
        let _ = write!(s, " {b}");
    }
    s
}

/// `prio_print_opt`'s JSON (multiqueue is false: the kernel dumps no `TCA_PRIO_MQ`).
pub(crate) fn json_priomap(bands: u32, priomap: &[u8]) -> J {
    let mut j = J::obj();
    j.put("bands", bands)
        .put("priomap", J::Arr(priomap.iter().map(|&b| J::from(b)).collect()))
        .put("multiqueue", false);
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiqueue_is_a_flag_in_the_inner_nest() {
        let o = PrioOpts { multiqueue: true, ..PrioOpts::default() };
        let mut a = Attrs::new();
        Prio::encode(&o, &mut a).unwrap();
        let b = a.into_bytes();
        // Outer: 4 + 20 (struct) + inner nest (4 + the flag's 4).
        assert_eq!(&b[..4], &[32, 0, 2, 0]);
        assert_eq!(&b[24..], &[8, 0, 2, 0, 4, 0, 1, 0]);
        assert_eq!(Prio::decode(Some(&b[4..])).unwrap(), o);
    }
}
