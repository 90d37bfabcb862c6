//! Sluice's netlink encoding of actions, byte for byte against the `RTM_NEWACTION` requests
//! iproute2 6.1's tc sent for the same commands (`tests/fixtures/actions/*.txt`, captured with
//! `strace -f -e trace=sendmsg -e write=3` in a namespace of our own; this kernel lacks
//! act_gact, act_police and act_skbedit, but tc sends the request before the kernel refuses it).
//! The commands run through Sluice's own `tc actions`; the table's entries are then encoded.

use sluice_kernel::actions::{encode_entries, TCA_ACT_TAB};
use sluice_kernel::netlink::{flags, Msg, TcMsg};
use sluice_tc::model::State;

/// The command and the request bytes of one fixture.
fn fixture(name: &str) -> (String, Vec<u8>) {
    let path = format!("{}/tests/fixtures/actions/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let cmd = text.lines().next().and_then(|l| l.strip_prefix("# tc ")).unwrap().to_string();
    let mut bytes = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(" | ")) {
        // ` | 00010  00 00 ...  |ascii|`: the offset, then up to 16 hex bytes.
        let hex = &line[10..58];
        bytes.extend(hex.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()));
    }
    (cmd, bytes)
}

/// Every fixture in `tests/fixtures/actions/`; each registry action kind needs at least two.
#[test]
fn actions_encode_as_tc_sends_them() {
    let dir = format!("{}/tests/fixtures/actions", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".txt").map(String::from))
        .collect();
    names.sort();
    for kind in sluice_model::kinds::ACTION_KINDS {
        let n = names.iter().filter(|n| n.split('-').next() == Some(kind)).count();
        assert!(n >= 2, "{kind}: {n} captured action requests (want at least 2 in {dir})");
    }
    for name in &names {
        let (cmd, want) = fixture(name);
        let mut state = State::default();
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        let out = sluice_tc::run_tc(&mut state, &argv);
        assert_eq!(out.code, 0, "{name}: {out:?}");
        // The entries in the order the command named them (the table is sorted by kind, index).
        let mut entries: Vec<_> = state.actions.iter().collect();
        let order: Vec<u32> =
            argv.windows(2).filter(|w| w[0] == "index").map(|w| w[1].parse().unwrap()).collect();
        entries.sort_by_key(|e| order.iter().position(|&i| i == e.action.index()));
        let mut m = Msg::tc(0, flags::REQUEST, TcMsg::default());
        let lo = |d: &str| (d == "lo").then_some(1);
        encode_entries(&mut m, TCA_ACT_TAB, &entries, &lo).unwrap();
        // tc's request: 16-byte header, 4-byte tcamsg, then the attributes; Msg::tc's tcmsg
        // header is 20 bytes.
        assert_eq!(
            &m.bytes()[36..],
            &want[20..],
            "{name}: `tc {cmd}`\nsluice {:02x?}\ntc     {:02x?}",
            &m.bytes()[36..],
            &want[20..]
        );
    }
}
