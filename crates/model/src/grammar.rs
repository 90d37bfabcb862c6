//! The words every kind's options are written in: iproute2's argument cursor, its number, handle
//! and unit parsers, and its error messages. The command grammar itself (`tc qdisc add dev ...`)
//! is `sluice-tc`'s; a kind's option grammar (in `crate::kinds`) is written with these.

use crate::error::TcError;
use crate::model::*;
use sluice_core::units::{parse_rate, parse_size, parse_time};

/// Cursor over argv with tc's error helpers.
pub struct Cur<'a> {
    /// The words.
    pub argv: &'a [String],
    /// The next word's index.
    pub pos: usize,
    /// Largest class minor accepted: tc's `ffff`, or `ffffffff` for the native form.
    pub max_minor: u32,
}

impl<'a> Cur<'a> {
    /// A class ID in this grammar (tc's, or the native one with 32-bit minors).
    pub fn classid(&self, s: &str) -> Option<Handle> {
        get_classid(s, self.max_minor)
    }
    /// The next word, not consumed.
    pub fn peek(&self) -> Option<&'a str> {
        self.argv.get(self.pos).map(|s| s.as_str())
    }
    /// The next word and its argv index, consumed; the head of every option loop.
    pub fn next_word(&mut self) -> Option<(usize, &'a str)> {
        let w = self.peek()?;
        self.pos += 1;
        Some((self.pos - 1, w))
    }
    /// NEXT_ARG: the value after a keyword, or tc's "not complete" exit.
    pub fn value(&mut self) -> Result<(usize, &'a str), TcError> {
        self.next_word().ok_or_else(|| {
            TcError::fatal(
                "Command line is not complete. Try option \"help\"",
                Some(self.pos.saturating_sub(1)),
            )
        })
    }
    /// Skips `n` values (options Sluice accepts and ignores, such as `estimator`).
    pub fn skip(&mut self, n: usize) -> Result<(), TcError> {
        for _ in 0..n {
            self.value()?;
        }
        Ok(())
    }
    /// `KEY VALUE` that may be given once: tc's `duparg` on a second one, else `parse(value, index)`.
    pub fn once<T>(
        &mut self,
        slot: &mut Option<T>,
        key: &str,
        parse: impl FnOnce(&'a str, usize) -> Result<T, TcError>,
    ) -> Result<(), TcError> {
        let (i, v) = self.value()?;
        if slot.is_some() {
            return Err(TcError::duparg(key, v, i));
        }
        *slot = Some(parse(v, i)?);
        Ok(())
    }
}

/// iproute2's `matches(arg, word)`: `arg` is a non-empty prefix of `word`.
pub fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.starts_with(arg)
}

/// `get_u32(..., base 0)`: decimal, `0x` hex or leading-0 octal.
pub fn get_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A hex number with or without `0x`.
pub fn get_hex(s: &str) -> Option<u32> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    u32::from_str_radix(s, 16).ok()
}

/// `get_qdisc_handle`: `X:` or `X` in hex (with or without `0x`), below 0x10000.
pub fn get_qdisc_handle(s: &str) -> Option<Handle> {
    if s == "none" {
        return Some(Handle::UNSPEC);
    }
    let (maj, rest) = strtoul16(s);
    let maj = maj?;
    if maj >= 1 << 16 || !(rest.is_empty() || rest.starts_with(':')) {
        return None;
    }
    Some(Handle::new(maj as u16, 0))
}

/// C's `strtoul(s, &end, 16)`: an optional `0x`/`0X` prefix, then hex digits. Returns the value
/// (None when no digit was read; `u64::MAX` on overflow, as C saturates) and the rest.
pub fn strtoul16(s: &str) -> (Option<u64>, &str) {
    let body = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(b) if b.starts_with(|c: char| c.is_ascii_hexdigit()) => b,
        _ => s,
    };
    let end = body.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(body.len());
    if end == 0 {
        return (None, s);
    }
    // C's strtoul saturates at ULONG_MAX.
    (Some(u64::from_str_radix(&body[..end], 16).unwrap_or(u64::MAX)), &body[end..])
}

