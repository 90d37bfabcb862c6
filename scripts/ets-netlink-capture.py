#!/usr/bin/env python3
"""Captures the requests iproute2's tc sends for ets commands (RTM_NEWQDISC, and RTM_NEWTCLASS for
`tc class change ... ets`), with the capture of scripts/netem-netlink-capture.py: each case in a
network namespace of its own with a veth pair (v0/v1), setup first (a kernel without sch_ets
refuses the qdisc a class change needs; the class request goes out all the same), then the command
under strace.

Run as root. Writes crates/kernel/tests/fixtures/ets-netlink.txt in the netem fixture's format
(`# setup:` lines, `# cmd:`, one line of hex).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

RTM_NEWQDISC, RTM_NEWTCLASS = 0x24, 0x28
ETS = ["tc qdisc add dev v0 root handle 1: ets bands 4 strict 1 quanta 1000 2000"]
CASES = [
    ([], "tc qdisc add dev v0 root handle 1: ets bands 2", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: ets strict 3", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: ets quanta 1000 900 800 700", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: ets bands 5 strict 3 quanta 1500 750", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: ets bands 8 priomap 7 6 5 4 3 2 1 0", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: ets strict 2 quanta 1000 2000 3000 "
         "priomap 0 0 1 0 1 2 0 1 2 3 0 1 2 3 4 0", RTM_NEWQDISC),
    (["tc qdisc add dev v0 root handle 1: htb default 1",
      "tc class add dev v0 parent 1: classid 1:1 htb rate 10mbit"],
     "tc qdisc add dev v0 parent 1:1 handle 10: ets bands 3 strict 1 quanta 3000", RTM_NEWQDISC),
    (ETS, "tc class change dev v0 classid 1:3 ets quantum 1500", RTM_NEWTCLASS),
    (ETS, "tc class change dev v0 classid 1:2 ets", RTM_NEWTCLASS),
    (ETS, "tc class change dev v0 parent 1: classid 1:4 ets quantum 70000", RTM_NEWTCLASS),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "ets-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "ets-netlink-capture.py", CASES, setup_may_fail=True)

if __name__ == "__main__":
    main()
