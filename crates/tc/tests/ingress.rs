//! Ingress and clsact qdiscs, filters on their hooks, the mirred action and IFB devices.
//! Expected texts were recorded from the kernel (6.18, iproute2 6.1) in a scratch namespace.

use sluice_tc::{run_ip, run_tc, State};

fn tc(s: &mut State, line: &str) -> sluice_tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(s, &argv)
}

fn ip(s: &mut State, line: &str) -> sluice_tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_ip(s, &argv)
}

fn setup() -> State {
    let mut s = State::default();
    assert_eq!(ip(&mut s, "link add vin0 type veth peer name vin1").code, 0);
    assert_eq!(ip(&mut s, "link add ifb0 type dummy").code, 0);
    s
}

#[test]
fn mirred_in_a_filter_prints_as_tc_does() {
    let mut s = setup();
    assert_eq!(tc(&mut s, "qdisc add dev vin0 ingress").code, 0);
    let add = |s: &mut State, prio: u32, act: &str| {
        tc(
            s,
            &format!(
                "filter add dev vin0 parent ffff: protocol ip prio {prio} u32 match u32 0 0 action {act}"
            ),
        )
    };
    assert_eq!(add(&mut s, 3, "mirred egress mirror dev ifb0 pass").code, 0);
    assert_eq!(add(&mut s, 4, "mirred ingress mirror dev ifb0 index 7").code, 0);
    assert_eq!(add(&mut s, 11, "mirred egress redirect dev ifb0 index 9").code, 0);
    let show = tc(&mut s, "filter show dev vin0 parent ffff:").stdout;
    let want = "filter protocol ip pref 3 u32 chain 0 \n\
filter protocol ip pref 3 u32 chain 0 fh 800: ht divisor 1 \n\
filter protocol ip pref 3 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 terminal flowid not_in_hw \n\
\x20 match 00000000/00000000 at 0\n\
\taction order 1: mirred (Egress Mirror to device ifb0) pass\n\
\tindex 1 ref 1 bind 1\n\
\n\
filter protocol ip pref 4 u32 chain 0 \n\
filter protocol ip pref 4 u32 chain 0 fh 801: ht divisor 1 \n\
filter protocol ip pref 4 u32 chain 0 fh 801::800 order 2048 key ht 801 bkt 0 terminal flowid not_in_hw \n\
\x20 match 00000000/00000000 at 0\n\
\taction order 1: mirred (Ingress Mirror to device ifb0) pipe\n\
\tindex 7 ref 1 bind 1\n\
\n\
filter protocol ip pref 11 u32 chain 0 \n\
filter protocol ip pref 11 u32 chain 0 fh 802: ht divisor 1 \n\
filter protocol ip pref 11 u32 chain 0 fh 802::800 order 2048 key ht 802 bkt 0 terminal flowid not_in_hw \n\
\x20 match 00000000/00000000 at 0\n\
\taction order 1: mirred (Egress Redirect to device ifb0) stolen\n\
\tindex 9 ref 1 bind 1\n\
\n";
    assert_eq!(show, want);
}

#[test]
fn mirred_grammar_refusals_follow_tc() {
    let mut s = setup();
    tc(&mut s, "qdisc add dev vin0 ingress");
    let add = |s: &mut State, act: &str| {
        tc(s, &format!("filter add dev vin0 parent ffff: protocol ip prio 5 u32 match u32 0 0 action {act}"))
    };
    let o = add(&mut s, "mirred egress redirect dev nosuch");
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("Cannot find device \"nosuch\"\n"), "{o:?}");
    let o = add(&mut s, "mirred redirect dev ifb0");
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "mirred option not supported redirect\nbad action parsing\nparse_action: bad value (4:mirred)!\nIllegal \"action\"\n"
    );
    let o = add(&mut s, "mirred egress dev ifb0");
    assert_eq!((o.code, o.stderr.as_str()), (255, "Command line is not complete. Try option \"help\"\n"));
    let o = add(&mut s, "mirred egress redirect");
    assert_eq!((o.code, o.stderr.as_str()), (255, "Command line is not complete. Try option \"help\"\n"));
    // A redirect takes no verdict: tc's action loop reads `pass` as a second (gact) action, and
    // this machine's tc gets as far as the kernel with it ("Failed to load TC action module").
    let o = add(&mut s, "mirred egress redirect dev ifb0 pass");
    assert_eq!(o.code, 0, "{o:?}");
    let show = tc(&mut s, "filter show dev vin0 parent ffff:").stdout;
    assert!(show.contains("action order 2: gact action pass"), "{show}");
    tc(&mut s, "filter del dev vin0 parent ffff: prio 5");
    let before = s.clone();
    assert_ne!(add(&mut s, "mirred egress mirror redirect dev ifb0").code, 0);
    assert_eq!(s, before);
}

