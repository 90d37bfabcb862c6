#!/usr/bin/env python3
"""Captures the requests iproute2's tc sends for drr and red commands (RTM_NEWQDISC, and
RTM_NEWTCLASS for drr classes), with the capture of scripts/netem-netlink-capture.py: each case in
a network namespace of its own with a veth pair (v0/v1), setup first (the drr qdisc a class
needs is refused by a kernel without sch_drr; the class request goes out all the same), then the
command under strace. tc sends the request even where the kernel lacks sch_drr or sch_red.

Run as root. Writes crates/kernel/tests/fixtures/drr-red-netlink.txt in the netem fixture's format
(`# setup:` lines, `# cmd:`, one line of hex).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

RTM_NEWQDISC, RTM_NEWTCLASS = 0x24, 0x28
DRR = ["tc qdisc add dev v0 root handle 1: drr"]
CASES = [
    ([], "tc qdisc add dev v0 root handle 1: drr", RTM_NEWQDISC),
    (DRR, "tc class add dev v0 parent 1: classid 1:1 drr", RTM_NEWTCLASS),
    (DRR, "tc class add dev v0 parent 1: classid 1:2 drr quantum 3000", RTM_NEWTCLASS),
    ([], "tc qdisc add dev v0 root handle 1: red limit 1M avpkt 1500 min 100K max 300K", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 "
         "ecn adaptive bandwidth 10Mbit", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: red limit 1000000 min 30000 max 35000 avpkt 1500 burst 20 "
         "bandwidth 10.000000mbit probability 1", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: red ecn harddrop nodrop limit 64k avpkt 100 bandwidth 1gbit "
         "probability 0.5", RTM_NEWQDISC),
    ([], "tc qdisc add dev v0 root handle 1: red limit 200000 avpkt 64 bandwidth 30gbit", RTM_NEWQDISC),
    (["tc qdisc add dev v0 root handle 5: htb default 1",
      "tc class add dev v0 parent 5: classid 5:1 htb rate 10mbit"],
     "tc qdisc add dev v0 parent 5:1 handle 6: red limit 400000 avpkt 1000 adaptive", RTM_NEWQDISC),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "drr-red-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "drr-red-netlink-capture.py", CASES, setup_may_fail=True)

if __name__ == "__main__":
    main()
