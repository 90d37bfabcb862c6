//! One module per subcommand.
pub mod conform;
pub mod ip;
pub mod rate;
pub mod tc;
