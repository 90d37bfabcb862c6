//! Actions: the grammar iproute2 6.1 parses after `action` (gact, police, skbedit, and the
//! generic `cookie`), the namespace's action table with the kernel's index, reference and bind
//! counts, `tc actions add|change|replace|get|delete|list|flush`, and the printing of actions in
//! `tc actions` and `tc filter show` output.
//!
//! The kernel keeps one table per action kind and network namespace. An action made with
//! `tc actions add` holds one reference of its own; every filter that uses it holds one more and
//! a bind. A filter's inline action with `index N` binds the existing action N (its own
//! parameters are ignored, as the kernel does); without an index it gets the lowest free one.
//! An action a filter made goes away with its last filter; a bound action cannot be deleted.
//! Here the bind count is not stored: it is the number of filter actions naming the entry.

use super::args::get_tc_classid;
use super::args::helpers::*;
use super::error::TcError;
use super::show::{classid_str, xmitsize, xmittime};
use crate::model::*;
use sluice_core::units::{format_rate, format_size, parse_rate, parse_size};
use sluice_core::Rate;
use std::fmt::Write;

const GACT_USAGE: &str = "Usage: ... gact <ACTION> [RAND] [INDEX]\nWhere: \tACTION := reclassify | drop | continue | pass | pipe |\n       \t          goto chain <CHAIN_INDEX> | jump <JUMP_COUNT>\n\tRAND := random <RANDTYPE> <ACTION> <VAL>\n\tRANDTYPE := netrand | determ\n\tVAL : = value not exceeding 10000\n\tJUMP_COUNT := Absolute jump from start of action list\n\tINDEX := index value used\n";

const POLICE_USAGE: &str = "Usage: ... police [ rate BPS burst BYTES[/BYTES] ] \n\t\t[ pkts_rate RATE pkts_burst PACKETS ] [ mtu BYTES[/BYTES] ]\n\t\t[ peakrate BPS ] [ avrate BPS ] [ overhead BYTES ]\n\t\t[ linklayer TYPE ] [ CONTROL ]\nWhere: CONTROL := conform-exceed <EXCEEDACT>[/NOTEXCEEDACT]\n\t\t  Define how to handle packets which exceed (<EXCEEDACT>)\n\t\t  or conform (<NOTEXCEEDACT>) the configured bandwidth limit.\n       EXCEEDACT/NOTEXCEEDACT := { pipe | ok | reclassify | drop | continue |\n\t\t\t\t   goto chain <CHAIN_INDEX> }";

const SKBEDIT_USAGE: &str = "Usage: ... skbedit <[QM] [PM] [MM] [PT] [IF]>\nQM = queue_mapping QUEUE_MAPPING\nPM = priority PRIORITY\nMM = mark MARK[/MASK]\nPT = ptype PACKETYPE\nIF = inheritdsfield\nPACKETYPE = is one of:\n  host, otherhost, broadcast, multicast\nQUEUE_MAPPING = device transmit queue to use\nPRIORITY = classID to assign to priority field\nMARK = firewall mark to set\nMASK = mask applied to firewall mark (0xffffffff by default)\nnote: inheritdsfield maps DS field to skb->priority";

const ACT_USAGE: &str = "usage: tc actions <ACTSPECOP>*\nWhere: \tACTSPECOP := ACR | GD | FL\n\tACR := add | change | replace <ACTSPEC>*\n\tGD := get | delete | <ACTISPEC>*\n\tFL := ls | list | flush | <ACTNAMESPEC>\n\tACTNAMESPEC :=  action <ACTNAME>\n\tACTISPEC := <ACTNAMESPEC> <INDEXSPEC>\n\tACTSPEC := action <ACTDETAIL> [INDEXSPEC] [HWSTATSSPEC] [SKIPSPEC]\n\tINDEXSPEC := index <32 bit indexvalue>\n\tHWSTATSSPEC := hw_stats [ immediate | delayed | disabled ]\n\tSKIPSPEC := [ skip_sw | skip_hw ]\n\tACTDETAIL := <ACTNAME> <ACTPARAMS>\n\t\tExample ACTNAME is gact, mirred, bpf, etc\n\t\tEach action has its own parameters (ACTPARAMS)\n";

/// Action kinds Sluice emulates.
pub const KINDS: [&str; 4] = ["gact", "police", "skbedit", "mirred"];

/// One parsed action with the generic parts tc sends beside its options.
#[derive(Clone, Debug, PartialEq)]
pub struct ActionSpec {
    /// Kind, options, index (0: none given).
    pub action: Action,
    /// `cookie HEX`, lowercase.
    pub cookie: Option<String>,
    /// Only `index N` was given (binds an existing action).
    pub bare: bool,
    /// Given with the filter's own `police` keyword (the kernel's old `TCA_*_POLICE`: it then
    /// takes the place of the filter's whole action list and prints without `action order`).
    pub compat: bool,
}

/// Where an action list is parsed: a failed kind parser makes `tc actions` exit 255 and
/// `tc filter` exit 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctx {
    /// `tc actions add|change|replace`.
    Standalone,
    /// Inside a filter.
    Filter,
}

/// A kind parser's failure: tc `exit`s (usage, invarg), or returns -1 (then `parse_action`
/// prints its own tail).
enum PErr {
    Exit(TcError),
    Fail(String),
}

impl From<TcError> for PErr {
    fn from(e: TcError) -> PErr {
        PErr::Exit(e)
    }
}

fn incomplete(cur: &Cur) -> TcError {
    TcError::fatal("Command line is not complete. Try option \"help\"", Some(cur.pos.saturating_sub(1)))
}

/// NEXT_ARG: move to the next word, which must exist.
fn next_arg<'a>(cur: &mut Cur<'a>) -> Result<&'a str, TcError> {
    cur.pos += 1;
    cur.peek().ok_or_else(|| incomplete(cur))
}

