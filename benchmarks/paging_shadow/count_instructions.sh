#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per shadow #PF fix-up and per guest walk alone, counted by callgrind
# (deterministic: the same binary gives the same count on any load):
#   bash benchmarks/paging_shadow/count_instructions.sh [BUILD_DIR]   (default build/gcc)
# Runs shadow_count under `valgrind --tool=callgrind` with 1000 and 11000 iterations and
# prints (I(11000) - I(1000)) / 10000 for each, and their ratio (the row of ratios.txt in
# instructions). Needs valgrind and a built shadow_count (bench_paging_shadow builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gcc}
exe="$dir/benchmarks/paging_shadow/shadow_count"
[ -x "$exe" ] || { echo "count_instructions.sh: build $exe first (target shadow_count)" >&2; exit 2; }
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$exe" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
per() { awk -v a="$(count "$1" 1000)" -v b="$(count "$1" 11000)" 'BEGIN { printf "%.1f", (b - a) / 10000 }'; }
f=$(per fixup)
w=$(per walk_only)
printf '| path | instructions per iteration |\n|------|----------------------------|\n'
printf '| fixup | %s |\n| walk_only | %s |\n' "$f" "$w"
printf '| ratio | %s |\n' "$(awk -v f="$f" -v w="$w" 'BEGIN { printf "%.2f", f / w }')"
