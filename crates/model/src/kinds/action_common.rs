//! What every action kind's code is written with: tc's control words (`pass`, `drop`,
//! `goto chain N`, ...) as `action_a2n` and `parse_action_control` read them, the kind parser's
//! failure (exit, or -1 and `parse_action`'s tail), the kernel's `struct tc_gen`, the JSON of a
//! control action, and the core's verdict of a model verdict.

use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{matches, Cur};
use crate::json::J;
use crate::model::Verdict;
use sluice_core::filter::action::Verdict as CoreVerdict;

/// A kind parser's failure: tc `exit`s (usage, invarg), or returns -1 (then `parse_action`
/// prints its own tail after the message, if any).
#[derive(Debug, Clone, PartialEq)]
pub enum ActErr {
    /// tc exits with this.
    Exit(TcError),
    /// The kind parser returned -1 after printing this (may be empty).
    Fail(String),
}

impl From<TcError> for ActErr {
    fn from(e: TcError) -> ActErr {
        ActErr::Exit(e)
    }
}

/// tc's "Command line is not complete" at the word before `cur`.
pub fn incomplete(cur: &Cur) -> TcError {
    TcError::fatal("Command line is not complete. Try option \"help\"", Some(cur.pos.saturating_sub(1)))
}

/// NEXT_ARG: move to the next word, which must exist.
pub fn next_arg<'a>(cur: &mut Cur<'a>) -> Result<&'a str, TcError> {
    cur.pos += 1;
    cur.peek().ok_or_else(|| incomplete(cur))
}

/// `get_u32(.., 10)`.
pub fn dec_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// What `action_a2n` makes of a word.
pub enum A2n {
    /// A plain verdict.
    V(Verdict),
    /// `goto` (a chain follows).
    Goto,
    /// `jump` (a count follows).
    Jump,
    /// A number (where numbers are allowed).
    Num(i64),
}

/// tc's `action_a2n`.
pub fn a2n(w: &str, allow_num: bool) -> Option<A2n> {
    const NAMES: [(&str, Option<Verdict>); 10] = [
        ("continue", Some(Verdict::Continue)),
        ("drop", Some(Verdict::Drop)),
        ("shot", Some(Verdict::Drop)),
        ("pass", Some(Verdict::Pass)),
        ("ok", Some(Verdict::Pass)),
        ("reclassify", Some(Verdict::Reclassify)),
        ("pipe", Some(Verdict::Pipe)),
        ("goto", None),
        ("jump", None),
        ("trap", Some(Verdict::Trap)),
    ];
    for (name, v) in NAMES {
        if matches(w, name) {
            return Some(match v {
                Some(v) => A2n::V(v),
                None if name == "goto" => A2n::Goto,
                None => A2n::Jump,
            });
        }
    }
    if allow_num {
        let t = w.trim_start();
        let n: i64 = t.parse().ok()?;
        if (i32::MIN as i64..=i32::MAX as i64).contains(&n) {
            return Some(A2n::Num(n));
        }
    }
    None
}

/// True when `w` names a control action (tc's `action_a2n(w, NULL, false) == 0`).
pub fn is_control(w: &str) -> bool {
    a2n(w, false).is_some()
}

/// A kernel refusal (`Error: MSG.`).
pub fn kernel_err(msg: &str) -> TcError {
    TcError::kernel(msg)
}

/// A numeric control value as the kernel's `tcf_action_check_ctrlact` takes it.
pub fn verdict_of_code(n: i64) -> Result<Verdict, TcError> {
    Ok(match n {
        -1 => Verdict::Continue,
        0 => Verdict::Pass,
        1 => Verdict::Reclassify,
        2 => Verdict::Drop,
        3 => Verdict::Pipe,
        4 => Verdict::Stolen,
        8 => Verdict::Trap,
        n if (0..=8).contains(&n) => {
            return Err(TcError::fatal(format!("Sluice does not emulate the control action value {n}"), None))
        }
        _ => return Err(kernel_err("invalid control action")),
    })
}

/// The verdict of a kernel `TC_ACT_*` value (inverse of [`Verdict::code`]).
pub fn verdict_of_kernel(code: i32) -> Option<Verdict> {
    Some(match code {
        -1 => Verdict::Continue,
        0 => Verdict::Pass,
        1 => Verdict::Reclassify,
        2 => Verdict::Drop,
        3 => Verdict::Pipe,
        4 => Verdict::Stolen,
        8 => Verdict::Trap,
        c if c >> 28 == 1 => Verdict::Jump((c & 0x0FFF_FFFF) as u32),
        c if c >> 28 == 2 => Verdict::Goto((c & 0x0FFF_FFFF) as u32),
        _ => return None,
    })
}

