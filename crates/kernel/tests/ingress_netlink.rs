//! Sluice's netlink encoding of the ingress and clsact qdiscs, byte for byte against what
//! iproute2's tc sends (`tests/fixtures/ingress-netlink.txt`, captured with strace).

use sluice_kernel::kernel::{qdisc_msg, script_state, Plan};
use sluice_tc::burst::BurstPolicy;

#[test]
fn ingress_and_clsact_requests_match_tc_byte_for_byte() {
    let text = include_str!("fixtures/ingress-netlink.txt");
    let mut cmd = None;
    let mut n = 0;
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# cmd: ") {
            cmd = Some(c.to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cmd = cmd.take().expect("a # cmd: line");
        let theirs: Vec<u8> =
            (0..line.len()).step_by(2).map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap()).collect();
        // A plan needs a root qdisc; the ingress-side qdisc is the one compared.
        let script =
            format!("ip link add dev v0 type veth peer name v1\ntc qdisc add dev v0 root pfifo\n{cmd}\n");
        let state = script_state(&script, &[]).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let plan = Plan::new(&state, "v0", BurstPolicy::TcDefault).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        let kind = cmd.rsplit(' ').next().unwrap();
        let q = plan.qdiscs().find(|q| q.kind() == kind).expect("the ingress-side qdisc is planned");
        let ifindex = i32::from_ne_bytes(theirs[20..24].try_into().unwrap());
        // tc adds with NLM_F_EXCL (apply replaces); the sequence number is tc's.
        let mut ours = qdisc_msg(ifindex, q, false).bytes().to_vec();
        let len = ours.len() as u32;
        ours[0..4].copy_from_slice(&len.to_ne_bytes());
        let mut theirs = theirs;
        theirs[8..12].fill(0);
        assert_eq!(ours, theirs, "{cmd}");
        assert!(
            plan.tc_commands().iter().any(|c| c.ends_with(&format!("dev v0 {kind}"))),
            "{:?}",
            plan.tc_commands()
        );
        n += 1;
    }
    assert_eq!(n, 2);
}
