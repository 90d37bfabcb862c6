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

use super::args::helpers::*;
use super::error::TcError;
use crate::model::*;
use sluice_model::kinds::action_common::*;
use sluice_model::kinds::police;
use std::fmt::Write;

const ACT_USAGE: &str = "usage: tc actions <ACTSPECOP>*\nWhere: \tACTSPECOP := ACR | GD | FL\n\tACR := add | change | replace <ACTSPEC>*\n\tGD := get | delete | <ACTISPEC>*\n\tFL := ls | list | flush | <ACTNAMESPEC>\n\tACTNAMESPEC :=  action <ACTNAME>\n\tACTISPEC := <ACTNAMESPEC> <INDEXSPEC>\n\tACTSPEC := action <ACTDETAIL> [INDEXSPEC] [HWSTATSSPEC] [SKIPSPEC]\n\tINDEXSPEC := index <32 bit indexvalue>\n\tHWSTATSSPEC := hw_stats [ immediate | delayed | disabled ]\n\tSKIPSPEC := [ skip_sw | skip_hw ]\n\tACTDETAIL := <ACTNAME> <ACTPARAMS>\n\t\tExample ACTNAME is gact, mirred, bpf, etc\n\t\tEach action has its own parameters (ACTPARAMS)\n";

/// Action kinds Sluice emulates (the registry's).
pub use sluice_model::kinds::ACTION_KINDS as KINDS;

/// The kind tc hands a word no kind claims (and a bare control word).
const GACT: &str = <sluice_model::kinds::gact::Gact as sluice_model::kinds::ActionKind>::NAME;

/// A kind parser's result as the action list keeps it.
fn spec((action, bare): (Action, bool)) -> ActionSpec {
    ActionSpec { action, cookie: None, bare, compat: false }
}

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

/// The filter's `police` keyword: the policer options after it.
pub(crate) fn parse_police_keyword(cur: &mut Cur, ctx: Ctx) -> Result<PoliceOpts, TcError> {
    let at = cur.pos.saturating_sub(1);
    police::parse_opts(cur).map(|(p, _)| p).map_err(|e| failed(cur, at, e, ctx))
}

