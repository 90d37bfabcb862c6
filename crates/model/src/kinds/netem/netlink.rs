//! netem's `TCA_OPTIONS` as tc 6.1 writes it (`netem_parse_opt`): `struct tc_netem_qopt` (times
//! in scheduler ticks) at the head of the nest, then the attributes in tc's order, each only
//! when tc would send it.

use super::{
    dist_table, NetemCorr, NetemDist, NetemLoss, NetemOpts, NetemProb, NetemRateOpts, NetemSlotOpts,
};
use crate::kinds::{DecodeError, TCA_OPTIONS};
use crate::nlattr::{attrs, u32s, u64_of, Attrs, NLA_F_NESTED};
use sluice_core::netem::dist::BuiltinDist;

/// `TCA_NETEM_*` (`linux/pkt_sched.h`).
mod attr {
    pub const CORR: u16 = 1;
    pub const DELAY_DIST: u16 = 2;
    pub const REORDER: u16 = 3;
    pub const CORRUPT: u16 = 4;
    pub const LOSS: u16 = 5;
    pub const RATE: u16 = 6;
    pub const ECN: u16 = 7;
    pub const RATE64: u16 = 8;
    pub const SLOT: u16 = 12;
    pub const SLOT_DIST: u16 = 13;
    /// `NETEM_LOSS_GI` (the 4-state model), inside `LOSS`.
    pub const LOSS_GI: u16 = 1;
    /// `NETEM_LOSS_GE` (Gilbert-Elliott), inside `LOSS`.
    pub const LOSS_GE: u16 = 2;
}

/// `sizeof(struct tc_netem_qopt)`: latency, limit, loss, gap, duplicate, jitter.
const QOPT_LEN: usize = 24;

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// ns as the kernel's scheduler ticks (what tc sent).
fn ticks(ns: u64) -> u32 {
    (ns >> 6).min(u32::MAX as u64) as u32
}

pub(super) fn encode(n: &NetemOpts, out: &mut Attrs) {
    out.begin_nest(TCA_OPTIONS);
    out.raw(&words(&[ticks(n.latency), n.limit, n.loss, n.gap, n.duplicate, ticks(n.jitter)]));
    if let Some(c) = n.corr {
        out.put(attr::CORR, &words(&[c.delay, c.loss, c.duplicate]));
    }
    if let Some(r) = n.reorder {
        out.put(attr::REORDER, &words(&[r.probability, r.correlation]));
    }
    if n.ecn {
        out.put_u32(attr::ECN, 1);
    }
    if let Some(c) = n.corrupt {
        out.put(attr::CORRUPT, &words(&[c.probability, c.correlation]));
    }
    if let Some(s) = n.slot {
        let mut b = Vec::with_capacity(40);
        b.extend_from_slice(&s.min_delay.to_ne_bytes());
        b.extend_from_slice(&s.max_delay.to_ne_bytes());
        b.extend_from_slice(&s.max_packets.to_ne_bytes());
        b.extend_from_slice(&s.max_bytes.to_ne_bytes());
        b.extend_from_slice(&s.dist_delay.to_ne_bytes());
        b.extend_from_slice(&s.dist_jitter.to_ne_bytes());
        out.put(attr::SLOT, &b);
    }
    if let Some(l) = n.loss_model {
        out.begin_nest(attr::LOSS | NLA_F_NESTED);
        match l {
            NetemLoss::State { p13, p31, p32, p23, p14 } => {
                out.put(attr::LOSS_GI, &words(&[p13, p31, p32, p14, p23]))
            }
            NetemLoss::Gemodel { p, r, h, k1 } => out.put(attr::LOSS_GE, &words(&[p, r, h, k1])),
        };
        out.end_nest();
    }
    if let Some(r) = n.rate {
        // The 64-bit rate goes first, and the 32-bit field says "see RATE64".
        let rate32 = if r.bytes_per_sec >= 1 << 32 {
            out.put_u64(attr::RATE64, r.bytes_per_sec);
            u32::MAX
        } else {
            r.bytes_per_sec as u32
        };
        let mut b = words(&[rate32]);
        b.extend_from_slice(&r.packet_overhead.to_ne_bytes());
        b.extend_from_slice(&r.cell_size.to_ne_bytes());
        b.extend_from_slice(&r.cell_overhead.to_ne_bytes());
        out.put(attr::RATE, &b);
    }
    for (ty, d) in [(attr::DELAY_DIST, &n.distribution), (attr::SLOT_DIST, &n.slot_distribution)] {
        if let Some(d) = d {
            out.put(ty, &dist_table(d).iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>());
        }
    }
    out.end_nest();
}

