//! The transactional, incremental apply on a real veth in a private namespace (root only; skips
//! loudly otherwise): only the difference is sent, a refused change leaves the previous tree
//! exactly as it was, `--dry-run`'s rehearsal finds what the real run would meet, and the rate
//! API changes one class with one message.

use sluice_core::Rate;
use sluice_kernel::kernel::{read_back, script_state, Plan};
use sluice_kernel::netlink::Netlink;
use sluice_kernel::plan::{dump_tree, RawObj};
use sluice_kernel::rate::{RateChange, RateSetter};
use sluice_kernel::txn::{apply_between, apply_plan, rehearse, ApplyOptions};
use sluice_kernel::Error as LabError;
use sluice_tc::burst::BurstPolicy;
use std::process::Command;

const DEV: &str = "slc-tx0";

const TREE: &str = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
    tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
    tc class add dev $DEV parent 1:1 classid 1:10 htb rate 3mbit ceil 10mbit\n\
    tc class add dev $DEV parent 1:1 classid 1:20 htb rate 7mbit ceil 10mbit\n\
    tc qdisc add dev $DEV parent 1:10 handle 10: pfifo limit 50\n\
    tc qdisc add dev $DEV parent 1:20 handle 20: htb default 1\n\
    tc class add dev $DEV parent 20: classid 20:1 htb rate 3mbit ceil 7mbit\n\
    tc class add dev $DEV parent 20: classid 20:2 htb rate 4mbit ceil 7mbit\n";

fn root_or_skip(test: &str) -> bool {
    let root =
        Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ip = Command::new("ip").arg("-V").output().is_ok();
    if !(root && ip) {
        eprintln!("\n*** SKIPPING {test}: needs root and iproute2 (for the veth) ***\n");
    }
    root && ip
}

/// Runs `f` in a private namespace holding a veth pair `DEV` ↔ `DEV`p (both up).
fn in_veth_ns<T: Send + 'static>(f: impl FnOnce() -> Result<T, LabError> + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        let ip = |a: &[&str]| assert!(Command::new("ip").args(a).status().unwrap().success(), "ip {a:?}");
        let peer = format!("{DEV}p");
        ip(&["link", "add", DEV, "type", "veth", "peer", "name", &peer]);
        ip(&["link", "set", DEV, "up"]);
        ip(&["link", "set", &peer, "up"]);
        f().unwrap()
    })
    .join()
    .unwrap()
}

fn state(text: &str) -> sluice_tc::model::State {
    script_state(text, &[("DEV", DEV)]).unwrap()
}

fn snapshot() -> Result<Vec<RawObj>, LabError> {
    let mut nl = Netlink::open()?;
    let ifindex = nl.ifindex(DEV)?;
    let mut t = dump_tree(&mut nl, ifindex)?;
    t.sort_by_key(|r| (r.is_qdisc, r.handle));
    Ok(t)
}

#[test]
fn only_the_difference_is_sent_and_rates_change_in_place() {
    if !root_or_skip("only_the_difference_is_sent") {
        return;
    }
    in_veth_ns(|| {
        let s = state(TREE);
        let plan = Plan::new(&s, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan, ApplyOptions::default())?;
        assert_eq!((a.added, a.changed, a.deleted, a.messages), (8, 0, 0, 8), "{:?}", a.lines);
        assert!(plan.compare(&read_back(DEV)?).is_empty());
        // The same again: nothing to send.
        let a = apply_plan(&plan, ApplyOptions::default())?;
        assert_eq!(a.messages, 0, "{:?}", a.lines);
        // A rate: one change in place; the class keeps its statistics (not re-created).
        let s2 = state(&TREE.replace("rate 3mbit ceil 10mbit", "rate 4mbit ceil 10mbit"));
        let plan2 = Plan::new(&s2, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan2, ApplyOptions::default())?;
        assert_eq!((a.changed, a.messages), (1, 1), "{:?}", a.lines);
        assert_eq!(a.lines, vec!["change class htb 1:10".to_string()]);
        assert!(plan2.compare(&read_back(DEV)?).is_empty());
        // A subscriber out, one in: a delete and adds, nothing re-created.
        let s3 = state(
            &TREE.replace("classid 20:2 htb rate 4mbit ceil 7mbit", "classid 20:3 htb rate 4mbit ceil 7mbit"),
        );
        let plan3 = Plan::new(&s3, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan3, ApplyOptions::default())?;
        assert_eq!((a.added, a.deleted, a.recreated), (1, 1, 0), "{:?}", a.lines);
        assert!(
            a.lines.iter().position(|l| l.starts_with("add"))
                < a.lines.iter().position(|l| l.starts_with("delete"))
        );
        assert!(plan3.compare(&read_back(DEV)?).is_empty());
        Ok(())
    });
}

