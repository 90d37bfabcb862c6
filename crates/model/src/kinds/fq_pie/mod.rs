//! fq_pie: flow queueing with a PIE controller per flow. tc's `q_fq_pie.c`, the kernel's
//! `sch_fq_pie.c`; the algorithm is `sluice_core::fq_pie` (its per-flow controller is pie's).
//!
//! tc sends a `TCA_OPTIONS` nest marked `NLA_F_NESTED` (empty when nothing was given) with the
//! numbers that are not 0, then the switches that were given. The PIE words and their printing
//! are pie's ([`PieShared`]).

use super::pie::PieShared;
use super::{BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, size_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{attrs, u32_of, Attrs, NLA_F_NESTED};
use crate::print::time_us;
use serde::{Deserialize, Serialize};
use sluice_core::fq_pie::{
    FqPie as Core, FqPieConfig, DEFAULT_ECN_PROB, DEFAULT_FLOWS, DEFAULT_LIMIT, DEFAULT_MEMORY_LIMIT,
    MAX_FLOWS, MAX_QUANTUM,
};
use sluice_core::units::format_size;
use sluice_core::Qdisc;
use std::fmt::Write;

/// fq_pie options: what tc sent (`None`: not given, the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FqPieOpts {
    /// Packets (10240).
    pub limit: Option<u32>,
    /// Flow buckets (1024; fixed once created).
    pub flows: Option<u32>,
    /// DRR quantum bytes (psched_mtu).
    pub quantum: Option<u32>,
    /// Memory limit bytes (32 MiB; counted, not enforced).
    pub memory_limit: Option<u32>,
    /// Mark instead of drop up to this probability, percent (10).
    pub ecn_prob: Option<u32>,
    /// The per-flow controller's options.
    #[serde(flatten)]
    pub pie: PieShared,
}

/// The kind.
pub struct FqPie;

/// `TCA_FQ_PIE_*` (`linux/pkt_sched.h`).
mod attr {
    pub const LIMIT: u16 = 1;
    pub const FLOWS: u16 = 2;
    pub const TARGET: u16 = 3;
    pub const TUPDATE: u16 = 4;
    pub const ALPHA: u16 = 5;
    pub const BETA: u16 = 6;
    pub const QUANTUM: u16 = 7;
    pub const MEMORY_LIMIT: u16 = 8;
    pub const ECN_PROB: u16 = 9;
    pub const ECN: u16 = 10;
    pub const BYTEMODE: u16 = 11;
    pub const DQ_RATE_ESTIMATOR: u16 = 12;
}

const USAGE: &str = "Usage: ... fq_pie [ limit PACKETS ] [ flows NUMBER ]\n                  [ target TIME ] [ tupdate TIME ]\n                  [ alpha NUMBER ] [ beta NUMBER ]\n                  [ quantum BYTES ] [ memory_limit BYTES ]\n                  [ ecn_prob PERCENTAGE ] [ [no]ecn ]\n                  [ [no]bytemode ] [ [no_]dq_rate_estimator ]";

impl QdiscKind for FqPie {
    const NAME: &'static str = "fq_pie";
    type Opts = FqPieOpts;

    fn parse(cur: &mut Cur) -> Result<FqPieOpts, TcError> {
        let mut o = FqPieOpts::default();
        // tc sends none of the numbers when zero: the kernel's default.
        let nonzero = |v: u32| Some(v).filter(|&v| v != 0);
        while let Some((at, w)) = cur.next_word() {
            if o.pie.parse_word(w, cur)? {
                continue;
            }
            match w {
                "limit" => o.limit = nonzero(u32_arg(cur, "limit")?),
                "flows" => o.flows = nonzero(u32_arg(cur, "flows")?),
                "quantum" => o.quantum = nonzero(size_arg(cur, "quantum")?),
                "memory_limit" => o.memory_limit = nonzero(size_arg(cur, "memory_limit")?),
                "ecn_prob" => {
                    let (i, v) = cur.value()?;
                    let v = get_u32(v).filter(|&v| v < 100).ok_or_else(|| illegal("ecn_prob", i, None))?;
                    o.ecn_prob = nonzero(v);
                }
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => return Err(what_is(w, at, USAGE)),
            }
        }
        Ok(o)
    }

    fn args(o: &FqPieOpts) -> String {
        let mut s = String::new();
        for (k, v) in [("limit", o.limit), ("flows", o.flows)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        o.pie.args_gains(&mut s);
        for (k, v) in [("quantum", o.quantum), ("memory_limit", o.memory_limit), ("ecn_prob", o.ecn_prob)] {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        o.pie.args_flags(&mut s);
        s
    }

    fn show(o: &FqPieOpts, dev: &Device, _d: bool) -> String {
        let mut s = format!(
            "limit {}p flows {} ",
            o.limit.unwrap_or(DEFAULT_LIMIT),
            o.flows.unwrap_or(DEFAULT_FLOWS)
        );
        o.pie.show_gains(&mut s);
        let _ = write!(
            s,
            "quantum {} memory_limit {} ecn_prob {} ",
            format_size(quantum(o, dev) as u64),
            format_size(o.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) as u64),
            o.ecn_prob.unwrap_or(DEFAULT_ECN_PROB)
        );
        o.pie.show_flags(&mut s);
        s
    }

    fn json(o: &FqPieOpts, dev: &Device, _d: bool) -> J {
        let mut j = J::obj();
        j.put("limit", o.limit.unwrap_or(DEFAULT_LIMIT)).put("flows", o.flows.unwrap_or(DEFAULT_FLOWS));
        o.pie.json_gains(&mut j);
        j.put("quantum", quantum(o, dev))
            .put("memory_limit", o.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT))
            .put("ecn_prob", o.ecn_prob.unwrap_or(DEFAULT_ECN_PROB));
        o.pie.json_flags(&mut j);
        j
    }

