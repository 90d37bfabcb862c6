//! Sluice's netlink encoding of hfsc (qdisc and classes), byte for byte against what iproute2's
//! tc sends for the same commands (`tests/fixtures/hfsc-netlink.txt`, captured with strace by
//! `scripts/hfsc-netlink-capture.py`; this kernel lacks sch_hfsc, but tc sends each request
//! before the kernel refuses it).

mod netlink_fixture;

use sluice_kernel::kernel::{hfsc_class_msg, qdisc_msg};

#[test]
fn hfsc_requests_match_tc_byte_for_byte() {
    let cases = netlink_fixture::cases(include_str!("fixtures/hfsc-netlink.txt"));
    let (mut qdiscs, mut classes) = (0, 0);
    for c in cases {
        let state = c.state();
        let plan = c.plan(&state);
        // tc adds with NLM_F_EXCL (no replace).
        let ours = if c.cmd.starts_with("tc class") {
            classes += 1;
            let cl = plan.hfsc_classes().last().expect("an hfsc class");
            hfsc_class_msg(c.ifindex(), cl, false).bytes().to_vec()
        } else {
            qdiscs += 1;
            let q = plan.qdiscs().find(|q| q.kind() == "hfsc").expect("the qdisc");
            qdisc_msg(c.ifindex(), q, false).bytes().to_vec()
        };
        c.assert_same(&ours);
    }
    assert_eq!((qdiscs, classes), (3, 6));
}
