//! Filter-kind grammars (u32, flow, fw, matchall, basic); their actions are parsed by
//! [`super::actions`].

use super::actions::{ActionSpec, Ctx};
use super::args::helpers::*;
use super::args::FilterSpec;
use super::error::TcError;
use crate::model::*;

const U32_USAGE: &str = "Usage: ... u32 [ match SELECTOR ... ] [ link HTID ] [ classid CLASSID ]\n               [ action ACTION_SPEC ] [ offset OFFSET_SPEC ]\n               [ ht HTID ] [ hashkey HASHKEY_SPEC ]\n               [ sample SAMPLE ] [skip_hw | skip_sw]\nor         u32 divisor DIVISOR\n\nWhere: SELECTOR := SAMPLE SAMPLE ...\n       SAMPLE := { ip | ip6 | udp | tcp | icmp | u{32|16|8} | mark }\n                 SAMPLE_ARGS [ divisor DIVISOR ]\n       FILTERID := X:Y:Z";

/// `get_u32_handle`: `htid:hash:node` in hex, each part optional.
pub fn get_u32_handle(s: &str) -> Option<u32> {
    let mut parts = s.split(':');
    let hex = |p: Option<&str>, max: u32| -> Option<u32> {
        match p {
            None | Some("") => Some(0),
            Some(t) => u32::from_str_radix(t.strip_prefix("0x").unwrap_or(t), 16).ok().filter(|&v| v <= max),
        }
    };
    let ht = hex(parts.next(), 0xFFF)?;
    let hash = hex(parts.next(), 0xFF)?;
    let node = hex(parts.next(), 0xFFF)?;
    if parts.next().is_some() {
        return None;
    }
    Some((ht << 20) | (hash << 12) | node)
}

/// Prints a u32 handle like tc: `800:`, `800::800`, `1:40:800`.
pub fn u32_handle_str(h: u32) -> String {
    let ht = h >> 20;
    let hash = (h >> 12) & 0xFF;
    let node = h & 0xFFF;
    let mut s = if ht != 0 { format!("{ht:x}:") } else { ":".to_string() };
    if hash != 0 || node != 0 {
        if hash != 0 {
            s.push_str(&format!("{hash:x}"));
        }
        if node != 0 {
            s.push_str(&format!(":{node:x}"));
        }
    }
    s
}

fn pack_key(keys: &mut Vec<U32Key>, val: u32, mask: u32, off: i32, nexthdr: bool) -> Result<(), ()> {
    let val = val & mask;
    for k in keys.iter_mut() {
        if k.off == off && k.nexthdr == nexthdr {
            if (val ^ k.val) & (mask & k.mask) != 0 {
                return Err(());
            }
            k.val |= val;
            k.mask |= mask;
            return Ok(());
        }
    }
    if off % 4 != 0 || keys.len() >= 128 {
        return Err(());
    }
    keys.push(U32Key { val, mask, off, nexthdr });
    Ok(())
}

fn pack_key16(keys: &mut Vec<U32Key>, val: u32, mask: u32, off: i32, nexthdr: bool) -> Result<(), ()> {
    if val > 0xFFFF || mask > 0xFFFF {
        return Err(());
    }
    let (v, m) = if off & 3 == 0 { (val << 16, mask << 16) } else { (val, mask) };
    pack_key(keys, v, m, off & !3, nexthdr)
}

fn pack_key8(keys: &mut Vec<U32Key>, val: u32, mask: u32, off: i32, nexthdr: bool) -> Result<(), ()> {
    if val > 0xFF || mask > 0xFF {
        return Err(());
    }
    let shift = match off & 3 {
        0 => 24,
        1 => 16,
        2 => 8,
        _ => 0,
    };
    pack_key(keys, val << shift, mask << shift, off & !3, nexthdr)
}

fn num(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    get_u32(v).ok_or_else(|| illegal(what, i, None))
}

/// Masks in u32 selectors are hexadecimal even without `0x` (tc's `get_u32(.., 16)`).
fn mask(cur: &mut Cur) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    u32::from_str_radix(v.trim_start_matches("0x").trim_start_matches("0X"), 16)
        .map_err(|_| illegal("match", i, None))
}

/// A u32 selector's `VALUE MASK` pair.
fn val_mask(cur: &mut Cur) -> Result<(u32, u32), TcError> {
    Ok((num(cur, "match")?, mask(cur)?))
}

