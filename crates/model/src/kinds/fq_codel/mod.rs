//! fq_codel: flow queueing with CoDel (RFC 8290). tc's `q_fq_codel.c`, the kernel's
//! `sch_fq_codel.c`; the algorithm is `sluice_core::fq_codel`.

use super::{block_at, BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::{codel_params, BuildError};
use crate::error::TcError;
use crate::grammar::{illegal, size_arg, time_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs};
use crate::print::{codel_us, time_us};
use serde::{Deserialize, Serialize};
use sluice_core::fq_codel::{FqCodel as Core, FqCodelConfig};
use sluice_core::units::format_size;
use sluice_core::{Handle, Qdisc};
use std::fmt::Write;

/// fq_codel options: what tc sent (`None`: not given, the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FqCodelOpts {
    /// Packets (10240).
    pub limit: Option<u32>,
    /// Flow buckets (1024).
    pub flows: Option<u32>,
    /// DRR quantum bytes (psched_mtu).
    pub quantum: Option<u32>,
    /// Target µs (5000).
    pub target: Option<u32>,
    /// Interval µs (100000).
    pub interval: Option<u32>,
    /// CE threshold µs.
    pub ce_threshold: Option<u32>,
    /// Memory limit bytes (32 MiB).
    pub memory_limit: Option<u32>,
    /// ECN (on).
    pub ecn: Option<bool>,
    /// Packets dropped per overflow (64).
    pub drop_batch: Option<u32>,
}

/// The kind.
pub struct FqCodel;

/// `TCA_FQ_CODEL_*` (`linux/pkt_sched.h`).
mod attr {
    pub const TARGET: u16 = 1;
    pub const LIMIT: u16 = 2;
    pub const INTERVAL: u16 = 3;
    pub const ECN: u16 = 4;
    pub const FLOWS: u16 = 5;
    pub const QUANTUM: u16 = 6;
    pub const CE_THRESHOLD: u16 = 7;
    pub const DROP_BATCH_SIZE: u16 = 8;
    pub const MEMORY_LIMIT: u16 = 9;
}

const USAGE: &str = "Usage: ... fq_codel [ limit PACKETS ] [ flows NUMBER ]\n                    [ memory_limit BYTES ]\n                    [ target TIME ] [ interval TIME ]\n                    [ quantum BYTES ] [ [no]ecn ]\n                    [ ce_threshold TIME ]\n                    [ ce_threshold_selector VALUE/MASK ]\n                    [ drop_batch SIZE ]";

/// The kernel's defaults (`fq_codel_init`).
const LIMIT: u32 = 10240;
const FLOWS: u32 = 1024;
const TARGET_US: u32 = 5000;
const INTERVAL_US: u32 = 100_000;
const MEMORY_LIMIT: u32 = 32 << 20;
const DROP_BATCH: u32 = 64;

impl QdiscKind for FqCodel {
    const NAME: &'static str = "fq_codel";
    type Opts = FqCodelOpts;

