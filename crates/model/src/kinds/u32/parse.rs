//! u32's grammar (iproute2's f_u32.c): selectors, `offset`, `hashkey`, `ht`, `sample`,
//! `divisor`, handles written `ht:bucket:node`.

use super::{U32Filter, U32Key, U32OffsetOpts, U32Opts, U32TableOpts};
use crate::error::TcError;
use crate::grammar::{get_u32, illegal, matches, what_is, Cur};
use crate::kinds::filter_common::{classid_arg, num, FilterParseCx, FilterParsed};

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

/// tc's `parse_at`: `[nexthdr+]OFF` or `nexthdr+ OFF` (the word after `at`), overriding a
/// sample's offset.
fn parse_at(cur: &mut Cur, off: &mut i32, nexthdr: &mut bool) -> Result<(), ()> {
    let (_, v) = cur.value().map_err(|_| ())?;
    let p = if v.len() > "nexthdr+".len() && v.starts_with("nexthdr+") {
        *nexthdr = true;
        &v["nexthdr+".len()..]
    } else if matches(v, "nexthdr+") {
        *nexthdr = true;
        cur.value().map_err(|_| ())?.1
    } else {
        v
    };
    *off = get_int(p).ok_or(())?;
    Ok(())
}

/// `get_integer(.., 0)`: a signed decimal, `0x` hex or octal number that fits an int.
fn get_int(s: &str) -> Option<i32> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = get_u32(body)? as i64;
    i32::try_from(if neg { -v } else { v }).ok()
}

/// One `VALUE MASK [at OFF]` sample of `width` bits at `off` (tc's parse_u8/u16/u32): the value
/// in any base, the mask in hex.
fn sample(
    cur: &mut Cur,
    keys: &mut Vec<U32Key>,
    width: u32,
    mut off: i32,
    mut nexthdr: bool,
) -> Result<(), ()> {
    let (_, v) = cur.value().map_err(|_| ())?;
    let val = get_u32(v).ok_or(())?;
    let (_, m) = cur.value().map_err(|_| ())?;
    let mask = hex_u32(m).ok_or(())?;
    if cur.peek() == Some("at") {
        cur.pos += 1;
        parse_at(cur, &mut off, &mut nexthdr)?;
    }
    match width {
        32 => pack_key(keys, val, mask, off, nexthdr),
        16 => pack_key16(keys, val, mask, off, nexthdr),
        _ => pack_key8(keys, val, mask, off, nexthdr),
    }
}

/// `get_u32(.., 16)`: hexadecimal with or without `0x`.
fn hex_u32(s: &str) -> Option<u32> {
    let b = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    u32::from_str_radix(b, 16).ok()
}

/// iproute2's `get_addr_ipv4`: one to four dot-separated parts (each in any C base, at most
/// 255), missing trailing bytes zero: `80` is 80.0.0.0.
fn get_addr_ipv4(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let mut a = 0u32;
    for (i, p) in parts.iter().enumerate() {
        let n = get_u32(p).filter(|&n| n <= 255)?;
        a |= n << (24 - 8 * i);
    }
    Some(a)
}

/// `get_prefix_1` for IPv4: `ADDR[/LEN]`, `default`/`any`/`all` (length 0). Returns the address
/// and the mask.
fn ipv4_prefix(s: &str) -> Option<(u32, u32)> {
    if matches!(s, "default" | "any" | "all") {
        return Some((0, 0));
    }
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, netmask_len(l, 32)?),
        None => (s, 32),
    };
    let ip = get_addr_ipv4(addr)?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((ip, mask))
}

/// A prefix length (`get_netmask`: decimal up to `max`, or for IPv4 a dotted mask).
fn netmask_len(l: &str, max: u32) -> Option<u32> {
    if let Some(n) = l.parse::<u32>().ok().filter(|&n| n <= max) {
        return Some(n);
    }
    if max == 32 {
        let m = get_addr_ipv4(l)?;
        let len = m.leading_ones();
        if m.checked_shl(len).unwrap_or(0) == 0 {
            return Some(len);
        }
    }
    None
}

