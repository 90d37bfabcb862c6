//! Issue 25 item 5: N filters with actions in one batch cost O(N log N) table work, not O(N²)
//! per filter (which made 4 000 filters with `action police` take 143 s). Counts the table
//! entries the action code looks at (`actions::PROBES`); no timing. Alone in its binary so no
//! other test moves the counter.

use sluice_tc::model::{DevKind, Device, State};
use std::sync::atomic::Ordering;

fn ok(s: &mut State, line: &str) {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    let o = sluice_tc::run_tc(s, &argv);
    assert_eq!(o.code, 0, "{line}: {o:?}");
}

#[test]
fn filters_with_actions_cost_logarithmic_table_work() {
    let mut s = State::default();
    s.devices.push(Device::new("x0", DevKind::Dummy, 2));
    ok(&mut s, "qdisc add dev x0 root handle 1: htb");
    ok(&mut s, "class add dev x0 parent 1: classid 1:10 htb rate 10mbit");
    let n = 3000u32;
    let start = sluice_tc::tc::actions::PROBES.load(Ordering::Relaxed);
    for i in 0..n {
        let act = if i % 2 == 0 { "action police rate 1mbit burst 10k drop" } else { "action gact drop" };
        ok(
            &mut s,
            &format!(
                "filter add dev x0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.{}.{}/32 flowid 1:10 {act}",
                i / 256,
                i % 256
            ),
        );
    }
    let work = sluice_tc::tc::actions::PROBES.load(Ordering::Relaxed) - start;
    // O(N log N): about 4 binary searches of ~12 steps per filter. A scan of the table or of
    // the filters per command would be over N²/2 = 4.5 million.
    assert!(work < n as u64 * 200, "{work} table probes for {n} filters");
    assert_eq!(s.actions.len(), n as usize);
    // Every kind's indexes run 1..=n/2 in order: the lowest free index each time.
    for kind in ["police", "gact"] {
        let idx: Vec<u32> =
            s.actions.iter().filter(|e| e.action.kind() == kind).map(|e| e.action.index()).collect();
        assert_eq!(idx, (1..=n / 2).collect::<Vec<_>>(), "{kind}");
    }
    // Deleting the filters (one full check each time) drops their actions.
    ok(&mut s, "filter del dev x0 parent 1:");
    assert!(s.actions.is_empty());
}
