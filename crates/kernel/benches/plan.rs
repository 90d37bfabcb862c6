//! Criterion benches of `sluice apply`'s own side on a 10 000-subscriber tree (no root needed):
//! the diff of the model against the kernel's tree (as `plan::as_dump` gives it) with 0 and
//! 100 subscribers changed, and the encoding of the whole tree from scratch (20 043 requests).
//! The tree is `scripts/subscribers-tree.py 10000 20 "pfifo limit 100" --nested`. Reading the
//! kernel's tree needs root: `examples/apply_bench.rs`.
//!
//! Run: `cargo bench -p sluice-lab --bench plan`

use criterion::{criterion_group, criterion_main, Criterion};
use sluice_kernel::kernel::{script_state, Plan};
use sluice_kernel::plan::{as_dump, diff, wants_of_plan};
use sluice_tc::burst::BurstPolicy;
use std::fmt::Write;

/// The nested tree: 20 sites, each an HTB qdisc, `n` subscriber classes with a pfifo leaf each;
/// the first `bump` subscribers at another rate.
fn tree(n: usize, sites: usize, bump: usize) -> String {
    let mut s = String::from(
        "tc qdisc replace dev $DEV root handle 1: htb default 2 r2q 200\n\
         tc class replace dev $DEV parent 1: classid 1:1 htb rate 10gbit ceil 10gbit\n\
         tc class replace dev $DEV parent 1:1 classid 1:2 htb rate 100mbit ceil 10gbit\n",
    );
    for site in 0..sites {
        let h = 0x10 + site;
        let _ = writeln!(
            s,
            "tc class replace dev $DEV parent 1:1 classid 1:{h:x} htb rate {}mbit ceil 10gbit",
            10_000 / sites
        );
        let _ = writeln!(s, "tc qdisc replace dev $DEV parent 1:{h:x} handle {h:x}: htb r2q 200");
    }
    for i in 0..n {
        let (site, minor) = (0x10 + i % sites, 0x100 + i);
        let rate = if i < bump { 25 } else { 20 };
        let _ = writeln!(
            s,
            "tc class replace dev $DEV parent {site:x}: classid {site:x}:{minor:x} htb rate {rate}mbit ceil {}mbit",
            rate * 5
        );
        let _ = writeln!(
            s,
            "tc qdisc replace dev $DEV parent {site:x}:{minor:x} handle {minor:x}: pfifo limit 100"
        );
    }
    s
}

fn bench(c: &mut Criterion) {
    let vars = [("DEV", "eth0")];
    let base = script_state(&tree(10_000, 20, 0), &vars).unwrap();
    let changed = script_state(&tree(10_000, 20, 100), &vars).unwrap();
    let pb = Plan::new(&base, "eth0", BurstPolicy::Sluice).unwrap();
    let pc = Plan::new(&changed, "eth0", BurstPolicy::Sluice).unwrap();
    let have = as_dump(&wants_of_plan(&pb));
    assert_eq!(have.len(), 20_043);
    assert_eq!(diff(wants_of_plan(&pc), &have).changes.len(), 100);
    let mut g = c.benchmark_group("apply_10k_subscribers");
    g.sample_size(20);
    g.bench_function("diff_100_changed_and_encode", |b| {
        b.iter(|| diff(wants_of_plan(&pc), &have).messages(1).len())
    });
    g.bench_function("diff_nothing_changed", |b| b.iter(|| diff(wants_of_plan(&pb), &have).is_empty()));
    g.bench_function("from_scratch_diff_and_encode_20043", |b| {
        b.iter(|| diff(wants_of_plan(&pb), &[]).messages(1).len())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
