//! The `mirred` action's grammar and printing, as iproute2 6.1 parses and prints it:
//! `mirred <egress|ingress> <mirror|redirect> [index N] dev DEV [CONTROL] [index N]`.

use super::args::helpers::*;
use super::error::TcError;
use crate::model::{MirredDirection, MirredMode, MirredOpts, Verdict};
use std::fmt::Write;

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
pub(crate) fn parse_mirred(cur: &mut Cur, at: usize) -> Result<MirredOpts, TcError> {
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
        if let Some(v) = sluice_model::kinds::action_common::control_or_default(cur) {
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

/// The words that make this action again (`action mirred egress redirect dev ifb0 index 1`).
pub fn args(m: &MirredOpts) -> String {
    let dir = match m.direction {
        MirredDirection::Egress => "egress",
        MirredDirection::Ingress => "ingress",
    };
    let mode = match m.mode {
        MirredMode::Redirect => "redirect",
        MirredMode::Mirror => "mirror",
    };
    let mut s = format!(" action mirred {dir} {mode} dev {}", m.dev);
    if m.mode == MirredMode::Mirror {
        let _ = write!(s, " {}", m.verdict.name());
    }
    let _ = write!(s, " index {}", m.index);
    s
}
