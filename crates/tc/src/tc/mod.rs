//! The tc and ip command languages on emulated devices.
//!
//! [`run_tc`] and [`run_ip`] take argv (without the program name) and a [`State`], and return
//! what the real tools would print and their exit status. A failed command leaves the state as
//! it was.

pub mod actions;
pub use sluice_model::error;
pub use sluice_model::kinds::{cake, ematch, ets, hfsc, netem, red};
pub mod args;
pub mod filters;
pub mod json;
pub mod kernel;
pub mod show;

pub use args::{parse_command, parse_command_in, Grammar, TcCmd, Verb};
pub use error::TcError;
pub use show::ShowOpts;

use crate::model::*;

/// What a command printed and its exit status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Exit status.
    pub code: u8,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Outcome {
    fn err(e: &TcError) -> Outcome {
        // An empty message: tc gave up without printing anything.
        let stderr = if e.message.is_empty() { String::new() } else { format!("{}\n", e.message) };
        Outcome { code: e.code, stdout: String::new(), stderr }
    }
}

/// tc's usage text (`tc`, `tc -help`).
pub const TC_USAGE: &str = "Usage:\ttc [ OPTIONS ] OBJECT { COMMAND | help }
\ttc [-force] -batch filename
where  OBJECT := { qdisc | class | filter | chain |
\t\t    action | monitor | exec }
       OPTIONS := { -V[ersion] | -s[tatistics] | -d[etails] | -r[aw] |
\t\t    -o[neline] | -j[son] | -p[retty] | -c[olor]
\t\t    -b[atch] [filename] | -n[etns] name | -N[umeric] |
\t\t     -nm | -nam[es] | { -cf | -conf } path
\t\t     -br[ief] }
";

/// Global options before the object (`-s`, `-d`, `-j`, `-p`, `-o`, `-g`, `-n NETNS`,
/// `-batch FILE`, `-force`, ...), then the command.
pub fn run_tc(state: &mut State, argv: &[String]) -> Outcome {
    run_tc_in(state, argv, Grammar::Tc)
}

/// [`run_tc`] in the given handle grammar.
pub fn run_tc_in(state: &mut State, argv: &[String], grammar: Grammar) -> Outcome {
    let mut opts = ShowOpts::default();
    let mut i = 0;
    let mut batch: Option<String> = None;
    let mut usage_printed = String::new();
    let mut force = false;
    let mut netns: Option<&str> = None;
    // tc.c's main: each option is matched as a prefix of its long name, in this order.
    let is = |a: &str, long: &str| a.len() > 1 && long.starts_with(a);
    while i < argv.len() && argv[i].starts_with('-') {
        let a = argv[i].as_str();
        if is(a, "-stats") || is(a, "-statistics") {
            opts.stats = true;
        } else if is(a, "-details") {
            opts.details = true;
        } else if is(a, "-raw")
            || is(a, "-iec")
            || is(a, "-Numeric")
            || is(a, "-timestamp")
            || is(a, "-tshort")
        {
        } else if is(a, "-pretty") {
            opts.pretty = true;
        } else if is(a, "-graph") {
            opts.graph = true;
        } else if is(a, "-Version") {
            return Outcome {
                code: 0,
                stdout: "tc utility, sluice emulation of iproute2-6.x\n".into(),
                stderr: String::new(),
            };
        } else if is(a, "-help") {
            return Outcome { code: 0, stdout: String::new(), stderr: TC_USAGE.into() };
        } else if is(a, "-force") {
            force = true;
        } else if is(a, "-batch") {
            i += 1;
            match argv.get(i) {
                Some(f) => batch = Some(f.clone()),
                // tc prints its usage and goes on without a file.
                None => usage_printed.push_str(TC_USAGE),
            }
        } else if is(a, "-netns") {
            i += 1;
            match argv.get(i) {
                Some(n) => netns = Some(n),
                None => {
                    return Outcome {
                        code: 255,
                        stdout: String::new(),
                        stderr: "Command line is not complete. Try option \"help\"\n".into(),
                    }
                }
            }
        } else if is(a, "-names") || is(a, "-nm") {
        } else if is(a, "-cf") || is(a, "-conf") {
            i += 1;
        } else if a == "-color" || a.starts_with("-color=") || (a.len() > 2 && "-color".starts_with(a)) {
        } else if is(a, "-json") {
            opts.json = true;
        } else if is(a, "-oneline") {
            opts.oneline = true;
        } else if is(a, "-brief") {
        } else {
            return Outcome {
                code: 255,
                stdout: String::new(),
                stderr: format!("Option \"{a}\" is unknown, try \"tc -help\".\n"),
            };
        }
        i += 1;
    }
    // `-n NETNS`: the namespace's own devices and actions (`ip netns add` makes one).
    let state = match netns {
        None => state,
        Some(name) => match state.netns.get_mut(name) {
            Some(ns) => ns,
            None => {
                return Outcome {
                    code: 255,
                    stdout: String::new(),
                    stderr: format!("Cannot open network namespace \"{name}\": No such file or directory\n"),
                }
            }
        },
    };
    if let Some(file) = batch {
        let mut o = run_batch(state, &file, opts, force, grammar);
        o.stderr.insert_str(0, &usage_printed);
        return o;
    }
    if i >= argv.len() {
        usage_printed.push_str(TC_USAGE);
        return Outcome { code: 0, stdout: String::new(), stderr: usage_printed };
    }
    run_one_in(state, &argv[i..], opts, grammar)
}

