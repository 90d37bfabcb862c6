//! fw: the class from the packet's firewall mark (the filter's handle, under a mask).
//! iproute2's f_fw.c, the kernel's cls_fw.c.

use super::filter_common::*;
use super::{DecodeError, FilterKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{get_u32, what_is, Cur};
use crate::json::J;
use crate::model::{FilterNode, Handle};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Actions;
use sluice_core::filter::fw::FwConfig;
use sluice_core::filter::FilterConfig;
use std::fmt::Write;

const CLASSID: u16 = 1;
const POLICE: u16 = 2;
const INDEV: u16 = 3;
const ACT: u16 = 4;
const MASK: u16 = 5;

/// fw options.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FwOpts {
    /// Result class.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub classid: Option<Handle>,
    /// Mark mask.
    pub mask: Option<u32>,
}

/// The fw kind.
pub struct Fw;

impl FilterKind for Fw {
    const NAME: &'static str = "fw";
    type Opts = FwOpts;
    const NL: FilterNl = FilterNl {
        classid: Some(CLASSID),
        police: Some(POLICE),
        act: Some(ACT),
        compared: Some(&[CLASSID, INDEV]),
        dump_only: &[],
        flags: None,
        refs: &[],
        no_change: false,
        kept: &[],
        // The mask is the classifier instance's (cls_fw's head).
        remake: &[(MASK, u32::MAX)],
        tables: None,
    };

    /// `handle MARK[/MASK] fw [classid C] [indev DEV] [action ...] [police ...]`.
    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<FwOpts>, TcError> {
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
        while let Some((at, w)) = cur.next_word() {
            match w {
                "classid" | "flowid" => o.classid = classid_arg(cur)?,
                "action" => cx.action(cur)?,
                "police" => cx.police(cur)?,
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
        Ok(FilterParsed::new(o, h))
    }

    fn args(o: &FwOpts, f: &FilterNode) -> String {
        let mut s = format!(" handle {:#x}", f.handle);
        if let Some(m) = o.mask {
            let _ = write!(s, "/{m:#x}");
        }
        s.push_str(" fw");
        if let Some(c) = o.classid {
            let _ = write!(s, " classid {}", classid_str(c));
        }
        s
    }

    fn show(o: &FwOpts, f: &FilterNode, _pretty: bool) -> String {
        let mut s = format!("handle {:#x}", f.handle);
        if let Some(m) = o.mask.filter(|&m| m != u32::MAX) {
            let _ = write!(s, "/{m:#x}");
        }
        s.push(' ');
        if let Some(c) = o.classid {
            let _ = write!(s, "classid {} ", classid_str(c));
        }
        s
    }

    /// f_fw.c prints its options with fprintf, in the middle of the JSON.
    fn json(o: &FwOpts, f: &FilterNode, pretty: bool) -> J {
        let mut j = J::obj();
        j.raw(Self::show(o, f, pretty));
        if !f.actions.is_empty() {
            j.raw("\n");
        }
        j
    }

    fn classid(o: &FwOpts) -> Option<Handle> {
        o.classid
    }

    fn check(o: &FwOpts, cx: &FilterChange<'_>) -> Result<(), TcError> {
        // Nothing after `fw`: iproute2 sends no options, and cls_fw refuses a handle without them.
        if cx.handle != 0 && o.classid.is_none() && cx.actions.is_empty() {
            return Err(TcError::errno("Invalid argument"));
        }
        Ok(())
    }

    fn new_handle(_cx: &FilterChange<'_>) -> Result<u32, TcError> {
        // The mark is the handle: cls_fw has none to give.
        Err(TcError::errno("Invalid argument"))
    }

    fn encode(
        o: &FwOpts,
        f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable> {
        // tc sends no options at all for a bare `handle H[/M] fw`.
        if o.classid.is_none() && f.actions.is_empty() {
            return Ok(());
        }
        out.begin_nest(TCA_OPTIONS);
        if let Some(mask) = o.mask {
            out.put_u32(MASK, mask);
        }
        if let Some(c) = o.classid {
            out.put_u32(CLASSID, kernel_classid(c));
        }
        (cx.actions)(out, ACT, Some(POLICE))?;
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<FwOpts, DecodeError> {
        let Some(p) = options else { return Ok(FwOpts::default()) };
        let u = |ty| nlattr::find(p, ty).and_then(nlattr::u32_of);
        Ok(FwOpts { classid: u(CLASSID).map(model_classid), mask: u(MASK) })
    }

    fn build(o: &FwOpts, _f: &FilterNode, acts: Actions) -> Result<Option<FilterConfig>, BuildError> {
        Ok(Some(FilterConfig::Fw(FwConfig { mask: o.mask, classid: o.classid, actions: acts, indev: None })))
    }

    fn differs(o: &FwOpts, k: &FwOpts) -> Vec<String> {
        match o.mask {
            Some(m) if k.mask != Some(m) => vec![format!("mask {:?} (model {:?})", k.mask, o.mask)],
            _ => Vec::new(),
        }
    }

    fn label(_o: &FwOpts, f: &FilterNode) -> String {
        format!("fw mark {:#x}", f.handle)
    }
}
