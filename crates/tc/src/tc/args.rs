//! tc's command grammar: argv to typed requests, with iproute2's checks and messages.
//!
//! Only parsing happens here (what `tc` itself checks before talking to the kernel); what the
//! kernel checks lives in [`super::kernel`].

use super::error::TcError;
use crate::model::*;
pub use sluice_model::grammar::*;

/// What to do with an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `add` (create, exclusive).
    Add,
    /// `change` (must exist).
    Change,
    /// `replace` (create or change).
    Replace,
    /// `delete`/`del`.
    Delete,
    /// `show`/`list`.
    Show,
    /// `get` (filters).
    Get,
}

/// A parsed `tc qdisc ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct QdiscCmd {
    /// Verb.
    pub verb: Verb,
    /// `dev NAME` and its argv index.
    pub dev: Option<(String, usize)>,
    /// `handle X:`.
    pub handle: Option<Handle>,
    /// `root`/`parent X`/`ingress`/`clsact`.
    pub parent: Option<Handle>,
    /// Kind name and argv index.
    pub kind: Option<(String, usize)>,
    /// Parsed options when the kind is known.
    pub opts: Option<QdiscOpts>,
    /// Options for an unknown kind (the kernel then refuses the kind).
    pub unknown_kind: bool,
    /// Lines tc prints on stderr while parsing the options (RED's derivations), before the
    /// kernel answers.
    pub warnings: Vec<String>,
    /// `stab ...` (a size table), when given.
    pub stab: Option<SizeTable>,
}

/// A parsed `tc class ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassCmd {
    /// Verb.
    pub verb: Verb,
    /// `dev NAME`.
    pub dev: Option<(String, usize)>,
    /// `classid X:Y`.
    pub classid: Option<Handle>,
    /// `parent X:Y` or `root`.
    pub parent: Option<Handle>,
    /// Kind.
    pub kind: Option<(String, usize)>,
    /// Options.
    pub opts: Option<ClassOpts>,
}

/// A parsed `tc filter ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterCmd {
    /// Verb.
    pub verb: Verb,
    /// `dev NAME`.
    pub dev: Option<(String, usize)>,
    /// Parent (block).
    pub parent: Option<Handle>,
    /// `prio`/`pref` (0 = automatic).
    pub prio: u32,
    /// `protocol`.
    pub protocol: Option<u16>,
    /// `chain`.
    pub chain: Option<u32>,
    /// Kind.
    pub kind: Option<(String, usize)>,
    /// Kind-specific part.
    pub spec: Option<FilterSpec>,
}

/// The kind-specific part of a filter command.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterSpec {
    /// Options.
    pub opts: FilterOpts,
    /// Handle as the kind parsed it (0 = none).
    pub handle: u32,
    /// The hash table (and bucket) the filter is to go in (u32's `ht`/`sample`).
    pub u32_htid: Option<u32>,
    /// Actions (`action ...`, `police ...`).
    pub actions: Vec<super::actions::ActionSpec>,
    /// Which attributes were given (for flow `change`, which keeps the others).
    pub given: Vec<&'static str>,
}

/// A parsed tc command.
#[derive(Clone, Debug, PartialEq)]
pub enum TcCmd {
    /// `tc qdisc`.
    Qdisc(QdiscCmd),
    /// `tc class`.
    Class(ClassCmd),
    /// `tc filter`.
    Filter(FilterCmd),
    /// `tc actions`.
    Actions(super::actions::ActionsCmd),
}

/// A parent keyword without a value (`root`, `ingress`, ...): only one parent may be given.
fn set_parent(
    parent: &mut Option<Handle>,
    to: Handle,
    dup: impl Into<String>,
    at: usize,
) -> Result<(), TcError> {
    if parent.is_some() {
        return Err(TcError::fatal(dup, Some(at)));
    }
    *parent = Some(to);
    Ok(())
}

/// `dev NAME`, kept with its argv index.
fn dev_value(v: &str, i: usize) -> Result<(String, usize), TcError> {
    Ok((v.to_string(), i))
}

/// A class ID value (minors up to `max_minor`), or tc's `invarg` with `msg`.
fn classid_value(msg: &'static str, max_minor: u32) -> impl Fn(&str, usize) -> Result<Handle, TcError> {
    move |v, i| get_classid(v, max_minor).ok_or_else(|| TcError::invarg(msg, v, i))
}

fn verb(word: &str, allow_get: bool) -> Option<Verb> {
    Some(match word {
        "add" | "a" | "ad" => Verb::Add,
        "del" | "delete" | "d" | "de" | "dele" | "delet" => Verb::Delete,
        "get" if allow_get => Verb::Get,
        w if matches(w, "change") => Verb::Change,
        w if matches(w, "replace") => Verb::Replace,
        w if matches(w, "show") || matches(w, "list") || matches(w, "lst") => Verb::Show,
        _ => return None,
    })
}

