//! Plots with plotters, each written as SVG and PNG.
//!
//! Text is laid out with the DejaVu Sans font compiled into the binary (the `dejavu` crate), which
//! is registered before the first figure of either format is drawn: plotters measures every label
//! with it, so without it a figure comes out blank. Legends are drawn in a strip beneath the plot
//! area so that they never hide data, and callers may fix the axis ranges so that figures shown
//! side by side share their scales.

use crate::schema::Results;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A named line of (x, y) points.
pub type Line = (String, Vec<(f64, f64)>);

/// The categorical palette (matplotlib's tab10 order, which flent users know).
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Registers the embedded font once. Returns false only if plotters refused it.
pub fn ensure_font() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold()).is_ok()
    })
}

/// The non-empty text contents of an SVG's `<text>` elements, trimmed.
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.match_indices("<text")
        .filter_map(|(i, _)| {
            let rest = &svg[i..];
            let a = rest.find('>')?;
            let b = rest.find("</text>")?;
            let t = rest.get(a + 1..b)?.trim();
            (!t.is_empty()).then(|| t.to_string())
        })
        .collect()
}

/// True if `svg` is a drawn figure rather than an empty canvas: it has at least `min_text`
/// non-empty text elements and at least one plotted path (polyline, path or polygon).
pub fn svg_is_drawn(svg: &str, min_text: usize) -> bool {
    let paths =
        svg.matches("<polyline").count() + svg.matches("<path").count() + svg.matches("<polygon").count();
    svg_texts(svg).len() >= min_text && paths >= 1
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Something drawn on any plotters backend.
trait Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static;
}

/// Draws `fig` into `base`.svg and `base`.png. Returns the files written; an SVG that comes out
/// without text or plotted paths is reported on stderr.
fn render(base: &Path, w: u32, h: u32, fig: &impl Figure) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if !ensure_font() {
        eprintln!("sluice-report: the embedded font could not be registered; no figure written");
        return out;
    }
    // Not `with_extension`: a base such as "cdf-ping.1" would lose its ".1".
    let with_ext = |e: &str| {
        let mut p = base.as_os_str().to_owned();
        p.push(".");
        p.push(e);
        PathBuf::from(p)
    };
    let svg = with_ext("svg");
    let mut text = String::new();
    let ok = {
        let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
        let r = fig.draw(&root);
        if let Err(e) = &r {
            eprintln!("sluice-report: {}: {e}", svg.display());
        }
        r.is_ok() && root.present().is_ok()
    };
    if ok {
        // Written even if blank, so that the report's tests see it; said loudly here.
        if !svg_is_drawn(&text, 2) {
            eprintln!("sluice-report: {} came out blank", svg.display());
        }
        if std::fs::write(&svg, &text).is_ok() {
            out.push(svg);
        }
    }
    let png = with_ext("png");
    let ok = {
        let root = BitMapBackend::new(&png, (w, h)).into_drawing_area();
        fig.draw(&root).is_ok() && root.present().is_ok()
    };
    if ok {
        out.push(png);
    }
    out
}

/// A line on a chart.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points (x, y); non-finite points are skipped.
    pub points: Vec<(f64, f64)>,
    /// Palette index.
    pub color: usize,
    /// Dashed rather than solid.
    pub dashed: bool,
}

impl Series {
    /// A solid line in palette colour `color`.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, color: usize) -> Series {
        Series { name: name.into(), points, color, dashed: false }
    }
}

/// A line chart. Leave `x`/`y` as None to fit the data (y from zero when `y_from_zero`).
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The lines.
    pub series: Vec<Series>,
    /// Fixed x range.
    pub x: Option<(f64, f64)>,
    /// Fixed y range.
    pub y: Option<(f64, f64)>,
    /// Start the fitted y range at zero.
    pub y_from_zero: bool,
    /// Pixel size.
    pub size: (u32, u32),
    /// Categorical x axis: ticks only at whole numbers, points marked.
    pub integer_x: bool,
}

impl Chart {
    /// An empty chart of the default size.
    pub fn new(title: impl Into<String>, x_label: impl Into<String>, y_label: impl Into<String>) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            x: None,
            y: None,
            y_from_zero: true,
            size: (640, 400),
            integer_x: false,
        }
    }
    /// The data bounds (x0, x1, y0, y1) of the finite points, None if there are none.
    pub fn data_bounds(&self) -> Option<(f64, f64, f64, f64)> {
        bounds(self.series.iter().flat_map(|s| s.points.iter().copied()))
    }
}

