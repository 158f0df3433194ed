#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command: installs what is missing, then builds and tests hvkit with
# GCC (RelWithDebInfo and Release -O3), with Clang and with Clang + ASan/UBSan, runs the
# freestanding, consumer and docs checks, the fuzzers for a short while, and the reference
# hypervisor's system tests (Bochs VMX and AMD, the Linux guest, nested KVM inside Bochs).
# HVKIT_SKIP_SETUP=1 skips the package step.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${HVKIT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
jobs=${HVKIT_JOBS:-$(nproc)}
start=$(date +%s)
step() { printf '\n=== %s (%ss)\n' "$*" "$(( $(date +%s) - start ))"; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# ctest's output also goes to $log, so the closing line can add up every configuration.
run_ctest() { ctest "$@" 2>&1 | tee -a "$log"; }

step "GCC: configure, build, test (all labels)"
cmake --preset gcc >/dev/null
cmake --build --preset gcc -j "$jobs"
run_ctest --preset gcc -j "$jobs"

step "docs: Doxygen, warnings are errors"
cmake --build --preset gcc --target docs

step "GCC Release (-O3): configure, build, unit tests"
cmake --preset gcc-release >/dev/null
cmake --build --preset gcc-release -j "$jobs"
run_ctest --preset gcc-release -j "$jobs" -LE 'freestanding|consumer|system'

step "Clang: configure, build, unit tests"
cmake --preset clang >/dev/null
cmake --build --preset clang -j "$jobs"
run_ctest --preset clang -j "$jobs" -LE 'freestanding|consumer|system'

step "Clang + ASan + UBSan: configure, build, unit tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
run_ctest --preset asan -j "$jobs" -LE 'freestanding|consumer|system|compile_fail'

step "coverage: clang source-based coverage of include/ by the unit tests (scripts/coverage.sh)"
bash scripts/coverage.sh

if grep -q '\.cpp' <(ls fuzz 2>/dev/null); then
  step "fuzz: libFuzzer targets, short runs"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  bash scripts/fuzz.sh --short
fi

step "all tests passed"
# One plain closing line over the four configurations (ctest prints
# "100% tests passed, 0 tests failed out of N" per run and lists skipped tests as "(Skipped)").
total=$(grep -oE 'tests failed out of [0-9]+' "$log" | awk '{s += $5} END {print s + 0}')
failed=$(grep -oE '[0-9]+ tests failed out of' "$log" | awk '{s += $1} END {print s + 0}')
skipped=$(grep -cE '\(Skipped\)$' "$log" || true)
echo "hvkit: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
