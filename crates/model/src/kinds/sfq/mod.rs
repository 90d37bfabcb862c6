//! sfq: stochastic fairness queueing, with per-flow RED when `redflowlimit` is given. tc's
//! `q_sfq.c`, the kernel's `sch_sfq.c`; the algorithm is `sluice_core::sfq`.
//!
//! tc sends `struct tc_sfq_qopt_v1` as `TCA_OPTIONS` when any option was given, and nothing
//! after the kind otherwise; a value left out is 0, which the kernel's `sfq_change` reads as
//! "keep" for every field except `perturb` and `headdrop`. In RED mode tc derives what the
//! kernel keeps (`Wlog`, `Plog`, `max_P`) with RED's own helpers ([`crate::kinds::red`]); the
//! model holds `Wlog` as `ewma` (see [`flow_red`] for the words that give it back).

mod flow_red;

use super::{block_at, BuildCx, DecodeError, QdiscKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, size_arg, u32_arg, what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::{u32s, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::sfq::{Sfq as Core, SfqConfig, SfqRed as CoreRed};
use sluice_core::units::{format_g, format_size};
use sluice_core::{Handle, Qdisc, Span};
use std::fmt::Write;

/// SFQ options: what tc sent (`None`: not given, the kernel's default applies).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SfqOpts {
    /// Packets (127).
    pub limit: Option<u32>,
    /// DRR quantum in bytes (psched_mtu).
    pub quantum: Option<u32>,
    /// Seconds between hash perturbations (0: never). tc sends 0 whenever it sends options
    /// without it; `Some(0)` keeps a lone `perturb 0`, which tc sends as a request of zeros.
    pub perturb: Option<u32>,
    /// Hash buckets (1024).
    pub divisor: Option<u32>,
    /// Packets per flow (127).
    pub depth: Option<u32>,
    /// Flows (127).
    pub flows: Option<u32>,
    /// Drop from the head of a full flow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headdrop: bool,
    /// Per-flow RED.
    pub red: Option<SfqRed>,
}

/// SFQ's per-flow RED (`redflowlimit`), as the kernel keeps it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SfqRed {
    /// Byte limit per flow.
    pub flowlimit: u32,
    /// Min threshold bytes.
    pub min: u32,
    /// Max threshold bytes.
    pub max: u32,
    /// Max marking probability.
    pub probability: f64,
    /// EWMA weight log (`Wlog`, which tc derives from `avpkt` and `burst`).
    pub ewma: u8,
    /// Mark instead of drop.
    #[serde(default)]
    pub ecn: bool,
    /// Always drop above max.
    #[serde(default)]
    pub harddrop: bool,
}

/// The kind.
pub struct Sfq;

/// `sizeof(struct tc_sfq_qopt_v1)`: the v0 struct (5 words), depth, headdrop, the RED limit and
/// thresholds, four bytes of logs and flags, `max_P`, and six words of RED statistics.
const QOPT_V1_LEN: usize = 72;

/// `TC_RED_ECN`, `TC_RED_HARDDROP`.
const RED_ECN: u8 = 1;
const RED_HARDDROP: u8 = 2;

const USAGE: &str = "Usage: ... sfq\t[ limit NUMBER ] [ perturb SECS ] [ quantum BYTES ]\n\t\t[ divisor NUMBER ] [ flows NUMBER] [ depth NUMBER ]\n\t\t[ headdrop ]\n\t\t[ redflowlimit BYTES ] [ min BYTES ] [ max BYTES ]\n\t\t[ avpkt BYTES ] [ burst PACKETS ] [ probability P ]\n\t\t[ ecn ] [ harddrop ]";

/// The kernel's defaults (`sfq_init`).
const DIVISOR: u32 = 1024;

impl QdiscKind for Sfq {
    const NAME: &'static str = "sfq";
    type Opts = SfqOpts;