/// `get_prefix_1` for IPv6: the address's 32-bit words and the prefix length.
fn ipv6_prefix(s: &str) -> Option<([u32; 4], u32)> {
    if matches!(s, "default" | "any" | "all") {
        return Some(([0; 4], 0));
    }
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, netmask_len(l, 128)?),
        None => (s, 128),
    };
    let ip: std::net::Ipv6Addr = addr.parse().ok()?;
    let o = ip.octets();
    let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
    Some(([w(0), w(4), w(8), w(12)], len))
}

/// `ADDR[/LEN] [at OFF]` at `off` (tc's parse_ip_addr / parse_ip6_addr).
fn addr_sample(cur: &mut Cur, keys: &mut Vec<U32Key>, v6: bool, mut off: i32) -> Result<(), ()> {
    let (_, a) = cur.value().map_err(|_| ())?;
    let (words, len) = if v6 {
        ipv6_prefix(a).ok_or(())?
    } else {
        let (ip, mask) = ipv4_prefix(a).ok_or(())?;
        ([ip, 0, 0, 0], mask.leading_ones())
    };
    let mut nexthdr = false;
    if cur.peek() == Some("at") {
        cur.pos += 1;
        parse_at(cur, &mut off, &mut nexthdr)?;
    }
    if !v6 {
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        return pack_key(keys, words[0], mask, off, nexthdr);
    }
    let mut i = 0;
    while i < len {
        let mask = if i + 31 < len { u32::MAX } else { u32::MAX << (32 - (len - i)) };
        pack_key(keys, words[(i / 32) as usize], mask, off + 4 * (i / 32) as i32, nexthdr)?;
        i += 32;
    }
    Ok(())
}

/// One `match` selector (tc's parse_selector): appends its key(s).
fn parse_selector(cur: &mut Cur, keys: &mut Vec<U32Key>) -> Result<(), TcError> {
    let (ti, t) = cur.value()?;
    let r = match t {
        "u32" => sample(cur, keys, 32, 0, false),
        "u16" => sample(cur, keys, 16, 0, false),
        "u8" => sample(cur, keys, 8, 0, false),
        "ip" => {
            let (_, f) = cur.value()?;
            match f {
                "src" => addr_sample(cur, keys, false, 12),
                "dst" => addr_sample(cur, keys, false, 16),
                _ if f == "tos" || matches(f, "dsfield") || matches(f, "precedence") => {
                    sample(cur, keys, 8, 1, false)
                }
                "ihl" => sample(cur, keys, 8, 0, false),
                "protocol" => sample(cur, keys, 8, 9, false),
                "nofrag" => pack_key16(keys, 0, 0x3FFF, 6, false),
                "firstfrag" => pack_key16(keys, 0x2000, 0x3FFF, 6, false),
                "df" => pack_key16(keys, 0x4000, 0x4000, 6, false),
                "mf" => pack_key16(keys, 0x2000, 0x2000, 6, false),
                "dport" => sample(cur, keys, 16, 22, false),
                "sport" => sample(cur, keys, 16, 20, false),
                "icmp_type" => sample(cur, keys, 8, 20, false),
                "icmp_code" => sample(cur, keys, 8, 21, false),
                _ => Err(()),
            }
        }
        "ip6" => {
            let (_, f) = cur.value()?;
            match f {
                "src" => addr_sample(cur, keys, true, 8),
                "dst" => addr_sample(cur, keys, true, 24),
                "priority" => (|| {
                    let (_, v) = cur.value().map_err(|_| ())?;
                    let (_, m) = cur.value().map_err(|_| ())?;
                    let (v, m) = (get_u32(v).ok_or(())?, hex_u32(m).ok_or(())?);
                    if v > 0xFF || m > 0xFF {
                        return Err(());
                    }
                    pack_key(keys, v << 20, m << 20, 0, false)
                })(),
                "protocol" => sample(cur, keys, 8, 6, false),
                "flowlabel" => sample(cur, keys, 32, 0, false),
                "dport" => sample(cur, keys, 16, 42, false),
                "sport" => sample(cur, keys, 16, 40, false),
                "icmp_type" => sample(cur, keys, 8, 40, false),
                // tc passes an offset mask of 1 here (printed as nexthdr+).
                "icmp_code" => sample(cur, keys, 8, 41, true),
                _ => Err(()),
            }
        }
        "tcp" | "udp" => {
            let (_, f) = cur.value()?;
            match f {
                "src" => sample(cur, keys, 16, 0, true),
                "dst" => sample(cur, keys, 16, 2, true),
                _ => Err(()),
            }
        }
        "icmp" => {
            let (_, f) = cur.value()?;
            match f {
                "type" => sample(cur, keys, 8, 0, true),
                "code" => sample(cur, keys, 8, 1, true),
                _ => Err(()),
            }
        }
        "mark" => return Err(TcError::usage("u32: \"mark\" match is not supported by Sluice", Some(ti))),
        _ => Err(()),
    };
    r.map_err(|_| TcError::usage("Illegal \"match\"", Some(ti)))
}

