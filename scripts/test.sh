#!/usr/bin/env bash
# The README's test command: installs what is missing, then builds and tests hvkit with
# GCC, with Clang and with Clang + ASan/UBSan, runs the freestanding, consumer and docs
# checks, the fuzzers for a short while, and the reference hypervisor's system test.
# HVKIT_SKIP_SETUP=1 skips the package step.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${HVKIT_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh
jobs=${HVKIT_JOBS:-$(nproc)}
start=$(date +%s)
step() { printf '\n=== %s (%ss)\n' "$*" "$(( $(date +%s) - start ))"; }

step "GCC: configure, build, test (all labels)"
cmake --preset gcc >/dev/null
cmake --build --preset gcc -j "$jobs"
ctest --preset gcc -j "$jobs"

step "docs: Doxygen, warnings are errors"
cmake --build --preset gcc --target docs

step "Clang: configure, build, unit tests"
cmake --preset clang >/dev/null
cmake --build --preset clang -j "$jobs"
ctest --preset clang -j "$jobs" -LE 'freestanding|consumer|system'

step "Clang + ASan + UBSan: configure, build, unit tests"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs" -LE 'freestanding|consumer|system|compile_fail'

if grep -q '\.cpp' <(ls fuzz 2>/dev/null); then
  step "fuzz: libFuzzer targets, short runs"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  bash scripts/fuzz.sh --short
fi

step "all tests passed"
