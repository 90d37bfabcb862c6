#!/usr/bin/env python3
"""Writes a LibreQoS-shaped tc script with N subscriber classes (for load-time benchmarks).

One HTB root, a site class, N leaf classes with a pfifo each, and one u32 filter per subscriber
in a 256-bucket hash table keyed on the last byte of the destination (198.18.0.0/15 addresses).
Usage: scripts/gen-subscribers.py N > script.tc
"""
import sys

n = int(sys.argv[1])
print("tc qdisc add dev eth0 root handle 1: htb default 2")
print("tc class add dev eth0 parent 1: classid 1:1 htb rate 10gbit")
print("tc filter add dev eth0 parent 1: prio 1 protocol ip u32")
print("tc filter add dev eth0 parent 1: prio 1 handle 2: protocol ip u32 divisor 256")
for i in range(n):
    m = i + 3
    a, b = (i >> 8) & 0x1FF, i & 0xFF
    ip = f"198.{18 + (a >> 8)}.{a & 0xFF}.{b}"
    print(f"tc class add dev eth0 parent 1:1 classid 1:{m:x} htb rate 1mbit ceil 10mbit")
    print(f"tc qdisc add dev eth0 parent 1:{m:x} handle {m:x}: pfifo limit 100")
    print(f"tc filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 2:{b:x}: match ip dst {ip}/32 flowid 1:{m:x}")
print("tc filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 800:: match ip dst 198.18.0.0/15 hashkey mask 0x000000ff at 16 link 2:")
