//! What the fuzz target checks, run on stable: the committed seed corpus, then random and mutated
//! byte strings (proptest), through `testing::check_frame`.

use crate::testing::check_frame;
use crate::{parse_frame, ParseOptions, ParseStats};
use proptest::prelude::*;
use std::path::PathBuf;

fn corpus() -> &'static [(String, Vec<u8>)] {
    static CORPUS: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(read_corpus)
}

fn read_corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/parse_frame");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("seed corpus {} missing: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn committed_corpus_parses_and_keeps_invariants() {
    let files = corpus();
    assert!(files.len() >= 200, "only {} corpus files", files.len());
    let mut stats = ParseStats::default();
    for (name, bytes) in files {
        check_frame(bytes);
        if let Some(kind) = name.strip_prefix("valid-") {
            let opts =
                if kind.starts_with("raw-") { ParseOptions::raw_ip() } else { ParseOptions::default() };
            let r = parse_frame(bytes, opts);
            stats.record(&r);
            let p = r.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.keys.outer.is_none(), kind.starts_with("arp"), "{name}");
            let tunnelled = ["ipip", "sit", "4in6", "6in6", "gre"].iter().any(|t| kind.starts_with(t));
            assert_eq!(p.tunnel.is_some(), tunnelled, "{name}");
        }
    }
    assert_eq!(stats.total_errors(), 0);
    assert_eq!(stats.non_ip, 12);
    assert_eq!(stats.tunnelled, 12 * 8);
}

/// A mutation of a corpus frame: overwrite, insert, delete or truncate.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(frame: &mut Vec<u8>, m: &Mutation) {
    let n = frame.len().max(1);
    match *m {
        Mutation::Set(i, b) if !frame.is_empty() => frame[i % n] = b,
        Mutation::Insert(i, b) => frame.insert(i % (frame.len() + 1), b),
        Mutation::Remove(i) if !frame.is_empty() => {
            frame.remove(i % n);
        }
        Mutation::Truncate(i) => frame.truncate(i % n),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        check_frame(&bytes);
    }

    #[test]
    fn mutated_corpus_frames_never_panic(
        pick in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let files = corpus();
        let mut frame = files[pick % files.len()].1.clone();
        for m in &muts {
            apply(&mut frame, m);
        }
        check_frame(&frame);
    }
}
