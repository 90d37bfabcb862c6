//! One module per subcommand.
pub mod apply;
pub mod compare;
pub mod config_load;
pub mod conform;
pub mod export;
pub mod ip;
pub mod lab;
pub mod lint;
pub mod measure;
pub mod rate;
pub mod reload;
pub mod scenarios;
pub mod shape;
pub mod simulate;
pub mod stats;
pub mod tc;
pub mod viz;
