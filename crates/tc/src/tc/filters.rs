//! A filter's kind-specific words go to its kind ([`crate::model::FilterOpts::parse_kind`], the
//! filter registry); what is generic to every kind, its `action` list and its own `police`
//! keyword, is parsed here by [`super::actions`].

use super::actions::{ActionSpec, Ctx};
use super::args::FilterSpec;
use super::error::TcError;
use crate::model::*;
use sluice_model::grammar::Cur;
use sluice_model::kinds::filter_common::FilterParseCx;

/// The actions a filter command carries, as its kind's parser meets them.
#[derive(Default)]
struct Actions(Vec<ActionSpec>);

impl FilterParseCx for Actions {
    fn action(&mut self, cur: &mut Cur) -> Result<(), TcError> {
        self.0.extend(super::actions::parse_action_list(cur, Ctx::Filter)?);
        Ok(())
    }

    fn police(&mut self, cur: &mut Cur) -> Result<(), TcError> {
        let p = super::actions::parse_police_keyword(cur, Ctx::Filter)?;
        self.0.push(ActionSpec { action: Action::Police(p), cookie: None, bare: false, compat: true });
        Ok(())
    }
}

/// The words after the filter kind `kind` (`None`: no such kind).
pub(crate) fn parse_filter(
    kind: &str,
    cur: &mut Cur,
    handle: Option<(usize, &str)>,
) -> Option<Result<FilterSpec, TcError>> {
    let mut cx = Actions::default();
    let r = FilterOpts::parse_kind(kind, cur, handle, &mut cx)?;
    Some(r.map(|p| FilterSpec {
        opts: p.opts,
        handle: p.handle,
        u32_htid: p.table,
        actions: cx.0,
        given: p.given,
    }))
}
