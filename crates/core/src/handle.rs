//! tc handles: 32-bit `major:minor` identifiers, printed and parsed in hexadecimal.

use std::fmt;

/// A qdisc or class handle. Qdiscs are `major:0`, classes `major:minor`.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Handle(pub u32);

/// A handle string that is not `major:minor` in hex.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid handle \"{0}\": expected MAJOR:MINOR in hexadecimal (e.g. 1:10), MAJOR: or root")]
pub struct HandleError(pub String);

impl Handle {
    /// "No handle" (`TC_H_UNSPEC`).
    pub const UNSPEC: Handle = Handle(0);
    /// The root (`TC_H_ROOT`).
    pub const ROOT: Handle = Handle(0xFFFF_FFFF);
    /// The ingress pseudo-parent (`TC_H_INGRESS`).
    pub const INGRESS: Handle = Handle(0xFFFF_FFF1);

    /// Builds `major:minor`.
    pub const fn new(major: u16, minor: u16) -> Handle {
        Handle(((major as u32) << 16) | minor as u32)
    }
    /// The major number.
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }
    /// The minor number.
    pub const fn minor(self) -> u16 {
        self.0 as u16
    }
    /// True for [`Handle::UNSPEC`].
    pub const fn is_unspec(self) -> bool {
        self.0 == 0
    }
    /// The qdisc handle `major:0` this handle belongs to.
    pub const fn qdisc(self) -> Handle {
        Handle(self.0 & 0xFFFF_0000)
    }

    /// Parses `1:10`, `1:`, `:5`, `root`, `none`, `ingress` (hex, as tc does).
    pub fn parse(s: &str) -> Result<Handle, HandleError> {
        let err = || HandleError(s.to_string());
        match s {
            "root" => return Ok(Handle::ROOT),
            "none" => return Ok(Handle::UNSPEC),
            "ingress" => return Ok(Handle::INGRESS),
            _ => {}
        }
        let hex = |t: &str| -> Result<u16, HandleError> {
            if t.is_empty() {
                return Ok(0);
            }
            let t = t.strip_prefix("0x").unwrap_or(t);
            u16::from_str_radix(t, 16).map_err(|_| err())
        };
        match s.split_once(':') {
            Some((maj, min)) => Ok(Handle::new(hex(maj)?, hex(min)?)),
            None => {
                // A bare number is a whole 32-bit handle in hex (tc accepts "10000" for 1:0).
                let t = s.strip_prefix("0x").unwrap_or(s);
                u32::from_str_radix(t, 16).map(Handle).map_err(|_| err())
            }
        }
    }
}

impl fmt::Display for Handle {
    /// Prints like tc: `1:10`, `1:` for a qdisc, `root`, `none`.
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
        assert_eq!(Handle::new(1, 0x10).to_string(), "1:10");
        assert_eq!(Handle::new(0x10, 0).to_string(), "10:");
        assert!(Handle::parse("1:g").is_err());
        assert!(Handle::parse("10000:").is_err());
    }
}
