//! matchall: every packet, to one class and/or actions. iproute2's f_matchall.c, the kernel's
//! cls_matchall.c (one filter per classifier instance).

use super::filter_common::*;
use super::{DecodeError, FilterKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{what_is, Cur};
use crate::json::J;
use crate::model::{FilterNode, Handle};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Actions;
use sluice_core::filter::matchall::MatchallConfig;
use sluice_core::filter::FilterConfig;
use std::fmt::Write;

const CLASSID: u16 = 1;
const ACT: u16 = 2;
const FLAGS: u16 = 3;
const SKIP_HW: u32 = 1;
const PCNT: u16 = 4;
const PAD: u16 = 5;

/// matchall's options (the name is older than the kind's folder).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimpleResult {
    /// Result class.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub classid: Option<Handle>,
    /// `skip_hw`: never offloaded (printed back as tc does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_hw: bool,
}

/// The matchall kind.
pub struct Matchall;

impl FilterKind for Matchall {
    const NAME: &'static str = "matchall";
    type Opts = SimpleResult;
    const NL: FilterNl = FilterNl {
        classid: Some(CLASSID),
        police: None,
        act: Some(ACT),
        compared: Some(&[CLASSID]),
        dump_only: &[PCNT, PAD],
        flags: Some(FLAGS),
        refs: &[],
        // One filter per instance: the kernel's `change` finds its head taken.
        no_change: true,
        kept: &[],
        remake: &[],
        tables: None,
    };

    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<SimpleResult>, TcError> {
        let h = plain_handle(handle)?;
        let mut o = SimpleResult::default();
        while let Some((at, w)) = cur.next_word() {
            match w {
                "classid" | "flowid" => o.classid = classid_arg(cur)?,
                "action" => cx.action(cur)?,
                "skip_hw" => o.skip_hw = true,
                "skip_sw" => {}
                _ => return Err(what_is(w, at, "Usage: ... matchall [skip_sw | skip_hw]\n                 [ action ACTION_SPEC ] [ classid CLASSID ]")),
            }
        }
        Ok(FilterParsed::new(o, h))
    }

    fn args(o: &SimpleResult, f: &FilterNode) -> String {
        let mut s = format!(" handle {:#x} matchall", f.handle);
        if o.skip_hw {
            s.push_str(" skip_hw");
        }
        if let Some(c) = o.classid {
            let _ = write!(s, " classid {}", classid_str(c));
        }
        s
    }

    fn show(o: &SimpleResult, f: &FilterNode, _pretty: bool) -> String {
        let mut s = format!("handle {:#x} ", f.handle);
        if let Some(c) = o.classid {
            let _ = write!(s, "flowid {} ", classid_str(c));
        }
        if o.skip_hw {
            s.push_str("\n  skip_hw");
        }
        s.push_str("\n  not_in_hw");
        s
    }

    fn json(o: &SimpleResult, f: &FilterNode, _pretty: bool) -> J {
        let mut j = J::obj();
        j.put("handle", f.handle);
        if let Some(c) = o.classid {
            j.put("flowid", classid_str(c));
        }
        if o.skip_hw {
            j.put("skip_hw", true);
        }
        j.put("not_in_hw", true);
        j
    }

    fn classid(o: &SimpleResult) -> Option<Handle> {
        o.classid
    }

    fn create(o: SimpleResult, _cx: &FilterChange<'_>, tp_exists: bool) -> Result<SimpleResult, TcError> {
        // One filter per instance: the kernel's `change` finds its head taken.
        if tp_exists {
            return Err(TcError::errno("File exists"));
        }
        Ok(o)
    }

    fn encode(
        o: &SimpleResult,
        f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable> {
        if o.classid.is_none() && f.actions.is_empty() && !o.skip_hw {
            return Ok(());
        }
        out.begin_nest(TCA_OPTIONS);
        if let Some(c) = o.classid {
            out.put_u32(CLASSID, kernel_classid(c));
        }
        // matchall has no TCA_MATCHALL_POLICE: its `police` keyword is tc's `action police`.
        (cx.actions)(out, ACT, None)?;
        if o.skip_hw {
            out.put_u32(FLAGS, SKIP_HW);
        }
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<SimpleResult, DecodeError> {
        let Some(p) = options else { return Ok(SimpleResult::default()) };
        let u = |ty| nlattr::find(p, ty).and_then(nlattr::u32_of);
        Ok(SimpleResult {
            classid: u(CLASSID).map(model_classid),
            skip_hw: u(FLAGS).is_some_and(|f| f & SKIP_HW != 0),
        })
    }

    fn build(o: &SimpleResult, _f: &FilterNode, acts: Actions) -> Result<Option<FilterConfig>, BuildError> {
        Ok(Some(FilterConfig::Matchall(MatchallConfig { classid: o.classid, actions: acts })))
    }

    fn label(_o: &SimpleResult, _f: &FilterNode) -> String {
        "matchall".into()
    }
}
