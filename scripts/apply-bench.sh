#!/bin/sh
# sluice apply against tc -batch on a 10 000-subscriber tree, in a namespace of its own (root).
# usage: scripts/apply-bench.sh [N] [SLUICE] [APPLY_BENCH] [CASES]
#   SLUICE: the CLI (target/release/sluice); APPLY_BENCH: the library's per-phase timer
#   (cargo build --release -p sluice-kernel --example apply_bench); CASES: which trees, default all
#   of "flat-none flat-pfifo nested20-pfifo nested100-pfifo nested20-pfifo-filters".
# Prints one line per measurement with the load average; "CPU" is the process's task-clock
# (perf stat): user and kernel time, which the other builders' load inflates far less than wall.
set -eu
N=${1:-10000}
S=${2:-target/release/sluice}
B=${3:-target/release/examples/apply_bench}
CASES=${4:-flat-none flat-pfifo nested20-pfifo nested100-pfifo nested20-pfifo-filters}
G=$(dirname "$0")/subscribers-tree.py
NS=slc-abench-$$
D=$(mktemp -d)
trap 'ip netns del $NS 2>/dev/null; rm -rf $D' EXIT
ip netns add $NS
ip -n $NS link add s0 type veth peer name s1
ip -n $NS link set s0 up; ip -n $NS link set s1 up
tcb() { sed 's/\$DEV/s0/g; s/^tc //' "$1" > "$1.b"; }
clear() { ip netns exec $NS tc qdisc del dev s0 root 2>/dev/null || true; }
load() { cut -d' ' -f1 /proc/loadavg; }
# The CPU time of a command (its output discarded).
cost() {
  perf stat -x, -e task-clock -o $D/ps "$@" > $D/out 2>/dev/null || true
  cpu=$(grep task-clock $D/ps | cut -d, -f1)
  echo "CPU $(echo "$cpu / 1000" | bc -l | cut -c1-6) s"
}
for c in $CASES; do
  case $c in
    flat-*) shape=; sites=20 ;;
    nested20-*) shape=--nested; sites=20 ;;
    nested100-*) shape=--nested; sites=100 ;;
  esac
  case $c in *-none*) leaf=none ;; *) leaf="pfifo limit 100" ;; esac
  case $c in *-filters) fl=--filters ;; *) fl= ;; esac
  f=$D/t.tc; fb=$D/tb.tc
  python3 $G $N $sites "$leaf" $shape $fl > $f
  python3 $G $N $sites "$leaf" $shape $fl --bump 100 > $fb
  tcb $f
  clear; l=$(load); t0=$(date +%s.%N)
  c1=$(cost ip netns exec $NS tc -batch $f.b); t1=$(date +%s.%N)
  echo "[$c] tc -batch from scratch: $(echo "$t1 - $t0" | bc) s wall, $c1 (load $l)"
  clear; l=$(load)
  echo "[$c] apply_bench (load $l):"; $B $NS s0 $f $fb 5 | sed 's/^/    /'
  if [ -z "$fl" ]; then
    clear; l=$(load); t0=$(date +%s.%N)
    out=$($S apply --dev s0 --netns $NS $f 2>/dev/null | grep 'request(s)'); t1=$(date +%s.%N)
    echo "[$c] sluice apply from scratch (CLI): $(echo "$t1 - $t0" | bc) s wall (load $l): $out"
    for g in $fb $f; do
      l=$(load)
      perf stat -e task-clock -o $D/ps $S apply --dev s0 --netns $NS $g > $D/out 2>/dev/null
      echo "[$c] sluice apply 100 changed (CLI, whole process: $(grep -o '[0-9.,]* msec task-clock' $D/ps) CPU, $(grep -o '[0-9.]* seconds time elapsed' $D/ps) wall, load $l): $(grep 'request(s)' $D/out)"
    done
  fi
  # tc: the same 100 changes as `class change` lines.
  grep 'rate 25mbit' $fb | sed 's/class replace/class change/' > $D/c.tc; tcb $D/c.tc
  l=$(load); t0=$(date +%s.%N); c1=$(cost ip netns exec $NS tc -batch $D/c.tc.b); t1=$(date +%s.%N)
  echo "[$c] tc -batch 100 class change: $(echo "($t1 - $t0) * 1000" | bc) ms wall, $c1 (load $l)"
done
clear
# The rate API: changes of one class through the CLI (a process each) and tc (a process each).
python3 $G 100 4 none > $D/s.tc; $S apply --dev s0 --netns $NS $D/s.tc > /dev/null
l=$(load); t0=$(date +%s.%N)
for i in $(seq 1 200); do $S apply --dev s0 --netns $NS --set 1:100 rate $((10 + i % 10))mbit; done
t1=$(date +%s.%N); echo "sluice apply --set x200 (a process each): $(echo "($t1 - $t0) / 200 * 1000" | bc -l | cut -c1-6) ms each (load $l)"
l=$(load); t0=$(date +%s.%N)
for i in $(seq 1 200); do ip netns exec $NS tc class change dev s0 parent 1:10 classid 1:100 htb rate $((10 + i % 10))mbit; done
t1=$(date +%s.%N); echo "tc class change x200 (a process each): $(echo "($t1 - $t0) / 200 * 1000" | bc -l | cut -c1-6) ms each (load $l)"