/// `get_u32(.., 10)`.
fn dec_u32(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// What `action_a2n` makes of a word.
enum A2n {
    V(Verdict),
    Goto,
    Jump,
    Num(i64),
}

fn a2n(w: &str, allow_num: bool) -> Option<A2n> {
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
fn is_control(w: &str) -> bool {
    a2n(w, false).is_some()
}

/// A numeric control value as the kernel's `tcf_action_check_ctrlact` takes it.
fn verdict_of_code(n: i64) -> Result<Verdict, TcError> {
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

/// tc's `parse_action_control`: a verdict, `goto chain N` or `jump N`; `Ok(None)` when the word
/// is not one (nothing consumed).
fn parse_control(cur: &mut Cur, allow_num: bool) -> Result<Option<Verdict>, PErr> {
    let Some(w) = cur.peek() else { return Ok(None) };
    let Some(a) = a2n(w, allow_num) else { return Ok(None) };
    let v = match a {
        A2n::V(v) => v,
        A2n::Num(n) => verdict_of_code(n)?,
        A2n::Goto => {
            let c = next_arg(cur)?;
            if !matches(c, "chain") {
                return Err(PErr::Fail("\"chain index\" expected".into()));
            }
            let n = next_arg(cur)?;
            match dec_u32(n).filter(|&n| n <= 0x0FFF_FFFF) {
                Some(n) => Verdict::Goto(n),
                None => return Err(PErr::Fail("Illegal \"chain index\"".into())),
            }
        }
        A2n::Jump => {
            let n = next_arg(cur)?;
            match dec_u32(n).filter(|&n| n <= 0x0FFF_FFFF) {
                Some(n) => Verdict::Jump(n),
                None => return Err(PErr::Fail(format!("Invalid \"jump count\" ({n})"))),
            }
        }
    };
    cur.pos += 1;
    Ok(Some(v))
}

/// tc's `parse_action_control_dflt`: a control word if one parses here (consumed), else
/// nothing (and nothing consumed).
pub(crate) fn control_or_default(cur: &mut Cur) -> Option<Verdict> {
    let at = cur.pos;
    match parse_control(cur, false) {
        Ok(Some(v)) => Some(v),
        _ => {
            cur.pos = at;
            None
        }
    }
}

/// A kernel refusal (`Error: MSG.`).
fn kernel_err(msg: &str) -> TcError {
    TcError::kernel(msg)
}

/// A kernel refusal as `tc actions add|change|replace` reports it (exit 255).
fn talk(e: TcError) -> TcError {
    if e.code != 2 {
        return e;
    }
    TcError {
        code: 255,
        message: format!("{}\nWe have an error talking to the kernel", e.message),
        arg: e.arg,
    }
}

fn gact_usage(pre: &str) -> PErr {
    PErr::Exit(TcError::fatal(format!("{pre}{GACT_USAGE}"), None))
}

/// `gact`: `[gact] CONTROL [random netrand|determ CONTROL VAL] [index N]`, or `[gact] index N`.
fn parse_gact(cur: &mut Cur) -> Result<ActionSpec, PErr> {
    if cur.peek().is_some_and(|w| matches(w, "gact")) {
        next_arg(cur)?;
    }
    let mut index = 0;
    let w = cur.peek().unwrap_or("");
    if matches(w, "index") {
        let v = next_arg(cur)?;
        index = dec_u32(v).ok_or_else(|| PErr::Fail("Illegal \"index\"".into()))?;
        cur.pos += 1;
        return Ok(ActionSpec {
            action: Action::Gact { verdict: Verdict::Pass, index, random: None },
            cookie: None,
            bare: true,
            compat: false,
        });
    }
    let verdict = match parse_control(cur, false)? {
        Some(v) => v,
        None => return Err(gact_usage(&format!("Bad action type {w}\n"))),
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
                return Err(PErr::Fail("Illegal \"random type\"".into()));
            };
            let w = next_arg(cur)?;
            let pv = match parse_control(cur, false)? {
                Some(v) => v,
                None => return Err(gact_usage(&format!("Bad action type {w}\n"))),
            };
            let val = cur.peek().ok_or_else(|| incomplete(cur))?;
            let val: u16 = match val.parse() {
                Ok(v) if v <= 10000 => v,
                Ok(v) => return Err(PErr::Fail(format!("Illegal probability val  {v:#x}"))),
                Err(_) => return Err(PErr::Fail("Illegal probability val 0x0".into())),
            };
            cur.pos += 1;
            random = Some(GactRandom { determ, verdict: pv, val });
        } else if matches(w, "help") {
            return Err(gact_usage(""));
        }
    }
    if let Some(w) = cur.peek() {
        if matches(w, "index") {
            let v = next_arg(cur)?;
            index = dec_u32(v).ok_or_else(|| PErr::Fail("Illegal \"index\"".into()))?;
            cur.pos += 1;
        } else if matches(w, "help") {
            return Err(gact_usage(""));
        }
    }
    Ok(ActionSpec {
        action: Action::Gact { verdict, index, random },
        cookie: None,
        bare: false,
        compat: false,
    })
}

fn size_value(v: &str, what: &str, at: usize) -> Result<u32, TcError> {
    let s = v.split('/').next().unwrap_or(v);
    parse_size(s).ok().and_then(|b| u32::try_from(b).ok()).ok_or_else(|| TcError::invarg(what, v, at))
}

fn rate_value(v: &str, what: &str, at: usize) -> Result<u64, TcError> {
    parse_rate(v).map(Rate::bps).map_err(|_| TcError::invarg(what, v, at))
}

/// `police ...` after the word `police` (the filter's `police` keyword and `action police`).
/// Stops at the first word it does not know, as tc does.
fn parse_police_opts(cur: &mut Cur) -> Result<ActionSpec, PErr> {
    let mut p = PoliceOpts { exceed: Verdict::Reclassify, conform: Verdict::Pass, ..Default::default() };
    let mut ok = 0;
    let (mut rate, mut burst, mut mtu, mut peak, mut avrate) = (None, None, None, None, None);
    let (mut mpu, mut pps, mut ppsburst) = (None, None, None);
    let mut conform = None;
    while let Some(w) = cur.peek() {
        let at = cur.pos;
        if matches(w, "index") {
            let v = next_arg(cur)?;
            p.index = dec_u32(v).ok_or_else(|| TcError::invarg("index", v, at + 1))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            let v = next_arg(cur)?;
            if burst.is_some() {
                return Err(TcError::duparg("buffer/burst", v, at + 1).into());
            }
            burst = Some(size_value(v, "buffer", at + 1)?);
        } else if w == "mtu" || w == "minburst" {
            let v = next_arg(cur)?;
            if mtu.is_some() {
                return Err(TcError::duparg("mtu/minburst", v, at + 1).into());
            }
            mtu = Some(size_value(v, "mtu", at + 1)?);
        } else if w == "mpu" {
            let v = next_arg(cur)?;
            if mpu.is_some() {
                return Err(TcError::duparg("mpu", v, at + 1).into());
            }
            mpu = Some(size_value(v, "mpu", at + 1)?);
        } else if w == "rate" {
            let v = next_arg(cur)?;
            if rate.is_some() {
                return Err(TcError::duparg("rate", v, at + 1).into());
            }
            rate = Some(rate_value(v, "rate", at + 1)?);
        } else if w == "avrate" {
            let v = next_arg(cur)?;
            if avrate.is_some() {
                return Err(TcError::duparg("avrate", v, at + 1).into());
            }
            avrate = Some(rate_value(v, "avrate", at + 1)?);
        } else if matches(w, "peakrate") {
            let v = next_arg(cur)?;
            if peak.is_some() {
                return Err(TcError::duparg("peakrate", v, at + 1).into());
            }
            peak = Some(rate_value(v, "peakrate", at + 1)?);
        } else if ["reclassify", "drop", "shot", "continue", "pass", "ok", "pipe", "goto"]
            .iter()
            .any(|k| matches(w, k))
        {
            match parse_control(cur, false)? {
                Some(v) => p.exceed = v,
                None => return Err(PErr::Fail(String::new())),
            }
            ok += 1;
            continue;
        } else if w == "conform-exceed" {
            let v = next_arg(cur)?;
            match v.split_once('/') {
                Some((e, c)) => {
                    let one = |s: &str| -> Result<Verdict, PErr> {
                        match a2n(s, true) {
                            Some(A2n::V(v)) => Ok(v),
                            Some(A2n::Num(n)) => Ok(verdict_of_code(n)?),
                            // `goto`/`jump` in the one-word form have no chain or count.
                            Some(_) => Ok(Verdict::Goto(0)),
                            None => Err(PErr::Fail(String::new())),
                        }
                    };
                    p.exceed = one(e)?;
                    conform = Some(one(c)?);
                    cur.pos += 1;
                }
                None => {
                    p.exceed = parse_control(cur, true)?.ok_or(PErr::Fail(String::new()))?;
                    if cur.peek() == Some("/") {
                        next_arg(cur)?;
                        conform = Some(parse_control(cur, true)?.ok_or(PErr::Fail(String::new()))?);
                    }
                }
            }
            ok += 1;
            continue;
        } else if matches(w, "overhead") {
            let v = next_arg(cur)?;
            p.overhead = v.parse().map_err(|_| TcError::invarg("overhead", v, at + 1))?;
        } else if matches(w, "linklayer") {
            let v = next_arg(cur)?;
            p.linklayer = if matches(v, "ethernet") {
                LinkLayer::Ethernet
            } else if matches(v, "atm") || matches(v, "adsl") {
                LinkLayer::Atm
            } else {
                return Err(TcError::invarg("linklayer", v, at + 1).into());
            };
        } else if matches(w, "pkts_rate") {
            let v = next_arg(cur)?;
            if pps.is_some() {
                return Err(TcError::duparg("pkts_rate", v, at + 1).into());
            }
            pps = Some(v.parse::<u64>().map_err(|_| TcError::invarg("pkts_rate", v, at + 1))?);
        } else if matches(w, "pkts_burst") {
            let v = next_arg(cur)?;
            if ppsburst.is_some() {
                return Err(TcError::duparg("pkts_burst", v, at + 1).into());
            }
            ppsburst = Some(v.parse::<u64>().map_err(|_| TcError::invarg("pkts_burst", v, at + 1))?);
        } else if w == "help" {
            return Err(TcError::fatal(POLICE_USAGE, Some(at)).into());
        } else {
            break;
        }
        cur.pos += 1;
        ok += 1;
    }
    if ok == 0 {
        return Err(PErr::Fail(String::new()));
    }
    let rate = rate.filter(|&r| r > 0);
    if rate.is_some() && avrate.is_some() {
        return Err(PErr::Fail(String::new()));
    }
    if rate.is_none() && avrate.is_none() && p.index == 0 && mtu.is_none() && pps.is_none() {
        return Err(PErr::Fail("'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.".into()));
    }
    if rate.is_some() && burst.is_none() && avrate.is_none() {
        return Err(PErr::Fail("'burst' requires 'rate'.".into()));
    }
    if pps.is_some() && ppsburst.is_none() {
        return Err(PErr::Fail("'pkts_burst' requires 'pkts_rate'.".into()));
    }
    if pps.is_some() && rate.is_some() {
        return Err(PErr::Fail("'rate' and 'pkts_rate' are not allowed in same action.".into()));
    }
    if peak.is_some() {
        if rate.is_none() {
            return Err(PErr::Fail("'peakrate' requires 'rate'.".into()));
        }
        if mtu.is_none() {
            return Err(PErr::Fail("'mtu' is required, if 'peakrate' is requested.".into()));
        }
    }
    p.rate = rate.unwrap_or(0);
    p.burst = burst.unwrap_or(0);
    p.mtu = mtu;
    p.peakrate = peak;
    p.avrate = avrate;
    p.mpu = mpu.unwrap_or(0);
    p.pkts_rate = pps;
    p.pkts_burst = ppsburst;
    if let Some(c) = conform {
        p.conform = c;
    }
    let bare = p.rate == 0 && avrate.is_none() && mtu.is_none() && pps.is_none();
    Ok(ActionSpec { action: Action::Police(p), cookie: None, bare, compat: false })
}

/// `skbedit` options after the word `skbedit`.
fn parse_skbedit(cur: &mut Cur) -> Result<ActionSpec, PErr> {
    next_arg(cur)?;
    let mut k = SkbeditOpts { verdict: Verdict::Pipe, ..Default::default() };
    let mut ok = 0;
    let mut flags = 0;
    while let Some(w) = cur.peek() {
        if matches(w, "queue_mapping") {
            let v = next_arg(cur)?;
            match dec_u32(v).filter(|&q| q <= 65535) {
                Some(q) => k.queue_mapping = Some(q as u16),
                None => return Err(PErr::Fail("Illegal queue_mapping".into())),
            }
        } else if matches(w, "priority") {
            let v = next_arg(cur)?;
            k.priority = Some(get_tc_classid(v).ok_or_else(|| PErr::Fail("Illegal priority".into()))?);
        } else if matches(w, "mark") {
            let v = next_arg(cur)?;
            let (m, mask) = match v.split_once('/') {
                Some((m, x)) => (m, Some(x)),
                None => (v, None),
            };
            k.mark = Some(get_u32(m).ok_or_else(|| PErr::Fail("Illegal mark".into()))?);
            if let Some(x) = mask {
                k.mask = Some(get_u32(x).ok_or_else(|| PErr::Fail("Illegal mask".into()))?);
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
                return Err(PErr::Fail(format!("Illegal ptype ({v})")));
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
        k.index = dec_u32(v).ok_or_else(|| PErr::Fail("skbedit: Illegal \"index\"".into()))?;
        cur.pos += 1;
        ok += 1;
    }
    if ok == 0 {
        return Err(PErr::Fail(SKBEDIT_USAGE.into()));
    }
    Ok(ActionSpec { action: Action::Skbedit(k), cookie: None, bare: flags == 0, compat: false })
}

/// The filter's `police` keyword: the policer options after it.
pub(crate) fn parse_police_keyword(cur: &mut Cur, ctx: Ctx) -> Result<PoliceOpts, TcError> {
    let at = cur.pos.saturating_sub(1);
    match parse_police_opts(cur) {
        Ok(ActionSpec { action: Action::Police(p), .. }) => Ok(p),
        Ok(_) => unreachable!("the police parser makes police actions"),
        Err(e) => Err(failed(cur, at, e, ctx)),
    }
}

/// tc's output when a kind parser returned -1 (`at`: the argv index of the kind word).
fn failed(cur: &Cur, at: usize, e: PErr, ctx: Ctx) -> TcError {
    match e {
        PErr::Exit(e) => e,
        PErr::Fail(msg) => {
            let left = cur.argv.len().saturating_sub(at);
            let word = cur.argv.get(at).map(String::as_str).unwrap_or("");
            let mut m = String::new();
            if !msg.is_empty() {
                m.push_str(&msg);
                m.push('\n');
            }
            let _ =
                write!(m, "bad action parsing\nparse_action: bad value ({left}:{word})!\nIllegal \"action\"");
            TcError { code: if ctx == Ctx::Standalone { 255 } else { 1 }, message: m, arg: Some(at) }
        }
    }
}

/// `cookie HEX` after an action.
fn parse_cookie(cur: &mut Cur) -> Result<Option<String>, TcError> {
    if cur.peek() != Some("cookie") {
        return Ok(None);
    }
    let v = next_arg(cur)?;
    let at = cur.pos;
    if v.len() > 32 {
        return Err(TcError::invarg(&format!("{} Max allowed size 32", v.len()), v, at));
    }
    if v.len() % 2 != 0 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(TcError::invarg("cookie must be a hex string\n", v, at));
    }
    cur.pos += 1;
    // tc sends no TCA_ACT_COOKIE for an empty cookie (`if (act_ck_len)`).
    Ok(Some(v.to_ascii_lowercase()).filter(|c| !c.is_empty()))
}

/// `matches(w, add|change|replace|delete|get)`: a new `tc actions` command starts.
fn new_cmd(w: &str) -> bool {
    ["change", "replace", "delete", "get", "add"].iter().any(|c| matches(w, c))
}

/// tc's `parse_action`: the action list after the word `action` (already consumed). Stops at
/// `classid`/`flowid`, at a new `tc actions` command word, or at the end.
pub(crate) fn parse_action_list(cur: &mut Cur, ctx: Ctx) -> Result<Vec<ActionSpec>, TcError> {
    let mut out = Vec::new();
    let mut eap = true;
    while let Some(w) = cur.peek() {
        if w == "action" {
            cur.pos += 1;
            eap = true;
            continue;
        }
        if w == "flowid" || w == "classid" || new_cmd(w) {
            break;
        }
        if w == "help" {
            return Err(TcError::fatal(format!("{ACT_USAGE}Illegal \"action\""), Some(cur.pos)));
        }
        eap = false;
        let at = cur.pos;
        let kind = if is_control(w) { "gact" } else { w };
        let parsed = match kind {
            "police" => {
                cur.pos += 1;
                if cur.peek().is_none() {
                    return Err(incomplete(cur));
                }
                parse_police_opts(cur)
            }
            "skbedit" => parse_skbedit(cur),
            "mirred" => {
                cur.pos += 1;
                let m = super::mirred::parse_mirred(cur, at).map_err(|mut e| {
                    if ctx == Ctx::Standalone && e.code == 1 {
                        e.code = 255;
                    }
                    e
                })?;
                let bare = m.dev.is_empty();
                Ok(ActionSpec { action: Action::Mirred(m), cookie: None, bare, compat: false })
            }
            k if is_unsupported_kind(k) => {
                return Err(TcError::fatal(format!("Sluice does not emulate the {k} action"), Some(at)))
            }
            // Any other word goes to gact, as tc falls back to it.
            _ => parse_gact(cur),
        };
        let mut spec = parsed.map_err(|e| failed(cur, at, e, ctx))?;
        spec.cookie = parse_cookie(cur)?;
        if cur.peek().is_some_and(|w| matches(w, "hw_stats")) {
            let v = next_arg(cur)?;
            if !["immediate", "delayed", "disabled"].iter().any(|k| matches(v, k)) {
                return Err(TcError::invarg("value is invalid\n", v, cur.pos));
            }
            cur.pos += 1;
        }
        // Accepted and not kept (software-only emulation): `no_percpu`, then `skip_sw` and
        // `skip_hw` in either order, as tc reads them.
        for flag in ["no_percpu", "skip_sw", "skip_hw", "skip_sw"] {
            if cur.peek() == Some(flag) {
                cur.pos += 1;
            }
        }
        out.push(spec);
    }
    if eap {
        let left = cur.argv.len().saturating_sub(cur.pos);
        let word = cur.peek().unwrap_or("(null)");
        return Err(TcError {
            code: if ctx == Ctx::Standalone { 255 } else { 1 },
            message: format!(
                "bad action empty 1\nparse_action: bad value ({left}:{word})!\nIllegal \"action\""
            ),
            arg: Some(cur.pos),
        });
    }
    Ok(out)
}

/// Action kinds iproute2 knows that Sluice does not emulate.
fn is_unsupported_kind(k: &str) -> bool {
    [
        "bpf",
        "connmark",
        "csum",
        "ct",
        "ctinfo",
        "gate",
        "ife",
        "ipt",
        "mpls",
        "nat",
        "pedit",
        "sample",
        "simple",
        "tunnel_key",
        "vlan",
        "xt",
        "mirred",
    ]
    .contains(&k)
}

/// A parsed `tc actions ...` command.
#[derive(Clone, Debug, PartialEq)]
pub enum ActionsCmd {
    /// `add` (`replace` false) or `change`/`replace` (true).
    Modify {
        /// May replace an existing action.
        replace: bool,
        /// The actions, in order.
        specs: Vec<ActionSpec>,
    },
    /// `get` (`delete` false) or `delete` (true) of actions by kind and index.
    GetDel {
        /// Delete.
        delete: bool,
        /// (kind, index) pairs.
        items: Vec<(String, u32)>,
        /// The word after the verb (tc names it when the kernel refused).
        first: String,
    },
    /// `list`/`show`/`ls` (`flush` false) or `flush` (true) of one kind.
    ListFlush {
        /// Flush.
        flush: bool,
        /// The kind.
        kind: String,
    },
    /// Nothing to do (`tc actions`).
    Nothing,
}

/// Parses the words after `tc actions`.
pub fn parse_actions_cmd(argv: &[String], max_minor: u32) -> Result<ActionsCmd, TcError> {
    let Some(verb) = argv.first() else { return Ok(ActionsCmd::Nothing) };
    let mut cur = Cur { argv, pos: 1, max_minor };
    if matches(verb, "add") || matches(verb, "change") || matches(verb, "replace") {
        let replace = !matches(verb, "add");
        if argv.len() < 2 {
            return Err(TcError::fatal("Illegal \"action\"", Some(0)));
        }
        let specs = parse_action_list(&mut cur, Ctx::Standalone).map_err(talk)?;
        if cur.pos < argv.len() {
            return Err(TcError::fatal(
                format!("Sluice runs one command per \"tc actions\" line, not \"{}\"", argv[cur.pos]),
                Some(cur.pos),
            ));
        }
        return Ok(ActionsCmd::Modify { replace, specs });
    }
    if matches(verb, "delete") || matches(verb, "get") {
        let delete = matches(verb, "delete");
        let first = argv.get(1).cloned().unwrap_or_default();
        let mut items = Vec::new();
        let mut i = 2;
        while i < argv.len() {
            let w = argv[i].as_str();
            if w == "action" {
                i += 1;
                continue;
            }
            if w == "help" {
                return Err(TcError::fatal(ACT_USAGE, Some(i)));
            }
            if !KINDS.contains(&w) {
                if is_unsupported_kind(w) {
                    return Err(TcError::fatal(format!("Sluice does not emulate the {w} action"), Some(i)));
                }
                return Err(TcError::fatal(format!("Error: non existent action: {w}"), Some(i)));
            }
            i += 1;
            let no_index = || TcError::fatal(format!("Error: no index specified action: {w}"), Some(i));
            let Some(iw) = argv.get(i) else { return Err(no_index()) };
            if !matches(iw, "index") {
                return Err(no_index());
            }
            i += 1;
            let Some(v) = argv.get(i) else { return Err(incomplete(&Cur { argv, pos: i, max_minor })) };
            let idx = dec_u32(v).ok_or_else(|| TcError::fatal("Illegal \"index\"", Some(i)))?;
            items.push((w.to_string(), idx));
            i += 1;
        }
        return Ok(ActionsCmd::GetDel { delete, items, first });
    }
    let list = matches(verb, "list") || matches(verb, "show") || matches(verb, "lst");
    if list || matches(verb, "flush") {
        if argv.len() <= 2 {
            return Err(TcError::fatal(ACT_USAGE, Some(0)));
        }
        return Ok(ActionsCmd::ListFlush { flush: !list, kind: argv[2].clone() });
    }
    if matches(verb, "help") {
        return Err(TcError::fatal(ACT_USAGE, Some(0)));
    }
    Err(TcError::fatal(format!("Command \"{verb}\" is unknown, try \"tc actions help\"."), Some(0)))
}

/// The number of filter actions bound to `kind` `index`.
pub fn binds(state: &State, kind: &str, index: u32) -> u32 {
    state
        .devices
        .iter()
        .flat_map(|d| d.filters.iter())
        .flat_map(|f| f.actions.iter())
        .filter(|a| a.kind() == kind && a.index() == index)
        .count() as u32
}

pub(crate) fn position(actions: &[ActionEntry], kind: &str, index: u32) -> Option<usize> {
    actions.iter().position(|e| e.action.kind() == kind && e.action.index() == index)
}

/// The lowest free index of `kind` (the kernel's `idr_alloc_u32` from 1).
fn free_index(actions: &[ActionEntry], kind: &str) -> Option<u32> {
    let mut used: Vec<u32> =
        actions.iter().filter(|e| e.action.kind() == kind).map(|e| e.action.index()).collect();
    used.sort_unstable();
    let mut want = 1u32;
    for u in used {
        if u == want {
            want = want.checked_add(1)?;
        } else if u > want {
            break;
        }
    }
    Some(want)
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// tc's own check of a mirred target (it resolves the name before sending anything); every
/// namespace has `lo`.
fn check_target(state: &State, spec: &ActionSpec, ctx: Ctx) -> Result<(), TcError> {
    if let Action::Mirred(m) = &spec.action {
        if !spec.bare && m.dev != "lo" && !state.devices.iter().any(|d| d.name == m.dev) {
            return Err(TcError {
                code: if ctx == Ctx::Standalone { 255 } else { 1 },
                message: format!(
                    "Cannot find device \"{}\"\nbad action parsing\nparse_action: bad value (mirred)!\nIllegal \"action\"",
                    m.dev
                ),
                arg: None,
            });
        }
    }
    Ok(())
}

/// The kernel's checks when it makes (or replaces) an action from `spec`; `in_filter`: a filter
/// holds it (only then can a verdict `goto chain`).
fn check_new(spec: &ActionSpec, in_filter: bool) -> Result<(), TcError> {
    let goto_ok = |v: Verdict| -> Result<(), TcError> {
        if matches!(v, Verdict::Goto(_)) && !in_filter {
            return Err(kernel_err("can't goto NULL proto/chain"));
        }
        Ok(())
    };
    match &spec.action {
        Action::Gact { verdict, random, .. } => {
            if random.is_some_and(|r| matches!(r.verdict, Verdict::Goto(_))) {
                return Err(kernel_err("goto chain not allowed on fallback"));
            }
            goto_ok(*verdict)?;
        }
        Action::Police(p) => {
            goto_ok(p.exceed)?;
            if matches!(p.conform, Verdict::Goto(_)) {
                return Err(kernel_err("goto chain not allowed on fallback"));
            }
        }
        Action::Skbedit(k) => {
            goto_ok(k.verdict)?;
            if spec.bare {
                return Err(TcError::errno("Invalid argument"));
            }
        }
        Action::Mirred(m) => {
            goto_ok(m.verdict)?;
            if spec.bare {
                return Err(kernel_err("act_mirred: Unknown mirred option"));
            }
        }
    }
    Ok(())
}

/// Resolves a filter's action list against the table: an action whose index exists binds it
/// (taking its parameters); the others are new entries (lowest free index when none was given).
/// Returns the filter's actions and the entries to add once the filter is made.
pub fn bind_filter_actions(
    state: &State,
    specs: &[ActionSpec],
) -> Result<(Vec<Action>, Vec<ActionEntry>), TcError> {
    let mut table: Vec<ActionEntry> = state.actions.clone();
    let mut added = Vec::new();
    let mut out = Vec::new();
    // With the `police` keyword the kernel takes that policer alone (`tcf_exts_validate`).
    let specs = match specs.iter().rposition(|s| s.compat) {
        Some(p) => &specs[p..=p],
        None => specs,
    };
    for s in specs {
        check_target(state, s, Ctx::Filter)?;
    }
    for s in specs {
        let kind = s.action.kind();
        let idx = s.action.index();
        if idx != 0 {
            if let Some(p) = position(&table, kind, idx) {
                out.push(table[p].action.clone());
                continue;
            }
        }
        check_new(s, true)?;
        let mut a = s.action.clone();
        if idx == 0 {
            a.set_index(free_index(&table, kind).ok_or_else(|| TcError::errno("No space left on device"))?);
        }
        let e = ActionEntry {
            action: a.clone(),
            standalone: false,
            cookie: s.cookie.clone(),
            installed_ms: now_ms(),
        };
        table.push(e.clone());
        added.push(e);
        out.push(a);
    }
    Ok((out, added))
}

/// Adds the entries a filter made and drops every entry nothing holds any more (an inline action
/// whose last filter went away). Call after each change of filters.
pub fn settle(state: &mut State, added: Vec<ActionEntry>) {
    state.actions.extend(added);
    let held: Vec<bool> = state
        .actions
        .iter()
        .map(|e| e.standalone || binds(state, e.action.kind(), e.action.index()) > 0)
        .collect();
    let mut i = 0;
    state.actions.retain(|_| {
        i += 1;
        held[i - 1]
    });
    state
        .actions
        .sort_by(|a, b| (a.action.kind(), a.action.index()).cmp(&(b.action.kind(), b.action.index())));
}

/// Writes new parameters of `kind` `index` into the table and into every filter bound to it.
fn set_params(state: &mut State, action: &Action) {
    let (kind, index) = (action.kind(), action.index());
    for d in &mut state.devices {
        for f in &mut d.filters {
            for a in &mut f.actions {
                if a.kind() == kind && a.index() == index {
                    *a = action.clone();
                }
            }
        }
    }
    if let Some(p) = position(&state.actions, kind, index) {
        state.actions[p].action = action.clone();
    }
}

/// Runs a `tc actions` command; returns what tc prints on stdout, and on stderr for a success
/// with a warning.
pub fn execute(
    state: &mut State,
    cmd: &ActionsCmd,
    opts: super::ShowOpts,
) -> Result<(String, Vec<String>), TcError> {
    let mut out = String::new();
    match cmd {
        ActionsCmd::Nothing => {}
        ActionsCmd::Modify { replace, specs } => {
            // Check everything first: the kernel undoes the whole list when one action fails.
            let mut table = state.actions.clone();
            let mut writes: Vec<(Action, Option<String>, bool)> = Vec::new();
            for s in specs {
                check_target(state, s, Ctx::Standalone)?;
            }
            for s in specs {
                let kind = s.action.kind();
                let mut a = s.action.clone();
                let idx = a.index();
                // An index this command is making: the kernel holds it reserved (busy) until the
                // command ends, and a second use waits for it in vain.
                if idx != 0
                    && writes.iter().any(|(w, _, existed)| !existed && w.kind() == kind && w.index() == idx)
                {
                    return Err(talk(TcError::errno("Resource temporarily unavailable")));
                }
                let exists = idx != 0 && position(&table, kind, idx).is_some();
                if exists && !replace {
                    return Err(talk(TcError::errno("File exists")));
                }
                check_new(s, false).map_err(talk)?;
                if idx == 0 {
                    a.set_index(
                        free_index(&table, kind).ok_or_else(|| TcError::errno("No space left on device"))?,
                    );
                }
                if !exists {
                    table.push(ActionEntry {
                        action: a.clone(),
                        standalone: true,
                        cookie: None,
                        installed_ms: 0,
                    });
                }
                writes.push((a, s.cookie.clone(), exists));
            }
            let now = now_ms();
            for (a, cookie, exists) in writes {
                if exists {
                    set_params(state, &a);
                    if let Some(c) = cookie {
                        if let Some(p) = position(&state.actions, a.kind(), a.index()) {
                            state.actions[p].cookie = Some(c);
                        }
                    }
                } else {
                    state.actions.push(ActionEntry {
                        action: a,
                        standalone: true,
                        cookie,
                        installed_ms: now,
                    });
                }
            }
            settle(state, Vec::new());
        }
        ActionsCmd::GetDel { delete, items, first } => {
            let refused = |e: TcError| {
                TcError {
                code: 255,
                message: format!(
                    "{}\nWe have an error talking to the kernel\nCommand \"{first}\" is unknown, try \"tc actions help\".",
                    e.message
                ),
                arg: None,
            }
            };
            let mut found = Vec::new();
            for (kind, index) in items {
                if *index == 0 {
                    return Err(refused(TcError::kernel("Invalid TC action index value")));
                }
                match position(&state.actions, kind, *index) {
                    Some(p) => found.push(p),
                    None => return Err(refused(TcError::kernel("TC action with specified index not found"))),
                }
            }
            if *delete {
                if found.iter().any(|&p| {
                    let a = &state.actions[p].action;
                    binds(state, a.kind(), a.index()) > 0
                }) {
                    return Err(refused(TcError::kernel("Failed to delete TC action")));
                }
                let gone: Vec<(String, u32)> = found
                    .iter()
                    .map(|&p| (state.actions[p].action.kind().to_string(), state.actions[p].action.index()))
                    .collect();
                state
                    .actions
                    .retain(|e| !gone.iter().any(|(k, i)| e.action.kind() == k && e.action.index() == *i));
            } else if opts.json {
                out = super::json::actions_dump(state, &found, 0, 1, Dump::Get, opts);
            } else {
                out.push_str("total acts 0\n");
                for (n, &p) in found.iter().enumerate() {
                    let _ = write!(out, "\n\taction order {}: ", n + 1);
                    print_action(&mut out, state, &state.actions[p], Dump::Get, opts, now_ms());
                }
            }
        }
        ActionsCmd::ListFlush { flush, kind } => {
            if !KINDS.contains(&kind.as_str()) {
                if is_unsupported_kind(kind) {
                    return Err(TcError::fatal(format!("Sluice does not emulate the {kind} action"), None));
                }
                // tc prints this and exits 0.
                return Ok((out, vec![format!("bad action {kind}")]));
            }
            let of_kind: Vec<usize> =
                (0..state.actions.len()).filter(|&i| state.actions[i].action.kind() == kind).collect();
            if *flush {
                // In index order, up to the first bound action.
                let mut gone = Vec::new();
                for &i in &of_kind {
                    let a = &state.actions[i].action;
                    if binds(state, a.kind(), a.index()) > 0 {
                        if gone.is_empty() {
                            return Err(TcError {
                                code: 1,
                                message:
                                    "RTNETLINK answers: Operation not permitted\nWe have an error flushing"
                                        .into(),
                                arg: None,
                            });
                        }
                        let idx: Vec<u32> =
                            gone.iter().map(|&g: &usize| state.actions[g].action.index()).collect();
                        state
                            .actions
                            .retain(|e| !(e.action.kind() == kind && idx.contains(&e.action.index())));
                        return Ok((out, vec!["Warning: Unable to flush all TC actions.".into()]));
                    }
                    gone.push(i);
                }
                state.actions.retain(|e| e.action.kind() != kind);
            } else if opts.json {
                out = super::json::actions_dump(state, &of_kind, of_kind.len(), 0, Dump::List, opts);
            } else if !of_kind.is_empty() {
                let now = now_ms();
                let _ = writeln!(out, "total acts {}", of_kind.len());
                for (n, &i) in of_kind.iter().enumerate() {
                    let _ = write!(out, "\n\taction order {n}: ");
                    print_action(&mut out, state, &state.actions[i], Dump::List, opts, now);
                }
            }
        }
    }
    Ok((out, Vec::new()))
}

/// Which dump prints an action: its filter's (`bind`), `tc actions get`, or `tc actions list`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dump {
    /// In `tc filter show`.
    Filter,
    /// `tc actions get`.
    Get,
    /// `tc actions list`.
    List,
}

/// ` installed N sec used N sec` (`-s`): the kernel reports clock ticks of 10 ms and tc prints
/// only the non-zero ones. Nothing has used an action in the emulation, so `used` is the time
/// since it was made and `firstused` is not printed.
fn times(s: &mut String, installed_ms: u64, now_ms: u64) {
    let ticks = now_ms.saturating_sub(installed_ms) / 10;
    if ticks != 0 {
        let _ = write!(s, " installed {} sec used {} sec", ticks / 100, ticks / 100);
    }
}

fn rate_str(bps: u64) -> String {
    format_rate(Rate::from_bps(bps / 8 * 8))
}

/// Prints one action as tc does after `action order N: `, with the generic lines that follow.
pub fn print_action(
    out: &mut String,
    state: &State,
    e: &ActionEntry,
    dump: Dump,
    opts: super::ShowOpts,
    now: u64,
) {
    let a = &e.action;
    let bind = binds(state, a.kind(), a.index());
    let refs = bind + e.standalone as u32;
    let mut tm = String::new();
    if opts.stats {
        times(&mut tm, e.installed_ms, now);
    }
    print_body(out, a, refs, bind, &tm, opts.details);
    if opts.stats {
        out.push_str(
            "\tAction statistics:\n\tSent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n\tbacklog 0b 0p requeues 0\n",
        );
    }
    if let Some(c) = &e.cookie {
        let _ = writeln!(out, "\tcookie {c}");
    }
    if dump != Dump::Filter {
        out.push_str("\tnot_in_hw\n");
    }
    if dump == Dump::List {
        out.push_str("\tused_hw_stats disabled\n");
    }
}

/// The kind's own lines (`print_aopt`).
fn print_body(out: &mut String, a: &Action, refs: u32, bind: u32, tm: &str, details: bool) {
    match a {
        Action::Gact { verdict, index, random } => {
            let (rt, pv, val) = match random {
                None => ("none", Verdict::Pass, 0),
                Some(r) => (if r.determ { "determ" } else { "netrand" }, r.verdict, r.val),
            };
            let _ = write!(
                out,
                "gact action {}\n\t random type {rt} {} val {val}\n\t index {index} ref {refs} bind {bind}{tm}\n",
                verdict.text(),
                pv.text()
            );
        }
        Action::Police(p) => {
            let rb = p.rate / 8;
            let burst = if rb == 0 { 0 } else { xmitsize(rb, xmittime(rb, p.burst)) };
            let mtu = p.mtu.unwrap_or(if p.rate > 0 { 2040 } else { u32::MAX });
            let _ = write!(
                out,
                " police {:#x} rate {} burst {} mtu {} ",
                p.index,
                rate_str(p.rate),
                format_size(burst as u64),
                format_size(mtu as u64)
            );
            if let Some(pk) = p.peakrate {
                let _ = write!(out, "peakrate {} ", rate_str(pk));
            }
            if let Some(av) = p.avrate {
                let _ = write!(out, "avrate {} ", rate_str(av));
            }
            if let (Some(pps), Some(b)) = (p.pkts_rate, p.pkts_burst) {
                let pb = if pps == 0 || b > u32::MAX as u64 {
                    b
                } else {
                    xmitsize(pps, xmittime(pps, b as u32)) as u64
                };
                let _ = write!(out, "pkts_rate {pps} pkts_burst {pb} ");
            }
            let _ = write!(out, "action {}", p.exceed.text());
            if p.conform != Verdict::Pass {
                let _ = write!(out, "/{} ", p.conform.text());
            } else {
                out.push(' ');
            }
            let _ = write!(out, "overhead {} ", format_size(p.overhead as u64));
            if p.linklayer == LinkLayer::Atm {
                out.push_str("linklayer atm ");
            } else if details {
                out.push_str("linklayer ethernet ");
            }
            let _ = writeln!(out, "\n\tref {refs} bind {bind} {tm}");
        }
        Action::Mirred(m) => {
            let _ = write!(
                out,
                "mirred ({} to device {}) {}\n\tindex {} ref {refs} bind {bind}{tm}\n",
                m.description(),
                m.dev,
                m.verdict.text(),
                m.index
            );
        }
        Action::Skbedit(k) => {
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
                match t {
                    0 => out.push_str(" ptype host"),
                    1 => out.push_str(" ptype broadcast"),
                    2 => out.push_str(" ptype multicast"),
                    3 => out.push_str(" ptype otherhost"),
                    t => {
                        let _ = write!(out, " ptype {t}");
                    }
                }
            }
            if k.inheritdsfield {
                out.push_str(" inheritdsfield");
            }
            let _ = write!(out, " {}\n\t index {} ref {refs} bind {bind}{tm}\n", k.verdict.text(), k.index);
        }
    }
}

/// A filter's actions as `tc filter show` prints them (each preceded by an empty line).
pub fn filter_actions_text(state: &State, f: &FilterNode, opts: super::ShowOpts) -> String {
    let mut s = String::new();
    let now = now_ms();
    for (i, a) in f.actions.iter().enumerate() {
        if f.police_keyword {
            // `TCA_*_POLICE`: the policer alone, on a line of its own after u32's and basic's
            // selectors, right after the class for fw and flow.
            if matches!(f.opts, FilterOpts::U32(_) | FilterOpts::Basic(_)) {
                s.push('\n');
            }
        } else {
            let _ = write!(s, "\n\taction order {}: ", i + 1);
        }
        match position(&state.actions, a.kind(), a.index()) {
            Some(p) => print_action(&mut s, state, &state.actions[p], Dump::Filter, opts, now),
            // A state made without the table (an older state file): the filter holds it alone.
            None => {
                let e = ActionEntry { action: a.clone(), standalone: false, cookie: None, installed_ms: now };
                print_action(&mut s, state, &e, Dump::Filter, opts, now)
            }
        }
    }
    s
}

/// The words that make `a` again after `action` (`gact drop index 3`, `police rate ...`), as
/// [`parse_action_list`] reads them.
pub fn action_words(a: &Action) -> String {
    let mut s = String::new();
    match a {
        Action::Mirred(m) => {
            let w = super::mirred::args(m);
            s.push_str(w.trim_start().strip_prefix("action ").unwrap_or(&w));
        }
        Action::Gact { verdict, index, random } => {
            let _ = write!(s, "gact {}", verdict.text());
            if let Some(r) = random {
                let _ = write!(
                    s,
                    " random {} {} {}",
                    if r.determ { "determ" } else { "netrand" },
                    r.verdict.text(),
                    r.val
                );
            }
            let _ = write!(s, " index {index}");
        }
        Action::Police(p) => {
            s.push_str("police");
            if p.rate > 0 {
                let _ = write!(s, " rate {}bit burst {}", p.rate, p.burst);
            }
            if let Some(av) = p.avrate {
                let _ = write!(s, " avrate {av}bit");
            }
            if let (Some(r), Some(b)) = (p.pkts_rate, p.pkts_burst) {
                let _ = write!(s, " pkts_rate {r} pkts_burst {b}");
            }
            if let Some(m) = p.mtu {
                let _ = write!(s, " mtu {m}");
            }
            if let Some(pk) = p.peakrate {
                let _ = write!(s, " peakrate {pk}bit");
            }
            if p.mpu != 0 {
                let _ = write!(s, " mpu {}", p.mpu);
            }
            if p.overhead != 0 {
                let _ = write!(s, " overhead {}", p.overhead);
            }
            if p.linklayer == LinkLayer::Atm {
                s.push_str(" linklayer atm");
            }
            let _ = write!(s, " conform-exceed {}", p.exceed.text());
            if p.conform != Verdict::Pass {
                let _ = write!(s, " / {}", p.conform.text());
            }
            let _ = write!(s, " index {}", p.index);
        }
        Action::Skbedit(k) => {
            s.push_str("skbedit");
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
                let _ = write!(
                    s,
                    " ptype {}",
                    ["host", "broadcast", "multicast", "otherhost"][t.min(3) as usize]
                );
            }
            if k.inheritdsfield {
                s.push_str(" inheritdsfield");
            }
            let _ = write!(s, " {} index {}", k.verdict.text(), k.index);
        }
    }
    s
}