fn up_pair() -> State {
    let mut s = State::default();
    assert_eq!(ip(&mut s, "link add dm0 type veth peer name dm1").code, 0);
    s
}

fn err(o: &sluice_tc::Outcome) -> (u8, &str) {
    (o.code, o.stderr.as_str())
}

#[test]
fn ingress_and_clsact_qdiscs_refuse_as_the_kernel_does() {
    let mut s = up_pair();
    let o = tc(&mut s, "qdisc del dev dm0 ingress");
    assert_eq!(err(&o), (2, "Error: Cannot find specified qdisc on specified device.\n"));
    assert_eq!(tc(&mut s, "qdisc add dev dm0 ingress handle ffff:").code, 0, "q_ingress skips `handle`");
    let o = tc(&mut s, "qdisc add dev dm0 ingress");
    assert_eq!(err(&o), (2, "Error: Exclusivity flag on, cannot modify.\n"));
    let o = tc(&mut s, "qdisc add dev dm0 parent ffff: handle 2: pfifo");
    assert_eq!(err(&o), (2, "Error: Cannot add children to ingress/clsact qdisc.\n"));
    let o = tc(&mut s, "class add dev dm0 parent ffff: classid ffff:1 htb rate 1mbit");
    assert_eq!(err(&o), (2, "RTNETLINK answers: File exists\n"));
    let o = tc(&mut s, "class change dev dm0 parent ffff: classid ffff:1 htb rate 1mbit");
    assert_eq!(err(&o), (2, "RTNETLINK answers: Operation not supported\n"));
    assert_eq!(tc(&mut s, "qdisc del dev dm0 ingress").code, 0);
    // The ingress queue stays once made: a second delete finds the noop qdisc (handle 0).
    let o = tc(&mut s, "qdisc del dev dm0 ingress");
    assert_eq!(err(&o), (2, "Error: Invalid handle.\n"));
    let o = tc(&mut s, "qdisc del dev dm0 parent ffff:fff1");
    assert_eq!(err(&o), (2, "Error: Cannot delete qdisc with handle of zero.\n"));
    let o = tc(&mut s, "qdisc add dev dm0 root ingress");
    assert_eq!(err(&o), (255, "Error: \"ingress\" is a duplicate parent ID\n"));
    let o = tc(&mut s, "qdisc add dev dm0 ingress foo");
    assert_eq!(err(&o), (1, "What is \"foo\"?\nUsage: ... ingress\n"));
    let o = tc(&mut s, "qdisc add dev dm0 clsact handle ffff:");
    assert_eq!(err(&o), (1, "What is \"handle\"?\nUsage: ... clsact\n"));
    assert_eq!(tc(&mut s, "qdisc add dev dm0 handle 5: clsact").code, 0, "clsact's handle is always ffff:");
    let o = tc(&mut s, "class add dev dm0 parent ffff: classid ffff:1 htb rate 1mbit");
    assert_eq!(err(&o), (2, "RTNETLINK answers: Operation not supported\n"));
    let o = tc(&mut s, "class change dev dm0 parent ffff: classid ffff:1 htb rate 1mbit");
    assert_eq!(err(&o), (2, "RTNETLINK answers: No such file or directory\n"));
    let f = "protocol ip prio 2 u32 match ip dst 198.18.0.1/32 action mirred egress redirect dev dm1";
    let o = tc(&mut s, &format!("filter add dev dm0 parent ffff: {f}"));
    assert_eq!(err(&o), (2, "RTNETLINK answers: Invalid argument\nWe have an error talking to the kernel\n"));
    let o = tc(&mut s, &format!("filter add dev dm0 parent ffff:5 {f}"));
    assert_eq!(
        err(&o),
        (2, "Error: Specified class doesn't exist.\nWe have an error talking to the kernel\n")
    );
    assert_eq!(
        tc(&mut s, "qdisc show dev dm0").stdout,
        "qdisc noqueue 0: root refcnt 2 \nqdisc clsact ffff: parent ffff:fff1 \n"
    );
}

