//! Scenario errors that point at the file, line, column and key.

use std::ops::Range;

/// A problem in a scenario file or in a `--set` override.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}:{line}:{col}: {message}{}", hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
pub struct ScenarioError {
    /// File name (or `<builtin:NAME>`, or `--set`).
    pub path: String,
    /// The whole source text, for diagnostics that show the offending line.
    pub source_text: String,
    /// Byte span of the offending key or value, if known.
    pub span: Option<Range<usize>>,
    /// 1-based line (0 if unknown).
    pub line: usize,
    /// 1-based column (0 if unknown).
    pub col: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

impl ScenarioError {
    /// An error at `span` of `src`.
    pub fn at(
        path: &str,
        src: &str,
        span: Option<Range<usize>>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> Self {
        let (line, col) = match &span {
            Some(r) => line_col(src, r.start),
            None => (0, 0),
        };
        ScenarioError {
            path: path.to_string(),
            source_text: src.to_string(),
            span,
            line,
            col,
            message: message.into(),
            hint,
        }
    }
}

/// 1-based line and column of byte offset `at`.
pub fn line_col(src: &str, at: usize) -> (usize, usize) {
    let at = at.min(src.len());
    let before = &src[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map(|i| at - i).unwrap_or(at + 1);
    (line, col)
}

/// Converts a toml deserialisation error, adding a hint for unknown keys.
pub(crate) fn from_toml(path: &str, src: &str, e: toml::de::Error) -> ScenarioError {
    let msg = e.message().to_string();
    let hint = if msg.contains("unknown field") {
        Some("remove the key or fix its spelling; the expected keys are listed above".to_string())
    } else if msg.contains("missing field") {
        Some("add the key; see docs/scenarios.md".to_string())
    } else {
        None
    };
    ScenarioError::at(path, src, e.span(), msg.replace('\n', " "), hint)
}
