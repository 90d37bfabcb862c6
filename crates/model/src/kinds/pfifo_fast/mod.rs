//! pfifo_fast: the kernel's default qdisc, three FIFO bands in strict priority with the fixed
//! default priomap. tc has no options for it (`q_fifo.c` gives it no parser) and sends it by
//! kind alone; its dump is prio's struct, printed by prio's printer. The algorithm is
//! `sluice_core::prio::PfifoFast`.

use super::prio::{json_priomap, show_priomap, DEFAULT_PRIOMAP};
use super::{BuildCx, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::Cur;
use crate::json::J;
use crate::model::{Device, QdiscNode};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::prio::{PfifoFast as Core, PfifoFastConfig};
use sluice_core::Qdisc;

/// pfifo_fast has no options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfifoFastOpts {}

/// The kind.
pub struct PfifoFast;

/// `PFIFO_FAST_BANDS`.
const BANDS: u32 = 3;

impl QdiscKind for PfifoFast {
    const NAME: &'static str = "pfifo_fast";
    // Listed with the classful kinds before the registry (it can sit below mq's classes).
    const CLASSFUL: bool = true;
    type Opts = PfifoFastOpts;

    /// tc's `qdisc 'pfifo_fast' does not support option parsing` for any word.
    fn parse(cur: &mut Cur) -> Result<PfifoFastOpts, TcError> {
        if cur.peek().is_some() {
            return Err(TcError::usage("qdisc 'pfifo_fast' does not support option parsing", Some(cur.pos)));
        }
        Ok(PfifoFastOpts {})
    }

    fn args(_o: &PfifoFastOpts) -> String {
        String::new()
    }

    fn show(_o: &PfifoFastOpts, _dev: &Device, _d: bool) -> String {
        show_priomap(BANDS, &DEFAULT_PRIOMAP)
    }

    fn json(_o: &PfifoFastOpts, _dev: &Device, _d: bool) -> J {
        json_priomap(BANDS, &DEFAULT_PRIOMAP)
    }

    /// Nothing after `TCA_KIND`.
    fn encode(_o: &PfifoFastOpts, _out: &mut Attrs) -> Result<(), Unencodable> {
        Ok(())
    }

    fn decode(_options: Option<&[u8]>) -> Result<PfifoFastOpts, DecodeError> {
        Ok(PfifoFastOpts {})
    }

    fn build(_o: &PfifoFastOpts, _q: &QdiscNode, cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Ok(Box::new(Core::new(PfifoFastConfig {
            txqueuelen: cx.dev.txqueuelen,
            ..PfifoFastConfig::default()
        })))
    }
}
