//! `tc -j [-p]` output: qdiscs, filters and actions as iproute2 6.1 prints them in JSON.
//!
//! iproute2 writes JSON through its own writer (`json_writer.c`): compact, or with `-p` a
//! four-space indent whose quirks (`[ {`, `},{`, `} ]`) [`Writer`] reproduces. Field names and
//! value formats follow the `print_*` calls of tc's per-kind printers: rates in bytes/s, sizes
//! in bytes, times in µs, some values as strings (`"0x1"`, `"10Kb/1"`). Where tc 6.1 prints plain
//! text into its JSON (fw and flow filters use `fprintf`) or repeats a key (u32's `match`, TBF's
//! `mpu`), Sluice prints the same, so that what a script parses is what the kernel's tc gives it.
//! `tc -j class show` prints text in tc 6.1 (JSON classes came with 6.2) and so does Sluice.

use super::actions::Dump;
use super::show::{self, classid_str, FilterShowCtx, ShowOpts};
use crate::model::*;
use serde_json::Value;
use sluice_core::QdiscStats;
pub use sluice_model::json::J;

/// A port of the state of iproute2's `json_writer`: the separator owed before the next value
/// and the nesting depth (the pretty form indents by it).
struct Writer {
    out: String,
    depth: usize,
    pretty: bool,
    sep: bool,
}

impl Writer {
    fn eol(&mut self) {
        if self.pretty {
            self.out.push('\n');
            for _ in 0..self.depth {
                self.out.push_str("    ");
            }
        }
    }

    fn eor(&mut self) {
        if self.sep {
            self.out.push(',');
        }
        self.sep = true;
    }

    fn begin(&mut self, c: char) {
        self.eor();
        self.out.push(c);
        self.depth += 1;
        self.sep = false;
        if c == '[' && self.pretty {
            self.out.push(' ');
        }
    }

    fn end(&mut self, c: char) {
        if c == ']' {
            if self.pretty && self.sep {
                self.out.push(' ');
            }
            self.sep = false;
        }
        self.depth = self.depth.saturating_sub(1);
        if self.sep {
            self.eol();
        }
        self.out.push(c);
        self.sep = true;
    }

    fn name(&mut self, k: &str) {
        self.eor();
        self.eol();
        self.sep = false;
        self.string(k);
        self.out.push(':');
        if self.pretty {
            self.out.push(' ');
        }
    }

    /// jsonw_puts: escapes only what tc escapes.
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '\t' => self.out.push_str("\\t"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\x0c' => self.out.push_str("\\f"),
                '\x08' => self.out.push_str("\\b"),
                '\\' => self.out.push_str("\\\\"),
                '"' => self.out.push_str("\\\""),
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    fn value(&mut self, v: &J) {
        match v {
            J::Obj(m) => {
                self.begin('{');
                for (k, v) in m {
                    match (k, v) {
                        (_, J::Raw(s)) if k.is_none() => self.out.push_str(s),
                        (Some(k), v) => {
                            self.name(k);
                            self.value(v);
                        }
                        (None, v) => self.value(v),
                    }
                }
                self.end('}');
            }
            J::Arr(a) => {
                self.begin('[');
                for v in a {
                    self.value(v);
                }
                self.end(']');
            }
            J::V(Value::String(s)) => {
                self.eor();
                self.string(s);
            }
            J::V(v) => {
                self.eor();
                self.out.push_str(&v.to_string());
            }
            J::Raw(s) => {
                self.eor();
                self.out.push_str(s);
            }
        }
    }
}

/// What `new_json_obj` … `delete_json_obj` print around a list: the array and a newline.
pub fn render(items: &[J], pretty: bool) -> String {
    let mut w = Writer { out: String::new(), depth: 0, pretty, sep: false };
    w.value(&J::Arr(items.to_vec()));
    w.out.push('\n');
    w.out
}

/// `print_tcstats_attr` in JSON: the basic and queue counters.
fn stats(o: &mut J, st: &QdiscStats) {
    o.put("bytes", st.bytes)
        .put("packets", st.packets)
        .put("drops", st.drops)
        .put("overlimits", st.overlimits)
        .put("requeues", st.requeues)
        .put("backlog", st.backlog_bytes)
        .put("qlen", st.qlen);
}

fn linklayer(l: LinkLayer) -> &'static str {
    if l == LinkLayer::Atm {
        "atm"
    } else {
        "ethernet"
    }
}

