//! One module per subcommand.
pub mod ip;
pub mod rate;
pub mod tc;
