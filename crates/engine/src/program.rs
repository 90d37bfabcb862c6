//! A [`Program`]: what one configuration turns into (root qdisc, classifier, description).

use sluice_core::classify::Classifier;
use sluice_core::filter::FilterList;
use sluice_core::{Qdisc, Rate, Span};
use sluice_model::build::{build_device_seeded, build_hook, BuildError};
use sluice_model::burst::{auto_burst, BurstPolicy};
use sluice_model::model::{
    ClassNode, ClassOpts, DevKind, QdiscNode, QdiscOpts, State, H_INGRESS, H_MIN_EGRESS, H_MIN_INGRESS,
    H_ROOT,
};

/// Why a configuration cannot be turned into a [`Program`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The configuration has no root qdisc on the device.
    #[error("the configuration has no qdisc on {dev} (write the device as $DEV)")]
    NoDevice {
        /// The device asked for.
        dev: String,
    },
    /// The model could not be built into core objects (unsupported object, rejected parameter).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A running class could not be changed ([`crate::Engine::set_class_rate`]).
    #[error("{0}")]
    Change(String),
}

/// How [`Program::from_model`] builds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramOptions {
    /// The live path's burst floor. When set, every HTB bucket (burst and cburst) is raised to at
    /// least `max(auto_burst(rate, mtu), rate × floor)` (the [`BurstPolicy::Sluice`] rule and
    /// the wake-up jitter the live loop measured): a bucket smaller than the time between two
    /// services cannot be honoured by a user-space loop. `None` (the simulator, tests) builds
    /// the configuration exactly as written.
    pub burst_floor: Option<Span>,
    /// Seed of the random sources of the configuration's qdiscs (netem's loss, jitter,
    /// reordering): the same seed repeats a run exactly. The simulator passes its run's seed.
    pub seed: u64,
}

impl ProgramOptions {
    /// The live shaper's options: buckets raised to the burst rule and `floor`.
    pub fn live(floor: Span) -> ProgramOptions {
        // Each live run draws a different sequence, as the kernel seeds netem from entropy.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        ProgramOptions { burst_floor: Some(floor), seed }
    }
}

/// One configuration ready to run: the root qdisc, the classifier that holds the filters and the
/// tree shape, a one-line summary and build warnings. Hand it to [`crate::Engine::new`] or
/// [`crate::Engine::reload`].
pub struct Program {
    pub(crate) root: Box<dyn Qdisc>,
    pub(crate) classifier: Classifier,
    pub(crate) summary: String,
    /// The ingress (or clsact ingress) hook's filters: [`crate::Engine::receive`] runs them.
    pub(crate) ingress_hook: Option<FilterList>,
    /// clsact's egress hook: run before the root qdisc's own filters.
    pub(crate) egress_hook: Option<FilterList>,
    /// Device names by index: what a redirect's `MirredTarget::dev` names.
    pub(crate) devices: Vec<String>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("root", &self.root.kind())
            .field("summary", &self.summary)
            .field("warnings", &self.warnings)
            .finish()
    }
}

impl Program {
    /// Builds the egress tree of device `dev` in `state` (the tc grammar, TOML or any other form
    /// that became a [`sluice_model::model`]): its root qdisc and the classifier with its
    /// filters.
    pub fn from_model(state: &State, dev: &str, opts: &ProgramOptions) -> Result<Program, EngineError> {
        let device = state
            .devices
            .iter()
            .find(|d| d.name == dev)
            .filter(|d| d.root().is_some() || d.kind == DevKind::Ifb || d.qdisc_at(H_INGRESS).is_some())
            .ok_or_else(|| EngineError::NoDevice { dev: dev.to_string() })?;
        let mut warnings = Vec::new();
        let mut state = std::borrow::Cow::Borrowed(state);
        if device.root().is_none() {
            // An IFB transmits through the default qdisc (pfifo_fast, its queue of 32); a device
            // kept only for its ingress hook gets the same stand-in on its egress side.
            if device.kind != DevKind::Ifb {
                warnings.push(format!("{dev} has no root qdisc: pfifo_fast stands in on its egress"));
            }
            let d = state.to_mut().devices.iter_mut().find(|d| d.name == dev).expect("found above");
            d.qdiscs.insert(
                0,
                QdiscNode {
                    handle: sluice_core::Handle::new(0xFFFE, 0),
                    parent: H_ROOT,
                    opts: QdiscOpts::PfifoFast(Default::default()),
                    stab: None,
                    stats: Default::default(),
                },
            );
        }
        let raised = opts.burst_floor.map(|floor| (raise_buckets(state.to_mut(), dev, floor), floor));
        let built = build_device_seeded(&state, dev, opts.seed)?;
        let ingress_hook = build_hook(&state, dev, H_MIN_INGRESS)?;
        let egress_hook = build_hook(&state, dev, H_MIN_EGRESS)?;
        let devices = state.devices.iter().map(|d| d.name.clone()).collect();
        // u32 hash tables are containers, not filters of their own.
        let filters = device
            .filters
            .iter()
            .filter(|f| f.parent != H_MIN_INGRESS && f.parent != H_MIN_EGRESS)
            .filter(|f| !f.opts.is_table())
            .count();
        let mut summary =
            format!("{} root, {}, {filters} filters", built.root.kind(), classes_line(&device.classes));
        if let Some((raised, floor)) = raised {
            summary += &format!("; {raised} buckets raised to rate x max(1ms, {}us)", floor.as_micros());
        }
        if ingress_hook.is_some() || egress_hook.is_some() {
            summary += "; ingress filters";
        }
        Ok(Program {
            root: built.root,
            classifier: built.classifier,
            summary,
            ingress_hook,
            egress_hook,
            devices,
            warnings,
        })
    }

