//! Loading a configuration for the CLI, with miette diagnostics pointing into the file.
//!
//! A configuration is a tc script (scripts with loops, functions or `$(...)` run under the real
//! shell, see `sluice run`), a state file made by `sluice run`/`sluice tc`, or the TOML form.

use miette::{LabeledSpan, NamedSource};
use sluice_tc::script::{load_file, Loaded};
use sluice_tc::shell::Vars;
use std::path::Path;

/// Parses `NAME=VALUE` pairs given with `--var`, refusing names that would replace Sluice's
/// wrappers when the script runs under the shell (`sluice_tc::run::check_var`).
pub fn vars(pairs: &[String]) -> anyhow::Result<Vars> {
    let mut v = Vars::new();
    for p in pairs {
        let (n, val) =
            p.split_once('=').ok_or_else(|| anyhow::anyhow!("--var expects NAME=VALUE, got {p:?}"))?;
        sluice_tc::run::check_var(n)?;
        v.insert(n.to_string(), val.to_string());
    }
    Ok(v)
}

/// How many characters of a long line the diagnostic shows on each side of the error.
const WINDOW: usize = 60;

/// The snippet a diagnostic shows: the error's line (or a window of it when it is long), and the
/// error's byte offset within it. Keeps miette away from huge sources and very long lines.
pub(crate) fn snippet(text: &str, line: usize, column: usize) -> (String, usize) {
    let Some(l) = text.lines().nth(line.saturating_sub(1)) else { return (String::new(), 0) };
    let chars: Vec<char> = l.chars().collect();
    let col = column.saturating_sub(1).min(chars.len());
    let from = col.saturating_sub(WINDOW);
    let to = (col + WINDOW).min(chars.len());
    let mut s: String = if from > 0 { "…".into() } else { String::new() };
    let offset = s.len() + chars[from..col].iter().map(|c| c.len_utf8()).sum::<usize>();
    s.extend(&chars[from..to]);
    if to < chars.len() {
        s.push('…');
    }
    (s, offset)
}

/// Loads CONFIG, or prints a diagnostic (file, line, column, hint) and returns `None`. A
/// configuration without any qdisc is an error: there is nothing to lint, draw or apply.
pub fn load(path: &Path, pairs: &[String]) -> anyhow::Result<Option<Loaded>> {
    let v = vars(pairs)?;
    match load_file(path, &v) {
        Ok(l) if l.state.devices.iter().all(|d| d.qdiscs.is_empty()) => {
            eprintln!(
                "{}: no qdisc was configured: nothing to check (is it a tc script, a state file or a .toml?)",
                path.display()
            );
            for n in l.notes.iter().take(5) {
                eprintln!("  note: line {}: {}", n.line, n.text);
            }
            Ok(None)
        }
        Ok(l) => Ok(Some(l)),
        Err(e) => {
            let msg = format!("{}:{}:{}: {}", e.file, e.line, e.column, e.message);
            let first = e.message.lines().next().unwrap_or("").to_string();
            let text =
                if e.line == 0 { String::new() } else { std::fs::read_to_string(path).unwrap_or_default() };
            let (src, offset) = snippet(&text, e.line, e.column);
            if src.is_empty() {
                eprintln!("{msg}");
                if !e.hint.is_empty() {
                    eprintln!("  hint: {}", e.hint);
                }
                return Ok(None);
            }
            let report = miette::miette!(
                labels = vec![LabeledSpan::at_offset(offset, first)],
                help = e.hint.clone(),
                "{msg}"
            )
            .with_source_code(NamedSource::new(format!("{}:{}", e.file, e.line), src));
            eprintln!("{report:?}");
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::snippet;

    #[test]
    fn long_lines_are_windowed() {
        let line = format!("tc qdisc add dev e root htb {}BAD", "x ".repeat(40_000));
        let (s, off) = snippet(&format!("a\n{line}\n"), 2, line.chars().count() - 2);
        assert!(s.chars().count() <= 2 * super::WINDOW + 2, "{}", s.len());
        assert!(s[off..].starts_with("BAD"), "{s}");
        let (s, off) = snippet("tc qdisc\n", 1, 4);
        assert_eq!((s.as_str(), off), ("tc qdisc", 3));
        assert_eq!(snippet("", 3, 1), (String::new(), 0));
    }
}
