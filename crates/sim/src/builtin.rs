//! Built-in scenarios, embedded in the binary. Each reproduces one seed experiment.

/// (name, seed document, TOML source).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    ("home-uplink", "003", include_str!("../../../scenarios/home-uplink.toml")),
    ("home-uplink-cake", "003", include_str!("../../../scenarios/home-uplink-cake.toml")),
    ("rate-sweep", "000", include_str!("../../../scenarios/rate-sweep.toml")),
    ("send-credits", "002", include_str!("../../../scenarios/send-credits.toml")),
    ("ecn-priority", "003", include_str!("../../../scenarios/ecn-priority.toml")),
    ("tunnel-flows", "003", include_str!("../../../scenarios/tunnel-flows.toml")),
    ("htb-scaling", "001", include_str!("../../../scenarios/htb-scaling.toml")),
    ("benita", "004", include_str!("../../../scenarios/benita.toml")),
    ("sfq-perturb", "003", include_str!("../../../scenarios/sfq-perturb.toml")),
    ("speed", "-", include_str!("../../../scenarios/speed.toml")),
    ("wan-netem", "-", include_str!("../../../scenarios/wan-netem.toml")),
    ("mininet-red", "-", include_str!("../../../scenarios/mininet-red.toml")),
    ("home-both-ways", "-", include_str!("../../../scenarios/home-both-ways.toml")),
    ("hfsc-voice", "001", include_str!("../../../scenarios/hfsc-voice.toml")),
    ("htb-textbook", "-", include_str!("../../../scenarios/htb-textbook.toml")),
    ("fq-pacing", "-", include_str!("../../../scenarios/fq-pacing.toml")),
];

/// `(name, description)` of every built-in scenario.
pub fn list() -> Vec<(&'static str, String)> {
    BUILTIN
        .iter()
        .map(|(n, _, src)| {
            let desc = crate::scenario::Scenario::parse(n, src)
                .map(|s| s.file.description)
                .unwrap_or_else(|e| format!("(invalid: {e})"));
            (*n, desc)
        })
        .collect()
}