#[test]
fn a_refused_change_leaves_the_previous_tree_exactly() {
    if !root_or_skip("a_refused_change_leaves_the_previous_tree_exactly") {
        return;
    }
    in_veth_ns(|| {
        let s = state(TREE);
        apply_plan(&Plan::new(&s, DEV, BurstPolicy::Sluice)?, ApplyOptions::default())?;
        let before = snapshot()?;
        // Rates changed, a class added, one removed, and a leaf of a kind this kernel may lack.
        let lacking = "sfq";
        let bad = TREE
            .replace("rate 3mbit ceil 10mbit", "rate 2mbit ceil 10mbit")
            .replace("classid 20:2 ", "classid 20:5 ")
            + &format!("tc qdisc add dev $DEV parent 20:1 handle 21: {lacking}\n");
        let s2 = state(&bad);
        let plan2 = Plan::new(&s2, DEV, BurstPolicy::Sluice)?;
        if rehearse(&plan2)?.is_empty() {
            eprintln!("\n*** SKIPPING the refusal checks: this kernel has {lacking} ***\n");
            return Ok(());
        }
        // The probe finds it before anything is sent.
        let e = apply_plan(&plan2, ApplyOptions::default()).unwrap_err().to_string();
        assert!(e.contains(lacking) && e.contains("nothing was changed"), "{e}");
        assert_eq!(snapshot()?, before);
        // Without the probe, the kernel refuses mid-way and the tree is restored exactly.
        let e = apply_plan(&plan2, ApplyOptions { probe: false }).unwrap_err().to_string();
        assert!(e.contains(lacking) && e.contains("restored exactly"), "{e}");
        assert_eq!(snapshot()?, before);
        Ok(())
    });
}

#[test]
fn the_rehearsal_reports_what_the_real_run_would_meet() {
    if !root_or_skip("the_rehearsal_reports_what_the_real_run_would_meet") {
        return;
    }
    in_veth_ns(|| {
        let good = state(TREE);
        assert_eq!(rehearse(&Plan::new(&good, DEV, BurstPolicy::Sluice)?)?, Vec::<String>::new());
        // A leaf of a kind this kernel may lack: refused by the kernel with its reason.
        let odd = state(&format!("{TREE}tc qdisc add dev $DEV parent 20:2 handle 22: sfq\n"));
        let r = rehearse(&Plan::new(&odd, DEV, BurstPolicy::Sluice)?)?;
        if std::path::Path::new("/sys/module/sch_sfq").exists() {
            eprintln!("\n*** this kernel has sfq: the refusal half is not exercised ***\n");
        } else {
            assert!(r.len() == 1 && r[0].contains("qdisc sfq 22:") && r[0].contains("errno"), "{r:?}");
        }
        // Nothing touched the device.
        assert!(snapshot()?.is_empty());
        Ok(())
    });
}

#[test]
fn the_rate_api_changes_one_class_with_one_message() {
    if !root_or_skip("the_rate_api_changes_one_class_with_one_message") {
        return;
    }
    in_veth_ns(|| {
        let s = state(TREE);
        apply_plan(&Plan::new(&s, DEV, BurstPolicy::Sluice)?, ApplyOptions::default())?;
        let mut setter = RateSetter::open(DEV)?;
        let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        setter.set(0x20_0001, &RateChange::parse(&words("rate 5mbit ceil 7mbit"))?)?;
        let k = read_back(DEV)?;
        let c = k.iter().find(|o| !o.is_qdisc && o.handle == 0x20_0001).unwrap();
        assert_eq!((c.rate, c.ceil), (Some(Rate::from_bps(5_000_000)), Some(Rate::from_bps(7_000_000))));
        // Still a top-level class of 20: (the kernel dumps its parent as the root).
        assert_eq!(c.parent, sluice_kernel::netlink::TC_H_ROOT, "{:#x}", c.parent);
        let n = 2000;
        let t = std::time::Instant::now();
        for i in 0..n {
            let r = Rate::from_bps(1_000_000 + (i % 100) * 10_000);
            setter.set(
                0x1_0010,
                &RateChange { rate: r, ceil: Some(Rate::from_bps(10_000_000)), burst: None, cburst: None },
            )?;
        }
        let per_s = n as f64 / t.elapsed().as_secs_f64();
        eprintln!("rate API: {n} changes in {:?}: {per_s:.0} changes/s", t.elapsed());
        let k = read_back(DEV)?;
        let c = k.iter().find(|o| !o.is_qdisc && o.handle == 0x1_0010).unwrap();
        assert_eq!(c.rate, Some(Rate::from_bps(1_000_000 + ((n - 1) % 100) * 10_000)));
        assert!(setter
            .set(0x1_0099, &RateChange::parse(&words("rate 1mbit"))?)
            .unwrap_err()
            .to_string()
            .contains("no HTB class 1:99"));
        Ok(())
    });
}

