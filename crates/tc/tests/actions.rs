//! `tc actions` objects and their sharing with filters, as the kernel counts them. Expected
//! output: mirred's from this machine's kernel (iproute2 6.1 tc, recorded in a namespace of our
//! own); gact's, police's and skbedit's from iproute2 v6.1.0's m_gact.c, m_police.c and
//! m_skbedit.c (this kernel has no act_gact, act_police or act_skbedit).

use sluice_tc::model::{DevKind, Device, State};
use sluice_tc::tc::Outcome;

fn setup() -> State {
    let mut s = State::default();
    for (n, p) in [("vac0", "vac1"), ("vac1", "vac0")] {
        let i = s.next_ifindex;
        s.next_ifindex += 1;
        s.devices.push(Device::new(n, DevKind::Veth { peer: p.into() }, i));
    }
    s
}

fn tc(s: &mut State, line: &str) -> Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    let before = s.clone();
    let o = sluice_tc::run_tc(s, &argv);
    if o.code != 0 {
        assert_eq!(*s, before, "a failed command changed the state: {line}");
    }
    o
}

fn ok(s: &mut State, line: &str) -> String {
    let o = tc(s, line);
    assert_eq!(o.code, 0, "{line}: {o:?}");
    o.stdout
}

#[test]
fn mirred_list_matches_the_kernel() {
    // Recorded here: `tc actions add action mirred egress mirror dev lo index 1`, a u32 filter
    // on clsact egress with `action mirred egress redirect dev lo index 3`, then
    // `tc actions ls action mirred` and `tc actions get action mirred index 1`.
    let mut s = setup();
    ok(&mut s, "qdisc add dev vac0 clsact");
    ok(&mut s, "actions add action mirred egress mirror dev lo index 1");
    ok(&mut s, "filter add dev vac0 egress protocol ip u32 match u32 0 0 action mirred egress redirect dev lo index 3");
    assert_eq!(
        ok(&mut s, "actions ls action mirred"),
        "total acts 2\n\n\taction order 0: mirred (Egress Mirror to device lo) pipe\n\tindex 1 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n\n\taction order 1: mirred (Egress Redirect to device lo) stolen\n\tindex 3 ref 1 bind 1\n\tnot_in_hw\n\tused_hw_stats disabled\n"
    );
    assert_eq!(
        ok(&mut s, "actions get action mirred index 1"),
        "total acts 0\n\n\taction order 1: mirred (Egress Mirror to device lo) pipe\n\tindex 1 ref 1 bind 0\n\tnot_in_hw\n"
    );
    // Recorded: deleting the filter's action fails; flushing stops at it (the kernel walks
    // the table in index order and has already freed index 1).
    let o = tc(&mut s, "actions del action mirred index 3");
    assert_eq!(o.code, 255);
    assert_eq!(
        o.stderr,
        "Error: Failed to delete TC action.\nWe have an error talking to the kernel\nCommand \"action\" is unknown, try \"tc actions help\".\n"
    );
    let o = tc(&mut s, "actions flush action mirred");
    assert_eq!((o.code, o.stderr.as_str()), (0, "Warning: Unable to flush all TC actions.\n"));
    let o = tc(&mut s, "actions flush action mirred");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (1, "RTNETLINK answers: Operation not permitted\nWe have an error flushing\n")
    );
    // The filter's action goes away with the filter.
    ok(&mut s, "filter del dev vac0 egress");
    assert_eq!(ok(&mut s, "actions ls action mirred"), "");
    assert!(s.actions.is_empty());
    let o = tc(&mut s, "actions add action mirred egress mirror dev nosuch index 1");
    assert_eq!(o.code, 255);
    assert!(o.stderr.starts_with("Cannot find device \"nosuch\"\n"), "{o:?}");
}

