//! A DS-field (TOS / traffic class) match: Sluice's protocol-independent equivalent of
//! `u32 match ip tos V M` and `u32 match ip6 priority V M` (the kernel's `tcindex`/`dsmark`
//! pair is gone since Linux 6.3, and `basic` with a `meta` ematch is the closest tc spelling).
//!
//! It matches the packet's `dsfield` (which the parser fills from the outer IPv4 TOS or IPv6
//! traffic class, and which ECN marking keeps up to date): `(dsfield & mask) == value`.
//! Use mask `0xfc` to match a DSCP while ignoring the ECN bits.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::handle::Handle;
use crate::time::Time;

/// What a dsfield element is configured with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DsfieldConfig {
    /// The value to match (already masked).
    pub value: u8,
    /// The mask.
    pub mask: u8,
    /// `classid`.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
}

/// A dsfield priority: elements tried in handle order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DsfieldTp {
    /// `(handle, config, hits)`.
    pub elems: Vec<(u32, DsfieldConfig, u64)>,
}

impl DsfieldTp {
    /// Adds, replaces or changes an element.
    pub fn apply(
        &mut self,
        handle: Option<u32>,
        cfg: DsfieldConfig,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        if cfg.value & !cfg.mask != 0 {
            return Err(FilterError::invalid(
                "dsfield",
                "value",
                format!("{:#x} has bits outside the mask {:#x}", cfg.value, cfg.mask),
            ));
        }
        let h = match handle.filter(|h| *h != 0) {
            Some(h) => h,
            None => self.elems.iter().map(|e| e.0).max().unwrap_or(0) + 1,
        };
        match self.elems.iter_mut().find(|e| e.0 == h) {
            Some(e) if replace || must_exist => e.1 = cfg,
            Some(_) => {
                return Err(FilterError::Exists(format!("dsfield filter handle {h:#x} already exists")))
            }
            None if must_exist => return Err(FilterError::NotFound(format!("dsfield filter handle {h:#x}"))),
            None => {
                let pos = self.elems.partition_point(|e| e.0 < h);
                self.elems.insert(pos, (h, cfg, 0));
            }
        }
        Ok(h)
    }

    /// Deletes one element.
    pub fn delete(&mut self, handle: u32) -> Result<(), FilterError> {
        let p = self
            .elems
            .iter()
            .position(|e| e.0 == handle)
            .ok_or_else(|| FilterError::NotFound(format!("dsfield filter handle {handle:#x}")))?;
        self.elems.remove(p);
        Ok(())
    }

    /// Classifies by the packet's DS field.
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        let ds = input.pkt.dsfield;
        for (_, cfg, hits) in self.elems.iter_mut() {
            if ds & cfg.mask != cfg.value {
                continue;
            }
            let v = cfg.actions.run(input, now);
            if v != Verdict::Continue {
                *hits += 1;
                return Some((v, cfg.classid.unwrap_or(Handle::UNSPEC)));
            }
        }
        None
    }
}
