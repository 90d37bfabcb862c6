//! Tests of `sluice_model::kinds::ets` that need the tc front end.

use sluice_model::error::TcError;
use sluice_model::grammar::*;
use sluice_model::kinds::ets::*;

fn p(s: &str) -> Result<EtsOpts, TcError> {
    let argv: Vec<String> = s.split_whitespace().map(String::from).collect();
    let mut cur = Cur { argv: &argv, pos: 0, max_minor: 0xFFFF };
    parse(&mut cur)
}

#[test]
fn tc_derives_bands_and_checks_what_it_can() {
    let o = p("strict 3 quanta 1500 750").unwrap();
    assert_eq!((o.bands, o.strict, o.quanta.clone()), (5, 3, vec![1500, 750]));
    assert_eq!(quanta(&o, 1514), vec![0, 0, 0, 1500, 750]);
    let o = p("bands 4 priomap 0 0 0 0").unwrap();
    assert_eq!(priomap(&o), [0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]);
    assert_eq!(quanta(&o, 1514), vec![1514; 4]);
    assert!(p("").unwrap_err().message.starts_with("One of"));
    assert_eq!(p("bands 17").unwrap_err().code, 1);
    assert_eq!(p("quanta 1000 0").unwrap_err().message, "\"quanta\" must be > 0");
    assert_eq!(p("quanta").unwrap_err().code, 255);
    assert!(p("bands 2 quanta 1 2 3").is_err());
    assert!(p("bands 2 priomap 0 1 2").is_err());
    assert!(p("bands 5 priomap 0 0 1 0 1 2 0 1 2 3 0 1 2 3 4 0 1 2").is_err());
    assert_eq!(p("bands 2 bands 3").unwrap_err().message, "Duplicate \"bands\"");
    // 17 quanta reach the kernel, which refuses 17 bands.
    let o = p("quanta 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17").unwrap();
    assert_eq!(kernel_check(&o).unwrap_err().code, 2);
}

#[test]
fn options_encode_as_tc_sends_them() {
    let o = p("bands 3 strict 1 quanta 1000 priomap 0 1").unwrap();
    let b = netlink_options(&o);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    assert_eq!(
        hex,
        concat!(
            "0500010003000000",
            "0500020001000000",
            "0c00038008000400e8030000",
            "1400058005000600000000000500060001000000"
        )
    );
}

fn tc(state: &mut sluice_model::model::State, line: &str) -> sluice_tc::tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    sluice_tc::tc::run_tc(state, &argv)
}

#[test]
fn show_class_change_and_kernel_refusals() {
    let mut s = sluice_tc::conform::fresh_state();
    let o = tc(&mut s, "qdisc add dev dummy1 root handle 1: ets bands 4 strict 1 quanta 1000 500");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        tc(&mut s, "qdisc show dev dummy1").stdout,
        "qdisc ets 1: root refcnt 2 bands 4 strict 1 quanta 1000 500 1514 priomap 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 \n"
    );
    assert_eq!(
        tc(&mut s, "class show dev dummy1").stdout,
        "class ets 1:1 root \nclass ets 1:2 root quantum 1000 \nclass ets 1:3 root quantum 500 \nclass ets 1:4 root quantum 1514 \n"
    );
    let o = tc(&mut s, "class change dev dummy1 classid 1:4 ets quantum 3000");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(tc(&mut s, "qdisc show dev dummy1").stdout.contains("quanta 1000 500 3000 priomap"));
    let o = tc(&mut s, "class change dev dummy1 classid 1:1 ets quantum 3000");
    assert_eq!(o.stderr, "Error: Strict bands do not have a configurable quantum.\n");
    assert_eq!(tc(&mut s, "class change dev dummy1 classid 1:5 ets").code, 2);
    assert_eq!(tc(&mut s, "class del dev dummy1 classid 1:2").code, 2);
    // A grafted qdisc is the class's leaf, and goes when a change removes its band.
    assert_eq!(tc(&mut s, "qdisc add dev dummy1 parent 1:4 handle 10: pfifo limit 5").code, 0);
    assert!(tc(&mut s, "class show dev dummy1 classid 1:4")
        .stdout
        .starts_with("class ets 1:4 root leaf 10: "));
    let o = tc(&mut s, "filter add dev dummy1 parent 1:2 protocol all prio 1 matchall classid 1:2");
    assert!(o.stderr.starts_with("Error: ETS classid must be zero.\n"), "{}", o.stderr);
    assert_eq!(tc(&mut s, "qdisc change dev dummy1 root handle 1: ets bands 2").code, 0);
    let shown = tc(&mut s, "qdisc show dev dummy1").stdout;
    assert_eq!(
        shown,
        "qdisc ets 1: root refcnt 2 bands 2 quanta 1514 1514 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 \n"
    );
}

#[test]
fn builds_with_filters_priomap_and_a_grafted_band() {
    use sluice_core::{Packet, Time};
    let st = sluice_tc::script::load_tc_script(
        "t",
        "tc qdisc add dev e root handle 1: ets strict 1 quanta 3000 1500 priomap 1 2 0\n\
         tc qdisc add dev e parent 1:3 handle 30: bfifo limit 3000\n\
         tc filter add dev e parent 1: protocol all prio 1 handle 7 fw classid 1:3\n",
        &Default::default(),
    )
    .unwrap()
    .state;
    let mut b = sluice_model::build::build_device(&st, "e").unwrap();
    assert_eq!(b.root.kind(), "ets");
    let keys = Default::default();
    let push = |b: &mut sluice_model::build::Built, prio: u32, mark: u32, id: u64| {
        let mut p = Packet::new(1000, id);
        p.priority = prio;
        p.mark = mark;
        b.classifier.classify(&mut p, &keys, &[], Time::ZERO);
        b.root.enqueue(p, Time::ZERO)
    };
    push(&mut b, 0, 0, 1).unwrap(); // priomap[0] = band 1
    push(&mut b, 1, 0, 2).unwrap(); // band 2
    push(&mut b, 2, 0, 3).unwrap(); // band 0, strict
    push(&mut b, 0, 7, 4).unwrap(); // fw to 1:3 (band 2, bfifo 3000)
    push(&mut b, 0, 7, 5).unwrap();
    assert!(push(&mut b, 0, 7, 6).is_err(), "the band's bfifo is full");
    let order: Vec<u64> = std::iter::from_fn(|| b.root.dequeue(Time::ZERO).map(|p| p.payload)).collect();
    // Strict first; then band 1 (quantum 3000, active first) and band 2 (1500) by DRR.
    assert_eq!(order, vec![3, 1, 2, 4, 5]);
}

#[test]
fn export_parses_back() {
    for cmd in ["bands 2", "strict 3 quanta 1500 750", "bands 5 strict 1 quanta 10 priomap 0 1 2 3 4"] {
        let o = p(cmd).unwrap();
        assert_eq!(p(&args(&o)).unwrap(), o, "{cmd}");
    }
}
