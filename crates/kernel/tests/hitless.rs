//! Hitless changes under load (root only; skips loudly otherwise): a paced UDP stream with
//! sequence numbers in class 1:10 and two bulk TCP flows in class 1:20 of an HTB tree on a veth,
//! classified by u32 filters (protocol and destination port), while the tree changes: rates, and
//! 100 subscribers (class, pfifo leaf and u32 filter each) added and removed. Each change is made
//! three ways: `sluice apply` (the transactional, incremental path), `tc class change`, and tc
//! delete + re-add (`tc qdisc del` then `tc -batch` of the whole tree, as a full reload does).
//! Prints lost and reordered datagrams and TCP retransmissions per way; asserts the goal for
//! `sluice apply`: 0 lost, every datagram classified by its filter into 1:10, 0 reordered.
//!
//! The receiving veth steers each flow to one CPU (RPS, `rps_cpus`): without it the veth hands
//! each packet to the backlog of the CPU that dequeued it from HTB, and two CPUs' backlogs can
//! deliver a flow out of order with no change to the tree at all (see BENCHMARKS.md, "The kernel
//! path"). `SLUICE_HITLESS_NO_RPS=1` runs without it, to see that; `SLUICE_HITLESS_HOP=1` moves
//! the UDP sender to another CPU every 10 datagrams, which makes it frequent.
//!
//! Run: `cargo test --release -p sluice-lab --test hitless -- --nocapture`.

use sluice_kernel::kernel::{script_state, Plan};
use sluice_kernel::netns::spawn_in_netns;
use sluice_kernel::txn::{apply_plan, ApplyOptions};
use sluice_kernel::Error as LabError;
use sluice_tc::burst::BurstPolicy;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

const DEV: &str = "slc-hl0";
const A_ADDR: &str = "198.18.77.1";
const B_ADDR: &str = "198.18.77.2";
const UDP_PORT: u16 = 47001;
const TCP_PORT: u16 = 47002;
/// The UDP sender's port (the receiver connects to it: the kernel records the delivering CPU,
/// `SO_INCOMING_CPU`, only for a connected UDP socket).
const UDP_SRC_PORT: u16 = 47003;
/// Datagrams per second and size: 16 Mbit/s, below class 1:10's rate at all times.
const PPS: u64 = 2000;
const SIZE: usize = 1000;
const RUN: Duration = Duration::from_secs(4);

