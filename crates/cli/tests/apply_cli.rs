//! `sluice apply` as a process: what `--dry-run` prints and its exit status, refusals before
//! anything is sent, and (as root, in a namespace of the test's own) a real apply's exit status.

use std::path::{Path, PathBuf};
use std::process::Command;

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name).display().to_string()
}

/// A scratch directory removed on drop.
struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("sluice-apply-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const NESTED: &str = "tc qdisc add dev $DEV root handle 1: htb default 20\n\
    tc class add dev $DEV parent 1: classid 1:1 htb rate 10mbit\n\
    tc class add dev $DEV parent 1:1 classid 1:10 htb rate 3mbit ceil 10mbit\n\
    tc class add dev $DEV parent 1:1 classid 1:20 htb rate 7mbit ceil 10mbit\n\
    tc qdisc add dev $DEV parent 1:10 handle 10: pfifo limit 50\n\
    tc qdisc add dev $DEV parent 1:20 handle 20: htb default 1\n\
    tc class add dev $DEV parent 20: classid 20:1 htb rate 3mbit ceil 7mbit\n\
    tc class add dev $DEV parent 20: classid 20:2 htb rate 4mbit ceil 7mbit\n";

#[test]
fn dry_run_orders_parents_first_and_prints_the_filters_last() {
    let (code, out, err) = sluice(&["apply", "--dev", "eth9", &example("home-003.tc"), "--dry-run"]);
    // As root the dry run rehearses on a scratch device: a kernel without cls_flow refuses the
    // flow filter, as the real run would.
    if is_root() && !Path::new("/sys/module/cls_flow").exists() {
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("WOULD BE REFUSED") && err.contains("flow"), "{err}");
    } else {
        assert_eq!((code, err.as_str()), (0, ""), "{out}");
    }
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} not in {out}"));
    assert!(at("handle 20: htb") < at("classid 20:1 "), "{out}");
    assert!(at("parent 20:1 handle 201:") > at("classid 20:1 "), "{out}");
    assert_eq!(out.matches("\ntc filter add dev eth9").count(), 5, "{out}");
    assert!(
        at("tc filter add dev eth9 parent 20: protocol all prio 1 handle 0x1 flow hash keys src")
            > at("parent 20:2 handle 202:"),
        "{out}"
    );

    let dir = Dir::new("dry");
    let cfg = dir.file("nested.tc", NESTED);
    let (code, out, err) = sluice(&["apply", "--dev", "eth9", &cfg, "--dry-run"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.contains("tc class replace dev eth9 parent 20: classid 20:2 htb rate 4Mbit"), "{out}");
}

#[test]
fn configurations_the_kernel_cannot_hold_are_refused_before_anything_is_sent() {
    let dir = Dir::new("refuse");
    // The TOML form takes a 32-bit default minor; the kernel's is 16 bits.
    let (code, toml, err) =
        sluice(&["export", "--to", "toml", "--var", "DEV=eth9", &dir.file("n.tc", NESTED)]);
    assert_eq!(code, 0, "{err}");
    assert!(toml.contains("default = \"0x20\""), "{toml}");
    let wide = dir.file("wide.toml", &toml.replace("default = \"0x20\"", "default = \"0x10020\""));
    let (code, _, err) = sluice(&["apply", "--dev", "eth9", &wide, "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("default class 0x10020") && err.contains("nested HTB"), "{err}");
    // An ingress-only configuration is whole: nothing in it is refused.
    let ingress = dir.file("i.tc", "tc qdisc add dev $DEV ingress\n");
    let (code, out, err) = sluice(&["apply", "--dev", "eth9", &ingress, "--dry-run"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(out.contains("tc qdisc replace dev eth9 ingress"), "{out}");
    // A file that configures nothing is refused, with what was expected.
    let empty = dir.file("e.tc", "ip link add dev $DEV type veth peer name x$DEV\n");
    let (code, _, err) = sluice(&["apply", "--dev", "eth9", &empty, "--dry-run"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("no qdisc was configured"), "{err}");
}

#[test]
fn a_real_apply_with_filters_exits_0_when_whole_and_1_changing_nothing_when_refused() {
    let Some(g) = veth_netns("tcli", "a_real_apply_with_filters") else { return };
    let ns = g.0.clone();
    let dir = Dir::new("real");
    let cfg = dir.file("nested.tc", NESTED);
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &cfg]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("the kernel matches the model (8 qdiscs, classes and filters)"), "{out}");

    let filtered = format!("{NESTED}tc filter add dev $DEV parent 1: protocol ip prio 1 u32 match ip dport 22 0xffff flowid 1:10\n");
    let (code, out, err) =
        sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &dir.file("f.tc", &filtered)]);
    assert_eq!(code, 0, "{out}\n{err}");
    // Only the difference: the filter.
    assert!(
        out.contains("sent     add filter u32 prio 1 handle 800::800 on 1:") && out.contains("1 request(s)"),
        "{out}"
    );
    assert!(out.contains("the kernel matches the model (9 qdiscs, classes and filters)"), "{out}");
    let filters_now = || {
        let shown =
            Command::new("tc").args(["-n", &ns, "filter", "show", "dev", "slc-ca"]).output().expect("tc");
        String::from_utf8_lossy(&shown.stdout).to_string()
    };
    let before = filters_now();
    assert!(before.contains("800::800"), "{before}");

    // This kernel lacks cls_flow: the probe on a scratch device meets the kernel's refusal and
    // nothing is sent; without the probe the kernel refuses mid-way and the device gets back
    // exactly what it had, filters included.
    if !Path::new("/sys/module/cls_flow").exists() {
        let flow = format!("{}tc filter add dev $DEV parent 20: prio 1 handle 1 flow hash keys src divisor 2 baseclass 20:1\n", filtered.replace("dport 22", "dport 23"));
        let flow = dir.file("flow.tc", &flow);
        let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &flow]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(
            err.contains("filter flow prio 1")
                && err.contains("TC classifier not found")
                && err.contains("nothing was changed"),
            "{err}"
        );
        assert!(!out.contains("sent"), "{out}");
        assert_eq!(filters_now(), before);
        let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, "--no-probe", &flow]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("TC classifier not found") && err.contains("restored exactly"), "{err}");
        assert_eq!(filters_now(), before);
    }
}