/// tc's output when a kind parser returned -1 (`at`: the argv index of the kind word).
fn failed(cur: &Cur, at: usize, e: ActErr, ctx: Ctx) -> TcError {
    match e {
        // A kind's usage exit (code 1) is a failed parse: `tc actions` exits 255 on it.
        ActErr::Exit(mut e) => {
            if ctx == Ctx::Standalone && e.code == 1 {
                e.code = 255;
            }
            e
        }
        ActErr::Fail(msg) => {
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
        let kind = if is_control(w) { GACT } else { w };
        if is_unsupported_kind(kind) {
            return Err(TcError::fatal(format!("Sluice does not emulate the {kind} action"), Some(at)));
        }
        // Any other word goes to gact, as tc falls back to it.
        let parsed = Action::parse_kind(kind, cur)
            .or_else(|| Action::parse_kind(GACT, cur))
            .expect("gact is a registry kind")
            .map(spec);
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
    if let Some(dev) = spec.action.device() {
        if !spec.bare && dev != "lo" && !state.devices.iter().any(|d| d.name == dev) {
            return Err(TcError {
                code: if ctx == Ctx::Standalone { 255 } else { 1 },
                message: format!(
                    "Cannot find device \"{}\"\nbad action parsing\nparse_action: bad value ({})!\nIllegal \"action\"",
                    dev,
                    spec.action.kind()
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
    spec.action.check(spec.bare, in_filter).expect("every action kind is in the registry")
}

/// Resolves a filter's action list against the table: an action whose index exists binds it
/// (taking its parameters); the others are new entries (lowest free index when none was given).
/// Returns the filter's actions and the entries to add once the filter is made.
pub fn bind_filter_actions(
    state: &State,
    specs: &[ActionSpec],
) -> Result<(Vec<Action>, Vec<ActionEntry>), TcError> {
    // The table is sorted by (kind, index) (see [`settle`]): lookups and the next free index
    // are binary searches, and only this filter's new entries (`added`) are scanned, so a batch
    // of N filters with actions costs O(N log N) here, not O(N²).
    let table = &state.actions;
    let mut added: Vec<ActionEntry> = Vec::new();
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
            if let Some(p) = sorted_position(table, kind, idx) {
                out.push(table[p].action.clone());
                continue;
            }
            if let Some(p) = position(&added, kind, idx) {
                out.push(added[p].action.clone());
                continue;
            }
        }
        check_new(s, true)?;
        let mut a = s.action.clone();
        if idx == 0 {
            a.set_index(
                sorted_free_index(table, &added, kind)
                    .ok_or_else(|| TcError::errno("No space left on device"))?,
            );
        }
        let e = ActionEntry {
            action: a.clone(),
            standalone: false,
            cookie: s.cookie.clone(),
            installed_ms: now_ms(),
        };
        added.push(e);
        out.push(a);
    }
    Ok((out, added))
}

/// Work counter for tests: table entries the filter path looked at (see
/// `filter_actions_scale` in tests). Counts only; never read by the code itself.
#[doc(hidden)]
pub static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn probe(n: usize) {
    PROBES.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The range of `kind`'s entries in a table sorted by (kind, index).
fn kind_range(actions: &[ActionEntry], kind: &str) -> std::ops::Range<usize> {
    let lo = actions.partition_point(|e| e.action.kind() < kind);
    let hi = lo + actions[lo..].partition_point(|e| e.action.kind() == kind);
    probe(((actions.len() + 1).ilog2() as usize + 1) * 2);
    lo..hi
}

/// [`position`] in a table sorted by (kind, index).
fn sorted_position(actions: &[ActionEntry], kind: &str, index: u32) -> Option<usize> {
    let r = kind_range(actions, kind);
    let of_kind = &actions[r.clone()];
    of_kind.binary_search_by(|e| e.action.index().cmp(&index)).ok().map(|p| r.start + p)
}

/// [`free_index`] in a table sorted by (kind, index), with `added` (unsorted, small) taken too.
fn sorted_free_index(actions: &[ActionEntry], added: &[ActionEntry], kind: &str) -> Option<u32> {
    let of_kind = &actions[kind_range(actions, kind)];
    // Indexes are distinct and at least 1, so the k-th is k + 1 exactly up to the first gap.
    let (mut lo, mut hi) = (0usize, of_kind.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if of_kind[mid].action.index() as u64 == mid as u64 + 1 {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let dense = lo;
    let mut want = u32::try_from(dense).ok()?.checked_add(1)?;
    while sorted_position(actions, kind, want).is_some() || position(added, kind, want).is_some() {
        want = want.checked_add(1)?;
    }
    Some(want)
}

/// Adds the entries a filter made and drops every entry nothing holds any more (an inline action
/// whose last filter went away). Call after each change of filters.
pub fn settle(state: &mut State, added: Vec<ActionEntry>) {
    state.actions.extend(added);
    probe(state.actions.len() + state.devices.iter().map(|d| d.filters.len()).sum::<usize>());
    let mut bound: std::collections::HashSet<(&'static str, u32)> = std::collections::HashSet::new();
    for a in state.devices.iter().flat_map(|d| d.filters.iter()).flat_map(|f| f.actions.iter()) {
        bound.insert((a.kind(), a.index()));
    }
    let held: Vec<bool> = state
        .actions
        .iter()
        .map(|e| e.standalone || bound.contains(&(e.action.kind(), e.action.index())))
        .collect();
    drop(bound);
    let mut i = 0;
    state.actions.retain(|_| {
        i += 1;
        held[i - 1]
    });
    sort_table(&mut state.actions);
}

/// Puts the table in (kind, index) order, the order [`bind_filter_actions`] relies on.
pub fn sort_table(actions: &mut [ActionEntry]) {
    actions.sort_by(|a, b| (a.action.kind(), a.action.index()).cmp(&(b.action.kind(), b.action.index())));
}

/// [`settle`] after a filter add/change/replace that bound `added` (new, unheld before) and
/// removed no action reference (`lost == false`): nothing can have lost its last bind, so the
/// new entries only go in at their sorted places (at the end, for increasing indexes).
pub fn settle_added(state: &mut State, added: Vec<ActionEntry>) {
    for e in added {
        let at = state
            .actions
            .partition_point(|x| (x.action.kind(), x.action.index()) < (e.action.kind(), e.action.index()));
        state.actions.insert(at, e);
    }
}

/// The number of action references all filters hold.
pub fn total_binds(state: &State) -> usize {
    state.devices.iter().map(|d| d.filters.iter().map(|f| f.actions.len()).sum::<usize>()).sum()
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
    a.show(out, refs, bind, tm, details);
}

/// A filter's actions as `tc filter show` prints them (each preceded by an empty line).
pub fn filter_actions_text(state: &State, f: &FilterNode, opts: super::ShowOpts) -> String {
    let mut s = String::new();
    let now = now_ms();
    for (i, a) in f.actions.iter().enumerate() {
        if f.police_keyword {
            // `TCA_*_POLICE`: the policer alone, on a line of its own after u32's and basic's
            // selectors, right after the class for fw and flow.
            if f.opts.police_own_line() {
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
    a.args().expect("every action kind is in the registry")
}