struct Netns(String, String);
impl Drop for Netns {
    fn drop(&mut self) {
        for n in [&self.0, &self.1] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn sh(args: &[&str]) -> bool {
    // Quiet: tc's "quantum of class is big" warnings would bury the table.
    Command::new(args[0]).args(&args[1..]).output().is_ok_and(|o| o.status.success())
}

/// Whether the receiving veth steers flows to one CPU (see the module's note).
fn rps() -> bool {
    std::env::var_os("SLUICE_HITLESS_NO_RPS").is_none()
}

/// Whether the UDP sender moves to another CPU every 10 datagrams (`SLUICE_HITLESS_HOP=1`).
fn hop() -> bool {
    std::env::var_os("SLUICE_HITLESS_HOP").is_some()
}

fn setup() -> Option<Netns> {
    let root =
        Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root || !sh(&["ip", "-V"]) || !sh(&["tc", "-V"]) {
        eprintln!("\n*** SKIPPING hitless: needs root, ip and tc ***\n");
        return None;
    }
    let (a, b) = (format!("slc-hla-{}", std::process::id()), format!("slc-hlb-{}", std::process::id()));
    assert!(sh(&["ip", "netns", "add", &a]) && sh(&["ip", "netns", "add", &b]));
    let g = Netns(a.clone(), b.clone());
    assert!(sh(&[
        "ip", "-n", &a, "link", "add", DEV, "type", "veth", "peer", "name", "slc-hl1", "netns", &b
    ]));
    assert!(sh(&["ip", "-n", &a, "addr", "add", &format!("{A_ADDR}/24"), "dev", DEV]));
    assert!(sh(&["ip", "-n", &b, "addr", "add", &format!("{B_ADDR}/24"), "dev", "slc-hl1"]));
    for (n, d) in [(&a, DEV), (&b, "slc-hl1")] {
        assert!(sh(&["ip", "-n", n, "link", "set", d, "up"]));
        assert!(sh(&["ip", "-n", n, "link", "set", "lo", "up"]));
    }
    if rps() {
        // `ip netns exec` mounts the namespace's own /sys.
        let cpus = format!(
            "{:x}",
            (1u64 << std::thread::available_parallelism().map_or(1, |n| n.get()).min(63)) - 1
        );
        assert!(sh(&[
            "ip",
            "netns",
            "exec",
            &b,
            "sh",
            "-c",
            &format!("echo {cpus} > /sys/class/net/slc-hl1/queues/rx-0/rps_cpus")
        ]));
    }
    Some(g)
}

/// The tree: 1:10 carries the UDP stream, 1:20 the TCP flows (each by a u32 filter), and `subs`
/// subscriber classes 1:100.. (with pfifo leaves and a u32 filter on a destination address of
/// their own) carry nothing.
fn tree(udp_rate: u32, tcp_rate: u32, subs: usize) -> String {
    let mut s = format!(
        "tc qdisc add dev $DEV root handle 1: htb default 30\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 400mbit\n\
         tc class add dev $DEV parent 1:1 classid 1:10 htb rate {udp_rate}mbit ceil {udp_rate}mbit\n\
         tc qdisc add dev $DEV parent 1:10 handle 10: pfifo limit 1000\n\
         tc class add dev $DEV parent 1:1 classid 1:20 htb rate {tcp_rate}mbit ceil {tcp_rate}mbit\n\
         tc class add dev $DEV parent 1:1 classid 1:30 htb rate 10mbit\n\
         tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip protocol 17 0xff match ip dport {UDP_PORT} 0xffff flowid 1:10\n\
         tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip protocol 6 0xff match ip dport {TCP_PORT} 0xffff flowid 1:20\n"
    );
    for i in 0..subs {
        let m = 0x100 + i;
        s += &format!(
            "tc class add dev $DEV parent 1:1 classid 1:{m:x} htb rate 2mbit ceil 10mbit\n\
             tc qdisc add dev $DEV parent 1:{m:x} handle {m:x}: pfifo limit 100\n\
             tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dst 198.18.78.{i}/32 flowid 1:{m:x}\n"
        );
    }
    s
}

#[derive(Debug, Clone, Copy)]
enum Way {
    /// No change at all: what the path itself reorders.
    Nothing,
    Sluice,
    TcChange,
    TcReload,
}

fn apply_way(way: Way, ns: &str, text: &str, class_rates: (u32, u32)) {
    match way {
        Way::Nothing => {}
        Way::Sluice => {
            let text = text.to_string();
            let r = spawn_in_netns(ns, move || {
                let s = script_state(&text, &[("DEV", DEV)])?;
                apply_plan(&Plan::new(&s, DEV, BurstPolicy::Sluice)?, ApplyOptions::default()).map(|_| ())
            })
            .unwrap()
            .join()
            .unwrap();
            r.unwrap();
        }
        Way::TcChange => {
            for (c, r) in [("1:10", class_rates.0), ("1:20", class_rates.1)] {
                let rate = format!("{r}mbit");
                assert!(sh(&[
                    "ip", "netns", "exec", ns, "tc", "class", "change", "dev", DEV, "parent", "1:1",
                    "classid", c, "htb", "rate", &rate, "ceil", &rate
                ]));
            }
        }
        Way::TcReload => {
            let _ = sh(&["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", DEV, "root"]);
            let path = std::env::temp_dir().join(format!("slc-hitless-{}.tc", std::process::id()));
            let batch: String = text
                .replace("$DEV", DEV)
                .lines()
                .map(|l| l.trim_start_matches("tc ").to_string() + "\n")
                .collect();
            std::fs::write(&path, batch).unwrap();
            assert!(sh(&["ip", "netns", "exec", ns, "tc", "-batch", path.to_str().unwrap()]));
            let _ = std::fs::remove_file(path);
        }
    }
}

/// TCP segments retransmitted so far in the calling thread's namespace.
fn retrans() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default();
    let mut lines = s.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(h), Some(v)) = (lines.next(), lines.next()) else { return 0 };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == "RetransSegs")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[derive(Debug, Default)]