fn run_batch(state: &mut State, file: &str, opts: ShowOpts, force: bool, grammar: Grammar) -> Outcome {
    let text = if file == "-" {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s);
        s
    } else {
        match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                return Outcome {
                    code: 1,
                    stdout: String::new(),
                    stderr: format!("Cannot open file \"{file}\" for reading: {}\n", strerror(&e)),
                }
            }
        }
    };
    let mut out = Outcome::default();
    let (lines, missing) = batch_lines(&text);
    for (n, line) in lines {
        let line = line.as_str();
        let words = match crate::shell::split_words(line, &Default::default()) {
            Ok(w) => w,
            Err(e) => {
                out.stderr.push_str(&format!("{e}\nCommand failed {file}:{n}\n"));
                out.code = 1;
                if !force {
                    return out;
                }
                continue;
            }
        };
        if words.is_empty() {
            continue;
        }
        let r = run_one_in(state, &words, opts, grammar);
        out.stdout.push_str(&r.stdout);
        out.stderr.push_str(&r.stderr);
        if r.code != 0 {
            out.stderr.push_str(&format!("Command failed {file}:{n}\n"));
            out.code = 1;
            if !force {
                return out;
            }
        }
    }
    if missing {
        // tc's batch loop just ends here; the exit status is that of the commands before.
        out.stderr.push_str("Missing continuation line\n");
    }
    out
}

/// iproute2's `getcmdline`: each command with its last physical line number (1-based). A `#`
/// cuts the rest of its line (newline included, so a `\` before a comment continues nothing);
/// a line ending in `\` and a newline is joined to the next one, both removed with nothing in
/// their place. True with the lines if the text ends inside a continuation.
pub fn batch_lines(text: &str) -> (Vec<(usize, String)>, bool) {
    let cut = |l: &str| l.find('#').map_or(l, |k| &l[..k]).to_string();
    let mut phys = text.split_inclusive('\n');
    let mut out = Vec::new();
    let mut n = 0;
    while let Some(first) = phys.next() {
        n += 1;
        let mut line = cut(first);
        while line.ends_with("\\\n") {
            let Some(next) = phys.next() else { return (out, true) };
            n += 1;
            line.truncate(line.len() - 2);
            line.push_str(&cut(next));
        }
        // makeargs splits on " \t\r\n": the line end is no part of the last word.
        let end = line.trim_end_matches(['\n', '\r']).len();
        line.truncate(end);
        out.push((n, line));
    }
    (out, false)
}

