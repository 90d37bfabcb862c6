//! Runs a scenario: expands the sweep, validates every case, then runs the cases in parallel.

use crate::scenario::{build_case_opts, Scenario, ScenarioError};
use crate::{case_results, Sim};
use rayon::prelude::*;
use sluice_report::{PlotHints, Results};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Options of one run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--set key=value` overrides, in order.
    pub overrides: Vec<(String, String)>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--force`: run even when the work estimate says it would take hours.
    pub force: bool,
}

/// What the run cost.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// Events processed over all cases.
    pub events: u64,
    /// Packet transmissions (hop traversals) over all cases.
    pub transmissions: u64,
    /// Virtual seconds simulated over all cases.
    pub virtual_s: f64,
    /// Cases run.
    pub cases: usize,
    /// `sluice lint`'s findings on the shaper, checked before the run (each once).
    pub lint: Vec<String>,
}

/// Per case (by name): the `tc -s` text of its hops.
pub type TcStats = Vec<(String, String)>;

/// Runs `sc`. `progress` receives the overall fraction done (0..=1), from any thread.
pub fn run(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<(Results, RunInfo), ScenarioError> {
    run_inner(sc, opts, progress, false).map(|(r, i, _)| (r, i))
}

/// [`run`], and for each case (by name) the `tc -s qdisc show` / `tc -s class show` text of
/// every hop that runs a tc configuration, with the counters of the run
/// ([`crate::Sim::tc_stats`]).
pub fn run_with_tc_stats(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(f64) + Sync),
) -> Result<(Results, RunInfo, TcStats), ScenarioError> {
    run_inner(sc, opts, progress, true)
}

fn run_inner(
    sc: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(f64) + Sync),
    want_tc: bool,
) -> Result<(Results, RunInfo, TcStats), ScenarioError> {
    let mut overrides = opts.overrides.clone();
    if let Some(s) = opts.seed {
        overrides.push(("seed".into(), s.to_string()));
    }
    let points = sc.points(&overrides)?;
    let cases = points.iter().map(|p| build_case_opts(sc, p, opts.force)).collect::<Result<Vec<_>, _>>()?;
    // Cases run side by side, one a thread: that many of the largest at once.
    let largest = cases.iter().map(|c| c.memory).fold(0.0, f64::max);
    let at_once = rayon::current_num_threads().min(cases.len()).max(1);
    let total = largest * at_once as f64;
    let budget = crate::scenario::memory::budget();
    if at_once > 1 && total > budget {
        return Err(ScenarioError::at(
            &sc.path,
            &sc.src,
            None,
            format!(
                "{at_once} cases at once (one a core) need about {} of memory, more than the {} a run may use",
                crate::scenario::memory::gib(total),
                crate::scenario::memory::gib(budget)
            ),
            Some("run fewer cases (--set a swept parameter to one value) or set RAYON_NUM_THREADS=1".into()),
        ));
    }
    let seed = cases.first().map(|c| c.spec.seed).unwrap_or(1);
    let mut lint: Vec<String> = Vec::new();
    for l in cases.iter().flat_map(|c| &c.lint) {
        if !lint.contains(l) {
            lint.push(l.clone());
        }
    }
    let done: Vec<AtomicU64> = cases.iter().map(|_| AtomicU64::new(0)).collect();
    let n = cases.len().max(1) as f64;
    let t0 = Instant::now();
    let out: Vec<_> = cases
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut sim = Sim::new(&c.spec);
            sim.run(&mut |f| {
                done[i].store((f * 1e6) as u64, Ordering::Relaxed);
                let total: u64 = done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
                progress(total as f64 / 1e6 / n);
            });
            let st = sim.engine_stats();
            let mut res = case_results(&sim, &c.spec, &c.name, c.params.clone());
            for (k, v) in &c.references {
                res.extra.insert(k.clone(), *v);
            }
            if let Some(a) = &c.leaf_accuracy {
                a.summarize(&mut res);
            }
            let tc = want_tc.then(|| (c.name.clone(), sim.tc_stats(&c.tc_views)));
            (res, st, c.spec.duration.as_nanos() as f64 / 1e9, tc)
        })
        .collect();
    let mut info =
        RunInfo { wall_s: t0.elapsed().as_secs_f64(), cases: out.len(), lint, ..Default::default() };
    let mut results = Results {
        scenario: sc.file.name.clone(),
        seed,
        schema_version: sluice_report::schema::SCHEMA_VERSION,
        backend: "sim".into(),
        description: sc.file.description.clone(),
        cases: Vec::new(),
        plot: PlotHints {
            x: sc.file.report.as_ref().and_then(|r| r.x.clone()),
            group: sc.file.report.as_ref().and_then(|r| r.group.clone()),
        },
    };
    let mut tc_stats = Vec::new();
    for (c, st, v, tc) in out {
        info.events += st.events;
        info.transmissions += st.transmissions;
        info.virtual_s += v;
        results.cases.push(c);
        tc_stats.extend(tc);
    }
    Ok((results, info, tc_stats))
}