    fn xstats_text(_o: &FqPieOpts, _dev: &Device) -> String {
        "  pkts_in 0 overlimit 0 overmemory 0 dropped 0 ecn_mark 0\n  new_flow_count 0 new_flows_len 0 old_flows_len 0 memory_used 0\n".into()
    }

    fn xstats_json(_o: &FqPieOpts) -> Option<J> {
        let mut j = J::obj();
        for k in [
            "pkts_in",
            "overlimit",
            "overmemory",
            "dropped",
            "ecn_mark",
            "new_flow_count",
            "new_flows_len",
            "old_flows_len",
            "memory_used",
        ] {
            j.put(k, 0u32);
        }
        Some(j)
    }

    /// `fq_pie_change`: the attribute policy holds the quantum to 1..2^20; the number of flows
    /// is 1..65536 and cannot be sent again once the qdisc exists; what is not sent keeps its
    /// value.
    fn change(_dev: &Device, n: FqPieOpts, old: Option<&FqPieOpts>) -> Result<FqPieOpts, TcError> {
        if n.quantum.is_some_and(|q| q == 0 || q > MAX_QUANTUM) {
            return Err(TcError::kernel("integer out of range"));
        }
        let Some(o) = old else {
            if n.flows.is_some_and(|f| f == 0 || f > MAX_FLOWS) {
                return Err(TcError::kernel("fq_pie: Number of flows must range in [1..65536]"));
            }
            return Ok(n);
        };
        if n.flows.is_some() {
            return Err(TcError::kernel("fq_pie: Number of flows cannot be changed"));
        }
        Ok(FqPieOpts {
            limit: n.limit.or(o.limit),
            flows: o.flows,
            quantum: n.quantum.or(o.quantum),
            memory_limit: n.memory_limit.or(o.memory_limit),
            ecn_prob: n.ecn_prob.or(o.ecn_prob),
            pie: n.pie.merge(&o.pie),
        })
    }

    /// A nest (`NLA_F_NESTED`) with what was given, in `fq_pie_parse_opt`'s order.
    fn encode(o: &FqPieOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        let p = &o.pie;
        out.begin_nest(TCA_OPTIONS | NLA_F_NESTED);
        let words = [
            (attr::LIMIT, o.limit),
            (attr::FLOWS, o.flows),
            (attr::TARGET, p.target),
            (attr::TUPDATE, p.tupdate),
            (attr::ALPHA, p.alpha),
            (attr::BETA, p.beta),
            (attr::QUANTUM, o.quantum),
            (attr::MEMORY_LIMIT, o.memory_limit),
            (attr::ECN_PROB, o.ecn_prob),
            (attr::ECN, p.ecn.map(u32::from)),
            (attr::BYTEMODE, p.bytemode.map(u32::from)),
            (attr::DQ_RATE_ESTIMATOR, p.dq_rate_estimator.map(u32::from)),
        ];
        for (ty, v) in words {
            if let Some(v) = v {
                out.put_u32(ty, v);
            }
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<FqPieOpts, DecodeError> {
        let mut o = FqPieOpts::default();
        for (ty, p) in attrs(options.unwrap_or_default()) {
            let v =
                u32_of(p).ok_or_else(|| DecodeError::new("fq_pie", format!("attribute {ty} is short")))?;
            let q = &mut o.pie;
            match ty {
                attr::LIMIT => o.limit = Some(v),
                attr::FLOWS => o.flows = Some(v),
                attr::TARGET => q.target = Some(v),
                attr::TUPDATE => q.tupdate = Some(v),
                attr::ALPHA => q.alpha = Some(v),
                attr::BETA => q.beta = Some(v),
                attr::QUANTUM => o.quantum = Some(v),
                attr::MEMORY_LIMIT => o.memory_limit = Some(v),
                attr::ECN_PROB => o.ecn_prob = Some(v),
                attr::ECN => q.ecn = Some(v != 0),
                attr::BYTEMODE => q.bytemode = Some(v != 0),
                attr::DQ_RATE_ESTIMATOR => q.dq_rate_estimator = Some(v != 0),
                _ => {}
            }
        }
        Ok(o)
    }

    fn build(o: &FqPieOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let mut core = Core::new(FqPieConfig {
            params: o.pie.params(o.limit.unwrap_or(DEFAULT_LIMIT)),
            flows: o.flows.unwrap_or(DEFAULT_FLOWS),
            quantum: quantum(o, cx.dev),
            memory_limit: o.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT),
            ecn_prob: o.ecn_prob.unwrap_or(DEFAULT_ECN_PROB),
            mtu: cx.dev.psched_mtu(),
            seed: PieShared::seed(cx.seed, q.handle),
        })?;
        core.set_handle(q.handle);
        Ok(Box::new(core))
    }

    fn label(o: &FqPieOpts) -> Option<String> {
        Some(format!("target {}", time_us(o.pie.target_shown())))
    }
}

/// The quantum the kernel keeps: psched_mtu when not given.
fn quantum(o: &FqPieOpts, dev: &Device) -> u32 {
    o.quantum.unwrap_or(dev.psched_mtu())
}
