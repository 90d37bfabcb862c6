//! flent data files (`.flent.gz`): gzipped JSON in flent's data format version 4, written so that
//! the real flent (`flent -i FILE.flent.gz -f summary`, `-p totals`, `-p ping_cdf`, ...) opens
//! and plots them.
//!
//! flent reads a file through the test named in its metadata (`NAME`), whose data sets and plots
//! must match the series names. Each case is mapped onto the flent test that ran the same kind of
//! traffic; the Sluice scenario and case are named in `TITLE`, `NOTE` and `SLUICE`:
//!
//! | the case has | flent test | series |
//! |---|---|---|
//! | TCP flows | `tcp_nup` (`upload_streams` = their number) | `TCP upload::<flow>`, `Ping (ms) ICMP` |
//! | no TCP, pings | `ping` | `Ping (ms) ICMP` (first probe), `Ping (ms) <flow>` (others) |
//! | neither | `udp_flood` | `UDP upload` (the first flow) |
//!
//! Flows that the test has no data set for (UDP beside TCP, say) are added as
//! `UDP upload::<flow>`, their one-way delay as `Delay (ms)::<flow>`, and class throughput as
//! `Class::<id>`; flent lists them in its summary and ignores them in its plots.

use crate::schema::{Case, Results};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use std::io::Write;

/// The flent version whose format this follows.
pub const FLENT_VERSION: &str = "2.3.0";

/// Start of the time axis written into the files (flent needs absolute timestamps for its raw
/// values): 2026-01-01T00:00:00Z. Simulated runs have no wall-clock start.
const T0_UNIX: f64 = 1_767_225_600.0;
const T0_ISO: &str = "2026-01-01T00:00:00.000000Z";

/// The flent test a case maps onto (see the module docs).
pub fn flent_test(c: &Case) -> &'static str {
    if c.flows.iter().any(|f| f.kind.starts_with("tcp")) {
        "tcp_nup"
    } else if c.flows.iter().any(|f| f.kind == "probe") {
        "ping"
    } else {
        "udp_flood"
    }
}

/// The flent document for one case (None if the case has no time series).
pub fn flent_json(r: &Results, c: &Case) -> Option<Value> {
    let s = c.series.as_ref()?;
    let n = s.flow_bps.values().chain(s.flow_latency_ms.values()).map(Vec::len).max().unwrap_or(0);
    if n == 0 {
        return None;
    }
    let x: Vec<f64> = (0..n).map(|i| i as f64 * s.step_s).collect();
    let test = flent_test(c);
    let mut results = Map::new();
    let mut raw = Map::new();
    let mut meta = Map::new();
    let mut put = |name: String, vals: Vec<Option<f64>>, units: &str| {
        let raw_vals: Vec<Value> = vals
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| json!({"t": T0_UNIX + i as f64 * s.step_s, "val": v})))
            .collect();
        raw.insert(name.clone(), Value::Array(raw_vals));
        results.insert(name.clone(), json!(vals));
        meta.insert(name, json!({ "UNITS": units }));
    };
    let mbit = |v: &Vec<f64>| -> Vec<Option<f64>> { v.iter().map(|b| Some(b / 1e6)).collect() };
    let ms = |v: &Vec<f64>| -> Vec<Option<f64>> { v.iter().map(|m| (*m > 0.0).then_some(*m)).collect() };
    let mut tcp = 0usize;
    let mut first_probe = true;
    let mut first_udp = true;
    for f in &c.flows {
        let bps = s.flow_bps.get(&f.name);
        let lat = s.flow_latency_ms.get(&f.name);
        if f.kind.starts_with("tcp") {
            tcp += 1;
            if let Some(v) = bps {
                put(format!("TCP upload::{}", f.name), mbit(v), "Mbits/s");
            }
        } else if f.kind == "probe" {
            if let Some(v) = lat {
                let name =
                    if first_probe { "Ping (ms) ICMP".to_string() } else { format!("Ping (ms) {}", f.name) };
                first_probe = false;
                put(name, ms(v), "ms");
            }
        } else {
            if let Some(v) = bps {
                let name = if test == "udp_flood" && first_udp {
                    "UDP upload".to_string()
                } else {
                    format!("UDP upload::{}", f.name)
                };
                first_udp = false;
                put(name, mbit(v), "Mbits/s");
            }
            if let Some(v) = lat {
                put(format!("Delay (ms)::{}", f.name), ms(v), "ms");
            }
        }
    }
    for (id, v) in &s.class_bps {
        put(format!("Class::{id}"), mbit(v), "Mbits/s");
    }
    let len = n as f64 * s.step_s;
    let mut params = Map::new();
    if test == "tcp_nup" {
        params.insert("upload_streams".into(), json!(tcp.to_string()));
    }
    Some(json!({
        "version": 4,
        "x_values": x,
        "results": results,
        "raw_values": raw,
        "metadata": {
            "NAME": test,
            "TITLE": format!("{} {}", r.scenario, c.name),
            "NOTE": format!("Sluice {} run of scenario {}, case {} (seed {})", if r.backend.is_empty() { "sim" } else { &r.backend }, r.scenario, c.name, r.seed),
            "HOST": "sluice",
            "HOSTS": ["sluice"],
            "LOCAL_HOST": format!("sluice-{}", if r.backend.is_empty() { "sim" } else { &r.backend }),
            "TIME": T0_ISO,
            "T0": T0_ISO,
            "LENGTH": len,
            "TOTAL_LENGTH": len,
            "STEP_SIZE": s.step_s,
            "TEST_PARAMETERS": params,
            "FLENT_VERSION": FLENT_VERSION,
            "IP_VERSION": 4,
            "BATCH_NAME": null,
            "BATCH_TIME": null,
            "BATCH_TITLE": null,
            "BATCH_UUID": null,
            "DATA_FILENAME": null,
            "HTTP_GETTER_URLLIST": null,
            "HTTP_GETTER_DNS": null,
            "HTTP_GETTER_WORKERS": null,
            "SERIES_META": meta,
            "SLUICE": {
                "scenario": r.scenario,
                "case": c.name,
                "params": c.params,
                "backend": r.backend,
                "seed": r.seed,
                "measured_s": c.measured_s,
            },
        },
    }))
}