/// `ip netns ...`.
fn run_ip_netns(state: &mut State, a: &[&str]) -> Outcome {
    let fail = |code: u8, msg: String| Outcome { code, stdout: String::new(), stderr: format!("{msg}\n") };
    let verb = a.first().copied().unwrap_or("list");
    let name = a.get(1).map(|n| n.to_string());
    let missing = || fail(255, "No netns name specified".into());
    match verb {
        v if args::matches(v, "list") || v == "show" => {
            let stdout = state.netns.keys().map(|n| format!("{n}\n")).collect();
            Outcome { code: 0, stdout, stderr: String::new() }
        }
        v if args::matches(v, "add") => {
            let Some(n) = name else { return missing() };
            if state.netns.contains_key(&n) {
                return fail(1, format!("Cannot create namespace file \"/run/netns/{n}\": File exists"));
            }
            state.netns.insert(n, State::default());
            Outcome::default()
        }
        v if args::matches(v, "delete") => {
            let Some(n) = name else { return missing() };
            if state.netns.remove(&n).is_none() {
                return fail(
                    1,
                    format!("Cannot remove namespace file \"/run/netns/{n}\": No such file or directory"),
                );
            }
            Outcome::default()
        }
        v if args::matches(v, "exec") => {
            let Some(n) = name else { return missing() };
            let Some(ns) = state.netns.get_mut(&n) else {
                return fail(
                    255,
                    format!("Cannot open network namespace \"{n}\": No such file or directory"),
                );
            };
            let rest: Vec<String> = a[2..].iter().map(|w| w.to_string()).collect();
            match rest.first().map(|p| p.rsplit('/').next().unwrap_or(p)) {
                Some("tc") => run_tc(ns, &rest[1..]),
                Some("ip") => run_ip(ns, &rest[1..]),
                Some(p) => fail(1, format!("sluice: ip netns exec runs tc and ip only, not \"{p}\"")),
                None => fail(255, "No command specified".into()),
            }
        }
        v => fail(255, format!("Command \"{v}\" is unknown, try \"ip netns help\".")),
    }
}

/// An I/O error as C's strerror words it (Rust adds ` (os error N)`).
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(k) => s[..k].to_string(),
        None => s,
    }
}

/// Runs one tc command (no global options).
pub fn run_one(state: &mut State, argv: &[String], opts: ShowOpts) -> Outcome {
    run_one_in(state, argv, opts, Grammar::Tc)
}

fn run_one_in(state: &mut State, argv: &[String], opts: ShowOpts, grammar: Grammar) -> Outcome {
    let cmd = match parse_command_in(argv, grammar) {
        Ok(c) => c,
        Err(e) => return Outcome::err(&e),
    };
    // What tc printed while parsing comes before the kernel's answer.
    let parsed: String = match &cmd {
        TcCmd::Qdisc(q) => q.warnings.iter().map(|w| format!("{w}\n")).collect(),
        _ => String::new(),
    };
    match execute(state, &cmd, opts) {
        Ok((stdout, warnings)) => {
            let stderr = parsed + &warnings.iter().map(|w| format!("{w}\n")).collect::<String>();
            Outcome { code: 0, stdout, stderr }
        }
        Err(e) => {
            let mut o = Outcome::err(&e);
            o.stderr.insert_str(0, &parsed);
            if e.code == 2 {
                if let TcCmd::Filter(f) = &cmd {
                    if f.verb != Verb::Show && f.verb != Verb::Get {
                        o.stderr.push_str("We have an error talking to the kernel\n");
                    }
                }
            }
            o
        }
    }
}

/// Applies a parsed command. Returns stdout and warnings; on error the state is unchanged: every
/// `*_modify` checks the whole request before it changes anything (tests check this on the tdc
/// and corpus commands), so no copy of the state is made per command.
pub fn execute(state: &mut State, cmd: &TcCmd, opts: ShowOpts) -> Result<(String, Vec<String>), TcError> {
    execute_inner(state, cmd, opts)
}

fn find_dev<'a>(state: &'a State, dev: &Option<(String, usize)>) -> Result<Option<&'a Device>, TcError> {
    match dev {
        None => Ok(None),
        Some((name, i)) => state
            .devices
            .iter()
            .find(|d| &d.name == name)
            .map(Some)
            .ok_or_else(|| TcError::usage(format!("Cannot find device \"{name}\""), Some(*i))),
    }
}

