//! The kernel path's speed on a large tree (root; run inside a namespace of yours):
//!
//! `apply_bench NETNS DEV BASE.tc CHANGED.tc [RUNS]`
//!
//! Clears DEV's root, applies BASE from scratch, checks that reading the tree by parent gives
//! what one device-wide dump gives, then alternates CHANGED and BASE RUNS times (each a change
//! of the objects that differ) and prints, for each phase of `txn::apply_plan` (probe off), the
//! median wall time and the median CPU time of the thread (user and kernel: the kernel does its
//! tc work in the sender's system calls), which the other builders' load does not inflate:
//! `read` (the dump of the kernel's tree), `plan` (diff and encoding), `send` (batched requests
//! and every ack). Then the same change through `txn::apply_between` (no read).
use nix::time::{clock_gettime, ClockId};
use sluice_kernel::kernel::{script_state, Plan};
use sluice_kernel::netlink::{flags, rtm, Msg, Netlink, TcMsg, TC_H_ROOT};
use sluice_kernel::txn::ApplyOptions;
use sluice_kernel::{batch, filters, plan, txn, Error as LabError};
use sluice_tc::burst::BurstPolicy;
use std::time::{Duration, Instant};

/// Wall and thread-CPU milliseconds of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, [f64; 2]) {
    let cpu = || Duration::from(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap()).as_secs_f64() * 1e3;
    let (t, c) = (Instant::now(), cpu());
    let out = f();
    (out, [t.elapsed().as_secs_f64() * 1e3, cpu() - c])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One change: read, plan, send, each timed; the number of requests.
fn change(nl: &mut Netlink, ifindex: i32, p: &Plan<'_>) -> Result<(usize, [[f64; 2]; 3]), LabError> {
    let (have, read) = timed(|| plan::dump_tree(nl, ifindex));
    let have = have?;
    let (mut msgs, planned) = timed(|| {
        let d = plan::diff(plan::wants_of_plan(p), &have);
        d.messages(ifindex).into_iter().map(|(m, _, _)| m).collect::<Vec<_>>()
    });
    let (o, send) = timed(|| batch::send(nl, &mut msgs, true));
    let o = o?;
    if !o.all_ok(msgs.len()) {
        return Err(LabError::Lab(format!("refused: {:?}", o.errors.first())));
    }
    Ok((msgs.len(), [read, planned, send]))
}

