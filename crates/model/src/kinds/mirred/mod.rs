//! mirred: mirror or redirect to a device, as iproute2 6.1 parses and prints it:
//! `mirred <egress|ingress> <mirror|redirect> [index N] dev DEV [CONTROL] [index N]`
//! (m_mirred.c; the kernel's act_mirred.c).

use super::action_common::*;
use super::{ActEncodeCx, ActionKind, DecodeError, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{matches, Cur};
use crate::json::J;
use crate::model::{Device, Verdict};
use crate::nlattr::{self, Attrs};
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Action as CoreAction;
use sluice_core::filter::MirredTarget;
use std::fmt::Write;

const TCA_MIRRED_PARMS: u16 = 2;

/// Which path of the target device a mirred action hands the packet to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MirredDirection {
    /// The device's transmit path: its root qdisc (`egress`).
    #[default]
    Egress,
    /// The device's receive path: its ingress hook (`ingress`).
    Ingress,
}

/// Whether mirred moves the packet or sends a copy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MirredMode {
    /// The packet leaves this path for the target (`redirect`; default verdict `stolen`).
    #[default]
    Redirect,
    /// A copy goes to the target, the original goes on (`mirror`; default verdict `pipe`).
    Mirror,
}

/// Mirred action options: `mirred DIRECTION MODE dev TARGET [VERDICT] [index N]`.
/// The kernel's `tc_mirred.eaction` is the pair (direction, mode): `TCA_EGRESS_REDIR` 1,
/// `TCA_EGRESS_MIRROR` 2, `TCA_INGRESS_REDIR` 3, `TCA_INGRESS_MIRROR` 4.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MirredOpts {
    /// Egress (the target's root qdisc) or ingress (the target's ingress hook).
    pub direction: MirredDirection,
    /// Redirect or mirror.
    pub mode: MirredMode,
    /// Target device name (tc resolves it to an ifindex when the action is made).
    pub dev: String,
    /// Control action returned after mirred ran (`tc_gen.action`): `stolen` for a redirect
    /// (tc offers no other), `pipe` by default for a mirror.
    pub verdict: Verdict,
    /// Action index (0: the kernel hands out the next free one).
    #[serde(default)]
    pub index: u32,
}

impl MirredOpts {
    /// The kernel's `eaction` value (`TCA_EGRESS_REDIR` ... `TCA_INGRESS_MIRROR`).
    pub fn eaction(&self) -> u32 {
        match (self.direction, self.mode) {
            (MirredDirection::Egress, MirredMode::Redirect) => 1,
            (MirredDirection::Egress, MirredMode::Mirror) => 2,
            (MirredDirection::Ingress, MirredMode::Redirect) => 3,
            (MirredDirection::Ingress, MirredMode::Mirror) => 4,
        }
    }

    /// How `tc` names the pair: `Egress Redirect`, `Ingress Mirror`, ...
    pub fn description(&self) -> &'static str {
        match (self.direction, self.mode) {
            (MirredDirection::Egress, MirredMode::Redirect) => "Egress Redirect",
            (MirredDirection::Egress, MirredMode::Mirror) => "Egress Mirror",
            (MirredDirection::Ingress, MirredMode::Redirect) => "Ingress Redirect",
            (MirredDirection::Ingress, MirredMode::Mirror) => "Ingress Mirror",
        }
    }
}

const USAGE: &str = "Usage: mirred <DIRECTION> <ACTION> [index INDEX] <dev DEVICENAME>\n\
where:\n\tDIRECTION := <ingress | egress>\n\tACTION := <mirror | redirect>\n\
\tINDEX  is the specific policy instance id\n\tDEVICENAME is the devicename";

/// tc's failure tail for an action that did not parse (`at`: the argv index of `mirred`).
fn bad(cur: &Cur, at: usize, msg: &str) -> TcError {
    let left = cur.argv.len().saturating_sub(at);
    let mut m = String::new();
    if !msg.is_empty() {
        m.push_str(msg);
        m.push('\n');
    }
    let _ = write!(m, "bad action parsing\nparse_action: bad value ({left}:mirred)!\nIllegal \"action\"");
    TcError::usage(m, Some(at))
}

/// NEXT_ARG inside mirred: the cursor moves on, or tc's "not complete" exit.
fn next(cur: &mut Cur) -> Result<(), TcError> {
    cur.pos += 1;
    if cur.pos >= cur.argv.len() {
        return Err(TcError::fatal("Command line is not complete. Try option \"help\"", Some(cur.pos - 1)));
    }
    Ok(())
}