/// Bounds of finite points.
pub fn bounds(pts: impl Iterator<Item = (f64, f64)>) -> Option<(f64, f64, f64, f64)> {
    let mut b = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    let mut any = false;
    for (x, y) in pts {
        if x.is_finite() && y.is_finite() {
            any = true;
            b = (b.0.min(x), b.1.max(x), b.2.min(y), b.3.max(y));
        }
    }
    any.then_some(b)
}

/// Merges bounds (for shared axes).
pub fn union(
    a: Option<(f64, f64, f64, f64)>,
    b: Option<(f64, f64, f64, f64)>,
) -> Option<(f64, f64, f64, f64)> {
    match (a, b) {
        (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1), a.2.min(b.2), a.3.max(b.3))),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Formats an axis number without trailing zeros: 0, 0.5, 2, 1200, 1.5k is not used.
pub fn axis_num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn ranges(c: &Chart) -> ((f64, f64), (f64, f64)) {
    let (mut x0, mut x1, mut y0, mut y1) = c.data_bounds().unwrap_or((0.0, 1.0, 0.0, 1.0));
    if let Some(x) = c.x {
        (x0, x1) = x;
    }
    if let Some(y) = c.y {
        (y0, y1) = y;
    } else {
        if c.y_from_zero {
            y0 = y0.min(0.0);
        }
        y1 += (y1 - y0).abs() * 0.05;
    }
    if x1 - x0 < 1e-12 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    if y1 - y0 < 1e-12 {
        y1 = y0 + 1.0;
    }
    ((x0, x1), (y0, y1))
}

const LEGEND_ROW: u32 = 20;

/// Legend entries: how many rows a legend of `names` takes in `width` pixels.
fn legend_layout(names: &[&str], width: u32) -> (u32, u32) {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    let col_w = (longest * 8 + 36).max(60);
    let cols = ((width.saturating_sub(20)) / col_w).max(1);
    let rows = (names.len() as u32).div_ceil(cols);
    (col_w, rows)
}

fn legend_height(names: &[&str], width: u32) -> u32 {
    if names.is_empty() {
        return 0;
    }
    legend_layout(names, width).1 * LEGEND_ROW + 6
}

/// Draws a legend of (name, colour, dashed, filled box) entries in `area`, left to right.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(String, RGBColor, bool, bool)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let names: Vec<&str> = items.iter().map(|i| i.0.as_str()).collect();
    let (w, _) = area.dim_in_pixel();
    let (col_w, _) = legend_layout(&names, w);
    let cols = ((w.saturating_sub(20)) / col_w).max(1);
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    for (k, (name, c, dashed, boxed)) in items.iter().enumerate() {
        let x = 14 + (k as u32 % cols) * col_w;
        let y = 4 + (k as u32 / cols) * LEGEND_ROW + LEGEND_ROW / 2;
        let (x, y) = (x as i32, y as i32);
        if *boxed {
            area.draw(&Rectangle::new([(x, y - 5), (x + 20, y + 5)], c.filled()))?;
        } else if *dashed {
            area.draw(&PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(2)))?;
            area.draw(&PathElement::new(vec![(x + 12, y), (x + 20, y)], c.stroke_width(2)))?;
        } else {
            area.draw(&PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)))?;
        }
        area.draw(&Text::new(name.clone(), (x + 26, y - 7), font.clone()))?;
    }
    Ok(())
}

fn draw_chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &Chart) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let named: Vec<&str> = c.series.iter().filter(|s| !s.name.is_empty()).map(|s| s.name.as_str()).collect();
    let (w, h) = root.dim_in_pixel();
    let lh = legend_height(&named, w);
    let (plot, legend) = root.split_vertically(h - lh);
    let ((x0, x1), (y0, y1)) = ranges(c);
    let mut chart = ChartBuilder::on(&plot)
        .caption(&c.title, ("sans-serif", 19))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(38)
        .y_label_area_size(58)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let x_ticks = if c.integer_x { ((x1 - x0).round() as usize + 1).min(40) } else { 8 };
    let x_fmt = |v: &f64| {
        if !c.integer_x {
            axis_num(*v)
        } else if (v - v.round()).abs() < 1e-6 {
            format!("{}", v.round() as i64)
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .x_labels(x_ticks)
        .y_labels(7)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v| axis_num(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    for s in &c.series {
        let col = PALETTE[s.color % PALETTE.len()];
        let pts: Vec<(f64, f64)> =
            s.points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
        if pts.len() == 1 {
            chart.draw_series(std::iter::once(Circle::new(pts[0], 3, col.filled())))?;
        } else if s.dashed {
            chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 4, col.stroke_width(2)))?;
        } else {
            chart.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))?;
        }
        if c.integer_x && pts.len() > 1 {
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
        }
    }
    let items: Vec<(String, RGBColor, bool, bool)> = c
        .series
        .iter()
        .filter(|s| !s.name.is_empty())
        .map(|s| (s.name.clone(), PALETTE[s.color % PALETTE.len()], s.dashed, false))
        .collect();
    draw_legend(&legend, &items)?;
    Ok(())
}

