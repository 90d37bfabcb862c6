//! One module per subcommand.
pub mod rate;
