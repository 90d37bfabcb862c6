//! The basic classifier's ematches end to end: tc grammar → model → show text, and the same
//! filters built into the core's classifier (the path the simulator and the live shaper take)
//! deciding real frames. Error texts marked "recorded" were taken from iproute2 6.1's tc here
//! (its parse runs before the kernel, which lacks cls_basic); show texts follow iproute2's
//! `print_ematch` (`tc/m_ematch.c`, `tc/em_*.c`).

use sluice_core::filter::{ClassifyInput, TcfOutcome};
use sluice_core::flow_keys::FlowKeys;
use sluice_core::{Handle, Packet, Time};
use sluice_tc::build::build_hook;
use sluice_tc::model::H_MIN_INGRESS;
use sluice_tc::{run_ip, run_tc, State};

/// `tc` with the words of `line` split on spaces, except `{...}` which is one argument (the
/// quoted ematch of a shell line).
fn tc(s: &mut State, line: &str) -> sluice_tc::Outcome {
    let mut argv = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').unwrap();
            argv.push(r[..end].to_string());
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            argv.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    run_tc(s, &argv)
}

fn setup() -> State {
    let mut s = State::default();
    let argv: Vec<String> = "link add eva type veth peer name evb".split(' ').map(String::from).collect();
    assert_eq!(run_ip(&mut s, &argv).code, 0);
    assert_eq!(tc(&mut s, "qdisc add dev eva ingress").code, 0);
    s
}

#[test]
fn trees_print_as_iproute2_does() {
    let mut s = setup();
    let add = "filter add dev eva parent ffff: protocol ip prio 1 handle 1 basic match";
    let o = tc(
        &mut s,
        &format!("{add} {{cmp(u8 at 9 layer network eq 17) and not (meta(nf_mark mask 0xff eq 5) or u32(u16 0x0016 0xffff at nexthdr+0))}} classid 1:1"),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let shown = tc(&mut s, "filter show dev eva parent ffff:").stdout;
    assert_eq!(
        shown,
        "filter protocol ip pref 1 basic chain 0 \n\
filter protocol ip pref 1 basic chain 0 handle 0x1 flowid 1:1 \n  \
cmp(u8 at 9 layer 1 eq 17)\n  \
AND NOT (\n    \
meta(nf_mark mask 0x000000ff eq 5)\n    \
OR u32(00160000/ffff0000 at nexthdr+0)\n  \
) \n"
    );
}

#[test]
fn errors_are_tcs() {
    let mut s = setup();
    let add = "filter add dev eva parent ffff: protocol ip prio 1 basic match";
    // Recorded: a tree ending the command gives its last word back to the option loop.
    let o = tc(&mut s, &format!("{add} cmp(u8 at 0 layer link mask 0xff gt 10)"));
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("What is \"10)\"?"), "{}", o.stderr);
    // Recorded: the first line of each.
    for (tree, first) in [
        ("{u32(u8 0x1122 0x0f at 0)} classid 1:1", "Illegal key (>0xFF)"),
        ("cmp(u8 at 0 mask 0xff gt 10) and classid 1:1", "Parse error: syntax error"),
        ("{meta(foo eq 3)} classid 1:1", "meta: unknown meta id"),
        ("{u32(u8 0x11 0x0f at 1 2)} classid 1:1", "u32: unexpected trailer"),
        ("foo(1) classid 1:1", "Unknown ematch \"foo\""),
    ] {
        let before = s.clone();
        let o = tc(&mut s, &format!("{add} {tree}"));
        assert_eq!(o.code, 1, "{tree}");
        assert!(o.stderr.starts_with(first), "{tree}: {}", o.stderr);
        assert!(o.stderr.contains("Illegal \"ematch\""), "{tree}: {}", o.stderr);
        assert_eq!(s, before);
    }
}

/// An Ethernet + IPv4 + UDP frame from 198.18.0.1 to 198.18.0.2.
fn udp_frame(dport: u16) -> (Vec<u8>, FlowKeys) {
    let mut f = vec![0u8; 14 + 20 + 8 + 8];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&36u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    let keys =
        FlowKeys { ethertype: 0x0800, network_offset: 14, transport_offset: Some(34), ..Default::default() };
    (f, keys)
}

