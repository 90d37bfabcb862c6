//! `--out DIR`: results.json, one .flent.gz per case with time series, figures (SVG and PNG)
//! and report.html.

use crate::figures::slug;
use crate::schema::Results;
use std::path::Path;

/// What [`write_report_checked`] wrote.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// Files written.
    pub files: usize,
    /// Figures that could not be drawn (reported on stderr too).
    pub failed_figures: Vec<String>,
}

/// Writes everything into `dir`; returns the number of files written.
pub fn write_report(r: &Results, dir: &Path) -> std::io::Result<usize> {
    write_report_checked(r, dir).map(|w| w.files)
}

/// [`write_report`], also saying which figures could not be drawn.
pub fn write_report_checked(r: &Results, dir: &Path) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    std::fs::write(dir.join("results.json"), r.to_json())?;
    n += 1;
    let mut flent_files = Vec::new();
    for c in &r.cases {
        if let Some(gz) = crate::flent::flent_gz(r, c) {
            let name = format!("{}.flent.gz", slug(&c.name));
            std::fs::write(dir.join(&name), gz)?;
            flent_files.push(name);
            n += 1;
        }
    }
    let figs = crate::figures::draw(r, dir);
    n += figs.files;
    for f in &figs.failed {
        eprintln!("sluice-report: figure {f} could not be drawn");
    }
    std::fs::write(dir.join("report.html"), crate::html::render(r, &figs.groups, &flent_files))?;
    Ok(Written { files: n + 1, failed_figures: figs.failed })
}
