//! The fuzz targets of `fuzz/` on stable Rust: each target's seed corpus, then random inputs
//! (seeds with bytes flipped, inserted, deleted, spliced) through the same bodies the cargo-fuzz
//! targets run, for `SLUICE_FUZZ_SECS` seconds per target (default 1; CI's fuzz step gives 20).
//!
//! Why not cargo-fuzz in CI: it needs a nightly toolchain, `cargo install cargo-fuzz` and an
//! ASan/coverage build of every crate the targets reach — a second full build on CI's cores for
//! a 20 s run. This harness reuses the test build and checks the same invariants (a panic, an
//! overflow under the `ci` profile, a broken round trip); what it lacks is coverage guidance, so
//! the committed seeds carry the structure. `cargo +nightly fuzz run TARGET` still works locally.

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// xorshift64*: deterministic per run seed, printed so a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: &[&[u8]] = &[
    b"\\\n",
    b"#",
    b"\"",
    b"'",
    b" ",
    b"\n",
    b"0x",
    b"-1",
    b"4294967296",
    b"ffff:",
    b"=",
    b"[",
    b"{",
    b"}",
    b"\0",
];

fn mutate(r: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut d = seeds[r.below(seeds.len())].clone();
    for _ in 0..1 + r.below(8) {
        let at = r.below(d.len() + 1);
        match r.below(5) {
            0 if !d.is_empty() => {
                let i = r.below(d.len());
                d[i] ^= 1 << r.below(8);
            }
            1 => {
                let w = INTERESTING[r.below(INTERESTING.len())];
                d.splice(at..at, w.iter().copied());
            }
            2 if at < d.len() => {
                let end = (at + 1 + r.below(16)).min(d.len());
                d.drain(at..end);
            }
            3 => {
                let o = &seeds[r.below(seeds.len())];
                let s = r.below(o.len() + 1);
                let e = (s + r.below(64)).min(o.len());
                d.splice(at..at, o[s..e].iter().copied());
            }
            _ => d.insert(at.min(d.len()), r.next() as u8),
        }
    }
    d.truncate(1 << 16);
    d
}

fn run(target: &str, body: impl Fn(&[u8])) {
    let seeds = seeds(target);
    assert!(!seeds.is_empty(), "{target}: no seeds");
    for s in &seeds {
        body(s);
    }
    let secs: u64 = std::env::var("SLUICE_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let seed = std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    let mut r = Rng(seed);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut n = 0u64;
    while Instant::now() < end {
        let d = mutate(&mut r, &seeds);
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&d))) {
            let out = std::env::temp_dir().join(format!("sluice-fuzz-{target}-crash"));
            let _ = std::fs::write(&out, &d);
            panic!(
                "{target}: input {n} of SLUICE_FUZZ_SEED={seed} panics (saved in {}): {p:?}",
                out.display()
            );
        }
        n += 1;
    }
    eprintln!("{target}: {} seeds, {n} random inputs in {secs} s (SLUICE_FUZZ_SEED={seed})", seeds.len());
}

#[test]
fn tc_grammar() {
    run("tc_grammar", sluice_tc::fuzzing::tc_grammar);
}

#[test]
fn statefile() {
    run("statefile", sluice_tc::fuzzing::statefile);
}

#[test]
fn tc_batch() {
    run("tc_batch", sluice_tc::fuzzing::tc_batch);
}

#[test]
fn scenario() {
    run("scenario", sluice_sim::fuzz_scenario);
}

#[test]
fn results() {
    run("results", sluice_report::fuzz_results);
}

#[test]
fn parse_frame() {
    run("parse_frame", |data| {
        sluice_wire::testing::check_frame(data);
        for off in [0usize, 14, 18] {
            let mut copy = data.to_vec();
            let _ = sluice_wire::mark_ce(&mut copy, off);
        }
    });
}
