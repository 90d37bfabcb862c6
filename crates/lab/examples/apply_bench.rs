//! The kernel path's speed on a large tree (root; run inside a namespace of yours):
//!
//! `apply_bench NETNS DEV BASE.tc CHANGED.tc [RUNS]`
//!
//! Clears DEV's root, applies BASE from scratch, then alternates CHANGED and BASE RUNS times
//! (each a change of the objects that differ) and prints the medians of the library's own
//! times: `read` (the dump of the kernel's tree), `plan` (diff and encoding), `send` (batched
//! requests and every ack), and the same for `apply_between` (no read).
use sluice_config::burst::BurstPolicy;
use sluice_lab::kernel::{script_state, Plan};
use sluice_lab::netlink::{flags, rtm, Msg, Netlink, TcMsg, TC_H_ROOT};
use sluice_lab::txn::{self, Applied, ApplyOptions};
use std::time::{Duration, Instant};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report(what: &str, runs: &[Applied]) {
    let m = |f: &dyn Fn(&Applied) -> Duration| median(runs.iter().map(|a| ms(f(a))).collect());
    println!(
        "{what}: {} requests; median of {}: read {:.1} ms, plan {:.1} ms, send {:.1} ms, total {:.1} ms",
        runs[0].messages,
        runs.len(),
        m(&|a| a.read),
        m(&|a| a.plan),
        m(&|a| a.send),
        m(&|a| a.read + a.plan + a.send)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: apply_bench NETNS DEV BASE.tc CHANGED.tc [RUNS]".into());
    }
    let (ns, dev) = (args[1].clone(), args[2].clone());
    let runs: usize = args.get(5).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let t = Instant::now();
    let vars = [("DEV", dev.as_str())];
    let base = script_state(&std::fs::read_to_string(&args[3])?, &vars)?;
    let changed = script_state(&std::fs::read_to_string(&args[4])?, &vars)?;
    println!("load both scripts: {:.1} ms", ms(t.elapsed()));
    sluice_lab::netns::in_netns(Some(&ns), move || {
        let p = BurstPolicy::Sluice;
        let (pb, pc) = (Plan::new(&base, &dev, p)?, Plan::new(&changed, &dev, p)?);
        let mut nl = Netlink::open()?;
        let ifindex = nl.ifindex(&dev)?;
        let mut del = Msg::tc(
            rtm::DELQDISC,
            flags::REQUEST | flags::ACK,
            TcMsg { ifindex, handle: 0, parent: TC_H_ROOT, info: 0 },
        );
        let _ = nl.request(&mut del);
        let no_probe = ApplyOptions { probe: false };
        let t = Instant::now();
        let a = txn::apply_plan(&pb, no_probe)?;
        println!(
            "from scratch: {} requests in {} sendmsgs: plan {:.1} ms, send {:.1} ms (wall {:.1} ms)",
            a.messages,
            a.sendmsgs,
            ms(a.plan),
            ms(a.send),
            ms(t.elapsed())
        );
        let (mut there, mut back, mut between) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            there.push(txn::apply_plan(&pc, no_probe)?);
            back.push(txn::apply_plan(&pb, no_probe)?);
        }
        for _ in 0..runs {
            between.push(txn::apply_between(&pb, &pc)?);
            between.push(txn::apply_between(&pc, &pb)?);
        }
        report("apply CHANGED (read + diff)", &there);
        report("apply BASE again", &back);
        report("apply_between (no read)", &between);
        Ok(())
    })?;
    Ok(())
}
