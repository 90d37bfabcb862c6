//! The JSON state file that lets successive `sluice tc` invocations (and shell scripts) share
//! emulated devices.
//!
//! The file is never lost: it is read whole and checked ([`parse`]) before any command runs, a
//! file that cannot be read or is not a valid state is reported and left as it is, and a new
//! state is written to a temporary file in the same directory, flushed and renamed over the old
//! one ([`save`]) — only when a command changed something (the CLI compares before and after).
//!
//! One writer at a time: a writer holds [`lock`] (an advisory `flock` on `FILE.lock` beside the
//! file) from before it reads the state until after the new one is renamed into place, so two
//! processes (two shells, or calls a script runs in the background under `sluice run`) never
//! both change the same old state and lose one of the changes.

use crate::model::State;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    #[error("state file {path} is not valid (left unchanged): {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another process kept the state file locked longer than the caller would wait.
    #[error(
        "state file {path}: another process has been changing it for {}s (it holds the lock on \
         {}); nothing was done. Wait for that `sluice tc`/`sluice run` to finish and try again \
         (the lock goes with the process that holds it: a lock file left behind need not be \
         removed)",
        waited.as_secs(),
        lock.display()
    )]
    Locked {
        /// The state file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// How long the caller waited.
        waited: Duration,
    },
}

/// How long a writer waits for another to release a state file (a command takes milliseconds;
/// a script's backgrounded calls queue behind each other).
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// An exclusive, advisory hold on a state file (see [`lock`]); released when dropped (or when
/// the process ends, however it ends).
#[derive(Debug)]
pub struct StateLock {
    held: Option<(PathBuf, nix::fcntl::Flock<std::fs::File>)>,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // The lock file goes before the lock is released: a waiter that then gets the lock on
        // the removed file sees that it is no longer the one at the path and starts again.
        if let Some((path, _)) = &self.held {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The lock file of a state file: `FILE.lock` beside it (the state file itself is replaced by
/// rename on every save, so it cannot carry the lock). It exists only while a writer holds it,
/// or after a writer was killed (the kernel releases the lock; the next writer takes it over).
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "state".into());
    name.push(".lock");
    path.with_file_name(name)
}

/// Takes the state file's lock, waiting up to `timeout` for another holder to release it. Hold
/// it across [`load`], the change and [`save`]. Where the lock file cannot be created because
/// the directory is not writable, nothing can save there either: the hold is empty (readers go
/// on, a save fails with its own error).
pub fn lock(path: &Path, timeout: Duration) -> Result<StateLock, StateFileError> {
    use nix::errno::Errno;
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::MetadataExt;
    let lock = lock_path(path);
    let io = |source| StateFileError::Io { path: lock.clone(), source };
    let unwritable = |e: &std::io::Error| {
        matches!(e.kind(), std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem)
    };
    if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::create_dir_all(dir) {
            Ok(()) => {}
            Err(e) if unwritable(&e) => return Ok(StateLock { held: None }),
            Err(e) => return Err(io(e)),
        }
    }
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        let mut file = match std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock)
        {
            Ok(f) => f,
            Err(e) if unwritable(&e) => return Ok(StateLock { held: None }),
            Err(e) => return Err(io(e)),
        };
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(held) => {
                    // Ours only if it is still the file at the path (its holder removes it).
                    let ours = match (held.metadata(), std::fs::metadata(&lock)) {
                        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                        _ => false,
                    };
                    if ours {
                        return Ok(StateLock { held: Some((lock, held)) });
                    }
                    break;
                }
                Err((f, Errno::EWOULDBLOCK | Errno::EINTR)) => file = f,
                Err((_, e)) => return Err(io(std::io::Error::from(e))),
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(StateFileError::Locked { path: path.into(), lock, waited });
            }
            std::thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
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

