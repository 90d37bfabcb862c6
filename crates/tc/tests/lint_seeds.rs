//! Lint on the seeds' scripts (extracted from the seed text at test time) and on targeted cases.

use sluice_tc::lint::{lint, LintOpts};
use sluice_tc::script::load_tc_script;
use sluice_tc::shell::Vars;

fn codes(text: &str, o: &LintOpts) -> Vec<&'static str> {
    let l = load_tc_script("t", text, &Vars::new()).unwrap_or_else(|e| panic!("{e}"));
    lint(&l.state, Some(&l), o).into_iter().map(|f| f.code).collect()
}

#[test]
fn seed_000_script_loads_and_gets_useful_findings() {
    let path =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds")).ok().and_then(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("000_")))
        });
    let Some(path) = path else {
        eprintln!("SKIPPED: ../shared/seeds/000_* not found");
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    // The script is the fenced block after `$ cat iperf.bench.sh`.
    let start = text.find("$ cat iperf.bench.sh").expect("seed 000 script marker");
    let body = &text[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let script = &body[..body.find("```").unwrap()];
    let l = load_tc_script("seed000", script, &Vars::new()).unwrap_or_else(|e| panic!("{e}"));
    let dev = l.state.devices.iter().find(|d| d.name == "eth1").expect("eth1 configured");
    assert_eq!(dev.classes.len(), 1);
    assert_eq!(dev.qdiscs.len(), 2, "htb root + pfifo leaf survive the trailing teardown");
    let f = lint(&l.state, Some(&l), &LintOpts::default());
    let c: Vec<_> = f.iter().map(|x| x.code).collect();
    assert!(c.contains(&"L002"), "TSO vs class mtu (the seed's subject): {f:#?}");
    assert!(c.contains(&"L003"), "quantum 1.25MB clamped, r2q advice: {f:#?}");
    assert!(f.iter().any(|x| x.fix.contains("r2q 63")));
}

#[test]
fn home_example_is_clean_until_the_shaper_reaches_the_link_rate() {
    let home =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/home-003.tc")).unwrap();
    assert_eq!(codes(&home, &LintOpts::default()), Vec::<&str>::new());
    let at_link = home.replace("RATE=900kbit", "RATE=1mbit").replace("rate 300kbit", "rate 400kbit");
    assert_eq!(codes(&at_link, &LintOpts::default()), vec!["L010"]);
}

#[test]
fn each_check_fires() {
    let o = LintOpts::default();
    let base = "tc qdisc add dev eth0 root handle 1: htb default 10\n";
    // 10 Gbit with tc's default burst: the DESIGN.md case.
    let t = format!("{base}tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit quantum 60000\n");
    let l = load_tc_script("t", &t, &Vars::new()).unwrap();
    let f = lint(&l.state, Some(&l), &o);
    let b = f.iter().find(|x| x.code == "L001").expect("burst finding");
    assert!((0.15..0.25).contains(&b.shortfall.unwrap()), "{b:?}");
    // The fix is the shared burst rule, printed the way tc sizes print.
    let sb = sluice_tc::lint::suggested_burst(10_000_000_000, 1600);
    let shown = sluice_core::units::format_size(sb);
    assert!(b.fix.contains(&shown), "{} lacks {shown}", b.fix);
    assert!(codes(
        &format!("{base}tc class add dev eth0 parent 1: classid 1:10 htb rate 2mbit ceil 1mbit\n"),
        &o
    )
    .contains(&"L005"));
    assert!(codes(&format!("{base}tc class add dev eth0 parent 1: classid 1:20 htb rate 2mbit\n"), &o)
        .contains(&"L006"));
    let kids = format!("{base}tc class add dev eth0 parent 1: classid 1:1 htb rate 2mbit\ntc class add dev eth0 parent 1:1 classid 1:10 htb rate 2mbit\ntc class add dev eth0 parent 1:1 classid 1:11 htb rate 1mbit\n");
    assert!(codes(&kids, &o).contains(&"L004"));
    assert!(codes("tc qdisc add dev eth0 root sfq perturb 10\n", &o).contains(&"L007"));
    assert!(codes("tc qdisc add dev eth0 root pfifo_fast\n", &o).contains(&"L008"));
    let flow = "tc qdisc add dev tun0 root handle 1: htb default 1\ntc class add dev tun0 parent 1: classid 1:1 htb rate 1mbit\ntc filter add dev tun0 parent 1: handle 1 flow hash keys src,dst,proto,proto-src,proto-dst divisor 64\n";
    assert!(codes(flow, &o).contains(&"L009"));
    let fixed = flow.replace(
        "proto-dst divisor",
        "proto-dst,tunnel-src,tunnel-dst,tunnel-proto,tunnel-proto-src,tunnel-proto-dst divisor",
    );
    assert!(!codes(&fixed, &o).contains(&"L009"));
    assert!(codes(
        "# sluice: link-rate 10mbit\ntc qdisc add dev eth0 root tbf rate 10mbit burst 10k latency 20ms\n",
        &o
    )
    .contains(&"L010"));
    assert!(codes(&format!("{base}tc class add dev eth0 parent 1:5 classid 1:10 htb rate 1mbit\n"), &o)
        .contains(&"L011"));
}