/// Which handles a command may name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grammar {
    /// tc's: 16-bit majors and minors, with tc's errors.
    #[default]
    Tc,
    /// The native form's: class minors up to `ffffffff` (the TOML form is checked by running
    /// its objects through the tc commands in this grammar).
    Native,
}

impl Grammar {
    /// The largest class minor this grammar accepts.
    pub fn max_minor(self) -> u32 {
        match self {
            Grammar::Tc => Handle::TC_MAX_MINOR,
            Grammar::Native => u32::MAX,
        }
    }
}

/// Parses `qdisc|class|filter VERB ...` (the arguments after `tc` and its global options).
pub fn parse_command(argv: &[String]) -> Result<TcCmd, TcError> {
    parse_command_in(argv, Grammar::Tc)
}

/// [`parse_command`] in the given handle grammar.
pub fn parse_command_in(argv: &[String], grammar: Grammar) -> Result<TcCmd, TcError> {
    let Some(obj) = argv.first() else {
        return Err(TcError::usage("Usage: tc [ OPTIONS ] OBJECT { COMMAND | help }", None));
    };
    let verb_word = argv.get(1).map(|s| s.as_str()).unwrap_or("show");
    let mut cur = Cur { argv, pos: 2.min(argv.len()), max_minor: grammar.max_minor() };
    if matches(obj, "qdisc") {
        let v = verb(verb_word, false).ok_or_else(|| unknown_verb(verb_word, "qdisc"))?;
        parse_qdisc(v, &mut cur).map(TcCmd::Qdisc)
    } else if matches(obj, "class") {
        let v = verb(verb_word, false).ok_or_else(|| unknown_verb(verb_word, "class"))?;
        parse_class(v, &mut cur).map(TcCmd::Class)
    } else if matches(obj, "filter") {
        let v = verb(verb_word, true).ok_or_else(|| unknown_verb(verb_word, "filter"))?;
        parse_filter(v, &mut cur).map(TcCmd::Filter)
    } else if matches(obj, "actions") {
        super::actions::parse_actions_cmd(&argv[1..], grammar.max_minor()).map(TcCmd::Actions)
    } else {
        Err(TcError::fatal(format!("Object \"{obj}\" is unknown, try \"tc help\"."), Some(0)))
    }
}

fn unknown_verb(word: &str, obj: &str) -> TcError {
    TcError::fatal(format!("Command \"{word}\" is unknown, try \"tc {obj} help\"."), Some(1))
}

fn parse_qdisc(verb: Verb, cur: &mut Cur) -> Result<QdiscCmd, TcError> {
    let mut c = QdiscCmd {
        verb,
        dev: None,
        handle: None,
        parent: None,
        kind: None,
        opts: None,
        unknown_kind: false,
        warnings: Vec::new(),
        stab: None,
    };
    while let Some((at, w)) = cur.next_word() {
        match w {
            "dev" => cur.once(&mut c.dev, "dev", dev_value)?,
            "handle" => cur.once(&mut c.handle, "handle", |v, i| {
                get_qdisc_handle(v).ok_or_else(|| TcError::invarg("invalid qdisc ID", v, i))
            })?,
            "root" => set_parent(&mut c.parent, H_ROOT, "Error: \"root\" is duplicate parent ID", at)?,
            "ingress" | "clsact" => {
                set_parent(&mut c.parent, H_INGRESS, format!("Error: \"{w}\" is a duplicate parent ID"), at)?;
                c.handle = Some(Handle::new(0xFFFF, 0));
                c.kind = Some((w.to_string(), at));
                break;
            }
            "parent" => {
                let m = cur.max_minor;
                cur.once(&mut c.parent, "parent", classid_value("invalid parent ID", m))?
            }
            "estimator" | "est" => cur.skip(2)?,
            w if matches(w, "stab") => c.stab = parse_stab(cur)?,
            w if matches(w, "help") => return Err(TcError::usage(QDISC_USAGE, Some(at))),
            _ => {
                c.kind = Some((w.to_string(), at));
                break;
            }
        }
    }
    if verb == Verb::Show {
        return Ok(c);
    }
    if let Some((k, ki)) = c.kind.clone() {
        if let Some(r) = QdiscOpts::parse_kind_warned(&k, cur) {
            let (o, w) = r?;
            c.opts = Some(o);
            c.warnings = w;
            return Ok(c);
        }
        c.unknown_kind = true;
        if let Some(a) = cur.peek() {
            return Err(TcError::usage(
                format!("Unknown qdisc \"{k}\", hence option \"{a}\" is unparsable"),
                Some(ki),
            ));
        }
    }
    Ok(c)
}

