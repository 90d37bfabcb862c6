#!/usr/bin/env python3
"""More RTM_NEWTFILTER requests for the filter registry's byte-for-byte test
(crates/kernel/tests/registry_netlink.rs: every registry filter kind needs at least two): the
cases of scripts/filters-netlink-capture.py did not cover matchall twice, u32 hash tables of
other sizes, flow's map operations, or fw with a mask and the police keyword. Commands are
written as Sluice prints them (`sluice apply --dry-run`).

Run as root. Writes crates/kernel/tests/fixtures/filters-more-netlink.txt.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")
base = __import__("filters-netlink-capture")

F = base.F
HTB = base.HTB
CASES = [
    (HTB, F + "parent 1: protocol all prio 1 handle 0x1 matchall classid 1:10"),
    (HTB, F + "parent 1: protocol all prio 2 handle 0x2 matchall action gact drop index 1"),
    (["tc qdisc add dev v0 clsact"],
     F + "ingress protocol all prio 3 handle 0x3 matchall skip_hw action mirred egress redirect dev v1 index 1"),
    (HTB, F + "parent 1: protocol ip prio 4 handle 3: u32 divisor 256"),
    (HTB, F + "parent 1: protocol all prio 5 handle 0x3 flow map keys dst and 0xff xor 0x10 rshift 2 addend 5 "
              "divisor 64 baseclass 1:10"),
    (HTB, F + "parent 1: protocol ip prio 6 handle 0x7/0xff00 fw classid 1:10 police rate 1000000bit burst 10240 "
              "conform-exceed drop index 3"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "filters-more-netlink.txt")


def main():
    cap.write_fixture(OUT, "RTM_NEWTFILTER requests", "filters-more-netlink-capture.py", CASES,
                      base.RTM_NEWTFILTER, setup_may_fail=True, extra=[f"# ifindex v1: {base.v1_ifindex()}"])


if __name__ == "__main__":
    main()
