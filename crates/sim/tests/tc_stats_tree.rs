//! `--tc-stats` after a run: every child qdisc and class of a classful root that carried traffic
//! shows it in `tc -s qdisc show` / `tc -s class show`, whatever the kinds (the counters come from
//! a walk of the running tree through the `Qdisc` trait, not from a list of kinds).

use sluice_sim::run::{run_with_tc_stats, RunOptions};
use sluice_sim::scenario::Scenario;

/// `tc -s` text of one run: `tc` as the shaper of a 10 Mbit/s link, one 2 Mbit/s UDP flow of
/// 1000-byte packets per port (the link is never full: the trees are work-conserving).
fn tc_stats(tc: &str, ports: &[u16]) -> String {
    let mut src = String::from(
        "name = \"tree\"\ndescription = \"counters of a tree\"\nduration = \"3s\"\nwarmup = \"1s\"\n\
         [[link]]\nname = \"eth0\"\nrate = \"10mbit\"\nqueue = \"shaper\"\n",
    );
    src += &format!("[shaper]\ntc = \"\"\"\n{tc}\"\"\"\n");
    for p in ports {
        src += &format!(
            "[[flow]]\nname = \"f{p}\"\ntype = \"cbr\"\nrate = \"2mbit\"\nsize = 1000\nport = {p}\n"
        );
    }
    let sc = Scenario::parse("tree.toml", &src).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { overrides: Vec::new(), seed: None, force: false };
    let (_, _, tc) = run_with_tc_stats(&sc, &opts, &|_| {}).unwrap_or_else(|e| panic!("{e}"));
    let text = tc.into_iter().map(|(_, t)| t).collect::<String>();
    eprintln!("{text}");
    text
}

/// One `qdisc ...` or `class ...` line of `tc -s` text and the `Sent` line below it.
#[derive(Debug)]
struct Row {
    /// `qdisc` or `class`.
    what: String,
    kind: String,
    /// `1:` or `1:10`.
    id: String,
    /// `parent X` (or `root`), as printed.
    parent: String,
    bytes: u64,
    pkts: u64,
    /// The two counter lines, as printed.
    counters: String,
}

fn rows(text: &str) -> Vec<Row> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 4 || (w[0] != "qdisc" && w[0] != "class") {
            continue;
        }
        let s: Vec<&str> = lines[i + 1].split_whitespace().collect();
        assert_eq!((s[0], s[2], s[4]), ("Sent", "bytes", "pkt"), "no counters below `{l}`");
        let parent_at = w.iter().position(|x| *x == "parent" || *x == "root").unwrap();
        let parent = if w[parent_at] == "root" { "root".into() } else { w[parent_at + 1].to_string() };
        out.push(Row {
            what: w[0].into(),
            kind: w[1].into(),
            id: w[2].into(),
            parent,
            bytes: s[1].parse().unwrap(),
            pkts: s[3].parse().unwrap(),
            counters: format!("{}\n{}", lines[i + 1], lines[i + 2]),
        });
    }
    out
}

fn row<'a>(rows: &'a [Row], what: &str, id: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.what == what && r.id == id)
        .unwrap_or_else(|| panic!("no {what} {id} in {rows:#?}"))
}

/// Every qdisc and each of `classes` sent something; the qdiscs below the root together sent
/// what the root sent.
fn check(text: &str, classes: &[&str]) -> Vec<Row> {
    let r = rows(text);
    let qdiscs: Vec<&Row> = r.iter().filter(|r| r.what == "qdisc").collect();
    assert!(qdiscs.len() > 1, "no child qdisc in\n{text}");
    for q in &qdiscs {
        assert!(q.pkts > 0 && q.bytes > 0, "qdisc {} {} sent nothing:\n{text}", q.kind, q.id);
    }
    for c in classes {
        let c = row(&r, "class", c);
        assert!(c.pkts > 0 && c.bytes > 0, "class {} {} sent nothing:\n{text}", c.kind, c.id);
    }
    let root = qdiscs.iter().find(|q| q.parent == "root").unwrap();
    let children: u64 = qdiscs.iter().filter(|q| q.parent != "root").map(|q| q.pkts).sum();
    assert_eq!(children, root.pkts, "children vs root {}:\n{text}", root.kind);
    let bytes: u64 = qdiscs.iter().filter(|q| q.parent != "root").map(|q| q.bytes).sum();
    assert_eq!(bytes, root.bytes, "children vs root {} (bytes):\n{text}", root.kind);
    r
}

