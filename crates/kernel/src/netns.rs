//! Network namespaces: run a closure inside one (on its own thread), and run commands.
//!
//! The lab creates namespaces, links and addresses through netlink ([`crate::rtnl`]) and programs
//! tc through [`crate::netlink`]; [`run`] and [`ip`] remain for callers that want a command.

use crate::Error;
use std::fs::File;
use std::process::Command;

/// Where `ip netns add` puts its bind mounts.
pub const NETNS_DIR: &str = "/run/netns";

/// Run `f` on a fresh thread whose network namespace is `ns` (None: the caller's namespace).
/// Sockets created inside `f` belong to that namespace for their whole life.
pub fn in_netns<T, F>(ns: Option<&str>, f: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    let file = match ns {
        Some(name) => Some(open_netns(name)?),
        None => None,
    };
    let handle = std::thread::Builder::new()
        .name(format!("netns-{}", ns.unwrap_or("self")))
        .spawn(move || {
            if let Some(file) = file {
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .map_err(|e| Error::Netns(format!("setns: {e}")))?;
            }
            f()
        })
        .map_err(Error::Io)?;
    handle.join().map_err(|_| Error::Netns("a namespace thread panicked".into()))?
}

/// Spawn (without joining) a thread inside namespace `ns`.
pub fn spawn_in_netns<T, F>(ns: &str, f: F) -> Result<std::thread::JoinHandle<Result<T, Error>>, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    let file = open_netns(ns)?;
    std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| Error::Netns(format!("setns: {e}")))?;
            f()
        })
        .map_err(Error::Io)
}

/// Switch the *calling* thread into namespace `ns` for good (use on a dedicated thread).
pub fn enter_netns(ns: &str) -> Result<(), Error> {
    let file = open_netns(ns)?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| Error::Netns(format!("setns into {ns}: {e}")))
}

fn open_netns(name: &str) -> Result<File, Error> {
    let path = format!("{NETNS_DIR}/{name}");
    File::open(&path).map_err(|e| Error::Netns(format!("cannot open {path}: {e} (is the lab up?)")))
}

/// Namespaces that exist now, by name.
pub fn list_netns() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Run a setup command; a non-zero exit becomes an error carrying its stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, Error> {
    let out =
        Command::new(cmd).args(args).output().map_err(|e| Error::Setup(format!("cannot run {cmd}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Setup(format!(
            "`{cmd} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip ARGS...` (for tests and tools; the lab itself uses [`crate::rtnl`]).
pub fn ip(args: &[&str]) -> Result<String, Error> {
    run("ip", args)
}

/// Whether this process can create network namespaces (root and the facility present).
pub fn netns_available() -> Result<(), String> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err("not running as root".into());
    }
    // Unique per call: tests in one process probe concurrently.
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("slc-probe-{}-{n}", std::process::id());
    match crate::rtnl::netns_add(&probe) {
        Ok(()) => {
            let _ = crate::rtnl::netns_del(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot create a network namespace: {e}")),
    }
}