/// The `options` object of a qdisc (the kind's `print_qopt`).
pub fn qdisc_options(dev: &Device, q: &QdiscOpts, d: bool) -> J {
    q.json(dev, d)
}

/// `tc_red_print_flags`: every flag, true or false.
pub fn red_flags(o: &mut J, ecn: bool, harddrop: bool, adaptive: bool, nodrop: bool) {
    o.put("ecn", ecn).put("harddrop", harddrop).put("adaptive", adaptive).put("nodrop", nodrop);
}

/// The kind's `print_xstats` for an idle qdisc, as the text form prints them.
fn qdisc_xstats(o: &mut J, q: &QdiscOpts) {
    if let Some(J::Obj(members)) = q.xstats_json() {
        for (k, v) in members {
            o.put(k.unwrap_or_default(), v);
        }
    }
}

/// One qdisc as `print_qdisc` writes it.
fn qdisc(dev: &Device, q: &QdiscNode, with_dev: bool, o: ShowOpts) -> J {
    let mut j = J::obj();
    j.put("kind", q.opts.kind()).put("handle", show::qdisc_handle_str(q.handle));
    if with_dev {
        j.put("dev", dev.name.as_str());
    }
    match q.parent {
        H_ROOT => {
            j.put("root", true);
        }
        p => {
            j.put("parent", classid_str(p));
        }
    }
    let refcnt = show::qdisc_refcnt(dev, q);
    if refcnt != 1 {
        j.put("refcnt", refcnt);
    }
    j.put("options", qdisc_options(dev, &q.opts, o.details));
    if let Some(t) = q.stab.filter(|_| o.details) {
        let mut s = J::obj();
        if let Some(l) = t.linklayer {
            s.put("linklayer", linklayer(l));
        }
        if t.overhead != 0 {
            s.put("overhead", t.overhead);
        }
        for (k, v) in [("mpu", t.mpu), ("mtu", t.mtu), ("tsize", t.tsize)] {
            if v != 0 {
                s.put(k, v);
            }
        }
        j.put("stab", s);
    }
    if o.stats {
        stats(&mut j, &q.stats);
        qdisc_xstats(&mut j, &q.opts);
    }
    j
}

/// `tc -j qdisc show`: the device's qdiscs in dump order.
pub fn qdiscs(out: &mut Vec<J>, dev: &Device, with_dev: bool, o: ShowOpts, only: Option<Handle>) {
    if let Some(kind) = show::default_root(dev, only) {
        let mut j = J::obj();
        j.put("kind", kind).put("handle", "0:");
        if with_dev {
            j.put("dev", dev.name.as_str());
        }
        j.put("root", true).put("refcnt", 2u32);
        let opts = if kind == "pfifo_fast" {
            qdisc_options(dev, &QdiscOpts::PfifoFast(Default::default()), o.details)
        } else {
            J::obj()
        };
        j.put("options", opts);
        if o.stats {
            stats(&mut j, &QdiscStats::default());
        }
        out.push(j);
    }
    for q in show::qdisc_rows(dev, only) {
        out.push(qdisc(dev, &q, with_dev, o));
    }
}

/// The head of one filter row: what `print_filter` writes before the kind's options.
fn filter_head(f: &FilterNode, parent_shown: Option<Handle>, ctx: &FilterShowCtx) -> J {
    let mut j = J::obj();
    if let Some(p) = parent_shown {
        match p {
            H_ROOT => j.put("root", true),
            H_MIN_INGRESS => j.put("ingress", true),
            H_MIN_EGRESS => j.put("egress", true),
            p => j.put("parent", classid_str(p)),
        };
    }
    if ctx.protocol.is_none_or(|p| p != f.protocol) {
        j.put("protocol", super::args::proto_name(f.protocol));
    }
    if ctx.prio.is_none_or(|p| p != f.prio) {
        j.put("pref", f.prio);
    }
    j.put("kind", f.opts.kind()).put("chain", f.chain);
    j
}

