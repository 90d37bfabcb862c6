//! One module per subcommand.
pub mod apply;
pub mod ip;
pub mod bench;
pub mod lab;
pub mod rate;
pub mod reload;
pub mod scenarios;
pub mod shape;
pub mod simulate;
pub mod stats;
pub mod tc;
