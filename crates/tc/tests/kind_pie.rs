//! pie and fq_pie through the tc front end: tdc-style cases of the grammar, the kernel's change
//! rules and tc 6.1's printing (`q_pie.c`, `q_fq_pie.c`) in `tests/tdc_kinds/`, and exact lines.

use sluice_tc::conform::{fresh_state, run_tdc, Status};
use std::path::PathBuf;

fn tc(state: &mut sluice_model::model::State, line: &str) -> sluice_tc::tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    sluice_tc::tc::run_tc(state, &argv)
}

#[test]
fn tdc_style_cases_pass() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tdc_kinds");
    for f in ["pie.json", "fq_pie.json"] {
        let r = run_tdc(&[dir.join(f)]).unwrap();
        let bad: Vec<String> = r
            .cases
            .iter()
            .filter(|c| c.status != Status::Pass)
            .map(|c| format!("{} {}: {:?}", c.id, c.name, c.status))
            .collect();
        assert!(bad.is_empty(), "{f}:\n{}", bad.join("\n"));
        assert!(r.cases.len() >= 10);
    }
}

#[test]
fn lines_as_tc_prints_them() {
    let mut s = fresh_state();
    assert_eq!(tc(&mut s, "qdisc add dev dummy1 root handle 1: pie target 20ms ecn").code, 0);
    assert_eq!(
        tc(&mut s, "qdisc show dev dummy1").stdout,
        "qdisc pie 1: root refcnt 2 limit 1000p target 20ms tupdate 16ms alpha 2 beta 20 ecn \n"
    );
    let o = tc(&mut s, "-s qdisc show dev dummy1").stdout;
    assert!(o.ends_with("  prob 0 delay 0us\n  pkts_in 0 overlimit 0 dropped 0 maxq 0 ecn_mark 0\n"), "{o}");
    let o = tc(&mut s, "qdisc add dev dummy1 root handle 2: pie alpha 40");
    assert_eq!((o.code, o.stderr.as_str()), (1, "Illegal \"alpha\"\n"));
    let o = tc(&mut s, "qdisc add dev v0p0 root handle 2: fq_pie flows 70000");
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (2, "Error: fq_pie: Number of flows must range in [1..65536].\n")
    );
    assert_eq!(tc(&mut s, "qdisc add dev v0p0 root handle 2: fq_pie flows 8 quantum 300").code, 0);
    let o = tc(&mut s, "qdisc change dev v0p0 root handle 2: fq_pie flows 8");
    assert_eq!((o.code, o.stderr.as_str()), (2, "Error: fq_pie: Number of flows cannot be changed.\n"));
    assert_eq!(
        tc(&mut s, "qdisc show dev v0p0").stdout,
        "qdisc fq_pie 2: root refcnt 2 limit 10240p flows 8 target 15ms tupdate 16ms alpha 2 beta 20 quantum 300b memory_limit 32Mb ecn_prob 10 \n"
    );
    let o = tc(&mut s, "qdisc add dev dummy1 root handle 3: fq_pie help");
    assert!(o.stderr.starts_with("Usage: ... fq_pie [ limit PACKETS ] [ flows NUMBER ]"), "{}", o.stderr);
}
