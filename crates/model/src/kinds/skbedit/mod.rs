//! skbedit: writes packet metadata (queue, priority, mark, packet type). iproute2's
//! m_skbedit.c, the kernel's act_skbedit.c.

use super::action_common::*;
use super::{ActEncodeCx, ActionKind, DecodeError, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_tc_classid, get_u32, matches, Cur};
use crate::json::J;
use crate::model::{Device, Verdict};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::filter::action::{Action as CoreAction, Skbedit as CoreSkbedit};
use sluice_core::Handle;
use std::fmt::Write;

const SKBEDIT_USAGE: &str = "Usage: ... skbedit <[QM] [PM] [MM] [PT] [IF]>\nQM = queue_mapping QUEUE_MAPPING\nPM = priority PRIORITY\nMM = mark MARK[/MASK]\nPT = ptype PACKETYPE\nIF = inheritdsfield\nPACKETYPE = is one of:\n  host, otherhost, broadcast, multicast\nQUEUE_MAPPING = device transmit queue to use\nPRIORITY = classID to assign to priority field\nMARK = firewall mark to set\nMASK = mask applied to firewall mark (0xffffffff by default)\nnote: inheritdsfield maps DS field to skb->priority";

const TCA_SKBEDIT_PARMS: u16 = 2;
const TCA_SKBEDIT_PRIORITY: u16 = 3;
const TCA_SKBEDIT_QUEUE_MAPPING: u16 = 4;
const TCA_SKBEDIT_MARK: u16 = 5;
const TCA_SKBEDIT_PTYPE: u16 = 7;
const TCA_SKBEDIT_MASK: u16 = 8;
const TCA_SKBEDIT_FLAGS: u16 = 9;
const SKBEDIT_F_INHERITDSFIELD: u64 = 1;

/// skbedit options: what the action writes into the packet's metadata.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SkbeditOpts {
    /// Transmit queue.
    pub queue_mapping: Option<u16>,
    /// `skb->priority` (a class id: HTB and prio classify by it).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub priority: Option<Handle>,
    /// Firewall mark (what fw reads).
    pub mark: Option<u32>,
    /// Mask of the mark bits written (all when absent).
    pub mask: Option<u32>,
    /// Packet type (`PACKET_HOST` 0, `BROADCAST` 1, `MULTICAST` 2, `OTHERHOST` 3).
    pub ptype: Option<u16>,
    /// Priority from the DS field.
    #[serde(default, skip_serializing_if = "is_false")]
    pub inheritdsfield: bool,
    /// Verdict after editing (`pipe`).
    #[serde(default = "pipe")]
    pub verdict: Verdict,
    /// Action index.
    #[serde(default)]
    pub index: u32,
}

fn pipe() -> Verdict {
    Verdict::Pipe
}

fn is_false(b: &bool) -> bool {
    !*b
}

const PTYPES: [&str; 4] = ["host", "broadcast", "multicast", "otherhost"];

/// The skbedit kind.
pub struct Skbedit;

impl ActionKind for Skbedit {
    const NAME: &'static str = "skbedit";
    type Opts = SkbeditOpts;

    fn index(o: &SkbeditOpts) -> u32 {
        o.index
    }

    fn set_index(o: &mut SkbeditOpts, index: u32) {
        o.index = index;
    }

