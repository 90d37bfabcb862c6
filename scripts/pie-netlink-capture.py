#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC requests iproute2's tc sends for pie and fq_pie, with the capture of
scripts/netem-netlink-capture.py (tc sends each request even where the kernel lacks the kind).
Run as root. Writes crates/kernel/tests/fixtures/pie-netlink.txt.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

HTB = ["tc qdisc add dev v0 root handle 1: htb default 10",
       "tc class add dev v0 parent 1: classid 1:10 htb rate 10mbit"]
CASES = [
    ([], "tc qdisc add dev v0 root pie"),
    ([], "tc qdisc add dev v0 root handle 1: pie limit 500 target 20ms tupdate 30ms alpha 4 beta 30 ecn bytemode"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: pie noecn nobytemode dq_rate_estimator"),
    ([], "tc qdisc add dev v0 root handle 2: pie limit 0 target 0 tupdate 0 alpha 0 beta 0 no_dq_rate_estimator"),
    ([], "tc qdisc add dev v0 root handle 3: pie target 1.5ms alpha 32 beta 32"),
    ([], "tc qdisc add dev v0 root fq_pie"),
    ([], "tc qdisc add dev v0 root handle 1: fq_pie limit 2000 flows 2048 target 10ms tupdate 20ms alpha 3 beta 30 "
         "quantum 1514 memory_limit 16Mb ecn_prob 20 ecn bytemode dq_rate_estimator"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: fq_pie noecn nobytemode no_dq_rate_estimator quantum 300"),
    ([], "tc qdisc add dev v0 root handle 2: fq_pie limit 0 flows 0 quantum 0 memory_limit 0 ecn_prob 0 alpha 0"),
    ([], "tc qdisc add dev v0 root handle 3: fq_pie flows 65536 target 2.5ms memory_limit 1kb"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "pie-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "pie-netlink-capture.py", CASES, setup_may_fail=True)


if __name__ == "__main__":
    main()
