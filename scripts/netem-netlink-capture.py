#!/usr/bin/env python3
"""Captures the RTM_NEWQDISC request iproute2's tc sends for netem commands.

Run as root. Each case runs in a network namespace of its own with a veth pair (v0/v1); the
case's setup commands run first, then the netem command under `strace -e write=<fd>`, and the
netlink request is taken from the hex dump. tc sends it even where the kernel lacks sch_netem
(the kernel then refuses the request; only the bytes matter here).

Writes crates/kernel/tests/fixtures/netem-netlink.txt: per case, `# setup:` lines, the `# cmd:`
line and one line of hex (the request as sent; the sequence number is whatever tc chose).
"""
import os
import re
import subprocess
import sys

CASES = [
    ([], "tc qdisc add dev v0 root netem delay 40ms 5ms loss 0.5%"),
    ([], "tc qdisc add dev v0 root handle 1: netem"),
    ([], "tc qdisc add dev v0 root handle 1: netem limit 2000 delay 100ms 10ms 25% distribution normal "
         "loss 1% 5% duplicate 1% reorder 10% 50% gap 5 corrupt 0.1% rate 10mbit 20 48 5"),
    ([], "tc qdisc add dev v0 root handle 1: netem delay 20ms loss state 1% 10% 20% 30% 0.5% ecn"),
    ([], "tc qdisc add dev v0 root handle 1: netem loss gemodel 1% 10% 70% 0.1% slot 1ms 5ms packets 10 bytes 15000"),
    ([], "tc qdisc add dev v0 root handle 1: netem delay 10ms 2ms distribution pareto "
         "slot distribution paretonormal 1ms 100us rate 50gbit"),
    ([], "tc qdisc add dev v0 root netem delay 10.0ms 2.0ms distribution normal loss 0.1% duplicate 0.5% "
         "corrupt 0.01% reorder 1%"),
    (["tc qdisc add dev v0 root handle 5: htb default 1",
      "tc class add dev v0 parent 5: classid 5:1 htb rate 10mbit"],
     "tc qdisc add dev v0 parent 5:1 handle 10: netem delay 10ms loss 1%"),
]

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "kernel", "tests", "fixtures", "netem-netlink.txt")


def sh(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def capture(setup, cmd, msg_type=0x24, setup_may_fail=False):
    """The one netlink request of `msg_type` (RTM_NEWQDISC by default) tc sends for `cmd`; with
    `setup_may_fail`, setup commands the kernel refuses (a kind it lacks) are passed over."""
    ns = f"sluice-netem-cap-{os.getpid()}"
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
        sh("ip", "-n", ns, "link", "set", "v0", "up")
        for s in setup:
            subprocess.run(["ip", "netns", "exec", ns, *s.split()], check=not setup_may_fail, capture_output=True)
        r = subprocess.run(["ip", "netns", "exec", ns, "strace", "-f", "-e", "trace=sendmsg", "-e", "write=3",
                            *cmd.split()], capture_output=True, text=True, timeout=20)
        msgs, cur = [], None
        for line in r.stderr.splitlines():
            if line.startswith("sendmsg("):
                cur = bytearray()
                msgs.append(cur)
            # " | 00010  00 00 00 00 03 00 00 00  00 00 00 00 ff ff ff ff  ................ |"
            m = re.match(r"^ \| [0-9a-f]{5}  (.{49})", line)
            if m and cur is not None:
                cur.extend(bytes.fromhex(m.group(1).replace(" ", "")))
        reqs = [m for m in msgs if len(m) >= 16 and m[4:6] == msg_type.to_bytes(2, "little")]
        if len(reqs) != 1:
            sys.exit(f"{cmd}: expected one request of type {msg_type:#x}, found {len(reqs)}\n{r.stderr}")
        return reqs[0].hex()
    finally:
        sh("ip", "netns", "del", ns)


def write_fixture(out, what, script, cases, msg_type=0x24, setup_may_fail=False, extra=()):
    """Captures each case, `(setup, cmd)` or `(setup, cmd, msg_type)`, into fixture file `out`:
    a header naming tc's version, then per case its `# setup:` lines, `# cmd:` and one line of hex."""
    tc_version = sh("tc", "-V").stdout.strip()
    lines = [f"# {what} sent by `{tc_version}`, captured by scripts/{script}", *extra, ""]
    for case in cases:
        setup, cmd = case[0], case[1]
        for s in setup:
            lines.append(f"# setup: {s}")
        lines.append(f"# cmd: {cmd}")
        lines.append(capture(setup, cmd, case[2] if len(case) > 2 else msg_type, setup_may_fail))
        lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {len(cases)} cases to {out}")


def main():
    write_fixture(OUT, "RTM_NEWQDISC requests", "netem-netlink-capture.py", CASES)


if __name__ == "__main__":
    main()
