//! Extended-match trees (`basic ... match EXPR`, `flow ... match EXPR`): iproute2's grammar
//! (`m_ematch.c`, its lexer and parser, `em_cmp.c`, `em_u32.c`, `em_meta.c`, `em_nbyte.c`,
//! `em_canid.c`), the text `tc filter show` prints, and a canonical form of the input kept in
//! the model ([`crate::model::BasicOpts::ematch`]) that [`parse_text`] reads back into the
//! kernel's tree ([`sluice_core::filter::basic::Ematch`]).
//!
//! The tree is read as iproute2 reads it: the words after `match` are one stream of tokens
//! (`(`, `)`, `and`, `or`, `not`, words, `"quoted strings"`); the expression ends at the first
//! token that cannot continue it, and the word holding that token is the next option. When the
//! expression runs to the end of the command, iproute2 steps back onto its last word, so a
//! `match` ending a command is answered with `What is "..."?`, as tc does.

use crate::error::TcError;
use sluice_core::filter::basic::{
    meta_id, CanRule, Cmp, EmKind, Ematch, Meta, MetaObj, Nbyte, Opnd, Relation, U32Key, CAN_EFF_FLAG,
    EMATCH_STACK,
};
use std::fmt::Write;

const EXPR_USAGE: &str = "Usage: EXPR\nwhere: EXPR  := TERM [ { and | or } EXPR ]\n       TERM  := [ not ] { MATCH | '(' EXPR ')' }\n       MATCH := module '(' ARGS ')'\n       ARGS := ARG1 ARG2 ...\n\nExample: a(x y) and not (b(x) or c(x y z))";
const CMP_USAGE: &str = "Usage: cmp(ALIGN at OFFSET [ ATTRS ] { eq | lt | gt } VALUE)\nwhere: ALIGN  := { u8 | u16 | u32 }\n       ATTRS  := [ layer LAYER ] [ mask MASK ] [ trans ]\n       LAYER  := { link | network | transport | 0..2 }\n\nExample: cmp(u16 at 3 layer 2 mask 0xff00 gt 20)";
const U32_USAGE: &str = "Usage: u32(ALIGN VALUE MASK at [ nexthdr+ ] OFFSET)\nwhere: ALIGN  := { u8 | u16 | u32 }\n\nExample: u32(u16 0x1122 0xffff at nexthdr+4)";
const NBYTE_USAGE: &str = "Usage: nbyte(NEEDLE at OFFSET [layer LAYER])\nwhere: NEEDLE := { string | \"c-escape-sequence\" }\n       OFFSET := int\n       LAYER  := { link | network | transport | 0..2 }\n\nExample: nbyte(\"ababa\" at 12 layer 1)";
const META_USAGE: &str = "Usage: meta(OBJECT { eq | lt | gt } OBJECT)\nwhere: OBJECT  := { META_ID | VALUE }\n       META_ID := id [ shift SHIFT ] [ mask MASK ]\n\nExample: meta(nf_mark gt 24)\n         meta(indev shift 1 eq \"ppp\")\n         meta(tcindex mask 0xf0 eq 0xf0)\n\nFor a list of meta identifiers, use meta(list).";
const CANID_USAGE: &str = "Usage: canid(IDLIST)\nwhere: IDLIST := IDSPEC [ IDLIST ]\n       IDSPEC := { ’sff’ CANID | ’eff’ CANID }\n       CANID := ID[:MASK]\n       ID, MASK := hexadecimal number (i.e. 0x123)\nExample: canid(sff 0x123 sff 0x124 sff 0x125:0xf)";

/// iproute2's meta ids by name (`em_meta.c`'s table, in its order: the first name of an id is
/// the one printed) and whether the id may also be compared as bytes.
const META_NAMES: &[(&str, u16, bool)] = &[
    ("random", 1, false),
    ("loadavg_1", 2, false),
    ("loadavg_5", 3, false),
    ("loadavg_15", 4, false),
    ("dev", 5, true),
    ("priority", 6, false),
    ("protocol", 7, false),
    ("pkt_type", 8, false),
    ("pkt_len", 9, false),
    ("data_len", 10, false),
    ("mac_len", 11, false),
    ("nf_mark", 12, false),
    ("fwmark", 12, false),
    ("tc_index", 13, false),
    ("rt_classid", 14, false),
    ("rt_iif", 15, false),
    ("vlan", 46, false),
    ("sk_family", 16, false),
    ("sk_state", 17, false),
    ("sk_reuse", 18, false),
    ("sk_bind_if", 19, true),
    ("sk_refcnt", 20, false),
    ("sk_shutdown", 21, false),
    ("sk_proto", 22, false),
    ("sk_type", 23, false),
    ("sk_rcvbuf", 24, false),
    ("sk_rmem", 25, false),
    ("sk_wmem", 26, false),
    ("sk_omem", 27, false),
    ("sk_wmem_queue", 28, false),
    ("sk_snd_queue", 30, false),
    ("sk_rcv_queue", 29, false),
    ("sk_err_queue", 31, false),
    ("sk_fwd_alloc", 32, false),
    ("sk_sndbuf", 33, false),
];

/// The most rules one `canid` match takes (iproute2's `EM_CANID_RULES_MAX`).
const CANID_MAX: usize = 400;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word { text: Vec<u8>, quoted: bool },
    Open,
    Close,
    And,
    Or,
    Not,
    Error,
}