struct Outcome {
    sent: u64,
    received: u64,
    lost: u64,
    reordered: u64,
    retrans: u64,
    /// Packets class 1:10 (the UDP stream's, by its filter) sent, as the kernel counts them at
    /// the end (since the tree was last made).
    in_udp_class: u64,
    /// How often the receiving CPU changed between consecutive datagrams.
    cpu_changes: u64,
}

/// Runs the load for `RUN` while `changes` runs (after 0.5 s) and returns what the receivers saw.
fn under_load(a: &str, b: &str, changes: impl FnOnce() + Send + 'static) -> Result<Outcome, LabError> {
    let start = Instant::now();
    let end = start + RUN;
    let udp_rx = spawn_in_netns(b, move || {
        let s = UdpSocket::bind((B_ADDR, UDP_PORT))?;
        // Room for 2 s of datagrams: a receiver starved by a busy machine must not count as loss.
        nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBufForce, &(8 << 20))
            .map_err(std::io::Error::from)?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        s.connect((A_ADDR, UDP_SRC_PORT))?;
        let mut seen = vec![false; (PPS * RUN.as_secs() * 2) as usize];
        let (mut max, mut reordered, mut received) = (None::<u64>, 0u64, 0u64);
        // The CPU whose backlog delivered the latest datagram (`SO_INCOMING_CPU`), and how often
        // it changed from one datagram read to the next.
        let (mut cpu, mut cpu_changes) = (None::<usize>, 0u64);
        let mut buf = [0u8; 2048];
        while Instant::now() < end + Duration::from_millis(500) {
            let Ok(n) = s.recv(&mut buf) else { continue };
            if n < 8 {
                continue;
            }
            let seq = u64::from_be_bytes(buf[..8].try_into().unwrap());
            received += 1;
            let now = socket2::SockRef::from(&s).cpu_affinity().ok();
            if cpu.is_some() && now != cpu {
                cpu_changes += 1;
            }
            cpu = now;
            if let Some(slot) = seen.get_mut(seq as usize) {
                *slot = true;
            }
            match max {
                Some(m) if seq < m => reordered += 1,
                _ => max = Some(seq),
            }
        }
        Ok((seen, received, reordered, cpu_changes))
    })?;
    let tcp_rx = spawn_in_netns(b, move || {
        let l = TcpListener::bind((B_ADDR, TCP_PORT))?;
        let mut readers = Vec::new();
        for _ in 0..2 {
            let (mut s, _) = l.accept()?;
            s.set_read_timeout(Some(Duration::from_millis(500)))?;
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while Instant::now() < end + Duration::from_millis(300) {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
            }));
        }
        for r in readers {
            let _ = r.join();
        }
        Ok(())
    })?;
    std::thread::sleep(Duration::from_millis(100));
    let tx = spawn_in_netns(a, move || {
        let before = retrans();
        let mut tcp = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect((B_ADDR, TCP_PORT))?;
            s.set_write_timeout(Some(Duration::from_millis(500)))?;
            tcp.push(std::thread::spawn(move || {
                let buf = vec![0u8; 1 << 16];
                while Instant::now() < end {
                    if s.write(&buf).is_err() && Instant::now() >= end {
                        break;
                    }
                }
            }));
        }
        let u = UdpSocket::bind((A_ADDR, UDP_SRC_PORT))?;
        u.connect((B_ADDR, UDP_PORT))?;
        let mut buf = [0u8; SIZE];
        let mut sent = 0u64;
        let t0 = Instant::now();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        while Instant::now() < end {
            let due = t0 + Duration::from_nanos(1_000_000_000 / PPS * sent);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if hop() && sent.is_multiple_of(10) {
                // The experiment of the module's note: the sender moves to another CPU.
                let mut set = nix::sched::CpuSet::new();
                let _ = set.set((sent / 10) as usize % cpus);
                let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
            }
            buf[..8].copy_from_slice(&sent.to_be_bytes());
            if u.send(&buf).is_ok() {
                sent += 1;
            }
        }
        for t in tcp {
            let _ = t.join();
        }
        Ok((sent, retrans() - before))
    })?;
    std::thread::sleep(Duration::from_millis(500));
    changes();
    let (sent, retrans) = tx.join().unwrap()?;
    let (seen, received, reordered, cpu_changes) = udp_rx.join().unwrap()?;
    let _ = tcp_rx.join();
    let lost = seen.iter().take(sent as usize).filter(|s| !**s).count() as u64;
    let dev = DEV;
    let k = spawn_in_netns(a, move || sluice_kernel::kernel::read_back(dev))?.join().unwrap()?;
    let in_udp_class = k.iter().find(|o| !o.is_qdisc && o.handle == 0x1_0010).map_or(0, |c| c.stats.packets);
    Ok(Outcome { sent, received, lost, reordered, retrans, in_udp_class, cpu_changes })
}