    fn parse(cur: &mut Cur) -> Result<(SkbeditOpts, bool), ActErr> {
        next_arg(cur)?;
        let mut k = SkbeditOpts { verdict: Verdict::Pipe, ..Default::default() };
        let mut ok = 0;
        let mut flags = 0;
        while let Some(w) = cur.peek() {
            if matches(w, "queue_mapping") {
                let v = next_arg(cur)?;
                match dec_u32(v).filter(|&q| q <= 65535) {
                    Some(q) => k.queue_mapping = Some(q as u16),
                    None => return Err(ActErr::Fail("Illegal queue_mapping".into())),
                }
            } else if matches(w, "priority") {
                let v = next_arg(cur)?;
                k.priority = Some(get_tc_classid(v).ok_or_else(|| ActErr::Fail("Illegal priority".into()))?);
            } else if matches(w, "mark") {
                let v = next_arg(cur)?;
                let (m, mask) = match v.split_once('/') {
                    Some((m, x)) => (m, Some(x)),
                    None => (v, None),
                };
                k.mark = Some(get_u32(m).ok_or_else(|| ActErr::Fail("Illegal mark".into()))?);
                if let Some(x) = mask {
                    k.mask = Some(get_u32(x).ok_or_else(|| ActErr::Fail("Illegal mask".into()))?);
                }
            } else if matches(w, "ptype") {
                let v = next_arg(cur)?;
                k.ptype = Some(if matches(v, "host") {
                    0
                } else if matches(v, "broadcast") {
                    1
                } else if matches(v, "multicast") {
                    2
                } else if matches(v, "otherhost") {
                    3
                } else {
                    return Err(ActErr::Fail(format!("Illegal ptype ({v})")));
                });
            } else if matches(w, "inheritdsfield") {
                k.inheritdsfield = true;
            } else if matches(w, "help") {
                return Err(TcError::fatal(SKBEDIT_USAGE, Some(cur.pos)).into());
            } else {
                break;
            }
            cur.pos += 1;
            ok += 1;
            flags += 1;
        }
        if let Some(v) = control_or_default(cur) {
            k.verdict = v;
        }
        if cur.peek().is_some_and(|w| matches(w, "index")) {
            let v = next_arg(cur)?;
            k.index = dec_u32(v).ok_or_else(|| ActErr::Fail("skbedit: Illegal \"index\"".into()))?;
            cur.pos += 1;
            ok += 1;
        }
        if ok == 0 {
            return Err(ActErr::Fail(SKBEDIT_USAGE.into()));
        }
        Ok((k, flags == 0))
    }

    fn args(k: &SkbeditOpts) -> String {
        let mut s = String::from("skbedit");
        if let Some(q) = k.queue_mapping {
            let _ = write!(s, " queue_mapping {q}");
        }
        if let Some(p) = k.priority {
            let _ = write!(s, " priority {}", classid_str(p));
        }
        if let Some(m) = k.mark {
            let _ = write!(s, " mark {m:#x}");
            if let Some(x) = k.mask {
                let _ = write!(s, "/{x:#x}");
            }
        }
        if let Some(t) = k.ptype {
            let _ = write!(s, " ptype {}", PTYPES[t.min(3) as usize]);
        }
        if k.inheritdsfield {
            s.push_str(" inheritdsfield");
        }
        let _ = write!(s, " {} index {}", k.verdict.text(), k.index);
        s
    }

    fn show(k: &SkbeditOpts, out: &mut String, refs: u32, bind: u32, tm: &str, _d: bool) {
        out.push_str("skbedit ");
        if let Some(q) = k.queue_mapping {
            let _ = write!(out, "queue_mapping {q}");
        }
        if let Some(p) = k.priority {
            let _ = write!(out, " priority {}", classid_str(p));
        }
        if let Some(m) = k.mark {
            let _ = write!(out, " mark {m}");
        }
        if let Some(m) = k.mask {
            let _ = write!(out, "/{m:#x}");
        }
        if let Some(t) = k.ptype {
            match PTYPES.get(t as usize) {
                Some(n) => {
                    let _ = write!(out, " ptype {n}");
                }
                None => {
                    let _ = write!(out, " ptype {t}");
                }
            }
        }
        if k.inheritdsfield {
            out.push_str(" inheritdsfield");
        }
        let _ = write!(out, " {}\n\t index {} ref {refs} bind {bind}{tm}\n", k.verdict.text(), k.index);
    }