/// Reads a state from JSON text and checks every value (see [`validate`]).
pub fn parse(text: &str) -> Result<State, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if !value.is_object() {
        return Err("expected a JSON object with \"devices\"".into());
    }
    let mut state: State = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    // A key the model does not know (a typo, a renamed field) would be dropped silently and the
    // next save would lose what it held: refuse it instead.
    let back = serde_json::to_value(&state).map_err(|e| e.to_string())?;
    unknown_key(&value, &back, "")?;
    validate(&state)?;
    sort_actions(&mut state);
    Ok(state)
}

/// The action tables in (kind, index) order, which the filter path's binary searches rely on
/// (Sluice writes them so; a hand-edited file may not be).
fn sort_actions(state: &mut State) {
    crate::tc::actions::sort_table(&mut state.actions);
    for ns in state.netns.values_mut() {
        sort_actions(ns);
    }
}

/// The first key of `input` that has content but did not survive reading (`back` is the state
/// written again).
fn unknown_key(input: &serde_json::Value, back: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    let trivial = |v: &Value| match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(|v| matches!(v, Value::Number(n) if n.as_f64() == Some(0.0))),
    };
    match (input, back) {
        (Value::Object(i), Value::Object(b)) => {
            for (k, v) in i {
                match b.get(k) {
                    Some(bv) => unknown_key(v, bv, &format!("{at}/{k}"))?,
                    None if trivial(v) => {}
                    None => return Err(format!("unknown key {at}/{k}")),
                }
            }
            Ok(())
        }
        (Value::Array(i), Value::Array(b)) => {
            for (n, (v, bv)) in i.iter().zip(b).enumerate() {
                unknown_key(v, bv, &format!("{at}/{n}"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// An interface name the kernel would accept (1-15 bytes, no `/`, whitespace or NUL).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && !name.contains(|c: char| c == '/' || c.is_whitespace() || c == '\0')
}

/// Checks what serde cannot: values tc itself would never produce (non-finite numbers, handles
/// of the wrong shape, duplicate names) so that a hand-edited or damaged file is refused.
pub fn validate(state: &State) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for d in &state.devices {
        if !valid_name(&d.name) {
            return Err(format!("device name {:?} is not a valid interface name", d.name));
        }
        if !names.insert(d.name.as_str()) {
            return Err(format!("device {} appears twice", d.name));
        }
        for q in &d.qdiscs {
            if q.handle.minor() != 0 {
                return Err(format!("device {}: qdisc handle {} has a minor number", d.name, q.handle));
            }
            let args = crate::export::qdisc_args(&q.opts);
            let stab = q.stab.map(|t| crate::export::stab_args(&t)).unwrap_or_default();
            let head = if q.parent == crate::model::H_INGRESS {
                format!("qdisc add dev {} {}", d.name, q.opts.kind())
            } else {
                format!("qdisc add dev {} root{stab} {}", d.name, q.opts.kind())
            };
            reparse(&head, &args).map_err(|m| format!("device {}: qdisc {}: {m}", d.name, q.handle))?;
            // The kind's own check (the registry's `change`, as on `tc qdisc add`): one rule
            // for tc, a hand-edited file and the TOML form alike.
            q.opts.change(d, None).map_err(|e| {
                format!(
                    "device {}: qdisc {}: {}",
                    d.name,
                    q.handle,
                    e.message.lines().next().unwrap_or_default()
                )
            })?;
        }
        for c in &d.classes {
            let args = crate::export::class_args(&c.opts);
            let kind = c.opts.kind();
            let head = format!("class add dev {} parent 1: classid 1:1 {kind}", d.name);
            reparse(&head, &args).map_err(|m| format!("device {}: class {}: {m}", d.name, c.classid))?;
        }
    }
    Ok(())
}

/// Reads a qdisc's or class's options back through tc's grammar, as `sluice export` writes
/// them: a value tc would refuse (a huge `overhead`, an `mpu` out of range, a probability above
/// 1) is refused with tc's own message.
fn reparse(head: &str, args: &str) -> Result<(), String> {
    let argv: Vec<String> = head.split(' ').chain(args.split_whitespace()).map(String::from).collect();
    match crate::tc::args::parse_command(&argv) {
        Ok(_) => Ok(()),
        Err(e) => Err(e.message.lines().next().unwrap_or_default().to_string()),
    }
}

/// Loads the state; a missing file is an empty state. A file that exists but cannot be read or
/// is not a valid state is an error (the caller must not replace it).
pub fn load(path: &Path) -> Result<State, StateFileError> {
    match std::fs::read_to_string(path) {
        Ok(t) => parse(&t).map_err(|message| StateFileError::Parse { path: path.into(), message }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(source) => Err(StateFileError::Io { path: path.into(), source }),
    }
}

/// Saves atomically: the text goes to a temporary file beside `path` (unique to this process),
/// is flushed to disk, then renamed over `path`. On any failure `path` keeps its old content.
pub fn save(path: &Path, state: &State) -> Result<(), StateFileError> {
    let io = |source| StateFileError::Io { path: path.into(), source };
    validate(state).map_err(|message| StateFileError::Parse { path: path.into(), message })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| StateFileError::Parse { path: path.into(), message: e.to_string() })?;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-statefile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn kinds_without_options_load_from_their_kind_alone() {
        // As state files wrote drr, ingress and clsact before their options became structs.
        let text = r#"{"devices": [{"name": "e0", "type": "dummy", "ifindex": 2, "qdiscs": [
            {"handle": "1:", "parent": "root", "opts": {"kind": "drr"}},
            {"handle": "ffff:", "parent": "ingress", "opts": {"kind": "clsact"}}]}]}"#;
        let st = parse(text).unwrap();
        let kinds: Vec<&str> = st.devices[0].qdiscs.iter().map(|q| q.opts.kind()).collect();
        assert_eq!(kinds, ["drr", "clsact"]);
        let back = serde_json::to_string(&st).unwrap();
        assert!(
            back.contains(r#""opts":{"kind":"drr"}"#) && back.contains(r#""opts":{"kind":"clsact"}"#),
            "{back}"
        );
        assert_eq!(parse(&back).unwrap(), st);
        let ingress = text.replace("clsact", "ingress");
        assert_eq!(parse(&ingress).unwrap().devices[0].qdiscs[1].opts.kind(), "ingress");
    }

    #[test]
    fn invalid_file_is_reported_and_kept() {
        let d = dir("invalid");
        let p = d.join("s.json");
        std::fs::write(&p, "{\"devices\": [{\"name\": 7}]}").unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("not valid"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"devices\": [{\"name\": 7}]}");
        std::fs::write(&p, "[]").unwrap();
        assert!(load(&p).is_err());
        // A renamed key holding a tree is refused, not dropped.
        std::fs::write(&p, r#"{"devics": [{"name": "e0", "type": "dummy", "ifindex": 2}]}"#).unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("unknown key /devics"));
        std::fs::write(&p, r#"{"devices": [{"name": "e0", "type": "dummy", "ifindex": 2, "qdisks": [{}]}]}"#)
            .unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("unknown key /devices/0/qdisks"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn save_is_atomic_and_round_trips() {
        let d = dir("save");
        let p = d.join("sub").join("s.json");
        let mut st = State::default();
        assert!(crate::run_ip(&mut st, &["link", "add", "e0", "type", "dummy"].map(String::from)).code == 0);
        let args: Vec<String> =
            "qdisc add dev e0 root sfq redflowlimit 100000 min 8000 max 60000 probability 0.5"
                .split(' ')
                .map(String::from)
                .collect();
        assert_eq!(crate::run_tc(&mut st, &args).code, 0);
        save(&p, &st).unwrap();
        assert_eq!(load(&p).unwrap(), st);
        let left: Vec<_> =
            std::fs::read_dir(p.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
        // A NaN smuggled into the file is refused on the way in, and the file is kept.
        let text = std::fs::read_to_string(&p).unwrap().replace("0.5", "NaN");
        std::fs::write(&p, &text).unwrap();
        assert!(load(&p).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A state with one value changed in its JSON text (`from` → `to`, first occurrence).
    fn edited(lines: &[&str], from: &str, to: &str) -> Result<State, String> {
        let mut st = State::default();
        assert_eq!(crate::run_ip(&mut st, &["link", "add", "e0", "type", "dummy"].map(String::from)).code, 0);
        for l in lines {
            let argv: Vec<String> = l.split(' ').map(String::from).collect();
            assert_eq!(crate::run_tc(&mut st, &argv).code, 0, "{l}");
        }
        let text = serde_json::to_string_pretty(&st).unwrap();
        assert!(text.contains(from), "{from} not in {text}");
        parse(&text.replacen(from, to, 1))
    }

    #[test]
    fn every_value_is_checked_with_tcs_message() {
        let htb = [
            "qdisc add dev e0 root handle 1: htb",
            "class add dev e0 parent 1: classid 1:1 htb rate 1mbit overhead 4 mpu 64",
        ];
        // What tc itself writes reads back.
        assert!(edited(&htb, "\"overhead\": 4", "\"overhead\": 4").is_ok());
        // Out-of-range integers: serde's type check, or tc's grammar with tc's message.
        let e = edited(&htb, "\"overhead\": 4", "\"overhead\": -2147483648").unwrap_err();
        assert!(e.contains("class 1:1") && e.contains("overhead"), "{e}");
        let e = edited(&htb, "\"mpu\": 64", "\"mpu\": 4294967296").unwrap_err();
        assert!(e.contains("mpu") || e.contains("invalid value"), "{e}");
        let e = edited(&htb, "\"prio\": 0", "\"prio\": -1").unwrap_err();
        assert!(e.contains("invalid value"), "{e}");
        // Non-finite and absurd floats: JSON has no NaN or infinity, 1e309 does not fit.
        let sfq = ["qdisc add dev e0 root sfq redflowlimit 100000 min 8000 max 60000 probability 0.5"];
        for bad in ["NaN", "Infinity", "-Infinity", "1e309", "null", "1.5", "-0.1"] {
            assert!(edited(&sfq, "0.5", bad).is_err(), "probability {bad} accepted");
        }
    }

    #[test]
    fn one_writer_at_a_time_and_a_clear_message_on_timeout() {
        let d = dir("lock");
        let p = d.join("sub").join("s.json");
        let held = lock(&p, LOCK_TIMEOUT).unwrap();
        assert!(lock_path(&p).ends_with("sub/s.json.lock"));
        // A second open file description conflicts with the first, even in the same process.
        let t = std::time::Instant::now();
        let e = lock(&p, Duration::from_millis(150)).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(150));
        let msg = e.to_string();
        assert!(msg.contains("s.json.lock") && msg.contains("another process"), "{msg}");
        // Released on drop: the next writer gets it at once.
        drop(held);
        assert!(!lock_path(&p).exists(), "the lock file is removed with the lock");
        let again = lock(&p, Duration::from_millis(0));
        assert!(again.is_ok(), "{again:?}");
        drop(again);
        // A lock file left by a writer that was killed is taken over.
        std::fs::write(lock_path(&p), "").unwrap();
        drop(lock(&p, Duration::from_millis(0)).unwrap());
        // A writer waiting on the lock gets it when the holder is done.
        let held = lock(&p, LOCK_TIMEOUT).unwrap();
        let waiter = {
            let p = p.clone();
            std::thread::spawn(move || lock(&p, LOCK_TIMEOUT).map(|_| ()))
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        waiter.join().unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn unreadable_is_an_error_not_empty() {
        let d = dir("unreadable");
        // A directory where the file should be: reading fails with something other than NotFound.
        let p = d.join("s.json");
        std::fs::create_dir_all(&p).unwrap();
        assert!(matches!(load(&p), Err(StateFileError::Io { .. })));
        let _ = std::fs::remove_dir_all(&d);
    }
}