fn classify(s: &State, frame: &[u8], keys: &FlowKeys, mark: u32) -> TcfOutcome {
    let mut list = build_hook(s, "eva", H_MIN_INGRESS).unwrap().unwrap();
    let mut pkt = Packet::new(frame.len() as u32, 0);
    pkt.mark = mark;
    list.classify(&ClassifyInput::new(&pkt, keys, frame), Time::ZERO)
}

fn class(c: &str) -> TcfOutcome {
    TcfOutcome::Classified(sluice_core::filter::FilterResult { classid: Handle::parse(c).unwrap() })
}

#[test]
fn the_core_classifies_by_the_tree() {
    let mut s = setup();
    let add = |s: &mut State, rest: &str| {
        let o = tc(s, &format!("filter add dev eva parent ffff: protocol ip {rest}"));
        assert_eq!(o.code, 0, "{rest}: {}", o.stderr);
    };
    // prio 1: UDP to port 53 (cmp on the transport header) → 1:53.
    add(&mut s, "prio 1 basic match {cmp(u8 at 9 layer network eq 17) and cmp(u16 at 2 layer transport eq 53)} classid 1:53");
    // prio 2: mark 7 or destination 198.18.0.9 → 1:7; a u32 match on the network header.
    add(
        &mut s,
        "prio 2 basic match {meta(nf_mark eq 7) or u32(u32 0xc6120009 0xffffffff at 16)} classid 1:7",
    );
    // prio 3: no tree at all matches everything but frames to port 9 (a second element, added
    // later, so tried first — the kernel lists basic elements newest first).
    add(&mut s, "prio 3 handle 1 basic classid 1:3");
    add(&mut s, "prio 3 handle 2 basic match {not cmp(u16 at 2 layer 2 gt 9) and not cmp(u16 at 2 layer 2 lt 9)} classid 1:9");
    // The kernel reads `a and b or c` left to right with no precedence: a false `a` ends it.
    add(&mut s, "prio 4 basic match {cmp(u8 at 0 layer 0 eq 99) and cmp(u8 at 0 layer 0 eq 99) or cmp(u8 at 9 layer 1 eq 17)} classid 1:4");

    let (f, k) = udp_frame(53);
    assert_eq!(classify(&s, &f, &k, 0), class("1:53"));
    let (f, k) = udp_frame(80);
    assert_eq!(classify(&s, &f, &k, 7), class("1:7"));
    let (mut f9, k) = udp_frame(80);
    f9[30..34].copy_from_slice(&[198, 18, 0, 9]);
    assert_eq!(classify(&s, &f9, &k, 0), class("1:7"));
    let (f, k) = udp_frame(9);
    assert_eq!(classify(&s, &f, &k, 0), class("1:9"));
    let (f, k) = udp_frame(80);
    assert_eq!(classify(&s, &f, &k, 0), class("1:3"));
    // Shown newest first, as the kernel lists them.
    let shown = tc(&mut s, "filter show dev eva parent ffff: prio 3").stdout;
    let handles: Vec<&str> = shown.lines().filter_map(|l| l.split("handle ").nth(1)).collect();
    assert_eq!(handles, ["0x2 flowid 1:9 ", "0x1 flowid 1:3 "]);
    // Only prio 4 left: it must not match (no precedence), so nothing classifies.
    assert_eq!(tc(&mut s, "filter del dev eva parent ffff: protocol ip prio 3").code, 0);
    assert_eq!(classify(&s, &f, &k, 0), TcfOutcome::NoMatch);
    // A truncated frame never matches a read past its end.
    assert_eq!(classify(&s, &f[..35], &k, 0), TcfOutcome::NoMatch);
}

#[test]
fn meta_ids_without_a_value_are_refused_when_built() {
    let mut s = setup();
    let o = tc(
        &mut s,
        "filter add dev eva parent ffff: protocol ip prio 1 basic match {meta(sk_family eq 2)} classid 1:1",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let e = build_hook(&s, "eva", H_MIN_INGRESS).unwrap_err().to_string();
    assert!(e.contains("meta id 16"), "{e}");
}
