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
    /// `jump N`: go on with action N of this filter's list (counted from 0, i.e. skip the first
    /// N). Resolved inside [`Actions::run`]; a jump out of range ends the list with `ok`.
    Jump(u32),
    /// `stolen` after a mirred redirect: the packet leaves this path for `MirredTarget`.
    Redirect(MirredTarget),
}

/// Where a mirred redirect sends a packet: a device (an index into the device table of whoever
/// built the filters) and the side of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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
            Verdict::Jump(n) => write!(f, "jump {n}"),
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
    /// `gact VERDICT random determ|netrand OTHER VAL`.
    GactRandom(GactRandom),
    /// `police`.
    Police(Police),
    /// `mirred ... redirect`: the packet goes to another device (verdict `stolen`).
    Redirect(MirredTarget),
    /// `mirred ... mirror` (or a redirect whose verdict is not `stolen`): a copy goes to the
    /// device (recorded in the input's [`crate::filter::PacketMeta::mirrors`] for the owner of
    /// the packet to make), and the original goes on with the verdict.
    Mirror(MirredTarget, Verdict),
    /// `skbedit`: rewrite the packet's mark and priority, then a verdict.
    Skbedit(Skbedit),
}

/// gact with a `random` part (`act_gact.c`): with `determ`, every `val`-th packet gets `other`;
/// with `netrand`, each packet does with probability 1/`val`. `val` 0 never.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GactRandom {
    /// The usual verdict.
    pub verdict: Verdict,
    /// The other verdict.
    pub other: Verdict,
    /// Deterministic (true) or random.
    pub determ: bool,
    /// Period or inverse probability.
    pub val: u16,
    packets: u64,
    rng: u64,
}

impl GactRandom {
    /// A random gact; `seed` drives `netrand` (the same seed gives the same packets).
    pub fn new(verdict: Verdict, other: Verdict, determ: bool, val: u16, seed: u64) -> GactRandom {
        GactRandom { verdict, other, determ, val, packets: 0, rng: seed | 1 }
    }

    fn decide(&mut self) -> Verdict {
        self.packets += 1;
        if self.val == 0 {
            return self.verdict;
        }
        let hit = if self.determ {
            self.packets.is_multiple_of(self.val as u64)
        } else {
            // xorshift64*: cheap, no allocation, reproducible under the simulator's seed.
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32).is_multiple_of(self.val as u64)
        };
        if hit {
            self.other
        } else {
            self.verdict
        }
    }
}