/// The `options` of one filter (the kind's `print_fopt`), then its actions.
fn filter_options(state: &State, f: &FilterNode, opts: ShowOpts) -> J {
    let mut o = f.opts.json(f, opts.pretty);
    filter_actions(&mut o, state, f, opts);
    o
}

/// `tc -j filter show`: the rows of one block, each head alone then each filter with options.
pub fn filters(
    out: &mut Vec<J>,
    state: &State,
    dev: &Device,
    block: Handle,
    parent_shown: Option<Handle>,
    ctx: FilterShowCtx,
) {
    for (f, head_only) in show::filter_rows(dev, block, &ctx) {
        let mut j = filter_head(f, parent_shown, &ctx);
        if !head_only {
            j.put("options", filter_options(state, f, ctx.opts));
        }
        out.push(j);
    }
}

/// `tc -j filter get`: one filter with its parent.
pub fn one_filter(state: &State, f: &FilterNode, parent: Handle, opts: ShowOpts) -> J {
    let ctx = FilterShowCtx { opts, ..Default::default() };
    let mut j = filter_head(f, Some(parent), &ctx);
    j.put("options", filter_options(state, f, opts));
    j
}

/// One action as `tc_print_one_action` writes it after its `order`.
fn action(j: &mut J, state: &State, e: &ActionEntry, dump: Dump, opts: ShowOpts, now: u64) {
    let a = &e.action;
    let bind = super::actions::binds(state, a.kind(), a.index());
    let refs = bind + e.standalone as u32;
    // print_tm: ticks of 10 ms, printed only when not zero.
    let ticks = now.saturating_sub(e.installed_ms) / 10;
    let tm = |j: &mut J| {
        if opts.stats && ticks != 0 {
            j.put("installed", ticks / 100).put("last_used", ticks / 100);
        }
    };
    a.json(j, refs, bind, &tm, opts.details);
    if opts.stats {
        let mut st = J::obj();
        stats(&mut st, &QdiscStats::default());
        j.put("stats", st);
    }
    if let Some(c) = &e.cookie {
        j.put("cookie", c.as_str());
    }
    if dump != Dump::Filter {
        j.put("not_in_hw", true);
    }
    if dump == Dump::List {
        j.put("used_hw_stats", J::Arr(vec![J::from("disabled")]));
    }
}

/// The table entry of a filter's action (or the filter's own copy, for an old state file).
fn entry_of(state: &State, a: &Action, now: u64) -> ActionEntry {
    match super::actions::position(&state.actions, a.kind(), a.index()) {
        Some(p) => state.actions[p].clone(),
        None => ActionEntry { action: a.clone(), standalone: false, cookie: None, installed_ms: now },
    }
}

/// A filter's actions: the `actions` array, or a `police` keyword's policer inline.
fn filter_actions(o: &mut J, state: &State, f: &FilterNode, opts: ShowOpts) {
    if f.actions.is_empty() {
        return;
    }
    let now = super::actions::now_ms();
    if f.police_keyword {
        for a in &f.actions {
            action(o, state, &entry_of(state, a, now), Dump::Filter, opts, now);
        }
        return;
    }
    let list = f
        .actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut j = J::obj();
            j.put("order", i as u32 + 1);
            action(&mut j, state, &entry_of(state, a, now), Dump::Filter, opts, now);
            j
        })
        .collect();
    o.put("actions", J::Arr(list));
}

/// `tc -j actions list|get`: `{"total acts": N}` then `{"actions": [...]}`, each entry numbered
/// from `first_order`; nothing at all for an empty list.
pub fn actions_dump(
    state: &State,
    entries: &[usize],
    total: usize,
    first_order: u32,
    dump: Dump,
    opts: ShowOpts,
) -> String {
    if entries.is_empty() {
        return render(&[], opts.pretty);
    }
    let now = super::actions::now_ms();
    let mut head = J::obj();
    head.put("total acts", total as u64);
    let list = entries
        .iter()
        .enumerate()
        .map(|(n, &p)| {
            let mut j = J::obj();
            j.put("order", first_order + n as u32);
            action(&mut j, state, &state.actions[p], dump, opts, now);
            j
        })
        .collect();
    let mut body = J::obj();
    body.put("actions", J::Arr(list));
    render(&[head, body], opts.pretty)
}