/// Splits `words` into tokens, each with the index (in `words`) of the word it starts in.
fn lex(words: &[String]) -> Vec<(Tok, usize)> {
    let mut chars: Vec<(u8, usize)> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        chars.extend(w.bytes().map(|b| (b, i)));
        chars.push((b' ', i));
    }
    let mut out = Vec::new();
    let mut i = 0;
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    while i < chars.len() {
        let (c, at) = chars[i];
        if ws(c) {
            i += 1;
        } else if c == b'(' || c == b')' {
            out.push((if c == b'(' { Tok::Open } else { Tok::Close }, at));
            i += 1;
        } else if c == b'"' {
            i += 1;
            let mut s = Vec::new();
            let mut closed = false;
            while i < chars.len() {
                let c = chars[i].0;
                i += 1;
                match c {
                    b'"' => {
                        closed = true;
                        break;
                    }
                    b'\\' if i < chars.len() => {
                        let e = chars[i].0;
                        let digits = |from: usize, radix: u32, max: usize| {
                            chars[from..]
                                .iter()
                                .take(max)
                                .take_while(|(d, _)| (*d as char).is_digit(radix))
                                .count()
                        };
                        if (b'0'..=b'7').contains(&e) {
                            let n = digits(i, 8, 3);
                            let all = digits(i, 10, usize::MAX);
                            let v = chars[i..i + n].iter().fold(0u32, |a, (d, _)| a * 8 + (d - b'0') as u32);
                            if all > n || v > 0xFF {
                                out.push((Tok::Error, at));
                                return out;
                            }
                            s.push(v as u8);
                            i += n;
                        } else if e == b'8' || e == b'9' {
                            out.push((Tok::Error, at));
                            return out;
                        } else if e == b'x' && digits(i + 1, 16, 2) > 0 {
                            let n = digits(i + 1, 16, 2);
                            let v = chars[i + 1..i + 1 + n]
                                .iter()
                                .fold(0u8, |a, (d, _)| a * 16 + (*d as char).to_digit(16).unwrap_or(0) as u8);
                            s.push(v);
                            i += 1 + n;
                        } else {
                            s.push(match e {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'v' => 0x0b,
                                b'b' => 0x08,
                                b'f' => 0x0c,
                                b'a' => 0x07,
                                other => other,
                            });
                            i += 1;
                        }
                    }
                    other => s.push(other),
                }
            }
            if !closed {
                out.push((Tok::Error, at));
                return out;
            }
            out.push((Tok::Word { text: s, quoted: true }, at));
        } else {
            let start = i;
            while i < chars.len() && !ws(chars[i].0) && chars[i].0 != b'(' && chars[i].0 != b')' {
                i += 1;
            }
            let text: Vec<u8> = chars[start..i].iter().map(|(b, _)| *b).collect();
            let tok = match text.to_ascii_lowercase().as_slice() {
                b"and" => Tok::And,
                b"or" => Tok::Or,
                b"not" => Tok::Not,
                _ => Tok::Word { text, quoted: false },
            };
            out.push((tok, at));
        }
    }
    out
}

/// An argument of a match: its bytes and whether it was quoted.
#[derive(Clone, Debug)]
struct Arg {
    text: Vec<u8>,
    quoted: bool,
}

impl Arg {
    fn is(&self, w: &str) -> bool {
        self.text == w.as_bytes()
    }
}

/// The syntax tree before the kinds read their arguments.
enum Node {
    Leaf { kind: String, args: Vec<Arg> },
    Group(Vec<(bool, Node, Relation)>),
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn bump(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }
    fn expr(&mut self, depth: usize) -> Result<Vec<(bool, Node, Relation)>, ()> {
        let mut seq = Vec::new();
        loop {
            let invert = if self.peek() == Some(&Tok::Not) {
                self.pos += 1;
                true
            } else {
                false
            };
            let node = match self.bump() {
                Some(Tok::Word { text, .. }) => {
                    if self.bump() != Some(Tok::Open) {
                        return Err(());
                    }
                    let mut args = Vec::new();
                    loop {
                        match self.bump() {
                            Some(Tok::Word { text, quoted }) => args.push(Arg { text, quoted }),
                            Some(Tok::Close) if !args.is_empty() => break,
                            _ => return Err(()),
                        }
                    }
                    Node::Leaf { kind: String::from_utf8_lossy(&text).into_owned(), args }
                }
                Some(Tok::Open) if depth < EMATCH_STACK => {
                    let inner = self.expr(depth + 1)?;
                    if self.bump() != Some(Tok::Close) {
                        return Err(());
                    }
                    Node::Group(inner)
                }
                _ => return Err(()),
            };
            let rel = match self.peek() {
                Some(Tok::And) => Relation::And,
                Some(Tok::Or) => Relation::Or,
                _ => Relation::End,
            };
            seq.push((invert, node, rel));
            if rel == Relation::End {
                return Ok(seq);
            }
            self.pos += 1;
        }
    }
}

/// Reads an ematch tree from `words` (the arguments after `match`). Returns the tree and how
/// many words it took (iproute2's count: the word holding the token after the tree is not taken;
/// a tree running to the end gives back its last word). `base` is the argv index of `words[0]`.
pub fn parse_words(words: &[String], base: usize) -> Result<(Vec<Ematch>, usize), TcError> {
    let toks = lex(words);
    let mut p = Parser { toks, pos: 0 };
    let syntax = |at: usize| {
        TcError::usage(
            format!("Parse error: syntax error\n{EXPR_USAGE}\nIllegal \"ematch\""),
            Some(base + at),
        )
    };
    if p.toks.is_empty() {
        return Ok((Vec::new(), words.len().saturating_sub(1)));
    }
    let seq = match p.expr(0) {
        Ok(s) => s,
        Err(()) => {
            let at = p.toks.get(p.pos.saturating_sub(1)).map_or(words.len().saturating_sub(1), |t| t.1);
            return Err(syntax(at));
        }
    };
    let used = match p.toks.get(p.pos) {
        Some((_, at)) => *at,
        None => words.len().saturating_sub(1),
    };
    let tree = build_seq(seq).map_err(|m| match m.strip_prefix("RTNETLINK answers: ") {
        Some(errno) => TcError::errno(errno),
        None => TcError::usage(format!("{m}\nIllegal \"ematch\""), Some(base)),
    })?;
    Ok((tree, used))
}