#[test]
fn a_real_apply_sends_only_the_difference_and_sets_one_rate() {
    let Some(g) = veth_netns("tcld", "a_real_apply_sends_only_the_difference") else { return };
    let ns = g.0.clone();
    let dir = Dir::new("incr");
    let cfg = dir.file("nested.tc", NESTED);
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &cfg]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("8 request(s)")
            && out.contains("the kernel matches the model (8 qdiscs, classes and filters)"),
        "{out}"
    );
    // The same tree again: nothing to send; one rate: one request.
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &cfg]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("0 request(s) in 0 sendmsg(s)"), "{out}");
    let changed = dir.file("c.tc", &NESTED.replace("rate 4mbit ceil 7mbit", "rate 5mbit ceil 7mbit"));
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &changed]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("sent     change class htb 20:2\n1 request(s) in 1 sendmsg(s)"), "{out}");
    // The rate API: one class, in place; then the model's rate comes back as one change.
    let set = ["apply", "--dev", "slc-ca", "--netns", &ns, "--set", "20:2", "rate", "6mbit", "ceil", "7mbit"];
    let (code, out, err) = sluice(&set);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, _, err) =
        sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, "--set", "20:9", "rate", "6mbit"]);
    assert_eq!(code, 1);
    assert!(err.contains("no HTB class 20:9"), "{err}");
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &changed]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("sent     change class htb 20:2\n"), "{out}");
    // A leaf of a kind this kernel lacks: refused whole, exit 1, the tree as it was.
    if !Path::new("/sys/module/sch_sfq").exists() {
        let bad = dir.file("b.tc", &format!("{NESTED}tc qdisc add dev $DEV parent 20:1 handle 21: sfq\n"));
        let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &bad]);
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(
            err.contains("refused") && err.contains("sfq") && err.contains("nothing was changed"),
            "{err}"
        );
        let (code, out, _) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &changed]);
        assert_eq!(code, 0);
        assert!(out.contains("0 request(s)"), "{out}");
    }
    // A warning the kernel gives on a request it accepts reaches the user.
    let big = dir.file(
        "w.tc",
        "tc qdisc add dev $DEV root handle 1: htb r2q 1\n\
         tc class add dev $DEV parent 1: classid 1:1 htb rate 800mbit\n",
    );
    let (code, out, err) = sluice(&["apply", "--dev", "slc-ca", "--netns", &ns, &big]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("warning  ") && err.contains("quantum of class 10001 is big"), "{err}");
}

/// A namespace of this test's own holding the veth pair slc-ca/slc-cb, deleted on drop; None
/// (the test skips, loudly) without root or iproute2.
struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn veth_netns(tag: &str, test: &str) -> Option<Ns> {
    if !is_root() || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("\n*** SKIPPING {test}: needs root and iproute2 ***\n");
        return None;
    }
    let ip = |args: &[&str]| Command::new("ip").args(args).status().unwrap().success();
    let ns = Ns(format!("slc-{tag}-{}", std::process::id()));
    assert!(ip(&["netns", "add", &ns.0]));
    assert!(ip(&["-n", &ns.0, "link", "add", "slc-ca", "type", "veth", "peer", "name", "slc-cb"]));
    Some(ns)
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
