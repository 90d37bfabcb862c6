#!/usr/bin/env bash
# The simulator against real Linux TCP, side by side (issue 13 item 3).
#
# Every case runs twice with the same rate, queue, flows and congestion control:
#   live: `sluice measure tcp` on the netns lab (the kernel's own TCP, TCP_CONGESTION per socket);
#         FIFO cases shape with kernel HTB + pfifo (--backend kernel), fq_codel cases with
#         Sluice's live shaper (--backend sluice; this kernel has no fq_codel);
#         netem cases (a real RTT: HTB + netem delay 10ms limit 1000) run on Sluice's live shaper
#         too (the kernel here has no netem);
#   sim:  `sluice simulate scenarios/lab-tcp.toml` with the lab's base delay and the same tc script.
# Prints a markdown table (per-flow goodput, probe p50/p99, sim against live) and the load average.
#
# Usage: scripts/sim-vs-live.sh [OUTDIR]   (root; builds nothing: uses target/release/sluice)
#   QUICK=1      a short run: two cases, 2 s warm-up + 4 s measured
#   SLUICE=path  the binary (default target/release/sluice)
#   TAG=name     the lab tag (default simlive)
#   TABLE_ONLY=1 only print the table again from OUTDIR's results
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-target/release/sluice}
OUT=${1:-results/sim-vs-live}
TAG=${TAG:-simlive}
WARMUP=${WARMUP:-3}
DURATION=${DURATION:-12}
mkdir -p "$OUT"
if [ "${TABLE_ONLY:-0}" != 1 ]; then
rm -f "$OUT/cases.txt.new" "$OUT/base.txt"
[ "$(id -u)" = 0 ] || { echo "sim-vs-live: needs root for the netns lab" >&2; exit 2; }
"$SLUICE" lab up --tag "$TAG" >&2
trap '"$SLUICE" lab down --tag "$TAG" >/dev/null 2>&1 || true' EXIT

# case name | rate | flows | cc | leaf (pfifo = HTB + pfifo 1000 on the kernel; fq_codel and netem =
# Sluice live)
if [ "${QUICK:-0}" = 1 ]; then
  WARMUP=2; DURATION=4
  CASES="fifo-1-cubic 20mbit 1 cubic pfifo
fqc-4-cubic 20mbit 4 cubic fq_codel"
else
  CASES=""
  for leaf in pfifo fq_codel; do
    for cc in cubic reno bbr; do
      for n in 1 4; do
        CASES+="${leaf}-${n}-${cc} 20mbit $n $cc $leaf"$'\n'
      done
    done
  done
  for cc in cubic bbr; do
    for n in 1 4; do
      CASES+="netem-${n}-${cc} 20mbit $n $cc netem"$'\n'
    done
  done
  for rate in 10mbit 50mbit 100mbit; do
    for cc in cubic bbr; do
      CASES+="sweep-${rate}-${cc} $rate 1 $cc pfifo"$'\n'
    done
  done
fi

# The lab's base RTT per backend: probes with no load. The simulated path takes half the kernel
# path's as each direction's delay; the live shaper's own forwarding delay (user space, which
# depends on the host's load) is measured and printed, not modelled.
declare -A BASE_US
for backend in kernel sluice; do
  "$SLUICE" measure tcp --tag "$TAG" --backend $backend --quiet --set flows=0 --set warmup=0.5 \
    --set duration=2 --out "$OUT/base-$backend" >/dev/null
  BASE_US[$backend]=$(python3 -c "import json;r=json.load(open('$OUT/base-$backend/results.json'));f=[f for f in r['cases'][0]['flows'] if f['name']=='ping'][0];print(max(1,round(f['latency_ms']['p50']*500)))")
  python3 -c "import json;r=json.load(open('$OUT/base-$backend/results.json'));l=[f for f in r['cases'][0]['flows'] if f['name']=='ping'][0]['latency_ms'];print('lab base RTT through $backend, unloaded: probe p50 %.2f ms, p99 %.2f ms' % (l['p50'], l['p99']))" | tee -a "$OUT/base.txt" >&2
