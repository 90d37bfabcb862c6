//! What a results document shows, worked out from the results alone: which parameter the cases
//! compare (shaper off/on, legacy/fixed, ...), the rows of the summary (one per combination of
//! the other parameters, the compared cases side by side), and a generated headline.

use crate::plot::{param_number, param_unit, sweep_lines, sweep_point};
use crate::schema::{Case, ClassResult, FlowResult, Results};

/// A flow metric shown in summaries and comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Received throughput, Mbit/s.
    Mbps,
    /// Median latency, ms.
    P50,
    /// 99th percentile latency, ms.
    P99,
    /// Jitter, ms.
    Jitter,
    /// Loss, percent.
    Loss,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 5] = [Metric::Mbps, Metric::P50, Metric::P99, Metric::Jitter, Metric::Loss];
    /// Column header.
    pub fn header(self) -> &'static str {
        match self {
            Metric::Mbps => "Mbit/s",
            Metric::P50 => "p50 ms",
            Metric::P99 => "p99 ms",
            Metric::Jitter => "jitter ms",
            Metric::Loss => "loss %",
        }
    }
    /// Short name used in sentences.
    pub fn word(self) -> &'static str {
        match self {
            Metric::Mbps => "throughput",
            Metric::P50 => "median latency",
            Metric::P99 => "p99 latency",
            Metric::Jitter => "jitter",
            Metric::Loss => "loss",
        }
    }
    /// The value of this metric for `f`; None for latency and jitter when none of the flow's
    /// packets was measured (it sent, but nothing it sent in the measured window arrived).
    pub fn of(self, f: &FlowResult) -> Option<f64> {
        let unmeasured = f.sent > 0 && f.received == 0;
        match self {
            Metric::Mbps => Some(f.achieved_bps / 1e6),
            Metric::Loss => Some(f.loss_pct),
            _ if unmeasured => None,
            Metric::P50 => Some(f.latency_ms.p50),
            Metric::P99 => Some(f.latency_ms.p99),
            Metric::Jitter => Some(f.jitter_ms),
        }
    }
    /// Lower is better (latency, jitter, loss); None for throughput, whose better depends.
    pub fn lower_is_better(self) -> Option<bool> {
        match self {
            Metric::Mbps => None,
            _ => Some(true),
        }
    }
    /// Formats a value with its unit.
    pub fn fmt(self, v: f64) -> String {
        match self {
            Metric::Mbps => format!("{} Mbit/s", num(v)),
            Metric::Loss => format!("{}%", num(v)),
            _ => format!("{} ms", num(v)),
        }
    }
    /// Below this difference two values are the same for highlighting and headlines.
    pub fn floor(self) -> f64 {
        match self {
            Metric::Mbps => 0.01,
            Metric::P50 | Metric::P99 => 1.0,
            Metric::Jitter => 0.2,
            Metric::Loss => 0.2,
        }
    }
}

/// A number with three significant digits, no exponent for everyday magnitudes.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.0005 {
        format!("{v:.3}")
    } else {
        "≈0".into()
    }
}

/// True for flows whose latency is what matters (ping, VoIP-like constant-rate flows).
pub fn latency_sensitive(kind: &str) -> bool {
    matches!(kind, "probe" | "cbr" | "poisson" | "onoff")
}

/// A class's achieved rate against the reference it is due: its rate while it stays within its
/// guarantee (up to 1% over), its ceil above that. Returns (percent of the reference, "rate" or
/// "ceil"); None for a class without a rate or that sent nothing.
pub fn class_reference(cl: &ClassResult) -> Option<(f64, &'static str)> {
    if cl.packets == 0 && cl.achieved_bps == 0.0 {
        return None;
    }
    let rate = cl.rate_bps as f64;
    let ceil = if cl.ceil_bps > 0 { cl.ceil_bps as f64 } else { rate };
    if rate > 0.0 && (cl.achieved_bps <= rate * 1.01 || ceil <= rate) {
        Some((cl.achieved_bps / rate * 100.0, "rate"))
    } else if ceil > 0.0 {
        Some((cl.achieved_bps / ceil * 100.0, "ceil"))
    } else {
        None
    }
}

