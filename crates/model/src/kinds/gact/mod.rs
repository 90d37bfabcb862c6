//! gact: a fixed verdict, optionally another one for some packets (`random`). iproute2's
//! m_gact.c, the kernel's act_gact.c.

use super::action_common::*;
use super::{ActEncodeCx, ActionKind, DecodeError, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{matches, Cur};
use crate::json::J;
use crate::model::{Device, Verdict};
use crate::nlattr::{self, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::{Action as CoreAction, GactRandom as CoreGactRandom};
use std::fmt::Write;

const GACT_USAGE: &str = "Usage: ... gact <ACTION> [RAND] [INDEX]\nWhere: \tACTION := reclassify | drop | continue | pass | pipe |\n       \t          goto chain <CHAIN_INDEX> | jump <JUMP_COUNT>\n\tRAND := random <RANDTYPE> <ACTION> <VAL>\n\tRANDTYPE := netrand | determ\n\tVAL : = value not exceeding 10000\n\tJUMP_COUNT := Absolute jump from start of action list\n\tINDEX := index value used\n";

const TCA_GACT_PARMS: u16 = 2;
const TCA_GACT_PROB: u16 = 3;

/// gact's options: `gact CONTROL [random netrand|determ CONTROL VAL] [index N]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GactOpts {
    /// Verdict.
    pub verdict: Verdict,
    /// Action index.
    pub index: u32,
    /// `random determ|netrand VERDICT VAL`: another verdict for some packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<GactRandom>,
}

/// gact's `random` part: with `determ`, every `val`-th packet gets `verdict`; with `netrand`,
/// each packet does with probability 1/`val`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GactRandom {
    /// `determ` (true) or `netrand`.
    pub determ: bool,
    /// The other verdict.
    pub verdict: Verdict,
    /// Period or inverse probability (at most 10000).
    pub val: u16,
}

/// The gact kind.
pub struct Gact;

fn usage(pre: &str) -> ActErr {
    ActErr::Exit(TcError::fatal(format!("{pre}{GACT_USAGE}"), None))
}

impl ActionKind for Gact {
    const NAME: &'static str = "gact";
    type Opts = GactOpts;

    fn index(o: &GactOpts) -> u32 {
        o.index
    }

    fn set_index(o: &mut GactOpts, index: u32) {
        o.index = index;
    }

    /// `[gact] CONTROL [random netrand|determ CONTROL VAL] [index N]`, or `[gact] index N`.
    fn parse(cur: &mut Cur) -> Result<(GactOpts, bool), ActErr> {
        if cur.peek().is_some_and(|w| matches(w, "gact")) {
            next_arg(cur)?;
        }
        let mut index = 0;
        let w = cur.peek().unwrap_or("");
        if matches(w, "index") {
            let v = next_arg(cur)?;
            index = dec_u32(v).ok_or_else(|| ActErr::Fail("Illegal \"index\"".into()))?;
            cur.pos += 1;
            return Ok((GactOpts { verdict: Verdict::Pass, index, random: None }, true));
        }
        let verdict = match parse_control(cur, false)? {
            Some(v) => v,
            None => return Err(usage(&format!("Bad action type {w}\n"))),
        };
        let mut random = None;
        if let Some(w) = cur.peek() {
            if matches(w, "random") {
                let t = next_arg(cur)?;
                let determ = if matches(t, "netrand") {
                    false
                } else if matches(t, "determ") {
                    true
                } else {
                    return Err(ActErr::Fail("Illegal \"random type\"".into()));
                };
                let w = next_arg(cur)?;
                let pv = match parse_control(cur, false)? {
                    Some(v) => v,
                    None => return Err(usage(&format!("Bad action type {w}\n"))),
                };
                let val = cur.peek().ok_or_else(|| incomplete(cur))?;
                let val: u16 = match val.parse() {
                    Ok(v) if v <= 10000 => v,
                    Ok(v) => return Err(ActErr::Fail(format!("Illegal probability val  {v:#x}"))),
                    Err(_) => return Err(ActErr::Fail("Illegal probability val 0x0".into())),
                };
                cur.pos += 1;
                random = Some(GactRandom { determ, verdict: pv, val });
            } else if matches(w, "help") {
                return Err(usage(""));
            }
        }
        if let Some(w) = cur.peek() {
            if matches(w, "index") {
                let v = next_arg(cur)?;
                index = dec_u32(v).ok_or_else(|| ActErr::Fail("Illegal \"index\"".into()))?;
                cur.pos += 1;
            } else if matches(w, "help") {
                return Err(usage(""));
            }
        }
        Ok((GactOpts { verdict, index, random }, false))
    }

