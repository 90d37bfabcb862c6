//! `--out DIR`: results.json, one .flent.gz per case with time series, figures (SVG and PNG)
//! and report.html.

use crate::figures::slug;
use crate::schema::Results;
use std::path::Path;

/// Writes everything into `dir`; returns the number of files written.
pub fn write_report(r: &Results, dir: &Path) -> std::io::Result<usize> {
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
    std::fs::write(dir.join("report.html"), crate::html::render(r, &figs.groups, &flent_files))?;
    Ok(n + 1)
}
