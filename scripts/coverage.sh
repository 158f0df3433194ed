#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source-based coverage of include/ by the unit tests (clang -fprofile-instr-generate
# -fcoverage-mapping; llvm-profdata and llvm-cov from Debian's llvm-14). The instrumented build
# is the asan preset (Clang + ASan + UBSan + coverage, one build for both jobs): this script
# builds build/asan, runs ctest --preset asan without the system, freestanding and consumer
# labels (each test writes build/asan/profiles/*.profraw, see CMakePresets.json), and prints a
# per-file table for include/ and two totals: all of include/, and include/ without the
# excluded headers below, which is measured against the targets below
# (HVKIT_COVERAGE_GATE=1: exit non-zero when lower). See docs/testing.md.
#   HVKIT_COVERAGE_LABELS='...'  ctest -L regex instead of the default (e.g. 'vmx|svm')
#   HVKIT_COVERAGE_GATE=1        fail when the total is below the targets (off by default
#                                until include/ reaches them)
#   HVKIT_COVERAGE_REPORT_ONLY=1 no build or test run: the report of the last run's profiles
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${HVKIT_JOBS:-$(nproc)}
dir=build/asan
min_lines=97
min_branches=93
# The headers left out of the gated total (reported in the table, not held to the targets),
# each with the reason the unit tests cannot reach it (docs/testing.md keeps the same list):
#   vmx/hardware.hpp              executes VMXON/VMREAD/VMWRITE/VMLAUNCH...: only on a
#                                 processor in VMX operation (tests/system, in Bochs)
#   x86/contract.hpp              the contract-violation path: it ends the process (trap), so
#   x86/hosted/contract_print.hpp the death tests that take it (tests/x86/contract*_test.cpp)
#                                 run it in a child that never writes its profile
# (Paths relative to include/; llvm-cov sees them through the build tree's hvkit/ link.)
excluded=(vmx/hardware.hpp x86/contract.hpp x86/hosted/contract_print.hpp)
excluded_re="/hvkit/($(IFS='|'; echo "${excluded[*]}" | sed 's/\./\\./g'))\$"

pick() { for t in "$@"; do command -v "$t" >/dev/null && { echo "$t"; return; }; done; echo "coverage: none of $* found (apt-get install llvm-14)" >&2; exit 1; }
profdata=$(pick llvm-profdata-14 llvm-profdata)
cov=$(pick llvm-cov-14 llvm-cov)

tests_ok=1
if [ "${HVKIT_COVERAGE_REPORT_ONLY:-0}" != 1 ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  rm -rf "$dir/profiles"
  mkdir -p "$dir/profiles"
  labels=${HVKIT_COVERAGE_LABELS:-}
  sel=(-LE 'system|freestanding|consumer')
  [ -n "$labels" ] && sel=(-L "$labels")
  # A failing test still leaves its profile: report, then fail.
  ctest --preset asan -j "$jobs" "${sel[@]}" || tests_ok=0
fi
"$profdata" merge -sparse -o "$dir/coverage.profdata" "$dir"/profiles/*.profraw

# Every executable of the build that carries a coverage map (the test binaries).
objects=()
while IFS= read -r exe; do
  "$cov" report "$exe" -instr-profile="$dir/coverage.profdata" >/dev/null 2>&1 || continue
  [ ${#objects[@]} -eq 0 ] && objects+=("$exe") || objects+=(-object "$exe")
done < <(find "$dir" -type f -perm -u+x ! -name '*.so' ! -path '*/CMakeFiles/*' | sort)
[ ${#objects[@]} -gt 0 ] || { echo "coverage: no instrumented executables" >&2; exit 1; }

# The headers are compiled through build/asan/hvkit-include/hvkit -> include/; report them
# under include/.
equiv="-path-equivalence=$PWD/$dir/hvkit-include/hvkit,$PWD/include"
report() {
  "$cov" report "${objects[@]}" -instr-profile="$dir/coverage.profdata" \
    "$equiv" "$@"
}
not_include="^(/usr/|.*/tests/|.*/build/asan/(tests|hvkit-generated|_deps)/|.*/examples/|.*/benchmarks/)"
echo
echo "coverage: include/ (all headers; paths relative to include/)"
report -ignore-filename-regex="$not_include" | sed "s|$PWD/||; s|$dir/hvkit-include/hvkit/|include/|"
gated=$(report -ignore-filename-regex="$not_include|$excluded_re" | tail -n 1)
# TOTAL  regions missed cover%  functions missed cover%  lines missed cover%  branches missed cover%
read -r _ _ _ _ _ _ _ _ _ line_pct _ _ branch_pct <<<"$gated"
echo
echo "coverage: include/ without ${excluded[*]}:"
echo "  lines $line_pct (target >= $min_lines%), branches $branch_pct (target >= $min_branches%)"
if [ "${HVKIT_COVERAGE_GATE:-0}" = 1 ]; then
  awk -v l="${line_pct%\%}" -v b="${branch_pct%\%}" -v ml="$min_lines" -v mb="$min_branches" \
    'BEGIN { exit !(l + 0 >= ml && b + 0 >= mb) }' || { echo "coverage: below target"; exit 1; }
fi
[ "$tests_ok" = 1 ] || { echo "coverage: some tests failed"; exit 1; }
