#!/bin/sh
# Two subscribers (198.18.0.1 and 198.18.0.3, which the fanout hash puts on different workers of
# two) under one HTB parent of RATE, each with a bulk TCP upload, through `sluice shape --workers
# W`: prints each subscriber's Mbit/s at the server, the shaper's CPU time and its counters.
# A second address is added to the lab client. CEIL1: the first subscriber's ceil (default RATE).
# RATE=unlimited: forwarding through one FIFO (`--unlimited`) instead, from every address in
# ADDRS (default: the two subscribers; 198.18.0.1/.5 hash to worker 0 of 2, .3/.7 to worker 1).
# LEAF: the subscribers' rate (default 10mbit; below 1 Gbit/s super-packets are cut into segments);
# LEAF1: the first subscriber's (default LEAF).
# Usage (root, lab up): scripts/live-shards.sh [TAG] [WORKERS] [RATE] [SECS] [CEIL1]
set -eu
TAG=${1:-s17}; W=${2:-2}; RATE=${3:-400mbit}; SECS=${4:-5}; CEIL1=${5:-$RATE}
SLUICE=${SLUICE:-target/release/sluice}
LEAF=${LEAF:-10mbit}
LEAF1=${LEAF1:-$LEAF}
PY="python3 $(dirname "$0")/shard_flows.py"
ADDRS=${ADDRS:-198.18.0.1 198.18.0.3}
for a in $ADDRS; do
    [ "$a" = 198.18.0.1 ] || ip -n "slc-$TAG-cli" addr replace "$a/24" dev slc-c
done
cfg=/tmp/sluice-shards-$TAG.tc
cat > "$cfg" <<TC
tc qdisc add dev \$DEV root handle 1: htb default 30
tc class add dev \$DEV parent 1: classid 1:1 htb rate $RATE
tc class add dev \$DEV parent 1:1 classid 1:10 htb rate $LEAF1 ceil $CEIL1
tc class add dev \$DEV parent 1:1 classid 1:20 htb rate $LEAF ceil $RATE
tc class add dev \$DEV parent 1:1 classid 1:30 htb rate $LEAF ceil $RATE
tc filter add dev \$DEV parent 1: protocol ip prio 1 u32 match ip src 198.18.0.1/32 flowid 1:10
tc filter add dev \$DEV parent 1: protocol ip prio 1 u32 match ip src 198.18.0.3/32 flowid 1:20
TC
$SLUICE lab path open --tag "$TAG" >/dev/null
if [ "$RATE" = unlimited ]; then what=--unlimited; else what="--config $cfg"; fi
$SLUICE shape --netns "slc-$TAG-shp" --in slc-sc --out slc-ss $what --workers "$W" --quiet \
    --control "/tmp/sluice-shards-$TAG.sock" --duration $((SECS + 5)) > "/tmp/sluice-shards-$TAG.txt" 2>&1 &
pid=$!
sleep 1.2
ip netns exec "slc-$TAG-srv" $PY recv 5201 1.5 "$SECS" > "/tmp/sluice-shards-$TAG.json" &
rpid=$!
sleep 0.3
for a in $ADDRS; do
    ip netns exec "slc-$TAG-cli" $PY send "$a" 198.18.0.2 5201 $((SECS + 2)) &
done
wait $rpid
cpu=$(awk '{print $14 + $15}' "/proc/$pid/stat")
wait $pid || true
echo "workers $W, parent $RATE, leaves $LEAF1 $LEAF, ceil1 $CEIL1: $(cat /tmp/sluice-shards-$TAG.json); shaper CPU $(echo "$cpu $(getconf CLK_TCK)" | awk '{printf "%.2f", $1 / $2}') s; load $(cut -d' ' -f1 /proc/loadavg)"
grep -E 'workers|Sent| rx ' "/tmp/sluice-shards-$TAG.txt" | head -4
# Gbit/s per busy core: bytes sent in -> out over the shaper's CPU time.
grep ' rx ' "/tmp/sluice-shards-$TAG.txt" | head -1 | awk -v cpu="$cpu" -v hz="$(getconf CLK_TCK)" \
    '{for (i = 1; i <= NF; i++) if ($i == "bytes;") b = $(i - 1)} END {printf "  %.2f GB in %.2f CPU s: %.2f Gbit/s per busy core\n", b / 1e9, cpu / hz, b * 8 / 1e9 / (cpu / hz)}'
$SLUICE lab path bridge --tag "$TAG" >/dev/null
