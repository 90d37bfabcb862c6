//! Sluice's netlink encoding of ets (the qdisc, and `tc class change ... ets`), byte for byte
//! against what iproute2's tc sends for the same commands (`tests/fixtures/ets-netlink.txt`,
//! captured with strace by `scripts/ets-netlink-capture.py`; this kernel lacks sch_ets, but tc
//! sends each request before the kernel refuses it).

mod netlink_fixture;

use sluice_kernel::kernel::{ets_class_change_msg, qdisc_msg};
use sluice_tc::model::QdiscOpts;

#[test]
fn ets_requests_match_tc_byte_for_byte() {
    let cases = netlink_fixture::cases(include_str!("fixtures/ets-netlink.txt"));
    let (mut qdiscs, mut classes) = (0, 0);
    for c in cases {
        let state = c.state();
        let plan = c.plan(&state);
        let ets = plan.qdiscs().find(|q| q.kind() == "ets").expect("the ets qdisc");
        let ours = if c.cmd.starts_with("tc class change") {
            classes += 1;
            let w: Vec<&str> = c.cmd.split_whitespace().collect();
            let arg = |k: &str| w.iter().position(|x| *x == k).map(|i| w[i + 1]);
            let minor = u32::from_str_radix(arg("classid").unwrap().split(':').nth(1).unwrap(), 16).unwrap();
            let parent = if arg("parent").is_some() { ets.handle } else { 0 };
            // The quantum the model now holds for the band, when the command gave one.
            let QdiscOpts::Ets(e) = &ets.node.opts else { unreachable!() };
            let band_quantum = sluice_tc::tc::ets::quanta(e, 1514)[minor as usize - 1];
            let quantum = arg("quantum").map(|q| {
                assert_eq!(q.parse::<u32>().unwrap(), band_quantum, "{}: the model took it", c.cmd);
                band_quantum
            });
            ets_class_change_msg(c.ifindex(), ets.handle | minor, parent, quantum).bytes().to_vec()
        } else {
            qdiscs += 1;
            qdisc_msg(c.ifindex(), ets, false).bytes().to_vec()
        };
        c.assert_same(&ours);
    }
    assert_eq!((qdiscs, classes), (7, 3));
}