/// `classid`/`flowid CLASSID`, the result every filter kind may set.
fn classid_arg(cur: &mut Cur) -> Result<Option<Handle>, TcError> {
    let (i, v) = cur.value()?;
    cur.classid(v).map(Some).ok_or_else(|| illegal("classid", i, None))
}

/// A handle that is one number (flow, matchall, basic); 0 when none was given.
fn plain_handle(handle: Option<(usize, &str)>) -> Result<u32, TcError> {
    match handle {
        Some((i, s)) => get_u32(s).ok_or_else(|| TcError::usage("Illegal \"handle\"", Some(i))),
        None => Ok(0),
    }
}

/// The spec of a kind with no hash tables and no partial `change`.
fn simple_spec(opts: FilterOpts, handle: u32, actions: Vec<ActionSpec>) -> FilterSpec {
    FilterSpec { opts, handle, u32_htid: None, actions, given: vec![] }
}

/// `[at [nexthdr+]OFF]` after a raw u8/u16/u32 sample.
fn at_offset(cur: &mut Cur) -> Result<(i32, bool), TcError> {
    if cur.peek() == Some("at") {
        cur.pos += 1;
        let (i, v) = cur.value()?;
        let (nh, rest) = match v.strip_prefix("nexthdr+") {
            Some(r) => (true, r),
            None => (false, v),
        };
        let off: i32 = rest.parse().map_err(|_| illegal("offset", i, None))?;
        return Ok((off, nh));
    }
    Ok((0, false))
}

fn ipv4_prefix(s: &str) -> Option<(u32, u32)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, l.parse::<u32>().ok()?),
        None => (s, 32),
    };
    let ip: std::net::Ipv4Addr = addr.parse().ok()?;
    if len > 32 {
        return None;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(ip), mask))
}

/// One `match` selector: appends its key(s).
fn parse_selector(cur: &mut Cur, keys: &mut Vec<U32Key>) -> Result<(), TcError> {
    let (ti, t) = cur.value()?;
    let bad = |what: &str, i: usize| TcError::usage(format!("Illegal \"{what}\""), Some(i));
    let key_err = |i: usize| TcError::usage("Illegal \"match\"", Some(i));
    match t {
        "u32" | "u16" | "u8" => {
            let (v, m) = val_mask(cur)?;
            let (off, nh) = at_offset(cur)?;
            let r = match t {
                "u32" => pack_key(keys, v, m, off, nh),
                "u16" => pack_key16(keys, v, m, off, nh),
                _ => pack_key8(keys, v, m, off, nh),
            };
            r.map_err(|_| key_err(ti))
        }
        "ip" => {
            let (fi, f) = cur.value()?;
            match f {
                "src" | "dst" => {
                    let (ai, a) = cur.value()?;
                    let (v, m) = ipv4_prefix(a).ok_or_else(|| bad("match", ai))?;
                    pack_key(keys, v, m, if f == "src" { 12 } else { 16 }, false).map_err(|_| key_err(ti))
                }
                "tos" | "dsfield" | "protocol" | "ihl" | "icmp_type" | "icmp_code" => {
                    let (v, m) = val_mask(cur)?;
                    let off = match f {
                        "tos" | "dsfield" => 1,
                        "protocol" => 9,
                        "ihl" => 0,
                        "icmp_type" => 20,
                        _ => 21,
                    };
                    pack_key8(keys, v, m, off, false).map_err(|_| key_err(ti))
                }
                "sport" | "dport" => {
                    let (v, m) = val_mask(cur)?;
                    pack_key16(keys, v, m, if f == "sport" { 20 } else { 22 }, false).map_err(|_| key_err(ti))
                }
                "nofrag" | "firstfrag" | "df" | "mf" => {
                    let (v, m) = match f {
                        "nofrag" => (0, 0x3FFF),
                        "firstfrag" => (0, 0x1FFF),
                        "df" => (0x4000, 0x4000),
                        _ => (0x2000, 0x2000),
                    };
                    pack_key16(keys, v, m, 6, false).map_err(|_| key_err(ti))
                }
                _ => Err(bad("match", fi)),
            }
        }
        "tcp" | "udp" | "icmp" => {
            let (fi, f) = cur.value()?;
            let (v, m) = val_mask(cur)?;
            let r = match (t, f) {
                ("icmp", "type") => pack_key8(keys, v, m, 0, true),
                ("icmp", "code") => pack_key8(keys, v, m, 1, true),
                (_, "src") => pack_key16(keys, v, m, 0, true),
                (_, "dst") => pack_key16(keys, v, m, 2, true),
                _ => return Err(bad("match", fi)),
            };
            r.map_err(|_| key_err(ti))
        }
        "mark" => Err(TcError::usage("u32: \"mark\" match is not supported by Sluice", Some(ti))),
        _ => Err(bad("match", ti)),
    }
}

