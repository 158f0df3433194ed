#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per walk, counted by callgrind (deterministic: the same binary gives the same
# count on any load, unlike the timings of bench.sh):
#   bash benchmarks/paging_walk/count_instructions.sh [BUILD_DIR]   (default build/gcc)
# Runs walk_count under `valgrind --tool=callgrind` with 1000 and 11000 walks of each kind and
# prints (I(11000) - I(1000)) / 10000: the steady-state cost of one walk without start-up and
# set-up. Needs valgrind and a built walk_count (the bench_paging_walk target builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gcc}
exe="$dir/benchmarks/paging_walk/walk_count"
[ -x "$exe" ] || { echo "count_instructions.sh: build $exe first (target walk_count)" >&2; exit 2; }
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$exe" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
printf '| walk | instructions per walk |\n|------|-----------------------|\n'
for walk in 4-level EPT-4-level nested-4x4 nested-NPT-4x4 32-bit PAE 5-level; do
  a=$(count "$walk" 1000)
  b=$(count "$walk" 11000)
  printf '| %s | %s |\n' "$walk" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 10000 }')"
done
