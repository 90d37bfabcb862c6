#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC request iproute2's tc sends for cake commands (this kernel lacks
sch_cake; tc sends the request before the kernel refuses it). Run as root; the namespace, veth
pair and strace parsing are netem-netlink-capture.py's.

Writes crates/kernel/tests/fixtures/cake-netlink.txt in the same format.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("netem_capture", os.path.join(HERE, "netem-netlink-capture.py"))
cap = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cap)

CASES = [
    ([], "tc qdisc add dev v0 root cake"),
    ([], "tc qdisc add dev v0 root handle 1: cake bandwidth 4600kbit diffserv4 dual-srchost nat"),
    ([], "tc qdisc add dev v0 root handle 1: cake unlimited besteffort flows nonat wash no-split-gso"),
    ([], "tc qdisc add dev v0 root handle 1: cake autorate-ingress ingress ack-filter-aggressive memlimit 32Mb"),
    ([], "tc qdisc add dev v0 root handle 1: cake bandwidth 20mbit ethernet ether-vlan lan fwmark 0xf0"),
    ([], "tc qdisc add dev v0 root handle 1: cake bandwidth 900kbit pppoe-vcmux conservative rtt 50ms precedence"),
    ([], "tc qdisc add dev v0 root handle 1: cake raw mpu 64 docsis diffserv8 triple-isolate egress ack-filter"),
    ([], "tc qdisc add dev v0 root handle 1: cake bandwidth 100mbit overhead -4 ptm satellite srchost no-ack-filter"),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "cake-netlink.txt")


def main():
    cap.write_fixture(OUT, "RTM_NEWQDISC requests", "cake-netlink-capture.py", CASES)

if __name__ == "__main__":
    main()