fn index_value(cur: &Cur) -> Result<u32, TcError> {
    let w = cur.peek().unwrap_or("");
    w.parse::<u32>().map_err(|_| TcError::usage("Illegal \"index\"", Some(cur.pos)))
}

/// Parses the words after `mirred` (the cursor is just past it; `at` is its argv index).
fn parse_mirred(cur: &mut Cur, at: usize) -> Result<MirredOpts, TcError> {
    match cur.peek() {
        None => return Err(TcError::fatal("Command line is not complete. Try option \"help\"", Some(at))),
        Some(w) if matches(w, "egress") || matches(w, "ingress") || matches(w, "index") => {}
        Some(w) if matches(w, "help") => return Err(TcError::usage(USAGE, Some(cur.pos))),
        Some(w) => return Err(bad(cur, at, &format!("mirred option not supported {w}"))),
    }
    let (mut direction, mut mode) = (None, None);
    let mut dev: Option<String> = None;
    let mut index: Option<u32> = None;
    while let Some(w) = cur.peek() {
        if matches(w, "action") {
            break;
        }
        let dir = if matches(w, "egress") {
            Some(MirredDirection::Egress)
        } else if matches(w, "ingress") {
            Some(MirredDirection::Ingress)
        } else {
            None
        };
        match dir {
            Some(d) if direction.is_none() => {
                direction = Some(d);
                next(cur)?;
                continue;
            }
            Some(d) if direction != Some(d) => {
                return Err(bad(cur, at, "Can't have both egress and ingress"));
            }
            _ => {}
        }
        if matches(w, "index") {
            next(cur)?;
            index = Some(index_value(cur)?);
            if direction.is_none() {
                cur.pos += 1;
                break;
            }
        } else if direction.is_none() {
            return Err(bad(cur, at, &format!("was expecting egress or ingress ({w})")));
        } else if matches(w, "mirror") || matches(w, "redirect") {
            let m = if matches(w, "mirror") { MirredMode::Mirror } else { MirredMode::Redirect };
            match mode {
                None => mode = Some(m),
                Some(old) if old != m => return Err(bad(cur, at, "Can't have both mirror and redir")),
                Some(_) => {}
            }
        } else if mode.is_some() && matches(w, "dev") {
            next(cur)?;
            dev = cur.peek().map(str::to_string);
            cur.pos += 1;
            break;
        }
        next(cur)?;
    }
    let (Some(direction), Some(mode), Some(dev)) = (direction, mode, dev) else {
        // `mirred index N` alone binds an action made with `tc actions` (no device: the kernel
        // refuses it when nothing has that index).
        if let (Some(index), None) = (index, direction) {
            return Ok(MirredOpts { index, ..Default::default() });
        }
        return Err(bad(cur, at, ""));
    };
    let mut verdict_after = match mode {
        MirredMode::Redirect => Verdict::Stolen,
        MirredMode::Mirror => Verdict::Pipe,
    };
    if mode == MirredMode::Mirror {
        if let Some(v) = control_or_default(cur) {
            verdict_after = v;
        }
    }
    if let Some(w) = cur.peek() {
        if matches(w, "index") {
            if index.is_some() {
                return Err(bad(cur, at, "mirred: Illegal double index"));
            }
            next(cur)?;
            index = Some(index_value(cur)?);
            cur.pos += 1;
        }
    }
    Ok(MirredOpts { direction, mode, dev, verdict: verdict_after, index: index.unwrap_or(0) })
}

/// The mirred kind.
pub struct Mirred;

impl ActionKind for Mirred {
    const NAME: &'static str = "mirred";
    type Opts = MirredOpts;

    fn index(o: &MirredOpts) -> u32 {
        o.index
    }

    fn set_index(o: &mut MirredOpts, index: u32) {
        o.index = index;
    }

    fn parse(cur: &mut Cur) -> Result<(MirredOpts, bool), ActErr> {
        let at = cur.pos;
        cur.pos += 1;
        let m = parse_mirred(cur, at)?;
        let bare = m.dev.is_empty();
        Ok((m, bare))
    }

    fn args(m: &MirredOpts) -> String {
        let dir = match m.direction {
            MirredDirection::Egress => "egress",
            MirredDirection::Ingress => "ingress",
        };
        let mode = match m.mode {
            MirredMode::Redirect => "redirect",
            MirredMode::Mirror => "mirror",
        };
        let mut s = format!("mirred {dir} {mode} dev {}", m.dev);
        if m.mode == MirredMode::Mirror {
            let _ = write!(s, " {}", m.verdict.text());
        }
        let _ = write!(s, " index {}", m.index);
        s
    }