    fn parse(cur: &mut Cur) -> Result<SfqOpts, TcError> {
        let mut o = SfqOpts::default();
        let mut red = flow_red::Words::default();
        while let Some((at, w)) = cur.next_word() {
            match w {
                "quantum" => o.quantum = Some(size_arg(cur, "quantum")?),
                "perturb" => {
                    let (i, v) = cur.value()?;
                    let p = v.parse::<i32>().ok().and_then(|p| u32::try_from(p).ok());
                    o.perturb = Some(p.ok_or_else(|| illegal("perturb", i, None))?);
                }
                "limit" => {
                    let (i, v) = cur.value()?;
                    let l = get_u32(v).ok_or_else(|| illegal("limit", i, None))?;
                    if l < 2 {
                        return Err(TcError::usage("Illegal \"limit\", must be > 1", Some(i)));
                    }
                    o.limit = Some(l);
                }
                "divisor" => o.divisor = Some(u32_arg(cur, "divisor")?),
                "flows" => o.flows = Some(u32_arg(cur, "flows")?),
                // tc names `flows` in depth's message too.
                "depth" => o.depth = Some(u32_arg(cur, "flows")?),
                "headdrop" => o.headdrop = true,
                "help" => return Err(TcError::usage(USAGE, Some(at))),
                _ => {
                    if !red.word(w, cur)? {
                        return Err(what_is(w, at, USAGE));
                    }
                }
            }
        }
        o.red = red.derive()?;
        Ok(o)
    }

    fn args(o: &SfqOpts) -> String {
        let mut s = String::new();
        let words = [
            ("limit", o.limit),
            ("quantum", o.quantum),
            ("perturb", o.perturb),
            ("divisor", o.divisor),
            ("depth", o.depth),
            ("flows", o.flows),
        ];
        for (k, v) in words {
            if let Some(v) = v {
                let _ = write!(s, " {k} {v}");
            }
        }
        if o.headdrop {
            s.push_str(" headdrop");
        }
        if let Some(r) = &o.red {
            s.push_str(&flow_red::args(r));
        }
        s
    }

    fn show(o: &SfqOpts, dev: &Device, d: bool) -> String {
        let e = effective(dev, o);
        let mut s =
            format!("limit {}p quantum {} depth {} ", e.limit, format_size(e.quantum as u64), e.depth);
        if o.headdrop {
            s.push_str("headdrop ");
        }
        if d {
            let _ = write!(s, "flows {} ", e.flows);
        }
        let _ = write!(s, "divisor {} ", o.divisor.unwrap_or(DIVISOR));
        if let Some(p) = o.perturb.filter(|&p| p != 0) {
            let _ = write!(s, "perturb {p}sec ");
        }
        if let Some(r) = &o.red {
            let _ = write!(
                s,
                "ewma {} min {} max {} probability {} ",
                r.ewma,
                format_size(r.min as u64),
                format_size(r.max as u64),
                format_g(shown_probability(r), 6)
            );
            if r.ecn {
                s.push_str("ecn ");
            }
            if r.harddrop {
                s.push_str("harddrop ");
            }
        }
        s
    }

    fn json(o: &SfqOpts, dev: &Device, d: bool) -> J {
        let e = effective(dev, o);
        let mut j = J::obj();
        j.put("limit", e.limit).put("quantum", e.quantum).put("depth", e.depth);
        if o.headdrop {
            j.put("headdrop", true);
        }
        if d {
            j.put("flows", e.flows);
        }
        j.put("divisor", o.divisor.unwrap_or(DIVISOR));
        if let Some(p) = o.perturb.filter(|&p| p != 0) {
            j.put("perturb", p);
        }
        if let Some(r) = &o.red {
            j.put("ewma", r.ewma).put("min", r.min).put("max", r.max);
            j.put("probability", shown_probability(r));
            // tc_red_print_flags: every flag, set or not.
            j.put("ecn", r.ecn).put("harddrop", r.harddrop).put("adaptive", false).put("nodrop", false);
        }
        j
    }

    /// `sfq_change`'s refusals: a divisor that is not a power of two up to 65536, RED
    /// thresholds the wrong way round.
    fn change(_dev: &Device, n: SfqOpts, _old: Option<&SfqOpts>) -> Result<SfqOpts, TcError> {
        let einval = || TcError::errno("Invalid argument");
        if let Some(d) = n.divisor {
            if d == 0 || d & (d - 1) != 0 || d > 65536 {
                return Err(einval());
            }
        }
        if n.red.as_ref().is_some_and(|r| r.min > r.max) {
            return Err(einval());
        }
        Ok(n)
    }

