#!/bin/sh
# Idle-path latency of the live shaper against the kernel bridge on the same lab (issue 17):
# the lab's UDP probe RTT (64-byte probes every 20 ms for SECS seconds, `sluice lab load --tcp 0`)
# client -> server, for
#   bridge        the kernel bridge (no qdisc)
#   sluice        `sluice shape --unlimited` (one FIFO), sleeping in poll between frames
#   sluice-htb    the same with one HTB class at 1 Gbit/s (idle: the queue is empty)
#   sluice-spin   `--unlimited --spin` (never sleeps)
# Usage (root): scripts/live-latency.sh [TAG] [SECS] [--offloads]   (SLUICE=path/to/sluice;
# EXTRA: more `sluice shape` flags, e.g. EXTRA="--io xdp")
set -eu
TAG=${1:-lat}; SECS=${2:-5}; OFF=${3:-}
SLUICE=${SLUICE:-target/release/sluice}
CLI=slc-$TAG-cli; SHP=slc-$TAG-shp
$SLUICE lab up --tag "$TAG" $OFF >/dev/null
trap '$SLUICE lab down --tag "$TAG" >/dev/null 2>&1 || true' EXIT
HTB=$(mktemp); printf 'tc qdisc add dev $DEV root handle 1: htb default 1\ntc class add dev $DEV parent 1: classid 1:1 htb rate 1gbit\n' > "$HTB"
probe() { printf '%-12s ' "$1"; $SLUICE lab load --tag "$TAG" --tcp 0 --secs "$SECS" 2>&1 | grep -o 'RTT p50.*'; }
probe bridge
$SLUICE lab path open --tag "$TAG" >/dev/null
for mode in sluice sluice-htb sluice-spin; do
    case $mode in
        sluice) args="--unlimited" ;;
        sluice-htb) args="--config $HTB" ;;
        sluice-spin) args="--unlimited --spin" ;;
    esac
    $SLUICE shape --netns "$SHP" --in slc-sc --out slc-ss $args ${EXTRA:-} --quiet --control "/tmp/sluice-lat-$TAG.sock" \
        --duration $((SECS + 5)) >/dev/null &
    pid=$!
    sleep 2
    probe "$mode"
    wait $pid
done
$SLUICE lab path bridge --tag "$TAG" >/dev/null
probe bridge-again
rm -f "$HTB"
