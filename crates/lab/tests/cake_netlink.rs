//! Sluice's netlink encoding of cake, byte for byte against what iproute2's tc sends for the
//! same commands (`tests/fixtures/cake-netlink.txt`, captured with strace by
//! `scripts/cake-netlink-capture.py`; this kernel lacks sch_cake, but tc sends the request
//! before the kernel refuses it).

use sluice_config::burst::BurstPolicy;
use sluice_lab::kernel::{qdisc_msg, script_state, Plan};

struct Case {
    setup: Vec<String>,
    cmd: String,
    bytes: Vec<u8>,
}

fn cases() -> Vec<Case> {
    let text = include_str!("fixtures/cake-netlink.txt");
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

#[test]
fn cake_requests_match_tc_byte_for_byte() {
    let cases = cases();
    assert!(cases.len() >= 8);
    for c in cases {
        let script =
            format!("ip link add dev v0 type veth peer name v1\n{}\n{}\n", c.setup.join("\n"), c.cmd);
        let state = script_state(&script, &[]).unwrap_or_else(|e| panic!("{}: {e}", c.cmd));
        let plan =
            Plan::new(&state, "v0", BurstPolicy::TcDefault).unwrap_or_else(|e| panic!("{}: {e}", c.cmd));
        let q = plan.qdiscs().find(|q| q.kind() == "cake").expect("a cake qdisc");
        let ifindex = i32::from_ne_bytes(c.bytes[20..24].try_into().unwrap());
        // tc adds with NLM_F_EXCL (no replace).
        let mut ours = qdisc_msg(ifindex, q, false).bytes().to_vec();
        let len = ours.len() as u32;
        ours[0..4].copy_from_slice(&len.to_ne_bytes());
        if !c.cmd.contains(" handle ") {
            // tc leaves the handle to the kernel; the model has already chosen one (8001:).
            ours[24..28].fill(0);
        }
        let mut theirs = c.bytes.clone();
        theirs[8..12].fill(0); // the sequence number tc chose
        assert_eq!(ours.len(), theirs.len(), "{}: length", c.cmd);
        if ours != theirs {
            let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap();
            panic!(
                "{}: first difference at byte {at}\n ours: {:02x?}\ntheirs: {:02x?}",
                c.cmd,
                &ours[at.saturating_sub(8)..(at + 16).min(ours.len())],
                &theirs[at.saturating_sub(8)..(at + 16).min(theirs.len())]
            );
        }
    }
}
