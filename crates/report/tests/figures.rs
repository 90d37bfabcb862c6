//! Every built-in scenario's report: no figure is blank (each SVG has text and plotted paths),
//! and the page leads with its answer and summary table before any figure.

mod common;

use sluice_report::plot::{svg_is_drawn, svg_texts};

#[test]
fn every_builtin_scenario_reports_without_a_blank_figure() {
    let mut checked = 0;
    for (name, _, _) in sluice_sim::builtin::BUILTIN {
        // htb-scaling's default sweep runs 24 cases of up to 20 000 classes; its smallest size
        // exercises the same report.
        let set: &[(&str, &str)] = if *name == "htb-scaling" { &[("n", "1200")] } else { &[] };
        let r = common::simulate_with(name, set);
        let dir = common::fresh_dir(name);
        let w = sluice_report::write_report_checked(&r, &dir).unwrap();
        assert!(w.failed_figures.is_empty(), "{name}: figures not drawn: {:?}", w.failed_figures);
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        // The answer and the table come first.
        let answer = html.find("class=\"answer\"").unwrap_or_else(|| panic!("{name}: no headline"));
        let table = html.find("<h2>Summary</h2>").unwrap_or_else(|| panic!("{name}: no summary"));
        let first_svg = html.find("<svg").unwrap_or(usize::MAX);
        assert!(answer < table && table < first_svg, "{name}: the headline and table must lead");
        for c in &r.cases {
            assert!(html.contains(&sluice_report::html::esc(&c.name)), "{name}: case {} missing", c.name);
        }
        // Every figure file is drawn, and so is every figure inlined in the page.
        let mut svgs = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "svg") {
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(svg_is_drawn(&text, 4), "{name}: blank or near-blank figure {}", p.display());
                assert!(
                    text.len() > 2000,
                    "{name}: suspiciously small figure {} ({} bytes)",
                    p.display(),
                    text.len()
                );
                svgs += 1;
            }
        }
        let inlined: Vec<&str> = html.split("<svg").skip(1).collect();
        for s in &inlined {
            let end = s.find("</svg>").unwrap_or(s.len());
            assert!(
                svg_is_drawn(&s[..end], 4),
                "{name}: blank figure in report.html: {:?}",
                svg_texts(&s[..end])
            );
        }
        assert!(inlined.len() <= svgs, "{name}: {} figures inlined, {svgs} files", inlined.len());
        let mut titles: Vec<String> = inlined.iter().map(|s| svg_texts(s).join("|")).collect();
        titles.sort();
        titles.dedup();
        assert_eq!(titles.len(), inlined.len(), "{name}: the same figure twice");
        // A scenario with time series or a sweep draws something.
        if r.cases.iter().any(|c| c.series.is_some()) || r.plot.x.is_some() {
            assert!(svgs > 0, "{name}: no figure at all");
        }
        let _ = std::fs::remove_dir_all(&dir);
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} built-in scenarios");
}
