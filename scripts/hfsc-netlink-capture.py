#!/usr/bin/env python3
"""Captures the requests iproute2's tc sends for hfsc commands (RTM_NEWQDISC, and RTM_NEWTCLASS
for hfsc classes), with the capture of scripts/netem-netlink-capture.py: each case in a network
namespace of its own with a veth pair (v0/v1), setup first (refused by a kernel without sch_hfsc;
the class request goes out all the same), then the command under strace.

Run as root. Writes crates/kernel/tests/fixtures/hfsc-netlink.txt in the netem fixture's format
(`# setup:` lines, `# cmd:`, one line of hex).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

RTM_NEWQDISC, RTM_NEWTCLASS = 0x24, 0x28
HFSC = ["tc qdisc add dev v0 root handle 1: hfsc default 20"]
TOP = HFSC + ["tc class add dev v0 parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit"]
CASES = [
    ([], "tc qdisc add dev v0 root handle 1: hfsc", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: hfsc default 20", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 7: hfsc default 0xffff", RTM_NEWQDISC),
    (HFSC, "tc class add dev v0 parent 1: classid 1:1 hfsc ls m2 10mbit ul m2 10mbit", RTM_NEWTCLASS),
    (HFSC, "tc class add dev v0 parent 1: classid 1:1 hfsc sc rate 20000 ul rate 10000", RTM_NEWTCLASS),
    (HFSC, "tc class add dev v0 parent 1: classid 1:1 hfsc sc umax 1540 dmax 5ms rate 10000 ul rate 10000",
     RTM_NEWTCLASS),
    (TOP, "tc class add dev v0 parent 1:1 classid 1:10 hfsc rt umax 200 dmax 5ms rate 100kbit "
          "ls m2 100kbit", RTM_NEWTCLASS),
    (TOP, "tc class add dev v0 parent 1:1 classid 1:20 hfsc rt m1 2mbit d 10ms m2 1mbit "
          "ls m1 0 d 0 m2 6mbit", RTM_NEWTCLASS),
    (TOP, "tc class add dev v0 parent 1:1 classid 1:30 hfsc rt umax 1500 dmax 20ms rate 1mbit",
     RTM_NEWTCLASS),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "hfsc-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "hfsc-netlink-capture.py", CASES, setup_may_fail=True)

if __name__ == "__main__":
    main()