/// Reads the canonical text kept in the model (see [`canonical`]).
pub fn parse_text(text: &str) -> Result<Vec<Ematch>, String> {
    let words: Vec<String> = vec![text.to_string()];
    match parse_words(&words, 0) {
        Ok((t, _)) => Ok(t),
        Err(e) => Err(e.message),
    }
}

fn build_seq(seq: Vec<(bool, Node, Relation)>) -> Result<Vec<Ematch>, String> {
    seq.into_iter()
        .map(|(invert, node, rel)| {
            let kind = match node {
                Node::Group(inner) => EmKind::Container(build_seq(inner)?),
                Node::Leaf { kind, args } => leaf(&kind, &args)?,
            };
            Ok(Ematch { invert, rel, kind })
        })
        .collect()
}

/// C's `strtoul(s, .., 0)` as iproute2's `bstrtoul` uses it: leading spaces and a sign allowed,
/// trailing text ignored; no digits or an overflow is `None`.
fn bstrtoul(a: &Arg) -> Option<u64> {
    let s = std::str::from_utf8(&a.text).ok()?.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, body) = if (s.starts_with("0x") || s.starts_with("0X"))
        && s[2..].starts_with(|c: char| c.is_ascii_hexdigit())
    {
        (16, &s[2..])
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let end = body.find(|c: char| !c.is_digit(radix)).unwrap_or(body.len());
    if end == 0 {
        return None;
    }
    let v = u64::from_str_radix(&body[..end], radix).ok()?;
    let v = if neg { v.wrapping_neg() } else { v };
    (v != u64::MAX).then_some(v)
}

fn layer_arg(a: &Arg, kind: &str) -> Result<u8, String> {
    let l = match a.text.first() {
        Some(b'l') => 0,
        Some(b'n') => 1,
        Some(b't') => 2,
        _ => bstrtoul(a).ok_or_else(|| format!("{kind}: invalid layer"))?,
    };
    if l > 2 {
        return Err(format!("{kind}: illegal layer, must be in 0..2"));
    }
    Ok(l as u8)
}

fn leaf(kind: &str, args: &[Arg]) -> Result<EmKind, String> {
    match kind {
        "cmp" => cmp(args).map_err(|m| format!("{m}\n{CMP_USAGE}")),
        "u32" => u32_key(args).map_err(|m| format!("{m}\n{U32_USAGE}")),
        "nbyte" => nbyte(args).map_err(|m| format!("{m}\n{NBYTE_USAGE}")),
        "meta" => {
            meta(args).map_err(|m| if m.starts_with("RTNETLINK") { m } else { format!("{m}\n{META_USAGE}") })
        }
        "canid" => canid(args).map_err(|m| format!("{m}\n{CANID_USAGE}")),
        "ipset" | "ipt" | "text" => Err(format!("Unknown ematch \"{kind}\" (Sluice does not model it)")),
        _ => Err(format!("Unknown ematch \"{kind}\"")),
    }
}

fn cmp(args: &[Arg]) -> Result<EmKind, String> {
    let first = args.first().ok_or("cmp: missing arguments")?;
    let align = match first.text.as_slice() {
        b"u8" => 1,
        b"u16" => 2,
        b"u32" => 4,
        _ => return Err("cmp: invalid alignment".into()),
    };
    let (mut off, mut layer, mut mask, mut val, mut trans, mut opnd) =
        (None, 1u8, 0u64, None, false, Opnd::Eq);
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or("cmp: missing argument");
        if a.is("at") {
            off = Some(bstrtoul(value()?).ok_or("cmp: invalid offset, must be numeric")?);
        } else if a.is("layer") {
            layer = layer_arg(value()?, "cmp")?;
        } else if a.is("mask") {
            mask = bstrtoul(value()?).ok_or("cmp: invalid mask")?;
        } else if a.is("trans") {
            trans = true;
        } else if a.is("eq") || a.is("gt") || a.is("lt") {
            opnd = if a.is("eq") {
                Opnd::Eq
            } else if a.is("gt") {
                Opnd::Gt
            } else {
                Opnd::Lt
            };
            val = Some(bstrtoul(value()?).ok_or("cmp: invalid value")?);
        } else {
            return Err("nbyte: unknown parameter".into());
        }
    }
    let (Some(off), Some(val)) = (off, val) else { return Err("cmp: offset and value required".into()) };
    Ok(EmKind::Cmp(Cmp { align, off: off as u16, layer, mask: mask as u32, trans, opnd, val: val as u32 }))
}

fn u32_key(args: &[Arg]) -> Result<EmKind, String> {
    let first = args.first().ok_or("u32: missing arguments")?;
    let align = match first.text.as_slice() {
        b"u8" => 1,
        b"u16" => 2,
        b"u32" => 4,
        _ => return Err("u32: invalid alignment".into()),
    };
    let mut key =
        bstrtoul(args.get(1).ok_or("u32: missing key")?).ok_or("u32: invalid key, must be numeric")?;
    let mut mask =
        bstrtoul(args.get(2).ok_or("u32: missing mask")?).ok_or("u32: invalid mask, must be numeric")?;
    if !args.get(3).is_some_and(|a| a.is("at")) {
        return Err("u32: missing \"at\"".into());
    }
    let mut at = 4;
    let a = args.get(at).ok_or("u32: missing offset")?;
    let mut nexthdr = false;
    let offset = if a.text.len() > 8 && a.text.starts_with(b"nexthdr+") {
        nexthdr = true;
        bstrtoul(&Arg { text: a.text[8..].to_vec(), quoted: false }).unwrap_or(0)
    } else if a.is("nexthdr+") {
        nexthdr = true;
        at += 1;
        bstrtoul(args.get(at).ok_or("u32: missing offset")?).ok_or("u32: invalid offset")?
    } else {
        bstrtoul(a).ok_or("u32: invalid offset")?
    };
    if args.len() > at + 1 {
        return Err("u32: unexpected trailer".into());
    }
    let mut offset = offset;
    match align {
        1 => {
            if key > 0xFF {
                return Err("Illegal key (>0xFF)".into());
            }
            if mask > 0xFF {
                return Err("Illegal mask (>0xFF)".into());
            }
            let sh = 24 - (offset & 3) * 8;
            key <<= sh;
            mask <<= sh;
            offset &= !3;
        }
        2 => {
            if key > 0xFFFF {
                return Err("Illegal key (>0xFFFF)".into());
            }
            if mask > 0xFFFF {
                return Err("Illegal mask (>0xFFFF)".into());
            }
            if offset & 3 == 0 {
                key <<= 16;
                mask <<= 16;
            }
            offset &= !3;
        }
        _ => {}
    }
    if offset % 4 != 0 {
        return Err("u32: invalid offset alignment, must be aligned to 4.".into());
    }
    let (key, mask) = (key as u32, mask as u32);
    Ok(EmKind::U32(U32Key { val: key & mask, mask, off: offset as i32, nexthdr }))
}