/// tc's `parse_action_control`: a verdict, `goto chain N` or `jump N`; `Ok(None)` when the word
/// is not one (nothing consumed).
pub fn parse_control(cur: &mut Cur, allow_num: bool) -> Result<Option<Verdict>, ActErr> {
    let Some(w) = cur.peek() else { return Ok(None) };
    let Some(a) = a2n(w, allow_num) else { return Ok(None) };
    let v = match a {
        A2n::V(v) => v,
        A2n::Num(n) => verdict_of_code(n)?,
        A2n::Goto => {
            let c = next_arg(cur)?;
            if !matches(c, "chain") {
                return Err(ActErr::Fail("\"chain index\" expected".into()));
            }
            let n = next_arg(cur)?;
            match dec_u32(n).filter(|&n| n <= 0x0FFF_FFFF) {
                Some(n) => Verdict::Goto(n),
                None => return Err(ActErr::Fail("Illegal \"chain index\"".into())),
            }
        }
        A2n::Jump => {
            let n = next_arg(cur)?;
            match dec_u32(n).filter(|&n| n <= 0x0FFF_FFFF) {
                Some(n) => Verdict::Jump(n),
                None => return Err(ActErr::Fail(format!("Invalid \"jump count\" ({n})"))),
            }
        }
    };
    cur.pos += 1;
    Ok(Some(v))
}

/// tc's `parse_action_control_dflt`: a control word if one parses here (consumed), else
/// nothing (and nothing consumed).
pub fn control_or_default(cur: &mut Cur) -> Option<Verdict> {
    let at = cur.pos;
    match parse_control(cur, false) {
        Ok(Some(v)) => Some(v),
        _ => {
            cur.pos = at;
            None
        }
    }
}

/// The kernel's check of a verdict on a new action: `goto chain` needs a filter (a chain).
pub fn goto_ok(v: Verdict, in_filter: bool) -> Result<(), TcError> {
    if matches!(v, Verdict::Goto(_)) && !in_filter {
        return Err(kernel_err("can't goto NULL proto/chain"));
    }
    Ok(())
}

/// `print_action_control`: the verdict as `{"type": ...}`, with goto's chain or jump's count.
pub fn control_json(v: Verdict) -> J {
    let mut c = J::obj();
    c.put("type", v.name());
    match v {
        Verdict::Goto(n) => {
            c.put("chain", n);
        }
        Verdict::Jump(n) => {
            c.put("jump", n);
        }
        _ => {}
    }
    c
}

/// `struct tc_gen`: index, capab, action, refcnt, bindcnt.
pub fn tc_gen(index: u32, action: Verdict) -> Vec<u8> {
    let mut b = Vec::with_capacity(20);
    b.extend_from_slice(&index.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&action.code().to_ne_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b
}

/// The index and action of a `struct tc_gen` (at the start of `p`).
pub fn tc_gen_of(p: &[u8]) -> Option<(u32, Verdict)> {
    let index = u32::from_ne_bytes(p.get(0..4)?.try_into().ok()?);
    let action = i32::from_ne_bytes(p.get(8..12)?.try_into().ok()?);
    Some((index, verdict_of_kernel(action)?))
}

/// The core's verdict of a model verdict.
pub fn core_verdict(v: Verdict) -> Result<CoreVerdict, BuildError> {
    Ok(match v {
        Verdict::Pass => CoreVerdict::Ok,
        Verdict::Drop => CoreVerdict::Drop,
        Verdict::Continue => CoreVerdict::Continue,
        Verdict::Reclassify => CoreVerdict::Reclassify,
        Verdict::Pipe => CoreVerdict::Pipe,
        // In software a trap is a drop (`TC_ACT_TRAP` only means something to hardware).
        Verdict::Trap => CoreVerdict::Drop,
        Verdict::Goto(n) => CoreVerdict::GotoChain(n),
        Verdict::Jump(n) => CoreVerdict::Jump(n),
        // Only a mirred redirect returns it, as its own verdict.
        Verdict::Stolen => {
            return Err(BuildError::Unsupported("a `stolen` verdict outside a mirred redirect".into()))
        }
    })
}
