//! Reading the kernel's tree by parent (`plan::dump_tree`: one class dump per classful qdisc, or
//! one for the device above 256 of them) gives exactly what one device-wide dump gives, on `lo`
//! of a private namespace (root only; skips loudly otherwise).

use sluice_kernel::kernel::{script_state, Plan};
use sluice_kernel::netlink::{flags, rtm, Msg, Netlink, TcMsg};
use sluice_kernel::plan::dump_tree;
use sluice_kernel::txn::{apply_plan, ApplyOptions};
use sluice_tc::burst::BurstPolicy;
use std::fmt::Write;

/// An HTB root, `sites` site classes each holding an HTB qdisc with two subscriber classes, one
/// with a pfifo leaf.
fn tree(sites: usize) -> String {
    let mut s = String::from(
        "tc qdisc add dev lo root handle 1: htb default 2\n\
         tc class add dev lo parent 1: classid 1:1 htb rate 1gbit\n\
         tc class add dev lo parent 1:1 classid 1:2 htb rate 1mbit ceil 1gbit\n",
    );
    for i in 0..sites {
        let h = 0x10 + i;
        let _ = writeln!(s, "tc class add dev lo parent 1:1 classid 1:{h:x} htb rate 1mbit ceil 1gbit");
        let _ = writeln!(s, "tc qdisc add dev lo parent 1:{h:x} handle {h:x}: htb");
        let _ = writeln!(s, "tc class add dev lo parent {h:x}: classid {h:x}:1 htb rate 1mbit ceil 10mbit");
        let _ = writeln!(s, "tc class add dev lo parent {h:x}: classid {h:x}:2 htb rate 2mbit ceil 10mbit");
        let _ = writeln!(s, "tc qdisc add dev lo parent {h:x}:1 handle {:x}: pfifo limit 10", 0x1000 + i);
    }
    s
}

#[test]
fn the_tree_read_by_parent_is_the_device_wide_dump() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("\n*** SKIPPING the_tree_read_by_parent_is_the_device_wide_dump: needs root ***\n");
        return;
    }
    std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        // 3 sites: classes read one qdisc at a time; 300: more than 256 classful qdiscs, one dump.
        for sites in [3, 300] {
            let state = script_state(&tree(sites), &[]).unwrap();
            let plan = Plan::new(&state, "lo", BurstPolicy::Sluice).unwrap();
            apply_plan(&plan, ApplyOptions { probe: false }).unwrap();
            let mut nl = Netlink::open().unwrap();
            let ifindex = nl.ifindex("lo").unwrap();
            let mut whole = Vec::new();
            for (kind, is_qdisc) in [(rtm::GETQDISC, true), (rtm::GETTCLASS, false)] {
                let req =
                    &mut Msg::tc(kind, flags::REQUEST | flags::DUMP, TcMsg { ifindex, ..TcMsg::default() });
                for o in nl.dump(req).unwrap().into_iter().filter(|o| o.tc.handle != 0) {
                    whole.push((is_qdisc, o.tc.handle, o.kind_str(), o.options().to_vec()));
                }
            }
            let mut by_parent: Vec<_> = dump_tree(&mut nl, ifindex)
                .unwrap()
                .into_iter()
                .map(|r| (r.is_qdisc, r.handle, r.kind, r.options.unwrap_or_default()))
                .collect();
            whole.sort();
            by_parent.sort();
            assert_eq!(whole.len(), 3 + 5 * sites, "{sites} sites: the kernel holds the whole tree");
            assert!(
                by_parent == whole,
                "{sites} sites: the read by parent differs from the device-wide dump"
            );
        }
    })
    .join()
    .unwrap();
}