fn nbyte(args: &[Arg]) -> Result<EmKind, String> {
    let needle = args.first().ok_or("nbyte: missing arguments")?;
    if needle.text.is_empty() {
        return Err("nbyte: needle length is 0".into());
    }
    let (mut off, mut layer) = (None, 1u8);
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or("nbyte: missing argument");
        if a.is("at") {
            off = Some(bstrtoul(value()?).ok_or("nbyte: invalid offset, must be numeric")?);
        } else if a.is("layer") {
            layer = layer_arg(value()?, "nbyte")?;
        } else {
            return Err("nbyte: unknown parameter".into());
        }
    }
    let off = off.ok_or("nbyte: offset required")?;
    if needle.text.len() > u16::MAX as usize {
        return Err("nbyte: needle too long".into());
    }
    Ok(EmKind::Nbyte(Nbyte { needle: needle.text.clone(), off: off as u16, layer }))
}

fn meta_name(id: u16) -> Option<&'static str> {
    META_NAMES.iter().find(|m| m.1 == id).map(|m| m.0)
}

/// Whether the id's table entry allows bytes (`is_compatible` for the VAR type).
fn can_be_var(id: u16) -> bool {
    META_NAMES.iter().any(|m| m.1 == id && m.2)
}

/// One side of a meta comparison (iproute2's `parse_object`); `left` is the side already read,
/// whose type an id on either side may take (`can_adopt`/`is_compatible`). A constant on the
/// right takes nothing: its type is its own.
fn meta_obj(args: &[Arg], mut i: usize, left: Option<&mut MetaObj>) -> Result<(MetaObj, usize), String> {
    let a = &args[i];
    i += 1;
    if a.quoted {
        let o = MetaObj { id: meta_id::VALUE, var: true, shift: 0, val: 0, bytes: a.text.clone() };
        return Ok((o, i));
    }
    if let Some(n) = bstrtoul(a) {
        return Ok((
            MetaObj { id: meta_id::VALUE, var: false, shift: 0, val: n as u32 as u64, bytes: vec![] },
            i,
        ));
    }
    let Some(&(_, id, _)) = META_NAMES.iter().find(|m| a.is(m.0)) else {
        return Err("meta: unknown meta id\n".into());
    };
    let mut o = MetaObj { id, var: false, shift: 0, val: 0, bytes: vec![] };
    if let Some(l) = left {
        if l.var != o.var {
            // Only an id can take the other side's type, and only one its entry lists.
            let compatible = |what: u16, var: bool| !var || can_be_var(what);
            if l.id != meta_id::VALUE && compatible(l.id, o.var) {
                l.var = o.var;
            } else if compatible(o.id, l.var) {
                o.var = l.var;
            } else {
                return Err("lvalue and rvalue are not compatible.".into());
            }
        }
    }
    while let Some(a) = args.get(i) {
        if a.is("shift") {
            let v = args.get(i + 1).ok_or("meta: missing argument")?;
            o.shift = bstrtoul(v).ok_or("meta: invalid shift, must be numeric")? as u8;
            i += 2;
        } else if a.is("mask") {
            let v = args.get(i + 1).ok_or("meta: missing argument")?;
            o.val = bstrtoul(v).ok_or("meta: invalid mask, must be numeric")? as u32 as u64;
            i += 2;
        } else {
            break;
        }
    }
    Ok((o, i))
}

fn meta(args: &[Arg]) -> Result<EmKind, String> {
    if args.first().is_some_and(|a| a.is("list")) {
        return Err("meta: the list of meta ids is in iproute2's em_meta.c".into());
    }
    let (mut left, i) = meta_obj(args, 0, None)?;
    let op = args.get(i).ok_or("meta: missing operand")?;
    let opnd = if op.is("eq") {
        Opnd::Eq
    } else if op.is("gt") {
        Opnd::Gt
    } else if op.is("lt") {
        Opnd::Lt
    } else {
        return Err("meta: invalid operand".into());
    };
    if i + 1 >= args.len() {
        return Err("meta: missing rvalue".into());
    }
    let (right, j) = meta_obj(args, i + 1, Some(&mut left))?;
    if j < args.len() {
        return Err("meta: unexpected trailer".into());
    }
    // The kernel's checks (`em_meta_change`): both sides of one type (iproute2 sends a
    // constant's own type, so `meta(dev eq "eth0")` is refused there), and bytes only from ids
    // that have them.
    if left.var != right.var {
        return Err(KERNEL_EINVAL.into());
    }
    for o in [&left, &right] {
        if o.var && o.id != meta_id::VALUE && !can_be_var(o.id) {
            return Err("RTNETLINK answers: Operation not supported".into());
        }
    }
    Ok(EmKind::Meta(Meta { left, opnd, right }))
}

const KERNEL_EINVAL: &str = "RTNETLINK answers: Invalid argument";

