//! Sluice's netlink encoding of filters, byte for byte against the `RTM_NEWTFILTER` requests
//! iproute2 6.1's tc sent for the same commands (`tests/fixtures/filters-netlink.txt`, captured by
//! `scripts/filters-netlink-capture.py` in a namespace of our own; this kernel lacks cls_flow,
//! cls_fw and cls_matchall, but tc sends the request before the kernel refuses it).
//!
//! Each command is written as Sluice prints the filter (`sluice apply --dry-run`), so the test also
//! checks that running the printed command with tc sends what `sluice apply` sends.

mod netlink_fixture;

use sluice_kernel::filters::filter_msg;
use sluice_kernel::netlink::flags;

const FIXTURE: &str = include_str!("fixtures/filters-netlink.txt");

#[test]
fn filters_encode_as_tc_sends_them() {
    let v1: u32 = FIXTURE
        .lines()
        .find_map(|l| l.strip_prefix("# ifindex v1: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the fixture names v1's interface index");
    let cases = netlink_fixture::cases(FIXTURE);
    assert_eq!(cases.len(), 21);
    let mut kinds = std::collections::BTreeSet::new();
    for case in &cases {
        let state = case.state();
        let plan = case.plan(&state);
        let (_, f) = plan.filter_nodes().last().unwrap_or_else(|| panic!("{}: no filter", case.cmd));
        kinds.insert(f.opts.kind());
        // The command is the one Sluice prints for this filter (tc writes the police keyword's
        // two verdicts as `drop/pipe`, Sluice as `drop / pipe`).
        let printed = plan.filters().last().unwrap().1.replace(" / ", "/");
        assert_eq!(printed, case.cmd, "the fixture's command is Sluice's printed form");
        let target = |d: &str| (d == "v1").then_some(v1);
        let fl = flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE;
        let msg = filter_msg(case.ifindex(), f, fl, &target).unwrap_or_else(|e| panic!("{}: {e}", case.cmd));
        case.assert_same(msg.bytes());
    }
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["basic", "flow", "fw", "matchall", "u32"]);
}

#[test]
fn a_changed_filter_no_longer_matches_the_capture() {
    // The comparison is not vacuous: one key's mask changed is one byte different.
    let case = &netlink_fixture::cases(FIXTURE)[0];
    let mut state = case.state();
    let dev = &mut state.devices[0];
    let f = dev.filters.iter_mut().rev().find(|f| f.handle == 0x8000_0800).unwrap();
    let sluice_tc::model::FilterOpts::U32(sluice_tc::model::U32Filter::Key(u)) = &mut f.opts else {
        panic!("u32")
    };
    u.keys[0].mask = 0xfffe;
    let plan = case.plan(&state);
    let (_, f) = plan.filter_nodes().last().unwrap();
    let msg = filter_msg(case.ifindex(), f, 0x605, &|_| None).unwrap();
    let r = std::panic::catch_unwind(|| case.assert_same(msg.bytes()));
    assert!(r.is_err());
}
