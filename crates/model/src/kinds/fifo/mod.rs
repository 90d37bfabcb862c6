//! pfifo, bfifo and pfifo_head_drop: one options struct, three kinds. tc's `q_fifo.c`, the
//! kernel's `sch_fifo.c`; the algorithm is `sluice_core::fifo`.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{size_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode, QdiscOpts};
use crate::nlattr::{u32_of, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::fifo::{Fifo as Core, FifoKind};
use sluice_core::units::format_size;
use sluice_core::Qdisc;

/// pfifo/bfifo/pfifo_head_drop.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FifoOpts {
    /// Packets (pfifo, pfifo_head_drop) or bytes (bfifo); default from txqueuelen.
    pub limit: Option<u32>,
}

/// Packet-limited FIFO.
pub struct Pfifo;
/// Byte-limited FIFO.
pub struct Bfifo;
/// Packet FIFO dropping from the head when full.
pub struct PfifoHeadDrop;

const USAGE: &str = "Usage: ... <[p|b]fifo | pfifo_head_drop> [ limit NUMBER ]";

/// What tells the three kinds apart.
trait Flavour {
    const NAME: &'static str;
    const CORE: FifoKind;
    /// The limit counts bytes.
    const BYTES: bool = false;
}

impl Flavour for Pfifo {
    const NAME: &'static str = "pfifo";
    const CORE: FifoKind = FifoKind::Pfifo;
}

impl Flavour for Bfifo {
    const NAME: &'static str = "bfifo";
    const CORE: FifoKind = FifoKind::Bfifo;
    const BYTES: bool = true;
}

impl Flavour for PfifoHeadDrop {
    const NAME: &'static str = "pfifo_head_drop";
    const CORE: FifoKind = FifoKind::PfifoHeadDrop;
}

/// The limit the kernel uses when none was sent (`fifo_init`: txqueuelen packets, or that many
/// psched_mtu bytes; at least 1 packet).
fn default_limit<F: Flavour>(dev: &Device) -> u32 {
    let packets = dev.txqueuelen.max(1);
    if F::BYTES {
        packets * dev.psched_mtu()
    } else {
        packets
    }
}

fn parse<F: Flavour>(cur: &mut Cur) -> Result<FifoOpts, TcError> {
    let mut o = FifoOpts::default();
    while let Some((at, w)) = cur.next_word() {
        if w == "limit" {
            o.limit = Some(if F::BYTES { size_arg(cur, "limit")? } else { u32_arg(cur, "limit")? });
        } else {
            return Err(what_is(w, at, USAGE));
        }
    }
    Ok(o)
}

fn args(o: &FifoOpts) -> String {
    o.limit.map(|l| format!(" limit {l}")).unwrap_or_default()
}

fn show<F: Flavour>(o: &FifoOpts, dev: &Device) -> String {
    let l = o.limit.unwrap_or_else(|| default_limit::<F>(dev));
    if F::BYTES {
        format!("limit {}", format_size(l as u64))
    } else {
        format!("limit {l}p")
    }
}

fn json<F: Flavour>(o: &FifoOpts, dev: &Device) -> J {
    let mut j = J::obj();
    j.put("limit", o.limit.unwrap_or_else(|| default_limit::<F>(dev)));
    j
}

/// `struct tc_fifo_qopt` when a limit was given (tc sends nothing otherwise).
fn encode(o: &FifoOpts, out: &mut Attrs) -> Result<(), Unencodable> {
    if let Some(l) = o.limit {
        out.put_u32(TCA_OPTIONS, l);
    }
    Ok(())
}

fn decode<F: Flavour>(options: Option<&[u8]>) -> Result<FifoOpts, DecodeError> {
    match options {
        None => Ok(FifoOpts::default()),
        Some(p) => u32_of(p)
            .map(|l| FifoOpts { limit: Some(l) })
            .ok_or_else(|| DecodeError::new(F::NAME, "struct tc_fifo_qopt is short")),
    }
}

fn build<F: Flavour>(o: &FifoOpts, dev: &Device) -> Result<Box<dyn Qdisc>, BuildError> {
    let limit = o.limit.unwrap_or(if F::BYTES { dev.txqueuelen * dev.psched_mtu() } else { dev.txqueuelen });
    Ok(Box::new(Core::new(F::CORE, Some(limit as u64))?))
}

fn label<F: Flavour>(o: &FifoOpts) -> Option<String> {
    Some(format!("limit {}{}", o.limit?, if F::BYTES { "b" } else { "p" }))
}

/// The three kinds share every hook; only the flavour differs.
macro_rules! fifo_kind {
    ($kind:ty) => {
        impl QdiscKind for $kind {
            const NAME: &'static str = <$kind as Flavour>::NAME;
            type Opts = FifoOpts;

            fn parse(cur: &mut Cur) -> Result<FifoOpts, TcError> {
                parse::<$kind>(cur)
            }
            fn args(o: &FifoOpts) -> String {
                args(o)
            }
            fn show(o: &FifoOpts, dev: &Device, _d: bool) -> String {
                show::<$kind>(o, dev)
            }
            fn json(o: &FifoOpts, dev: &Device, _d: bool) -> J {
                json::<$kind>(o, dev)
            }
            fn encode(o: &FifoOpts, out: &mut Attrs) -> Result<(), Unencodable> {
                encode(o, out)
            }
            fn decode(options: Option<&[u8]>) -> Result<FifoOpts, DecodeError> {
                decode::<$kind>(options)
            }
            fn build(
                o: &FifoOpts,
                _q: &QdiscNode,
                cx: &mut BuildCx<'_>,
            ) -> Result<Box<dyn Qdisc>, BuildError> {
                build::<$kind>(o, cx.dev)
            }
            fn label(o: &FifoOpts) -> Option<String> {
                label::<$kind>(o)
            }
        }
    };
}

fifo_kind!(Pfifo);
fifo_kind!(Bfifo);
fifo_kind!(PfifoHeadDrop);

/// The kernel's `fifo_set_limit`: a parent (TBF) that changes its limit passes it on to a fifo
/// child, whichever fifo, in bytes. Other kinds are left alone.
pub fn set_limit(child: &mut QdiscOpts, limit: u32) {
    if let QdiscOpts::Pfifo(f) | QdiscOpts::Bfifo(f) | QdiscOpts::PfifoHeadDrop(f) = child {
        f.limit = Some(limit);
    }
}
