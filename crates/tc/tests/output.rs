//! tc's output options (`-j`, `-p`, `-o`, `-g`, `-n`, `-batch`, `-force`) against transcripts
//! recorded from the real tc (iproute2 6.1, Linux 6.18): `tests/recorded/output/`, whose
//! README.md says how they were made. Each script is replayed through `run_tc` on the
//! recording's devices and every recorded command must print what tc printed, byte for byte,
//! with the same exit status.

use sluice_tc::model::{DevKind, Device};
use sluice_tc::{run_tc, State};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded/output")
}

/// The recording's namespace: the veth pair `jva`/`jvb` with two transmit queues, the peer
/// `jvb` registered first (ifindex 2) as veth does.
fn devices() -> State {
    let mut s = State::default();
    for (n, p) in [("jvb", "jva"), ("jva", "jvb")] {
        let idx = s.next_ifindex;
        s.next_ifindex += 1;
        let mut d = Device::new(n, DevKind::Veth { peer: p.into() }, idx);
        d.num_tx_queues = 2;
        s.devices.push(d);
    }
    s
}

/// What tc printed for one recorded command.
#[derive(Debug, PartialEq)]
struct Answer {
    stdout: String,
    stderr: String,
    rc: u8,
}

/// `NAME.expected`: for each `$ ` line, stdout, optional `@@ stderr` block, `@@ rc=N`.
fn expected(name: &str) -> Vec<(String, Answer)> {
    let text = std::fs::read_to_string(dir().join(format!("{name}.expected"))).unwrap();
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(r) = rest.strip_prefix("$ ") {
        let (cmd, body) = r.split_once('\n').unwrap();
        let end = body.find("@@ rc=").unwrap();
        let (printed, tail) = body.split_at(end);
        let (rc, next) = tail["@@ rc=".len()..].split_once('\n').unwrap();
        let (stdout, stderr) = match printed.find("@@ stderr\n") {
            Some(k) => (&printed[..k], &printed[k + "@@ stderr\n".len()..]),
            None => (printed, ""),
        };
        let a = Answer { stdout: stdout.into(), stderr: stderr.into(), rc: rc.parse().unwrap() };
        out.push((cmd.to_string(), a));
        rest = next;
    }
    assert!(rest.is_empty(), "{name}.expected: unparsed tail {rest:?}");
    out
}

/// Runs one command line as the recorder did (`tc ARGS`, split on blanks), with batch files
/// named relative to the scripts' directory.
fn run(s: &mut State, line: &str) -> (Answer, Vec<(String, String)>) {
    let mut argv: Vec<String> = line.split_whitespace().skip(1).map(String::from).collect();
    let mut renamed = Vec::new();
    for k in 1..argv.len() {
        if matches!(argv[k - 1].as_str(), "-batch" | "-b") {
            let abs = dir().join(&argv[k]).display().to_string();
            renamed.push((argv[k].clone(), abs.clone()));
            argv[k] = abs;
        }
    }
    let o = run_tc(s, &argv);
    (Answer { stdout: o.stdout, stderr: o.stderr, rc: o.code }, renamed)
}

fn replay(name: &str) -> usize {
    let script = std::fs::read_to_string(dir().join(format!("{name}.script"))).unwrap();
    let mut want = expected(name).into_iter();
    let mut s = devices();
    let mut failures = Vec::new();
    let mut checked = 0;
    for line in script.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            let (recorded_cmd, mut a) = want.next().expect("a recorded answer per command");
            assert_eq!(recorded_cmd, cmd, "{name}: script and recording differ");
            let (got, renamed) = run(&mut s, cmd);
            for (rel, abs) in renamed {
                a.stderr = a.stderr.replace(&format!("{rel}:"), &format!("{abs}:"));
                a.stderr = a.stderr.replace(&format!("\"{rel}\""), &format!("\"{abs}\""));
            }
            checked += 1;
            if got != a {
                failures.push(format!(
                    "$ {cmd}\n--- tc printed (rc {}):\n{}{}\n--- sluice printed (rc {}):\n{}{}",
                    a.rc, a.stdout, a.stderr, got.rc, got.stdout, got.stderr
                ));
            }
        } else {
            let (got, _) = run(&mut s, line);
            assert_eq!(got.rc, 0, "{name}: set-up `{line}` failed: {}", got.stderr);
        }
    }
    assert!(want.next().is_none(), "{name}: recording has more commands than the script");
    assert!(
        failures.is_empty(),
        "{name}: {} of {checked} differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    checked
}

#[test]
fn qdisc_and_class_output_options() {
    assert!(replay("qdisc") > 20);
}

#[test]
fn filter_output_options() {
    assert!(replay("filter") > 5);
}

#[test]
fn global_options_and_batch() {
    assert!(replay("misc") > 5);
}