#[test]
fn a_change_between_two_models_sends_the_difference_and_undoes_a_refusal() {
    if !root_or_skip("a_change_between_two_models") {
        return;
    }
    in_veth_ns(|| {
        let s = state(TREE);
        let plan = Plan::new(&s, DEV, BurstPolicy::Sluice)?;
        apply_plan(&plan, ApplyOptions::default())?;
        let s2 = state(&TREE.replace("rate 3mbit ceil 7mbit", "rate 2mbit ceil 7mbit"));
        let plan2 = Plan::new(&s2, DEV, BurstPolicy::Sluice)?;
        let a = apply_between(&plan, &plan2)?;
        assert_eq!((a.changed, a.messages), (1, 1), "{:?}", a.lines);
        assert!(plan2.compare(&read_back(DEV)?).is_empty());
        let before = snapshot()?;
        let bad = state(
            &(TREE.replace("classid 20:2 ", "classid 20:6 ")
                + "tc qdisc add dev $DEV parent 20:1 handle 21: sfq\n"),
        );
        let bad_plan = Plan::new(&bad, DEV, BurstPolicy::Sluice)?;
        if !rehearse(&bad_plan)?.is_empty() {
            let e = apply_between(&plan2, &bad_plan).unwrap_err().to_string();
            assert!(e.contains("sfq") && e.contains("undone"), "{e}");
            assert_eq!(snapshot()?, before);
        }
        Ok(())
    });
}

/// TREE with u32 filters: two nodes of the root table, a hash table reached through a link.
const FILTERS: &str = "tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.0.1 flowid 1:10\n\
    tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.0.2 flowid 1:20\n\
    tc filter add dev $DEV parent 1: protocol ip prio 2 handle 2: u32 divisor 256\n\
    tc filter add dev $DEV parent 1: protocol ip prio 2 u32 ht 800:: match ip dst 198.18.1.0/24 hashkey mask 0x000000ff at 16 link 2:\n\
    tc filter add dev $DEV parent 1: protocol ip prio 2 u32 ht 2:5: match ip dst 198.18.1.5 flowid 1:10\n\
    tc filter add dev $DEV parent 20: protocol ip prio 1 u32 match ip dst 198.18.0.2 flowid 20:2\n";

fn filters_now() -> Result<Vec<sluice_kernel::filters::KFilter>, LabError> {
    let mut f = sluice_kernel::filters::read_filters(DEV)?;
    f.sort_by_key(|k| (k.parent, k.prio, k.handle));
    Ok(f)
}

/// The kernel holds `plan`'s tree and filters.
fn holds(plan: &Plan<'_>) -> Result<(), LabError> {
    assert!(plan.compare(&read_back(DEV)?).is_empty());
    let model: Vec<_> = plan.filter_nodes().map(|(_, f)| f).collect();
    let k = sluice_kernel::filters::read_filters(DEV)?;
    assert_eq!(sluice_kernel::filters::compare(&model, &k), Vec::<String>::new());
    Ok(())
}

