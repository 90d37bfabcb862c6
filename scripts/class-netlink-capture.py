#!/usr/bin/env python3
"""Captures the RTM_NEWTCLASS requests iproute2's tc sends for HTB classes (rates and ceils past
4 Gbit so that TCA_HTB_RATE64/CEIL64 appear; burst, cburst, prio, quantum, mtu, mpu, overhead),
and for DRR and ETS classes beyond the ones of drr-red-netlink.txt and ets-netlink.txt, with the
capture of scripts/netem-netlink-capture.py: each case in a network namespace of its own with a
veth pair (v0/v1), setup first (a kernel without the kind refuses it; tc sends the class request
all the same), then the command under strace.

Run as root. Writes crates/kernel/tests/fixtures/class-netlink.txt in the netem fixture's format.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
cap = __import__("netem-netlink-capture")

RTM_NEWTCLASS = 0x28
HTB = ["tc qdisc add dev v0 root handle 1: htb default 10"]
HTB1 = HTB + ["tc class add dev v0 parent 1: classid 1:1 htb rate 100mbit"]
DRR = ["tc qdisc add dev v0 root handle 1: drr"]
ETS = ["tc qdisc add dev v0 root handle 1: ets bands 4 strict 1 quanta 1000 2000 3000"]
CASES = [
    (HTB, "tc class add dev v0 parent 1: classid 1:1 htb rate 10mbit", RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:1 htb rate 100mbit ceil 200mbit burst 15k cburst 30k",
     RTM_NEWTCLASS),
    (HTB1, "tc class add dev v0 parent 1:1 classid 1:10 htb rate 1mbit ceil 100mbit prio 3 quantum 1514",
     RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:1 htb rate 40gbit ceil 50gbit", RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:1 htb rate 1gbit ceil 10gbit burst 100k", RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:2 htb rate 5gbit", RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:3 htb rate 2mbit ceil 3mbit mtu 9000 mpu 64 overhead 24",
     RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:4 htb rate 500kbit prio 7", RTM_NEWTCLASS),
    (HTB, "tc class add dev v0 parent 1: classid 1:5 htb rate 3mbit ceil 6gbit linklayer atm overhead 10",
     RTM_NEWTCLASS),
    (DRR, "tc class add dev v0 parent 1: classid 1:7 drr quantum 1514", RTM_NEWTCLASS),
    (ETS, "tc class change dev v0 classid 1:2 ets quantum 1500", RTM_NEWTCLASS),
]

OUT = os.path.join(HERE, "..", "crates", "kernel", "tests", "fixtures", "class-netlink.txt")


def main():
    cap.write_fixture(OUT, "RTM_NEWTCLASS requests", "class-netlink-capture.py", CASES, setup_may_fail=True)


if __name__ == "__main__":
    main()
