//! Scenario files: parsing, parameters, `--set` overrides, sweeps, and resolution into
//! [`SimSpec`]s. See `docs/scenarios.md` for the annotated format.

mod build;
mod error;
pub mod file;
pub(crate) mod memory;

pub use build::{build_case, build_case_opts, CaseSpec, Ctx, LeafAccuracy, TcView};
pub use error::{line_col, ScenarioError};

use file::{Scalar, ScenarioFile, SweepFile};
use sluice_core::units::{format_rate, format_size, format_time, parse_rate, parse_size, parse_time};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most points a sweep may expand to.
const MAX_POINTS: usize = 100_000;
/// A parsed scenario with its source, ready to expand into cases.
#[derive(Debug)]
pub struct Scenario {
    /// Where it came from (for error messages).
    pub path: String,
    /// Directory for relative `file =` references.
    pub dir: Option<PathBuf>,
    /// The source text.
    pub src: String,
    /// The parsed file.
    pub file: ScenarioFile,
}

/// One point of a sweep: parameter values by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// All parameters (defaults, overrides, sweep values).
    pub params: BTreeMap<String, String>,
    /// The swept ones, in order, for the case name.
    pub swept: Vec<(String, String)>,
}

impl Point {
    /// `k=v,k=v` of the swept parameters, or `default`.
    pub fn name(&self) -> String {
        if self.swept.is_empty() {
            "default".to_string()
        } else {
            self.swept.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        }
    }
}