pub(crate) fn parse_u32(cur: &mut Cur, handle: Option<(usize, &str)>) -> Result<FilterSpec, TcError> {
    let mut h = 0;
    if let Some((i, s)) = handle {
        h = get_u32_handle(s).ok_or_else(|| TcError::usage("Illegal filter ID", Some(i)))?;
    }
    let mut o = U32Opts::default();
    let mut sel = false;
    let mut divisor: Option<u32> = None;
    let mut htid: Option<u32> = None;
    let mut order = 0u32;
    let mut actions = Vec::new();
    let start = cur.pos;
    while let Some((at, w)) = cur.next_word() {
        match w {
            "match" => {
                parse_selector(cur, &mut o.keys)?;
                sel = true;
            }
            "divisor" => {
                let (i, v) = cur.value()?;
                let d = get_u32(v).filter(|&d| d > 0 && d <= 0x100 && d & (d - 1) == 0);
                divisor = Some(d.ok_or_else(|| illegal("divisor", i, None))?);
            }
            "order" => {
                let (i, v) = cur.value()?;
                order = get_u32(v).filter(|&o| o <= 0xFFF).ok_or_else(|| illegal("order", i, None))?;
            }
            "link" => {
                let (i, v) = cur.value()?;
                let l = get_u32_handle(v).ok_or_else(|| illegal("link", i, None))?;
                if l & 0xFFF != 0 {
                    return Err(TcError::usage("\"link\" must be a hash table.", Some(i)));
                }
                o.link = Some(l);
            }
            "ht" => {
                let (i, v) = cur.value()?;
                let t = get_u32_handle(v).ok_or_else(|| illegal("ht", i, None))?;
                if t & 0xFFF != 0 {
                    return Err(TcError::usage("\"ht\" must be a hash table.", Some(i)));
                }
                htid = Some(t);
            }
            "sample" => {
                let mut sk = Vec::new();
                let si = cur.pos;
                parse_selector(cur, &mut sk)?;
                if sk.len() != 1 {
                    return Err(TcError::usage("\"sample\" must contain exactly ONE key.", Some(si)));
                }
                let mut hash = sk[0].val & sk[0].mask;
                if sk[0].mask != 0 {
                    hash >>= sk[0].mask.trailing_zeros();
                }
                let d = divisor.unwrap_or(256);
                let bucket = hash % d;
                htid = Some((htid.unwrap_or(0) & 0xFFF0_0000) | (bucket << 12));
            }
            "indev" => {
                let (_, v) = cur.value()?;
                o.indev = Some(v.to_string());
            }
            "classid" | "flowid" => o.classid = classid_arg(cur)?,
            "hashkey" => {
                let (mi, m) = cur.value()?;
                if m != "mask" {
                    return Err(illegal("hashkey", mi, None));
                }
                let mask = num(cur, "mask")?;
                let (ai, a) = cur.value()?;
                if a != "at" {
                    return Err(illegal("hashkey", ai, None));
                }
                let (oi, off) = cur.value()?;
                let off: i32 = off.parse().map_err(|_| illegal("hashkey", oi, None))?;
                o.hashkey = Some((mask, off));
            }
            "skip_hw" | "skip_sw" => {}
            "action" => parse_actions(cur, &mut actions)?,
            "police" => actions.push(parse_police(cur)?),
            "offset" => return Err(TcError::usage("u32: \"offset\" is not supported by Sluice", Some(at))),
            "help" => return Err(TcError::usage(U32_USAGE, Some(at))),
            _ => return Err(what_is(w, at, U32_USAGE)),
        }
    }
    if order != 0 {
        if h & 0xFFF != 0 && order != h & 0xFFF {
            return Err(TcError::usage("\"order\" contradicts \"handle\"", None));
        }
        h |= order;
    }
    let mut given = Vec::new();
    if sel {
        given.push("sel");
    }
    if cur.pos == start {
        // `u32` and nothing else: tc sends no options (the kernel only makes the classifier).
        given.push("empty");
    }
    let opts = match divisor {
        Some(d) if !sel => FilterOpts::U32Table { divisor: d },
        _ => FilterOpts::U32(o),
    };
    Ok(FilterSpec { opts, handle: h, u32_htid: htid, actions, given })
}

