#!/usr/bin/env python3
"""Records the real kernel's answers for the tc script corpus.

For each crates/tc/tests/corpus/NAME.tc (or the files given), builds a fresh network
namespace, creates the case's devices as single-queue veth pairs (up, IPv6 off, so no packet
moves and every counter stays 0), runs each command with /bin/sh inside it and writes
NAME.kernel.json: [{"cmd", "exit", "stdout", "stderr"}]. Needs root. Traffic: none.

Usage: sudo scripts/corpus-record.py [CASE.tc ...]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "crates", "config", "tests", "corpus")


def parse_case(path):
    """Returns (devices, files, [command text]) of a case file (same reading as corpus.rs).

    `#% devices: NAME[/TXQUEUES] ...`, `#% file: NAME` followed by `#| line`s (written to $FILES),
    commands one per line with backslash continuations; other `#` lines are comments."""
    devices, files, cmds, cur = [], {}, [], ""
    fname = None
    with open(path) as f:
        for raw in f.read().splitlines():
            if cur:
                line = cur + raw
                cur = ""
            else:
                line = raw
                s = line.strip()
                if s.startswith("#% devices:"):
                    devices += s.split(":", 1)[1].split()
                    continue
                if s.startswith("#% file:"):
                    fname = s.split(":", 1)[1].strip()
                    files[fname] = ""
                    continue
                if line.startswith("#|"):
                    files[fname] += line[3:] + "\n"
                    continue
                if not s or s.startswith("#"):
                    continue
            if line.endswith("\\"):
                cur = line[:-1] + " "
                continue
            cmds.append(line.strip())
    return devices, files, cmds


def sh(ns, cmd, env=None):
    return subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", cmd], capture_output=True, text=True,
                          timeout=30, env=env)


def record(path):
    devices, files, cmds = parse_case(path)
    ns = "sluice-corpus-%d" % os.getpid()
    tmp = tempfile.mkdtemp(prefix="sluice-corpus-")
    for name, text in files.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = dict(os.environ, FILES=tmp)
    norm = lambda t: t.replace(tmp, "$FILES")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        sh(ns, "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
        for d in devices:
            d, _, q = d.partition("/")
            q = q or "1"
            peer = (d + "-p")[:15]
            r = sh(ns, f"ip link add {d} numtxqueues {q} numrxqueues {q} type veth peer name {peer} "
                       f"numtxqueues {q} numrxqueues {q} && ip link set {peer} up && ip link set {d} up")
            if r.returncode:
                sys.exit(f"{path}: cannot create {d}: {r.stderr}")
        out = []
        for c in cmds:
            r = sh(ns, c, env)
            out.append({"cmd": c, "exit": r.returncode, "stdout": norm(r.stdout), "stderr": norm(r.stderr)})
    finally:
        subprocess.run(["ip", "netns", "del", ns])
        shutil.rmtree(tmp)
    with open(path[:-3] + ".kernel.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    bad = sum(1 for o in out if o["exit"])
    print(f"{os.path.basename(path)}: {len(out)} commands, {bad} non-zero exits")


def main():
    files = sys.argv[1:] or sorted(
        os.path.join(CORPUS, f) for f in os.listdir(CORPUS) if f.endswith(".tc"))
    version = subprocess.run(["tc", "-V"], capture_output=True, text=True).stdout.strip()
    print(f"{version}; kernel {os.uname().release}")
    for f in files:
        record(f)


if __name__ == "__main__":
    main()