fn canid(args: &[Arg]) -> Result<EmKind, String> {
    if args.is_empty() {
        return Err("canid: missing arguments".into());
    }
    let mut rules = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let eff = if a.is("sff") {
            false
        } else if a.is("eff") {
            true
        } else {
            return Err("canid: invalid key".into());
        };
        let v = it.next().ok_or("canid: missing argument")?;
        let text = String::from_utf8_lossy(&v.text);
        let hex = |s: &str| -> Option<u32> {
            let s = s.trim_start();
            let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
            let end = s.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(s.len());
            u64::from_str_radix(&s[..end], 16).ok().map(|v| v.min(u32::MAX as u64) as u32)
        };
        let (id, mask) = match text.split_once(':').map(|(i, m)| (hex(i), hex(m))) {
            Some((Some(i), Some(m))) => (i, m),
            _ => match hex(&text) {
                Some(i) => (i, if eff { 0x1FFF_FFFF } else { 0x7FF }),
                None => return Err("canid: Improperly formed CAN ID & mask\n".into()),
            },
        };
        if rules.len() == CANID_MAX {
            return Err("canid: Too many arguments on input\n".into());
        }
        rules.push(CanRule { id: id | if eff { CAN_EFF_FLAG } else { 0 }, mask: mask | CAN_EFF_FLAG });
    }
    // The kernel keeps the extended-frame rules first.
    let eff = |r: &CanRule| r.id & CAN_EFF_FLAG != 0 && r.mask & CAN_EFF_FLAG != 0;
    let mut sorted: Vec<CanRule> = rules.iter().copied().filter(eff).collect();
    sorted.extend(rules.iter().copied().filter(|r| r.id & CAN_EFF_FLAG == 0));
    Ok(EmKind::Canid(sorted))
}

/// The tree as `tc filter show` prints it after the filter's options (`print_ematch`): a
/// newline, two spaces, then each match.
pub fn show(tree: &[Ematch]) -> String {
    let mut s = String::new();
    if !tree.is_empty() {
        s.push_str("\n  ");
        show_seq(&mut s, tree, 1);
    }
    s
}

/// [`show`] for the canonical text the model keeps (the text itself if it does not read).
pub fn show_text(text: &str) -> String {
    match parse_text(text) {
        Ok(t) => show(&t),
        Err(_) => format!("\n  {text}"),
    }
}

fn show_seq(s: &mut String, seq: &[Ematch], prefix: usize) {
    for m in seq {
        if m.invert {
            s.push_str("NOT ");
        }
        match &m.kind {
            EmKind::Container(inner) => {
                s.push_str("(\n");
                s.push_str(&"  ".repeat(prefix + 1));
                show_seq(s, inner, prefix + 1);
                s.push_str(&"  ".repeat(prefix));
                s.push_str(") ");
            }
            k => {
                show_kind(s, k);
                s.push('\n');
                if m.rel != Relation::End {
                    s.push_str(&"  ".repeat(prefix));
                }
            }
        }
        match m.rel {
            Relation::And => s.push_str("AND "),
            Relation::Or => s.push_str("OR "),
            Relation::End => return,
        }
    }
}

fn printable(b: u8) -> char {
    if (0x20..0x7f).contains(&b) {
        b as char
    } else {
        '.'
    }
}

fn show_kind(s: &mut String, k: &EmKind) {
    match k {
        EmKind::Container(_) => {}
        EmKind::Cmp(c) => {
            let _ = write!(s, "cmp(u{} at {} layer {} ", c.align as u32 * 8, c.off, c.layer);
            if c.mask != 0 {
                let _ = write!(s, "mask {:#x} ", c.mask);
            }
            if c.trans {
                s.push_str("trans ");
            }
            let op = match c.opnd {
                Opnd::Eq => "eq",
                Opnd::Lt => "lt",
                Opnd::Gt => "gt",
            };
            let _ = write!(s, "{op} {})", c.val as i32);
        }
        EmKind::U32(k) => {
            let _ = write!(
                s,
                "u32({:08x}/{:08x} at {}{})",
                k.val,
                k.mask,
                if k.nexthdr { "nexthdr+" } else { "" },
                k.off
            );
        }
        EmKind::Nbyte(n) => {
            s.push_str("nbyte(");
            for b in &n.needle {
                let _ = write!(s, "{b:02x} ");
            }
            let ascii: String = n.needle.iter().map(|&b| printable(b)).collect();
            let _ = write!(s, "\"{ascii}\" at {} layer {})", n.off, n.layer);
        }
        EmKind::Meta(m) => {
            s.push_str("meta(");
            meta_show(s, &m.left);
            s.push_str(match m.opnd {
                Opnd::Eq => " eq ",
                Opnd::Lt => " lt ",
                Opnd::Gt => " gt ",
            });
            meta_show(s, &m.right);
            s.push(')');
        }
        EmKind::Canid(rules) => {
            s.push_str("canid(");
            for (i, r) in rules.iter().enumerate() {
                let (name, full) =
                    if r.id & CAN_EFF_FLAG != 0 { ("eff", 0x1FFF_FFFF) } else { ("sff", 0x7FF) };
                if r.mask == CAN_EFF_FLAG | full {
                    let _ = write!(s, "{name} 0x{:X}", r.id & full);
                } else {
                    let _ = write!(s, "{name} 0x{:X}:0x{:X}", r.id & full, r.mask & full);
                }
                if i + 1 < rules.len() {
                    s.push(' ');
                }
            }
            s.push(')');
        }
    }
}

fn meta_show(s: &mut String, o: &MetaObj) {
    if o.id == meta_id::VALUE {
        if o.var {
            if o.bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
                s.extend(o.bytes.iter().map(|&b| b as char));
            } else {
                for b in &o.bytes {
                    let _ = write!(s, "{b:02x} ");
                }
                let ascii: String = o.bytes.iter().map(|&b| printable(b)).collect();
                let _ = write!(s, "\"{ascii}\"");
            }
        } else {
            let _ = write!(s, "{}", o.val as u32 as i32);
        }
        return;
    }
    match meta_name(o.id) {
        Some(n) => s.push_str(n),
        None => {
            let _ = write!(s, "[unknown meta id {}]", o.id);
        }
    }
    if o.shift != 0 {
        let _ = write!(s, " shift {}", o.shift);
    }
    if !o.var && o.val as u32 != 0 {
        let _ = write!(s, " mask 0x{:08x}", o.val as u32);
    }
}

