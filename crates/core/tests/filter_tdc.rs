//! Semantic checks driven by the kernel's tdc corpora, read at run time from
//! `/work/shared/conformance/tdc/filters/` (or `$SLUICE_TDC_DIR`). Parsing tc's grammar is the
//! front-end's job; here only the pieces whose meaning lives in the classifier are checked:
//! every flow key and op the corpus uses is known, and `sample` gives the buckets tdc expects.
//! The corpus is GPL-2.0 test data and is not vendored, so a missing corpus skips loudly.

use sluice_core::filter::u32::sample_bucket;
use sluice_core::filter::FlowKey;
use std::path::PathBuf;

fn corpus(name: &str) -> Option<Vec<serde_json::Value>> {
    let dir =
        std::env::var("SLUICE_TDC_DIR").unwrap_or_else(|_| "/work/shared/conformance/tdc/filters".into());
    let path = PathBuf::from(dir).join(name);
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(serde_json::from_str(&s).expect("tdc corpus is valid JSON")),
        Err(e) => {
            eprintln!("SKIPPED: tdc corpus {} not readable: {e}", path.display());
            None
        }
    }
}

fn words(cmd: &str) -> Vec<&str> {
    cmd.split(|c: char| c.is_whitespace() || c == '"' || c == ';').filter(|w| !w.is_empty()).collect()
}

#[test]
fn every_flow_key_in_the_corpus_is_supported() {
    let Some(tests) = corpus("flow.json") else { return };
    let mut seen = 0;
    for t in &tests {
        let cmd = t["cmdUnderTest"].as_str().unwrap_or_default();
        let w = words(cmd);
        for (i, word) in w.iter().enumerate() {
            if (*word == "key" || *word == "keys") && i + 1 < w.len() {
                let list = w[i + 1];
                assert!(FlowKey::parse_list(list).is_ok(), "{}: keys {list}", t["id"]);
                seen += 1;
            }
        }
    }
    assert!(seen >= 20, "expected the corpus to name many keys, saw {seen}");
}

#[test]
fn u32_sample_buckets_match_the_corpus() {
    let Some(tests) = corpus("u32.json") else { return };
    let mut checked = 0;
    for t in &tests {
        let cmd = t["cmdUnderTest"].as_str().unwrap_or_default();
        if !cmd.contains("sample u32") {
            continue;
        }
        let w = words(cmd);
        let masks: Vec<u32> = w
            .iter()
            .skip_while(|x| **x != "in")
            .skip(1)
            .take_while(|x| **x != "do")
            .map(|m| u32::from_str_radix(m, 16).unwrap())
            .collect();
        let at = w.iter().position(|x| *x == "u32").unwrap();
        let val_word = w.iter().skip(at).find(|x| x.starts_with("0x")).unwrap();
        let val = u32::from_str_radix(val_word.trim_start_matches("0x"), 16).unwrap();
        let pattern = t["matchPattern"].as_str().unwrap();
        let bkt = pattern.split("bkt ").nth(1).unwrap().split(' ').next().unwrap();
        let want = u32::from_str_radix(bkt, 16).unwrap();
        assert!(!masks.is_empty());
        for m in masks {
            // The sample table in the corpus has divisor 256 (its setup command).
            assert_eq!(sample_bucket(val, m, 256), want, "{}: mask {m:x}", t["id"]);
            checked += 1;
        }
    }
    assert!(checked >= 12, "checked {checked} sample masks");
}
