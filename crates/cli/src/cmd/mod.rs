//! One module per subcommand.
pub mod rate;
pub mod scenarios;
pub mod simulate;
