//! flent-compatible data files (`.flent.gz`): gzipped JSON with `x_values` and `results`
//! series, so `flent -i FILE.flent.gz -p ...` can re-plot Sluice time series.

use crate::schema::{Case, Results};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Map, Value};
use std::io::Write;

/// The flent document for one case (None if the case has no time series).
pub fn flent_json(r: &Results, c: &Case) -> Option<Value> {
    let s = c.series.as_ref()?;
    let n = s.flow_bps.values().map(Vec::len).max().unwrap_or(0);
    let x: Vec<f64> = (0..n).map(|i| i as f64 * s.step_s).collect();
    let mut results = Map::new();
    for (name, v) in &s.flow_bps {
        results.insert(format!("{name} throughput"), json!(v.iter().map(|b| b / 1e6).collect::<Vec<_>>()));
    }
    for (name, v) in &s.flow_latency_ms {
        let vals: Vec<Value> = v.iter().map(|ms| if *ms > 0.0 { json!(ms) } else { Value::Null }).collect();
        results.insert(format!("{name} latency"), Value::Array(vals));
    }
    for (name, v) in &s.class_bps {
        results
            .insert(format!("class {name} throughput"), json!(v.iter().map(|b| b / 1e6).collect::<Vec<_>>()));
    }
    Some(json!({
        "version": 4,
        "x_values": x,
        "results": results,
        "raw_values": {},
        "metadata": {
            "NAME": r.scenario,
            "TITLE": c.name,
            "TOTAL_LENGTH": n as f64 * s.step_s,
            "STEP_SIZE": s.step_s,
            "LENGTH": n as f64 * s.step_s,
            "HOST": "sluice-sim",
            "BACKEND": r.backend,
            "SEED": r.seed,
            "UNITS": {"throughput": "Mbits/s", "latency": "ms"},
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
    use crate::schema::Series;
    use flate2::read::GzDecoder;
    use std::io::Read;

    #[test]
    fn round_trips_through_gzip() {
        let mut s = Series { step_s: 0.1, ..Default::default() };
        s.flow_bps.insert("f".into(), vec![1e6, 2e6]);
        let c = Case { name: "c".into(), series: Some(s), ..Default::default() };
        let r = Results { scenario: "x".into(), ..Default::default() };
        let gz = flent_gz(&r, &c).unwrap();
        let mut txt = String::new();
        GzDecoder::new(&gz[..]).read_to_string(&mut txt).unwrap();
        let v: Value = serde_json::from_str(&txt).unwrap();
        assert_eq!(v["x_values"][1], json!(0.1));
        assert_eq!(v["results"]["f throughput"][1], json!(2.0));
    }
}
