#!/bin/sh
# AF_XDP against AF_PACKET on the same lab, interleaved with the kernel bridge: R rounds of
# `sluice lab load --tcp FLOWS` through the bridge, then through `sluice shape --unlimited
# --io packet`, then `--io xdp`. Prints each round's total TCP goodput, the load average, the
# I/O each port used and the shaper's Gbit/s per busy core (bytes forwarded x 8 / its CPU time).
# Usage (root): scripts/live-io.sh [TAG] [ROUNDS] [FLOWS] [SECS]   (lab must be up)
set -eu
TAG=${1:-x17}; R=${2:-3}; FLOWS=${3:-4}; SECS=${4:-4}
SLUICE=${SLUICE:-target/release/sluice}
total() { $SLUICE lab load --tag "$TAG" --tcp "$FLOWS" --secs "$SECS" 2>&1 | awk '/^tcp-up/ {s += $2} END {printf "%.0f", s}'; }
out="/tmp/sluice-io-$TAG.txt"
i=0
while [ $i -lt "$R" ]; do
    $SLUICE lab path bridge --tag "$TAG" >/dev/null
    echo "round $i: bridge $(total) Mbit/s; load $(cut -d' ' -f1 /proc/loadavg)"
    $SLUICE lab path open --tag "$TAG" >/dev/null
    for io in packet xdp; do
        $SLUICE shape --netns "slc-$TAG-shp" --in slc-sc --out slc-ss --unlimited --workers 1 --io $io ${EXTRA:-} \
            --control "/tmp/sluice-io-$TAG.sock" --duration $((SECS + 5)) > "$out" 2>&1 &
        pid=$!
        sleep 1.5
        s=$(total)
        cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat")
        wait $pid
        used=$(grep -o 'slc-sc: AF_[A-Z]*[^(]*' "$out" | head -1)
        b=$(grep ' rx ' "$out" | head -1 | awk '{for (i = 1; i <= NF; i++) if ($i == "bytes;") print $(i - 1)}')
        echo "$io $s Mbit/s; load $(cut -d' ' -f1 /proc/loadavg); $used;" \
            "$(echo "$b $cpu $(getconf CLK_TCK)" | awk '{printf "%.2f Gbit/s per busy core", $1 * 8 / 1e9 / ($2 / $3)}');" \
            "ring full $(grep ' rx ' "$out" | head -1 | sed 's/.*ring full \([0-9]*\).*/\1/')"
    done
    i=$((i + 1))
done
$SLUICE lab path bridge --tag "$TAG" >/dev/null