#[test]
fn a_filter_binds_an_action_by_index_and_the_counts_follow() {
    let mut s = setup();
    ok(&mut s, "qdisc add dev vac0 root handle 1: htb");
    ok(&mut s, "actions add action police rate 1mbit burst 10k index 7");
    // `index 7` binds the existing policer: the filter's own parameters are ignored.
    ok(&mut s, "filter add dev vac0 parent 1: prio 1 protocol ip u32 match u32 0 0 action police rate 5mbit burst 20k index 7");
    ok(&mut s, "filter add dev vac0 parent 1: prio 2 protocol ip u32 match u32 0 0 action police index 7");
    let list = ok(&mut s, "actions ls action police");
    assert_eq!(
        list,
        "total acts 1\n\n\taction order 0:  police 0x7 rate 1Mbit burst 10Kb mtu 2Kb action reclassify overhead 0b \n\tref 3 bind 2 \n\tnot_in_hw\n\tused_hw_stats disabled\n"
    );
    let show = ok(&mut s, "filter show dev vac0 parent 1: prio 1");
    assert!(show.contains("\taction order 1:  police 0x7 rate 1Mbit burst 10Kb mtu 2Kb action reclassify overhead 0b \n\tref 3 bind 2 \n"), "{show}");
    assert_ne!(tc(&mut s, "actions del action police index 7").code, 0);
    // Replacing the action changes what every filter holding it runs and shows.
    ok(&mut s, "actions replace action police rate 2mbit burst 10k drop index 7");
    let show = ok(&mut s, "filter show dev vac0 parent 1: prio 2");
    assert!(show.contains("police 0x7 rate 2Mbit burst 10Kb mtu 2Kb action drop overhead 0b"), "{show}");
    ok(&mut s, "filter del dev vac0 parent 1: prio 1");
    ok(&mut s, "filter del dev vac0 parent 1: prio 2");
    assert!(ok(&mut s, "actions get action police index 7").contains("\tref 1 bind 0 \n"));
    ok(&mut s, "actions del action police index 7");
    assert!(s.actions.is_empty());
}

#[test]
fn inline_actions_take_the_lowest_free_index_per_kind() {
    let mut s = setup();
    ok(&mut s, "qdisc add dev vac0 root handle 1: htb");
    ok(&mut s, "actions add action drop index 1");
    ok(&mut s, "actions add action skbedit mark 5 index 1");
    ok(&mut s, "filter add dev vac0 parent 1: prio 1 protocol ip u32 match u32 0 0 action pass action skbedit priority 1:10");
    let show = ok(&mut s, "filter show dev vac0 parent 1:");
    assert!(
        show.contains("gact action pass\n\t random type none pass val 0\n\t index 2 ref 1 bind 1\n"),
        "{show}"
    );
    assert!(show.contains("skbedit  priority 1:10 pipe\n\t index 2 ref 1 bind 1\n"), "{show}");
    // Deleting the qdisc drops its filters, and with them the actions they made.
    ok(&mut s, "qdisc del dev vac0 root");
    let kinds: Vec<(String, u32)> =
        s.actions.iter().map(|e| (e.action.kind().to_string(), e.action.index())).collect();
    assert_eq!(kinds, [("gact".to_string(), 1), ("skbedit".to_string(), 1)]);
}

#[test]
fn standalone_actions_print_as_iproute2() {
    let mut s = setup();
    ok(&mut s, "actions add action drop random determ pipe 3 index 5 cookie A1B2");
    ok(&mut s, "actions add action jump 2 index 6");
    assert_eq!(
        ok(&mut s, "actions get action gact index 5 action gact index 6"),
        "total acts 0\n\n\taction order 1: gact action drop\n\t random type determ pipe val 3\n\t index 5 ref 1 bind 0\n\tcookie a1b2\n\tnot_in_hw\n\n\taction order 2: gact action jump 2\n\t random type none pass val 0\n\t index 6 ref 1 bind 0\n\tnot_in_hw\n"
    );
    ok(&mut s, "actions add action skbedit queue_mapping 3 mark 0x10/0xff ptype multicast inheritdsfield continue index 9");
    assert!(ok(&mut s, "actions ls action skbedit").contains(
        "action order 0: skbedit queue_mapping 3 mark 16/0xff ptype multicast inheritdsfield continue\n\t index 9 ref 1 bind 0\n"
    ));
    ok(&mut s, "actions add action police rate 3mbit burst 250k conform-exceed drop/continue overhead 20 linklayer atm index 2");
    ok(&mut s, "actions add action police pkts_rate 1000 pkts_burst 200 index 3");
    let p = ok(&mut s, "actions ls action police");
    assert!(p.contains("action order 0:  police 0x2 rate 3Mbit burst 250Kb mtu 2Kb action drop/continue overhead 20b linklayer atm \n"), "{p}");
    assert!(p.contains("action order 1:  police 0x3 rate 0bit burst 0b mtu 4096Mb pkts_rate 1000 pkts_burst 200 action reclassify overhead 0b \n"), "{p}");
    // `-s`: statistics, and the time since the action was made (whole seconds, as tc prints
    // the kernel's clock ticks).
    for e in &mut s.actions {
        e.installed_ms -= 2500;
    }
    let st = ok(&mut s, "-s actions get action gact index 6");
    assert!(st.contains("\t index 6 ref 1 bind 0 installed 2 sec used 2 sec\n\tAction statistics:\n\tSent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n\tbacklog 0b 0p requeues 0\n"), "{st}");
}

