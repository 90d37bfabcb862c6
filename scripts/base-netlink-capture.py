#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC requests iproute2's tc sends for the base kinds: pfifo, bfifo,
pfifo_head_drop, tbf (peakrate, overhead, mpu, linklayer, 64-bit rates), htb's qdisc options
(r2q, default, direct_qlen, debug, offload), mq, drr, ingress and clsact, with the capture of
scripts/netem-netlink-capture.py (tc sends each request even where the kernel refuses it). Run as
root. Writes crates/kernel/tests/fixtures/base-netlink.txt.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

HTB = ["tc qdisc add dev v0 root handle 1: htb default 10",
       "tc class add dev v0 parent 1: classid 1:10 htb rate 10mbit"]
TBF = ["tc qdisc add dev v0 root handle 1: tbf rate 1mbit burst 10kb limit 30kb"]
# mq needs several transmit queues.
MQ = ["ip link del dev v0", "ip link add dev v0 numtxqueues 4 type veth peer name v1"]
CASES = [
    ([], "tc qdisc add dev v0 root pfifo"),
    ([], "tc qdisc add dev v0 root handle 1: pfifo limit 100"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: pfifo limit 5"),
    ([], "tc qdisc add dev v0 root bfifo"),
    ([], "tc qdisc add dev v0 root handle 1: bfifo limit 10kb"),
    ([], "tc qdisc add dev v0 root handle 1: bfifo limit 30000"),
    ([], "tc qdisc add dev v0 root pfifo_head_drop"),
    ([], "tc qdisc add dev v0 root handle 1: pfifo_head_drop limit 50"),
    (TBF, "tc qdisc add dev v0 parent 1:1 handle 10: pfifo_head_drop limit 7"),
    ([], "tc qdisc add dev v0 root tbf rate 1mbit burst 10kb latency 50ms"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 10mbit burst 20kb limit 100kb"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 1mbit burst 10kb limit 30000 peakrate 2mbit mtu 1600"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 500kbit burst 4kb limit 20kb overhead 24 mpu 64 linklayer atm"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 2mbit burst 5kb latency 20ms mtu 9000"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 40gbit burst 1mb limit 4mb peakrate 50gbit mtu 65535"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 3mbit burst 7777 limit 50000 peakrate 10mbit mtu 2000 "
         "overhead 40 mpu 100 linklayer ethernet"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 100kbit burst 3000 latency 1s peakrate 200kbit mtu 1514 "
         "linklayer adsl"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 1mbit buffer 10kb latency 50ms peakrate 1.5mbit minburst 1540"),
    # Past 32 bits: the bucket wraps, the tables' slots become 0 (see sluice_model::tcmath).
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 8bit burst 100kb limit 200kb"),
    ([], "tc qdisc add dev v0 root handle 1: tbf rate 8bit burst 1kb limit 1kb mpu 4295"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 10: tbf rate 5mbit burst 10k latency 10ms"),
    ([], "tc qdisc add dev v0 root handle 1: htb"),
    ([], "tc qdisc add dev v0 root handle 1: htb default 10"),
    ([], "tc qdisc add dev v0 root handle 1: htb default 1a r2q 5 direct_qlen 50"),
    ([], "tc qdisc add dev v0 root handle 2: htb r2q 100 default 0x20 direct_qlen 0"),
    ([], "tc qdisc add dev v0 root handle 1: htb default 10 offload"),
    ([], "tc qdisc add dev v0 root handle 1: htb debug 0123 default 5"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 20: htb default 1 direct_qlen 1000"),
    ([], "tc qdisc add dev v0 root drr"),
    (HTB, "tc qdisc add dev v0 parent 1:10 handle 30: drr"),
    (MQ, "tc qdisc add dev v0 root mq"),
    (MQ, "tc qdisc add dev v0 root handle 1: mq"),
    ([], "tc qdisc add dev v0 ingress"),
    ([], "tc qdisc add dev v0 handle ffff: ingress"),
    ([], "tc qdisc add dev v0 clsact"),
    ([], "tc qdisc add dev v0 handle ffff: clsact"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "base-netlink.txt")


def main():
    cap.write_fixture(OUT, "requests", "base-netlink-capture.py", CASES, setup_may_fail=True)


if __name__ == "__main__":
    main()