pub(crate) fn parse_flow(cur: &mut Cur, handle: Option<(usize, &str)>) -> Result<FilterSpec, TcError> {
    let h = plain_handle(handle)?;
    let mut o = FlowOpts { mask: u32::MAX, ..Default::default() };
    let mut nkeys = 0;
    let mut actions = Vec::new();
    let mut given: Vec<&'static str> = Vec::new();
    let usage = "Usage: ... flow ...\n\n [mapping mode]: map key KEY [ OPS ] ...\n [hashing mode]: hash keys KEY-LIST ... [ perturb SECS ]\n\n                 [ divisor NUM ] [ baseclass ID ] [ match EMATCH_TREE ]\n                 [ action ACTION_SPEC ]";
    while let Some((at, w)) = cur.next_word() {
        if matches(w, "map") {
            o.hash = false;
        } else if matches(w, "hash") {
            o.hash = true;
        } else if matches(w, "keys") || w == "key" {
            let (_, v) = cur.value()?;
            o.keys = 0;
            nkeys = 0;
            for k in v.split(',') {
                let bit = (0..FLOW_KEYS.len() + FLOW_TUNNEL_KEYS.len())
                    .find(|&i| flow_key_name(i).is_some_and(|n| n == k))
                    .or_else(|| (0..FLOW_KEYS.len()).find(|&i| matches(k, FLOW_KEYS[i])));
                match bit {
                    Some(b) => {
                        o.keys |= 1 << b;
                        nkeys += 1;
                    }
                    None => return Err(TcError::usage(format!("Unknown flow key \"{k}\""), Some(at + 1))),
                }
            }
            given.push("keys");
        } else if matches(w, "and") || matches(w, "or") || matches(w, "xor") {
            let (i, v) = cur.value()?;
            let t =
                get_u32(v).ok_or_else(|| illegal(if w.starts_with('a') { "mask" } else { w }, i, None))?;
            let (m, x) = if matches(w, "and") {
                (t, 0)
            } else if matches(w, "or") {
                (!t, t)
            } else {
                (u32::MAX, t)
            };
            o.xor = x ^ (o.xor & m);
            o.mask &= m;
            given.push("mask");
        } else if matches(w, "rshift") {
            o.rshift = Some(num(cur, "rshift")?);
            given.push("rshift");
        } else if matches(w, "addend") {
            let (i, v) = cur.value()?;
            let (neg, s) = match v.strip_prefix('-') {
                Some(s) => (true, s),
                None => (false, v),
            };
            let a = get_u32(s)
                .or_else(|| s.parse::<std::net::Ipv4Addr>().ok().map(u32::from))
                .ok_or_else(|| illegal("addend", i, None))?;
            o.addend = Some(if neg { a.wrapping_neg() } else { a });
            given.push("addend");
        } else if matches(w, "divisor") {
            o.divisor = Some(num(cur, "divisor")?);
            given.push("divisor");
        } else if matches(w, "baseclass") {
            let (i, v) = cur.value()?;
            let b = cur.classid(v).filter(|b| b.minor() != 0).ok_or_else(|| illegal("baseclass", i, None))?;
            o.baseclass = Some(b);
            given.push("baseclass");
        } else if matches(w, "perturb") {
            o.perturb = Some(num(cur, "perturb")?);
            given.push("perturb");
        } else if matches(w, "police") {
            actions.push(parse_police(cur)?);
        } else if matches(w, "action") {
            parse_actions(cur, &mut actions)?;
        } else if matches(w, "match") {
            o.ematch = Some(parse_ematch(cur)?);
            given.push("ematch");
        } else if matches(w, "help") {
            return Err(TcError::usage(usage, Some(at)));
        } else {
            return Err(what_is(w, at, usage));
        }
    }
    if nkeys > 1 && !o.hash {
        return Err(TcError::usage("Invalid mode \"map\" for multiple keys", None));
    }
    given.push("mode");
    Ok(FilterSpec { opts: FilterOpts::Flow(o), handle: h, u32_htid: None, actions, given })
}

