#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC requests iproute2's tc sends for fq, with the capture of
scripts/netem-netlink-capture.py (tc sends each request even where the kernel lacks sch_fq).
Run as root. Writes crates/kernel/tests/fixtures/fq-netlink.txt.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

HTB = ["tc qdisc add dev v0 root handle 1: htb default 10",
       "tc class add dev v0 parent 1: classid 1:10 htb rate 10mbit"]
CASES = [
    ([], "tc qdisc add dev v0 root fq"),
    ([], "tc qdisc add dev v0 root handle 1: fq limit 3000 flow_limit 300 buckets 2048 quantum 9000 "
         "initial_quantum 90000 maxrate 10mbit low_rate_threshold 1mbit refill_delay 100ms orphan_mask 255 "
         "ce_threshold 2ms timer_slack 100 horizon 1s horizon_cap"),
    ([], "tc qdisc add dev v0 root handle 2: fq nopacing defrate 1mbit horizon_drop"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: fq pacing buckets 300 timer_slack 1.5us maxrate 2.5mbit"),
    # `buckets 0` is not sent; times in other units; the last of a repeated word wins.
    ([], "tc qdisc add dev v0 root handle 3: fq buckets 0 refill_delay 0.5s horizon 2500ms limit 5 limit 7"),
    ([], "tc qdisc add dev v0 root handle 4: fq maxrate 0 low_rate_threshold 0 ce_threshold 0 orphan_mask 0x3ff"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "fq-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "fq-netlink-capture.py", CASES, setup_may_fail=True)


if __name__ == "__main__":
    main()