/// Writes a line chart (SVG and PNG). Returns the files written.
pub fn chart(base: &Path, c: &Chart) -> Vec<PathBuf> {
    render(base, c.size.0, c.size.1, c)
}

/// Compatibility helper: a line chart of plain lines, y from zero.
pub fn line_chart(base: &Path, title: &str, xl: &str, yl: &str, lines: &[Line]) -> Vec<PathBuf> {
    let mut c = Chart::new(title, xl, yl);
    c.size = (900, 450);
    c.series = lines.iter().enumerate().map(|(i, (n, p))| Series::new(n.clone(), p.clone(), i)).collect();
    chart(base, &c)
}

impl Figure for Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        draw_chart(root, self)
    }
}

/// Two charts stacked.
struct Stacked<'a>(&'a Chart, &'a Chart);

impl Figure for Stacked<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        let (_, h) = root.dim_in_pixel();
        let (a, b) = root.split_vertically(h * 3 / 5);
        draw_chart(&a, self.0)?;
        draw_chart(&b, self.1)
    }
}

/// Target-vs-achieved sweep plot (achieved on top, error beneath, one line per group).
pub fn sweep_chart(base: &Path, title: &str, xl: &str, achieved: &[Line], errors: &[Line]) -> Vec<PathBuf> {
    let mut top = Chart::new(title, xl, "achieved (Mbit/s)");
    top.series =
        achieved.iter().enumerate().map(|(i, (n, p))| Series::new(n.clone(), p.clone(), i)).collect();
    let mut bottom = Chart::new("error against target", xl, "error (%)");
    bottom.y_from_zero = false;
    // The error panel repeats the colours; its legend would only repeat the top one.
    bottom.series = errors.iter().enumerate().map(|(i, (_, p))| Series::new("", p.clone(), i)).collect();
    if let Some((lo, hi)) = bottom.data_bounds().map(|b| (b.2, b.3)) {
        let pad = ((hi - lo) * 0.1).max(1e-3);
        bottom.y = Some((lo.min(0.0) - pad, hi.max(0.0) + pad));
    }
    let h = 380 + 260 + legend_height(&achieved.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(), 900);
    render(base, 900, h, &Stacked(&top, &bottom))
}

/// One class's bar: label, achieved, rate, ceil (all in the same unit).
#[derive(Clone, Debug)]
pub struct ClassBar {
    /// Label under the bar.
    pub label: String,
    /// Achieved.
    pub achieved: f64,
    /// Configured rate (guarantee).
    pub rate: f64,
    /// Configured ceil.
    pub ceil: f64,
}

struct ClassBars<'a> {
    title: &'a str,
    yl: &'a str,
    bars: &'a [ClassBar],
    ymax: f64,
}

impl Figure for ClassBars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        draw_class_bars(root, self.title, self.yl, self.bars, self.ymax)
    }
}

fn draw_class_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    yl: &str,
    bars: &[ClassBar],
    ymax: f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (w, h) = root.dim_in_pixel();
    let legend_items = [
        ("achieved".to_string(), PALETTE[0], false, true),
        ("rate (guaranteed)".to_string(), RGBColor(120, 120, 120), false, false),
        ("ceil".to_string(), RGBColor(200, 200, 200), false, true),
    ];
    let names: Vec<&str> = legend_items.iter().map(|i| i.0.as_str()).collect();
    let (plot, legend) = root.split_vertically(h - legend_height(&names, w));
    let n = bars.len().max(1);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 19))
        .margin(8)
        .margin_right(18)
        .x_label_area_size(30)
        .y_label_area_size(58)
        .build_cartesian_2d(0.0..n as f64, 0.0..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(yl)
        .x_labels(0)
        .y_label_formatter(&|v| axis_num(*v))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    let (ach_c, rate_c, ceil_c) = (legend_items[0].1, legend_items[1].1, legend_items[2].1);
    // Class ids under their bars (a categorical axis of our own).
    let font = ("sans-serif", 14).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        EmptyElement::at((i as f64 + 0.5, 0.0)) + Text::new(b.label.clone(), (0, 6), font.clone())
    }))?;
    // The ceil as a pale column, the rate as a dark tick across it, achieved as a bar inside.
    chart.draw_series(bars.iter().enumerate().filter(|(_, b)| b.ceil > 0.0).map(|(i, b)| {
        Rectangle::new([(i as f64 + 0.2, 0.0), (i as f64 + 0.8, b.ceil)], ceil_c.mix(0.5).filled())
    }))?;
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        Rectangle::new([(i as f64 + 0.32, 0.0), (i as f64 + 0.68, b.achieved)], ach_c.filled())
    }))?;
    chart.draw_series(bars.iter().enumerate().filter(|(_, b)| b.rate > 0.0).map(|(i, b)| {
        PathElement::new(vec![(i as f64 + 0.15, b.rate), (i as f64 + 0.85, b.rate)], rate_c.stroke_width(3))
    }))?;
    draw_legend(&legend, &legend_items)?;
    Ok(())
}