// Kinds this kernel lacks (its tc refuses them: no act_gact, act_police, act_mirred,
// act_skbedit, cls_matchall, cls_basic, sch_netem here): the expected JSON below is read from
// iproute2 6.1's printers (m_gact.c print_gact, m_police.c print_police, m_mirred.c
// print_mirred, m_skbedit.c print_skbedit, m_action.c tc_dump_action/print_action,
// f_matchall.c, f_basic.c, f_fw.c, q_netem.c netem_print_opt, q_prio.c, q_codel.c, q_cake.c).

fn tc(s: &mut State, line: &str) -> sluice_tc::Outcome {
    let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
    run_tc(s, &argv)
}

fn ok(s: &mut State, line: &str) {
    let o = tc(s, line);
    assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{line}");
}

#[test]
fn actions_in_json_as_iproute2_prints_them() {
    let mut s = devices();
    ok(&mut s, "qdisc add dev jva ingress");
    ok(&mut s, "filter add dev jva parent ffff: prio 1 matchall action gact drop");
    ok(&mut s, "filter add dev jva parent ffff: prio 2 u32 match u32 0 0 police rate 1mbit burst 10k drop");
    ok(&mut s, "filter add dev jva parent ffff: prio 3 basic action mirred egress redirect dev jvb");
    assert_eq!(
        tc(&mut s, "-j filter show dev jva parent ffff: prio 1").stdout,
        "[{\"protocol\":\"all\",\"kind\":\"matchall\",\"chain\":0},{\"protocol\":\"all\",\"kind\":\"matchall\",\
         \"chain\":0,\"options\":{\"handle\":1,\"not_in_hw\":true,\"actions\":[{\"order\":1,\"kind\":\"gact\",\
         \"control_action\":{\"type\":\"drop\"},\"prob\":{\"random_type\":\"none\",\"control_action\":\
         {\"type\":\"pass\"},\"val\":0},\"index\":1,\"ref\":1,\"bind\":1}]}}]\n"
    );
    // The `police` keyword: tc_print_police writes the policer into the options, no array.
    let u32_police = tc(&mut s, "-j filter show dev jva parent ffff: prio 2").stdout;
    assert!(
        u32_police.ends_with(
            "\"match\":{\"value\":\"0\",\"mask\":\"0\",\"offmask\":\"\",\"off\":0},\"kind\":\"police\",\
             \"index\":1,\"control_action\":{\"type\":\"drop\"},\"overhead\":0,\"ref\":1,\"bind\":1}}]\n"
        ),
        "{u32_police}"
    );
    assert_eq!(
        tc(&mut s, "-j actions list action mirred").stdout,
        "[{\"total acts\":1},{\"actions\":[{\"order\":0,\"kind\":\"mirred\",\"mirred_action\":\"redirect\",\
         \"direction\":\"egress\",\"to_dev\":\"jvb\",\"control_action\":{\"type\":\"stolen\"},\"index\":1,\
         \"ref\":1,\"bind\":1,\"not_in_hw\":true,\"used_hw_stats\":[\"disabled\"]}]}]\n"
    );
    ok(&mut s, "actions add action police rate 2mbit burst 20k conform-exceed drop/pipe index 7");
    // A conform verdict other than pass is a second `control_action` (TCA_POLICE_RESULT).
    assert_eq!(
        tc(&mut s, "-j -s actions get action police index 7").stdout,
        "[{\"total acts\":0},{\"actions\":[{\"order\":1,\"kind\":\"police\",\"index\":7,\"control_action\":\
         {\"type\":\"drop\"},\"control_action\":{\"type\":\"pipe\"},\"overhead\":0,\"ref\":1,\"bind\":0,\
         \"stats\":{\"bytes\":0,\"packets\":0,\"drops\":0,\"overlimits\":0,\"requeues\":0,\"backlog\":0,\
         \"qlen\":0},\"not_in_hw\":true}]}]\n"
    );
    assert_eq!(tc(&mut s, "-j actions list action skbedit").stdout, "[]\n");
    assert_eq!(tc(&mut s, "-j -p actions list action skbedit").stdout, "[ ]\n");
}

#[test]
fn fw_prints_text_inside_its_json_as_tc_does() {
    let mut s = devices();
    ok(&mut s, "qdisc add dev jva root handle 1: htb");
    ok(&mut s, "filter add dev jva parent 1: prio 4 handle 5 fw classid 1:1 action skbedit mark 5 pipe");
    assert_eq!(
        tc(&mut s, "-j filter show dev jva").stdout,
        "[{\"parent\":\"1:\",\"protocol\":\"all\",\"pref\":4,\"kind\":\"fw\",\"chain\":0},{\"parent\":\"1:\",\
         \"protocol\":\"all\",\"pref\":4,\"kind\":\"fw\",\"chain\":0,\"options\":{handle 0x5 classid 1:1 \n\
         \"actions\":[{\"order\":1,\"kind\":\"skbedit\",\"mark\":5,\"control_action\":{\"type\":\"pipe\"},\
         \"index\":1,\"ref\":1,\"bind\":1}]}}]\n"
    );
}

