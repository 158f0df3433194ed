// SPDX-License-Identifier: MIT
// A fixed iteration count for every exit-path benchmark when HVKIT_BENCH_ITERATIONS is set
// (count_instructions.sh: two runs under callgrind, 1000 and 11000 iterations, whose
// difference is exactly 10000 iterations without set-up); unset, Google Benchmark chooses.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>

namespace exit_paths {

inline void register_benchmark(const char* name, void (*fn)(benchmark::State&)) {
  auto* b = benchmark::RegisterBenchmark(name, fn);
  if (const char* n = std::getenv("HVKIT_BENCH_ITERATIONS")) b->Iterations(std::strtoll(n, nullptr, 10));
}

}  // namespace exit_paths
