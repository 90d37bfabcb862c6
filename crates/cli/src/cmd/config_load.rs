//! Loading a configuration for the CLI, with miette diagnostics pointing into the file.

use miette::{LabeledSpan, NamedSource};
use sluice_config::script::{load_file, Loaded};
use sluice_config::shell::Vars;
use std::path::Path;

/// Parses `NAME=VALUE` pairs given with `--var`.
pub fn vars(pairs: &[String]) -> anyhow::Result<Vars> {
    let mut v = Vars::new();
    for p in pairs {
        let (n, val) =
            p.split_once('=').ok_or_else(|| anyhow::anyhow!("--var expects NAME=VALUE, got {p:?}"))?;
        v.insert(n.to_string(), val.to_string());
    }
    Ok(v)
}

/// Loads CONFIG, or prints a diagnostic (file, line, column, hint) and returns `None`.
pub fn load(path: &Path, pairs: &[String]) -> anyhow::Result<Option<Loaded>> {
    let v = vars(pairs)?;
    match load_file(path, &v) {
        Ok(l) => Ok(Some(l)),
        Err(e) => {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let offset = if e.line == 0 {
                0
            } else {
                text.split_inclusive('\n').take(e.line - 1).map(str::len).sum::<usize>()
                    + e.column.saturating_sub(1)
            };
            let first = e.message.lines().next().unwrap_or("").to_string();
            let hint = e.hint.clone();
            let msg = format!("{}:{}:{}: {}", e.file, e.line, e.column, e.message);
            let report = miette::miette!(
                labels = vec![LabeledSpan::at_offset(offset.min(text.len()), first)],
                help = hint,
                "{msg}"
            )
            .with_source_code(NamedSource::new(e.file.clone(), text));
            eprintln!("{report:?}");
            Ok(None)
        }
    }
}