const FILTERS: &str = "\
tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:1
tc filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 5002 0xffff flowid 1:2
tc filter add dev eth0 parent 1: protocol ip prio 3 u32 match ip dport 5003 0xffff flowid 1:3
";

/// The case of issue 24: a prio root with three sfq children.
#[test]
fn prio_bands_and_their_sfq_children_show_their_counters() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: prio\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: sfq\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: sfq\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: sfq\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:1", "1:2", "1:3"]);
    same_as_children(&r);
}

/// Each class of `r` that has a qdisc counts what that qdisc counts: prio, ETS and DRR copy their
/// child's queue counters into the class's (`prio_dump_class_stats`, `ets_class_dump_stats`,
/// `drr_dump_class_stats`; DRR's and ETS's `Sent` is the class's own, which is the child's).
fn same_as_children(r: &[Row]) {
    for (c, q) in [("1:1", "10:"), ("1:2", "20:"), ("1:3", "30:")] {
        let (c, q) = (row(r, "class", c), row(r, "qdisc", q));
        assert_eq!(c.counters, q.counters, "class {} vs qdisc {}", c.id, q.id);
    }
}

#[test]
fn ets_bands_show_their_counters() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: ets bands 3 strict 1 quanta 1500 3000\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: pfifo\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: fq_codel\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: sfq\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:1", "1:2", "1:3"]);
    same_as_children(&r);
}

#[test]
fn drr_classes_and_their_children_show_their_counters() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: drr\n\
             tc class add dev eth0 parent 1: classid 1:1 drr quantum 1500\n\
             tc class add dev eth0 parent 1: classid 1:2 drr\n\
             tc class add dev eth0 parent 1: classid 1:3 drr quantum 3000\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: fq_codel\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: sfq\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: pfifo limit 100\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:1", "1:2", "1:3"]);
    same_as_children(&r);
}

/// A DRR class over a TBF that cannot keep up: the class shows its child's drops, overlimits and
/// backlog, as `drr_dump_class_stats` copies them.
#[test]
fn drr_class_over_a_throttled_tbf_shows_its_drops_overlimits_and_backlog() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: drr\n\
             tc class add dev eth0 parent 1: classid 1:1 drr\n\
             tc class add dev eth0 parent 1: classid 1:2 drr\n\
             tc class add dev eth0 parent 1: classid 1:3 drr\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: tbf rate 1mbit burst 5k limit 20k\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: sfq\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: pfifo\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:1", "1:2", "1:3"]);
    same_as_children(&r);
    let tbf = row(&r, "qdisc", "10:").counters.split_whitespace().map(String::from).collect::<Vec<_>>();
    let n = |i: usize| tbf[i].trim_matches(|c: char| !c.is_ascii_digit()).parse::<u64>().unwrap();
    assert!(n(6) > 0 && n(8) > 0, "the TBF should drop and throttle: {tbf:?}");
}

