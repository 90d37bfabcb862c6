//! Sluice's netlink encoding of drr (qdisc and classes) and red, byte for byte against what
//! iproute2's tc sends for the same commands (`tests/fixtures/drr-red-netlink.txt`, captured with
//! strace by `scripts/drr-red-netlink-capture.py`; this kernel lacks sch_drr and sch_red, but tc
//! sends each request before the kernel refuses it).

mod netlink_fixture;

use sluice_kernel::kernel::{drr_class_msg, qdisc_msg};

#[test]
fn drr_and_red_requests_match_tc_byte_for_byte() {
    let cases = netlink_fixture::cases(include_str!("fixtures/drr-red-netlink.txt"));
    assert!(cases.len() >= 9);
    let (mut qdiscs, mut classes) = (0, 0);
    for c in cases {
        let state = c.state();
        let plan = c.plan(&state);
        // tc adds with NLM_F_EXCL (no replace).
        let ours = if c.cmd.starts_with("tc class") {
            classes += 1;
            let cl = plan.drr_classes().last().expect("a drr class");
            drr_class_msg(c.ifindex(), cl, false).bytes().to_vec()
        } else {
            qdiscs += 1;
            let kind = c.cmd.split_whitespace().find(|w| *w == "drr" || *w == "red").unwrap();
            let q = plan.qdiscs().find(|q| q.kind() == kind).expect("the qdisc");
            qdisc_msg(c.ifindex(), q, false).bytes().to_vec()
        };
        c.assert_same(&ours);
    }
    assert_eq!((qdiscs, classes), (7, 2));
}