#[test]
fn filters_are_in_the_difference() {
    if !root_or_skip("filters_are_in_the_difference") {
        return;
    }
    in_veth_ns(|| {
        let s = state(&format!("{TREE}{FILTERS}"));
        let plan = Plan::new(&s, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan, ApplyOptions::default())?;
        assert_eq!((a.added, a.messages), (14, 14), "{:?}", a.lines);
        holds(&plan)?;
        // Again: nothing to send.
        let a = apply_plan(&plan, ApplyOptions::default())?;
        assert_eq!(a.messages, 0, "{:?}", a.lines);
        // Another class for a node: replaced in place, nothing deleted.
        let s2 = state(&format!(
            "{TREE}{}",
            FILTERS.replacen("198.18.0.2 flowid 1:20", "198.18.0.2 flowid 1:10", 1)
        ));
        let plan2 = Plan::new(&s2, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan2, ApplyOptions::default())?;
        assert_eq!((a.changed, a.messages), (1, 1), "{:?}", a.lines);
        assert!(a.lines[0].starts_with("change filter u32 prio 1 handle 800::801"), "{:?}", a.lines);
        holds(&plan2)?;
        // A subscriber in (class, leaf, filter) and one out (class 20:2 and the filter naming it):
        // the class before its filter, the filter before its class goes.
        let sub = "tc class add dev $DEV parent 1:1 classid 1:30 htb rate 1mbit ceil 10mbit\n\
            tc qdisc add dev $DEV parent 1:30 handle 30: pfifo limit 10\n\
            tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.0.3 flowid 1:30\n";
        let s3 = state(&format!(
            "{}{}{sub}",
            TREE.replace("tc class add dev $DEV parent 20: classid 20:2 htb rate 4mbit ceil 7mbit\n", ""),
            FILTERS.replace("tc filter add dev $DEV parent 20: protocol ip prio 1 u32 match ip dst 198.18.0.2 flowid 20:2\n", "")
        ));
        let plan3 = Plan::new(&s3, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan3, ApplyOptions::default())?;
        // (and 800::801 back to 1:20, in place)
        assert_eq!((a.added, a.changed, a.deleted, a.recreated), (3, 1, 2, 0), "{:?}", a.lines);
        let at = |p: &str| {
            a.lines.iter().position(|l| l.starts_with(p)).unwrap_or_else(|| panic!("{p}: {:?}", a.lines))
        };
        assert!(at("add class htb 1:30") < at("add filter u32 prio 1 handle 800::803"), "{:?}", a.lines);
        assert!(
            at("delete filter u32 prio 1 handle 800::800 on 20:") < at("delete class htb 20:2"),
            "{:?}",
            a.lines
        );
        holds(&plan3)?;
        // A node's keys cannot change in place (the kernel keeps the old selector): deleted and
        // added again; the hash table and its link out, the table after the link.
        let s4 = state(&format!(
            "{}{}",
            TREE,
            FILTERS
                .replace("198.18.0.1 flowid", "198.18.0.9 flowid")
                .lines()
                .filter(|l| l.contains("prio 1 "))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        ));
        let plan4 = Plan::new(&s4, DEV, BurstPolicy::Sluice)?;
        let a = apply_plan(&plan4, ApplyOptions::default())?;
        assert!(
            a.lines.contains(&"delete filter u32 prio 1 handle 800::800 on 1: (to re-create it)".to_string()),
            "{:?}",
            a.lines
        );
        assert!(
            at_least_before(
                &a.lines,
                "delete filter u32 prio 1 handle 800::802 on 1:",
                "delete filter u32 prio 2 handle 2: on 1:"
            ),
            "{:?}",
            a.lines
        );
        holds(&plan4)?;
        Ok(())
    });
}

fn at_least_before(lines: &[String], a: &str, b: &str) -> bool {
    let p = |x: &str| lines.iter().position(|l| l == x);
    matches!((p(a), p(b)), (Some(i), Some(j)) if i < j)
}

#[test]
fn a_refused_change_restores_the_filters_too() {
    if !root_or_skip("a_refused_change_restores_the_filters_too") {
        return;
    }
    in_veth_ns(|| {
        let s = state(&format!("{TREE}{FILTERS}"));
        apply_plan(&Plan::new(&s, DEV, BurstPolicy::Sluice)?, ApplyOptions::default())?;
        let (before, fbefore) = (snapshot()?, filters_now()?);
        // Filters changed, added and removed, and a classifier this kernel may lack.
        let lacking = "matchall";
        let bad = format!(
            "{TREE}{}tc filter add dev $DEV parent 1: protocol all prio 9 {lacking} classid 1:20\n",
            FILTERS.replace("flowid 1:20", "flowid 1:10").replace("198.18.1.5", "198.18.1.6")
        );
        let s2 = state(&bad);
        let plan2 = Plan::new(&s2, DEV, BurstPolicy::Sluice)?;
        if rehearse(&plan2)?.is_empty() {
            eprintln!("\n*** SKIPPING the refusal checks: this kernel has {lacking} ***\n");
            return Ok(());
        }
        let e = apply_plan(&plan2, ApplyOptions::default()).unwrap_err().to_string();
        assert!(e.contains(lacking) && e.contains("nothing was changed"), "{e}");
        assert_eq!((snapshot()?, filters_now()?), (before.clone(), fbefore.clone()));
        let e = apply_plan(&plan2, ApplyOptions { probe: false }).unwrap_err().to_string();
        assert!(e.contains(lacking) && e.contains("restored exactly"), "{e}");
        assert_eq!((snapshot()?, filters_now()?), (before.clone(), fbefore.clone()));
        // The same between two models.
        let plan = Plan::new(&s, DEV, BurstPolicy::Sluice)?;
        let e = apply_between(&plan, &plan2).unwrap_err().to_string();
        assert!(e.contains(lacking) && e.contains("undone"), "{e}");
        assert_eq!((snapshot()?, filters_now()?), (before, fbefore));
        Ok(())
    });
}
