#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC requests iproute2's tc sends for fq_codel, codel, sfq, prio and
pfifo_fast, with the capture of scripts/netem-netlink-capture.py (tc sends each request even where
the kernel lacks the kind). Run as root. Writes crates/kernel/tests/fixtures/aqm-netlink.txt.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

HTB = ["tc qdisc add dev v0 root handle 1: htb default 10",
       "tc class add dev v0 parent 1: classid 1:10 htb rate 10mbit"]
CASES = [
    ([], "tc qdisc add dev v0 root fq_codel"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: fq_codel limit 1001 target 5ms interval 100ms noecn quantum 300"),
    ([], "tc qdisc add dev v0 root handle 1: fq_codel limit 2000 flows 2048 quantum 1514 target 3ms "
         "interval 60ms memory_limit 16Mb ecn ce_threshold 2ms drop_batch 32"),
    ([], "tc qdisc add dev v0 root handle 2: fq_codel ce_threshold 4.5ms"),
    ([], "tc qdisc add dev v0 root handle 3: fq_codel limit 0 flows 0 quantum 0 target 0 interval 0 drop_batch 8"),
    ([], "tc qdisc add dev v0 root codel"),
    ([], "tc qdisc add dev v0 root handle 1: codel limit 100 target 4ms interval 30ms ecn ce_threshold 1ms"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 20: codel noecn target 10ms"),
    ([], "tc qdisc add dev v0 root sfq"),
    ([], "tc qdisc add dev v0 root handle 1: sfq perturb 10 quantum 1514 limit 64 divisor 512 flows 100 depth 64 headdrop"),
    ([], "tc qdisc add dev v0 root handle 1: sfq limit 3000 flows 512 divisor 16384 redflowlimit 100000 min 8000 "
         "max 60000 probability 0.20 ecn headdrop"),
    ([], "tc qdisc add dev v0 root handle 1: sfq redflowlimit 40000 min 5000 max 20000 avpkt 1000 burst 10 "
         "probability 0.05 harddrop"),
    ([], "tc qdisc add dev v0 root prio"),
    ([], "tc qdisc add dev v0 root handle 1: prio bands 4 priomap 3 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"),
    ([], "tc qdisc add dev v0 root handle 1: prio bands 2 priomap 1 1 1 1 1 1 0 0 1 1 1 1 1 1 1 1"),
    ([], "tc qdisc add dev v0 root pfifo_fast"),
    # Zeros are tc's "not given" for codel's limit, target and interval (ce_threshold 0 is sent).
    ([], "tc qdisc add dev v0 root handle 1: codel limit 0 target 0 interval 0 ce_threshold 0"),
    # A lone `perturb 0` sends a struct of zeros; RED with its defaults; probability 1 is max_P 0.
    ([], "tc qdisc add dev v0 root handle 1: sfq perturb 0"),
    ([], "tc qdisc add dev v0 root handle 1: sfq quantum 2kb depth 32 redflowlimit 20000"),
    ([], "tc qdisc add dev v0 root handle 1: sfq redflowlimit 60000 avpkt 500 burst 40 probability 1 ecn"),
    ([], "tc qdisc add dev v0 root handle 1: prio multiqueue"),
    ([], "tc qdisc add dev v0 root handle 1: prio bands 5 priomap 4 3 2 1 0 0 0 0 1 1 1 1 1 1 1 1 multiqueue"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 30: pfifo_fast"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "aqm-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "aqm-netlink-capture.py", CASES, setup_may_fail=True)


if __name__ == "__main__":
    main()