/// tc's `parse_offset`: `plus P`, `at OFF` (even), `mask M` (hex), `shift S`, `eat`, until
/// another word.
fn parse_offset(cur: &mut Cur, mut o: U32OffsetOpts) -> Result<U32OffsetOpts, TcError> {
    let start = cur.pos;
    let bad = |msg: &str| TcError::usage(format!("{msg}Illegal \"offset\""), Some(start));
    if cur.peek().is_none() {
        return Err(TcError::fatal("Command line is not complete. Try option \"help\"", Some(start)));
    }
    while let Some(w) = cur.peek() {
        if matches(w, "plus") {
            cur.pos += 1;
            let (_, v) = cur.value()?;
            o.plus = Some(get_int(v).ok_or_else(|| bad(""))? as i16);
        } else if matches(w, "at") {
            cur.pos += 1;
            let (_, v) = cur.value()?;
            let off = get_int(v).ok_or_else(|| bad(""))?;
            if off % 2 != 0 {
                return Err(bad("offset \"at\" must be even\n"));
            }
            o.at = off as i16;
            o.var = true;
        } else if matches(w, "mask") {
            cur.pos += 1;
            let (_, v) = cur.value()?;
            o.mask = hex_u32(v).and_then(|m| u16::try_from(m).ok()).ok_or_else(|| bad(""))?;
            o.var = true;
        } else if matches(w, "shift") {
            cur.pos += 1;
            let (_, v) = cur.value()?;
            o.shift = get_int(v).ok_or_else(|| bad(""))? as u8;
            o.var = true;
        } else if matches(w, "eat") {
            cur.pos += 1;
            o.eat = true;
        } else {
            break;
        }
    }
    Ok(o)
}

pub(super) fn parse_u32(
    cur: &mut Cur,
    handle: Option<(usize, &str)>,
    cx: &mut dyn FilterParseCx,
) -> Result<FilterParsed<U32Filter>, TcError> {
    let mut h = 0;
    if let Some((i, s)) = handle {
        h = get_u32_handle(s).ok_or_else(|| TcError::usage("Illegal filter ID", Some(i)))?;
    }
    let mut o = U32Opts::default();
    let mut sel = false;
    let mut divisor: Option<u32> = None;
    let mut htid: Option<u32> = None;
    let mut order = 0u32;
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
            "action" => cx.action(cur)?,
            "police" => cx.police(cur)?,
            "offset" => o.offset = Some(parse_offset(cur, o.offset.unwrap_or_default())?),
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
        Some(d) if !sel => U32Filter::Table(U32TableOpts { divisor: d }),
        _ => U32Filter::Key(o),
    };
    Ok(FilterParsed { opts, handle: h, table: htid, given })
}