const STAB_USAGE: &str = "Usage: ... stab [ mtu BYTES ] [ tsize SLOTS ] [ mpu BYTES ]\n                [ overhead BYTES ] [ linklayer TYPE ] ...\n   mtu       : max packet size we create rate map for {2047}\n   tsize     : how many slots should size table have {512}\n   mpu       : minimum packet size used in rate computations\n   overhead  : per-packet size overhead used in rate computations\n   linklayer : adapting to a linklayer e.g. atm\nExample: ... stab overhead 20 linklayer atm";

/// The largest `tsize` whose table fits in tc's request buffer (64 KiB of 16-bit slots, less
/// the rest of the message); tc reports a larger one as exceeding the bound.
const STAB_MAX_TSIZE: u32 = 32_000;

/// `stab [mtu N] [tsize N] [mpu N] [overhead N] [linklayer L]` (tc's `parse_size_table`): stops
/// at the first other word. Without linklayer, mpu or overhead tc sends nothing and gives up
/// (exit 255, no message). Returns the table as the kernel keeps it (`tc_calc_size_table`: no
/// data table, so no mtu/tsize, for Ethernet without mpu).
fn parse_stab(cur: &mut Cur) -> Result<Option<SizeTable>, TcError> {
    let (at, first) = cur.value()?;
    if matches(first, "help") {
        return Err(TcError::fatal(STAB_USAGE, Some(at)));
    }
    cur.pos -= 1;
    let mut t = SizeTable::default();
    let dec_u32 = |v: &str| v.parse::<u32>().ok();
    while let Some(w) = cur.peek() {
        if matches(w, "mtu") || matches(w, "mpu") || matches(w, "tsize") {
            let key = if matches(w, "mtu") {
                "mtu"
            } else if matches(w, "mpu") {
                "mpu"
            } else {
                "tsize"
            };
            cur.pos += 1;
            let (i, v) = cur.value()?;
            let slot = match key {
                "mtu" => &mut t.mtu,
                "mpu" => &mut t.mpu,
                _ => &mut t.tsize,
            };
            if *slot != 0 {
                return Err(TcError::duparg(key, v, i));
            }
            let what = match key {
                "tsize" => "invalid table size",
                "mpu" => "invalid mpu",
                _ => "invalid mtu",
            };
            // tc's call is invarg(KEY, TEXT): the text is printed as the argument.
            *slot = dec_u32(v).ok_or_else(|| TcError::invarg(key, what, i))?;
        } else if matches(w, "overhead") {
            cur.pos += 1;
            let (i, v) = cur.value()?;
            if t.overhead != 0 {
                return Err(TcError::duparg("overhead", v, i));
            }
            t.overhead = v.parse().map_err(|_| TcError::invarg("overhead", "invalid overhead", i))?;
        } else if matches(w, "linklayer") {
            cur.pos += 1;
            let (i, v) = cur.value()?;
            if t.linklayer.is_some() {
                return Err(TcError::duparg("linklayer", v, i));
            }
            t.linklayer = Some(match v {
                "ethernet" | "eth" => LinkLayer::Ethernet,
                "atm" | "adsl" => LinkLayer::Atm,
                _ => return Err(TcError::invarg("linklayer", "invalid linklayer", i)),
            });
        } else {
            break;
        }
    }
    if t.linklayer.is_none() && t.mpu == 0 && t.overhead == 0 {
        return Err(TcError::fatal("", None));
    }
    if t.linklayer != Some(LinkLayer::Atm) && t.mpu == 0 {
        t.mtu = 0;
        t.tsize = 0;
    } else {
        if t.mtu == 0 {
            t.mtu = 2047;
        }
        if t.tsize == 0 {
            t.tsize = 512;
        }
        if t.tsize > STAB_MAX_TSIZE {
            return Err(TcError::fatal("addattr_l ERROR: message exceeded bound of 65572", None));
        }
    }
    Ok(Some(t))
}

const QDISC_USAGE: &str = "Usage: tc qdisc [ add | del | replace | change | show ] dev STRING\n       [ handle QHANDLE ] [ root | ingress | clsact | parent CLASSID ]\n       [ estimator INTERVAL TIME_CONSTANT ]\n       [ stab [ help | STAB_OPTIONS] ]\n       [ ingress_block BLOCK_INDEX ] [ egress_block BLOCK_INDEX ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]";

