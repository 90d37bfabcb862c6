//! Which figures a report gets, and how they are grouped: cases a reader compares (the
//! [`Layout`](crate::analysis::Layout)'s columns) stand side by side on shared axes.

use crate::analysis::{latency_sensitive, layout, Layout, Row};
use crate::plot::{self, class_bars, sweep_chart, sweep_lines, union, Chart, ClassBar, Series};
use crate::schema::{Case, Results};
use std::path::{Path, PathBuf};

/// Rows beyond this many get no per-row time-series figures (their data stays in the JSON).
pub const MAX_ROWS: usize = 12;
/// Cases with more classes than this get no class figure.
pub const MAX_CLASSES: usize = 40;

/// One drawn panel.
#[derive(Clone, Debug)]
pub struct Panel {
    /// The SVG file (inlined into report.html).
    pub svg: PathBuf,
}

/// Panels shown together, side by side in `columns` columns.
#[derive(Clone, Debug)]
pub struct Group {
    /// Heading.
    pub title: String,
    /// One line saying what to look at.
    pub note: String,
    /// The panels, row-major.
    pub panels: Vec<Panel>,
    /// Grid columns.
    pub columns: usize,
    /// Shown up front (true) or in the collapsed "more figures" section.
    pub primary: bool,
}

/// Every file written, and the groups for the page.
#[derive(Default)]
pub struct Figures {
    /// Groups in page order.
    pub groups: Vec<Group>,
    /// Files written (SVG and PNG).
    pub files: usize,
    /// Figures that could not be drawn (by file base name); empty unless something is broken.
    pub failed: Vec<String>,
}

/// File-name-safe version of a case name.
pub fn slug(s: &str) -> String {
    let mut out: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    out.truncate(80);
    out
}

impl Figures {
    fn add(&mut self, base: &Path, files: Vec<PathBuf>) -> Option<Panel> {
        self.files += files.len();
        let svg = files.into_iter().find(|p| p.extension().is_some_and(|e| e == "svg"));
        if svg.is_none() {
            self.failed.push(base.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default());
        }
        svg.map(|svg| Panel { svg })
    }
    fn push(&mut self, title: &str, note: &str, panels: Vec<Panel>, columns: usize, primary: bool) {
        if !panels.is_empty() {
            self.groups.push(Group {
                title: title.into(),
                note: note.into(),
                panels,
                columns: columns.clamp(1, 4),
                primary,
            });
        }
    }
}

/// The label of case `i` among `cases`: the parameters whose values differ between them.
fn short_label(r: &Results, cases: &[usize], i: usize) -> String {
    let c = &r.cases[i];
    let parts: Vec<String> = c
        .params
        .iter()
        .filter(|(k, _)| cases.iter().any(|&j| r.cases[j].params.get(*k) != c.params.get(*k)))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if parts.is_empty() {
        c.name.clone()
    } else {
        parts.join(" ")
    }
}

fn title_of(lay: &Layout, row: &Row, col: usize) -> String {
    let mut parts: Vec<String> = row.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(g) = &lay.compare {
        parts.push(format!("{g}={}", lay.columns[col]));
    }
    if parts.is_empty() {
        "all".into()
    } else {
        parts.join(", ")
    }
}

fn series_lines(
    m: &std::collections::BTreeMap<String, Vec<f64>>,
    step: f64,
    scale: f64,
    colors: &[String],
    skip_zero: bool,
) -> Vec<Series> {
    m.iter()
        .map(|(k, v)| {
            let pts = v
                .iter()
                .enumerate()
                .filter(|(_, y)| !skip_zero || **y > 0.0)
                .map(|(j, y)| (j as f64 * step, y * scale))
                .collect();
            Series::new(k.clone(), pts, colors.iter().position(|c| c == k).unwrap_or(0))
        })
        .collect()
}

/// Draws a row's time series side by side: one panel per compared case, shared axes.
#[allow(clippy::too_many_arguments)]
fn row_series(
    figs: &mut Figures,
    r: &Results,
    lay: &Layout,
    dir: &Path,
    what: &str,
    y_label: &str,
    pick: &dyn Fn(&crate::schema::Series) -> Vec<Series>,
) -> Vec<Panel> {
    let mut panels = Vec::new();
    for row in lay.rows.iter().take(MAX_ROWS) {
        let charts: Vec<(usize, Chart)> = row
            .cases
            .iter()
            .enumerate()
            .filter_map(|(col, i)| {
                let i = (*i)?;
                let s = r.cases[i].series.as_ref()?;
                let mut c = Chart::new(title_of(lay, row, col), "time (s)", y_label);
                c.series = pick(s);
                (!c.series.is_empty()).then_some((i, c))
            })
            .collect();
        let shared = charts.iter().fold(None, |b, (_, c)| union(b, c.data_bounds()));
        for (i, mut c) in charts {
            if let Some((x0, x1, _, y1)) = shared {
                c.x = Some((x0, x1));
                c.y = Some((0.0, (y1 * 1.05).max(1e-9)));
            }
            let base = dir.join(format!("{}-{what}", slug(&r.cases[i].name)));
            if let Some(p) = figs.add(&base, plot::chart(&base, &c)) {
                panels.push(p);
            }
        }
    }
    panels
}

