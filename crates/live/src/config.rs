//! Configurations for the live shaper: every form (tc script, tc state file, TOML) is read into
//! the one model ([`sluice_tc::model::State`]) and built into a [`Program`] with the live
//! path's burst floor.

use crate::LiveError;
use sluice_core::Span;
use sluice_engine::{Program, ProgramOptions};
use sluice_tc::model::State;
use sluice_tc::script::{load_file, load_tc_script};
use sluice_tc::shell::Vars;

/// The queue of `sluice shape --unlimited`: one FIFO of 10 000 frames, no shaping.
pub const UNLIMITED: &str = "tc qdisc add dev $DEV root pfifo limit 10000\n";

fn dev_vars(dev: &str) -> Vars {
    let mut vars = Vars::new();
    vars.insert("DEV".into(), dev.into());
    vars
}

/// Reads the configuration at `path` for device `dev` (`$DEV` is set to it).
pub fn load(path: &str, dev: &str) -> Result<State, LiveError> {
    load_file(std::path::Path::new(path), &dev_vars(dev))
        .map(|l| l.state)
        .map_err(|e| LiveError::Config(e.to_string()))
}

/// A configuration given as tc script text (`$DEV` is `dev`).
pub fn from_script(name: &str, text: &str, dev: &str) -> Result<State, LiveError> {
    load_tc_script(name, text, &dev_vars(dev)).map(|l| l.state).map_err(|e| LiveError::Config(e.to_string()))
}

/// The [`UNLIMITED`] configuration for `dev`.
pub fn unlimited(dev: &str) -> State {
    from_script("--unlimited", UNLIMITED, dev).expect("the built-in configuration loads")
}

/// Ingress shaping in `state`: the device `dev`'s ingress filters redirect (or mirror) to the
/// egress of an IFB (sqm's layout). Returns the IFB's name and its index (what the redirect
/// names).
pub fn ingress_target(state: &State, dev: &str) -> Option<(String, u16)> {
    use sluice_tc::model::{Action, MirredDirection, H_MIN_INGRESS};
    let d = state.devices.iter().find(|d| d.name == dev)?;
    let target = d.filters.iter().filter(|f| f.parent == H_MIN_INGRESS).flat_map(|f| &f.actions).find_map(
        |a| match a {
            Action::Mirred(m) if m.direction == MirredDirection::Egress => Some(m.dev.clone()),
            _ => None,
        },
    )?;
    let idx = state.devices.iter().position(|x| x.name == target)?;
    Some((target, u16::try_from(idx).ok()?))
}

/// Whether super-packets shaped by `dev`'s tree are cut into segments before they are queued:
/// when one of its HTB classes is limited below [`crate::offload::SPLIT_BELOW_BPS`].
pub fn split_gso(state: &State, dev: &str) -> bool {
    use sluice_tc::model::ClassOpts;
    state.devices.iter().filter(|d| d.name == dev).flat_map(|d| &d.classes).any(|c| match &c.opts {
        ClassOpts::Htb(h) => h.rate.min(h.ceil) < crate::offload::SPLIT_BELOW_BPS,
        _ => false,
    })
}

/// Builds `state`'s tree on `dev` for the live path: every HTB bucket raised to the burst rule
/// and to `rate × floor` (the wake-up jitter measured at start-up), see [`ProgramOptions::live`].
pub fn program(state: &State, dev: &str, floor: Span) -> Result<Program, LiveError> {
    Program::from_model(state, dev, &ProgramOptions::live(floor))
        .map_err(|e| LiveError::Config(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_name_their_problem() {
        let e = from_script("x.tc", "tc qdisc add dev $DEV root handle 1: htb default 1\ntc class add dev $DEV parent 1: classid 1:1 htb rate 1mbit\ntc qdisc add dev $DEV parent 1:1 fq_codel target 2ms bogus 1\n", "eth0").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let s = from_script("x.tc", "tc qdisc add dev eth9 root pfifo\n", "eth0").unwrap();
        assert!(program(&s, "eth0", Span::ZERO).unwrap_err().to_string().contains("$DEV"));
        // netem duplicate runs: the shaper copies the frame into a slot of its own.
        let s = from_script("x.tc", "tc qdisc add dev $DEV root netem duplicate 1%\n", "eth0").unwrap();
        assert_eq!(program(&s, "eth0", Span::ZERO).unwrap().kind(), "netem");
        // DRR and RED run in the live shaper through the same engine.
        let s = from_script("x.tc", "tc qdisc add dev $DEV root handle 1: drr\ntc class add dev $DEV parent 1: classid 1:1 drr\ntc qdisc add dev $DEV parent 1:1 red limit 100k avpkt 1000 bandwidth 100mbit\n", "eth0").unwrap();
        assert_eq!(program(&s, "eth0", Span::ZERO).unwrap().kind(), "drr");
        let p = program(&unlimited("eth0"), "eth0", Span::from_micros(300)).unwrap();
        assert_eq!(p.kind(), "pfifo");
        // Super-packets are split below 1 Gbit/s only.
        let htb = |r: &str| {
            from_script("x.tc", &format!("tc qdisc add dev $DEV root handle 1: htb\ntc class add dev $DEV parent 1: classid 1:1 htb rate {r}\n"), "eth0").unwrap()
        };
        assert!(split_gso(&htb("500mbit"), "eth0"));
        assert!(!split_gso(&htb("5gbit"), "eth0"));
        assert!(!split_gso(&htb("500mbit"), "eth1"));
        assert!(!split_gso(&unlimited("eth0"), "eth0"));
    }

    /// Keeps the queue full and serves it from a loop that wakes up 0..3 ms late, like a busy VM;
    /// returns the delivered bit/s over 10 s.
    fn late_loop_rate(floor: Span) -> f64 {
        use sluice_core::{FlowKeys, Packet, Time};
        let s = from_script(
            "t.tc",
            "tc qdisc add dev $DEV root handle 1: htb default 1\ntc class add dev $DEV parent 1: classid 1:1 htb rate 100mbit\n",
            "x",
        )
        .unwrap();
        let mut q = sluice_engine::Engine::new(program(&s, "x", floor).unwrap(), Time::ZERO);
        let (mut now, mut sent, mut id) = (Time::ZERO, 0u64, 0u64);
        while now < Time::from_secs(10) {
            while q.qlen() < 500 {
                id += 1;
                let _ = q.ingress(Packet::new(1500, id), &FlowKeys::default(), &[], now);
            }
            while let Some(p) = q.dequeue(now) {
                sent += p.len as u64;
            }
            now = q.next_event(now).unwrap() + Span::from_micros((id * 7919) % 3000);
        }
        sent as f64 * 8.0 / 10.0
    }

    #[test]
    fn the_burst_floor_keeps_the_long_run_rate_despite_late_wakeups() {
        // The floor covers the worst lateness (3 ms), as the start-up calibration ensures.
        let bps = late_loop_rate(Span::from_millis(3));
        assert!((bps / 100e6 - 1.0).abs() < 0.005, "achieved {bps}");
        // With a bucket smaller than the lateness, the time slept past the bucket is lost.
        assert!(late_loop_rate(Span::from_micros(300)) < 0.9 * 100e6);
    }
}