/// `get_tc_classid`: `root`, `none`, `X:Y`, `X:`, `:Y`, or a bare hex number (a whole 32-bit
/// tc handle), with tc's 16-bit minors.
pub fn get_tc_classid(s: &str) -> Option<Handle> {
    get_classid(s, Handle::TC_MAX_MINOR)
}

/// [`get_tc_classid`]'s grammar with minors up to `max_minor` (`u32::MAX` in the native form).
/// Each part is read like C's `strtoul(.., 16)`, so `0x1:0x3` is `1:3`.
pub fn get_classid(s: &str, max_minor: u32) -> Option<Handle> {
    match s {
        "root" => return Some(H_ROOT),
        "none" => return Some(Handle::UNSPEC),
        _ => {}
    }
    let (maj, rest) = strtoul16(s);
    let maj = match maj {
        Some(m) => m,
        None if rest.starts_with(':') && rest.len() == s.len() => 0,
        None => return None,
    };
    if let Some(min) = rest.strip_prefix(':') {
        if maj >= 1 << 16 {
            return None;
        }
        let min = if min.is_empty() {
            0
        } else {
            match strtoul16(min) {
                (Some(v), "") => v,
                _ => return None,
            }
        };
        if min > max_minor as u64 {
            return None;
        }
        Some(Handle::new(maj as u16, min as u32))
    } else if rest.is_empty() {
        // A bare number is a whole handle, cut to 32 bits as tc's `__u32 *h = maj` does.
        Some(Handle::from_tc(maj as u32))
    } else {
        None
    }
}

/// iproute2's `llproto_names` (lib/ll_proto.c), in its order: the first name of an id is the
/// one printed.
const LL_PROTOS: &[(u16, &str)] = &[
    (0x0060, "loop"),
    (0x0200, "pup"),
    (0x0201, "pupat"),
    (0x0800, "ip"),
    (0x0805, "x25"),
    (0x0806, "arp"),
    (0x08FF, "bpq"),
    (0x0a00, "ieeepup"),
    (0x0a01, "ieeepupat"),
    (0x6000, "dec"),
    (0x6001, "dna_dl"),
    (0x6002, "dna_rc"),
    (0x6003, "dna_rt"),
    (0x6004, "lat"),
    (0x6005, "diag"),
    (0x6006, "cust"),
    (0x6007, "sca"),
    (0x8035, "rarp"),
    (0x809B, "atalk"),
    (0x80F3, "aarp"),
    (0x8137, "ipx"),
    (0x86DD, "ipv6"),
    (0x8863, "ppp_disc"),
    (0x8864, "ppp_ses"),
    (0x884c, "atmmpoa"),
    (0x8884, "atmfate"),
    (0x0001, "802_3"),
    (0x0002, "ax25"),
    (0x0003, "all"),
    (0x0004, "802_2"),
    (0x0005, "snap"),
    (0x0006, "ddcmp"),
    (0x0007, "wan_ppp"),
    (0x0008, "ppp_mp"),
    (0x0009, "localtalk"),
    (0x000C, "can"),
    (0x0010, "ppptalk"),
    (0x0011, "tr_802_2"),
    (0x0015, "mobitex"),
    (0x0016, "control"),
    (0x0017, "irda"),
    (0x0018, "econet"),
    (0x88CA, "tipc"),
    (0x8892, "profinet"),
    (0x88A2, "aoe"),
    (0x88A4, "ethercat"),
    (0x8100, "802.1Q"),
    (0x88A8, "802.1ad"),
    (0x8847, "mpls_uc"),
    (0x8848, "mpls_mc"),
    (0x6558, "teb"),
    (0x8100, "802.1Q"),
    (0x88cc, "LLDP"),
    (0x0800, "ipv4"),
];