    fn show(m: &MirredOpts, out: &mut String, refs: u32, bind: u32, tm: &str, _d: bool) {
        let _ = write!(
            out,
            "mirred ({} to device {}) {}\n\tindex {} ref {refs} bind {bind}{tm}\n",
            m.description(),
            m.dev,
            m.verdict.text(),
            m.index
        );
    }

    fn json(m: &MirredOpts, j: &mut J, refs: u32, bind: u32, tm: &dyn Fn(&mut J), _d: bool) {
        let action = match m.mode {
            MirredMode::Redirect => "redirect",
            MirredMode::Mirror => "mirror",
        };
        let direction = match m.direction {
            MirredDirection::Egress => "egress",
            MirredDirection::Ingress => "ingress",
        };
        j.put("kind", "mirred").put("mirred_action", action).put("direction", direction);
        j.put("to_dev", m.dev.as_str()).put("control_action", control_json(m.verdict));
        j.put("index", m.index).put("ref", refs).put("bind", bind);
        tm(j);
    }

    fn check(m: &MirredOpts, bare: bool, in_filter: bool) -> Result<(), TcError> {
        goto_ok(m.verdict, in_filter)?;
        if bare {
            return Err(kernel_err("act_mirred: Unknown mirred option"));
        }
        Ok(())
    }

    fn device(m: &MirredOpts) -> Option<&str> {
        Some(m.dev.as_str())
    }

    fn encode(m: &MirredOpts, out: &mut Attrs, cx: &ActEncodeCx<'_>) -> Result<(), Unencodable> {
        let mut b = tc_gen(m.index, m.verdict);
        let (eaction, idx) = if m.dev.is_empty() {
            (0, 0)
        } else {
            let idx = (cx.ifindex)(&m.dev).ok_or_else(|| Unencodable {
                kind: "mirred",
                option: format!("dev {}", m.dev),
                why: "no such device".into(),
            })?;
            (m.eaction(), idx)
        };
        b.extend_from_slice(&eaction.to_ne_bytes());
        b.extend_from_slice(&idx.to_ne_bytes());
        out.put(TCA_MIRRED_PARMS, &b);
        Ok(())
    }

    /// The target comes back as `if<N>` (a request names it by index only).
    fn decode(options: &[u8]) -> Result<MirredOpts, DecodeError> {
        let bad = |why: &str| DecodeError::new("mirred", why);
        let p = nlattr::find(options, TCA_MIRRED_PARMS).ok_or_else(|| bad("no TCA_MIRRED_PARMS"))?;
        let (index, verdict) = tc_gen_of(p).ok_or_else(|| bad("bad TCA_MIRRED_PARMS"))?;
        let eaction = p.get(20..24).and_then(nlattr::u32_of).ok_or_else(|| bad("short TCA_MIRRED_PARMS"))?;
        let ifindex = p.get(24..28).and_then(nlattr::u32_of).ok_or_else(|| bad("short TCA_MIRRED_PARMS"))?;
        let (direction, mode) = match eaction {
            0 => (MirredDirection::Egress, MirredMode::Redirect),
            1 => (MirredDirection::Egress, MirredMode::Redirect),
            2 => (MirredDirection::Egress, MirredMode::Mirror),
            3 => (MirredDirection::Ingress, MirredMode::Redirect),
            4 => (MirredDirection::Ingress, MirredMode::Mirror),
            e => return Err(bad(&format!("eaction {e}"))),
        };
        let dev = if eaction == 0 { String::new() } else { format!("if{ifindex}") };
        Ok(MirredOpts { direction, mode, dev, verdict, index })
    }

    /// A redirect that steals the packet moves it; a mirror, or a redirect with another
    /// verdict, sends a copy and lets the original go on with the verdict (the kernel's
    /// `tcf_mirred_act` clones unless it may steal; a mirror that steals is a redirect).
    fn build(m: &MirredOpts, devices: &[Device]) -> Result<CoreAction, BuildError> {
        let dev = devices
            .iter()
            .position(|d| d.name == m.dev)
            .and_then(|i| u16::try_from(i).ok())
            .ok_or_else(|| {
                BuildError::Missing(format!("mirred target {} is not a device of this configuration", m.dev))
            })?;
        let target = MirredTarget { dev, ingress: m.direction == MirredDirection::Ingress };
        Ok(match m.verdict {
            Verdict::Stolen => CoreAction::Redirect(target),
            v => CoreAction::Mirror(target, core_verdict(v)?),
        })
    }

    fn label(m: &MirredOpts) -> String {
        format!(" → {} {}", m.description().to_lowercase(), m.dev)
    }
}
