//! Every qdisc kind of the registry, byte for byte against the requests iproute2 6.1's tc sent
//! for the same commands (the fixtures in `tests/fixtures/`, captured with strace by the
//! `scripts/*-netlink-capture.py` scripts; tc sends a request even where this kernel lacks the
//! kind). A registry kind (qdisc or filter) with fewer than two captured requests fails here.

mod netlink_fixture;

use sluice_kernel::filters::filter_msg;
use sluice_kernel::kernel::qdisc_msg;
use sluice_kernel::netlink::flags;
use sluice_model::kinds::{FILTER_KINDS, QDISC_KINDS};

const FIXTURES: &[(&str, &str)] = &[
    ("aqm-netlink.txt", include_str!("fixtures/aqm-netlink.txt")),
    ("netem-netlink.txt", include_str!("fixtures/netem-netlink.txt")),
    ("cake-netlink.txt", include_str!("fixtures/cake-netlink.txt")),
    ("drr-red-netlink.txt", include_str!("fixtures/drr-red-netlink.txt")),
    ("ets-netlink.txt", include_str!("fixtures/ets-netlink.txt")),
    ("hfsc-netlink.txt", include_str!("fixtures/hfsc-netlink.txt")),
    ("base-netlink.txt", include_str!("fixtures/base-netlink.txt")),
    ("ingress-netlink.txt", include_str!("fixtures/ingress-netlink.txt")),
];

/// The kind a `tc qdisc add` command names: the first word after the parent and handle
/// (`ingress` and `clsact` name both the slot and the kind).
fn kind_of(cmd: &str) -> Option<&str> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if words.get(1) != Some(&"qdisc") {
        return None;
    }
    let mut i = 3;
    while i < words.len() {
        match words[i] {
            "dev" | "parent" | "handle" => i += 2,
            "root" => i += 1,
            w => return Some(w),
        }
    }
    None
}

#[test]
fn every_registry_kind_sends_what_tc_sends() {
    let mut checked: Vec<&str> = Vec::new();
    for (file, text) in FIXTURES {
        for c in netlink_fixture::cases(text) {
            let Some(kind) = kind_of(&c.cmd) else { continue };
            let Some(&kind) = QDISC_KINDS.iter().find(|k| **k == kind) else { continue };
            let state = c.state();
            let plan = c.plan(&state);
            let q = plan.qdiscs().filter(|q| q.kind() == kind).last();
            let q = q.unwrap_or_else(|| panic!("{file}: {}: no {kind} qdisc in the plan", c.cmd));
            // tc adds with NLM_F_EXCL (no replace).
            c.assert_same(qdisc_msg(c.ifindex(), q, false).bytes());
            checked.push(kind);
        }
    }
    for kind in QDISC_KINDS {
        let n = checked.iter().filter(|k| *k == kind).count();
        assert!(n >= 2, "{kind}: {n} captured requests (want at least 2 in tests/fixtures/)");
    }
}

/// `RTM_NEWTFILTER` requests (`scripts/filters-netlink-capture.py`,
/// `scripts/filters-more-netlink-capture.py`).
const FILTER_FIXTURES: &[(&str, &str)] = &[
    ("filters-netlink.txt", include_str!("fixtures/filters-netlink.txt")),
    ("filters-more-netlink.txt", include_str!("fixtures/filters-more-netlink.txt")),
];

#[test]
fn every_registry_filter_kind_sends_what_tc_sends() {
    let mut checked: Vec<&str> = Vec::new();
    for (file, text) in FILTER_FIXTURES {
        let v1: u32 = text
            .lines()
            .find_map(|l| l.strip_prefix("# ifindex v1: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{file} names v1's interface index"));
        for c in netlink_fixture::cases(text) {
            let state = c.state();
            let plan = c.plan(&state);
            let (_, f) = plan.filter_nodes().last().unwrap_or_else(|| panic!("{file}: {}: no filter", c.cmd));
            // The command is the one Sluice prints for this filter (tc writes the police
            // keyword's two verdicts as `drop/pipe`, Sluice as `drop / pipe`).
            let printed = plan.filters().last().unwrap().1.replace(" / ", "/");
            assert_eq!(printed, c.cmd, "{file}: the fixture's command is Sluice's printed form");
            let target = |d: &str| (d == "v1").then_some(v1);
            let fl = flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE;
            let msg =
                filter_msg(c.ifindex(), f, fl, &target).unwrap_or_else(|e| panic!("{file}: {}: {e}", c.cmd));
            c.assert_same(msg.bytes());
            let kind = f.opts.kind();
            checked.push(FILTER_KINDS.iter().copied().find(|k| *k == kind).unwrap_or("?"));
        }
    }
    for kind in FILTER_KINDS {
        let n = checked.iter().filter(|k| *k == kind).count();
        assert!(n >= 2, "{kind}: {n} captured filter requests (want at least 2 in tests/fixtures/)");
    }
}
