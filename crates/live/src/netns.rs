//! Entering a network namespace made by `ip netns add` (the testbed's, or an operator's).

use crate::LiveError;

/// Where `ip netns add` puts its bind mounts.
const NETNS_DIR: &str = "/run/netns";

/// Switches the *calling* thread into namespace `ns` for good (the shaper's loop thread; sockets
/// it opens afterwards belong to `ns`).
pub fn enter(ns: &str) -> Result<(), LiveError> {
    if ns.is_empty() || ns.contains('/') || ns == "." || ns == ".." {
        return Err(LiveError::Io(format!("`{ns}` is not a network namespace name")));
    }
    let path = std::path::Path::new(NETNS_DIR).join(ns);
    let file = std::fs::File::open(&path).map_err(|e| LiveError::Io(format!("{}: {e}", path.display())))?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| LiveError::Io(format!("setns into {ns}: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bad_names_are_refused_before_any_system_call() {
        for bad in ["", "../x", "a/b", ".."] {
            assert!(super::enter(bad).is_err(), "{bad}");
        }
        let e = super::enter("sluice-no-such-namespace").unwrap_err().to_string();
        assert!(e.contains("/run/netns/sluice-no-such-namespace"), "{e}");
    }
}
