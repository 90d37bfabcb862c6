//! Where scenarios meet the real qdiscs: link queues from short specs, and the shaper from a
//! tc script or the structured form. This is the one place to wire new core components in.

use crate::legacy::LegacyHtbClass;
use crate::model::{ClassSpec, QueueFactory};
use crate::scenario::file::ShaperFile;
use crate::scenario::ScenarioError;
use crate::scenario::Ctx;
use crate::shaper::ExactShaper;
use sluice_core::fifo::{Fifo, FifoKind};
use sluice_core::units::parse_size;
use sluice_core::{Handle, Qdisc, Rate, Span, WireSpec};
use std::sync::Arc;

/// A shared queue builder.
pub(crate) type SharedFactory = Arc<dyn Fn() -> Box<dyn Qdisc> + Send + Sync>;

pub(crate) fn clone_factory(f: &SharedFactory) -> QueueFactory {
    let f = f.clone();
    Box::new(move || f())
}

/// A link queue from `"pfifo [N]"`, `"bfifo [SIZE]"` or `"pfifo_head_drop [N]"`.
pub(crate) fn queue_factory(spec: &str) -> Result<QueueFactory, String> {
    let mut it = spec.split_whitespace();
    let kind = it.next().unwrap_or("");
    let arg = it.next();
    if let Some(extra) = it.next() {
        return Err(format!("unexpected `{extra}` in queue `{spec}`"));
    }
    let (k, limit) = match kind {
        "pfifo" | "pfifo_head_drop" => {
            let n = match arg {
                Some(a) => Some(a.parse::<u64>().map_err(|_| format!("`{a}` is not a packet count"))?),
                None => None,
            };
            (if kind == "pfifo" { FifoKind::Pfifo } else { FifoKind::PfifoHeadDrop }, n)
        }
        "bfifo" => (FifoKind::Bfifo, arg.map(|a| parse_size(a).map_err(|e| e.to_string())).transpose()?),
        _ => return Err(format!("unknown queue `{spec}`")),
    };
    Fifo::new(k, limit).map_err(|e| e.to_string())?;
    Ok(Box::new(move || Box::new(Fifo::new(k, limit).expect("validated above"))))
}

/// Builds the shaper of a case.
pub(crate) fn shaper(ctx: &Ctx, s: &ShaperFile, wire: WireSpec) -> Result<(SharedFactory, Vec<ClassSpec>), ScenarioError> {
    if s.tc.is_some() || s.file.is_some() {
        let q = s.tc.as_ref().or(s.file.as_ref()).expect("checked");
        return Err(ctx.err(
            Some(q.span()),
            "tc-script shapers need sluice-config, which is not merged into this build yet",
            Some("use the structured form ([[shaper.class]]) for now"),
        ));
    }
    let kind = s.kind.as_ref().map(|q| ctx.text(q)).transpose()?.unwrap_or_else(|| "htb".into());
    let mut classes = Vec::new();
    for c in &s.class {
        let rate = ctx.rate(&c.rate)?;
        let ceil = c.ceil.as_ref().map(|q| ctx.rate(q)).transpose()?.unwrap_or(rate);
        if ceil < rate {
            return Err(ctx.err(Some(c.ceil.as_ref().expect("set").span()), "ceil is below rate", Some("ceil >= rate")));
        }
        classes.push(ClassSpec { id: ctx.handle(&c.id)?, rate, ceil });
    }
    let Some(first) = s.class.first() else {
        return Err(ctx.err(s.kind.as_ref().map(|q| q.span()), "the shaper has no [[shaper.class]]", Some("add at least one class")));
    };
    let limit = match &first.leaf {
        Some(q) => {
            let t = ctx.text(q)?;
            let mut it = t.split_whitespace();
            match (it.next(), it.next()) {
                (Some("pfifo"), Some(n)) => n.parse::<u32>().map_err(|_| ctx.err(Some(q.span()), format!("bad limit `{n}`"), None))?,
                (Some("pfifo"), None) => 1000,
                _ => {
                    return Err(ctx.err(
                        Some(q.span()),
                        format!("leaf `{t}` needs a qdisc that is not merged into this build yet"),
                        Some("use `pfifo [N]` for now"),
                    ))
                }
            }
        }
        None => 1000,
    };
    match kind.as_str() {
        "legacy-2.6.30" => {
            if classes.len() != 1 {
                return Err(ctx.err(s.kind.as_ref().map(|q| q.span()), "the legacy-2.6.30 model has exactly one class", None));
            }
            let mtu = s.mtu.as_ref().map(|q| ctx.uint(q, 1 << 20)).transpose()?.unwrap_or(1600) as u32;
            let timer = s.timer.as_ref().map(|q| ctx.time(q)).transpose()?.unwrap_or(Span::ZERO);
            let rate = classes[0].ceil;
            Ok((Arc::new(move || Box::new(LegacyHtbClass::new(rate, mtu, timer, limit)) as Box<dyn Qdisc>), classes))
        }
        "htb" | "exact" => {
            // Until HTB is merged, a single class is served by the exact token bucket that HTB's
            // leaves are made of; hierarchies are refused rather than approximated.
            if classes.len() != 1 {
                return Err(ctx.err(
                    s.kind.as_ref().map(|q| q.span()).or(Some(first.id.span())),
                    "HTB hierarchies need the htb qdisc, which is not merged into this build yet",
                    Some("use a single [[shaper.class]] for now"),
                ));
            }
            let c = &classes[0];
            let rate = c.ceil;
            let burst = match &first.burst {
                Some(q) => ctx.size(q)?,
                None => default_burst(rate),
            };
            let _ = Handle::ROOT;
            Ok((Arc::new(move || Box::new(ExactShaper::new(rate, burst, wire, limit)) as Box<dyn Qdisc>), classes))
        }
        other => Err(ctx.err(s.kind.as_ref().map(|q| q.span()), format!("unknown shaper kind `{other}`"), Some("htb or legacy-2.6.30"))),
    }
}

/// tc's default HTB burst on a high-resolution kernel: one 1600-byte mtu (rate/HZ with HZ=1e9 adds
/// nothing below 8 Gbit/s), but never less than 1 ms of traffic in Sluice so a late wake-up
/// cannot cost rate. Sluice's own default in the htb component may differ.
pub(crate) fn default_burst(rate: Rate) -> u64 {
    (rate.bytes_per_sec() / 1000).max(1600) + 1600
}