/// `ll_proto_a2n`: a name from [`LL_PROTOS`] (any case), or a number (`get_be16`, any base).
pub fn proto_from_name(s: &str) -> Option<u16> {
    if let Some((id, _)) = LL_PROTOS.iter().find(|(_, n)| n.eq_ignore_ascii_case(s)) {
        return Some(*id);
    }
    get_u32(s).and_then(|v| u16::try_from(v).ok())
}

/// `ll_proto_n2a`: the first name of `p`, or `[N]` in decimal.
pub fn proto_name(p: u16) -> String {
    match LL_PROTOS.iter().find(|(id, _)| *id == p) {
        Some((_, n)) => n.to_string(),
        None => format!("[{p}]"),
    }
}

/// [`proto_name`] in a form both tc and Sluice read back: show's `[N]` is not a word
/// `ll_proto_a2n` takes, so unnamed ids are written as hex (`0x1234`).
pub fn proto_word(p: u16) -> String {
    match LL_PROTOS.iter().find(|(id, _)| *id == p) {
        Some((_, n)) => n.to_string(),
        None => format!("0x{p:04x}"),
    }
}

/// tc's `What is "WORD"?` with the kind's usage.
pub fn what_is(w: &str, at: usize, usage: &str) -> TcError {
    TcError::usage(format!("What is \"{w}\"?\n{usage}"), Some(at))
}

/// tc's `Illegal "WHAT"`, with an optional hint line.
pub fn illegal(what: &str, at: usize, hint: Option<String>) -> TcError {
    let mut m = format!("Illegal \"{what}\"");
    if let Some(h) = hint {
        m.push('\n');
        m.push_str(&h);
    }
    TcError::usage(m, Some(at))
}

/// A rate value (bit/s, zero refused).
pub fn rate_arg(cur: &mut Cur, what: &str) -> Result<u64, TcError> {
    let (i, v) = cur.value()?;
    let r = parse_rate(v).map_err(|e| illegal(what, i, Some(e.to_string())))?;
    if r.bps() == 0 {
        return Err(illegal(what, i, None));
    }
    Ok(r.bps())
}

/// A size with an optional `/cell` suffix (the cell is accepted and ignored, as modern kernels do).
pub fn size_arg(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    let v = v.split('/').next().unwrap_or(v);
    let s = parse_size(v).map_err(|e| illegal(what, i, Some(e.to_string())))?;
    u32::try_from(s).map_err(|_| illegal(what, i, None))
}

/// A time value, in µs.
pub fn time_arg(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    let t = parse_time(v).map_err(|e| illegal(what, i, Some(e.to_string())))?;
    u32::try_from(t.as_nanos() / 1000).map_err(|_| illegal(what, i, None))
}

/// A `get_u32` value.
pub fn u32_arg(cur: &mut Cur, what: &str) -> Result<u32, TcError> {
    let (i, v) = cur.value()?;
    get_u32(v).ok_or_else(|| illegal(what, i, None))
}

/// `overhead BYTES`, which may be negative.
pub fn overhead_arg(cur: &mut Cur) -> Result<i32, TcError> {
    let (i, v) = cur.value()?;
    v.parse().map_err(|_| illegal("overhead", i, None))
}

/// `linklayer ethernet|atm`.
pub fn linklayer_arg(cur: &mut Cur) -> Result<LinkLayer, TcError> {
    let (i, v) = cur.value()?;
    match v {
        "ethernet" | "eth" => Ok(LinkLayer::Ethernet),
        "atm" | "adsl" => Ok(LinkLayer::Atm),
        _ => Err(illegal("linklayer", i, None)),
    }
}

/// The HZ tc assumes when sizing default bursts: 1e9 on high-resolution-timer kernels (read
/// from /proc/net/psched), overridable with the `HZ` environment variable as in tc.
pub fn tc_hz() -> u64 {
    std::env::var("HZ").ok().and_then(|v| v.parse().ok()).filter(|&h| h > 0).unwrap_or(1_000_000_000)
}

/// Gives the filter parsers access to the cursor helpers.
pub mod helpers {
    pub use super::{get_u32, illegal, matches, rate_arg, size_arg, what_is, Cur};
}
