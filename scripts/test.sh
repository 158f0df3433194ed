#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command: installs what is missing, then builds and tests hvkit with
# GCC (RelWithDebInfo and Release -O3) and with Clang + ASan/UBSan (+ coverage), runs the
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
syslog=$(mktemp)
sys_pid=
# On any exit, a system-test run still going in the background is stopped (Bochs ignores
# SIGTERM: the whole process group gets SIGKILL).
cleanup() { [ -n "$sys_pid" ] && kill -KILL -- "-$sys_pid" 2>/dev/null; rm -f "$log" "$syslog"; }
trap cleanup EXIT
# ctest's output also goes to $log, so the closing line can add up every configuration.
run_ctest() { ctest "$@" 2>&1 | tee -a "$log"; }

step "GCC: configure, build, unit tests"
cmake --preset gcc >/dev/null
cmake --build --preset gcc -j "$jobs"
run_ctest --preset gcc -j "$jobs" -LE system

# The system tests (Bochs, QEMU TCG, KVM inside Bochs: one core each for minutes) run in the
# background at normal priority, in a process group of their own, while everything below
# builds and tests at low priority: the compilers take the core that a lone long system test
# leaves idle, and never slow a system test down (their time limits are wall-clock).
step "GCC: system tests (label system) start in the background"
setsid ctest --preset gcc -j "$jobs" -L system >"$syslog" 2>&1 &
sys_pid=$!
renice -n 15 -p $$ >/dev/null

step "docs: Doxygen, warnings are errors"
cmake --build --preset gcc --target docs

step "GCC Release (-O3): configure, build, unit tests"
cmake --preset gcc-release >/dev/null
cmake --build --preset gcc-release -j "$jobs"
run_ctest --preset gcc-release -j "$jobs" -LE 'freestanding|consumer|system'

# One Clang build serves the sanitizers and the coverage report (the asan preset carries both
# flag sets): ASan + UBSan check every unit and compile-fail test while the same run writes the
# coverage profiles that scripts/coverage.sh reports. (The plain clang preset stays for
# developers; CI time goes to what it would not find.)
step "Clang + ASan + UBSan + coverage: configure, build, unit and compile-fail tests, coverage of include/ (scripts/coverage.sh)"
bash scripts/coverage.sh 2>&1 | tee -a "$log"

if grep -q '\.cpp' <(ls fuzz 2>/dev/null); then
  step "fuzz: libFuzzer targets, short runs"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$jobs"
  bash scripts/fuzz.sh --short
fi

step "GCC: system tests (waiting for the background run)"
sys_rc=0
wait "$sys_pid" || sys_rc=$?
sys_pid=
tee -a "$log" <"$syslog"
[ "$sys_rc" = 0 ] || { echo "system tests failed (ctest exit $sys_rc)"; exit 1; }

step "all tests passed"
# One plain closing line over the four configurations (ctest prints
# "100% tests passed, 0 tests failed out of N" per run and lists skipped tests as "(Skipped)").
total=$(grep -oE 'tests failed out of [0-9]+' "$log" | awk '{s += $5} END {print s + 0}')
failed=$(grep -oE '[0-9]+ tests failed out of' "$log" | awk '{s += $1} END {print s + 0}')
skipped=$(grep -cE '\(Skipped\)$' "$log" || true)
echo "hvkit: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
