//! Control verdicts (tc's `TC_ACT_*`) and the action list attached to a filter.
//!
//! A filter that matches runs its actions in order. Each action returns a [`Verdict`]; `pipe`
//! passes to the next action, anything else ends the list (kernel `tcf_action_exec`). With no
//! actions a match means `ok`: take the filter's class.

use crate::filter::police::Police;
use crate::filter::ClassifyInput;
use crate::time::Time;
use std::fmt;

/// The control value of an action or a police conform/exceed branch (`TC_ACT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// `ok` / `pass`: classification ends with this filter's class.
    Ok,
    /// `pipe`: go on with the next action; at the end of the list it means `ok`.
    Pipe,
    /// `drop` / `shot`: drop the packet.
    Drop,
    /// `reclassify`: restart classification at the first filter of chain 0.
    Reclassify,
    /// `continue`: this filter did not decide; try the next filter.
    Continue,
    /// `goto chain N`: continue with the first filter of chain N at the same parent.
    GotoChain(u32),
    /// `stolen` after a mirred redirect: the packet leaves this path for `MirredTarget`.
    Redirect(MirredTarget),
}

/// Where a mirred redirect sends a packet: a device (an index into the device table of whoever
/// built the filters) and the side of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MirredTarget {
    /// The target device's index.
    pub dev: u16,
    /// `ingress`: the device's receive path (its ingress hook); else its root qdisc.
    pub ingress: bool,
}

impl Verdict {
    /// Parses tc's spelling (`ok`, `pass`, `pipe`, `drop`, `shot`, `reclassify`, `continue`).
    /// `goto chain N` is two words and is built by the caller with [`Verdict::GotoChain`].
    pub fn parse(word: &str) -> Option<Verdict> {
        Some(match word {
            "ok" | "pass" => Verdict::Ok,
            "pipe" => Verdict::Pipe,
            "drop" | "shot" => Verdict::Drop,
            "reclassify" => Verdict::Reclassify,
            "continue" => Verdict::Continue,
            _ => return None,
        })
    }
}

impl fmt::Display for Verdict {
    /// Prints as `tc -s filter show` does (`pass`, not `ok`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ok => f.write_str("pass"),
            Verdict::Pipe => f.write_str("pipe"),
            Verdict::Drop => f.write_str("drop"),
            Verdict::Reclassify => f.write_str("reclassify"),
            Verdict::Continue => f.write_str("continue"),
            Verdict::GotoChain(n) => write!(f, "goto chain {n}"),
            Verdict::Redirect(_) => f.write_str("stolen"),
        }
    }
}

/// Counters of one action, as `tc -s` prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ActionStats {
    /// Packets that reached the action.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets whose verdict was `drop`.
    pub drops: u64,
    /// Packets that exceeded a policer.
    pub overlimits: u64,
}

/// One action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `gact`: a fixed verdict (`action ok`, `action drop`, ...).
    Gact(Verdict),
    /// `police`.
    Police(Police),
    /// `mirred ... redirect`: the packet goes to another device (verdict `stolen`).
    Redirect(MirredTarget),
}

/// One action with its counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionSlot {
    /// The action.
    pub action: Action,
    /// Its counters.
    pub stats: ActionStats,
}

/// The ordered actions of one filter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Actions {
    slots: Vec<ActionSlot>,
}

impl Actions {
    /// No actions: a match means `ok`.
    pub fn none() -> Actions {
        Actions::default()
    }

    /// Builds a list from actions, in order.
    pub fn new(actions: Vec<Action>) -> Actions {
        Actions {
            slots: actions
                .into_iter()
                .map(|action| ActionSlot { action, stats: ActionStats::default() })
                .collect(),
        }
    }

    /// True when there are no actions.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The actions with their counters.
    pub fn slots(&self) -> &[ActionSlot] {
        &self.slots
    }

    /// True if any action is a `goto chain` (directly or as a police branch) to `chain`.
    pub fn jumps_to(&self, chain: u32) -> bool {
        self.slots.iter().any(|s| match &s.action {
            Action::Gact(v) => *v == Verdict::GotoChain(chain),
            Action::Redirect(_) => false,
            Action::Police(p) => {
                p.config().conform == Verdict::GotoChain(chain)
                    || p.config().exceed == Verdict::GotoChain(chain)
            }
        })
    }

    /// Runs the actions for a matched packet and returns the final verdict
    /// (`Pipe` at the end of the list is returned as `Ok`).
    pub fn run(&mut self, input: &ClassifyInput<'_>, now: Time) -> Verdict {
        let mut verdict = Verdict::Ok;
        for slot in self.slots.iter_mut() {
            slot.stats.packets += 1;
            slot.stats.bytes += input.pkt.len as u64;
            verdict = match &mut slot.action {
                Action::Gact(v) => *v,
                Action::Redirect(t) => Verdict::Redirect(*t),
                Action::Police(p) => {
                    let (v, exceeded) = p.police(input.pkt, now);
                    if exceeded {
                        slot.stats.overlimits += 1;
                    }
                    v
                }
            };
            if verdict == Verdict::Drop {
                slot.stats.drops += 1;
            }
            if verdict != Verdict::Pipe {
                return verdict;
            }
        }
        if verdict == Verdict::Pipe {
            Verdict::Ok
        } else {
            verdict
        }
    }
}
