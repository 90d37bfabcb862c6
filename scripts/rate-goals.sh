#!/bin/bash
# The 1/5/10 Gbit/s rate goals of issues 17 and 18, interleaved on one lab with offloads on:
# per round the live shaper (1 and 2 workers, CUBIC; 1 worker, BBR) and kernel HTB as `sluice
# apply` programs it (CUBIC, BBR), each a `sluice measure rate-sweep` of one TCP flow. Prints each
# run's error against target x 1448/1514 and the load average. Results in /tmp/rate-goals/.
# Usage (root): scripts/rate-goals.sh [ROUNDS] [TAG]
set -eu
R=${1:-3}; TAG=${2:-rg}
S=${SLUICE:-target/release/sluice}
OUT=/tmp/rate-goals
mkdir -p "$OUT"
$S lab up --tag "$TAG" --offloads >/dev/null
trap '$S lab down --tag "$TAG" >/dev/null' EXIT
for round in $(seq 1 "$R"); do
    for cfg in "sluice workers=1 cubic" "sluice workers=2 cubic" "kernel workers=1 cubic" \
        "kernel workers=1 bbr" "sluice workers=1 bbr"; do
        set -- $cfg
        out="$OUT/$round-$1-$2-$3"
        load=$(cut -d' ' -f1 /proc/loadavg)
        $S measure rate-sweep --tag "$TAG" --backend "$1" --quiet --out "$out" \
            --set targets=1gbit,5gbit,10gbit --set duration=4 --set warmup=2 \
            --set kernel_burst=sluice --set cc="$3" --set "$2" >/dev/null 2>"$out.err"
        python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], " ".join("%s %+.3f%%" % (c["name"], c["extra"]["error_pct"]) for c in r["cases"]), "load", sys.argv[3])' \
            "$out/results.json" "round $round $1 $2 $3:" "$load"
    done
done
