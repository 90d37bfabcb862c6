//! One module per subcommand.
pub mod config_load;
pub mod conform;
pub mod export;
pub mod ip;
pub mod lint;
pub mod rate;
pub mod tc;
pub mod viz;
