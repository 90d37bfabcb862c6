//! Serde helpers so that the JSON/TOML forms read like tc: handles as `"1:10"`, and rates or
//! sizes accepted either as numbers (bit/s, bytes) or as tc strings (`"100mbit"`, `"15k"`).
//! Handles in these native forms take 32-bit minors (`"1:f4240"`); a number is a raw 32-bit tc
//! handle (`major << 16 | minor`).

use serde::{de, Deserialize, Deserializer, Serializer};
use sluice_core::Handle;

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Num(u64),
    Str(String),
}

fn handle_from_str<E: de::Error>(s: &str) -> Result<Handle, E> {
    match s {
        "ingress" => Ok(crate::model::H_INGRESS),
        _ => crate::grammar::get_classid(s, u32::MAX).ok_or_else(|| {
            E::custom(format!(
                "invalid handle \"{s}\": expected MAJ:MIN in hex (MIN up to ffffffff), MAJ:, root or ingress"
            ))
        }),
    }
}

/// Handles.
pub mod handle {
    use super::*;
    /// As tc prints it.
    pub fn serialize<S: Serializer>(h: &Handle, s: S) -> Result<S::Ok, S::Error> {
        let t =
            if *h == crate::model::H_INGRESS { "ingress".to_string() } else { crate::print::classid_str(*h) };
        s.serialize_str(&t)
    }
    /// From `"1:10"` or a raw 32-bit tc handle.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Handle, D::Error> {
        match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => u32::try_from(n).map(Handle::from_tc).map_err(de::Error::custom),
            NumOrStr::Str(s) => handle_from_str(&s),
        }
    }
}

/// Optional handles.
pub mod opt_handle {
    use super::*;
    /// As tc prints it.
    pub fn serialize<S: Serializer>(h: &Option<Handle>, s: S) -> Result<S::Ok, S::Error> {
        match h {
            Some(h) => super::handle::serialize(h, s),
            None => s.serialize_none(),
        }
    }
    /// From `"1:10"` or a raw number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Handle>, D::Error> {
        super::handle::deserialize(d).map(Some)
    }
}

/// Rates in bit/s: a number, or a tc rate string.
pub mod rate {
    use super::*;
    /// As a number of bit/s (as `"Nbit"` above `i64::MAX`, which TOML's integers cannot hold).
    pub fn serialize<S: Serializer>(r: &u64, s: S) -> Result<S::Ok, S::Error> {
        if *r > i64::MAX as u64 {
            return s.serialize_str(&format!("{r}bit"));
        }
        s.serialize_u64(*r)
    }
    /// From a number or `"100mbit"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => Ok(n),
            NumOrStr::Str(s) => {
                sluice_core::units::parse_rate(&s).map(|r| r.bps()).map_err(de::Error::custom)
            }
        }
    }
}

/// Optional rates.
pub mod opt_rate {
    use super::*;
    /// As a number of bit/s.
    pub fn serialize<S: Serializer>(r: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match r {
            Some(r) => super::rate::serialize(r, s),
            None => s.serialize_none(),
        }
    }
    /// From a number or `"100mbit"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        super::rate::deserialize(d).map(Some)
    }
}

/// Sizes in bytes: a number, or a tc size string.
pub mod size {
    use super::*;
    /// As a number of bytes.
    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(*v)
    }
    /// From a number or `"15k"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let v = match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => n,
            NumOrStr::Str(s) => sluice_core::units::parse_size(&s).map_err(de::Error::custom)?,
        };
        u32::try_from(v).map_err(de::Error::custom)
    }
}

/// HTB's `default` minor, which tc reads in hex: written `"0x10"`; read from a number or hex text.
pub mod hex_minor {
    use super::*;
    /// As `"0x10"`.
    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }
    /// From a number or hex text (`"10"` and `"0x10"` are both 16, as in tc).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        match NumOrStr::deserialize(d)? {
            NumOrStr::Num(n) => u32::try_from(n).map_err(de::Error::custom),
            NumOrStr::Str(s) => u32::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| {
                de::Error::custom(format!("invalid default class \"{s}\": a hex minor number like \"0x10\""))
            }),
        }
    }
}
