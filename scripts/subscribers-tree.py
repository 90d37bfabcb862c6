#!/usr/bin/env python3
"""A LibreQoS-like tree as a tc script: one HTB root, SITES sites, N subscribers spread over them,
each an HTB class with its own leaf qdisc (LEAF: pfifo, tbf, fq_codel, cake...).

usage: subscribers-tree.py N [SITES] [LEAF] [--bump K] [--nested] [--filters]
  --bump K: the first K subscribers get another rate (a change of K subscribers);
  --nested: each site is an HTB qdisc of its own (site class 1:S holds qdisc S:, its subscribers
            are S:x). Linux 6.1 walks every class of a qdisc for each class it creates
            (tc_ctl_tclass -> tc_bind_tclass -> htb_walk), so one flat qdisc of N classes costs
            O(N^2) in the kernel, and nesting divides that by the number of sites;
  --filters: u32 filters send each subscriber's address (198.18.0.0/15: site S has the /23 at
            S * 512, its k-th subscriber the address k in it) to its class, through u32 hash tables
            keyed on the address's last byte (divisor 256), as LibreQoS-like trees do: flat, one
            table at 1:; nested, one filter per site at 1: and one table per site qdisc."""
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
n = int(args[0])
sites = int(args[1]) if len(args) > 1 else 20
leaf = args[2] if len(args) > 2 else "pfifo limit 100"  # "none": classes only
nested = "--nested" in sys.argv
filters = "--filters" in sys.argv
bump = int(sys.argv[sys.argv.index("--bump") + 1]) if "--bump" in sys.argv else 0
assert n + 0x100 <= 0xFFFF, "minors are 16-bit in the kernel"
assert not filters or (sites <= 256 and n <= sites * 512), "addresses: 512 per site in 198.18.0.0/15"


def addr(site, k):
    a = site * 512 + k
    return f"198.{18 + a // 65536}.{a // 256 % 256}.{a % 256}"


def site_net(site):
    return f"{addr(site, 0)}/23"
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
if filters:
    f = "tc filter add dev $DEV"
    tables = [(s, f"{0x10 + s:x}:", f"{0x100 + s:x}") for s in range(sites)] if nested else [(None, "1:", "100")]
    for s, parent, ht in tables:
        out.append(f"{f} parent {parent} prio 1 handle {ht}: protocol ip u32 divisor 256")
        if nested:
            out.append(f"{f} parent 1: prio 1 protocol ip u32 match ip dst {site_net(s)} flowid 1:{0x10 + s:x}")
            nets = [site_net(s)]
        else:
            nets = [site_net(x) for x in range(sites)]
        for net in nets:
            out.append(f"{f} parent {parent} prio 1 protocol ip u32 ht 800:: match ip dst {net} "
                       f"hashkey mask 0x000000ff at 16 link {ht}:")
    for i in range(n):
        site, k = i % sites, i // sites
        parent, major = (f"{0x10 + site:x}:", f"{0x10 + site:x}") if nested else ("1:", "1")
        ht = f"{0x100 + site:x}" if nested else "100"
        a = addr(site, k)
        bucket = int(a.rsplit(".", 1)[1])
        out.append(f"{f} parent {parent} prio 1 protocol ip u32 ht {ht}:{bucket:x}: match ip dst {a}/32 "
                   f"flowid {major}:{0x100 + i:x}")
print("\n".join(out))