fn execute_inner(state: &mut State, cmd: &TcCmd, opts: ShowOpts) -> Result<(String, Vec<String>), TcError> {
    let mut out = String::new();
    match cmd {
        TcCmd::Qdisc(c) if c.verb == Verb::Show => {
            let only = c.handle.map(Handle::qdisc).or(c.parent);
            let devs: Vec<&Device> = match find_dev(state, &c.dev)? {
                Some(d) => vec![d],
                None => state.devices.iter().collect(),
            };
            let with_dev = c.dev.is_none();
            if opts.json {
                let mut items = Vec::new();
                for d in devs {
                    json::qdiscs(&mut items, d, with_dev, opts, only);
                }
                out = json::render(&items, opts.pretty);
            } else {
                for d in devs {
                    show::show_qdiscs(&mut out, d, with_dev, opts, only);
                }
                if opts.oneline {
                    out = out.replace('\n', "\\");
                }
            }
        }
        TcCmd::Qdisc(c) => {
            let w = kernel::qdisc_modify(state, c)?;
            actions::settle(state, Vec::new());
            return Ok((out, w));
        }
        TcCmd::Class(c) if c.verb == Verb::Show => {
            let d = find_dev(state, &c.dev)?.ok_or_else(|| TcError::usage("Must specify device.", None))?;
            if opts.graph {
                show::show_class_graph(&mut out, d, opts);
            } else {
                show::show_classes(&mut out, d, opts, c.parent, c.classid);
                if opts.oneline {
                    // Only the statistics' own line break is tc's print_nl.
                    out = out.replace(") \n backlog ", ") \\ backlog ");
                }
            }
        }
        TcCmd::Class(c) => {
            let w = kernel::class_modify(state, c)?;
            actions::settle(state, Vec::new());
            return Ok((out, w));
        }
        TcCmd::Filter(c) if c.verb == Verb::Show => {
            let d = find_dev(state, &c.dev)?.ok_or_else(|| TcError::usage("Must specify device.", None))?;
            let ctx = show::FilterShowCtx {
                protocol: c.protocol,
                prio: (c.prio != 0).then_some(c.prio as u16),
                opts,
            };
            // A missing block prints nothing, as the kernel's dump does.
            if let Ok(block) = kernel::resolve_block(d, c.parent) {
                let ingress = d.qdisc_at(H_INGRESS).filter(|q| matches!(q.opts, QdiscOpts::Ingress(_)));
                let shown = match c.parent {
                    // The kernel dumps the ingress qdisc's filters with the parent named by the
                    // last add or change.
                    Some(p) if block == H_MIN_INGRESS && ingress.is_some() => {
                        let last = d.ingress_filter_parent.unwrap_or(H_INGRESS.qdisc());
                        (p != last).then_some(last)
                    }
                    Some(_) => None,
                    None => Some(d.root().map(|q| q.handle).unwrap_or(Handle::UNSPEC)),
                };
                if opts.json {
                    let mut items = Vec::new();
                    json::filters(&mut items, state, d, block, shown, ctx);
                    out = json::render(&items, opts.pretty);
                } else {
                    show::show_filters(&mut out, state, d, block, shown, ctx);
                }
            } else if opts.json {
                out = json::render(&[], opts.pretty);
            }
            if opts.oneline {
                out = out.replace('\n', "\\");
            }
        }
        TcCmd::Filter(c) if c.verb == Verb::Get => {
            let d = find_dev(state, &c.dev)?.ok_or_else(|| TcError::usage("Must specify device.", None))?;
            let block = kernel::resolve_block(d, c.parent)?;
            if c.prio == 0 {
                return Err(TcError::kernel("Invalid filter command with priority of zero"));
            }
            let handle = c.spec.as_ref().map(|s| s.handle).unwrap_or(0);
            let tp = d.filters.iter().find(|f| f.parent == block && f.prio == c.prio as u16);
            let Some(tp) = tp.filter(|t| c.protocol.is_none_or(|p| p == t.protocol)) else {
                return Err(TcError::kernel("Filter with specified priority/protocol not found"));
            };
            if c.kind.as_ref().is_some_and(|k| k.0 != tp.opts.kind()) {
                return Err(TcError::kernel("Specified filter kind does not match existing one"));
            }
            let f = d
                .filters
                .iter()
                .find(|f| f.parent == block && f.prio == c.prio as u16 && f.handle == handle && handle != 0)
                .ok_or_else(|| TcError::kernel("Specified filter handle not found"))?;
            let parent = c.parent.unwrap_or(block);
            if opts.json {
                out = json::render(&[json::one_filter(state, f, parent, opts)], opts.pretty);
            } else {
                show::show_one_filter(&mut out, state, f, parent, opts);
            }
        }
        TcCmd::Filter(c) => {
            let w = kernel::filter_modify(state, c)?;
            if c.verb != Verb::Delete {
                if let Some(d) =
                    state.devices.iter_mut().find(|d| c.dev.as_ref().is_some_and(|(n, _)| *n == d.name))
                {
                    let on_ingress =
                        d.qdisc_at(H_INGRESS).is_some_and(|q| matches!(q.opts, QdiscOpts::Ingress(_)));
                    if on_ingress && c.parent.is_some_and(|p| p.major() == 0xFFFF) {
                        d.ingress_filter_parent = c.parent;
                    }
                }
            }
            return Ok((out, w));
        }
        TcCmd::Actions(c) => return actions::execute(state, c, opts),
    }
    Ok((out, Vec::new()))
}