/// "100.0% of rate", "95.3% of ceil", "idle".
pub fn class_reference_text(cl: &ClassResult) -> String {
    match class_reference(cl) {
        Some((p, which)) => format!("{p:.1}% of {which}"),
        None if cl.rate_bps == 0 && cl.ceil_bps == 0 => "-".into(),
        None => "idle".into(),
    }
}

/// Values of `key` over the cases, in order of first appearance.
pub fn values_of(r: &Results, key: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in &r.cases {
        if let Some(x) = c.params.get(key) {
            if !v.contains(x) {
                v.push(x.clone());
            }
        }
    }
    v
}

/// The parameters that take more than one value, outermost (slowest-changing) first.
pub fn varying_params(r: &Results) -> Vec<String> {
    let mut keys: Vec<(usize, String)> = Vec::new();
    let Some(first) = r.cases.first() else { return vec![] };
    for k in first.params.keys() {
        if values_of(r, k).len() < 2 {
            continue;
        }
        let changes = r.cases.windows(2).filter(|w| w[0].params.get(k) != w[1].params.get(k)).count();
        keys.push((changes, k.clone()));
    }
    keys.sort();
    keys.into_iter().map(|k| k.1).collect()
}

/// The parameter whose values a reader compares: the first `group` hint key (not the x axis)
/// that takes 2 to 4 values.
pub fn compare_param(r: &Results) -> Option<String> {
    group_param(r, 4)
}

/// The first grouping parameter other than the x axis with 2 to `max` values.
fn group_param(r: &Results, max: usize) -> Option<String> {
    let x = r.plot.x.as_deref();
    r.plot
        .group
        .as_deref()?
        .split(',')
        .map(str::trim)
        .filter(|k| Some(*k) != x)
        .find(|k| (2..=max).contains(&values_of(r, k).len()))
        .map(str::to_string)
}

/// One summary row: the values of the non-compared parameters, and per compared value the case.
#[derive(Clone, Debug)]
pub struct Row {
    /// (parameter, value) of the varying parameters other than the compared one.
    pub key: Vec<(String, String)>,
    /// Index into `Results::cases` per compared value (None if that combination did not run).
    pub cases: Vec<Option<usize>>,
}

impl Row {
    /// "load=scp, test=voip" (or "all" when nothing else varies).
    pub fn label(&self) -> String {
        if self.key.is_empty() {
            return "all".into();
        }
        self.key.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
    }
}

/// The shape of a results document for the report.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Compared parameter, if any.
    pub compare: Option<String>,
    /// Its values, in order (a single empty string without one).
    pub columns: Vec<String>,
    /// The other varying parameters, outermost first (the x parameter last).
    pub rest: Vec<String>,
    /// Rows in case order.
    pub rows: Vec<Row>,
}

/// Works out the layout of `r`.
pub fn layout(r: &Results) -> Layout {
    layout_by(r, compare_param(r))
}

/// The grouping parameter the headline compares by: [`compare_param`], or else a grouping
/// parameter with more values than the side-by-side table holds (up to 8: the findings still
/// say what each value changed against the first).
fn findings_param(r: &Results) -> Option<String> {
    compare_param(r).or_else(|| group_param(r, 8))
}

/// [`layout`] with `compare` as the compared parameter.
fn layout_by(r: &Results, compare: Option<String>) -> Layout {
    let columns = match &compare {
        Some(g) => values_of(r, g),
        None => vec![String::new()],
    };
    let mut rest: Vec<String> =
        varying_params(r).into_iter().filter(|k| Some(k) != compare.as_ref()).collect();
    if let Some(x) = &r.plot.x {
        if let Some(i) = rest.iter().position(|k| k == x) {
            let k = rest.remove(i);
            rest.push(k);
        }
    }
    let mut rows: Vec<Row> = Vec::new();
    for (i, c) in r.cases.iter().enumerate() {
        let key: Vec<(String, String)> =
            rest.iter().map(|k| (k.clone(), c.params.get(k).cloned().unwrap_or_default())).collect();
        let col = match &compare {
            Some(g) => columns.iter().position(|v| Some(v) == c.params.get(g)).unwrap_or(0),
            None => 0,
        };
        match rows.iter_mut().find(|r| r.key == key && r.cases[col].is_none()) {
            Some(row) => row.cases[col] = Some(i),
            None => {
                let mut cases = vec![None; columns.len()];
                cases[col] = Some(i);
                rows.push(Row { key, cases });
            }
        }
    }
    Layout { compare, columns, rest, rows }
}

