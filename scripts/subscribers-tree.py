#!/usr/bin/env python3
"""A LibreQoS-like tree as a tc script: one HTB root, SITES sites, N subscribers spread over them,
each an HTB class with its own leaf qdisc (LEAF: pfifo, tbf, fq_codel, cake...).

usage: subscribers-tree.py N [SITES] [LEAF] [--bump K] [--nested]
  --bump K: the first K subscribers get another rate (a change of K subscribers);
  --nested: each site is an HTB qdisc of its own (site class 1:S holds qdisc S:, its subscribers
            are S:x). Linux 6.1 walks every class of a qdisc for each class it creates
            (tc_ctl_tclass -> tc_bind_tclass -> htb_walk), so one flat qdisc of N classes costs
            O(N^2) in the kernel, and nesting divides that by the number of sites."""
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
n = int(args[0])
sites = int(args[1]) if len(args) > 1 else 20
leaf = args[2] if len(args) > 2 else "pfifo limit 100"  # "none": classes only
nested = "--nested" in sys.argv
bump = int(sys.argv[sys.argv.index("--bump") + 1]) if "--bump" in sys.argv else 0
assert n + 0x100 <= 0xFFFF, "minors are 16-bit in the kernel"
out = ["tc qdisc replace dev $DEV root handle 1: htb default 2 r2q 200",
       "tc class replace dev $DEV parent 1: classid 1:1 htb rate 10gbit ceil 10gbit",
       "tc class replace dev $DEV parent 1:1 classid 1:2 htb rate 100mbit ceil 10gbit"]
for s in range(sites):
    out.append(f"tc class replace dev $DEV parent 1:1 classid 1:{0x10 + s:x} htb rate {10000 // sites}mbit ceil 10gbit")
    if nested:
        out.append(f"tc qdisc replace dev $DEV parent 1:{0x10 + s:x} handle {0x10 + s:x}: htb r2q 200")
for i in range(n):
    site = 0x10 + i % sites
    minor = 0x100 + i
    rate = 25 if i < bump else 20
    parent, major = (f"{site:x}:", f"{site:x}") if nested else (f"1:{site:x}", "1")
    out.append(f"tc class replace dev $DEV parent {parent} classid {major}:{minor:x} htb rate {rate}mbit ceil {rate * 5}mbit")
    if leaf != "none":
        out.append(f"tc qdisc replace dev $DEV parent {major}:{minor:x} handle {minor:x}: {leaf}")
print("\n".join(out))