/// Gzipped bytes of [`flent_json`].
pub fn flent_gz(r: &Results, c: &Case) -> Option<Vec<u8>> {
    let v = flent_json(r, c)?;
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(v.to_string().as_bytes()).ok()?;
    enc.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{FlowResult, Series};
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn flow(name: &str, kind: &str) -> FlowResult {
        FlowResult { name: name.into(), kind: kind.into(), ..Default::default() }
    }

    #[test]
    fn tcp_cases_map_to_tcp_nup_with_the_scenario_kept_aside() {
        let mut s = Series { step_s: 0.1, ..Default::default() };
        s.flow_bps.insert("scp".into(), vec![1e6, 2e6]);
        s.flow_bps.insert("voip".into(), vec![2e5, 2e5]);
        s.flow_latency_ms.insert("ping".into(), vec![20.0, 0.0]);
        let c = Case {
            name: "load=scp".into(),
            flows: vec![flow("scp", "tcp-cubic"), flow("voip", "cbr"), flow("ping", "probe")],
            series: Some(s),
            ..Default::default()
        };
        let r = Results { scenario: "home-uplink".into(), ..Default::default() };
        let gz = flent_gz(&r, &c).unwrap();
        let mut txt = String::new();
        GzDecoder::new(&gz[..]).read_to_string(&mut txt).unwrap();
        let v: Value = serde_json::from_str(&txt).unwrap();
        assert_eq!(v["metadata"]["NAME"], json!("tcp_nup"));
        assert_eq!(v["metadata"]["TEST_PARAMETERS"]["upload_streams"], json!("1"));
        assert_eq!(v["metadata"]["SLUICE"]["scenario"], json!("home-uplink"));
        assert_eq!(v["x_values"][1], json!(0.1));
        assert_eq!(v["results"]["TCP upload::scp"][1], json!(2.0));
        assert_eq!(v["results"]["UDP upload::voip"][0], json!(0.2));
        assert_eq!(v["results"]["Ping (ms) ICMP"], json!([20.0, null]));
        // flent treats a file without raw values as empty.
        assert_eq!(v["raw_values"]["Ping (ms) ICMP"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn cases_without_tcp_map_to_ping_or_udp_flood() {
        let c = Case { flows: vec![flow("ping", "probe"), flow("v", "cbr")], ..Default::default() };
        assert_eq!(flent_test(&c), "ping");
        let c = Case { flows: vec![flow("v", "cbr")], ..Default::default() };
        assert_eq!(flent_test(&c), "udp_flood");
    }
}