impl Scenario {
    /// Parses `src` (named `path` in errors).
    pub fn parse(path: &str, src: &str) -> Result<Scenario, ScenarioError> {
        let file: ScenarioFile = toml::from_str(src).map_err(|e| error::from_toml(path, src, e))?;
        let dir = Path::new(path).parent().map(|p| p.to_path_buf());
        Ok(Scenario { path: path.to_string(), dir, src: src.to_string(), file })
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let p = path.display().to_string();
        let src = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::at(&p, "", None, format!("cannot read: {e}"), None))?;
        Scenario::parse(&p, &src)
    }

    /// A built-in scenario by name, or a file path.
    pub fn find(name_or_path: &str) -> Result<Scenario, ScenarioError> {
        if let Some((_, _, src)) = crate::builtin::BUILTIN.iter().find(|(n, _, _)| *n == name_or_path) {
            return Scenario::parse(&format!("<builtin:{name_or_path}>"), src);
        }
        let p = Path::new(name_or_path);
        if p.exists() {
            return Scenario::load(p);
        }
        let names: Vec<_> = crate::builtin::BUILTIN.iter().map(|(n, _, _)| *n).collect();
        Err(ScenarioError::at(
            name_or_path,
            "",
            None,
            "no such built-in scenario or file",
            Some(format!("built-in scenarios: {}", names.join(", "))),
        ))
    }

    fn err(
        &self,
        span: Option<std::ops::Range<usize>>,
        msg: impl Into<String>,
        hint: Option<String>,
    ) -> ScenarioError {
        ScenarioError::at(&self.path, &self.src, span, msg, hint)
    }

    /// Expands defaults, `--set key=value` overrides and the sweep into points.
    /// A `--set` value with commas (`rate=1gbit,5gbit`) sweeps that parameter; a single value
    /// fixes a swept one. Top-level `duration`, `warmup`, `step` and `seed` may be set too.
    pub fn points(&self, overrides: &[(String, String)]) -> Result<Vec<Point>, ScenarioError> {
        let mut params: BTreeMap<String, String> =
            self.file.params.iter().map(|(k, v)| (k.clone(), v.get_ref().text())).collect();
        let mut sweep: Vec<(String, Vec<String>)> = Vec::new();
        for (k, v) in &self.file.sweep {
            let vals = self.sweep_values(k, v)?;
            sweep.push((k.clone(), vals));
        }
        for (k, v) in overrides {
            let top = ["duration", "warmup", "step", "seed", "start_jitter"].contains(&k.as_str());
            if !top && !params.contains_key(k) && !sweep.iter().any(|(s, _)| s == k) {
                let mut known: Vec<_> = params.keys().cloned().collect();
                known.extend(["duration", "warmup", "step", "seed", "start_jitter"].map(String::from));
                return Err(ScenarioError::at(
                    "--set",
                    &format!("{k}={v}"),
                    Some(0..k.len()),
                    format!("unknown parameter `{k}` for scenario {}", self.file.name),
                    Some(format!("parameters: {}", known.join(", "))),
                ));
            }
            let vals: Vec<String> =
                v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
            sweep.retain(|(s, _)| s != k);
            if vals.len() > 1 {
                sweep.push((k.clone(), vals));
            } else {
                params.insert(k.clone(), vals.into_iter().next().unwrap_or_default());
            }
        }
        let n = sweep.iter().try_fold(1usize, |n, (_, v)| n.checked_mul(v.len())).unwrap_or(usize::MAX);
        if n > MAX_POINTS {
            let what = if n == usize::MAX { "more than 2^64".to_string() } else { n.to_string() };
            return Err(self.err(
                None,
                format!("the sweep has {what} points (at most {MAX_POINTS})"),
                Some("fix some swept keys with --set key=value, or sweep fewer values".into()),
            ));
        }
        let mut points = vec![Point { params: params.clone(), swept: Vec::new() }];
        for (k, vals) in &sweep {
            let mut next = Vec::with_capacity(points.len() * vals.len());
            for p in &points {
                for v in vals {
                    let mut q = p.clone();
                    q.params.insert(k.clone(), v.clone());
                    q.swept.push((k.clone(), v.clone()));
                    next.push(q);
                }
            }
            points = next;
        }
        if !self.file.skip.is_empty() {
            let mut kept = Vec::with_capacity(points.len());
            for p in points {
                let ctx = build::Ctx { sc: self, params: &p.params };
                let mut skip = false;
                for q in &self.file.skip {
                    skip |= ctx.when(&Some(q.clone()))?;
                }
                if !skip {
                    kept.push(p);
                }
            }
            if kept.is_empty() {
                return Err(self.err(None, "every point of the sweep is skipped".to_string(), None));
            }
            points = kept;
        }
        Ok(points)
    }

    fn sweep_values(&self, key: &str, v: &toml::Spanned<SweepFile>) -> Result<Vec<String>, ScenarioError> {
        let span = Some(v.span());
        match v.get_ref() {
            SweepFile::List(l) => {
                if l.is_empty() {
                    return Err(self.err(
                        span,
                        format!("sweep `{key}` is empty"),
                        Some("give at least one value".into()),
                    ));
                }
                Ok(l.iter().map(Scalar::text).collect())
            }
            SweepFile::Range(r) => {
                let (from, to, step) = (r.from.text(), r.to.text(), r.step.text());
                type P = fn(&str) -> Option<(f64, Box<dyn Fn(f64) -> String>)>;
                let kinds: [P; 4] = [
                    |s| {
                        s.parse::<f64>()
                            .ok()
                            .map(|x| (x, Box::new(|v: f64| trim_num(v)) as Box<dyn Fn(f64) -> String>))
                    },
                    |s| {
                        parse_rate(s).ok().map(|r| {
                            (
                                r.bps() as f64,
                                Box::new(|v: f64| format_rate(sluice_core::Rate::from_bps(v.round() as u64)))
                                    as _,
                            )
                        })
                    },
                    |s| {
                        parse_time(s).ok().map(|t| {
                            (
                                t.as_nanos() as f64,
                                Box::new(|v: f64| {
                                    format_time(sluice_core::Span::from_nanos(v.round() as u64))
                                }) as _,
                            )
                        })
                    },
                    |s| {
                        parse_size(s)
                            .ok()
                            .map(|b| (b as f64, Box::new(|v: f64| format_size(v.round() as u64)) as _))
                    },
                ];
                for k in kinds {
                    if let (Some((a, fmt)), Some((b, _)), Some((st, _))) = (k(&from), k(&to), k(&step)) {
                        if !(a.is_finite() && b.is_finite() && st.is_finite()) {
                            return Err(self.err(
                                span,
                                format!("range `{from}`..`{to}` step `{step}` is not finite"),
                                Some("give finite bounds and step".into()),
                            ));
                        }
                        if st <= 0.0 || b < a {
                            return Err(self.err(span, "range needs from <= to and step > 0", None));
                        }
                        // Counted in f64 first: a tiny step gives more points than usize holds.
                        let points = ((b - a) / st + 1e-9).floor() + 1.0;
                        if points > 100_000.0 {
                            return Err(self.err(
                                span,
                                format!("range `{from}`..`{to}` step `{step}` has {points:.3e} points"),
                                Some("use a larger step (at most 100 000 points)".into()),
                            ));
                        }
                        let n = points as usize;
                        return Ok((0..n).map(|i| fmt(a + st * i as f64)).collect());
                    }
                }
                Err(self.err(
                    span,
                    format!("cannot read range `{from}`..`{to}` step `{step}`"),
                    Some("use numbers, or rates/times/sizes with tc units in all three".into()),
                ))
            }
        }
    }
}

fn trim_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
