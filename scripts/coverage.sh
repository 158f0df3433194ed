#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Source-based coverage of include/ by the unit tests (clang -fprofile-instr-generate
# -fcoverage-mapping; llvm-profdata and llvm-cov from Debian's llvm-14). The instrumented build
# is the asan preset (Clang + ASan + UBSan + coverage, one build for both jobs): this script
# builds build/asan, runs ctest --preset asan without the system, freestanding and consumer
# labels (each test writes build/asan/profiles/*.profraw, see CMakePresets.json), and prints a
# per-file table for include/ and two totals: all of include/, and include/ without the
# excluded headers below, which is measured against the targets below
# (the gate: exit non-zero when lower). See docs/testing.md.
#   HVKIT_COVERAGE_LABELS='...'  ctest -L regex instead of the default (e.g. 'vmx|svm'); a
#                                partial run is not gated
#   HVKIT_COVERAGE_GATE=0        report only, never fail on the totals (default 1: fail when
#                                the total is below the gate, except for a partial run)
#   HVKIT_COVERAGE_REPORT_ONLY=1 no build or test run: the report of the last run's profiles
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${HVKIT_JOBS:-$(nproc)}
dir=build/asan
# The gate: just below the last run (97.82% of lines, 93.37% of branches), above the targets
# of 97% and 93% (docs/testing.md, "Targets and the gate"). Raise these as tests raise the total.
min_lines=97.5
min_branches=93.1
target_lines=97
target_branches=93
# The headers left out of the gated total (reported in the table, not held to the targets),
# each with the reason the unit tests cannot reach it (docs/testing.md keeps the same list):
#   vmx/hardware.hpp              executes VMXON/VMREAD/VMWRITE/VMLAUNCH...: only on a
#                                 processor in VMX operation (tests/system, in Bochs)
# (Paths relative to include/. The contract-violation path, x86/contract.hpp and
# x86/hosted/contract_print.hpp, is counted: its death tests write their profile through
# tests/support/profile_on_death.hpp.)
excluded=(vmx/hardware.hpp)

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
not_include="^(/usr/|.*/tests/|.*/build/asan/(tests|hvkit-generated|_deps)/|.*/examples/|.*/benchmarks/)"
cov_args=("${objects[@]}" -instr-profile="$dir/coverage.profdata" -ignore-filename-regex="$not_include")

# What is counted (docs/testing.md, "How the numbers are computed"):
# - lines: llvm-cov's per-file line view (what `llvm-cov show` prints), which adds up every
#   instantiation of a function in every test binary: a line is run when any of them ran it;
# - branches: every condition of the source once (keyed by its place, and for a condition in
#   a macro also by the places the macro was expanded), each of its two outcomes taken when
#   any instantiation in any binary took it; a condition folded to a constant is no branch.
# Not `llvm-cov report`'s totals: it counts a template's lines and branches from the one
# instantiation that covers the most, so code that only another instantiation (another
# template argument, another test binary) ran counts as missed.
# llvm-cov's "N functions have mismatched data": each record it drops must be the placeholder
# (hash 0, one zero region) that a translation unit emits for an inline function it includes
# but never calls; the function's real record comes from the unit that calls it. A dropped
# record with another hash would be code whose counts are lost: refused here.
lost=$("$cov" report -dump "${cov_args[@]}" 2>&1 >/dev/null | grep '^hash-mismatch' | grep -v 'hash = 0x0$' || true)
if [ -n "$lost" ]; then
  echo "coverage: function records whose counts llvm-cov cannot match (not placeholders):" >&2
  echo "$lost" | head >&2
  exit 1
fi
# (Their number is the warning that the two exports print; checked above, so filtered.)
quiet() { "$@" 2> >(grep -v 'functions have mismatched data$' >&2); }
quiet "$cov" export -format=lcov -skip-functions "${cov_args[@]}" >"$dir/coverage.lcov"
quiet "$cov" export -skip-expansions "${cov_args[@]}" >"$dir/coverage.json"

