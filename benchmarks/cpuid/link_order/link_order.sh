#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cpuid::policy::answer is an inline function: every translation unit that calls it emits a
# copy and the linker keeps the first. This links a set-up unit and an exit-loop unit in both
# orders and counts the instructions per answer under callgrind (1000 and 11000 answers, the
# difference / 10000), plus how many out-of-line copies of policy::find the program has:
#   bash benchmarks/cpuid/link_order/link_order.sh [CXX]   (default g++; -O2 as the gcc preset)
# The two counts must be equal (the same copy whatever the order).
set -euo pipefail
cd "$(dirname "$0")"
cxx=${1:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$(cd ../../../include && pwd)" "$tmp/hvkit"  # <hvkit/...> as users include it
for f in setup_tu exit_tu; do "$cxx" -std=c++20 -O2 -I"$tmp" -c $f.cpp -o "$tmp/$f.o"; done
"$cxx" "$tmp/setup_tu.o" "$tmp/exit_tu.o" -o "$tmp/setup_first"
"$cxx" "$tmp/exit_tu.o" "$tmp/setup_tu.o" -o "$tmp/exit_first"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" "$2" 2>&1 | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
printf '| link order | instructions per answer | out-of-line policy::find |\n|---|---|---|\n'
for e in setup_first exit_first; do
  a=$(count "$tmp/$e" 1000)
  b=$(count "$tmp/$e" 11000)
  printf '| %s | %s | %s |\n' "$e" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 10000 }')" \
    "$(nm -C "$tmp/$e" | grep -c 'policy::find' || true)"
done
