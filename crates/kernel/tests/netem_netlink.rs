//! Sluice's netlink encoding of netem, byte for byte against what iproute2's tc sends for the
//! same commands (`tests/fixtures/netem-netlink.txt`, captured with strace by
//! `scripts/netem-netlink-capture.py`; this kernel lacks sch_netem, but tc sends the request
//! before the kernel refuses it).

mod netlink_fixture;

use sluice_kernel::kernel::qdisc_msg;

#[test]
fn netem_requests_match_tc_byte_for_byte() {
    let cases = netlink_fixture::cases(include_str!("fixtures/netem-netlink.txt"));
    assert!(cases.len() >= 8);
    for c in cases {
        let state = c.state();
        let plan = c.plan(&state);
        let q = plan.qdiscs().find(|q| q.kind() == "netem").expect("a netem qdisc");
        // tc adds with NLM_F_EXCL (no replace).
        c.assert_same(qdisc_msg(c.ifindex(), q, false).bytes());
    }
}
