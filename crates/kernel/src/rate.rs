//! The rate API for adaptive shapers: change one HTB class's rate in place with one netlink
//! message (`sluice apply --set CLASS rate R`).
//!
//! [`RateSetter`] keeps one rtnetlink socket and, per class, what the kernel reported the first
//! time (its parent, prio, overhead, mpu): after that first read every [`RateSetter::set`] is one
//! `RTM_NEWTCLASS` (`NLM_F_CREATE|NLM_F_REPLACE` on the existing class, i.e. `htb_change_class`)
//! and one ack. The request is the one `sluice apply` builds for the model
//! ([`crate::kernel::class_msg`]), so it carries what `tc class change` would carry.
//!
//! Defaults follow tc's `class change ... htb rate R`: the ceil becomes the rate unless given, the
//! quantum goes back to the kernel's rate/r2q; the buckets follow Sluice's burst rule
//! ([`sluice_tc::burst::kernel_burst`]) for the new rate and ceil unless given.

use crate::kernel::{class_msg, ResolvedClass, HTB_DEFAULT_MTU};
use crate::netlink::{self, flags, rtm, tca, Msg, Netlink, TcMsg, TC_H_ROOT};
use crate::Error;
use sluice_core::Rate;
use sluice_tc::burst::{kernel_burst, BurstPolicy};
use sluice_tc::model::{HtbClassOpts, LinkLayer};
use std::collections::HashMap;

/// One change of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateChange {
    /// New rate.
    pub rate: Rate,
    /// New ceil (the rate when `None`, as tc does).
    pub ceil: Option<Rate>,
    /// Rate bucket bytes (Sluice's rule when `None`).
    pub burst: Option<u64>,
    /// Ceil bucket bytes (Sluice's rule when `None`).
    pub cburst: Option<u64>,
}

impl RateChange {
    /// Parses tc-style words: `rate R [ceil C] [burst B] [cburst B]`.
    pub fn parse(words: &[String]) -> Result<RateChange, Error> {
        let mut it = words.iter();
        let (mut rate, mut ceil, mut burst, mut cburst) = (None, None, None, None);
        while let Some(w) = it.next() {
            let v = it.next().ok_or_else(|| Error::Config(format!("\"{w}\" needs a value")))?;
            let bad = |what: &str| Error::Config(format!("Illegal \"{what}\" ({v})"));
            match w.as_str() {
                "rate" => rate = Some(sluice_core::units::parse_rate(v).map_err(|_| bad("rate"))?),
                "ceil" => ceil = Some(sluice_core::units::parse_rate(v).map_err(|_| bad("ceil"))?),
                "burst" | "buffer" | "maxburst" => {
                    burst = Some(sluice_core::units::parse_size(v).map_err(|_| bad("buffer"))?)
                }
                "cburst" | "cbuffer" | "cmaxburst" => {
                    cburst = Some(sluice_core::units::parse_size(v).map_err(|_| bad("cbuffer"))?)
                }
                other => {
                    return Err(Error::Config(format!(
                        "What is \"{other}\"? --set takes rate R [ceil C] [burst B] [cburst B]"
                    )))
                }
            }
        }
        let rate = rate.ok_or_else(|| Error::Config("--set needs \"rate R\"".into()))?;
        if rate.bytes_per_sec() == 0 || ceil.is_some_and(|c| c.bytes_per_sec() == 0) {
            return Err(Error::Config("Illegal \"rate\" (0)".into()));
        }
        Ok(RateChange { rate, ceil, burst, cburst })
    }
}

/// What the kernel reported for a class, kept to build its change.
#[derive(Debug, Clone, Copy)]
struct Known {
    parent: u32,
    prio: u32,
    overhead: i32,
    mpu: u32,
}

/// Changes HTB classes of one device in place (calling thread's namespace).
pub struct RateSetter {
    nl: Netlink,
    ifindex: i32,
    known: HashMap<u32, Known>,
}

impl RateSetter {
    /// Opens a socket for `dev`.
    pub fn open(dev: &str) -> Result<RateSetter, Error> {
        let mut nl = Netlink::open()?;
        let ifindex = nl.ifindex(dev)?;
        Ok(RateSetter { nl, ifindex, known: HashMap::new() })
    }

