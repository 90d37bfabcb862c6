#!/bin/sh
# sluice apply against tc -batch on a 10 000-subscriber tree, in a namespace of its own (root).
# usage: scripts/apply-bench.sh [N] [SLUICE]     prints one line per case with the load average.
set -eu
N=${1:-10000}
S=${2:-target/release/sluice}
G=$(dirname "$0")/subscribers-tree.py
NS=slc-abench-$$
D=$(mktemp -d)
trap 'ip netns del $NS 2>/dev/null; rm -rf $D' EXIT
ip netns add $NS
ip -n $NS link add s0 type veth peer name s1
ip -n $NS link set s0 up; ip -n $NS link set s1 up
tcb() { sed 's/\$DEV/s0/g; s/^tc //' "$1" > "$1.b"; }
clear() { ip netns exec $NS tc qdisc del dev s0 root 2>/dev/null || true; }
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
for shape in flat nested; do
  for leaf in none "pfifo limit 100"; do
    f=$D/t.tc; fb=$D/tb.tc
    [ $shape = nested ] && n=--nested || n=
    python3 $G $N 20 "$leaf" $n > $f
    python3 $G $N 20 "$leaf" $n --bump 100 > $fb
    tcb $f
    name="$shape, leaves: $leaf"
    clear; l=$(load); t0=$(now); ip netns exec $NS tc -batch $f.b 2>/dev/null; t1=$(now)
    echo "tc -batch from scratch   [$name] $(echo "$t1 - $t0" | bc) s (load $l)"
    clear; l=$(load)
    echo "sluice apply from scratch [$name] (load $l): $($S apply --dev s0 --netns $NS $f | grep 'request(s)')"
    l=$(load)
    echo "sluice apply 100 changed  [$name] (load $l): $($S apply --dev s0 --netns $NS $fb | grep 'request(s)')"
    # tc: the same 100 changes as `class change` lines.
    grep 'rate 25mbit' $fb | sed 's/class replace/class change/' > $D/c.tc; tcb $D/c.tc
    l=$(load); t0=$(now); ip netns exec $NS tc -batch $D/c.tc.b 2>/dev/null; t1=$(now)
    echo "tc -batch 100 class change [$name] $(echo "$t1 - $t0" | bc) s (load $l)"
  done
done
# The rate API: 1 000 changes of one class through the CLI (a process each) and tc (a process each).
python3 $G 100 4 none > $D/s.tc; $S apply --dev s0 --netns $NS $D/s.tc > /dev/null
l=$(load); t0=$(now)
for i in $(seq 1 200); do $S apply --dev s0 --netns $NS --set 1:100 rate $((10 + i % 10))mbit; done
t1=$(now); echo "sluice apply --set x200 (a process each): $(echo "($t1 - $t0) / 200 * 1000" | bc -l | cut -c1-6) ms each (load $l)"
l=$(load); t0=$(now)
for i in $(seq 1 200); do ip netns exec $NS tc class change dev s0 parent 1:10 classid 1:100 htb rate $((10 + i % 10))mbit; done
t1=$(now); echo "tc class change x200 (a process each): $(echo "($t1 - $t0) / 200 * 1000" | bc -l | cut -c1-6) ms each (load $l)"