/// skbedit (`act_skbedit.c`): the fields it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skbedit {
    /// New `skb->priority`.
    pub priority: Option<u32>,
    /// New mark bits.
    pub mark: Option<u32>,
    /// Which mark bits are written (all by default).
    pub mask: u32,
    /// Verdict after editing (`pipe` by default).
    pub verdict: Verdict,
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
        let to = Verdict::GotoChain(chain);
        self.slots.iter().any(|s| match &s.action {
            Action::Gact(v) => *v == to,
            Action::GactRandom(g) => g.verdict == to || g.other == to,
            Action::Police(p) => p.config().conform == to || p.config().exceed == to,
            Action::Skbedit(k) => k.verdict == to,
            Action::Redirect(_) => false,
            Action::Mirror(_, v) => *v == to,
        })
    }

    /// Runs the actions for a matched packet and returns the final verdict (`Pipe` at the end of
    /// the list is returned as `Ok`). `jump N` restarts at action N, at most 32 times (the
    /// kernel's `tcf_action_exec`); skbedit writes into `input.meta`.
    pub fn run(&mut self, input: &ClassifyInput<'_>, now: Time) -> Verdict {
        const JUMP_TTL: u32 = 32;
        let mut verdict = Verdict::Ok;
        let mut i = 0usize;
        let mut ttl = JUMP_TTL;
        while i < self.slots.len() {
            let slot = &mut self.slots[i];
            i += 1;
            slot.stats.packets += 1;
            slot.stats.bytes += input.pkt.len as u64;
            verdict = match &mut slot.action {
                Action::Gact(v) => *v,
                Action::GactRandom(g) => g.decide(),
                Action::Redirect(t) => Verdict::Redirect(*t),
                Action::Mirror(t, v) => {
                    let mut m = input.meta.get();
                    m.mirrors.push(*t);
                    input.meta.set(m);
                    *v
                }
                Action::Police(p) => {
                    let (v, exceeded) = p.police(input.pkt, now);
                    if exceeded {
                        slot.stats.overlimits += 1;
                    }
                    v
                }
                Action::Skbedit(k) => {
                    let mut m = input.meta.get();
                    if let Some(p) = k.priority {
                        m.priority = p;
                    }
                    if let Some(mark) = k.mark {
                        m.mark = (m.mark & !k.mask) | (mark & k.mask);
                    }
                    input.meta.set(m);
                    k.verdict
                }
            };
            if verdict == Verdict::Drop {
                slot.stats.drops += 1;
            }
            if let Verdict::Jump(n) = verdict {
                ttl -= 1;
                if n == 0 || n as usize > self.slots.len() || ttl == 0 {
                    return Verdict::Ok;
                }
                i = n as usize;
                continue;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_keys::FlowKeys;
    use crate::packet::Packet;

    fn run(actions: &mut Actions, pkt: &Packet) -> (Verdict, crate::filter::PacketMeta) {
        let keys = FlowKeys::default();
        let input = ClassifyInput::new(pkt, &keys, &[]);
        let v = actions.run(&input, Time::ZERO);
        (v, input.meta.get())
    }

    #[test]
    fn skbedit_writes_priority_and_masked_mark_then_pipes() {
        let mut pkt = Packet::new(100, 0);
        pkt.mark = 0xAB00;
        let edit =
            Skbedit { priority: Some(0x0001_0010), mark: Some(0x0042), mask: 0x00FF, verdict: Verdict::Pipe };
        let mut a = Actions::new(vec![Action::Skbedit(edit), Action::Gact(Verdict::Pipe)]);
        let (v, m) = run(&mut a, &pkt);
        assert_eq!(v, Verdict::Ok);
        assert_eq!((m.priority, m.mark), (0x0001_0010, 0xAB42));
        // The packet itself is untouched until the caller writes the metadata back.
        assert_eq!(pkt.mark, 0xAB00);
    }

    #[test]
    fn jump_skips_from_the_start_and_a_bad_jump_ends_with_ok() {
        let pkt = Packet::new(100, 0);
        // jump 2 from action 0: actions 0 and 1 are skipped on the restart, action 2 decides.
        let mut a = Actions::new(vec![
            Action::Gact(Verdict::Jump(2)),
            Action::Gact(Verdict::Drop),
            Action::Gact(Verdict::Reclassify),
        ]);
        assert_eq!(run(&mut a, &pkt).0, Verdict::Reclassify);
        assert_eq!(a.slots()[1].stats.packets, 0);
        let mut bad = Actions::new(vec![Action::Gact(Verdict::Jump(5)), Action::Gact(Verdict::Drop)]);
        assert_eq!(run(&mut bad, &pkt).0, Verdict::Ok);
        // A jump to itself loops until the kernel's 32-jump limit stops it.
        let mut lp = Actions::new(vec![Action::Gact(Verdict::Pipe), Action::Gact(Verdict::Jump(1))]);
        assert_eq!(run(&mut lp, &pkt).0, Verdict::Ok);
        assert_eq!(lp.slots()[1].stats.packets, 32);
    }

    #[test]
    fn gact_determ_gives_every_nth_packet_the_other_verdict() {
        let pkt = Packet::new(100, 0);
        let mut a =
            Actions::new(vec![Action::GactRandom(GactRandom::new(Verdict::Drop, Verdict::Ok, true, 3, 0))]);
        let got: Vec<Verdict> = (0..6).map(|_| run(&mut a, &pkt).0).collect();
        use Verdict::*;
        assert_eq!(got, [Drop, Drop, Ok, Drop, Drop, Ok]);
        // netrand: about 1 in val, reproducible from the seed.
        let mut r = Actions::new(vec![Action::GactRandom(GactRandom::new(Drop, Ok, false, 4, 7))]);
        let oks = (0..4000).filter(|_| run(&mut r, &pkt).0 == Ok).count();
        assert!((800..1200).contains(&oks), "{oks}");
    }
}
