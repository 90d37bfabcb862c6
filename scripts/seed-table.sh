#!/usr/bin/env bash
# Regenerates the README's seed table from runs of the binary (`sluice scenarios --seed-table`
# runs every built-in scenario it quotes with its defaults). crates/sim/tests/seed_table.rs fails
# when the README and the simulator disagree.
# Usage: scripts/seed-table.sh   (SLUICE=path to use another binary; default target/release/sluice)
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-target/release/sluice}
table=$(mktemp)
trap 'rm -f "$table"' EXIT
"$SLUICE" scenarios --seed-table > "$table"
python3 - "$table" README.md <<'PY'
import sys
table = open(sys.argv[1]).read()
readme = open(sys.argv[2]).read()
begin, end = table.splitlines()[0], table.rstrip("\n").splitlines()[-1]
if begin not in readme:
    sys.exit("README.md has no generated block: add the lines\n%s\n%s\nwhere the table goes" % (begin, end))
i = readme.index(begin)
j = readme.index(end, i) + len(end)
if readme[j:j + 1] == "\n":
    j += 1
open(sys.argv[2], "w").write(readme[:i] + table + readme[j:])
PY
echo "README.md: seed table regenerated" >&2
