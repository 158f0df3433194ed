#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The loop-carried dependency chain of the walk benchmarks, from the generated code:
#   bash benchmarks/paging_walk/loop_chain.sh BENCH_EXE [WALK...] [-- --show]
# (BENCH_EXE: a bench_paging_walk of any build, GCC or Clang, -O2 or -O3; WALK: the rows
# of BM_walk/<WALK>, default all of them). For each walk: finds the loop head in its
# function (the `and` of the fed-back address with the run-time zero of walk_bench.cpp,
# followed by the add of the constant address), single-steps one steady-state iteration
# under gdb (loop_trace.py), and follows the data flow from that register at the head to
# the same register at the next head (loop_chain.py). Prints the instructions per
# iteration, the chain's length under two latency models ("intel": load 5 cycles,
# store-to-load forward 4.5, ALU 1; "zen": load 4, forward 1), the loads on it, and every
# store-to-load round trip on it with its instruction. A model of the measured code, not a
# measurement: ports, branch prediction and memory renaming are left out. Needs gdb,
# objdump, nm, c++filt and python3.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exe=$1
shift
walks=()
show=""
for a in "$@"; do
  if [ "$a" = "--show" ]; then show=--show; elif [ "$a" != "--" ]; then walks+=("$a"); fi
done
[ ${#walks[@]} -gt 0 ] || walks=(32-bit PAE 4-level 5-level EPT-4-level nested-4x4 nested-NPT-4x4)
declare -A fn=([32-bit]=walk_32bit [PAE]=walk_pae [4-level]=walk_4level [5-level]=walk_5level
               [EPT-4-level]=walk_ept4 [nested-4x4]=walk_nested [nested-NPT-4x4]=walk_nested_npt)
# The constant address each benchmark adds to (fed-back address & zero) (walk_bench.cpp).
declare -A va=([32-bit]=0x401123 [PAE]=0x40201123 [4-level]=0x8040201123 [5-level]=0x1008040201123
               [EPT-4-level]=0x8040201123 [nested-4x4]=0x8040201123 [nested-NPT-4x4]=0x8040201123)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The disassembly of the benchmark function (anonymous namespace)::<name>(benchmark::State&).
disassemble() {
  local sym
  sym=$(nm "$exe" | awk '{ print $3 }' | while read -r s; do
    case "$(echo "$s" | c++filt)" in "(anonymous namespace)::$1(benchmark::State&)") echo "$s"; break ;; esac
  done)
  objdump -d --no-show-raw-insn --disassemble="$sym" "$exe" | c++filt
}
for w in "${walks[@]}"; do
  head="" acc=""
  read -r head acc < <(disassemble "${fn[$w]}" | VA=${va[$w]} python3 -c '
import os, re, sys
va = "$" + os.environ["VA"]
ins = [(m.group(1), m.group(2).strip()) for m in (re.match(r"\s+([0-9a-f]+):\t(.*)", l) for l in sys.stdin) if m]
# First with the constant in sight (it may also sit in a register set before the loop).
for need_constant in (True, False):
    for i, (a, t) in enumerate(ins):
        m = re.match(r"and\s+(%r\w+|(0x[0-9a-f]+)?\(%rsp\)),(%r\w+)$", t)
        if not m:
            continue
        d = m.group(3)
        near = [t2 for _, t2 in ins[max(0, i - 3):i + 10]]
        if need_constant and not any((t2.startswith(("add", "movabs", "mov ")) and va + "," in t2) or
                                     (t2.startswith("lea") and os.environ["VA"] + "(" in t2) for t2 in near):
            continue
        for t2 in near:
            if (re.match(r"add\s+(\$0x[0-9a-f]+|%r\w+)," + d + "$", t2) or re.match(r"add\s+" + d + r",%r\w+$", t2)
                    or re.match(r"lea\s+(0x[0-9a-f]+)?\((%r\w+,)?" + d, t2)):
                print(a, d.lstrip("%"))
                sys.exit()
') || true
  if [ -z "$head" ]; then
    echo "BM_walk/$w: no loop head found"
    continue
  fi
  out=$tmp/$w.trace
  for _ in 1 2 3; do  # gdb under load occasionally loses the process: retry
    HEAD=$head OUT=$out SKIP=20 gdb -q -batch -x "$here/loop_trace.py" \
      --args "$exe" "--benchmark_filter=^BM_walk/$w\$" --benchmark_min_time=0.3 > /dev/null 2>&1 || true
    [ -s "$out" ] && break
  done
  echo "BM_walk/$w (loop head at $head, address in %$acc):"
  python3 "$here/loop_chain.py" "$out" "$acc" $show | sed 's/^/  /'
done
