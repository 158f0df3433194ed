#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compile cost and code size of the nested walk (issue 23, item 13):
#   bash benchmarks/paging_walk/compile_cost.sh [REPEATS] [OPT] [INCLUDE_DIR]
# (defaults 3, -O2, this tree's include/; pass another tree's include/ for a "before" column)
# For GCC and Clang, writes a translation unit with 0, 1 and 4 nested-walk call sites (each
# in its own function, over ept_walker and a 4-level guest), compiles each REPEATS times and
# prints a Markdown table: compile CPU seconds (user + sys of the compiler, the minimum over
# the repeats: the machine is shared, so wall time means little), peak memory (maximum
# resident set size from /usr/bin/time -v) and the .text bytes of the object file (the sum
# of every .text* section; the 0-site TU is the baseline of the header alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
opt=${2:--O2}
src=$(cd "${3:-include}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen() {  # gen N FILE
  {
    echo '#include <hvkit/paging/nested.hpp>'
    echo 'using namespace hvkit;'
    echo 'using nested = paging::nested_walker<paging::format::ia32e<4>>;'
    for ((i = 0; i < $1; ++i)); do
      echo "paging::nested_result site$i(const nested& n, paging::flat_memory& m, const paging::mmu_context& mmu,"
      echo "                            paging::walk_request r) {"
      echo "  r.linear = x86::gva{r.linear.value() + $i * 0x1000};  // distinct sites (no folding)"
      echo "  return n.walk(m, mmu, r);"
      echo "}"
    done
    echo 'int main() { return 0; }'
  } > "$2"
}
mkdir -p "$tmp/inc/hvkit"
for d in "$src"/*/; do ln -s "$d" "$tmp/inc/hvkit/$(basename "$d")"; done
[ -f build/gcc/hvkit-generated/hvkit/version.hpp ] && cp build/gcc/hvkit-generated/hvkit/version.hpp "$tmp/inc/hvkit/"
text_bytes() { size -A "$1" | awk '$1 ~ /^\.text/ { s += $2 } END { print s + 0 }'; }
printf '| compiler | call sites | compile CPU s (min of %s) | peak memory MB | .text bytes |\n' "$repeats"
printf '|---|---|---|---|---|\n'
for cxx in g++ clang++; do
  for n in 0 1 4; do
    gen "$n" "$tmp/tu$n.cpp"
    best=""; mem=0
    for ((k = 0; k < repeats; ++k)); do
      /usr/bin/time -v "$cxx" -std=c++20 "$opt" -I"$tmp/inc" -c "$tmp/tu$n.cpp" -o "$tmp/tu$n.o" 2> "$tmp/time"
      cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f", u + s }' "$tmp/time")
      kb=$(awk -F': ' '/Maximum resident/ { print $2 }' "$tmp/time")
      if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$cpu; fi
      [ "$kb" -gt "$mem" ] && mem=$kb
    done
    printf '| %s %s | %s | %s | %s | %s |\n' "$cxx" "$opt" "$n" "$best" "$((mem / 1024))" "$(text_bytes "$tmp/tu$n.o")"
  done
done
