//! Helpers shared by the lab's root-only integration tests.

use sluice_lab::testbed::{testbed_available, LabOptions};

/// True when the netns lab can be built here; otherwise says loudly why `test` is skipped.
pub fn lab_or_skip(test: &str) -> bool {
    match testbed_available(&LabOptions::default()) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("\n*** SKIPPING {test}: the netns lab cannot be built here ({why}) ***\n");
            false
        }
    }
}

/// The live shaper between the lab's shaper interfaces, in the shaper's namespace: `script`
/// shapes the way to the server, `reload` reads tc scripts, at most 40 s, one worker, I/O per
/// driver. Tests change what they need with `Options { .., ..shaper_options(..) }`.
#[allow(dead_code)] // not every test binary starts a shaper
pub fn shaper_options(
    lab: &sluice_lab::testbed::Lab,
    script: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> sluice_live::shaper::Options {
    use sluice_lab::testbed::{IF_SHAPER_CLIENT, IF_SHAPER_SERVER};
    use sluice_live::config;
    sluice_live::shaper::Options {
        in_if: IF_SHAPER_CLIENT.into(),
        out_if: IF_SHAPER_SERVER.into(),
        forward: config::from_script("test.tc", script, IF_SHAPER_SERVER).expect("configuration loads"),
        reverse: None,
        control: None,
        metrics: None,
        max_duration: Some(std::time::Duration::from_secs(40)),
        stop,
        load_config: Box::new(|p| config::load(p, IF_SHAPER_SERVER).map_err(|e| e.to_string())),
        verbose: true,
        netns: Some(lab.shaper_ns()),
        pacing: Default::default(),
        workers: 1,
        shard_by: sluice_live::sys::FanoutKey::Source,
        io: Default::default(),
    }
}
