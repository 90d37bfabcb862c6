//! Sluice's netlink encoding of cake, byte for byte against what iproute2's tc sends for the
//! same commands (`tests/fixtures/cake-netlink.txt`, captured with strace by
//! `scripts/cake-netlink-capture.py`; this kernel lacks sch_cake, but tc sends the request
//! before the kernel refuses it).

mod netlink_fixture;

use sluice_kernel::kernel::qdisc_msg;

#[test]
fn cake_requests_match_tc_byte_for_byte() {
    let cases = netlink_fixture::cases(include_str!("fixtures/cake-netlink.txt"));
    assert!(cases.len() >= 8);
    for c in cases {
        let state = c.state();
        let plan = c.plan(&state);
        let q = plan.qdiscs().find(|q| q.kind() == "cake").expect("a cake qdisc");
        // tc adds with NLM_F_EXCL (no replace).
        c.assert_same(qdisc_msg(c.ifindex(), q, false).bytes());
    }
}