/// A table as tc sent it: a built-in by its values, else a table read from a file (whose name
/// tc does not send: `custom`).
fn dist_of(p: &[u8]) -> NetemDist {
    let table: Vec<i16> = p.chunks_exact(2).map(|c| i16::from_ne_bytes([c[0], c[1]])).collect();
    for b in [BuiltinDist::Normal, BuiltinDist::Pareto, BuiltinDist::ParetoNormal] {
        if b.table()[..] == table[..] {
            return NetemDist { name: b.name().to_string(), table: Vec::new() };
        }
    }
    NetemDist { name: "custom".to_string(), table }
}

pub(super) fn decode(options: Option<&[u8]>) -> Result<NetemOpts, DecodeError> {
    let err = |what: &str| DecodeError::new("netem", format!("{what} is short"));
    let p = options.unwrap_or_default();
    let [latency, limit, loss, gap, duplicate, jitter] = u32s::<6>(p).ok_or_else(|| err("tc_netem_qopt"))?;
    let mut o = NetemOpts {
        limit,
        latency: (latency as u64) << 6,
        jitter: (jitter as u64) << 6,
        loss,
        gap,
        duplicate,
        ..NetemOpts::default()
    };
    let mut rate64 = None;
    for (ty, a) in attrs(&p[QOPT_LEN..]) {
        match ty {
            attr::CORR => {
                let [delay, loss, duplicate] = u32s::<3>(a).ok_or_else(|| err("CORR"))?;
                o.corr = Some(NetemCorr { delay, loss, duplicate });
            }
            attr::REORDER | attr::CORRUPT => {
                let [probability, correlation] = u32s::<2>(a).ok_or_else(|| err("REORDER/CORRUPT"))?;
                let v = Some(NetemProb { probability, correlation });
                if ty == attr::REORDER {
                    o.reorder = v;
                } else {
                    o.corrupt = v;
                }
            }
            attr::ECN => o.ecn = u32s::<1>(a).ok_or_else(|| err("ECN"))?[0] != 0,
            attr::SLOT => {
                let w = u32s::<10>(a).ok_or_else(|| err("SLOT"))?;
                // The length was checked: the 8-byte fields are there.
                let i64_at = |at: usize| a[at..at + 8].try_into().map(i64::from_ne_bytes).unwrap_or(0);
                o.slot = Some(NetemSlotOpts {
                    min_delay: i64_at(0),
                    max_delay: i64_at(8),
                    max_packets: w[4] as i32,
                    max_bytes: w[5] as i32,
                    dist_delay: i64_at(24),
                    dist_jitter: i64_at(32),
                });
            }
            attr::LOSS => {
                for (t, m) in attrs(a) {
                    o.loss_model = match t {
                        attr::LOSS_GI => {
                            let [p13, p31, p32, p14, p23] = u32s::<5>(m).ok_or_else(|| err("LOSS_GI"))?;
                            Some(NetemLoss::State { p13, p31, p32, p23, p14 })
                        }
                        attr::LOSS_GE => {
                            let [p, r, h, k1] = u32s::<4>(m).ok_or_else(|| err("LOSS_GE"))?;
                            Some(NetemLoss::Gemodel { p, r, h, k1 })
                        }
                        _ => o.loss_model,
                    };
                }
            }
            attr::RATE64 => rate64 = Some(u64_of(a).ok_or_else(|| err("RATE64"))?),
            attr::RATE => {
                let [rate, packet_overhead, cell_size, cell_overhead] =
                    u32s::<4>(a).ok_or_else(|| err("RATE"))?;
                o.rate = Some(NetemRateOpts {
                    bytes_per_sec: rate as u64,
                    packet_overhead: packet_overhead as i32,
                    cell_size,
                    cell_overhead: cell_overhead as i32,
                });
            }
            attr::DELAY_DIST => o.distribution = Some(dist_of(a)),
            attr::SLOT_DIST => o.slot_distribution = Some(dist_of(a)),
            _ => {}
        }
    }
    if let (Some(r), Some(r64)) = (&mut o.rate, rate64) {
        r.bytes_per_sec = r64;
    }
    Ok(o)
}