    fn args(o: &GactOpts) -> String {
        let mut s = format!("gact {}", o.verdict.text());
        if let Some(r) = o.random {
            let _ = write!(
                s,
                " random {} {} {}",
                if r.determ { "determ" } else { "netrand" },
                r.verdict.text(),
                r.val
            );
        }
        let _ = write!(s, " index {}", o.index);
        s
    }

    fn show(o: &GactOpts, out: &mut String, refs: u32, bind: u32, tm: &str, _d: bool) {
        let (rt, pv, val) = match o.random {
            None => ("none", Verdict::Pass, 0),
            Some(r) => (if r.determ { "determ" } else { "netrand" }, r.verdict, r.val),
        };
        let _ = write!(
            out,
            "gact action {}\n\t random type {rt} {} val {val}\n\t index {} ref {refs} bind {bind}{tm}\n",
            o.verdict.text(),
            pv.text(),
            o.index
        );
    }

    fn json(o: &GactOpts, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), _d: bool) {
        let (rt, pv, val) = match o.random {
            None => ("none", Verdict::Pass, 0),
            Some(r) => (if r.determ { "determ" } else { "netrand" }, r.verdict, r.val),
        };
        let mut prob = J::obj();
        prob.put("random_type", rt).put("control_action", control_json(pv)).put("val", val);
        j.put("kind", "gact").put("control_action", control_json(o.verdict)).put("prob", prob);
        j.put("index", o.index).put("ref", refs).put("bind", bind);
        tm(j);
    }

    fn check(o: &GactOpts, _bare: bool, in_filter: bool) -> Result<(), TcError> {
        if o.random.is_some_and(|r| matches!(r.verdict, Verdict::Goto(_))) {
            return Err(kernel_err("goto chain not allowed on fallback"));
        }
        goto_ok(o.verdict, in_filter)
    }

    fn encode(o: &GactOpts, out: &mut Attrs, _cx: &ActEncodeCx<'_>) -> Result<(), Unencodable> {
        out.put(TCA_GACT_PARMS, &tc_gen(o.index, o.verdict));
        if let Some(r) = o.random {
            let mut p = Vec::with_capacity(8);
            p.extend_from_slice(&(if r.determ { 2u16 } else { 1u16 }).to_ne_bytes());
            p.extend_from_slice(&r.val.to_ne_bytes());
            p.extend_from_slice(&r.verdict.code().to_ne_bytes());
            out.put(TCA_GACT_PROB, &p);
        }
        Ok(())
    }

    fn decode(options: &[u8]) -> Result<GactOpts, DecodeError> {
        let bad = |why: &str| DecodeError::new("gact", why);
        let parms = nlattr::find(options, TCA_GACT_PARMS).ok_or_else(|| bad("no TCA_GACT_PARMS"))?;
        let (index, verdict) = tc_gen_of(parms).ok_or_else(|| bad("bad TCA_GACT_PARMS"))?;
        let random = match nlattr::find(options, TCA_GACT_PROB) {
            None => None,
            Some(p) if p.len() >= 8 => {
                let ptype = u16::from_ne_bytes([p[0], p[1]]);
                let val = u16::from_ne_bytes([p[2], p[3]]);
                let code = i32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
                let verdict = verdict_of_kernel(code).ok_or_else(|| bad("bad random verdict"))?;
                Some(GactRandom { determ: ptype == 2, verdict, val })
            }
            Some(_) => return Err(bad("short TCA_GACT_PROB")),
        };
        Ok(GactOpts { verdict, index, random })
    }

    fn build(o: &GactOpts, _devices: &[Device]) -> Result<CoreAction, BuildError> {
        Ok(match o.random {
            None => CoreAction::Gact(core_verdict(o.verdict)?),
            Some(r) => CoreAction::GactRandom(CoreGactRandom::new(
                core_verdict(o.verdict)?,
                core_verdict(r.verdict)?,
                r.determ,
                r.val,
                o.index as u64,
            )),
        })
    }

    fn label(o: &GactOpts) -> String {
        format!(" → {}", o.verdict.text())
    }
}
