//! The running netem, with its child qdisc (any qdisc whose parent is one of its classes).

use super::{dist_table, NetemDist, NetemLoss, NetemOpts};
use crate::build::BuildError;
use crate::kinds::BuildCx;
use crate::model::{QdiscNode, H_INGRESS, H_ROOT};
use sluice_core::netem::{LossModel, Netem, NetemConfig, NetemRate, NetemSlot};
use sluice_core::{Qdisc, Span};

pub(super) fn build(
    n: &NetemOpts,
    q: &QdiscNode,
    cx: &mut BuildCx<'_>,
) -> Result<Box<dyn Qdisc>, BuildError> {
    // A duplicate goes to the tree's outbox (the classifier holds it): the engine's owner copies
    // the frame and the engine enqueues the copy at the root. A corrupted packet keeps its
    // payload, marked: the simulator's receiver discards it, the live shaper flips a bit.
    let cor = n.corr.unwrap_or_default();
    let table = |d: &Option<NetemDist>| d.as_ref().map(|d| dist_table(d).into());
    let loss = match n.loss_model {
        Some(NetemLoss::State { p13, p31, p32, p23, p14 }) => {
            LossModel::FourState { p13, p31, p32, p23, p14 }
        }
        Some(NetemLoss::Gemodel { p, r, h, k1 }) => LossModel::GilbertElliott { p, r, h, k1 },
        None if n.loss != 0 => LossModel::Random { p: n.loss, corr: cor.loss },
        None => LossModel::None,
    };
    let ns = |v: i64| Span::from_nanos(v.max(0) as u64);
    let reorder = n.reorder.unwrap_or_default();
    let corrupt = n.corrupt.unwrap_or_default();
    let mut netem = Netem::new(NetemConfig {
        limit: n.limit,
        latency: Span::from_nanos(n.latency),
        jitter: Span::from_nanos(n.jitter),
        delay_corr: cor.delay,
        delay_dist: table(&n.distribution),
        loss,
        ecn: n.ecn,
        duplicate: n.duplicate,
        dup_corr: cor.duplicate,
        corrupt: corrupt.probability,
        corrupt_corr: corrupt.correlation,
        // sch_netem: a gap without a reorder attribute reorders every gap-th packet.
        reorder: if n.gap != 0 && n.reorder.is_none() { u32::MAX } else { reorder.probability },
        reorder_corr: reorder.correlation,
        gap: n.gap,
        rate: n.rate.filter(|r| r.bytes_per_sec != 0).map(|r| NetemRate {
            bytes_per_sec: r.bytes_per_sec,
            packet_overhead: r.packet_overhead,
            cell_size: r.cell_size,
            cell_overhead: r.cell_overhead,
        }),
        slot: n.slot.filter(|s| s.min_delay != 0 || s.max_delay != 0 || s.dist_jitter != 0).map(|s| {
            NetemSlot {
                min_delay: ns(s.min_delay),
                max_delay: ns(s.max_delay),
                dist_delay: ns(s.dist_delay),
                dist_jitter: ns(s.dist_jitter),
                dist: table(&n.slot_distribution),
                max_packets: s.max_packets.max(0) as u32,
                max_bytes: s.max_bytes.max(0) as u32,
            }
        }),
        seed: cx.seed
            ^ ((q.handle.major() as u64) << 32 | q.handle.minor() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    })?;
    if n.duplicate != 0 {
        netem.set_duplicates(cx.cls.duplicates_outbox());
    }
    let dev = cx.dev;
    if let Some(c) = dev
        .qdiscs
        .iter()
        .find(|c| c.parent != H_ROOT && c.parent != H_INGRESS && c.parent.qdisc() == q.handle)
    {
        netem.set_child(cx.child(c)?);
    }
    Ok(Box::new(netem))
}
