#!/usr/bin/env python3
"""Captures the RTM_NEWTFILTER requests iproute2's tc sends for filter commands written as Sluice
prints them (`sluice apply --dry-run`, `sluice export`), with the capture of
scripts/netem-netlink-capture.py: each case in a network namespace of its own with a veth pair
(v0/v1), setup first, then the command under strace. tc sends the request even where the kernel
lacks the classifier (cls_flow, cls_fw, cls_matchall here) or an action.

Run as root. Writes crates/kernel/tests/fixtures/filters-netlink.txt in the netem fixture's format
(`# setup:` lines, `# cmd:`, one line of hex), after a `# ifindex v1: N` line (mirred's target).
"""
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

RTM_NEWTFILTER = 0x2C


class Shell(str):
    """A command whose words are split as a shell splits them (ematch trees are quoted)."""

    def split(self, *args):
        return shlex.split(self)


HTB = ["tc qdisc add dev v0 root handle 1: htb default 20",
       "tc class add dev v0 parent 1: classid 1:10 htb rate 10mbit",
       "tc class add dev v0 parent 1: classid 1:20 htb rate 10mbit"]
F = "tc filter add dev v0 "
KEY22 = F + "parent 1: protocol ip prio 1 handle 800::800 u32 ht 800:0 match u32 0x00000016 0x0000ffff at 20 classid 1:10"
TABLE2 = F + "parent 1: protocol ip prio 2 handle 2: u32 divisor 16"
CASES = [
    (HTB, KEY22),
    (HTB, TABLE2),
    (HTB + [KEY22, TABLE2],
     F + "parent 1: protocol ip prio 1 handle 800::801 u32 ht 800:0 match u32 0x00060000 0x00ff0000 at 8 "
         "link 2: offset at 0 mask 0f00 shift 6 eat hashkey mask 0x0000000f at 20"),
    (HTB + [TABLE2],
     F + "parent 1: protocol ip prio 2 handle 2:3:800 u32 ht 2:3 match u32 0xc6120003 0xffffffff at 16 classid 1:20"),
    (HTB, F + "parent 1: protocol ip prio 3 handle 800::800 u32 ht 800:0 match u32 0x00000050 0x0000ffff "
              "at nexthdr+0 offset plus 20 classid 1:10"),
    (HTB, F + "parent 1: protocol ip prio 4 handle 800::800 u32 ht 800:0 match u32 0xc6120000 0xfffe0000 at 12 "
              "indev v1 action gact drop index 1"),
    (HTB, F + "parent 1: protocol ip prio 5 handle 800::800 u32 ht 800:0 match u32 0x00100000 0x00ff0000 at 0 "
              "classid 1:10 police rate 1000000bit burst 10240 conform-exceed drop index 1"),
    (HTB, F + "parent 1: protocol ip prio 6 chain 3 handle 800::800 u32 ht 800:0 match u32 0x00000000 "
              "0x00000000 at 0 classid 1:20"),
    (HTB, F + "parent 1: protocol all prio 7 handle 0x1 flow map keys mark and 0xff baseclass 1:10"),
    (HTB, F + "parent 1: protocol all prio 8 handle 0x2 flow hash keys src,dst,proto-dst divisor 1024 "
              "perturb 10 baseclass 1:10"),
    (HTB, F + "parent 1: protocol ip prio 9 handle 0x5/0xff fw classid 1:10"),
    (HTB, F + "parent 1: protocol ip prio 10 handle 0x6 fw classid 1:20 action skbedit priority 1:10 pipe index 1"),
    (HTB, F + "parent 1: protocol all prio 11 handle 0x1 matchall skip_hw classid 1:10 action gact pass index 2"),
    (HTB, F + "parent 1: protocol ip prio 12 handle 0x1 basic classid 1:10"),
    (HTB, F + "parent 1: protocol ip prio 13 handle 0x2 basic police rate 2000000bit burst 20480 "
              "conform-exceed drop/pipe index 2"),
    (HTB, F + "parent 1:10 protocol ip prio 1 handle 0x3 basic classid 1:20"),
    (["tc qdisc add dev v0 clsact"],
     F + "ingress protocol all prio 1 handle 800::800 u32 ht 800:0 match u32 0x00000000 0x00000000 at 0 "
         "action mirred egress redirect dev v1 index 1"),
    (["tc qdisc add dev v0 clsact"], F + "egress protocol ip prio 2 handle 0x4 fw action gact drop index 1"),
    (HTB, Shell(F + "parent 1: protocol ip prio 1 handle 0x1 basic match "
                    "'cmp(u16 at 2 layer 2 mask 0xff00 trans gt 10)' classid 1:10")),
    (HTB, Shell(F + "parent 1: protocol ip prio 2 handle 0x2 basic match 'u32(u32 0xc6120000 0xffff0000 at 12) "
                    "and (cmp(u8 at 9 layer 1 eq 17) or not nbyte(\"ab\" at 0 layer 2))' classid 1:10")),
    (HTB, Shell(F + "parent 1: protocol ip prio 3 handle 0x3 basic match '(cmp(u8 at 9 layer 1 eq 6) and "
                    "(u32(u32 0x500000 0xffff0000 at 20) or u32(u32 0x1bb0000 0xffff0000 at 20))) or "
                    "cmp(u8 at 9 layer 1 eq 1)' classid 1:10 action gact drop index 1")),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "filters-netlink.txt")


def v1_ifindex():
    """v1's interface index in a fresh namespace set up as cap.capture sets it up."""
    ns = f"sluice-filter-ix-{os.getpid()}"
    cap.sh("ip", "netns", "add", ns)
    try:
        cap.sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        return int(cap.sh("ip", "-n", ns, "-o", "link", "show", "v1").stdout.split(":")[0])
    finally:
        cap.sh("ip", "netns", "del", ns)


def main():
    cap.write_fixture(OUT, "RTM_NEWTFILTER requests", "filters-netlink-capture.py", CASES,
                      RTM_NEWTFILTER, setup_may_fail=True, extra=[f"# ifindex v1: {v1_ifindex()}"])

if __name__ == "__main__":
    main()
