//! The fw classifier (kernel `cls_fw.c`): the packet's firewall mark selects the class.
//!
//! Each element is `handle MARK[/MASK] fw classid X:Y`; the mask is per priority and every element
//! of a priority must use the same one. A priority with no element uses the old method: the mark
//! itself is the classid when its major is 0 or the qdisc's own.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::handle::Handle;
use crate::time::Time;

/// What an fw element is configured with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FwConfig {
    /// The mask (`handle MARK/MASK`); `None` means all ones.
    pub mask: Option<u32>,
    /// `classid`.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
    /// `indev`.
    pub indev: Option<u32>,
}

/// One fw element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FwElem {
    /// The (masked) mark it matches; also its handle.
    pub mark: u32,
    /// Result class.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
    /// Required input interface.
    pub indev: Option<u32>,
    /// Packets that ended classification here.
    pub hits: u64,
}

/// An fw priority: its mask and elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FwTp {
    /// The mask applied to the packet's mark before lookup.
    pub mask: u32,
    /// Elements in insertion order.
    pub elems: Vec<FwElem>,
    /// The major of the qdisc this priority hangs under (for the old method).
    pub qdisc_major: u16,
}

impl FwTp {
    /// An empty priority.
    pub fn new(qdisc_major: u16) -> FwTp {
        FwTp { mask: u32::MAX, elems: Vec::new(), qdisc_major }
    }

    /// Adds, replaces or changes the element for `handle`.
    pub fn apply(
        &mut self,
        handle: Option<u32>,
        cfg: FwConfig,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        let Some(mark) = handle.filter(|h| *h != 0) else {
            if self.elems.is_empty() && cfg.classid.is_none() && cfg.actions.is_empty() && !must_exist {
                return Ok(0); // old-method priority: nothing to store
            }
            return Err(FilterError::invalid(
                "fw",
                "handle",
                "an fw filter needs a handle (the mark to match)",
            ));
        };
        let mask = cfg.mask.unwrap_or(u32::MAX);
        if !self.elems.is_empty() && mask != self.mask {
            return Err(FilterError::invalid(
                "fw",
                "mask",
                format!("{mask:#x} differs from this priority's mask {:#x}", self.mask),
            ));
        }
        let elem = FwElem { mark, classid: cfg.classid, actions: cfg.actions, indev: cfg.indev, hits: 0 };
        match self.elems.iter_mut().find(|e| e.mark == mark) {
            Some(e) if replace || must_exist => {
                let hits = e.hits;
                *e = FwElem { hits, ..elem };
            }
            Some(_) => return Err(FilterError::Exists(format!("fw filter handle {mark:#x} already exists"))),
            None if must_exist => return Err(FilterError::NotFound(format!("fw filter handle {mark:#x}"))),
            None => {
                self.mask = mask;
                self.elems.push(elem);
            }
        }
        Ok(mark)
    }

    /// Deletes one element.
    pub fn delete(&mut self, handle: u32) -> Result<(), FilterError> {
        let p = self
            .elems
            .iter()
            .position(|e| e.mark == handle)
            .ok_or_else(|| FilterError::NotFound(format!("fw filter handle {handle:#x}")))?;
        self.elems.remove(p);
        Ok(())
    }

    /// Classifies by mark.
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        let mark = input.mark();
        if self.elems.is_empty() {
            let h = Handle::from_tc(mark);
            return (mark != 0 && (h.major() == 0 || h.major() == self.qdisc_major))
                .then_some((Verdict::Ok, h));
        }
        let id = mark & self.mask;
        for e in self.elems.iter_mut().filter(|e| e.mark == id) {
            if e.indev.is_some_and(|i| i != input.keys.iif) {
                continue;
            }
            let v = e.actions.run(input, now);
            if v != Verdict::Continue {
                e.hits += 1;
                return Some((v, e.classid.unwrap_or(Handle::UNSPEC)));
            }
        }
        None
    }
}