/// An ematch tree: one quoted argument, or words up to the next filter keyword. Normalised to the
/// kernel's printed form (`layer link` is printed as `layer 0`).
fn parse_ematch(cur: &mut Cur) -> Result<String, TcError> {
    let mut words = Vec::new();
    while let Some(w) = cur.peek() {
        if !words.is_empty() && ["action", "police", "classid", "flowid", "baseclass", "divisor"].contains(&w)
        {
            break;
        }
        words.push(w.to_string());
        cur.pos += 1;
        if words.len() == 1 && w.contains('(') && w.ends_with(')') {
            break;
        }
    }
    if words.is_empty() {
        return Err(TcError::usage("Illegal \"ematch\"", Some(cur.pos)));
    }
    let text = words.join(" ");
    Ok(text
        .replace("layer link", "layer 0")
        .replace("layer network", "layer 1")
        .replace("layer transport", "layer 2"))
}

pub(crate) fn parse_fw(cur: &mut Cur, handle: Option<(usize, &str)>) -> Result<FilterSpec, TcError> {
    let mut o = FwOpts::default();
    let mut h = 0;
    if let Some((i, s)) = handle {
        let (v, m) = match s.split_once('/') {
            Some((v, m)) => (v, Some(m)),
            None => (s, None),
        };
        h = get_u32(v).ok_or_else(|| TcError::usage("Illegal \"handle\"", Some(i)))?;
        if let Some(m) = m {
            o.mask = Some(get_u32(m).ok_or_else(|| TcError::usage("Illegal \"handle\" mask", Some(i)))?);
        }
    }
    let mut actions = Vec::new();
    while let Some((at, w)) = cur.next_word() {
        match w {
            "classid" | "flowid" => o.classid = classid_arg(cur)?,
            "action" => parse_actions(cur, &mut actions)?,
            "police" => actions.push(parse_police(cur)?),
            "indev" => {
                cur.value()?;
            }
            _ => {
                return Err(what_is(
                    w,
                    at,
                    "Usage: ... fw [ classid CLASSID ] [ indev DEV ] [ action ACTION_SPEC ]",
                ))
            }
        }
    }
    Ok(simple_spec(FilterOpts::Fw(o), h, actions))
}

pub(crate) fn parse_matchall(cur: &mut Cur, handle: Option<(usize, &str)>) -> Result<FilterSpec, TcError> {
    let h = plain_handle(handle)?;
    let mut o = SimpleResult::default();
    let mut actions = Vec::new();
    while let Some((at, w)) = cur.next_word() {
        match w {
            "classid" | "flowid" => o.classid = classid_arg(cur)?,
            "action" => parse_actions(cur, &mut actions)?,
            "skip_hw" | "skip_sw" => {}
            _ => return Err(what_is(w, at, "Usage: ... matchall [skip_sw | skip_hw]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]")),
        }
    }
    Ok(simple_spec(FilterOpts::Matchall(o), h, actions))
}

pub(crate) fn parse_basic(cur: &mut Cur, handle: Option<(usize, &str)>) -> Result<FilterSpec, TcError> {
    let h = plain_handle(handle)?;
    let mut o = BasicOpts::default();
    let mut actions = Vec::new();
    while let Some((at, w)) = cur.next_word() {
        match w {
            "classid" | "flowid" => o.classid = classid_arg(cur)?,
            "match" => o.ematch = Some(parse_ematch(cur)?),
            "action" => parse_actions(cur, &mut actions)?,
            "police" => actions.push(parse_police(cur)?),
            _ => {
                return Err(what_is(
                    w,
                    at,
                    "Usage: ... basic [ match EMATCH_TREE ] [ action ACTION_SPEC ] [ classid CLASSID ]",
                ))
            }
        }
    }
    Ok(simple_spec(FilterOpts::Basic(o), h, actions))
}

/// After the `action` keyword: tc's action list (see [`super::actions`]).
fn parse_actions(cur: &mut Cur, out: &mut Vec<ActionSpec>) -> Result<(), TcError> {
    out.extend(super::actions::parse_action_list(cur, Ctx::Filter)?);
    Ok(())
}

/// The filter's `police` keyword: a policer action.
fn parse_police(cur: &mut Cur) -> Result<ActionSpec, TcError> {
    let p = super::actions::parse_police_keyword(cur, Ctx::Filter)?;
    Ok(ActionSpec { action: Action::Police(p), cookie: None, bare: false, compat: true })
}