fn parse_class(verb: Verb, cur: &mut Cur) -> Result<ClassCmd, TcError> {
    let mut c = ClassCmd { verb, dev: None, classid: None, parent: None, kind: None, opts: None };
    while let Some((at, w)) = cur.next_word() {
        match w {
            "dev" => cur.once(&mut c.dev, "dev", dev_value)?,
            "classid" => {
                let m = cur.max_minor;
                cur.once(&mut c.classid, "classid", classid_value("invalid class ID", m))?
            }
            "handle" => {
                return Err(TcError::fatal("Error: try \"classid\" instead of \"handle\"", Some(at)));
            }
            "root" => set_parent(&mut c.parent, H_ROOT, "Error: \"root\" is duplicate parent ID.", at)?,
            "parent" => {
                let m = cur.max_minor;
                cur.once(&mut c.parent, "parent", classid_value("invalid parent ID", m))?
            }
            "estimator" | "est" => cur.skip(2)?,
            w if matches(w, "help") => {
                return Err(TcError::usage("Usage: tc class [ add | del | change | replace | show ] dev STRING\n       [ classid CLASSID ] [ root | parent CLASSID ]\n       [ [ QDISC_KIND ] [ help | OPTIONS ] ]", Some(at)))
            }
            _ => {
                c.kind = Some((w.to_string(), at));
                break;
            }
        }
    }
    if verb == Verb::Show {
        return Ok(c);
    }
    if let Some((k, ki)) = c.kind.clone() {
        c.opts = Some(match ClassOpts::parse_kind(&k, cur) {
            Some(o) => o?,
            None if sluice_model::kinds::QDISC_KINDS.contains(&k.as_str()) => {
                return Err(TcError::usage(format!("Error: Qdisc \"{k}\" is classless."), Some(ki)));
            }
            None => {
                return Err(TcError::usage(
                    format!(
                        "Unknown qdisc \"{k}\", hence option \"{}\" is unparsable",
                        cur.peek().unwrap_or("")
                    ),
                    Some(ki),
                ))
            }
        });
    }
    Ok(c)
}

fn parse_filter(verb: Verb, cur: &mut Cur) -> Result<FilterCmd, TcError> {
    let mut c = FilterCmd {
        verb,
        dev: None,
        parent: None,
        prio: 0,
        protocol: None,
        chain: None,
        kind: None,
        spec: None,
    };
    let mut fhandle: Option<(usize, String)> = None;
    while let Some((at, w)) = cur.next_word() {
        match w {
            "dev" => cur.once(&mut c.dev, "dev", dev_value)?,
            "root" => set_parent(&mut c.parent, H_ROOT, "Error: \"root\" is duplicate parent ID", at)?,
            "ingress" | "egress" => {
                let to = if w == "ingress" { H_MIN_INGRESS } else { H_MIN_EGRESS };
                set_parent(&mut c.parent, to, format!("Error: \"{w}\" is duplicate parent ID"), at)?;
            }
            "parent" => {
                let m = cur.max_minor;
                cur.once(&mut c.parent, "parent", classid_value("Invalid parent ID", m))?
            }
            "handle" => cur.once(&mut fhandle, "handle", |v, i| Ok((i, v.to_string())))?,
            "chain" => {
                let (i, v) = cur.value()?;
                c.chain = Some(get_u32(v).ok_or_else(|| TcError::invarg("invalid chain index value", v, i))?);
            }
            w if w == "prio" || matches(w, "pref") || matches(w, "priority") => {
                let (i, v) = cur.value()?;
                if c.prio != 0 {
                    return Err(TcError::duparg("priority", v, i));
                }
                c.prio = get_u32(v).filter(|&p| p <= 0xFFFF).ok_or_else(|| TcError::invarg("invalid priority value", v, i))?;
            }
            w if matches(w, "protocol") => cur.once(&mut c.protocol, "protocol", |v, i| {
                proto_from_name(v).ok_or_else(|| TcError::invarg("invalid protocol", v, i))
            })?,
            "estimator" | "est" => cur.skip(2)?,
            w if matches(w, "help") => {
                return Err(TcError::usage("Usage: tc filter [ add | del | change | replace | show ] [ dev STRING ]\n       tc filter get dev STRING parent CLASSID protocol PROTO handle FILTERID pref PRIO FILTER_TYPE", Some(at)))
            }
            _ => {
                c.kind = Some((w.to_string(), at));
                break;
            }
        }
    }
    if verb == Verb::Show {
        return Ok(c);
    }
    match c.kind.clone() {
        Some((k, ki)) => {
            let handle = fhandle.as_ref().map(|(i, s)| (*i, s.as_str()));
            let spec = match super::filters::parse_filter(&k, cur, handle) {
                Some(r) => r?,
                None => {
                    return Err(TcError::usage(
                        format!(
                            "Unknown filter \"{k}\", hence option \"{}\" is unparsable",
                            cur.peek().unwrap_or("")
                        ),
                        Some(ki),
                    ))
                }
            };
            c.spec = Some(spec);
        }
        None => {
            if fhandle.is_some() {
                return Err(TcError::fatal("Must specify filter type when using \"handle\"", None));
            }
        }
    }
    Ok(c)
}
