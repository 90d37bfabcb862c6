//! The memory estimate checked before a run covers what the run allocates.

use sluice_sim::run::RunOptions;
use sluice_sim::scenario::Scenario;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts live heap bytes as glibc's malloc spends them (a 8-byte header, 16-byte granules,
/// 32 bytes at least), and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn cost(size: usize) -> usize {
    (size + 8).max(32).div_ceil(16) * 16
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(cost(l.size()), Ordering::Relaxed) + cost(l.size());
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(cost(l.size()), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            // The old and the new block coexist while the data moves.
            let now = LIVE.fetch_add(cost(new), Ordering::Relaxed) + cost(new);
            PEAK.fetch_max(now, Ordering::Relaxed);
            LIVE.fetch_sub(cost(l.size()), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Heap peak of parsing, building and running `src` (one case), above what was live before.
fn peak(src: &str) -> usize {
    let sc = Scenario::parse("m.toml", src).unwrap();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    sluice_sim::run::run(&sc, &RunOptions::default(), &|_| {}).unwrap();
    PEAK.load(Ordering::Relaxed) - base
}

fn scen(flows: &str, leaves: Option<(usize, &str)>, dur: &str, series: bool) -> String {
    let mut s = format!("name = \"m\"\ndescription = \"d\"\nduration = \"{dur}\"\nseries = {series}\n[[link]]\nname = \"l\"\nrate = \"100mbit\"\ndelay = \"5ms\"\n");
    if let Some((n, leaf)) = leaves {
        s = s.replace("delay = \"5ms\"\n", "delay = \"5ms\"\nqueue = \"shaper\"\n");
        s += &format!("[shaper]\nkind = \"htb\"\n[[shaper.class]]\nid = \"1:1\"\nrate = \"90mbit\"\n[shaper.leaves]\ncount = {n}\nparent = \"1:1\"\nfirst = \"1:10\"\nrate = \"8kbit\"\nceil = \"90mbit\"\nleaf = \"{leaf}\"\nreport = \"active\"\n");
    }
    s + flows
}

#[test]
#[ignore]
fn calibrate() {
    let kinds = std::env::var("KINDS").unwrap_or("cbr,probe,backlog,tcp".into());
    let ns: Vec<usize> =
        std::env::var("NS").unwrap_or("1,1000".into()).split(',').map(|x| x.parse().unwrap()).collect();
    let durs = std::env::var("DURS").unwrap_or("200ms,2s".into());
    for what in kinds.split(',') {
        let f = match what {
            "cbr" => "[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"10kbit\"\ncount = N\n",
            "probe" => "[[flow]]\nname = \"f\"\ntype = \"probe\"\ninterval = \"10ms\"\ncount = N\n",
            "backlog" => "[[flow]]\nname = \"f\"\ntype = \"backlog\"\ncount = N\n",
            "tcp" => "[[flow]]\nname = \"f\"\ntype = \"tcp\"\ncount = N\n",
            "fast" => "[[flow]]\nname = \"f\"\ntype = \"cbr\"\nrate = \"1gbit\"\ncount = N\n",
            _ => "[[flow]]\nname = \"f\"\ntype = \"poisson\"\nrate = \"10kbit\"\ncount = N\n",
        };
        for &n in &ns {
            for dur in durs.split(',') {
                let p = peak(&scen(&f.replace("N", &n.to_string()), None, dur, false));
                eprintln!("{what} n={n} dur={dur}: {p} B, {} B/flow", p / n);
            }
        }
    }
}

fn tc_leaves(n: usize, leaf: &str) -> String {
    let mut tc = String::from("tc qdisc add dev eth0 root handle 1: htb default 10\ntc class add dev eth0 parent 1: classid 1:1 htb rate 90mbit\n");
    for i in 0..n {
        tc += &format!("tc class add dev eth0 parent 1:1 classid 1:{} htb rate 8kbit ceil 90mbit\ntc qdisc add dev eth0 parent 1:{} {leaf}\n", 10 + i, 10 + i);
    }
    format!("name = \"m\"\ndescription = \"d\"\nduration = \"50ms\"\nseries = false\n[[link]]\nname = \"l\"\nrate = \"100mbit\"\ndelay = \"5ms\"\nqueue = \"shaper\"\n[shaper]\ntc = \"\"\"\n{tc}\"\"\"\n[[flow]]\nname = \"f\"\ntype = \"probe\"\ninterval = \"1s\"\n")
}

#[test]
#[ignore]
fn calibrate_leaves() {
    let kinds = std::env::var("LEAVES").unwrap_or("pfifo,fq_codel,sfq,codel,fq,cake,pie,fq_pie,red limit 100000 avpkt 1000 bandwidth 10mbit,tbf rate 1mbit burst 10k latency 10ms,netem delay 1ms,hhf,choke limit 1000 bandwidth 10mbit,sfb,prio,drr,bfifo,pfifo_fast,ets bands 3,hfsc,multiq,qfq".into());
    let n0 = peak(&tc_leaves(1, "pfifo"));
    for leaf in kinds.split(',') {
        let a = std::panic::catch_unwind(|| peak(&tc_leaves(1, leaf)));
        let b = std::panic::catch_unwind(|| peak(&tc_leaves(201, leaf)));
        match (a, b) {
            (Ok(a), Ok(b)) => eprintln!("leaf {leaf}: base {} B (pfifo {n0}), {} B/leaf", a, (b - a) / 200),
            _ => eprintln!("leaf {leaf}: failed"),
        }
    }
}

/// The estimate the run checks before it starts, for the one case of `src`.
fn estimate(src: &str) -> f64 {
    let sc = Scenario::parse("m.toml", src).unwrap();
    let points = sc.points(&[]).unwrap();
    assert_eq!(points.len(), 1);
    sluice_sim::scenario::build_case(&sc, &points[0]).unwrap().memory
}

use proptest::prelude::*;

fn flow_group() -> impl Strategy<Value = String> {
    (0..6usize, 1..300usize, 0..4usize, 1..60u32, 16..4096u32).prop_map(|(kind, count, load, x, rwnd)| {
        // Total offered load of the group: 1 Mbit/s to 1 Gbit/s.
        let total = [1e6, 1e7, 1e8, 1e9][load];
        let rate = format!("{}bit", ((total / count as f64) as u64).max(1000));
        let body = match kind {
            0 => format!("type = \"cbr\"\nrate = \"{rate}\"\n"),
            1 => format!("type = \"poisson\"\nrate = \"{rate}\"\n"),
            2 => format!("type = \"probe\"\ninterval = \"{}ms\"\n", x),
            3 => format!("type = \"backlog\"\ndepth = {x}\n"),
            4 => format!("type = \"tcp\"\nrwnd = {rwnd}\n"),
            _ => format!("type = \"onoff\"\nrate = \"{rate}\"\non = \"15s\"\noff = \"{x}ms\"\n"),
        };
        format!("count = {count}\n{body}")
    })
}

fn shaper() -> impl Strategy<Value = (usize, usize, usize)> {
    // (form: none, generated leaves, tc script; leaf kind; leaves)
    (0..3usize, 0..8usize, 1..400usize)
}

fn scenario() -> impl Strategy<Value = String> {
    (
        proptest::collection::vec(flow_group(), 1..4),
        shaper(),
        0..4usize,
        0..20u32,
        20..600u32,
        any::<bool>(),
    )
        .prop_map(|(groups, (form, kind, n), rate, delay, dur, series)| {
            let rate = ["1mbit", "10mbit", "100mbit", "1gbit"][rate];
            let mut s = format!(
                "name = \"m\"\ndescription = \"d\"\nduration = \"{dur}ms\"\nseries = {series}\n\
                 [[link]]\nname = \"l\"\nrate = \"{rate}\"\ndelay = \"{delay}ms\"\n"
            );
            let mut class = "";
            match form {
                1 => {
                    let leaf = ["pfifo 100", "pfifo 1000", "bfifo 100000", "fq_codel", "sfq", "fq_codel flows 64", "sfq divisor 256", "pfifo_fast"][kind];
                    s += &format!(
                        "queue = \"shaper\"\n[shaper]\nkind = \"htb\"\n[[shaper.class]]\nid = \"1:1\"\nrate = \"{rate}\"\n\
                         [shaper.leaves]\ncount = {n}\nparent = \"1:1\"\nfirst = \"1:10\"\nrate = \"8kbit\"\nceil = \"{rate}\"\nleaf = \"{leaf}\"\nreport = \"active\"\n"
                    );
                    class = "1:10";
                }
                2 => {
                    let leaf = ["pfifo", "fq_codel", "sfq", "cake", "netem delay 1ms", "codel", "tbf rate 1mbit burst 10k latency 10ms", "red limit 100000 avpkt 1000 bandwidth 10mbit"][kind];
                    let n = n.min(60);
                    let mut tc = format!("tc qdisc add dev eth0 root handle 1: htb default 10\ntc class add dev eth0 parent 1: classid 1:1 htb rate {rate}\n");
                    for i in 0..n {
                        tc += &format!("tc class add dev eth0 parent 1:1 classid 1:{} htb rate 8kbit ceil {rate}\ntc qdisc add dev eth0 parent 1:{} {leaf}\n", 10 + i, 10 + i);
                    }
                    s += &format!("queue = \"shaper\"\n[shaper]\ntc = \"\"\"\n{tc}\"\"\"\n");
                }
                _ => {}
            }
            for (i, g) in groups.iter().enumerate() {
                s += &format!("[[flow]]\nname = \"f{i}\"\n{g}");
                if !class.is_empty() {
                    s += &format!("class = \"{class}\"\nspread = {n}\n");
                }
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Whatever the estimate admits runs within it: the heap peak of building and running the
    /// case (bytes as glibc's malloc spends them) never exceeds the estimate.
    #[test]
    fn the_memory_estimate_covers_the_measured_peak(src in scenario()) {
        let est = estimate(&src);
        let got = peak(&src);
        if std::env::var_os("SHOW_RATIO").is_some() {
            eprintln!("ratio {:.2} peak {got} est {est:.0}", est / got as f64);
            if est / (got as f64) < 1.2 {
                eprintln!("LOW\n{src}");
            }
        }
        prop_assert!(got as f64 <= est, "peak {got} B above the estimate {est:.0} B for\n{src}");
    }
}
