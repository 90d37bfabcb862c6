//! The JSON state file that lets successive `sluice tc` invocations (and shell scripts) share
//! emulated devices.

use crate::model::State;
use std::path::{Path, PathBuf};

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    /// I/O failure.
    #[error("state file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not a Sluice state file.
    #[error("state file {path} is not valid: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        source: serde_json::Error,
    },
}

/// The path used when neither `--state` nor `SLUICE_STATE` is given:
/// `$XDG_RUNTIME_DIR/sluice/tc-state.json`, else `/tmp/sluice-tc-state.json`.
pub fn default_path() -> PathBuf {
    if let Ok(p) = std::env::var("SLUICE_STATE") {
        if !p.is_empty() {
            return PathBuf::from(p);
        }
    }
    match std::env::var("XDG_RUNTIME_DIR") {
        Ok(d) if !d.is_empty() => Path::new(&d).join("sluice").join("tc-state.json"),
        _ => PathBuf::from("/tmp/sluice-tc-state.json"),
    }
}

/// Loads the state; a missing file is an empty state.
pub fn load(path: &Path) -> Result<State, StateFileError> {
    match std::fs::read_to_string(path) {
        Ok(t) => {
            serde_json::from_str(&t).map_err(|source| StateFileError::Parse { path: path.into(), source })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State { devices: vec![], next_ifindex: 2 }),
        Err(source) => Err(StateFileError::Io { path: path.into(), source }),
    }
}

/// Saves atomically (write to a sibling file, then rename).
pub fn save(path: &Path, state: &State) -> Result<(), StateFileError> {
    let io = |source| StateFileError::Io { path: path.into(), source };
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
    }
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(state)
        .map_err(|source| StateFileError::Parse { path: path.into(), source })?;
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