/// Draws every figure of `r` into `dir`.
pub fn draw(r: &Results, dir: &Path) -> Figures {
    let lay = layout(r);
    let mut figs = Figures::default();
    let ncol = lay.columns.len();
    // A sweep: target against achieved, one line per group, with the error panel.
    let (x, ach, err) = sweep_lines(r);
    if !ach.is_empty() {
        let unit = r.cases.iter().find_map(|c| c.params.get(&x)).map(|v| plot::param_unit(v)).unwrap_or("");
        let xl = if unit.is_empty() { x.clone() } else { format!("{x} ({unit})") };
        let base = dir.join("sweep");
        let f = sweep_chart(&base, &format!("{}: achieved against target", r.scenario), &xl, &ach, &err);
        let p = figs.add(&base, f).into_iter().collect();
        figs.push(
            "Achieved against target",
            "Each line is one group of cases; the lower panel is the error against the target (0 is exact).",
            p,
            1,
            true,
        );
    }
    // Flow colours: one per flow name over the whole report, so panels side by side agree.
    let flow_names = crate::analysis::flow_names(r.cases.iter().filter(|c| c.series.is_some()));
    // Latency CDFs: one plot per latency-sensitive flow, one curve per case.
    let mut cdf_panels = Vec::new();
    for name in &flow_names {
        let with: Vec<usize> = (0..r.cases.len())
            .filter(|&i| {
                let c = &r.cases[i];
                c.flows.iter().any(|f| &f.name == name && latency_sensitive(&f.kind))
                    && c.series
                        .as_ref()
                        .is_some_and(|s| s.latency_cdf.get(name).is_some_and(|v| !v.is_empty()))
            })
            .collect();
        if with.is_empty() {
            continue;
        }
        let mut c = Chart::new(format!("{name}: latency CDF"), "latency (ms)", "fraction of packets");
        c.x = None;
        for &i in with.iter().take(2 * MAX_ROWS) {
            let Some(pts) = r.cases[i].series.as_ref().and_then(|s| s.latency_cdf.get(name)) else {
                continue;
            };
            let (row, col) = lay
                .rows
                .iter()
                .enumerate()
                .find_map(|(ri, row)| row.cases.iter().position(|x| *x == Some(i)).map(|ci| (ri, ci)))
                .unwrap_or((0, 0));
            let mut s = Series::new(short_label(r, &with, i), pts.clone(), row);
            // The first compared value (off, legacy, ...) dashed, the others solid.
            s.dashed = ncol > 1 && col == 0;
            c.series.push(s);
        }
        c.y = Some((0.0, 1.02));
        let base = dir.join(format!("cdf-{}", slug(name)));
        if let Some(p) = figs.add(&base, plot::chart(&base, &c)) {
            cdf_panels.push(p);
        }
    }
    let dash_note = match &lay.compare {
        Some(g) if ncol > 1 => format!(" Dashed: {g}={}; solid: the other values.", lay.columns[0]),
        _ => String::new(),
    };
    figs.push(
        "Latency distribution",
        &format!(
            "One curve per case; further left is better, a vertical curve is steady latency.{dash_note}"
        ),
        cdf_panels,
        2,
        true,
    );
    // Throughput over time, compared cases side by side on shared axes.
    let tput = row_series(&mut figs, r, &lay, dir, "throughput", "Mbit/s", &|s| {
        series_lines(&s.flow_bps, s.step_s, 1e-6, &flow_names, false)
    });
    let cmp_note = match &lay.compare {
        Some(g) => format!("Each row: {g} = {} side by side, same axes.", lay.columns.join(" | ")),
        None => "Same axes in every panel.".into(),
    };
    figs.push("Throughput over time", &format!("Received throughput per flow. {cmp_note}"), tput, ncol, true);
    // Per-class achieved against rate and ceil.
    let class_cases: Vec<(usize, usize, usize)> = lay
        .rows
        .iter()
        .enumerate()
        .flat_map(|(ri, row)| row.cases.iter().enumerate().filter_map(move |(ci, i)| i.map(|i| (ri, ci, i))))
        .filter(|&(_, _, i)| (2..=MAX_CLASSES).contains(&r.cases[i].classes.len()))
        .collect();
    if !class_cases.is_empty() {
        let bars_of = |c: &Case| -> Vec<ClassBar> {
            c.classes
                .iter()
                .map(|cl| ClassBar {
                    label: cl.id.clone(),
                    achieved: cl.achieved_bps / 1e6,
                    rate: cl.rate_bps as f64 / 1e6,
                    ceil: cl.ceil_bps as f64 / 1e6,
                })
                .collect()
        };
        let ymax = class_cases
            .iter()
            .map(|&(_, _, i)| plot::class_bars_max(&bars_of(&r.cases[i])))
            .fold(0.0, f64::max);
        let mut panels = Vec::new();
        for &(ri, ci, i) in class_cases.iter().take(2 * MAX_ROWS) {
            let base = dir.join(format!("{}-classes", slug(&r.cases[i].name)));
            let t = title_of(&lay, &lay.rows[ri], ci);
            if let Some(p) =
                figs.add(&base, class_bars(&base, &t, "Mbit/s", &bars_of(&r.cases[i]), Some(ymax)))
            {
                panels.push(p);
            }
        }
        let cols_used = class_cases.iter().map(|c| c.1).collect::<std::collections::BTreeSet<_>>().len();
        figs.push(
            "Classes: achieved against rate and ceil",
            "Blue: achieved; dark tick: the class's rate (its guarantee); pale column: its ceil. Same scale in every panel.",
            panels,
            if cols_used > 1 { cols_used } else { 3 },
            true,
        );
    }
    // Secondary: latency over time and queue backlog, same arrangement.
    let lat = row_series(&mut figs, r, &lay, dir, "latency", "ms", &|s| {
        series_lines(&s.flow_latency_ms, s.step_s, 1.0, &flow_names, true)
    });
    figs.push(
        "Latency over time",
        "Mean latency per step (probes: round-trip time; other flows: one-way delay).",
        lat,
        ncol,
        false,
    );
    let links: Vec<String> =
        r.cases.iter().filter_map(|c| c.series.as_ref()).flat_map(|s| s.backlog_bytes.keys().cloned()).fold(
            Vec::new(),
            |mut v, k| {
                if !v.contains(&k) {
                    v.push(k);
                }
                v
            },
        );
    let q = row_series(&mut figs, r, &lay, dir, "queues", "KiB", &|s| {
        series_lines(&s.backlog_bytes, s.step_s, 1.0 / 1024.0, &links, false)
    });
    figs.push("Queue backlog", "Bytes queued per link at each sample.", q, ncol, false);
    // TCP senders' state, when the run recorded it (simulated TCP flows).
    let tcp_names: Vec<String> =
        r.cases.iter().filter_map(|c| c.series.as_ref()).flat_map(|s| s.tcp_cwnd_pkts.keys().cloned()).fold(
            Vec::new(),
            |mut v, k| {
                if !v.contains(&k) {
                    v.push(k);
                }
                v
            },
        );
    if !tcp_names.is_empty() {
        let cw = row_series(&mut figs, r, &lay, dir, "tcp-cwnd", "segments", &|s| {
            series_lines(&s.tcp_cwnd_pkts, s.step_s, 1.0, &tcp_names, false)
        });
        figs.push(
            "TCP congestion window",
            "Each TCP sender's congestion window per sample.",
            cw,
            ncol,
            false,
        );
        let rtt = row_series(&mut figs, r, &lay, dir, "tcp-srtt", "ms", &|s| {
            series_lines(&s.tcp_srtt_ms, s.step_s, 1.0, &tcp_names, true)
        });
        figs.push("TCP smoothed RTT", "Each TCP sender's smoothed RTT per sample.", rtt, ncol, false);
    }
    let class_names: Vec<String> = r
        .cases
        .iter()
        .filter(|c| c.classes.len() <= MAX_CLASSES)
        .filter_map(|c| c.series.as_ref())
        .flat_map(|s| s.class_bps.keys().cloned())
        .fold(Vec::new(), |mut v, k| {
            if !v.contains(&k) {
                v.push(k);
            }
            v
        });
    if !class_names.is_empty() {
        let cl = row_series(&mut figs, r, &lay, dir, "class-throughput", "Mbit/s", &|s| {
            if s.class_bps.len() > MAX_CLASSES {
                return vec![];
            }
            series_lines(&s.class_bps, s.step_s, 1e-6, &class_names, false)
        });
        figs.push("Class throughput over time", "Shaper-accounted throughput per class.", cl, ncol, false);
    }
    figs
}