/// `ip link add|del|show` on emulated devices; `ip netns add|del|list|exec` and `ip -n NETNS`
/// on named namespaces (each a [`State`] of its own).
pub fn run_ip(state: &mut State, argv: &[String]) -> Outcome {
    let fail = |code: u8, msg: String| Outcome { code, stdout: String::new(), stderr: format!("{msg}\n") };
    let mut a: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    while a.first().is_some_and(|w| w.starts_with('-')) {
        let o = a.remove(0);
        if o == "-n" || (o.len() > 2 && "-netns".starts_with(o)) {
            let Some(name) = a.first().map(|n| n.to_string()) else {
                return fail(255, "Command line is not complete. Try option \"help\"".into());
            };
            let rest: Vec<String> = a[1..].iter().map(|w| w.to_string()).collect();
            return match state.netns.get_mut(&name) {
                Some(ns) => run_ip(ns, &rest),
                None => {
                    fail(255, format!("Cannot open network namespace \"{name}\": No such file or directory"))
                }
            };
        }
    }
    if a.first().is_some_and(|w| args::matches(w, "netns")) {
        return run_ip_netns(state, &a[1..]);
    }
    if a.first().is_none_or(|w| !args::matches(w, "link")) {
        return fail(255, format!("Object \"{}\" is unknown, try \"ip help\".", a.first().unwrap_or(&"")));
    }
    let verb = a.get(1).copied().unwrap_or("show");
    let rest = if a.len() > 2 { &a[2..] } else { &[][..] };
    let mut name: Option<&str> = None;
    let mut kind: Option<&str> = None;
    let mut peer: Option<&str> = None;
    let mut mtu: Option<u32> = None;
    let mut txqlen: Option<u32> = None;
    let mut txqs: Option<u32> = None;
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            "dev" | "name" => {
                i += 1;
                name = rest.get(i).copied();
            }
            "type" => {
                i += 1;
                kind = rest.get(i).copied();
            }
            "peer" => {
                if rest.get(i + 1) == Some(&"name") {
                    i += 1;
                }
                i += 1;
                peer = rest.get(i).copied();
            }
            "mtu" => {
                i += 1;
                mtu = rest.get(i).and_then(|v| v.parse().ok());
            }
            "txqueuelen" | "qlen" | "txqlen" => {
                i += 1;
                txqlen = rest.get(i).and_then(|v| v.parse().ok());
            }
            "numtxqueues" => {
                i += 1;
                match rest.get(i).and_then(|v| v.parse::<u32>().ok()) {
                    Some(n) if (1..=4096).contains(&n) => txqs = Some(n),
                    _ => {
                        return fail(
                            255,
                            "Error: argument of \"numtxqueues\" must be a positive number".into(),
                        )
                    }
                }
            }
            "numrxqueues" => i += 1,
            "up" | "down" => {}
            w if name.is_none() => name = Some(w),
            _ => {}
        }
        i += 1;
    }
    let exists = |state: &State, n: &str| state.devices.iter().any(|d| d.name == n);
    match verb {
        v if args::matches(v, "add") => {
            let Some(n) = name else {
                return fail(255, "Not enough information: \"dev\" argument is required.".into());
            };
            if exists(state, n) || peer.is_some_and(|p| exists(state, p)) {
                return fail(2, "RTNETLINK answers: File exists".into());
            }
            let mk = |state: &mut State, n: &str, kind: DevKind| {
                let idx = state.next_ifindex;
                state.next_ifindex += 1;
                let mut d = Device::new(n, kind, idx);
                if let Some(m) = mtu {
                    d.mtu = m;
                }
                if let Some(q) = txqlen {
                    d.txqueuelen = q;
                }
                d.num_tx_queues = txqs.unwrap_or(1);
                state.devices.push(d);
            };
            match kind {
                Some("dummy") => mk(state, n, DevKind::Dummy),
                Some("ifb") => {
                    mk(state, n, DevKind::Ifb);
                    if txqlen.is_none() {
                        // ifb.c: TX_Q_LEN.
                        if let Some(d) = state.devices.last_mut() {
                            d.txqueuelen = 32;
                        }
                    }
                }
                Some("veth") => {
                    let p = peer.map(str::to_string).unwrap_or_else(|| {
                        let mut k = 0;
                        while exists(state, &format!("veth{k}")) {
                            k += 1;
                        }
                        format!("veth{k}")
                    });
                    mk(state, n, DevKind::Veth { peer: p.clone() });
                    mk(state, &p, DevKind::Veth { peer: n.to_string() });
                }
                Some(k) => {
                    return fail(
                        2,
                        format!(
                        "Error: Unknown device type.\nSluice emulates dummy, veth and ifb only, not \"{k}\"."
                    ),
                    )
                }
                None => return fail(2, "Not enough information: \"type\" argument is required.".into()),
            }
            Outcome::default()
        }
        v if args::matches(v, "delete") || v == "del" => {
            let Some(n) = name else {
                return fail(255, "Not enough information: \"dev\" argument is required.".into());
            };
            let Some(d) = state.devices.iter().find(|d| d.name == n) else {
                return fail(1, format!("Cannot find device \"{n}\""));
            };
            let mut gone = vec![n.to_string()];
            if let DevKind::Veth { peer } = &d.kind {
                gone.push(peer.clone());
            }
            state.devices.retain(|d| !gone.contains(&d.name));
            actions::settle(state, Vec::new());
            Outcome::default()
        }
        v if args::matches(v, "set") => {
            let Some(n) = name else {
                return fail(255, "Not enough information: \"dev\" argument is required.".into());
            };
            let Some(d) = state.devices.iter_mut().find(|d| d.name == n) else {
                return fail(1, format!("Cannot find device \"{n}\""));
            };
            if let Some(m) = mtu {
                d.mtu = m;
            }
            if let Some(q) = txqlen {
                d.txqueuelen = q;
            }
            Outcome::default()
        }
        v if args::matches(v, "show") || args::matches(v, "list") => {
            let mut out = String::new();
            for d in &state.devices {
                if name.is_some_and(|n| n != d.name) {
                    continue;
                }
                let (pname, kind) = match &d.kind {
                    DevKind::Dummy => (d.name.clone(), "dummy"),
                    DevKind::Ifb => (d.name.clone(), "ifb"),
                    DevKind::Veth { peer } => (format!("{}@{}", d.name, peer), "veth"),
                };
                let q = d.root().map(|q| q.opts.kind()).unwrap_or("noqueue");
                out.push_str(&format!(
                    "{}: {}: <BROADCAST,NOARP> mtu {} qdisc {} state DOWN mode DEFAULT group default qlen {}\n    link/ether 00:00:00:00:00:00 brd ff:ff:ff:ff:ff:ff\n    {kind}\n",
                    d.ifindex, pname, d.mtu, q, d.txqueuelen
                ));
            }
            if let Some(n) = name {
                if out.is_empty() {
                    return fail(1, format!("Device \"{n}\" does not exist."));
                }
            }
            Outcome { code: 0, stdout: out, stderr: String::new() }
        }
        v => fail(255, format!("Command \"{v}\" is unknown, try \"ip link help\".")),
    }
}
