//! Root-only: `apply` of an HTB tree with u32 filters (a plain key, and a hash table reached by a
//! `link` with a `hashkey`) on the lab's shaper, real UDP traffic through it, and the bytes counted
//! by the kernel in the class each filter names, read back through netlink. Also the kernel's
//! filters read back and compared with the model, and HTB's "quantum is big" warning passed on.
//! Skips loudly when the lab cannot be built.

use sluice_core::Rate;
use sluice_kernel::filters;
use sluice_kernel::kernel::{self, Plan};
use sluice_kernel::netns;
use sluice_lab::testbed::{Lab, LabOptions, IF_SHAPER_SERVER};
use sluice_lab::traffic::{self, Endpoints, Window};
use sluice_tc::burst::BurstPolicy;
use std::time::Duration;

mod common;
use common::lab_or_skip;

struct Guard(Lab);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

/// Bytes the kernel counted in each class of the shaper's egress toward the server.
fn class_bytes(lab: &Lab) -> Vec<(u32, u64)> {
    let objs = netns::in_netns(Some(&lab.shaper_ns()), || kernel::read_back(IF_SHAPER_SERVER)).unwrap();
    objs.iter().filter(|o| !o.is_qdisc).map(|o| (o.handle, o.stats.bytes)).collect()
}

fn delta(before: &[(u32, u64)], after: &[(u32, u64)], class: u32) -> u64 {
    let get = |v: &[(u32, u64)]| v.iter().find(|(h, _)| *h == class).map(|(_, b)| *b).unwrap_or(0);
    get(after) - get(before)
}

#[test]
fn u32_filters_put_real_traffic_in_the_classes_they_name() {
    if !lab_or_skip("u32_filters_put_real_traffic_in_the_classes_they_name") {
        return;
    }
    let lab = Lab::new("tfilt").unwrap();
    let _g = Guard(lab.clone());
    lab.up(&LabOptions::default()).unwrap();
    // r2q 1 makes every class's quantum (rate / r2q) far above 200 000: the kernel warns.
    let config = kernel::script_state(
        "tc qdisc add dev $DEV root handle 1: htb default 20 r2q 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 200mbit\n\
         tc class add dev $DEV parent 1:1 classid 1:10 htb rate 50mbit ceil 200mbit\n\
         tc class add dev $DEV parent 1:1 classid 1:20 htb rate 50mbit ceil 200mbit\n\
         tc class add dev $DEV parent 1:1 classid 1:30 htb rate 50mbit ceil 200mbit\n\
         tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dport 7300 0xffff flowid 1:10\n\
         tc filter add dev $DEV parent 1: protocol ip prio 2 handle 2: u32 divisor 16\n\
         tc filter add dev $DEV parent 1: protocol ip prio 2 u32 ht 800:: match ip protocol 17 0xff link 2: hashkey mask 0x0000000f at 20\n\
         tc filter add dev $DEV parent 1: protocol ip prio 2 u32 ht 2:5: match ip dport 7301 0xffff flowid 1:30\n",
        &[("DEV", IF_SHAPER_SERVER)],
    )
    .unwrap();
    let plan_config = config.clone();
    let (rep, kfilters) = netns::in_netns(Some(&lab.shaper_ns()), move || {
        let rep = kernel::apply(&Plan::new(&plan_config, IF_SHAPER_SERVER, BurstPolicy::Sluice)?)?;
        Ok((rep, filters::read_filters(IF_SHAPER_SERVER)?))
    })
    .unwrap();
    assert!(rep.refused.is_empty(), "{rep:?}");
    assert_eq!(rep.applied.len(), 9, "{rep:?}");
    let quantum =
        rep.warnings.iter().filter(|w| w.contains("quantum of class") && w.contains("is big")).count();
    assert_eq!(quantum, 4, "one warning per class: {:?}", rep.warnings);
    // The kernel's filters are the model's.
    let plan = Plan::new(&config, IF_SHAPER_SERVER, BurstPolicy::Sluice).unwrap();
    let nodes: Vec<_> = plan.filter_nodes().map(|(_, f)| f).collect();
    assert_eq!(filters::compare(&nodes, &kfilters), Vec::<String>::new(), "{kfilters:#?}");
    assert!(
        kfilters.iter().any(|k| k.handle == 0x0020_5800 && k.classid() == Some(0x1_0030)),
        "{kfilters:#?}"
    );
    // The comparison is not vacuous: a model naming another class differs.
    let mut other = config.clone();
    let f = other.devices[0].filters.iter_mut().find(|f| f.handle == 0x0020_5800).unwrap();
    let sluice_tc::model::FilterOpts::U32(sluice_tc::model::U32Filter::Key(u)) = &mut f.opts else {
        panic!("u32")
    };
    u.classid = Some(sluice_core::Handle::new(1, 0x10));
    let other_plan = Plan::new(&other, IF_SHAPER_SERVER, BurstPolicy::Sluice).unwrap();
    let other_nodes: Vec<_> = other_plan.filter_nodes().map(|(_, f)| f).collect();
    assert_eq!(filters::compare(&other_nodes, &kfilters).len(), 1);

    let ep = Endpoints::of_lab(&lab);
    let win = Window { warmup: Duration::from_millis(200), measure: Duration::from_millis(800) };
    // Each stream alone: the bytes it adds must land in the class its filter names. 7302 hashes to
    // bucket 6 of table 2:, which holds no key: it falls through to the default class 1:20.
    for (port, class) in [(7300u16, 0x1_0010u32), (7301, 0x1_0030), (7302, 0x1_0020)] {
        let before = class_bytes(&lab);
        let s =
            traffic::udp_stream(&ep, Some(Rate::from_bps(20_000_000)), 1000, None, port, win, "udp").unwrap();
        let after = class_bytes(&lab);
        let d: Vec<(u32, u64)> =
            [0x1_0010, 0x1_0020, 0x1_0030].iter().map(|&c| (c, delta(&before, &after, c))).collect();
        let total: u64 = d.iter().map(|(_, b)| b).sum();
        let named = delta(&before, &after, class);
        eprintln!("udp dport {port}: {} datagrams received; class bytes {d:x?}", s.received);
        // At least what the receiver counted in its window went through the named class.
        assert!(named >= s.received * 1000, "port {port}: {named} bytes in {class:#x}, {d:x?}");
        assert!(named as f64 >= 0.99 * total as f64, "port {port}: {d:x?}");
    }
}
