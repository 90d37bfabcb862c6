#!/bin/sh
# Forwarding throughput of the live shaper (one unlimited FIFO) against the kernel bridge on the
# same lab, interleaved: R rounds of `sluice lab load --tcp FLOWS` through the bridge, then through
# `sluice shape --unlimited` (EXTRA: more `sluice shape` flags, e.g. --spin). Prints each round's
# total TCP goodput and the shaper's per-direction counters.
# Usage (root): scripts/live-forwarding.sh [TAG] [ROUNDS] [FLOWS] [SECS]   (lab must be up)
set -eu
TAG=${1:-m17}; R=${2:-3}; FLOWS=${3:-4}; SECS=${4:-4}
SLUICE=${SLUICE:-target/release/sluice}
total() { $SLUICE lab load --tag "$TAG" --tcp "$FLOWS" --secs "$SECS" 2>&1 | awk '/^tcp-up/ {s += $2} END {printf "%.0f", s}'; }
i=0
while [ $i -lt "$R" ]; do
    $SLUICE lab path bridge --tag "$TAG" >/dev/null
    b=$(total)
    $SLUICE lab path open --tag "$TAG" >/dev/null
    $SLUICE shape --netns "slc-$TAG-shp" --in slc-sc --out slc-ss --unlimited --quiet ${EXTRA:-} \
        --control "/tmp/sluice-fwd-$TAG.sock" --duration $((SECS + 5)) > "/tmp/sluice-fwd-$TAG.txt" &
    pid=$!
    sleep 1.5
    s=$(total)
    # The shaper's CPU time so far (user + system, clock ticks): Gbit/s per busy core.
    cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    wait $pid
    echo "round $i: bridge $b Mbit/s, sluice $s Mbit/s, ratio $(echo "$s $b" | awk '{printf "%.2f", $1 / $2}'); load $(cut -d' ' -f1 /proc/loadavg)"
    line=$(grep ' rx ' "/tmp/sluice-fwd-$TAG.txt" | head -1)
    echo "$line"
    echo "$line" | awk -v cpu="$cpu" -v hz="$(getconf CLK_TCK)" '{for (i = 1; i <= NF; i++) if ($i == "bytes;") b = $(i - 1)}
        END {printf "  shaper CPU %.2f s for %.2f GB: %.2f Gbit/s per busy core\n", cpu / hz, b / 1e9, b * 8 / 1e9 / (cpu / hz)}'
    i=$((i + 1))
done
$SLUICE lab path bridge --tag "$TAG" >/dev/null
