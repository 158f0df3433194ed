#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instructions per emulated instruction, counted by callgrind (deterministic: the same binary
# gives the same count on any load):
#   bash benchmarks/emulate/count_instructions.sh [BUILD_DIR]   (default build/gcc)
# Runs emulate_count under `valgrind --tool=callgrind` with 1000 and 11000 runs of each kind
# and prints (I(11000) - I(1000)) / 10000: the steady-state cost of one fetch + decode +
# emulate without start-up and set-up. Needs valgrind and a built emulate_count.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/gcc}
exe="$dir/benchmarks/emulate/emulate_count"
[ -x "$exe" ] || { echo "count_instructions.sh: build $exe first (target emulate_count)" >&2; exit 2; }
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$exe" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
printf '| instruction | instructions per emulation |\n|------|-----------------------|\n'
for kind in mmio_mov ram_lock_add out_dx rep_movsb mov_cr3 lgdt; do
  a=$(count "$kind" 1000)
  b=$(count "$kind" 11000)
  printf '| %s | %s |\n' "$kind" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 10000 }')"
done
