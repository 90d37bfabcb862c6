//! Handles: `major:minor` identifiers of qdiscs and classes, printed and parsed in hexadecimal.
//!
//! A Sluice handle has a 16-bit major and a **32-bit** minor, so one qdisc can hold up to
//! 2³² − 1 classes. The kernel's (and tc's) handle is 32 bits, `major << 16 | minor`:
//! [`Handle::from_tc`] and [`Handle::to_tc`] convert at that boundary (netlink, `skb->priority`,
//! `fw` marks), and [`Handle::parse`] keeps tc's 16-bit grammar. Native forms (the TOML model, the
//! structured scenario form, benchmarks) use [`Handle::parse_wide`].

use std::fmt;

/// A qdisc or class handle. Qdiscs are `major:0`, classes `major:minor`.
///
/// Stored as `major << 32 | minor` in a `u64`; ordered by major, then minor.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Handle(u64);

/// A handle string that is not `major:minor` in hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid handle \"{0}\": expected MAJOR:MINOR in hexadecimal (e.g. 1:10), MAJOR: or root")]
pub struct HandleError(pub String);

impl Handle {
    /// "No handle" (`TC_H_UNSPEC`).
    pub const UNSPEC: Handle = Handle::from_tc(0);
    /// The root (`TC_H_ROOT`, `ffff:ffff`).
    pub const ROOT: Handle = Handle::from_tc(0xFFFF_FFFF);
    /// The ingress pseudo-parent (`TC_H_INGRESS`, `ffff:fff1`).
    pub const INGRESS: Handle = Handle::from_tc(0xFFFF_FFF1);
    /// The largest minor tc's 32-bit handle can carry.
    pub const TC_MAX_MINOR: u32 = 0xFFFF;

    /// Builds `major:minor`.
    pub const fn new(major: u16, minor: u32) -> Handle {
        Handle(((major as u64) << 32) | minor as u64)
    }
    /// A kernel / tc 32-bit handle (`major << 16 | minor`).
    pub const fn from_tc(h: u32) -> Handle {
        Handle::new((h >> 16) as u16, h & 0xFFFF)
    }
    /// The kernel / tc 32-bit handle, or `None` when the minor does not fit in 16 bits.
    pub const fn to_tc(self) -> Option<u32> {
        if self.minor() > Handle::TC_MAX_MINOR {
            None
        } else {
            Some(((self.major() as u32) << 16) | self.minor())
        }
    }
    /// The 48 significant bits, `major << 32 | minor` (a stable key for maps and sorting).
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// The major number.
    pub const fn major(self) -> u16 {
        (self.0 >> 32) as u16
    }
    /// The minor number.
    pub const fn minor(self) -> u32 {
        self.0 as u32
    }
    /// True for [`Handle::UNSPEC`].
    pub const fn is_unspec(self) -> bool {
        self.0 == 0
    }
    /// The qdisc handle `major:0` this handle belongs to.
    pub const fn qdisc(self) -> Handle {
        Handle::new(self.major(), 0)
    }

    /// Parses tc's grammar: `1:10`, `1:`, `:5`, `root`, `none`, `ingress`, or a bare 32-bit
    /// handle (`10000` is `1:`), all in hex with 16-bit majors and minors, as tc does.
    pub fn parse(s: &str) -> Result<Handle, HandleError> {
        Handle::parse_with(s, Handle::TC_MAX_MINOR)
    }

    /// Parses a native handle: like [`Handle::parse`], but the minor may be up to `ffffffff`
    /// (hex, as printed: `1:f4240` is minor 1 000 000).
    pub fn parse_wide(s: &str) -> Result<Handle, HandleError> {
        Handle::parse_with(s, u32::MAX)
    }

    fn parse_with(s: &str, max_minor: u32) -> Result<Handle, HandleError> {
        let err = || HandleError(s.to_string());
        match s {
            "root" => return Ok(Handle::ROOT),
            "none" => return Ok(Handle::UNSPEC),
            "ingress" => return Ok(Handle::INGRESS),
            _ => {}
        }
        let hex = |t: &str, max: u32| -> Result<u32, HandleError> {
            if t.is_empty() {
                return Ok(0);
            }
            let t = t.strip_prefix("0x").unwrap_or(t);
            u32::from_str_radix(t, 16).ok().filter(|&v| v <= max).ok_or_else(err)
        };
        match s.split_once(':') {
            Some((maj, min)) => Ok(Handle::new(hex(maj, 0xFFFF)? as u16, hex(min, max_minor)?)),
            None => {
                // A bare number is a whole 32-bit tc handle in hex (tc accepts "10000" for 1:0).
                let t = s.strip_prefix("0x").unwrap_or(s);
                u32::from_str_radix(t, 16).map(Handle::from_tc).map_err(|_| err())
            }
        }
    }
}

impl fmt::Display for Handle {
    /// Prints like tc: `1:10`, `1:` for a qdisc, `root`, `none`; wide minors in hex as well.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Handle::ROOT => f.write_str("root"),
            Handle::UNSPEC => f.write_str("none"),
            h if h.minor() == 0 => write!(f, "{:x}:", h.major()),
            h => write!(f, "{:x}:{:x}", h.major(), h.minor()),
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_hex() {
        assert_eq!(Handle::parse("1:10").unwrap(), Handle::new(1, 0x10));
        assert_eq!(Handle::parse("ffff:").unwrap(), Handle::new(0xffff, 0));
        assert_eq!(Handle::parse("root").unwrap(), Handle::ROOT);
        assert_eq!(Handle::parse("10000").unwrap(), Handle::new(1, 0));
        assert_eq!(Handle::new(1, 0x10).to_string(), "1:10");
        assert_eq!(Handle::new(0x10, 0).to_string(), "10:");
        assert!(Handle::parse("1:g").is_err());
        assert!(Handle::parse("10000:").is_err());
        assert!(Handle::parse("1:10000").is_err());
    }

    #[test]
    fn wide_minors_parse_natively_only() {
        let h = Handle::parse_wide("1:f4240").unwrap();
        assert_eq!((h.major(), h.minor()), (1, 1_000_000));
        assert_eq!(h.to_string(), "1:f4240");
        assert_eq!(Handle::parse_wide(&h.to_string()).unwrap(), h);
        assert_eq!(Handle::parse_wide("2:ffffffff").unwrap().minor(), u32::MAX);
        assert!(Handle::parse_wide("2:100000000").is_err());
        assert!(Handle::parse_wide("10000:1").is_err());
        assert!(Handle::parse("1:f4240").is_err());
    }

    #[test]
    fn tc_conversion_keeps_the_special_handles() {
        assert_eq!(Handle::ROOT.to_tc(), Some(0xFFFF_FFFF));
        assert_eq!(Handle::INGRESS.to_tc(), Some(0xFFFF_FFF1));
        assert_eq!(Handle::INGRESS, Handle::new(0xffff, 0xfff1));
        assert_eq!(Handle::from_tc(0x0001_0010), Handle::new(1, 0x10));
        assert_eq!(Handle::new(1, 0x10).to_tc(), Some(0x0001_0010));
        assert_eq!(Handle::new(1, 0x1_0000).to_tc(), None);
        assert!(Handle::from_tc(0).is_unspec());
        assert_eq!(Handle::new(3, 7).qdisc(), Handle::new(3, 0));
        assert!(Handle::new(1, u32::MAX) < Handle::new(2, 0));
        assert_eq!(Handle::new(1, 5).raw(), 0x1_0000_0005);
    }
}
