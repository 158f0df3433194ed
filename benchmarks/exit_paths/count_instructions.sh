#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per iteration of each exit-path benchmark, counted by callgrind (deterministic,
# unlike the timings of bench.sh):
#   bash benchmarks/exit_paths/count_instructions.sh [BUILD_DIR] [FILTER]   (default build/gcc, all)
# Runs bench_exit_paths under `valgrind --tool=callgrind` with HVKIT_BENCH_ITERATIONS=1000 and
# 11000 for each benchmark and prints (I(11000) - I(1000)) / 10000: the cost of one iteration
# (the function and the loop's own few instructions, in both the hvkit and the minimal column)
# without start-up and set-up.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gcc}
filter=${2:-.}
exe="$dir/benchmarks/exit_paths/bench_exit_paths"
[ -x "$exe" ] || { echo "count_instructions.sh: build $exe first (target bench_exit_paths)" >&2; exit 2; }
count() {
  HVKIT_BENCH_ITERATIONS=$2 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$exe" \
    --benchmark_filter="^$1(/iterations:[0-9]+)?\$" 2>&1 | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
printf '| benchmark | instructions per iteration |\n|---|---|\n'
for b in $("$exe" --benchmark_list_tests | grep -E "$filter"); do
  a=$(count "$b" 1000)
  c=$(count "$b" 11000)
  printf '| %s | %s |\n' "$b" "$(awk -v a="$a" -v c="$c" 'BEGIN { printf "%.1f", (c - a) / 10000 }')"
done
