//! Netlink encoding of actions (`TCA_ACT_*`): the same nest `tc actions add` sends in
//! `TCA_ACT_TAB` and a filter sends in its `TCA_*_ACT`, byte for byte as iproute2 6.1's tc builds
//! it (m_action.c `parse_action`, m_gact.c, m_police.c, m_skbedit.c, m_mirred.c); checked
//! against tc's own requests in `tests/actions_netlink.rs`.

use crate::netlink::Msg;
use sluice_model::kinds::{ActEncodeCx, Unencodable};
use sluice_model::nlattr::Attrs;
use sluice_tc::model::{Action, ActionEntry};

/// `TCA_ACT_TAB` (the nest of `RTM_NEWACTION`).
pub const TCA_ACT_TAB: u16 = 1;
const TCA_ACT_KIND: u16 = 1;
const TCA_ACT_OPTIONS: u16 = 2;
const TCA_ACT_COOKIE: u16 = 6;
const NLA_F_NESTED: u16 = 0x8000;

/// What the encoder cannot send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionEncodeError {
    /// An option of a registry kind that cannot be sent.
    #[error(transparent)]
    Kind(#[from] Unencodable),
}

/// Appends the action list as the nest `nest_type` (`TCA_ACT_TAB`, or a filter's `TCA_*_ACT`):
/// one nest per action, numbered from 1, each with its kind, options and cookie. `ifindex` names
/// mirred's target device.
pub fn encode_actions(
    m: &mut Msg,
    nest_type: u16,
    actions: &[(&Action, Option<&str>)],
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<(), ActionEncodeError> {
    encode_action_list(m.attrs(), nest_type, actions, ifindex)
}

/// [`encode_actions`] into an attribute writer (a filter kind's options).
pub fn encode_action_list(
    out: &mut Attrs,
    nest_type: u16,
    actions: &[(&Action, Option<&str>)],
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<(), ActionEncodeError> {
    out.begin_nest(nest_type);
    for (i, (a, cookie)) in actions.iter().enumerate() {
        out.begin_nest(i as u16 + 1);
        out.put_str(TCA_ACT_KIND, a.kind());
        out.begin_nest(TCA_ACT_OPTIONS | NLA_F_NESTED);
        options(out, a, ifindex)?;
        out.end_nest();
        if let Some(c) = cookie {
            let bytes: Vec<u8> =
                (0..c.len() / 2).filter_map(|j| u8::from_str_radix(&c[2 * j..2 * j + 2], 16).ok()).collect();
            out.put(TCA_ACT_COOKIE, &bytes);
        }
        out.end_nest();
    }
    out.end_nest();
    Ok(())
}

/// [`encode_actions`] for entries of the namespace's action table (with their cookies).
pub fn encode_entries(
    m: &mut Msg,
    nest_type: u16,
    entries: &[&ActionEntry],
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<(), ActionEncodeError> {
    let list: Vec<(&Action, Option<&str>)> =
        entries.iter().map(|e| (&e.action, e.cookie.as_deref())).collect();
    encode_actions(m, nest_type, &list, ifindex)
}

/// A filter's own `police` keyword (`TCA_*_POLICE`, tc's `parse_police`): the policer's options
/// in one nest, without the action list's kind and numbering.
pub fn encode_police_keyword(out: &mut Attrs, nest_type: u16, a: &Action) -> Result<(), ActionEncodeError> {
    out.begin_nest(nest_type);
    options(out, a, &|_| None)?;
    out.end_nest();
    Ok(())
}

fn options(
    out: &mut Attrs,
    a: &Action,
    ifindex: &dyn Fn(&str) -> Option<u32>,
) -> Result<(), ActionEncodeError> {
    a.encode(out, &ActEncodeCx { ifindex }).expect("every action kind is in the registry")?;
    Ok(())
}