done

while read -r name rate n cc leaf; do
  [ -n "$name" ] || continue
  backend=kernel; simleaf="pfifo limit 1000"
  if [ "$leaf" = fq_codel ]; then backend=sluice; simleaf=fq_codel; fi
  if [ "$leaf" = netem ]; then backend=sluice; simleaf="netem delay 10ms limit 1000"; fi
  echo "== $name ($backend)" >&2
  "$SLUICE" measure tcp --tag "$TAG" --backend $backend --quiet --set rate=$rate --set flows=$n \
    --set cc=$cc --set leaf=$leaf --set warmup=$WARMUP --set duration=$DURATION --out "$OUT/$name-live" >/dev/null
  "$SLUICE" simulate scenarios/lab-tcp.toml --quiet --set rate=$rate --set flows=$n --set cc=$cc \
    --set "leaf=$simleaf" --set delay=${BASE_US[kernel]}us --set warmup=${WARMUP}s \
    --set duration=$((WARMUP + DURATION))s --json "$OUT/$name-sim.json" 2>"$OUT/$name-sim.err"
  echo "$name $OUT/$name-live/results.json $OUT/$name-sim.json" >> "$OUT/cases.txt.new"
done <<< "$CASES"
mv "$OUT/cases.txt.new" "$OUT/cases.txt"
echo "load average at the end of the runs: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/base.txt"
fi
cat "$OUT/base.txt"

python3 - "$OUT/cases.txt" <<'PY' | tee "$OUT/table.md"
import json, sys
# The simulator counts frame bytes (1514 per segment); the kernel counts payload (1448 with
# timestamps): sim goodput is converted to payload.
PAYLOAD = 1448 / 1514
print("| case | backend | sim goodput/flow Mbit/s (min–max) | live | Δ mean (worst flow) | sim probe p50 ms | live | Δ | sim p99 ms | live | Δ | goals |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    name, live_p, sim_p = line.split()
    live = json.load(open(live_p))["cases"][0]
    sim = json.load(open(sim_p))["cases"][0]
    lg = [f["achieved_bps"] / 1e6 for f in live["flows"] if f["name"] != "ping"]
    sg = [sim["extra"][f["name"] + ".goodput_bps"] * PAYLOAD / 1e6 for f in sim["flows"] if f["name"] != "ping"]
    lp = [f for f in live["flows"] if f["name"] == "ping"][0]["latency_ms"]
    sp = [f for f in sim["flows"] if f["name"] == "ping"][0]["latency_ms"]
    d = lambda s, l: (s / l - 1) * 100 if l else float("nan")
    gm_s, gm_l = sum(sg) / len(sg), sum(lg) / len(lg)
    dg, d50, d99 = d(gm_s, gm_l), d(sp["p50"], lp["p50"]), d(sp["p99"], lp["p99"])
    # Per-flow goodput: the flows matched by rank (largest with largest: which flow wins a
    # FIFO is chance in both), each pair within 5%.
    worst = max(abs(d(x, y)) for x, y in zip(sorted(sg), sorted(lg)))
    ok = [worst <= 5, abs(d50) <= 20, abs(d99) <= 30]
    goals = " ".join(("✓" if o else "✗") + k for o, k in zip(ok, ["goodput", "p50", "p99"]))
    print(f"| {name} | {live['params']['backend']} | {gm_s:.2f} ({min(sg):.2f}–{max(sg):.2f}) | {gm_l:.2f} ({min(lg):.2f}–{max(lg):.2f}) | {dg:+.1f}% ({worst:.1f}%) "
          f"| {sp['p50']:.1f} | {lp['p50']:.1f} | {d50:+.0f}% | {sp['p99']:.1f} | {lp['p99']:.1f} | {d99:+.0f}% | {goals} |")
PY