/// Per-class achieved rate against rate (tick) and ceil (pale column). `ymax` fixes the y range
/// (for figures shown side by side); None fits the data.
pub fn class_bars(base: &Path, title: &str, yl: &str, bars: &[ClassBar], ymax: Option<f64>) -> Vec<PathBuf> {
    let ymax = ymax.unwrap_or_else(|| class_bars_max(bars)).max(1e-9);
    let w = (160 + 70 * bars.len() as u32).clamp(420, 900);
    render(base, w, 360, &ClassBars { title, yl, bars, ymax })
}

/// The y range top that fits `bars` with some headroom.
pub fn class_bars_max(bars: &[ClassBar]) -> f64 {
    bars.iter().map(|b| b.achieved.max(b.rate).max(b.ceil)).fold(0.0f64, f64::max) * 1.1
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

/// The unit of [`param_number`] for a value: "Mbit/s", "ms" or "".
pub fn param_unit(v: &str) -> &'static str {
    if v.parse::<f64>().is_ok() {
        ""
    } else if sluice_core::units::parse_rate(v).is_ok() {
        "Mbit/s"
    } else if sluice_core::units::parse_time(v).is_ok() {
        "ms"
    } else {
        ""
    }
}

/// Achieved and target (bit/s) of a sweep case: its first class against its ceil (or rate), or,
/// without classes, its first flow against the x value (read in Mbit/s).
pub fn sweep_point(c: &crate::schema::Case, xv: f64) -> Option<(f64, f64)> {
    let (achieved, target) = match c.classes.first() {
        Some(cl) => (cl.achieved_bps, if cl.ceil_bps > 0 { cl.ceil_bps } else { cl.rate_bps } as f64),
        None => (c.flows.first()?.achieved_bps, xv * 1e6),
    };
    (target > 0.0).then_some((achieved, target))
}

/// The sweep lines of `r`: achieved (Mbit/s) and error (%) of [`sweep_point`] against the x
/// parameter, one line per value of the `group` hint. Empty if the results have no x hint.
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
            Some(g) => g
                .split(',')
                .filter_map(|k| c.params.get(k.trim()).map(|v| format!("{}={v}", k.trim())))
                .collect::<Vec<_>>()
                .join(" "),
            None => String::new(),
        };
        let Some((achieved, target)) = sweep_point(c, xv) else {
            continue;
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_svg_of_a_process_is_drawn() {
        // Regression: the font used to be registered only when the PNG was drawn, so the first
        // SVG of every process came out as an empty canvas.
        let dir = std::env::temp_dir().join(format!("sluice-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files =
            line_chart(&dir.join("first"), "t", "x", "y", &[("a".into(), vec![(0.0, 1.0), (1.0, 2.0)])]);
        let svg = files.iter().find(|p| p.extension().is_some_and(|e| e == "svg")).expect("an SVG");
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(svg_is_drawn(&text, 4), "blank SVG:\n{text}");
        assert!(svg_texts(&text).iter().any(|t| t == "a"), "legend label missing");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn blank_canvas_is_detected() {
        let blank = "<svg width=\"9\" height=\"9\"><rect x=\"0\" y=\"0\" width=\"9\" height=\"9\" fill=\"#FFFFFF\"/></svg>";
        assert!(!svg_is_drawn(blank, 1));
        assert!(svg_is_drawn("<svg><text x=\"1\">a</text><polyline points=\"0,0 1,1\"/></svg>", 1));
    }

    #[test]
    fn axis_numbers_are_short() {
        assert_eq!(axis_num(2.0), "2");
        assert_eq!(axis_num(0.5), "0.5");
        assert_eq!(axis_num(1200.0), "1200");
        assert_eq!(axis_num(12.25), "12.2");
    }
}
