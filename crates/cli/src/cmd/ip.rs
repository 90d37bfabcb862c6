//! `sluice ip link add|del|show`: emulated dummy and veth devices for `sluice tc`.

pub use super::tc::Args;

/// Runs `ip ARGS` against the state file.
pub fn run(args: Args) -> anyhow::Result<std::process::ExitCode> {
    super::tc::run(args, super::tc::Tool::Ip)
}
