//! Netlink requests captured from iproute2's tc (`tests/fixtures/*-netlink.txt`, written by the
//! capture scripts in `scripts/`) and the byte-for-byte comparison with Sluice's encoding.

use sluice_kernel::kernel::{script_state, Plan};
use sluice_tc::burst::BurstPolicy;
use sluice_tc::model::State;

/// One captured request: the setup commands, the command, and the bytes tc sent.
pub struct Case {
    pub setup: Vec<String>,
    pub cmd: String,
    pub bytes: Vec<u8>,
}

impl Case {
    /// The model after `ip link add dev v0 ...`, the setup and the command.
    pub fn state(&self) -> State {
        let script =
            format!("ip link add dev v0 type veth peer name v1\n{}\n{}\n", self.setup.join("\n"), self.cmd);
        script_state(&script, &[]).unwrap_or_else(|e| panic!("{}: {e}", self.cmd))
    }

    /// The plan for v0.
    pub fn plan<'a>(&self, state: &'a State) -> Plan<'a> {
        Plan::new(state, "v0", BurstPolicy::TcDefault).unwrap_or_else(|e| panic!("{}: {e}", self.cmd))
    }

    /// The interface index tc sent (`tcm_ifindex`).
    pub fn ifindex(&self) -> i32 {
        i32::from_ne_bytes(self.bytes[20..24].try_into().unwrap())
    }

    /// Compares Sluice's request with tc's: the sequence number tc chose is ignored, and so is the
    /// handle when tc left it to the kernel (sent 0: the model has already chosen one; tc itself
    /// sends `ffff:` for ingress and clsact).
    pub fn assert_same(&self, ours: &[u8]) {
        let mut ours = ours.to_vec();
        let len = ours.len() as u32;
        ours[0..4].copy_from_slice(&len.to_ne_bytes());
        if self.bytes[24..28] == [0; 4] {
            ours[24..28].fill(0);
        }
        let mut theirs = self.bytes.clone();
        theirs[8..12].fill(0);
        assert_eq!(ours.len(), theirs.len(), "{}: length", self.cmd);
        if ours != theirs {
            let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap();
            panic!(
                "{}: first difference at byte {at}\n ours: {:02x?}\ntheirs: {:02x?}",
                self.cmd,
                &ours[at.saturating_sub(8)..(at + 16).min(ours.len())],
                &theirs[at.saturating_sub(8)..(at + 16).min(theirs.len())]
            );
        }
    }
}

/// The cases of a fixture file.
pub fn cases(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut setup = Vec::new();
    let mut cmd = None;
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("# setup: ") {
            setup.push(s.to_string());
        } else if let Some(c) = line.strip_prefix("# cmd: ") {
            cmd = Some(c.to_string());
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let bytes = (0..line.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
                .collect();
            out.push(Case {
                setup: std::mem::take(&mut setup),
                cmd: cmd.take().expect("a # cmd: line"),
                bytes,
            });
        }
    }
    out
}
