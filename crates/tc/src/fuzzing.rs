//! The bodies of the cargo-fuzz targets `tc_grammar` and `statefile` (in `fuzz/`), shared with
//! the stable test that replays their seed corpora (`tests/fuzz_corpora.rs`). Each panics only
//! on a broken invariant.

use crate::model::State;

/// Arbitrary bytes as tc command lines (one per line, split on whitespace) against one state
/// that has two devices: nothing may panic, a failed command must leave the state unchanged,
/// and every state reached must survive the state file (validate, write, read back).
pub fn tc_grammar(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut state = State::default();
    for args in
        [["link", "add", "dev", "eth0", "type", "dummy"], ["link", "add", "dev", "eth1", "type", "dummy"]]
    {
        crate::run_ip(&mut state, &args.map(String::from));
    }
    for line in text.lines().take(64) {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        if argv.iter().any(|a| a.starts_with("-b") || a == "-batch" || a.starts_with("-f")) {
            continue; // batch files read the file system
        }
        let before = state.clone();
        let out = crate::run_tc(&mut state, &argv);
        assert!(out.code == 0 || state == before, "failed command changed the state: {line}");
    }
    let text = serde_json::to_string(&state).expect("state serializes");
    let back =
        crate::statefile::parse(&text).unwrap_or_else(|e| panic!("state does not read back: {e}\n{text}"));
    assert_eq!(back, state, "state changed through the state file");
}

/// Arbitrary bytes as a state file: reading never panics, and whatever reads writes back to the
/// same state.
pub fn statefile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(state) = crate::statefile::parse(text) {
        let again = serde_json::to_string(&state).expect("state serializes");
        let back =
            crate::statefile::parse(&again).unwrap_or_else(|e| panic!("written state does not read: {e}"));
        assert_eq!(back, state);
    }
}

/// Arbitrary bytes as a `tc -batch -force` file (continuations, comments, quotes): nothing may
/// panic, and the state reached survives the state file.
pub fn tc_batch(data: &[u8]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir();
    let f =
        dir.join(format!("sluice-fuzz-batch-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    // Batch lines may name files (`-batch` inside batch is a word like any other): only ours.
    std::fs::write(&f, data).expect("temp file");
    let mut state = State::default();
    crate::run_ip(&mut state, &["link", "add", "dev", "eth0", "type", "dummy"].map(String::from));
    let _ = crate::run_tc(&mut state, &["-force".to_string(), "-batch".to_string(), f.display().to_string()]);
    let _ = std::fs::remove_file(&f);
    let text = serde_json::to_string(&state).expect("state serializes");
    let back =
        crate::statefile::parse(&text).unwrap_or_else(|e| panic!("state does not read back: {e}\n{text}"));
    assert_eq!(back, state, "state changed through the state file");
}
