#!/usr/bin/env bash
# Instructions per packet (callgrind, noise-free) of the `sluice bench` scale cases.
# Usage: scripts/callgrind-scale.sh [CASE...]   (default: the cases quoted in BENCHMARKS.md)
# Needs valgrind and a release build: cargo build --release -p sluice-cli
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/target/release/sluice"
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(htb-1000-1 htb-1000-10 htb-1000-100 htb-10000-10 htb-100000-10
  htb-1000000-1 htb-1000000-10 htb-1000000-100 htb-1000-10-throttled htb-1000000-10-throttled
  htb-100000-10-nested htb-1000000-10-nested ref-1000-10 ref-10000-10 full-path)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-28s %16s %10s %12s\n' case instructions packets instr/pkt
for c in "${cases[@]}"; do
  log=$(valgrind --tool=callgrind --toggle-collect='*callgrind_loop*' \
    --callgrind-out-file="$out/cg.out" "$bin" bench --callgrind-case "$c" 2>&1)
  ir=$(grep -oP 'Collected : \K[0-9]+' <<<"$log")
  pk=$(grep -oP ': \K[0-9]+(?= packets in callgrind_loop)' <<<"$log")
  printf '%-28s %16s %10s %12s\n' "$c" "$ir" "$pk" "$((ir / pk))"
done