/// The tree in tc's input grammar, such that [`parse_text`] gives the same tree back: what
/// the model keeps (and `sluice export` writes after `match`).
pub fn canonical(tree: &[Ematch]) -> String {
    let mut s = String::new();
    canon_seq(&mut s, tree);
    s
}

fn quote(s: &mut String, bytes: &[u8]) {
    s.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                s.push('\\');
                s.push(b as char);
            }
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
}

fn canon_seq(s: &mut String, seq: &[Ematch]) {
    for m in seq {
        if m.invert {
            s.push_str("not ");
        }
        match &m.kind {
            EmKind::Container(inner) => {
                s.push('(');
                canon_seq(s, inner);
                s.push(')');
            }
            EmKind::Cmp(c) => {
                let _ = write!(s, "cmp(u{} at {} layer {}", c.align as u32 * 8, c.off, c.layer);
                if c.mask != 0 {
                    let _ = write!(s, " mask {:#x}", c.mask);
                }
                if c.trans {
                    s.push_str(" trans");
                }
                let op = match c.opnd {
                    Opnd::Eq => "eq",
                    Opnd::Lt => "lt",
                    Opnd::Gt => "gt",
                };
                let _ = write!(s, " {op} {})", c.val);
            }
            EmKind::U32(k) => {
                let _ = write!(
                    s,
                    "u32(u32 {:#x} {:#x} at {}{})",
                    k.val,
                    k.mask,
                    if k.nexthdr { "nexthdr+" } else { "" },
                    k.off
                );
            }
            EmKind::Nbyte(n) => {
                s.push_str("nbyte(");
                quote(s, &n.needle);
                let _ = write!(s, " at {} layer {})", n.off, n.layer);
            }
            EmKind::Meta(mt) => {
                s.push_str("meta(");
                for (i, o) in [&mt.left, &mt.right].into_iter().enumerate() {
                    if i == 1 {
                        s.push_str(match mt.opnd {
                            Opnd::Eq => " eq ",
                            Opnd::Lt => " lt ",
                            Opnd::Gt => " gt ",
                        });
                    }
                    if o.id == meta_id::VALUE {
                        if o.var {
                            quote(s, &o.bytes);
                        } else {
                            let _ = write!(s, "{}", o.val);
                        }
                        continue;
                    }
                    s.push_str(meta_name(o.id).unwrap_or("?"));
                    if o.shift != 0 {
                        let _ = write!(s, " shift {}", o.shift);
                    }
                    if o.val != 0 {
                        let _ = write!(s, " mask {:#x}", o.val);
                    }
                }
                s.push(')');
            }
            EmKind::Canid(rules) => {
                s.push_str("canid(");
                for (i, r) in rules.iter().enumerate() {
                    if i > 0 {
                        s.push(' ');
                    }
                    let eff = r.id & CAN_EFF_FLAG != 0;
                    let _ = write!(
                        s,
                        "{} {:#x}:{:#x}",
                        if eff { "eff" } else { "sff" },
                        r.id & !CAN_EFF_FLAG,
                        r.mask & !CAN_EFF_FLAG
                    );
                }
                s.push(')');
            }
        }
        match m.rel {
            Relation::And => s.push_str(" and "),
            Relation::Or => s.push_str(" or "),
            Relation::End => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    fn shown(s: &str) -> String {
        let (t, _) = parse_words(&[s.to_string(), "classid".into()], 0).unwrap();
        show(&t)
    }

    #[test]
    fn prints_as_iproute2() {
        assert_eq!(
            shown("cmp(u8 at 0 layer link mask 0xff eq 3) and cmp(u16 at 8 layer link mask 0x00ff gt 7) or not cmp(u32 at 4 layer network mask 0xa0a0 lt 3)"),
            "\n  cmp(u8 at 0 layer 0 mask 0xff eq 3)\n  AND cmp(u16 at 8 layer 0 mask 0xff gt 7)\n  OR NOT cmp(u32 at 4 layer 1 mask 0xa0a0 lt 3)\n"
        );
        assert_eq!(shown("u32(u8 0xaa 0xf0 at -14)"), "\n  u32(0000a000/0000f000 at -16)\n");
        assert_eq!(shown("canid(sff 0x01:0xf eff 0x02:0xf)"), "\n  canid(eff 0x2:0xF sff 0x1:0xF)\n");
        assert_eq!(shown("canid(sff 0xaabb:0x00ff)"), "\n  canid(sff 0x2BB:0xFF)\n");
        assert_eq!(
            shown("not (meta(nf_mark mask 0xff eq 3) or meta(priority gt 1)) and u32(u16 0x1122 0xffff at nexthdr+4)"),
            "\n  NOT (\n    meta(nf_mark mask 0x000000ff eq 3)\n    OR meta(priority gt 1)\n  ) AND u32(11220000/ffff0000 at nexthdr+4)\n"
        );
        // iproute2 sends a constant string as bytes but `dev` as a number: the kernel refuses.
        let e = parse_words(&words("meta(dev eq \"eth0\") x"), 0).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (2, "RTNETLINK answers: Invalid argument"));
        assert_eq!(shown("meta(sk_bind_if eq dev)"), "\n  meta(sk_bind_if eq dev)\n");
        assert_eq!(
            shown("nbyte(\"ab\\x01\" at 3 layer transport)"),
            "\n  nbyte(61 62 01 \"ab.\" at 3 layer 2)\n"
        );
    }

    #[test]
    fn canonical_text_reads_back() {
        for t in [
            "cmp(u8 at 0 layer link mask 0xff trans gt 10) and not (u32(u8 0x77 0x1f at 13) or meta(fwmark shift 2 mask 0xf0 eq 0x30))",
            "canid(sff 1 eff 0x123:0x7 sff 0x12:0x13)",
            "meta(dev eq 3) or nbyte(\"x \\\"y\\x01\" at 4 layer 1)",
            "meta(protocol eq 8) and cmp(u32 at 4 layer 2 eq 4294967295)",
        ] {
            let tree = parse_text(t).unwrap();
            let c = canonical(&tree);
            assert_eq!(parse_text(&c).unwrap(), tree, "{t} -> {c}");
        }
    }

    #[test]
    fn where_the_tree_ends() {
        // Words: cmp(u8 at 0 gt 1) classid 1:1 — the tree ends before `classid` (word 5).
        let w = words("cmp(u8 at 0 gt 1) classid 1:1");
        assert_eq!(parse_words(&w, 0).unwrap().1, 5);
        // `1)classid`: the word holding the next token is given back whole (tc: What is "1)classid"?).
        let w = words("cmp(u8 at 0 gt 1)classid 1:1");
        assert_eq!(parse_words(&w, 0).unwrap().1, 4);
        // Running to the end gives the last word back (tc then asks "What is ...?").
        let w = words("cmp(u8 at 0 gt 1)");
        assert_eq!(parse_words(&w, 0).unwrap().1, 4);
    }

    #[test]
    fn errors_are_iproute2s() {
        let e = |s: &str| parse_words(&words(s), 0).unwrap_err().message;
        assert!(e("u32(u8 0x1122 0x0f at 0) classid").starts_with("Illegal key (>0xFF)"));
        assert!(e("cmp(u8 at 0 mask 0xff gt 10) and classid 1:1").starts_with("Parse error: syntax error"));
        assert!(e("(cmp(u8 at 0 gt 1) classid 1:1").starts_with("Parse error"));
        assert!(e("meta(foo eq 3) classid").starts_with("meta: unknown meta id"));
        assert!(e("u32(u8 0x11 0x0f at 1 2) x").starts_with("u32: unexpected trailer"));
        assert!(e("foo(1) classid").starts_with("Unknown ematch \"foo\""));
        assert!(e("u32(u8 0x77 0xff at) x").starts_with("u32: missing offset"));
        assert!(e("cmp(u8 at 0 layer 3 eq 1) x").starts_with("cmp: illegal layer"));
        // Nesting deeper than the kernel's stack is refused, not recursed into.
        let deep = format!("{}cmp(u8 at 0 eq 1){} x", "(".repeat(100), ")".repeat(100));
        assert!(e(&deep).starts_with("Parse error"));
    }
}

/// `TCA_EMATCH_TREE_*` and the ematch kinds (`/etc/iproute2/ematch_map`).
mod nl {
    pub const TREE_HDR: u16 = 1;
    pub const TREE_LIST: u16 = 2;
    pub const CONTAINER: u16 = 0;
    pub const CMP: u16 = 1;
    pub const NBYTE: u16 = 2;
    pub const U32: u16 = 3;
    pub const REL_AND: u16 = 1;
    pub const REL_OR: u16 = 2;
    pub const REL_MASK: u16 = 3;
    pub const INVERT: u16 = 4;
    pub const CMP_TRANS: u8 = 1;
}

/// The first match kind of `tree` (at any depth) that the netlink encoder does not send.
pub fn unencoded_match(tree: &[Ematch]) -> Option<&'static str> {
    tree.iter().find_map(|e| match &e.kind {
        EmKind::Container(c) => unencoded_match(c),
        EmKind::Meta(_) => Some("meta"),
        EmKind::Canid(_) => Some("canid"),
        EmKind::Cmp(_) | EmKind::U32(_) | EmKind::Nbyte(_) => None,
    })
}

