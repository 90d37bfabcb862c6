//! The README's seed table is what the simulator computes now: regenerate it with
//! `scripts/seed-table.sh` after a change that moves a figure.

#[test]
fn readme_seed_table_matches_the_simulator() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let block = sluice_sim::seed_table::block_of(&readme).expect("README has the generated seed table block");
    let now = sluice_sim::seed_table::render().unwrap_or_else(|e| panic!("{e}"));
    if block != now {
        let diff: Vec<String> = block
            .lines()
            .zip(now.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("README:    {a}\nsimulator: {b}"))
            .collect();
        panic!(
            "README seed table differs from the simulator (run scripts/seed-table.sh):\n{}\n(README {} lines, simulator {})",
            diff.join("\n"),
            block.lines().count(),
            now.lines().count()
        );
    }
}
