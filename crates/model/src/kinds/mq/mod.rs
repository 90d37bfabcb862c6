//! mq: one class per transmit queue of a multi-queue device, each holding its own qdisc (the
//! default one until another is grafted). No options. tc has no `q_mq.c` (the kind is sent
//! alone); the kernel's `sch_mq.c`. Sluice does not run it.

use super::{BuildCx, ClassList, DecodeError, QdiscKind, Unencodable};
use crate::build::BuildError;
use crate::error::TcError;
use crate::grammar::Cur;
use crate::json::J;
use crate::model::{Device, QdiscNode, H_ROOT};
use crate::nlattr::Attrs;
use serde::{Deserialize, Serialize};
use sluice_core::{Handle, Qdisc};

/// mq: each class (`major:N`, N = 1..=num_tx_queues) holds the default qdisc (pfifo_fast,
/// handle 0) until another is grafted there. No options: what it holds is the emulated kernel's
/// state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MqOpts {
    /// Classes whose grafted qdisc was deleted: they hold no qdisc (the kernel's noop).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emptied: Vec<u32>,
}

/// The kind.
pub struct Mq;

impl QdiscKind for Mq {
    const NAME: &'static str = "mq";
    const CLASSFUL: bool = true;
    type Opts = MqOpts;

    /// tc has no parser for mq: any word is refused.
    fn parse(cur: &mut Cur) -> Result<MqOpts, TcError> {
        if cur.peek().is_some() {
            return Err(TcError::usage("qdisc 'mq' does not support option parsing", Some(cur.pos)));
        }
        Ok(MqOpts::default())
    }

    fn args(_o: &MqOpts) -> String {
        String::new()
    }

    fn show(_o: &MqOpts, _dev: &Device, _d: bool) -> String {
        String::new()
    }

    fn json(_o: &MqOpts, _dev: &Device, _d: bool) -> J {
        J::obj()
    }

    /// `mq_init`: only at the root of a device with more than one transmit queue.
    fn check_parent(dev: &Device, parent: Handle) -> Result<(), TcError> {
        if parent != H_ROOT || dev.num_tx_queues < 2 {
            return Err(TcError::errno("Operation not supported"));
        }
        Ok(())
    }

    /// tc sends the kind alone.
    fn encode(_o: &MqOpts, _out: &mut Attrs) -> Result<(), Unencodable> {
        Ok(())
    }

    fn decode(_options: Option<&[u8]>) -> Result<MqOpts, DecodeError> {
        Ok(MqOpts::default())
    }

    const CLASS_OPS: bool = true;

    /// One class per transmit queue.
    fn has_class(_o: &MqOpts, dev: &Device, _q: &QdiscNode, classid: Handle) -> bool {
        (1..=dev.num_tx_queues).contains(&classid.minor())
    }

    fn classes(_o: &MqOpts, dev: &Device, q: &QdiscNode) -> ClassList {
        ClassList::Implicit(
            (1..=dev.num_tx_queues).map(|n| (Handle::new(q.handle.major(), n), H_ROOT)).collect(),
        )
    }

    fn build(_o: &MqOpts, _q: &QdiscNode, _cx: &mut BuildCx<'_>) -> Result<Box<dyn Qdisc>, BuildError> {
        Err(BuildError::Unsupported("mq (one qdisc per transmit queue)".into()))
    }
}