/// Flow names of a set of cases, in order of first appearance.
pub fn flow_names<'a>(cases: impl Iterator<Item = &'a Case>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in cases {
        for f in &c.flows {
            if !v.contains(&f.name) {
                v.push(f.name.clone());
            }
        }
    }
    v
}

/// Cases with more flows than this are summarised as one aggregate line.
pub const MAX_SUMMARY_FLOWS: usize = 12;

/// Case-level named figures worth showing (not engine counters, not per-flow figures, not seed
/// references), in key order.
pub fn case_figures(c: &Case) -> Vec<(String, f64)> {
    c.extra
        .iter()
        .filter(|(k, _)| {
            !k.starts_with("engine.")
                && !k.starts_with("seed_mbit.")
                && !c.flows.iter().any(|f| k.starts_with(&format!("{}.", f.name)))
        })
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn where_text(row: &Row) -> String {
    if row.key.is_empty() {
        String::new()
    } else {
        format!(" ({})", row.label())
    }
}

/// A candidate finding with a score for ordering.
struct Finding {
    score: f64,
    text: String,
    /// What kind of finding (one metric); the headline takes the best of each kind first.
    topic: String,
    /// What it is about (flow and metric); the headline says each thing once.
    key: String,
}

fn change_score(a: f64, b: f64, floor: f64) -> f64 {
    // `<=`: equal values (0 → 0 with a floor of 0) are no change, not a NaN score.
    if (a - b).abs() <= floor {
        return 0.0;
    }
    ((a.abs() + floor) / (b.abs() + floor)).ln().abs()
}

/// The headline: one sentence saying what ran, an optional lead-in for the findings ("shaper=off
/// → shaper=on:"), then up to `max` findings taken from the results.
pub fn headline(r: &Results, max: usize) -> Headline {
    let lay = layout_by(r, findings_param(r));
    let n = r.cases.len();
    let mut what = format!(
        "{} case{} of {} on the {} backend",
        n,
        if n == 1 { "" } else { "s" },
        r.scenario,
        if r.backend.is_empty() { "sim" } else { &r.backend }
    );
    let varying = varying_params(r);
    if !varying.is_empty() {
        let parts: Vec<String> = varying
            .iter()
            .map(|k| {
                let v = values_of(r, k);
                if v.len() <= 4 {
                    format!("{k} ({})", v.join(", "))
                } else {
                    format!("{k} ({} values, {} … {})", v.len(), v[0], v[v.len() - 1])
                }
            })
            .collect();
        what.push_str(": ");
        what.push_str(&parts.join(" × "));
    }
    what.push('.');
    let mut lead = None;
    let mut findings = sweep_findings(r);
    if findings.is_empty() {
        findings = compare_findings(r, &lay);
        if !findings.is_empty() {
            if let (Some(g), 2) = (&lay.compare, lay.columns.len()) {
                lead = Some(format!("{g}={} → {g}={}:", lay.columns[0], lay.columns[1]));
            }
        }
    }
    if findings.is_empty() {
        findings = plain_findings(r);
    }
    findings.sort_by(|a, b| b.score.total_cmp(&a.score));
    // The best finding of each kind first, then the rest by score; each thing said once.
    let mut picked: Vec<usize> = Vec::new();
    let mut topics: Vec<&str> = Vec::new();
    for (i, f) in findings.iter().enumerate() {
        if !topics.contains(&f.topic.as_str()) && !picked.iter().any(|&j| findings[j].key == f.key) {
            topics.push(&f.topic);
            picked.push(i);
        }
    }
    for (i, f) in findings.iter().enumerate() {
        if !picked.contains(&i) && !picked.iter().any(|&j| findings[j].key == f.key) {
            picked.push(i);
        }
    }
    picked.truncate(max);
    picked.sort_by(|a, b| findings[*b].score.total_cmp(&findings[*a].score));
    Headline { what, lead, findings: picked.into_iter().map(|i| findings[i].text.clone()).collect() }
}

/// What [`headline`] says.
#[derive(Clone, Debug, Default)]
pub struct Headline {
    /// What ran.
    pub what: String,
    /// Lead-in for the findings, if they share one.
    pub lead: Option<String>,
    /// The findings, most notable first.
    pub findings: Vec<String>,
}

/// Target-vs-achieved sweeps: the error range of each line.
fn sweep_findings(r: &Results) -> Vec<Finding> {
    let (x, _, err) = sweep_lines(r);
    if err.is_empty() {
        return vec![];
    }
    let unit = r.cases.iter().find_map(|c| c.params.get(&x)).map(|v| param_unit(v)).unwrap_or("");
    let mut out = Vec::new();
    for (i, (name, pts)) in err.iter().enumerate() {
        let (lo, hi) = pts.iter().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
        let (x0, x1) = (pts.first().map(|p| p.0).unwrap_or(0.0), pts.last().map(|p| p.0).unwrap_or(0.0));
        let worst = pts.iter().max_by(|a, b| a.1.abs().total_cmp(&b.1.abs())).copied().unwrap_or((0.0, 0.0));
        let label = if name.is_empty() { "the achieved rate".to_string() } else { name.clone() };
        let text = if hi - lo < 1e-3 && lo.abs() < 1e-3 {
            format!(
                "{label}: on target at every {x} from {} to {} {unit} (error within ±0.001%).",
                num(x0),
                num(x1)
            )
        } else {
            format!(
                "{label}: error {:+.3}% … {:+.3}% over {x} {} – {} {unit}; worst {:+.3}% at {} {unit}.",
                lo,
                hi,
                num(x0),
                num(x1),
                worst.1,
                num(worst.0)
            )
        };
        // Keep the lines in their order: earlier lines first.
        out.push(Finding { score: 1000.0 - i as f64, text, topic: name.clone(), key: name.clone() });
    }
    out
}

/// Compared cases: the largest changes from the first compared value to the others.
fn compare_findings(r: &Results, lay: &Layout) -> Vec<Finding> {
    let Some(g) = &lay.compare else { return vec![] };
    let mut out = Vec::new();
    for row in &lay.rows {
        let Some(a) = row.cases[0].map(|i| &r.cases[i]) else { continue };
        for (j, other) in lay.columns.iter().enumerate().skip(1) {
            let Some(b) = row.cases[j].map(|i| &r.cases[i]) else { continue };
            if a.flows.len() <= MAX_SUMMARY_FLOWS {
                for fa in &a.flows {
                    let Some(fb) = b.flows.iter().find(|f| f.name == fa.name) else { continue };
                    let metrics: &[Metric] = if latency_sensitive(&fa.kind) {
                        &[Metric::P50, Metric::Loss, Metric::Jitter]
                    } else {
                        &[Metric::Mbps, Metric::Loss]
                    };
                    for &m in metrics {
                        let (Some(va), Some(vb)) = (m.of(fa), m.of(fb)) else { continue };
                        let mut s = change_score(va, vb, m.floor());
                        if m == Metric::Jitter {
                            s *= 0.5;
                        }
                        if s <= 0.05 {
                            continue;
                        }
                        let with =
                            if lay.columns.len() > 2 { format!(" with {g}={other}") } else { String::new() };
                        out.push(Finding {
                            score: s,
                            text: format!(
                                "{} {} {} → {}{with}{}.",
                                fa.name,
                                m.word(),
                                m.fmt(va),
                                m.fmt(vb),
                                where_text(row)
                            ),
                            topic: format!("{m:?}"),
                            key: format!("{}:{m:?}:{other}", fa.name),
                        });
                    }
                }
            }
            for (k, va) in case_figures(a) {
                let Some(vb) = b.extra.get(&k).copied() else { continue };
                // The noise floor of a figure is 1 % of its largest value in the run: 0 → 3
                // ACKs filtered is no finding beside 30 000 elsewhere.
                let scale =
                    r.cases.iter().filter_map(|c| c.extra.get(&k)).fold(0.0, |m: f64, v| m.max(v.abs()));
                let s = change_score(va, vb, (scale * 0.01).max(va.abs().max(vb.abs()) * 1e-3));
                if s <= 0.05 {
                    continue;
                }
                let with = if lay.columns.len() > 2 { format!(" with {g}={other}") } else { String::new() };
                out.push(Finding {
                    score: s,
                    text: format!("{k} {} → {}{with}{}.", num(va), num(vb), where_text(row)),
                    topic: format!("extra:{k}"),
                    key: format!("extra:{k}:{other}"),
                });
            }
        }
    }
    out
}

/// Without a comparison: the seed references, else the busiest flows.
fn plain_findings(r: &Results) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut diffs: Vec<(f64, String, String, f64)> = Vec::new();
    for c in &r.cases {
        for f in &c.flows {
            if let Some(seed) = c.extra.get(&format!("seed_mbit.{}", f.name)) {
                diffs.push((f.achieved_bps / 1e6 - seed, c.name.clone(), f.name.clone(), *seed));
            }
        }
    }
    if !diffs.is_empty() {
        // diffs: (ours - seed, case, flow, seed)
        let within = diffs.iter().filter(|d| d.0.abs() <= 0.1 * d.3.abs()).count();
        let worst = diffs
            .iter()
            .max_by(|a, b| (a.0 / a.3.max(1e-9)).abs().total_cmp(&(b.0 / b.3.max(1e-9)).abs()))
            .cloned()
            .unwrap_or_default();
        out.push(Finding {
            score: 10.0,
            text: format!(
                "Against the seed's {} published figures, {} of ours are within 10%; the furthest is {} against the seed's {} ({} in {}).",
                diffs.len(),
                within,
                Metric::Mbps.fmt(worst.3 + worst.0),
                Metric::Mbps.fmt(worst.3),
                worst.2,
                worst.1
            ),
            topic: "seed".into(),
            key: "seed".into(),
        });
        return out;
    }
    for c in r.cases.iter().take(3) {
        let total: f64 = c.flows.iter().map(|f| f.achieved_bps).sum();
        if c.flows.is_empty() {
            continue;
        }
        let worst = c.flows.iter().map(|f| f.latency_ms.p99).fold(0.0, f64::max);
        out.push(Finding {
            score: 1.0,
            text: format!(
                "{}: {} flow{} {} in total; worst p99 latency {}.",
                c.name,
                c.flows.len(),
                if c.flows.len() == 1 { " carries" } else { "s carry" },
                Metric::Mbps.fmt(total / 1e6),
                Metric::P99.fmt(worst)
            ),
            topic: c.name.clone(),
            key: c.name.clone(),
        });
    }
    out
}

