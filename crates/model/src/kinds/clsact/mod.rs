//! clsact: the ingress and egress filter hooks of a device (blocks `ffff:fff2` and
//! `ffff:fff3`). No options. tc's `q_clsact.c`, the kernel's `sch_ingress.c`.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode, H_INGRESS, H_MIN_EGRESS, H_MIN_INGRESS};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::{Handle, Qdisc};

/// clsact's options: none (state files write `{"kind":"clsact"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClsactOpts {}

/// The kind.
pub struct Clsact;

/// ingress and clsact go in the ingress slot (`ffff:fff1`) and nowhere else.
pub(super) fn ingress_slot_only(parent: Handle) -> Result<(), TcError> {
    if parent != H_INGRESS {
        return Err(TcError::errno("Invalid argument"));
    }
    Ok(())
}

impl QdiscKind for Clsact {
    const NAME: &'static str = "clsact";
    const INGRESS: bool = true;
    type Opts = ClsactOpts;

    /// `clsact_parse_opt` takes nothing.
    fn parse(cur: &mut Cur) -> Result<ClsactOpts, TcError> {
        if let Some((at, w)) = cur.next_word() {
            return Err(what_is(w, at, "Usage: ... clsact"));
        }
        Ok(ClsactOpts {})
    }

    fn args(_o: &ClsactOpts) -> String {
        String::new()
    }

    fn show(_o: &ClsactOpts, _dev: &Device, _d: bool) -> String {
        String::new()
    }

    fn json(_o: &ClsactOpts, _dev: &Device, _d: bool) -> J {
        J::obj()
    }

    fn check_parent(_dev: &Device, parent: Handle) -> Result<(), TcError> {
        ingress_slot_only(parent)
    }

    /// tc sends the kind alone (at `ffff:fff1`, handle `ffff:`).
    fn encode(_o: &ClsactOpts, _out: &mut Attrs) -> Result<(), Unencodable> {
        Ok(())
    }

    fn decode(_options: Option<&[u8]>) -> Result<ClsactOpts, DecodeError> {
        Ok(ClsactOpts {})
    }

    /// `clsact_tcf_block`: its two hooks' blocks; none for class 0.
    fn filter_block(
        _o: &ClsactOpts,
        _dev: &Device,
        _q: &QdiscNode,
        parent: Handle,
    ) -> Result<Handle, TcError> {
        match parent.minor() {
            0xFFF2 => Ok(H_MIN_INGRESS),
            0xFFF3 => Ok(H_MIN_EGRESS),
            0 => Err(TcError::errno("Invalid argument")),
            _ => Err(TcError::kernel("Specified class doesn't exist")),
        }
    }

    fn build(_o: &ClsactOpts, _q: &QdiscNode, _cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Err(BuildError::Unsupported("an ingress qdisc as the egress root".into()))
    }
}
