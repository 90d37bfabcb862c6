//! Plots with plotters, each written as SVG and (when a TrueType font is found) PNG.

use crate::schema::Results;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A named line of (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// Registers a system sans-serif font for bitmap output once. Returns false if none was found,
/// in which case only SVG is written (SVG text needs no font file).
pub fn png_font_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let candidates = [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
            "/System/Library/Fonts/Supplemental/Arial.ttf",
        ];
        for c in candidates {
            if let Ok(bytes) = std::fs::read(c) {
                let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

macro_rules! render {
    ($base:expr, $w:expr, $h:expr, $draw:ident, $($arg:expr),*) => {{
        let mut out = Vec::new();
        let svg = $base.with_extension("svg");
        {
            let root = SVGBackend::new(&svg, ($w, $h)).into_drawing_area();
            if $draw(&root, $($arg),*).is_ok() && root.present().is_ok() {
                out.push(svg.clone());
            }
        }
        if png_font_available() {
            let png = $base.with_extension("png");
            let ok = {
                let root = BitMapBackend::new(&png, ($w, $h)).into_drawing_area();
                $draw(&root, $($arg),*).is_ok() && root.present().is_ok()
            };
            if ok {
                out.push(png);
            }
        }
        out
    }};
}

fn bounds(lines: &[Line]) -> (f64, f64, f64, f64) {
    let mut b = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (_, pts) in lines {
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                b = (b.0.min(x), b.1.max(x), b.2.min(y), b.3.max(y));
            }
        }
    }
    if b.0 > b.1 {
        return (0.0, 1.0, 0.0, 1.0);
    }
    if b.1 - b.0 < 1e-12 {
        b.1 = b.0 + 1.0;
    }
    if b.3 - b.2 < 1e-12 {
        b.3 = b.2 + 1.0;
        b.2 -= 1.0;
    }
    b
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    xl: &str,
    yl: &str,
    lines: &[Line],
    y_from_zero: bool,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (x0, x1, mut y0, y1) = bounds(lines);
    if y_from_zero {
        y0 = y0.min(0.0);
    }
    let pad = (y1 - y0) * 0.05;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..(y1 + pad))?;
    chart.configure_mesh().x_desc(xl).y_desc(yl).label_style(("sans-serif", 14)).draw()?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    if lines.len() > 1 || lines.first().is_some_and(|l| !l.0.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    Ok(())
}

/// A line chart (SVG and PNG). Returns the files written.
pub fn line_chart(base: &Path, title: &str, xl: &str, yl: &str, lines: &[Line]) -> Vec<PathBuf> {
    render!(base, 900, 450, draw_lines, title, xl, yl, lines, true)
}

fn draw_sweep<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    xl: &str,
    achieved: &[Line],
    errors: &[Line],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(330);
    draw_lines(&top, title, xl, "achieved (Mbit/s)", achieved, true)?;
    draw_lines(&bottom, "error vs target", xl, "error (%)", errors, false)?;
    Ok(())
}

/// Target-vs-achieved sweep plot with an error panel beneath.
pub fn sweep_chart(base: &Path, title: &str, xl: &str, achieved: &[Line], errors: &[Line]) -> Vec<PathBuf> {
    render!(base, 900, 620, draw_sweep, title, xl, achieved, errors)
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    yl: &str,
    bars: &[(String, f64, f64)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let n = bars.len().max(1);
    let ymax = bars.iter().map(|b| b.1.max(b.2)).fold(0.0f64, f64::max).max(1e-9) * 1.15;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, 0.0..ymax)?;
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(yl)
        .x_labels(n)
        .x_label_formatter(&|x| labels.get(x.floor() as usize).cloned().unwrap_or_default())
        .label_style(("sans-serif", 13))
        .draw()?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Rectangle::new([(i as f64 + 0.15, 0.0), (i as f64 + 0.5, b.1)], PALETTE[0].filled())
        }))?
        .label("achieved")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], PALETTE[0].filled()));
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            Rectangle::new([(i as f64 + 0.5, 0.0), (i as f64 + 0.85, b.2)], PALETTE[1].mix(0.6).filled())
        }))?
        .label("configured rate")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], PALETTE[1].mix(0.6).filled()));
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    Ok(())
}

/// Bars of (label, achieved, configured).
pub fn bar_chart(base: &Path, title: &str, yl: &str, bars: &[(String, f64, f64)]) -> Vec<PathBuf> {
    render!(base, 900, 450, draw_bars, title, yl, bars)
}

/// Reads a parameter value as a number for an x axis: rates in Mbit/s, times in ms, else f64.
pub fn param_number(v: &str) -> Option<f64> {
    if let Ok(x) = v.parse::<f64>() {
        return Some(x);
    }
    if let Ok(r) = sluice_core::units::parse_rate(v) {
        return Some(r.bps() as f64 / 1e6);
    }
    if let Ok(t) = sluice_core::units::parse_time(v) {
        return Some(t.as_nanos() as f64 / 1e6);
    }
    None
}

/// The sweep lines of `r` (first class of each case): achieved and error, grouped by the
/// `group` hint. Empty if the results have no x hint.
pub fn sweep_lines(r: &Results) -> (String, Vec<Line>, Vec<Line>) {
    let Some(x) = r.plot.x.clone() else {
        return (String::new(), vec![], vec![]);
    };
    let mut ach: Vec<Line> = Vec::new();
    let mut err: Vec<Line> = Vec::new();
    for c in &r.cases {
        let Some(xv) = c.params.get(&x).and_then(|v| param_number(v)) else {
            continue;
        };
        let g = match &r.plot.group {
            Some(g) => {
                g.split(',').filter_map(|k| c.params.get(k.trim()).cloned()).collect::<Vec<_>>().join(" ")
            }
            None => String::new(),
        };
        // The first class against its ceil; without classes, the first flow against x itself.
        let (achieved, target) = match c.classes.first() {
            Some(cl) => (cl.achieved_bps, if cl.ceil_bps > 0 { cl.ceil_bps } else { cl.rate_bps } as f64),
            None => match c.flows.first() {
                Some(f) => (f.achieved_bps, xv * 1e6),
                None => continue,
            },
        };
        if target <= 0.0 {
            continue;
        }
        let e = (achieved - target) / target * 100.0;
        match ach.iter().position(|l| l.0 == g) {
            Some(i) => {
                ach[i].1.push((xv, achieved / 1e6));
                err[i].1.push((xv, e));
            }
            None => {
                ach.push((g.clone(), vec![(xv, achieved / 1e6)]));
                err.push((g, vec![(xv, e)]));
            }
        }
    }
    for l in ach.iter_mut().chain(err.iter_mut()) {
        l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    (x, ach, err)
}