#[test]
fn changes_under_load_lose_and_reorder_nothing_with_sluice_apply() {
    let Some(ns) = setup() else { return };
    let (a, b) = (ns.0.clone(), ns.1.clone());
    let mut table = Vec::new();
    for (what, ways) in [
        ("rate changes (10)", vec![Way::Nothing, Way::Sluice, Way::TcChange, Way::TcReload]),
        ("100 subscribers added/removed (6)", vec![Way::Sluice, Way::TcReload]),
    ] {
        for way in ways {
            // A fresh tree for each run.
            let _ = sh(&["ip", "netns", "exec", &a, "tc", "qdisc", "del", "dev", DEV, "root"]);
            apply_way(Way::Sluice, &a, &tree(30, 50, 0), (30, 50));
            let ns_a = a.clone();
            let rates = what.starts_with("rate");
            let out = under_load(&a, &b, move || {
                let rounds = if rates { 10 } else { 6 };
                for i in 0..rounds {
                    let (u, t) = if rates && i % 2 == 0 { (40, 60) } else { (30, 50) };
                    let subs = if !rates && i % 2 == 0 { 100 } else { 0 };
                    apply_way(way, &ns_a, &tree(u, t, subs), (u, t));
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
            .unwrap();
            let line = format!(
                "{what:<36} {:<9} sent {:>5}  received {:>5}  lost {:>3}  reordered {:>3}  TCP retransmits {:>5}  in 1:10 {:>5}  rx CPU changes {:>4}",
                format!("{way:?}"),
                out.sent,
                out.received,
                out.lost,
                out.reordered,
                out.retrans,
                out.in_udp_class,
                out.cpu_changes
            );
            eprintln!("{line}");
            table.push((way, out, line));
        }
    }
    eprintln!("(receiver's flow steering to one CPU: {})", if rps() { "on" } else { "off" });
    for (way, out, line) in &table {
        if matches!(way, Way::Sluice | Way::Nothing) {
            assert!(out.sent > PPS, "{line}");
            assert_eq!(out.lost, 0, "{line}");
            // Every datagram went through its filter into 1:10, none to the default class.
            assert_eq!(out.in_udp_class, out.sent, "{line}");
            // Without flow steering the receiving veth's per-CPU backlogs reorder a few
            // datagrams now and then whatever the tree does (`Nothing` included): not counted.
            if rps() {
                assert_eq!(out.reordered, 0, "{line}");
            }
        }
    }
}
