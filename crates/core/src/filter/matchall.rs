//! The matchall classifier (kernel `cls_matchall.c`): every packet matches; one element per
//! priority.

use crate::filter::action::{Actions, Verdict};
use crate::filter::{ClassifyInput, FilterError};
use crate::handle::Handle;
use crate::time::Time;

/// What a matchall filter is configured with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchallConfig {
    /// `classid`.
    pub classid: Option<Handle>,
    /// Actions.
    pub actions: Actions,
}

/// A matchall priority.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MatchallTp {
    /// The element: handle and configuration.
    pub elem: Option<(u32, MatchallConfig)>,
    /// Packets classified.
    pub hits: u64,
}

impl MatchallTp {
    /// Sets the single element. A second one in the same priority is refused (kernel `EEXIST`).
    pub fn apply(
        &mut self,
        handle: Option<u32>,
        cfg: MatchallConfig,
        replace: bool,
        must_exist: bool,
    ) -> Result<u32, FilterError> {
        let h = handle.filter(|h| *h != 0).unwrap_or(1);
        match &self.elem {
            Some((old, _)) if *old == h && (replace || must_exist) => {}
            Some(_) => {
                return Err(FilterError::Exists("matchall: this priority already has its filter".into()))
            }
            None if must_exist => return Err(FilterError::NotFound(format!("matchall handle {h:#x}"))),
            None => {}
        }
        self.elem = Some((h, cfg));
        Ok(h)
    }

    /// Classifies: always matches (if configured).
    pub fn classify(&mut self, input: &ClassifyInput<'_>, now: Time) -> Option<(Verdict, Handle)> {
        let (_, cfg) = self.elem.as_mut()?;
        let v = cfg.actions.run(input, now);
        if v == Verdict::Continue {
            return None;
        }
        self.hits += 1;
        Some((v, cfg.classid.unwrap_or(Handle::UNSPEC)))
    }
}
