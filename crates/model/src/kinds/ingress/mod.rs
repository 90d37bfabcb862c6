//! ingress: the hook for filters on what a device receives (one block, `ffff:`). No options.
//! tc's `q_ingress.c`, the kernel's `sch_ingress.c`.

use super::{BuildCx, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::{what_is, Cur};
use crate::json::J;
use crate::model::{Device, QdiscNode, H_MIN_INGRESS};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::{Handle, Qdisc};

/// ingress's options: none (state files write `{"kind":"ingress"}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngressOpts {}

/// The kind.
pub struct Ingress;

impl QdiscKind for Ingress {
    const NAME: &'static str = "ingress";
    const INGRESS: bool = true;
    type Opts = IngressOpts;

    /// `ingress_parse_opt` skips a `handle X`; nothing else.
    fn parse(cur: &mut Cur) -> Result<IngressOpts, TcError> {
        while let Some((at, w)) = cur.next_word() {
            if w == "handle" {
                cur.value()?;
            } else {
                return Err(what_is(w, at, "Usage: ... ingress"));
            }
        }
        Ok(IngressOpts {})
    }

    fn args(_o: &IngressOpts) -> String {
        String::new()
    }

    /// `ingress_print_opt`'s dashes.
    fn show(_o: &IngressOpts, _dev: &Device, _d: bool) -> String {
        "---------------- ".into()
    }

    /// The dashes go to the terminal only.
    fn json(_o: &IngressOpts, _dev: &Device, _d: bool) -> J {
        J::obj()
    }

    fn check_parent(_dev: &Device, parent: Handle) -> Result<(), TcError> {
        super::clsact::ingress_slot_only(parent)
    }

    /// tc sends the kind alone (at `ffff:fff1`, handle `ffff:`).
    fn encode(_o: &IngressOpts, _out: &mut Attrs) -> Result<(), Unencodable> {
        Ok(())
    }

    fn decode(_options: Option<&[u8]>) -> Result<IngressOpts, DecodeError> {
        Ok(IngressOpts {})
    }

    /// `ingress_find` finds every class (which have no operations).
    fn has_class(_o: &IngressOpts, _dev: &Device, _q: &QdiscNode, _classid: Handle) -> bool {
        true
    }

    /// `ingress_tcf_block` accepts any minor: its one block holds the filters.
    fn filter_block(
        _o: &IngressOpts,
        _dev: &Device,
        _q: &QdiscNode,
        _parent: Handle,
    ) -> Result<Handle, TcError> {
        Ok(H_MIN_INGRESS)
    }

    fn build(_o: &IngressOpts, _q: &QdiscNode, _cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Err(BuildError::Unsupported("an ingress qdisc as the egress root".into()))
    }
}