#[test]
fn ingress_filters_show_with_the_last_parent_named() {
    let mut s = up_pair();
    tc(&mut s, "qdisc add dev dm0 ingress");
    for (parent, prio) in [("parent ffff:", 1), ("egress", 2), ("parent ffff:7", 3)] {
        let o = tc(
            &mut s,
            &format!("filter add dev dm0 {parent} protocol ip prio {prio} u32 match ip dst 198.18.0.1/32 action mirred egress redirect dev dm1"),
        );
        assert_eq!(o.code, 0, "{o:?}");
    }
    let heads = |s: &mut State, parent: &str| -> Vec<String> {
        let out = tc(s, &format!("filter show dev dm0 {parent}")).stdout;
        out.lines().filter(|l| l.starts_with("filter") && l.ends_with("chain 0 ")).map(String::from).collect()
    };
    // Recorded from the kernel: every filter of the ingress qdisc is dumped with `ffff:7`.
    let want: Vec<String> =
        (1..=3).map(|p| format!("filter parent ffff:7 protocol ip pref {p} u32 chain 0 ")).collect();
    assert_eq!(heads(&mut s, "parent ffff:"), want);
    assert_eq!(heads(&mut s, "ingress"), want);
    let bare: Vec<String> = (1..=3).map(|p| format!("filter protocol ip pref {p} u32 chain 0 ")).collect();
    assert_eq!(heads(&mut s, "parent ffff:7"), bare);
    tc(&mut s, "filter del dev dm0 parent ffff:5 prio 3");
    assert_eq!(heads(&mut s, "parent ffff:9").len(), 2, "a delete keeps the parent shown");
    assert!(heads(&mut s, "parent ffff:9")[0].starts_with("filter parent ffff:7 "));
}

#[test]
fn clsact_hooks_share_u32_table_ids() {
    let mut s = up_pair();
    tc(&mut s, "qdisc add dev dm0 clsact");
    tc(&mut s, "filter add dev dm0 ingress protocol all prio 2 u32 match u32 0 0 action mirred egress redirect dev dm1");
    tc(&mut s, "filter add dev dm0 egress protocol all prio 3 u32 match u32 0 0 action mirred ingress redirect dev dm1");
    let out = tc(&mut s, "filter show dev dm0 egress").stdout;
    assert!(out.contains("fh 801::800 order 2048 key ht 801 bkt 0 terminal flowid not_in_hw \n"), "{out}");
    assert!(out.contains("mirred (Ingress Redirect to device dm1) stolen"), "{out}");
}

#[test]
fn ifb_devices_have_a_queue_of_32() {
    let mut s = State::default();
    assert_eq!(ip(&mut s, "link add ifb0 type ifb").code, 0);
    assert_eq!(ip(&mut s, "link set dev ifb0 up").code, 0);
    // Recorded from the kernel: an IFB starts with pfifo_fast, and pfifo takes its qlen of 32.
    assert_eq!(
        tc(&mut s, "qdisc show dev ifb0").stdout,
        "qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n"
    );
    tc(&mut s, "qdisc add dev ifb0 root handle 1: pfifo");
    assert_eq!(tc(&mut s, "qdisc show dev ifb0").stdout, "qdisc pfifo 1: root refcnt 2 limit 32p\n");
    let shown = ip(&mut s, "link show ifb0").stdout;
    assert!(shown.contains("qlen 32") && shown.contains("ifb"), "{shown}");
}