#[test]
fn qdisc_kinds_this_kernel_lacks_in_json() {
    let mut s = devices();
    ok(&mut s, "qdisc add dev jva root handle 1: prio");
    ok(&mut s, "qdisc add dev jva parent 1:2 handle 20: codel");
    ok(&mut s, "qdisc add dev jva parent 1:3 handle 30: netem delay 10ms 2ms loss 1% rate 1mbit");
    assert_eq!(
        tc(&mut s, "-j qdisc show dev jva handle 1:").stdout,
        "[{\"kind\":\"prio\",\"handle\":\"1:\",\"root\":true,\"refcnt\":3,\"options\":{\"bands\":3,\
         \"priomap\":[1,2,2,2,1,2,0,0,1,1,1,1,1,1,1,1],\"multiqueue\":false}}]\n"
    );
    // CoDel reports its times in µs after the kernel's 1024 ns units (5 ms reads back 4999).
    assert_eq!(
        tc(&mut s, "-j -s qdisc show dev jva handle 20:").stdout,
        "[{\"kind\":\"codel\",\"handle\":\"20:\",\"parent\":\"1:2\",\"options\":{\"limit\":1000,\
         \"target\":4999,\"interval\":99999},\"bytes\":0,\"packets\":0,\"drops\":0,\"overlimits\":0,\
         \"requeues\":0,\"backlog\":0,\"qlen\":0,\"count\":0,\"lastcount\":0,\"ldelay\":0,\"drop_next\":0,\
         \"maxpacket\":0,\"ecn_mark\":0,\"drop_overlimit\":0}]\n"
    );
    // netem: seconds and fractions, every correlation printed.
    assert_eq!(
        tc(&mut s, "-j qdisc show dev jva handle 30:").stdout,
        "[{\"kind\":\"netem\",\"handle\":\"30:\",\"parent\":\"1:3\",\"options\":{\"limit\":1000,\"delay\":\
         {\"delay\":0.01,\"jitter\":0.002,\"correlation\":0},\"loss-random\":{\"loss\":0.01,\"correlation\":0},\
         \"rate\":{\"rate\":125000,\"packetoverhead\":0,\"cellsize\":0,\"celloverhead\":0},\"ecn\":false,\
         \"gap\":0}}]\n"
    );
    ok(&mut s, "qdisc add dev jvb root cake bandwidth 10mbit besteffort nat");
    assert_eq!(
        tc(&mut s, "-j qdisc show dev jvb").stdout,
        "[{\"kind\":\"cake\",\"handle\":\"8001:\",\"root\":true,\"refcnt\":3,\"options\":{\"bandwidth\":1250000,\
         \"diffserv\":\"besteffort\",\"flowmode\":\"triple-isolate\",\"nat\":true,\"wash\":false,\"ingress\":false,\
         \"ack-filter\":\"disabled\",\"split_gso\":true,\"rtt\":100000,\"raw\":true,\"overhead\":0,\"fwmark\":\"0\"}}]\n"
    );
}

#[test]
fn namespaces_hold_their_own_devices() {
    let mut s = devices();
    let ip = |s: &mut State, line: &str| {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        sluice_tc::run_ip(s, &argv)
    };
    assert_eq!(ip(&mut s, "netns add red").code, 0);
    assert_eq!(
        ip(&mut s, "netns add red").stderr,
        "Cannot create namespace file \"/run/netns/red\": File exists\n"
    );
    assert_eq!(ip(&mut s, "-n red link add r0 type dummy").code, 0);
    assert_eq!(ip(&mut s, "netns exec red tc qdisc add dev r0 root handle 1: htb").code, 0);
    ok(&mut s, "-n red class add dev r0 parent 1: classid 1:1 htb rate 1mbit");
    // The root namespace has no r0; red has no jva.
    assert_eq!(tc(&mut s, "qdisc show dev r0").stderr, "Cannot find device \"r0\"\n");
    assert_eq!(tc(&mut s, "-netns red qdisc show dev jva").stderr, "Cannot find device \"jva\"\n");
    assert_eq!(
        tc(&mut s, "-n red -j qdisc show").stdout,
        "[{\"kind\":\"htb\",\"handle\":\"1:\",\"dev\":\"r0\",\"root\":true,\"refcnt\":2,\"options\":{\"r2q\":10,\
         \"default\":\"0\",\"direct_packets_stat\":0,\"direct_qlen\":1000}}]\n"
    );
    assert_eq!(ip(&mut s, "netns list").stdout, "red\n");
    assert_eq!(ip(&mut s, "netns del red").code, 0);
    assert_eq!(
        tc(&mut s, "-n red qdisc show").stderr,
        "Cannot open network namespace \"red\": No such file or directory\n"
    );
}