fn report(what: &str, runs: &[(usize, [[f64; 2]; 3])]) {
    let m = |phase: usize, k: usize| median(runs.iter().map(|r| r.1[phase][k]).collect());
    let total = |k: usize| median(runs.iter().map(|r| r.1.iter().map(|p| p[k]).sum()).collect());
    println!(
        "{what}: {} requests; medians of {} (wall / thread CPU, ms): read {:.1} / {:.1}, plan {:.1} / {:.1}, \
         send {:.1} / {:.1}, total {:.1} / {:.1}",
        runs[0].0,
        runs.len(),
        m(0, 0),
        m(0, 1),
        m(1, 0),
        m(1, 1),
        m(2, 0),
        m(2, 1),
        total(0),
        total(1)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: apply_bench NETNS DEV BASE.tc CHANGED.tc [RUNS]".into());
    }
    let (ns, dev) = (args[1].clone(), args[2].clone());
    let runs: usize = args.get(5).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let vars = [("DEV", dev.as_str())];
    let (states, load) = timed(|| -> Result<_, LabError> {
        let read = |f: &str| std::fs::read_to_string(f).map_err(LabError::Io);
        Ok((script_state(&read(&args[3])?, &vars)?, script_state(&read(&args[4])?, &vars)?))
    });
    let (base, changed) = states?;
    println!("load both scripts: {:.1} ms wall, {:.1} ms CPU", load[0], load[1]);
    sluice_kernel::netns::in_netns(Some(&ns), move || {
        let p = BurstPolicy::Sluice;
        let (plans, t) = timed(|| -> Result<_, LabError> {
            Ok((Plan::new(&base, &dev, p)?, Plan::new(&changed, &dev, p)?))
        });
        let (pb, pc) = plans?;
        println!("Plan::new of both: {:.1} ms wall, {:.1} ms CPU", t[0], t[1]);
        let mut nl = Netlink::open()?;
        let ifindex = nl.ifindex(&dev)?;
        let root = TcMsg { ifindex, handle: 0, parent: TC_H_ROOT, info: 0 };
        let _ = nl.request(&mut Msg::tc(rtm::DELQDISC, flags::REQUEST | flags::ACK, root));
        let (n, [_, planned, send]) = change(&mut nl, ifindex, &pb)?;
        println!(
            "from scratch: {n} requests: plan {:.1} / {:.1} ms, send {:.1} / {:.1} ms (wall / thread CPU)",
            planned[0], planned[1], send[0], send[1]
        );
        let nf = pb.filters().len();
        if nf > 0 {
            // Filters are not in the diff yet: encoded and sent after the tree, as a batch.
            let fl = flags::REQUEST | flags::ACK | flags::EXCL | flags::CREATE;
            let (msgs, enc) = timed(|| {
                pb.filter_nodes()
                    .map(|(_, f)| filters::filter_msg(ifindex, f, fl, &|_| None))
                    .collect::<Result<Vec<_>, _>>()
            });
            let mut msgs = msgs.map_err(|e| LabError::Config(e.to_string()))?;
            let (o, send) = timed(|| batch::send(&mut nl, &mut msgs, true));
            let o = o?;
            if !o.all_ok(msgs.len()) {
                return Err(LabError::Lab(format!("filters refused: {:?}", o.errors.first())));
            }
            println!(
                "filters from scratch: {nf} requests: encode {:.1} / {:.1} ms, send {:.1} / {:.1} ms (wall / thread CPU)",
                enc[0], enc[1], send[0], send[1]
            );
            // What an incremental apply with filters must also read: every qdisc's and class's filters.
            let parents: Vec<u32> = plan::dump_tree(&mut nl, ifindex)?.iter().map(|r| r.handle).collect();
            let (got, read) = timed(|| -> Result<usize, LabError> {
                let mut n = 0;
                for p in &parents {
                    n += filters::dump_filters(&mut nl, ifindex, *p)?.len();
                }
                Ok(n)
            });
            println!(
                "reading the filters back: {} filters on {} parents (one dump each): {:.1} / {:.1} ms",
                got?,
                parents.len(),
                read[0],
                read[1]
            );
        }
        // The tree as `plan::dump_tree` reads it (by parent) against one device-wide dump.
        let mut whole = Vec::new();
        for (kind, is_qdisc) in [(rtm::GETQDISC, true), (rtm::GETTCLASS, false)] {
            let req = &mut Msg::tc(kind, flags::REQUEST | flags::DUMP, TcMsg { ifindex, ..TcMsg::default() });
            for o in nl.dump(req)?.into_iter().filter(|o| o.tc.handle != 0) {
                whole.push((is_qdisc, o.tc.handle, o.kind_str(), o.options().to_vec()));
            }
        }
        let mut by_parent: Vec<_> = plan::dump_tree(&mut nl, ifindex)?
            .into_iter()
            .map(|r| (r.is_qdisc, r.handle, r.kind, r.options.unwrap_or_default()))
            .collect();
        by_parent.sort();
        whole.sort();
        println!("read by parent = one device-wide dump: {} ({} objects)", by_parent == whole, whole.len());
        let (mut there, mut back) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            there.push(change(&mut nl, ifindex, &pc)?);
            back.push(change(&mut nl, ifindex, &pb)?);
        }
        report("apply CHANGED", &there);
        report("apply BASE again", &back);
        // The library's own transaction, filters included in its read and diff.
        let mut whole = Vec::new();
        for _ in 0..runs {
            for p in [&pc, &pb] {
                let (a, t) = timed(|| txn::apply_plan(p, ApplyOptions { probe: false }));
                let a = a?;
                let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
                whole.push((a.messages, [[ms(a.read), 0.0], [ms(a.plan), 0.0], [ms(a.send), t[1]]]));
            }
        }
        report(
            "txn::apply_plan (filters read and diffed too; wall per phase, thread CPU all in `send`)",
            &whole,
        );
        let mut between = Vec::new();
        for _ in 0..runs {
            for (old, new) in [(&pb, &pc), (&pc, &pb)] {
                let (a, t) = timed(|| txn::apply_between(old, new));
                between.push((a?.messages, [[0.0; 2], t, [0.0; 2]]));
            }
        }
        report("apply_between (no read; plan = plan and send)", &between);
        Ok(())
    })?;
    Ok(())
}
