//! One module per subcommand.
pub mod apply;
pub mod lab;
pub mod rate;
