//! The seed documents' own figures, shown beside ours in reports (see the README's table and
//! `shared/seeds/`). Per-flow figures come from the results (`extra["seed_mbit.<flow>"]`, set by
//! the scenario's `[[reference]]` entries) or, for seed 003's home uplink, from the table below.

use crate::schema::Case;

/// What a seed document reports for a scenario: (document, its figure in words).
pub fn claim(scenario: &str) -> Option<(&'static str, &'static str)> {
    Some(match scenario {
        "home-uplink" => (
            "003",
            "VoIP 200 kbit/s beside HostA's load, rows 1–6 (loss / jitter): 0%/0.23 · 0%/0.20 · 0.6%/2.6 · 0%/0.50 · 69%/1.58 · 0%/0.80 ms; with the script HostB's scp gets 50% of the link, without it about a quarter under three scp and nothing under the flood",
        ),
        "rate-sweep" => ("000", "kernel 2.6.30 HTB achieved rate steps away from the target, up to +0.8 Gbit off at 10 Gbit"),
        "htb-scaling" => ("001", "the old HTB costs O(N) per packet and collapses at about 300 active classes"),
        "send-credits" => (
            "002",
            "the send-credit limits (1 t_ipi, 1 RTT) cut throughput towards high rates; without them the paced sender reaches its ideal rate",
        ),
        "benita" => ("004", "one 30 Mbit class reaches 25.2–33.5 Mbit depending on burst and packet size (tables 4/5)"),
        "sfq-perturb" => ("003", "SFQ latency spikes at each perturbation"),
        "ecn-priority" => ("003", "pfifo_fast puts ECN-capable traffic in its lowest band"),
        "tunnel-flows" => ("003", "with tunnel keys the flow classifier separates the ping from the upload: latency falls"),
        _ => return None,
    })
}

/// Seed 003's VoIP table: (load, shaper) → (loss %, jitter ms).
const HOME_UPLINK_VOIP: [(&str, &str, f64, f64); 6] = [
    ("none", "off", 0.0, 0.229),
    ("none", "on", 0.0, 0.197),
    ("scp", "off", 0.6, 2.6),
    ("scp", "on", 0.0, 0.496),
    ("flood", "off", 69.0, 1.58),
    ("flood", "on", 0.0, 0.804),
];

/// Seed 003's HostB scp share of the link per (load, shaper), in words.
const HOME_UPLINK_SCP: [(&str, &str, &str); 6] = [
    ("none", "off", "the whole link"),
    ("none", "on", "the whole link"),
    ("scp", "off", "≈ 1/4 of the link"),
    ("scp", "on", "50% of the link"),
    ("flood", "off", "≈ 0 (drowned out)"),
    ("flood", "on", "50% of the link"),
];

/// The seed's figure for flow `flow` in case `c` of `scenario`, in words.
pub fn figure(scenario: &str, c: &Case, flow: &str) -> Option<String> {
    if let Some(v) = c.extra.get(&format!("seed_mbit.{flow}")) {
        return Some(format!("{v:.2} Mbit/s"));
    }
    if scenario != "home-uplink" {
        return None;
    }
    let p = |k: &str| c.params.get(k).map(String::as_str).unwrap_or("");
    let (load, shaper, test) = (p("load"), p("shaper"), p("test"));
    match (test, flow) {
        ("voip", "voip") => HOME_UPLINK_VOIP
            .iter()
            .find(|r| r.0 == load && r.1 == shaper)
            .map(|r| format!("loss {}% · jitter {} ms", r.2, r.3)),
        ("scp", "scpB") => {
            HOME_UPLINK_SCP.iter().find(|r| r.0 == load && r.1 == shaper).map(|r| r.2.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_uplink_rows_map_to_the_seed_table() {
        let mut c = Case::default();
        for (k, v) in [("load", "flood"), ("shaper", "off"), ("test", "voip")] {
            c.params.insert(k.into(), v.into());
        }
        assert_eq!(figure("home-uplink", &c, "voip").as_deref(), Some("loss 69% · jitter 1.58 ms"));
        assert_eq!(figure("home-uplink", &c, "ping"), None);
        c.extra.insert("seed_mbit.stream".into(), 33.5);
        assert_eq!(figure("benita", &c, "stream").as_deref(), Some("33.50 Mbit/s"));
    }
}
