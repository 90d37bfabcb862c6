#!/bin/bash
# Kernel HTB at high rates with TSO on the netns lab (issue 18 item 6): one bulk TCP upload
# through one HTB class (rate = ceil) with a pfifo leaf on the shaper's server port, one knob
# varied at a time, each case a fresh qdisc. Prints one line per run: goodput, error against
# the ideal goodput (rate x 1448/1514), the 1-minute load average, and the qdiscs' counters.
#
# Usage (root): scripts/kernel-htb-knobs.sh TAG CC RATE_MBIT CASE [RUNS] [SECS]
#   CC    cubic | bbr (set per socket by `sluice lab load --cc`)
#   CASE  unshaped        no qdisc (the path's ceiling)
#         ms=N            burst = cburst = rate x N ms, rounded up to KiB (apply's rule at N=4)
#         bytes=B         burst = cburst = B bytes
#         tsq=B           ms=4, sender's tcp_limit_output_bytes = B (per netns)
#         leaf=N          ms=4, pfifo limit N
#         gso=B           ms=4, sender's gso_max_size = B
# The lab must be up with offloads: `sluice lab up --tag TAG --offloads`. SLUICE=path/to/sluice.
set -eu
TAG=$1; CC=$2; R=$3; CASE=$4; RUNS=${5:-3}; SECS=${6:-5}
SLUICE=${SLUICE:-target/release/sluice}
SHP="ip netns exec slc-$TAG-shp"; CLI="ip netns exec slc-$TAG-cli"; DEV=slc-ss
burst_ms() { echo $(( (R * 125 * $1 + 1023) / 1024 * 1024 )); }
clear_q() { $SHP tc qdisc del dev $DEV root 2>/dev/null || true; }
shape() { # BURST LEAF
    clear_q
    $SHP tc qdisc add dev $DEV root handle 1: htb default 1
    $SHP tc class add dev $DEV parent 1: classid 1:1 htb rate "${R}mbit" ceil "${R}mbit" \
        burst "$1b" cburst "$1b" 2>/dev/null
    $SHP tc qdisc add dev $DEV parent 1:1 handle 10: pfifo limit "$2"
}
restore() {
    $CLI sysctl -q -w net.ipv4.tcp_limit_output_bytes=4194304
    $CLI ip link set dev slc-c gso_max_size 65536
    clear_q
}
trap restore EXIT
B=$(burst_ms 4); LEAF=1000
case $CASE in
    unshaped) ;;
    ms=*) B=$(burst_ms "${CASE#ms=}") ;;
    bytes=*) B=${CASE#bytes=} ;;
    tsq=*) $CLI sysctl -q -w net.ipv4.tcp_limit_output_bytes="${CASE#tsq=}" ;;
    leaf=*) LEAF=${CASE#leaf=} ;;
    gso=*) $CLI ip link set dev slc-c gso_max_size "${CASE#gso=}" ;;
    *) echo "unknown case $CASE" >&2; exit 2 ;;
esac
for i in $(seq "$RUNS"); do
    if [ "$CASE" = unshaped ]; then clear_q; else shape "$B" "$LEAF"; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    g=$(timeout $((SECS + 30)) "$SLUICE" lab load --tag "$TAG" --tcp 1 --cc "$CC" --secs "$SECS" 2>&1 |
        awk '/tcp-up/ {s += $2} END {printf "%.1f", s}')
    err=$(awk -v r="$R" -v g="$g" 'BEGIN {printf "%+.2f", (g / (r * 1448 / 1514) - 1) * 100}')
    q=$($SHP tc -s qdisc show dev $DEV | awk '/^qdisc/ {k = $2} /Sent/ {printf " %s: sent %s drop %s over %s", k, $2, $7, $9}')
    echo "$CASE cc=$CC rate=${R}M burst=${B}b run=$i load=$load goodput=${g}M err=${err}%$q"
done