    /// `struct tc_sfq_qopt_v1` when anything was given (0 for what was not), as
    /// `sfq_parse_opt` fills it.
    fn encode(o: &SfqOpts, out: &mut Attrs) -> Result<(), Unencodable> {
        if *o == SfqOpts::default() {
            return Ok(());
        }
        let mut q = Vec::with_capacity(QOPT_V1_LEN);
        let z = |v: Option<u32>| v.unwrap_or(0);
        let head =
            [z(o.quantum), z(o.perturb), z(o.limit), z(o.divisor), z(o.flows), z(o.depth), o.headdrop as u32];
        for v in head {
            q.extend_from_slice(&v.to_ne_bytes());
        }
        match &o.red {
            Some(r) => {
                let (plog, max_p) = flow_red::kernel_values(r)?;
                for v in [r.flowlimit, r.min, r.max] {
                    q.extend_from_slice(&v.to_ne_bytes());
                }
                let flags = if r.ecn { RED_ECN } else { 0 } | if r.harddrop { RED_HARDDROP } else { 0 };
                q.extend_from_slice(&[r.ewma, plog, 0, flags]);
                q.extend_from_slice(&max_p.to_ne_bytes());
            }
            None => q.extend_from_slice(&[0; 20]),
        }
        q.resize(QOPT_V1_LEN, 0); // the statistics
        out.put(TCA_OPTIONS, &q);
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<SfqOpts, DecodeError> {
        let Some(p) = options else { return Ok(SfqOpts::default()) };
        let short = || DecodeError::new("sfq", format!("{} bytes of options, want {QOPT_V1_LEN}", p.len()));
        let [quantum, perturb, limit, divisor, flows, depth, headdrop, flowlimit, min, max] =
            u32s::<10>(p).ok_or_else(short)?;
        let [logs, max_p] = u32s::<2>(p.get(40..).ok_or_else(short)?).ok_or_else(short)?;
        let [ewma, _plog, _scell_log, flags] = logs.to_ne_bytes();
        let given = |v: u32| Some(v).filter(|&v| v != 0);
        let red = (flowlimit | min | max | logs | max_p != 0).then(|| SfqRed {
            flowlimit,
            min,
            max,
            probability: flow_red::probability_of(max_p),
            ewma,
            ecn: flags & RED_ECN != 0,
            harddrop: flags & RED_HARDDROP != 0,
        });
        let mut o = SfqOpts {
            limit: given(limit),
            quantum: given(quantum),
            perturb: given(perturb),
            divisor: given(divisor),
            depth: given(depth),
            flows: given(flows),
            headdrop: headdrop != 0,
            red,
        };
        if o == SfqOpts::default() {
            // Options of zeros: what tc sends for a lone `perturb 0`.
            o.perturb = Some(0);
        }
        Ok(o)
    }

    const CLASS_OPS: bool = true;

    /// Filters go on the qdisc only.
    fn filter_block(_o: &SfqOpts, dev: &Device, q: &QdiscNode, parent: Handle) -> Result<Handle, TcError> {
        block_at(dev, q, parent, || Err(TcError::kernel("Class doesn't support blocks")))
    }

    fn build(o: &SfqOpts, q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        let d = SfqConfig::default();
        Ok(Box::new(Core::new(SfqConfig {
            limit: o.limit.unwrap_or(0),
            quantum: o.quantum.unwrap_or(cx.dev.psched_mtu()),
            depth: o.depth.unwrap_or(d.depth),
            divisor: o.divisor.unwrap_or(d.divisor),
            flows: o.flows.unwrap_or(d.flows),
            perturb: Span::from_secs(o.perturb.unwrap_or(0) as u64),
            headdrop: o.headdrop,
            red: o.red.as_ref().map(|r| CoreRed {
                limit: r.flowlimit as u64,
                min: r.min,
                max: r.max,
                probability: r.probability,
                ewma: r.ewma,
                ecn: r.ecn,
                harddrop: r.harddrop,
            }),
            major: q.handle.major(),
            ..d
        })?))
    }

    fn label(o: &SfqOpts) -> Option<String> {
        o.perturb.filter(|&p| p != 0).map(|p| format!("perturb {p}s"))
    }
}

/// The probability `tc qdisc show` prints: the kernel's `max_P` over 2^32.
fn shown_probability(r: &SfqRed) -> f64 {
    (r.probability * 4294967296.0) as u32 as f64 / 4294967296.0
}

/// SFQ's values as the kernel keeps them.
struct Effective {
    limit: u32,
    quantum: u32,
    depth: u32,
    flows: u32,
}

/// `sfq_change`: flows and divisor cap maxflows; only a given limit is capped by depth * flows
/// and caps maxflows in turn.
fn effective(dev: &Device, q: &SfqOpts) -> Effective {
    let depth = q.depth.unwrap_or(127).min(127);
    let mut flows = q.flows.unwrap_or(128).min(65408);
    if let Some(d) = q.divisor {
        flows = flows.min(d);
    }
    let limit = match q.limit {
        Some(l) => {
            let l = l.min(depth.saturating_mul(flows));
            flows = flows.min(l);
            l
        }
        None => 127,
    };
    Effective { limit, quantum: q.quantum.unwrap_or(dev.psched_mtu()), depth, flows }
}
