//! Ingress and clsact qdiscs, filters on their hooks, the mirred action and IFB devices.
//! Expected texts were recorded from the kernel (6.18, iproute2 6.1) in a scratch namespace.

use sluice_config::{run_ip, run_tc, State};

fn tc(s: &mut State, line: &str) -> sluice_config::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(s, &argv)
}

fn ip(s: &mut State, line: &str) -> sluice_config::Outcome {
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