/// The model's ematch text as the nest `nest` tc's `parse_ematch` sends, or what cannot be
/// sent (`ematch (...)`, ``ematch `meta(...)` ``).
pub fn encode_text(out: &mut crate::nlattr::Attrs, nest: u16, text: &str) -> Result<(), String> {
    let tree = parse_text(text).map_err(|e| format!("ematch ({e})"))?;
    if let Some(k) = unencoded_match(&tree) {
        return Err(format!("ematch `{k}(...)`"));
    }
    encode(out, nest, &tree);
    Ok(())
}

/// An ematch tree as tc's `parse_ematch` sends it: `TCA_EMATCH_TREE_HDR` (match count, program
/// 0), then `TCA_EMATCH_TREE_LIST` with one nest per match, numbered from 1 in flattened order
/// (the top-level sequence, then each container's sub-sequence appended as it is met); each is
/// `struct tcf_ematch_hdr` (kind, relation and invert flags) and the match's own struct, a
/// container's being the index of its sub-sequence's first match.
pub fn encode(out: &mut crate::nlattr::Attrs, nest: u16, tree: &[Ematch]) {
    fn flatten<'a>(seq: &'a [Ematch], base: usize, list: &mut Vec<(&'a Ematch, u32)>) {
        for (k, e) in seq.iter().enumerate() {
            if let EmKind::Container(child) = &e.kind {
                let start = list.len();
                list[base + k].1 = start as u32;
                list.extend(child.iter().map(|c| (c, 0)));
                flatten(child, start, list);
            }
        }
    }
    let mut list: Vec<(&Ematch, u32)> = tree.iter().map(|e| (e, 0)).collect();
    flatten(tree, 0, &mut list);
    out.begin_nest(nest);
    let mut hdr = Vec::with_capacity(4);
    hdr.extend_from_slice(&(list.len() as u16).to_ne_bytes());
    hdr.extend_from_slice(&0u16.to_ne_bytes());
    out.put(nl::TREE_HDR, &hdr);
    out.begin_nest(nl::TREE_LIST);
    for (i, (e, child)) in list.iter().enumerate() {
        let mut flags = match e.rel {
            Relation::End => 0,
            Relation::And => nl::REL_AND,
            Relation::Or => nl::REL_OR,
        };
        if e.invert {
            flags |= nl::INVERT;
        }
        let mut b = Vec::with_capacity(24);
        let kind = match &e.kind {
            EmKind::Container(_) => nl::CONTAINER,
            EmKind::Cmp(_) => nl::CMP,
            EmKind::Nbyte(_) => nl::NBYTE,
            EmKind::U32(_) => nl::U32,
            // Refused before (`unencoded_match`).
            EmKind::Meta(_) | EmKind::Canid(_) => u16::MAX,
        };
        b.extend_from_slice(&0u16.to_ne_bytes()); // matchid
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        match &e.kind {
            EmKind::Container(_) => b.extend_from_slice(&child.to_ne_bytes()),
            EmKind::Cmp(c) => {
                b.extend_from_slice(&c.val.to_ne_bytes());
                b.extend_from_slice(&c.mask.to_ne_bytes());
                b.extend_from_slice(&c.off.to_ne_bytes());
                let trans = if c.trans { nl::CMP_TRANS } else { 0 };
                b.push((c.align & 0xF) | trans << 4);
                let opnd = match c.opnd {
                    Opnd::Eq => 0u8,
                    Opnd::Gt => 1,
                    Opnd::Lt => 2,
                };
                b.push((c.layer & 0xF) | opnd << 4);
            }
            EmKind::Nbyte(n) => {
                b.extend_from_slice(&n.off.to_ne_bytes());
                let len_layer = (n.needle.len() as u16 & 0xFFF) | (n.layer as u16 & 0xF) << 12;
                b.extend_from_slice(&len_layer.to_ne_bytes());
                b.extend_from_slice(&n.needle);
            }
            EmKind::U32(k) => {
                b.extend_from_slice(&k.mask.to_be_bytes());
                b.extend_from_slice(&(k.val & k.mask).to_be_bytes());
                b.extend_from_slice(&k.off.to_ne_bytes());
                b.extend_from_slice(&(if k.nexthdr { -1i32 } else { 0 }).to_ne_bytes());
            }
            EmKind::Meta(_) | EmKind::Canid(_) => {}
        }
        // tc appends each part with its padding (`addraw_l`), and the nest's length counts it.
        b.resize(b.len().next_multiple_of(4), 0);
        out.put(i as u16 + 1, &b);
    }
    out.end_nest();
    out.end_nest();
}