#[test]
fn htb_classes_and_leaf_qdiscs_show_their_counters() {
    let text = tc_stats(
        "tc qdisc add dev eth0 root handle 1: htb default 3\n\
         tc class add dev eth0 parent 1: classid 1:10 htb rate 9mbit\n\
         tc class add dev eth0 parent 1:10 classid 1:1 htb rate 3mbit ceil 9mbit\n\
         tc class add dev eth0 parent 1:10 classid 1:2 htb rate 3mbit ceil 9mbit\n\
         tc class add dev eth0 parent 1:10 classid 1:3 htb rate 3mbit ceil 9mbit\n\
         tc qdisc add dev eth0 parent 1:1 handle 10: fq_codel\n\
         tc qdisc add dev eth0 parent 1:2 handle 20: sfq\n\
         tc qdisc add dev eth0 parent 1:3 handle 30: pfifo limit 100\n\
         tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:1\n\
         tc filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dport 5002 0xffff flowid 1:2\n",
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:10", "1:1", "1:2", "1:3"]);
    // An inner class counts what its descendants sent.
    let leaves: u64 = ["1:1", "1:2", "1:3"].iter().map(|c| row(&r, "class", c).pkts).sum();
    assert_eq!(row(&r, "class", "1:10").pkts, leaves);
}

#[test]
fn hfsc_leaves_and_their_children_show_their_counters() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: hfsc default 3\n\
             tc class add dev eth0 parent 1: classid 1:10 hfsc ls m2 9mbit ul m2 9mbit\n\
             tc class add dev eth0 parent 1:10 classid 1:1 hfsc rt umax 1000 dmax 10ms rate 2mbit ls m2 2mbit\n\
             tc class add dev eth0 parent 1:10 classid 1:2 hfsc sc rate 3mbit\n\
             tc class add dev eth0 parent 1:10 classid 1:3 hfsc sc rate 3mbit\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: pfifo\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: fq_codel\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: sfq\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    let r = check(&text, &["1:1", "1:2", "1:3"]);
    // As in the kernel, only a leaf counts what it sends (hfsc_dequeue updates the leaf's bstats).
    assert_eq!(row(&r, "class", "1:10").pkts, 0);
    assert_eq!(row(&r, "class", "1:").pkts, 0);
}

#[test]
fn tbf_child_shows_its_counters() {
    let text = tc_stats(
        "tc qdisc add dev eth0 root handle 1: tbf rate 8mbit burst 10k latency 50ms\n\
         tc qdisc add dev eth0 parent 1:1 handle 10: fq_codel\n",
        &[5001, 5002, 5003],
    );
    check(&text, &[]);
}

#[test]
fn netem_child_shows_its_counters() {
    let text = tc_stats(
        "tc qdisc add dev eth0 root handle 1: netem delay 5ms\n\
         tc qdisc add dev eth0 parent 1:1 handle 10: tbf rate 8mbit burst 10k latency 50ms\n\
         tc qdisc add dev eth0 parent 10:1 handle 20: sfq\n",
        &[5001, 5002],
    );
    let r = rows(&text);
    let sent = |id: &str| row(&r, "qdisc", id).pkts;
    assert!(sent("20:") > 0, "{text}");
    assert_eq!(sent("10:"), sent("1:"));
    assert_eq!(sent("20:"), sent("10:"));
}

/// CAKE has no classes of its own to show once idle (the kernel lists its flows only while they
/// hold packets); as the child of a band it shows what it sent.
#[test]
fn cake_under_a_band_shows_its_counters() {
    let text = tc_stats(
        &format!(
            "tc qdisc add dev eth0 root handle 1: prio bands 3\n\
             tc qdisc add dev eth0 parent 1:1 handle 10: cake bandwidth 20mbit besteffort\n\
             tc qdisc add dev eth0 parent 1:2 handle 20: cake bandwidth 20mbit diffserv4\n\
             tc qdisc add dev eth0 parent 1:3 handle 30: pfifo\n{FILTERS}"
        ),
        &[5001, 5002, 5003],
    );
    check(&text, &["1:1", "1:2", "1:3"]);
    let root = tc_stats("tc qdisc add dev eth0 root handle 1: cake bandwidth 20mbit\n", &[5001]);
    let r = rows(&root);
    assert!(row(&r, "qdisc", "1:").pkts > 0, "{root}");
    assert!(r.iter().all(|r| r.what == "qdisc"), "{root}");
}
