//! Every qdisc kind of the registry, byte for byte against the requests iproute2 6.1's tc sent
//! for the same commands (the fixtures in `tests/fixtures/`, captured with strace by the
//! `scripts/*-netlink-capture.py` scripts; tc sends a request even where this kernel lacks the
//! kind). A registry kind (qdisc or filter) with fewer than two captured requests fails here; so
//! does a kind whose classes take options without two captured class requests (`RTM_NEWTCLASS`).

mod netlink_fixture;

use sluice_kernel::filters::filter_msg;
use sluice_kernel::kernel::{class_msg, class_request, qdisc_msg};
use sluice_kernel::netlink::flags;
use sluice_model::grammar::Cur;
use sluice_model::kinds::{ClassOpts, CLASS_KINDS, FILTER_KINDS, QDISC_KINDS};
use sluice_model::model::Handle;

const FIXTURES: &[(&str, &str)] = &[
    ("aqm-netlink.txt", include_str!("fixtures/aqm-netlink.txt")),
    ("netem-netlink.txt", include_str!("fixtures/netem-netlink.txt")),
    ("cake-netlink.txt", include_str!("fixtures/cake-netlink.txt")),
    ("drr-red-netlink.txt", include_str!("fixtures/drr-red-netlink.txt")),
    ("ets-netlink.txt", include_str!("fixtures/ets-netlink.txt")),
    ("hfsc-netlink.txt", include_str!("fixtures/hfsc-netlink.txt")),
    ("base-netlink.txt", include_str!("fixtures/base-netlink.txt")),
    ("ingress-netlink.txt", include_str!("fixtures/ingress-netlink.txt")),
    ("class-netlink.txt", include_str!("fixtures/class-netlink.txt")),
    ("pie-netlink.txt", include_str!("fixtures/pie-netlink.txt")),
    ("fq-netlink.txt", include_str!("fixtures/fq-netlink.txt")),
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

/// The kind and class id a `tc class add|change` command names.
fn class_of(cmd: &str) -> Option<(&str, Handle)> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    if words.get(1) != Some(&"class") {
        return None;
    }
    let mut i = 3;
    let mut classid = None;
    while i < words.len() {
        match words[i] {
            "classid" => {
                let (maj, min) = words[i + 1].split_once(':')?;
                classid =
                    Some(Handle::new(u16::from_str_radix(maj, 16).ok()?, u32::from_str_radix(min, 16).ok()?));
                i += 2;
            }
            "dev" | "parent" => i += 2,
            "root" => i += 1,
            w => return Some((w, classid?)),
        }
    }
    None
}

/// Every class kind's options as tc sends them: the model's class (for ETS, the class change the
/// command made, which only the command holds) through the registry's encoder.
#[test]
fn every_class_kind_sends_what_tc_sends() {
    let mut checked: Vec<&str> = Vec::new();
    for (file, text) in FIXTURES {
        for c in netlink_fixture::cases(text) {
            let Some((kind, classid)) = class_of(&c.cmd) else { continue };
            let Some(&kind) = CLASS_KINDS.iter().find(|k| **k == kind) else { continue };
            let state = c.state();
            let words: Vec<String> = c.cmd.split_whitespace().map(String::from).collect();
            let at = words.iter().position(|w| w == kind).unwrap();
            let mut cur = Cur { argv: &words[at + 1..], pos: 0, max_minor: 0xFFFF };
            let opts = ClassOpts::parse_kind(kind, &mut cur)
                .unwrap()
                .unwrap_or_else(|e| panic!("{file}: {}: {e:?}", c.cmd));
            let dev = state.devices.iter().find(|d| d.name == "v0").unwrap();
            // The model's class when the command made one (HTB, DRR, HFSC: what apply sends).
            let opts = dev.class(classid).map(|n| n.opts.clone()).unwrap_or(opts);
            let theirs = &c.bytes;
            let handle = u32::from_ne_bytes(theirs[24..28].try_into().unwrap());
            let parent = u32::from_ne_bytes(theirs[28..32].try_into().unwrap());
            let flags = u16::from_ne_bytes(theirs[6..8].try_into().unwrap());
            c.assert_same(class_request(c.ifindex(), handle, parent, &opts, flags).bytes());
            // apply's HTB class (bursts by tc's rule here) is that class.
            if let ClassOpts::Htb(h) = &opts {
                let plan = c.plan(&state);
                let rc = plan.classes().find(|r| r.classid == handle).expect("the class in the plan");
                assert_eq!((rc.htb, rc.burst, rc.cburst), (h, h.burst as u64, h.cburst as u64), "{}", c.cmd);
                let ours = class_msg(c.ifindex(), rc);
                let mut ours = ours.bytes().to_vec();
                ours[6..8].copy_from_slice(&flags.to_ne_bytes());
                c.assert_same(&ours);
            }
            checked.push(kind);
        }
    }
    for kind in CLASS_KINDS {
        let n = checked.iter().filter(|k| *k == kind).count();
        assert!(n >= 2, "{kind}: {n} captured class requests (want at least 2 in tests/fixtures/)");
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