/// The tree of an ematch nest's payload (the inverse of [`encode`]).
pub fn decode(payload: &[u8]) -> Result<Vec<Ematch>, String> {
    let list = crate::nlattr::find(payload, nl::TREE_LIST).ok_or("no TCA_EMATCH_TREE_LIST")?;
    let items: Vec<&[u8]> = crate::nlattr::attrs(list).map(|(_, p)| p).collect();
    fn seq(items: &[&[u8]], start: usize, depth: usize) -> Result<Vec<Ematch>, String> {
        let mut out = Vec::new();
        let mut i = start;
        loop {
            let b = items.get(i).ok_or("an ematch sequence runs past the list")?;
            let (e, end) = one_of(items, b, depth)?;
            out.push(e);
            if end {
                return Ok(out);
            }
            i += 1;
        }
    }
    fn one_of(items: &[&[u8]], b: &[u8], depth: usize) -> Result<(Ematch, bool), String> {
        let u16_at =
            |at: usize| b.get(at..at + 2).map(|x| u16::from_ne_bytes([x[0], x[1]])).ok_or("short ematch");
        let u32_at = |at: usize| {
            b.get(at..at + 4).map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]])).ok_or("short ematch")
        };
        let kind = u16_at(2)?;
        let flags = u16_at(4)?;
        let rel = match flags & nl::REL_MASK {
            0 => Relation::End,
            nl::REL_AND => Relation::And,
            nl::REL_OR => Relation::Or,
            _ => return Err("bad ematch relation".into()),
        };
        let d = &b[8.min(b.len())..];
        let kind = match kind {
            nl::CONTAINER => {
                if depth > EMATCH_STACK {
                    return Err("ematch containers nest too deep".into());
                }
                let child = u32_at(8)? as usize;
                EmKind::Container(seq(items, child, depth + 1)?)
            }
            nl::CMP => {
                if d.len() < 12 {
                    return Err("short cmp".into());
                }
                let (a, l) = (d[10], d[11]);
                EmKind::Cmp(Cmp {
                    val: u32_at(8)?,
                    mask: u32_at(12)?,
                    off: u16_at(16)?,
                    align: a & 0xF,
                    trans: (a >> 4) & nl::CMP_TRANS != 0,
                    layer: l & 0xF,
                    opnd: match l >> 4 {
                        0 => Opnd::Eq,
                        1 => Opnd::Gt,
                        2 => Opnd::Lt,
                        _ => return Err("bad cmp operand".into()),
                    },
                })
            }
            nl::NBYTE => {
                let off = u16_at(8)?;
                let ll = u16_at(10)?;
                let len = (ll & 0xFFF) as usize;
                let needle = d.get(4..4 + len).ok_or("short nbyte")?.to_vec();
                EmKind::Nbyte(Nbyte { needle, off, layer: (ll >> 12) as u8 })
            }
            nl::U32 => {
                let be = |at: usize| u32_at(at).map(u32::from_be);
                EmKind::U32(U32Key {
                    mask: be(8)?,
                    val: be(12)?,
                    off: u32_at(16)? as i32,
                    nexthdr: u32_at(20)? != 0,
                })
            }
            k => return Err(format!("ematch kind {k} not decoded")),
        };
        Ok((Ematch { invert: flags & nl::INVERT != 0, rel, kind }, rel == Relation::End))
    }
    if items.is_empty() {
        return Ok(Vec::new());
    }
    seq(&items, 0, 0)
}