    /// What the kernel holds for class `classid`: read with one dump of the device's classes the
    /// first time an unknown class is set, then kept.
    fn known(&mut self, classid: u32) -> Result<Known, Error> {
        if let Some(k) = self.known.get(&classid) {
            return Ok(*k);
        }
        let mut m = Msg::tc(
            rtm::GETTCLASS,
            flags::REQUEST | flags::DUMP,
            TcMsg { ifindex: self.ifindex, ..TcMsg::default() },
        );
        for o in
            self.nl.dump(&mut m)?.iter().filter(|o| o.tc.ifindex == self.ifindex && o.kind_str() == "htb")
        {
            let p = netlink::find(o.options(), 1).unwrap_or(&[]);
            let u16_at = |off: usize| p.get(off..off + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]) as u32);
            let h = o.tc.handle;
            self.known.insert(
                h,
                Known {
                    parent: if o.tc.parent == TC_H_ROOT { h & 0xFFFF_0000 } else { o.tc.parent },
                    prio: netlink::u32_at(p, 40).unwrap_or(0),
                    overhead: u16_at(2).unwrap_or(0) as i32,
                    mpu: u16_at(6).unwrap_or(0),
                },
            );
        }
        self.known.get(&classid).copied().ok_or_else(|| {
            Error::Config(format!(
                "no HTB class {} on this device",
                sluice_model::print::tc_handle_str(classid)
            ))
        })
    }

    /// Changes class `classid` in place: one request and its ack (plus one read the first time
    /// a class is set).
    pub fn set(&mut self, classid: u32, change: &RateChange) -> Result<(), Error> {
        let k = self.known(classid)?;
        let ceil = change.ceil.unwrap_or(change.rate);
        let opts = HtbClassOpts {
            rate: change.rate.bps(),
            ceil: ceil.bps(),
            burst: 0,
            cburst: 0,
            burst_auto: false,
            cburst_auto: false,
            prio: k.prio,
            quantum: None,
            mtu: HTB_DEFAULT_MTU,
            mpu: k.mpu,
            overhead: k.overhead,
            linklayer: LinkLayer::Ethernet,
        };
        let c = ResolvedClass {
            classid,
            parent: k.parent,
            htb: &opts,
            burst: change
                .burst
                .unwrap_or_else(|| kernel_burst(change.rate, HTB_DEFAULT_MTU, BurstPolicy::Sluice)),
            cburst: change.cburst.unwrap_or_else(|| kernel_burst(ceil, HTB_DEFAULT_MTU, BurstPolicy::Sluice)),
        };
        let mut m = class_msg(self.ifindex, &c);
        debug_assert_eq!(netlink::find(&m.bytes()[36..], tca::KIND), Some(&b"htb\0"[..]));
        self.nl.request(&mut m)
    }
}

/// Parses a class id as tc writes it (`1:10`, hexadecimal) into the kernel's handle.
pub fn parse_classid(s: &str) -> Result<u32, Error> {
    let bad = || Error::Config(format!("Invalid class ID \"{s}\""));
    let (maj, min) = s.split_once(':').ok_or_else(bad)?;
    let maj = u32::from_str_radix(maj, 16).map_err(|_| bad())?;
    let min = if min.is_empty() { 0 } else { u32::from_str_radix(min, 16).map_err(|_| bad())? };
    if maj > 0xFFFF || min > 0xFFFF || min == 0 {
        return Err(bad());
    }
    Ok(maj << 16 | min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_class_ids_parse_like_tc() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let c = RateChange::parse(&w("rate 5mbit ceil 10mbit burst 15k")).unwrap();
        assert_eq!(c.rate, Rate::from_bps(5_000_000));
        assert_eq!(c.ceil, Some(Rate::from_bps(10_000_000)));
        assert_eq!(c.burst, Some(15 * 1024));
        assert!(RateChange::parse(&w("ceil 5mbit")).is_err());
        assert!(RateChange::parse(&w("rate")).is_err());
        assert!(RateChange::parse(&w("rate fast")).unwrap_err().to_string().contains("Illegal \"rate\""));
        assert!(RateChange::parse(&w("rate 1mbit colour red")).is_err());
        assert_eq!(parse_classid("1:10").unwrap(), 0x1_0010);
        assert!(
            parse_classid("1:").is_err() && parse_classid("10000:1").is_err() && parse_classid("x").is_err()
        );
    }
}