#[test]
fn refusals_follow_tc_and_the_kernel() {
    let mut s = setup();
    ok(&mut s, "actions add action pass index 4");
    let o = tc(&mut s, "actions add action drop index 4");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (255, "RTNETLINK answers: File exists\nWe have an error talking to the kernel\n")
    );
    // Recorded with mirred: an index made twice in one command is busy (EAGAIN).
    let o = tc(&mut s, "actions add action mirred egress redirect dev lo index 5 cookie 0011 action mirred egress mirror dev lo index 5");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (
            255,
            "RTNETLINK answers: Resource temporarily unavailable\nWe have an error talking to the kernel\n"
        )
    );
    // One bad action undoes the whole list.
    let o = tc(&mut s, "actions add action drop index 8 action pass index 4");
    assert_eq!(o.code, 255);
    let o = tc(&mut s, "actions add action goto chain 3 index 9");
    assert_eq!(o.stderr, "Error: can't goto NULL proto/chain.\nWe have an error talking to the kernel\n");
    let o = tc(&mut s, "actions add action police rate 1mbit burst 10k conform-exceed pass / goto chain 4");
    assert_eq!(o.code, 255);
    assert!(o.stderr.starts_with("Error: goto chain not allowed on fallback."), "{o:?}");
    let o = tc(&mut s, "actions get action gact index 77");
    assert_eq!(o.code, 255);
    assert!(o.stderr.starts_with("Error: TC action with specified index not found.\n"), "{o:?}");
    let o = tc(&mut s, "actions get action police");
    assert_eq!((o.code, o.stderr.as_str()), (255, "Error: no index specified action: police\n"));
    let o = tc(&mut s, "actions add action skbedit index 12");
    assert_eq!(o.code, 255);
    let o = tc(&mut s, "actions list action nosuch");
    assert_eq!((o.code, o.stderr.as_str()), (0, "bad action nosuch\n"));
    // In a filter, goto chain is allowed (the filter gives the chain a block).
    ok(&mut s, "qdisc add dev vac0 root handle 1: htb");
    ok(&mut s, "filter add dev vac0 parent 1: prio 1 protocol ip u32 match u32 0 0 action goto chain 3");
}

#[test]
fn thirty_two_actions_in_one_command() {
    let mut s = setup();
    let add: String = (1..=32)
        .map(|i| {
            format!("action mirred egress redirect dev lo index {i} cookie aabbccddeeff112233445566778800a1 ")
        })
        .collect();
    ok(&mut s, &format!("actions add {add}"));
    let list = ok(&mut s, "actions list action mirred");
    assert!(list.starts_with("total acts 32\n"));
    assert_eq!(list.matches("\tcookie aabbccddeeff112233445566778800a1\n").count(), 32);
    let del: String = (1..=32).map(|i| format!("action mirred index {i} ")).collect();
    ok(&mut s, &format!("actions del {del}"));
    assert_eq!(ok(&mut s, "actions list action mirred"), "");
}

#[test]
fn the_state_file_keeps_the_table() {
    let mut s = setup();
    ok(&mut s, "actions add action skbedit priority 1:10 index 3 cookie 00ff");
    ok(&mut s, "actions add action drop random netrand jump 2 50 index 4");
    let o = tc(&mut s, "actions add action drop random netrand goto chain 2 50 index 5");
    assert!(o.stderr.starts_with("Error: goto chain not allowed on fallback."), "{o:?}");
    ok(&mut s, "actions add action police rate 1mbit burst 10k conform-exceed drop/continue index 2");
    let text = serde_json::to_string(&s).unwrap();
    let back = sluice_tc::statefile::parse(&text).unwrap();
    assert_eq!(back, s);
}
