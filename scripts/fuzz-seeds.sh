#!/bin/sh
# Makes the seed corpora of the tc_grammar and statefile fuzz targets from the tc script corpus:
# one seed per corpus case (its tc commands, `tc ` removed) and one state file per case (the state
# `sluice run` leaves). Run from the repository root after `cargo build --release -p sluice-cli`.
set -e
out=fuzz/corpus
mkdir -p $out/tc_grammar $out/statefile
tmp=$(mktemp -d)
for f in crates/tc/tests/corpus/*.tc; do
  n=$(basename "$f" .tc)
  grep -v '^#' "$f" | sed -n 's/^tc //p' | grep -v -- '-b ' > $out/tc_grammar/$n || true
  { grep '^#% devices:' "$f" | sed 's/^#% devices: *//' | tr ' ' '\n' | sed -n 's,/.*,,;s/^\(..*\)$/ip link add dev \1 type dummy/p'
    grep -v '^#' "$f" | grep '^tc ' | grep -v -- '-b '; } > $tmp/$n.sh
  target/release/sluice run --state $out/statefile/$n.json $tmp/$n.sh > /dev/null 2>&1 || true
done
rm -rf $tmp
