//! One module per subcommand.

// Shared by the subcommand modules below (macro_rules are in scope for modules declared after
// them): print to stdout, ignoring a closed pipe (`sluice ... | head`).
#[allow(unused_macros)]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
#[allow(unused_macros)]
macro_rules! outp {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// Writes a command's result to `-o FILE`, or to stdout (pipe-safe) without one.
fn write_output(output: Option<&std::path::Path>, text: &str) -> std::io::Result<()> {
    match output {
        Some(p) => std::fs::write(p, text),
        None => {
            outp!("{text}");
            Ok(())
        }
    }
}

pub mod apply;
pub mod bench;
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
pub mod run;
pub mod scenarios;
pub mod shape;
pub mod simulate;
pub mod stats;
pub mod tc;
pub mod viz;