    fn json(k: &SkbeditOpts, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), _d: bool) {
        j.put("kind", "skbedit");
        if let Some(q) = k.queue_mapping {
            j.put("queue_mapping", q);
        }
        if let Some(p) = k.priority {
            j.put("priority", classid_str(p));
        }
        if let Some(m) = k.mark {
            j.put("mark", m);
        }
        if let Some(m) = k.mask {
            j.put("mask", format!("{m:x}"));
        }
        if let Some(t) = k.ptype {
            match PTYPES.get(t as usize) {
                Some(n) => j.put("ptype", *n),
                None => j.put("ptype", t),
            };
        }
        if k.inheritdsfield {
            j.put("inheritdsfield", Value::Null);
        }
        j.put("control_action", control_json(k.verdict));
        j.put("index", k.index).put("ref", refs).put("bind", bind);
        tm(j);
    }

    fn check(k: &SkbeditOpts, bare: bool, in_filter: bool) -> Result<(), TcError> {
        goto_ok(k.verdict, in_filter)?;
        if bare {
            return Err(TcError::errno("Invalid argument"));
        }
        Ok(())
    }

    fn encode(k: &SkbeditOpts, out: &mut Attrs, _cx: &ActEncodeCx<'_>) -> Result<(), Unencodable> {
        out.put(TCA_SKBEDIT_PARMS, &tc_gen(k.index, k.verdict));
        if let Some(q) = k.queue_mapping {
            out.put(TCA_SKBEDIT_QUEUE_MAPPING, &q.to_ne_bytes());
        }
        if let Some(p) = k.priority {
            out.put(TCA_SKBEDIT_PRIORITY, &p.to_tc().unwrap_or(0).to_ne_bytes());
        }
        if let Some(mark) = k.mark {
            out.put(TCA_SKBEDIT_MARK, &mark.to_ne_bytes());
        }
        if let Some(mask) = k.mask {
            out.put(TCA_SKBEDIT_MASK, &mask.to_ne_bytes());
        }
        if let Some(t) = k.ptype {
            out.put(TCA_SKBEDIT_PTYPE, &t.to_ne_bytes());
        }
        if k.inheritdsfield {
            out.put(TCA_SKBEDIT_FLAGS, &SKBEDIT_F_INHERITDSFIELD.to_ne_bytes());
        }
        Ok(())
    }

    fn decode(options: &[u8]) -> Result<SkbeditOpts, DecodeError> {
        let bad = |why: &str| DecodeError::new("skbedit", why);
        let parms = nlattr::find(options, TCA_SKBEDIT_PARMS).ok_or_else(|| bad("no TCA_SKBEDIT_PARMS"))?;
        let (index, verdict) = tc_gen_of(parms).ok_or_else(|| bad("bad TCA_SKBEDIT_PARMS"))?;
        let u16_of = |ty| {
            nlattr::find(options, ty).and_then(|p| Some(u16::from_ne_bytes(p.get(..2)?.try_into().ok()?)))
        };
        let u32_of = |ty| nlattr::find(options, ty).and_then(nlattr::u32_of);
        Ok(SkbeditOpts {
            queue_mapping: u16_of(TCA_SKBEDIT_QUEUE_MAPPING),
            priority: u32_of(TCA_SKBEDIT_PRIORITY).map(Handle::from_tc),
            mark: u32_of(TCA_SKBEDIT_MARK),
            mask: u32_of(TCA_SKBEDIT_MASK),
            ptype: u16_of(TCA_SKBEDIT_PTYPE),
            inheritdsfield: nlattr::find(options, TCA_SKBEDIT_FLAGS)
                .and_then(nlattr::u64_of)
                .is_some_and(|f| f & SKBEDIT_F_INHERITDSFIELD != 0),
            verdict,
            index,
        })
    }

    fn build(k: &SkbeditOpts, _devices: &[Device]) -> Result<CoreAction, BuildError> {
        Ok(CoreAction::Skbedit(CoreSkbedit {
            priority: k.priority.and_then(|p| p.to_tc()),
            mark: k.mark,
            mask: k.mask.unwrap_or(u32::MAX),
            verdict: core_verdict(k.verdict)?,
        }))
    }

    fn label(k: &SkbeditOpts) -> String {
        let mut s = String::from(" skbedit");
        if let Some(p) = k.priority {
            let _ = write!(s, " priority {}", classid_str(p));
        }
        if let Some(m) = k.mark {
            let _ = write!(s, " mark {m:#x}");
        }
        s
    }
}