echo
echo "coverage: include/ (paths relative to include/; * = not in the total held to the targets)"
excluded_re="^($(IFS='|'; echo "${excluded[*]}" | sed 's/\./\\./g'))\$"
totals=$(python3 - "$dir/coverage.lcov" "$dir/coverage.json" "$excluded_re" \
  "$PWD/$dir/hvkit-include/hvkit/" "$PWD/include/" <<'EOF'
import json, re, sys
lcov, js, excluded, *prefixes = sys.argv[1:]
excluded = re.compile(excluded)
def header(path):  # a path under include/, relative to it; None for anything else
    for p in prefixes:
        if path.startswith(p):
            return path[len(p):]
    return None
lines = {}  # header -> {line number: run}
name = None
for row in open(lcov):
    if row.startswith("SF:"):
        name = header(row[3:].strip())
    elif row.startswith("DA:") and name:
        number, count = row[3:].split(",")[:2]
        seen = lines.setdefault(name, {})
        seen[int(number)] = seen.get(int(number), False) or int(count) > 0
branches = {}  # header -> {condition: [true taken, false taken]}
for fn in json.load(open(js))["data"][0]["functions"]:
    files = fn["filenames"]
    home = header(files[0])  # file 0 of a record: the function's own file
    if home is None:
        continue
    # region: [line, col, end line, end col, count, file, expanded file, kind]; kind 1 is a
    # macro expansion: where file `expanded file` was expanded.
    site = {r[6]: (r[5], r[0], r[1]) for r in fn["regions"] if r[7] == 1}
    # branch: [line, col, end line, end col, true count, false count, file, ...]; the folded
    # (constant) conditions are not in a function's list.
    for b in fn["branches"]:
        line, col, end_line, end_col, taken, not_taken, fid = b[:7]
        key = [(files[fid], line, col, end_line, end_col)]
        while fid != 0:
            fid, line, col = site[fid]
            key.append((files[fid], line, col))
        seen = branches.setdefault(home, {}).setdefault(tuple(key), [False, False])
        seen[0] |= taken > 0
        seen[1] |= not_taken > 0
def pct(run, n):
    return "%.2f%%" % (100.0 * run / n) if n else "-"
def row(label, n):
    print("%-52s %7d %7d %8s %9d %7d %8s" % (label, n[0], n[0] - n[1], pct(n[1], n[0]), n[2],
          n[2] - n[3], pct(n[3], n[2])))
print("%-52s %7s %7s %8s %9s %7s %8s" % ("", "Lines", "Missed", "Cover", "Branches", "Missed", "Cover"))
total, gated = [0] * 4, [0] * 4
for name in sorted(set(lines) | set(branches)):
    ls, bs = lines.get(name, {}), branches.get(name, {})
    n = [len(ls), sum(ls.values()), 2 * len(bs), sum(t + f for t, f in bs.values())]
    out = excluded.search(name)
    row(name + (" *" if out else ""), n)
    for acc in [total] + ([] if out else [gated]):
        for i in range(4):
            acc[i] += n[i]
row("TOTAL", total)
row("TOTAL without *", gated)
print("%.2f %.2f" % (100.0 * gated[1] / gated[0], 100.0 * gated[3] / gated[2]))
EOF
)
echo "$totals" | sed '$d'
read -r line_pct branch_pct <<<"$(echo "$totals" | tail -n 1)"
echo
echo "coverage: include/ without ${excluded[*]}:"
echo "  lines $line_pct% (gate >= $min_lines%, target $target_lines%), branches $branch_pct% (gate >= $min_branches%, target $target_branches%)"
if [ "${HVKIT_COVERAGE_GATE:-1}" = 1 ] && [ -z "${HVKIT_COVERAGE_LABELS:-}" ]; then
  awk -v l="$line_pct" -v b="$branch_pct" -v ml="$min_lines" -v mb="$min_branches" \
    'BEGIN { exit !(l + 0 >= ml && b + 0 >= mb) }' || { echo "coverage: below the gate"; exit 1; }
fi
[ "$tests_ok" = 1 ] || { echo "coverage: some tests failed"; exit 1; }