    /// A program from core objects built elsewhere (the simulator's link queues and structured
    /// shaper form, tests). `classifier` may be empty: every qdisc then applies its own
    /// fallback (HTB's `skb->priority` and `default`, prio's priomap).
    pub fn from_parts(root: Box<dyn Qdisc>, classifier: Classifier) -> Program {
        let summary = root.kind().to_string();
        Program {
            root,
            classifier,
            summary,
            ingress_hook: None,
            egress_hook: None,
            devices: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Replaces the one-line summary.
    pub fn with_summary(mut self, summary: impl Into<String>) -> Program {
        self.summary = summary.into();
        self
    }

    /// One line describing the configuration (printed at start-up and reload).
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// What the build noticed but did not refuse.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The root qdisc's tc kind.
    pub fn kind(&self) -> &'static str {
        self.root.kind()
    }

    /// Whether the device has filters on its ingress hook ([`crate::Engine::receive`] runs them).
    pub fn has_ingress_hook(&self) -> bool {
        self.ingress_hook.is_some()
    }

    /// The name of the device a redirect names (`MirredTarget::dev`).
    pub fn device_name(&self, index: u16) -> Option<&str> {
        self.devices.get(index as usize).map(String::as_str)
    }
}

/// `N classes` and, for up to [`LISTED`] HTB classes, their rates: `3 classes (1:1 rate 30Mbit, ...)`.
fn classes_line(classes: &[ClassNode]) -> String {
    const LISTED: usize = 3;
    let mut listed: Vec<String> = classes
        .iter()
        .filter_map(|c| match &c.opts {
            ClassOpts::Htb(o) if o.ceil > o.rate => {
                Some(format!("{} rate {} ceil {}", c.classid, Rate::from_bps(o.rate), Rate::from_bps(o.ceil)))
            }
            ClassOpts::Htb(o) => Some(format!("{} rate {}", c.classid, Rate::from_bps(o.rate))),
            _ => None,
        })
        .take(LISTED + 1)
        .collect();
    if listed.is_empty() {
        return format!("{} classes", classes.len());
    }
    if listed.len() > LISTED {
        listed[LISTED] = "...".into();
    }
    format!("{} classes ({})", classes.len(), listed.join(", "))
}

/// Raises the HTB buckets of `dev` to `max(burst, auto_burst(rate, mtu), rate × floor)`; returns
/// how many classes had a bucket raised.
fn raise_buckets(state: &mut State, dev: &str, floor: Span) -> usize {
    let Some(device) = state.devices.iter_mut().find(|d| d.name == dev) else { return 0 };
    let want = |rate: u64, mtu: u32| {
        let r = Rate::from_bps(rate);
        auto_burst(r, mtu, BurstPolicy::Sluice).max(r.bytes_in(floor)).min(u32::MAX as u64) as u32
    };
    let mut raised = 0;
    for c in device.classes.iter_mut() {
        if let ClassOpts::Htb(o) = &mut c.opts {
            let (b, cb) = (want(o.rate, o.mtu), want(o.ceil, o.mtu));
            if o.burst < b || o.cburst < cb {
                raised += 1;
            }
            o.burst = o.burst.max(b);
            o.cburst = o.cburst.max(cb);
        }
    }
    raised
}
