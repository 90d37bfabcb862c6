//! The scaling plot of BENCHMARKS.md: ns per packet (p50) against the number of classes, one line
//! per scheduler and case, log-log, as SVG.

use crate::cases::BenchResult;
use plotters::prelude::*;

/// Registers a system TrueType font for text layout (plotters measures text even for SVG).
fn register_font() -> Result<(), String> {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *OK.get_or_init(|| {
        [
            "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/TTF/DejaVuSans.ttf",
            "/usr/share/fonts/dejavu/DejaVuSans.ttf",
            "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        ]
        .iter()
        .filter_map(|p| std::fs::read(p).ok())
        .any(|bytes| {
            let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok()
        })
    });
    if ok {
        Ok(())
    } else {
        Err("no TrueType font found (install fonts-dejavu-core) to lay out the plot's text".into())
    }
}

/// Draws the HTB results with `active_pct` backlogged to an SVG file.
pub fn scaling_svg(results: &[BenchResult], active_pct: u32, path: &std::path::Path) -> Result<(), String> {
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in results.iter().filter(|r| r.case.starts_with("htb") && r.active_pct == active_pct) {
        if !r.ns_per_pkt_p50.is_finite() {
            continue;
        }
        let name = format!("{} {}", r.scheduler.name(), r.case);
        let pt = (r.classes as f64, r.ns_per_pkt_p50);
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(pt),
            None => series.push((name, vec![pt])),
        }
    }
    register_font()?;
    if series.is_empty() {
        return Err(format!("no HTB results at {active_pct}% backlogged to plot"));
    }
    let xs = series.iter().flat_map(|(_, v)| v.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|(_, v)| v.iter().map(|p| p.1));
    let (xmin, xmax) = xs.fold((f64::MAX, 0f64), |(a, b), x| (a.min(x), b.max(x)));
    let (ymin, ymax) = ys.fold((f64::MAX, 0f64), |(a, b), y| (a.min(y), b.max(y)));
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("HTB ns per packet (p50), {active_pct}% of leaves backlogged"), ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin / 1.5..xmax * 1.5).log_scale(), (ymin / 2.0..ymax * 2.0).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("leaf classes")
        .y_desc("ns per packet")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled()))).map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