    fn parse(cur: &mut Cur) -> Result<FqCodelOpts, TcError> {
        let mut o = FqCodelOpts::default();
        // tc sends none of these when zero (and no memory limit at ~0): the kernel's default.
        let nonzero = |v: u32| Some(v).filter(|&v| v != 0);
        while let Some((at, w)) = cur.next_word() {
            match w {
                "limit" => o.limit = nonzero(u32_arg(cur, "limit")?),
                "flows" => o.flows = nonzero(u32_arg(cur, "flows")?),
                "quantum" => o.quantum = nonzero(u32_arg(cur, "quantum")?),
                "drop_batch" => {
                    let v = u32_arg(cur, "drop_batch")?;
                    if v == 0 {
                        return Err(illegal("drop_batch", at + 1, None));
                    }
                    o.drop_batch = Some(v);
                }
                "target" => o.target = nonzero(time_arg(cur, "target")?),
                "interval" => o.interval = nonzero(time_arg(cur, "interval")?),
                "ce_threshold" => {
                    o.ce_threshold = Some(time_arg(cur, "ce_threshold")?).filter(|&v| v != u32::MAX)
                }
                "memory_limit" => {
                    o.memory_limit = Some(size_arg(cur, "memory_limit")?).filter(|&v| v != u32::MAX)
                }
                "ecn" => o.ecn = Some(true),
                "noecn" => o.ecn = Some(false),
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        Ok(o)
    }

    fn args(o: &FqCodelOpts) -> String {
        let mut s = String::new();
        let counts = [
            ("limit", o.limit),
            ("flows", o.flows),
            ("quantum", o.quantum),
            ("memory_limit", o.memory_limit),
            ("drop_batch", o.drop_batch),
        ];
        for (k, v) in counts {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        for (k, v) in [("target", o.target), ("interval", o.interval), ("ce_threshold", o.ce_threshold)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}us");
            }
        }
        match o.ecn {
            Some(true) => s.push_str(" ecn"),
            Some(false) => s.push_str(" noecn"),
            None => {}
        }
        s
    }

    fn show(o: &FqCodelOpts, dev: &Device, _d: bool) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "limit {}p flows {} quantum {} target {} ",
            o.limit.unwrap_or(LIMIT),
            o.flows.unwrap_or(FLOWS),
            quantum(o, dev),
            time_us(codel_us(o.target.unwrap_or(TARGET_US)))
        );
        if let Some(ce) = o.ce_threshold {
            let _ = write!(s, "ce_threshold {} ", time_us(codel_us(ce)));
        }
        let _ = write!(
            s,
            "interval {} memory_limit {} ",
            time_us(codel_us(o.interval.unwrap_or(INTERVAL_US))),
            format_size(o.memory_limit.unwrap_or(MEMORY_LIMIT) as u64)
        );
        if o.ecn.unwrap_or(true) {
            s.push_str("ecn ");
        }
        let _ = write!(s, "drop_batch {} ", o.drop_batch.unwrap_or(DROP_BATCH).max(1));
        s
    }

    fn json(o: &FqCodelOpts, dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("limit", o.limit.unwrap_or(LIMIT))
            .put("flows", o.flows.unwrap_or(FLOWS))
            .put("quantum", quantum(o, dev))
            .put("target", codel_us(o.target.unwrap_or(TARGET_US)));
        if let Some(ce) = o.ce_threshold {
            j.put("ce_threshold", codel_us(ce));
        }
        j.put("interval", codel_us(o.interval.unwrap_or(INTERVAL_US)))
            .put("memory_limit", o.memory_limit.unwrap_or(MEMORY_LIMIT));
        if o.ecn.unwrap_or(true) {
            j.put("ecn", true);
        }
        j.put("drop_batch", o.drop_batch.unwrap_or(DROP_BATCH).max(1));
        j
    }

    fn xstats_text(_o: &FqCodelOpts, _dev: &Device) -> String {
        "  maxpacket 0 drop_overlimit 0 new_flow_count 0 ecn_mark 0\n  new_flows_len 0 old_flows_len 0\n"
            .into()
    }

    fn xstats_json(_o: &FqCodelOpts) -> Option<J> {
        let mut j = J::obj();
        for k in
            ["maxpacket", "drop_overlimit", "new_flow_count", "ecn_mark", "new_flows_len", "old_flows_len"]
        {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `fq_codel_change`: the number of flows is fixed once the qdisc exists; what is not sent
    /// keeps its value.
    fn change(_dev: &Device, n: FqCodelOpts, old: Option<&FqCodelOpts>) -> Result<FqCodelOpts, TcError> {
        let Some(o) = old else {
            if n.flows == Some(0) || n.flows.is_some_and(|f| f > 65536) {
                return Err(TcError::errno("Invalid argument"));
            }
            return Ok(n);
        };
        if n.flows.is_some() && n.flows != o.flows {
            return Err(TcError::kernel("fq_codel: Number of flows cannot be changed"));
        }
        Ok(FqCodelOpts {
            limit: n.limit.or(o.limit),
            flows: n.flows.or(o.flows),
            quantum: n.quantum.or(o.quantum),
            target: n.target.or(o.target),
            interval: n.interval.or(o.interval),
            ce_threshold: n.ce_threshold.or(o.ce_threshold),
            memory_limit: n.memory_limit.or(o.memory_limit),
            ecn: n.ecn.or(o.ecn),
            drop_batch: n.drop_batch.or(o.drop_batch),
        })
    }

    /// A nest with what was given, in `fq_codel_parse_opt`'s order (an empty nest when nothing
    /// was).
    fn encode(o: &FqCodelOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        out.begin_nest(TCA_OPTIONS);
        let words = [
            (attr::LIMIT, o.limit),
            (attr::FLOWS, o.flows),
            (attr::QUANTUM, o.quantum),
            (attr::INTERVAL, o.interval),
            (attr::TARGET, o.target),
            (attr::ECN, o.ecn.map(u32::from)),
            (attr::CE_THRESHOLD, o.ce_threshold),
            (attr::MEMORY_LIMIT, o.memory_limit),
            (attr::DROP_BATCH_SIZE, o.drop_batch),
        ];
        for (ty, v) in words {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<FqCodelOpts, DecodeError> {
        let mut o = FqCodelOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let v =
                u32_of(p).ok_or_else(|| DecodeError::new("fq_codel", format!("attribute {ty} is short")))?;
            match ty {
                attr::LIMIT => o.limit = Some(v),
                attr::FLOWS => o.flows = Some(v),
                attr::QUANTUM => o.quantum = Some(v),
                attr::INTERVAL => o.interval = Some(v),
                attr::TARGET => o.target = Some(v),
                attr::ECN => o.ecn = Some(v != 0),
                attr::CE_THRESHOLD => o.ce_threshold = Some(v),
                attr::MEMORY_LIMIT => o.memory_limit = Some(v),
                attr::DROP_BATCH_SIZE => o.drop_batch = Some(v),
                _ => {}
            }
        }
        Ok(o)
    }

    const CLASS_OPS: bool = true;

    /// Filters go on the qdisc only.
    fn filter_block(
        _o: &FqCodelOpts,
        dev: &Device,
        q: &QdiscNode,
        parent: Handle,
    ) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("Class doesn't support blocks")))
    }

    fn build(o: &FqCodelOpts, _q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let d = FqCodelConfig::default();
        Ok(Box::new(Core::new(FqCodelConfig {
            limit: o.limit.unwrap_or(d.limit),
            flows: o.flows.unwrap_or(d.flows),
            quantum: o.quantum.unwrap_or(cx.dev.psched_mtu()),
            memory_limit: o.memory_limit.unwrap_or(d.memory_limit),
            drop_batch: o.drop_batch.unwrap_or(d.drop_batch),
            params: codel_params(o.target, o.interval, o.ce_threshold, o.ecn.unwrap_or(true)),
            ..d
        })?))
    }

    fn label(o: &FqCodelOpts) -> Option<String> {
        Some(format!("target {}", time_us(o.target.unwrap_or(TARGET_US))))
    }
}

/// The quantum the kernel keeps: psched_mtu when not given, at least 256 (`fq_codel_change`).
fn quantum(o: &FqCodelOpts, dev: &Device) -> u32 {
    o.quantum.unwrap_or(dev.psched_mtu()).max(256)
}