/// The x value of a case under the x hint, if it is numeric.
pub fn x_value(r: &Results, c: &Case) -> Option<f64> {
    c.params.get(r.plot.x.as_ref()?).and_then(|v| param_number(v))
}

/// (achieved Mbit/s, error %) of a sweep case against its target, if the results are a sweep.
pub fn sweep_cell(r: &Results, c: &Case) -> Option<(f64, f64)> {
    let xv = x_value(r, c)?;
    let (a, t) = sweep_point(c, xv)?;
    Some((a / 1e6, (a - t) / t * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Latency, PlotHints};

    #[test]
    fn two_zeros_are_no_change() {
        assert_eq!(change_score(0.0, 0.0, 0.0), 0.0);
        assert!(change_score(0.0, 100.0, 0.1) > 1.0);
    }

    fn case(params: &[(&str, &str)], flows: Vec<FlowResult>) -> Case {
        Case {
            name: params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            flows,
            ..Default::default()
        }
    }

    fn ping(p50: f64, loss: f64) -> FlowResult {
        FlowResult {
            name: "ping".into(),
            kind: "probe".into(),
            latency_ms: Latency { p50, p90: p50, p99: p50, max: p50 },
            loss_pct: loss,
            ..Default::default()
        }
    }

    #[test]
    fn a_flow_with_nothing_measured_has_no_latency_or_jitter() {
        let mut f = ping(0.0, 90.0);
        f.sent = 100;
        assert_eq!((Metric::P50.of(&f), Metric::Jitter.of(&f)), (None, None));
        assert_eq!(Metric::Loss.of(&f), Some(90.0));
        f.received = 10;
        assert_eq!(Metric::P50.of(&f), Some(0.0));
    }

    #[test]
    fn compared_cases_pair_up_and_the_headline_names_the_change() {
        let r = Results {
            scenario: "s".into(),
            plot: PlotHints { x: None, group: Some("shaper".into()) },
            cases: vec![
                case(&[("load", "none"), ("shaper", "off")], vec![ping(20.0, 0.0)]),
                case(&[("load", "none"), ("shaper", "on")], vec![ping(20.5, 0.0)]),
                case(&[("load", "scp"), ("shaper", "off")], vec![ping(190.0, 1.0)]),
                case(&[("load", "scp"), ("shaper", "on")], vec![ping(22.0, 0.0)]),
            ],
            ..Default::default()
        };
        let l = layout(&r);
        assert_eq!(l.compare.as_deref(), Some("shaper"));
        assert_eq!(l.columns, vec!["off", "on"]);
        assert_eq!(l.rows.len(), 2);
        assert_eq!(l.rows[1].cases, vec![Some(2), Some(3)]);
        let h = headline(&r, 3);
        assert!(h.what.starts_with("4 cases of s"), "{}", h.what);
        assert_eq!(h.lead.as_deref(), Some("shaper=off → shaper=on:"));
        let f = &h.findings;
        assert!(f.iter().any(|t| t.contains("ping median latency 190 ms → 22.0 ms (load=scp)")), "{f:?}");
        assert!(f.iter().any(|t| t.contains("ping loss 1.00% → 0%")), "{f:?}");
    }

    #[test]
    fn class_reference_uses_rate_within_the_guarantee_and_ceil_above() {
        let c = |a: f64| ClassResult {
            id: "1:10".into(),
            rate_bps: 2_300_000,
            ceil_bps: 4_600_000,
            achieved_bps: a,
            packets: 1,
            ..Default::default()
        };
        assert_eq!(class_reference(&c(2_300_000.0)), Some((100.0, "rate")));
        let (p, w) = class_reference(&c(4_392_000.0)).unwrap();
        assert_eq!(w, "ceil");
        assert!((p - 95.478).abs() < 0.01);
        let idle = ClassResult { packets: 0, achieved_bps: 0.0, ..c(0.0) };
        assert_eq!(class_reference_text(&idle), "idle");
    }

    #[test]
    fn five_compared_values_still_give_findings_and_equal_figures_are_no_change() {
        let shapers = ["htb", "cake", "cake-nat", "cake-ack", "cake-ack-aggressive"];
        let mut cases: Vec<Case> = Vec::new();
        for (i, s) in shapers.iter().enumerate() {
            let mut c = case(&[("shaper", s)], vec![ping(if i == 3 { 90.0 } else { 20.0 }, 0.0)]);
            // 0 → 3 is noise beside 0 → 30 000 in the same run; 0 → 0 is no change.
            c.extra.insert("acks filtered".into(), [0.0, 3.0, 0.0, 0.0, 30_000.0][i]);
            cases.push(c);
        }
        let r = Results {
            scenario: "s".into(),
            plot: PlotHints { x: None, group: Some("shaper".into()) },
            cases,
            ..Default::default()
        };
        assert_eq!(layout(&r).compare, None, "five values are too many for the side-by-side table");
        let h = headline(&r, 3);
        assert_eq!(h.findings.len(), 2, "{:?}", h.findings);
        assert!(
            h.findings
                .iter()
                .any(|f| f.contains("ping median latency 20.0 ms → 90.0 ms with shaper=cake-ack")),
            "{h:?}"
        );
        assert!(
            h.findings.iter().any(|f| f.contains("acks filtered 0 → 30000 with shaper=cake-ack-aggressive")),
            "{h:?}"
        );
        assert_eq!(change_score(0.0, 0.0, 0.0), 0.0);
    }
}
