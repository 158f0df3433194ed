#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs every libFuzzer target built by the fuzz preset. --short: 20 s each (CI); otherwise
# the time given in HVKIT_FUZZ_SECONDS (default 300) each. Corpora in build/fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${HVKIT_FUZZ_SECONDS:-300}
[ "${1:-}" = "--short" ] && secs=20
shopt -s nullglob
ran=0
for src in fuzz/*.cpp; do
  name=$(basename "$src" .cpp)
  bin=build/fuzz/fuzz/$name
  [ -x "$bin" ] || { echo "fuzz: $bin not built"; exit 1; }
  mkdir -p "build/fuzz/corpus/$name"
  seeds=()
  [ -d "fuzz/seeds/$name" ] && seeds=("fuzz/seeds/$name")
  echo "fuzz: $name for ${secs}s"
  "$bin" -max_total_time="$secs" -print_final_stats=1 "build/fuzz/corpus/$name" "${seeds[@]}" 2>&1 | tail -n 12
  ran=$((ran + 1))
done
echo "fuzz: $ran targets ran without a crash"
