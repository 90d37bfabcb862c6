#!/usr/bin/env python3
"""Writes judged expectations into a corpus case, for commands whose kernel answer cannot be
recorded here (the recording kernel lacks the qdisc, classifier or action module).

    scripts/corpus-judge.py CASE.tc N [N ...]

runs the case through `sluice tc`/`sluice ip` (target/release/sluice) and, for the 1-based
commands N, writes `#= exit`, `#> stdout` and `#! stderr` lines after the command, replacing any
judged block already there. It prints each block beside the kernel's recorded answer: a block
is only committed after its lines were checked against iproute2 v6.1.0's print functions and the
kernel's defaults for that kind (the case's `#% judged:` line says what was checked).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SLUICE = os.path.join(HERE, "..", "target", "release", "sluice")
sys.path.insert(0, HERE)
rec = __import__("corpus-record")


def main():
    path, picks = sys.argv[1], {int(n) for n in sys.argv[2:]}
    devices, files, cmds = rec.parse_case(path)
    tmp = tempfile.mkdtemp(prefix="sluice-judge-")
    for name, text in files.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    env = dict(os.environ, SLUICE_STATE=os.path.join(tmp, "state.json"), FILES=tmp)
    for d in devices:
        d, _, q = d.partition("/")
        subprocess.run([SLUICE, "ip", "link", "add", "dev", d, "numtxqueues", q or "1", "type", "veth", "peer",
                        "name", (d + "-p")[:15]], env=env, check=True)
    kernel = json.load(open(path[:-3] + ".kernel.json"))
    got = {}
    for i, c in enumerate(cmds, 1):
        argv = shlex.split(os.path.expandvars(c.replace("$FILES", tmp)))
        r = subprocess.run([SLUICE] + argv, env=env, capture_output=True, text=True)
        out = (r.returncode, r.stdout.replace(tmp, "$FILES"), r.stderr.replace(tmp, "$FILES"))
        got[i] = out
        k = kernel[i - 1]
        if i in picks and out == (k["exit"], k["stdout"], k["stderr"]):
            picks.discard(i)  # the kernel's answer stands
        if i in picks:
            print(f"### {i} {c}\n--- kernel exit {k['exit']}\n{k['stdout']}{k['stderr']}--- judged exit {out[0]}\n{out[1]}{out[2]}")
    # Rewrite the case: drop old judged lines of picked commands, insert the new ones.
    lines = open(path).read().split("\n")
    res, n, cur = [], 0, False
    for raw in lines:
        if not cur and raw.startswith(("#=", "#>", "#!")) and n in picks:
            continue
        res.append(raw)
        s = raw.strip()
        if cur or (s and not s.startswith("#")):
            cur = raw.endswith("\\")
            if not cur:
                n += 1
                if n in picks:
                    code, out, err = got[n]
                    res.append(f"#= exit {code}")
                    res += ["#> " + l for l in out.split("\n")[:-1]]
                    res += ["#! " + l for l in err.split("\n")[:-1]]
    open(path, "w").write("\n".join(res))


if __name__ == "__main__":
    main()
