//! basic: an ematch tree (or nothing: every packet). iproute2's f_basic.c, the kernel's
//! cls_basic.c.

use super::filter_common::*;
use super::{DecodeError, FilterKind, Unencodable, TCA_OPTIONS};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{what_is, Cur};
use crate::json::J;
use crate::model::{Device, FilterNode, Handle};
use crate::nlattr::{self, Attrs};
use crate::print::classid_str;
use serde::{Deserialize, Serialize};
use sluice_core::filter::action::Actions;
use sluice_core::filter::{BasicConfig, FilterConfig};
use std::fmt::Write;

const CLASSID: u16 = 1;
const EMATCHES: u16 = 2;
const ACT: u16 = 3;
const POLICE: u16 = 4;
const PCNT: u16 = 5;
const PAD: u16 = 6;

/// basic options.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BasicOpts {
    /// Result class.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::serde_units::opt_handle")]
    pub classid: Option<Handle>,
    /// ematch tree text.
    pub ematch: Option<String>,
}

/// The basic kind.
pub struct Basic;

impl FilterKind for Basic {
    const NAME: &'static str = "basic";
    const POLICE_OWN_LINE: bool = true;
    type Opts = BasicOpts;
    const NL: FilterNl = FilterNl {
        classid: Some(CLASSID),
        police: Some(POLICE),
        act: Some(ACT),
        compared: Some(&[CLASSID, EMATCHES]),
        dump_only: &[PCNT, PAD],
        flags: None,
        refs: &[],
        no_change: false,
        kept: &[],
        remake: &[],
        tables: None,
    };

    fn parse(
        cur: &mut Cur,
        handle: Option<(usize, &str)>,
        cx: &mut dyn FilterParseCx,
    ) -> Result<FilterParsed<BasicOpts>, TcError> {
        let h = plain_handle(handle)?;
        let mut o = BasicOpts::default();
        while let Some((at, w)) = cur.next_word() {
            match w {
                "classid" | "flowid" => o.classid = classid_arg(cur)?,
                "match" => o.ematch = Some(parse_ematch(cur)?),
                "action" => cx.action(cur)?,
                "police" => cx.police(cur)?,
                _ => {
                    return Err(what_is(
                        w,
                        at,
                        "Usage: ... basic [ match EMATCH_TREE ] [ action ACTION_SPEC ] [ classid CLASSID ]",
                    ))
                }
            }
        }
        Ok(FilterParsed::new(o, h))
    }

    fn args(o: &BasicOpts, f: &FilterNode) -> String {
        let mut s = format!(" handle {:#x} basic", f.handle);
        if let Some(e) = &o.ematch {
            let _ = write!(s, " match {}", shell_word(e));
        }
        if let Some(c) = o.classid {
            let _ = write!(s, " classid {}", classid_str(c));
        }
        s
    }

    fn show(o: &BasicOpts, f: &FilterNode, _pretty: bool) -> String {
        let mut s = format!("handle {:#x} ", f.handle);
        if let Some(c) = o.classid {
            let _ = write!(s, "flowid {} ", classid_str(c));
        }
        if let Some(e) = &o.ematch {
            s.push_str(&super::ematch::show_text(e));
        }
        s
    }

    fn json(o: &BasicOpts, f: &FilterNode, _pretty: bool) -> J {
        let mut j = J::obj();
        j.put("handle", format!("{:x}", f.handle));
        if let Some(c) = o.classid {
            j.put("flowid", classid_str(c));
        }
        if let Some(e) = &o.ematch {
            // print_ematch writes its tree with fprintf.
            j.raw(format!("\n  {e}"));
        }
        j
    }

    fn classid(o: &BasicOpts) -> Option<Handle> {
        o.classid
    }

    /// cls_basic adds each element at the head of its list: newest first.
    fn dump<'a>(_dev: &'a Device, _first: &'a FilterNode, tp: Vec<&'a FilterNode>) -> Vec<&'a FilterNode> {
        tp.into_iter().rev().collect()
    }

    fn encode(
        o: &BasicOpts,
        f: &FilterNode,
        out: &mut Attrs,
        cx: &FilterEncodeCx<'_>,
    ) -> Result<(), Unencodable> {
        if o.classid.is_none() && f.actions.is_empty() && o.ematch.is_none() {
            return Ok(());
        }
        out.begin_nest(TCA_OPTIONS);
        if let Some(e) = &o.ematch {
            super::ematch::encode_text(out, EMATCHES, e).map_err(|why| Unencodable {
                kind: "basic",
                option: why,
                why: "not encoded".into(),
            })?;
        }
        if let Some(c) = o.classid {
            out.put_u32(CLASSID, kernel_classid(c));
        }
        (cx.actions)(out, ACT, Some(POLICE))?;
        out.end_nest();
        Ok(())
    }

    fn decode(options: Option<&[u8]>) -> Result<BasicOpts, DecodeError> {
        let Some(p) = options else { return Ok(BasicOpts::default()) };
        let ematch = match nlattr::find(p, EMATCHES) {
            Some(e) => Some(super::ematch::canonical(
                &super::ematch::decode(e).map_err(|w| DecodeError::new("basic", w))?,
            )),
            None => None,
        };
        Ok(BasicOpts {
            classid: nlattr::find(p, CLASSID).and_then(nlattr::u32_of).map(model_classid),
            ematch,
        })
    }

    /// The tree read back from the model's canonical text; meta ids the engine has no value for
    /// are refused.
    fn build(o: &BasicOpts, _f: &FilterNode, acts: Actions) -> Result<Option<FilterConfig>, BuildError> {
        let ematch = match &o.ematch {
            Some(t) => super::ematch::parse_text(t).map_err(BuildError::Unsupported)?,
            None => Vec::new(),
        };
        if let Some(id) = sluice_core::filter::basic::unsupported(&ematch) {
            return Err(BuildError::Unsupported(format!(
                "the basic filter's meta id {id} (no value in the model)"
            )));
        }
        Ok(Some(FilterConfig::Basic(BasicConfig { ematch, classid: o.classid, actions: acts })))
    }

    fn label(o: &BasicOpts, _f: &FilterNode) -> String {
        format!("basic {}", o.ematch.clone().unwrap_or_default())
    }
}

/// A word for a shell command line, quoted when it needs to be (export's `q`).
pub(crate) fn shell_word(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/,+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
