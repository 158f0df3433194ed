#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every benchmark, runs each bench_* binary with --benchmark_format=json and prints the
# side-by-side ratio table declared in benchmarks/*/ratios.txt (format: benchmarks/README.md).
#
#   bash scripts/bench.sh [BUILD_DIR]     default build/gcc (configured with the gcc preset
#                                         if it does not exist yet)
# Environment:
#   HVKIT_JOBS=N          parallel build jobs (default 2)
#   BENCH_REPETITIONS=N   repetitions per benchmark, the fastest is used (default 5)
#   BENCH_FILTER=REGEX    only run matching benchmarks (rows without data show "missing")
#   BENCH_NO_BUILD=1      do not build, run what is there
# Exit status: 0 if every row with a target meets it, 1 otherwise (or if a row has no data).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/gcc}
jobs=${HVKIT_JOBS:-2}
reps=${BENCH_REPETITIONS:-5}

if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    if [ "$dir" = build/gcc ]; then
      cmake --preset gcc >/dev/null
    else
      cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHVKIT_BUILD_BENCHMARKS=ON >/dev/null
    fi
  fi
  if ! grep -q '^HVKIT_BUILD_BENCHMARKS:BOOL=ON' "$dir/CMakeCache.txt"; then
    echo "bench.sh: $dir is configured with HVKIT_BUILD_BENCHMARKS=OFF" >&2
    exit 2
  fi
  cmake --build "$dir" --target hvkit_benchmarks -j "$jobs"
fi

out="$dir/bench-results"
rm -rf "$out"
mkdir -p "$out"
status=0
found=0
while IFS= read -r exe; do
  found=1
  name=$(basename "$exe")
  # Interleaving the repetitions of all benchmarks of a binary spreads load drifts on a
  # shared machine evenly over each hvkit/baseline pair.
  args=(--benchmark_format=json --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true)
  if [ -n "${BENCH_FILTER:-}" ]; then
    args+=(--benchmark_filter="$BENCH_FILTER")
    # A binary with nothing matching the filter is skipped, not a failure.
    if [ -z "$("$exe" --benchmark_list_tests=true --benchmark_filter="$BENCH_FILTER" 2>/dev/null)" ]; then
      continue
    fi
  fi
  echo "running $name ..." >&2
  if ! "$exe" "${args[@]}" >"$out/$name.json"; then
    echo "bench.sh: $name failed" >&2
    status=1
  fi
done < <(find "$dir/benchmarks" -type f -name 'bench_*' -perm -u+x 2>/dev/null | sort)
if [ "$found" = 0 ]; then
  echo "bench.sh: no bench_* binaries under $dir/benchmarks" >&2
  exit 2
fi

python3 - "$out" benchmarks/*/ratios.txt <<'PY' || status=1
import json, os, re, sys

out, ratio_files = sys.argv[1], sys.argv[2:]
scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# benchmark name -> CPU time in ns: the fastest repetition (load on a shared machine only
# ever adds time), or the median aggregate if only aggregates were reported.
times, samples, medians = {}, {}, {}
for f in sorted(os.listdir(out)):
    try:
        data = json.load(open(os.path.join(out, f)))
    except ValueError:
        print(f"bench.sh: {f}: not valid JSON", file=sys.stderr)
        continue
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        ns = b["cpu_time"] * scale[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[name] = ns
        else:
            samples.setdefault(name, []).append(ns)
times.update(medians)
for name, v in samples.items():
    times[name] = min(v)

def number(s):
    s = s.strip()
    if "/" in s:
        a, b = s.split("/", 1)
        return float(a) / float(b)
    return float(s)

def meets(ratio, target):
    if target in ("", "-"):
        return None
    m = re.fullmatch(r"(<=|>=|<|>)\s*(\S+)", target)
    if not m:
        raise ValueError(f"bad target {target!r}")
    op, v = m.group(1), number(m.group(2))
    return {"<=": ratio <= v, "<": ratio < v, ">=": ratio >= v, ">": ratio > v}[op]

def fmt(ns):
    if ns >= 1e6: return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3: return f"{ns / 1e3:.3g} us"
    return f"{ns:.3g} ns"

rows, bad = [], 0
for rf in ratio_files:
    for lineno, line in enumerate(open(rf), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 4:
            print(f"{rf}:{lineno}: expected 4 '|'-separated fields", file=sys.stderr)
            bad += 1
            continue
        what, hv, base, target = parts
        if hv not in times or base not in times:
            missing = " ".join(n for n in (hv, base) if n not in times)
            rows.append([what, times.get(hv) and fmt(times[hv]) or "missing", times.get(base) and fmt(times[base]) or "missing",
                         "-", "-", target, "MISSING (" + missing + ")"])
            bad += 1
            continue
        ratio = times[hv] / times[base]
        ok = meets(ratio, target)
        if ok is False:
            bad += 1
        rows.append([what, fmt(times[hv]), fmt(times[base]), f"{ratio:.3f}", f"{1 / ratio:.2f}x",
                     target or "-", {True: "ok", False: "FAIL", None: "-"}[ok]])

head = ["what", "hvkit", "baseline", "ratio", "speedup", "target", "ok?"]
w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
line = lambda r: "| " + " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r)) + " |"
print(line(head))
print("|" + "|".join("-" * (x + 2) for x in w) + "|")
for r in rows:
    print(line(r))
print(f"\nratio = hvkit CPU time / baseline CPU time (fastest of the repetitions); speedup = 1/ratio")
sys.exit(1 if bad else 0)
PY
exit $status
