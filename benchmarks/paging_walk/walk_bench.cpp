// SPDX-License-Identifier: MIT
// Page-walk benchmarks: BM_walk/<mode> for every walker beside BM_pointer_chase/<n>, n
// dependent loads over the same page-table memory (the floor a walk cannot beat).
// Tables are in cache and A/D flags are already set (the steady state: no writes).
// Each iteration's address depends on the previous result (through a zero the compiler
// cannot see), so both sides measure latency, not overlapped throughput.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "walk_fixtures.hpp"

namespace {

using namespace hvkit;
using namespace walk_fixtures;
using std::uint64_t;

volatile uint64_t zero_source = 0;

template <class Walker>
void run_walk(benchmark::State& state, arena& m, const Walker& walker, const paging::mmu_context& context,
              uint64_t va) {
  // The walker and the context are per-vCPU state a caller keeps at hand: local copies.
  const Walker w = walker;
  const paging::mmu_context mmu = context;
  paging::flat_memory mem(m.bytes.data(), m.bytes.size());
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  req.linear = x86::gva{va};
  uint64_t acc = 0;
  for (auto _ : state) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = w.walk(mem, mmu, req);
    acc = r ? r->address.value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}

void walk_32bit(benchmark::State& state) {
  arena m;
  m.put32(0x1000 + 4, 0x2000 | 0x63);
  m.put32(0x2000 + 4, 0x9000 | 0x63);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, {}, {}, x86::gpa{0x1000});
  run_walk(state, m, paging::walker_32bit(mmu, {}), mmu, (1u << 22) | (1u << 12) | 0x123);
}
void walk_pae(benchmark::State& state) {
  arena m;
  m.put64(0x1000 + 8, 0x2000 | P);
  m.put64(0x2000 + 8, 0x3000 | ad);
  m.put64(0x3000 + 8, 0x9000 | ad);
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, paging::flat_view(m.bytes.data(), m.bytes.size()), 52);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae, {}, x86::gpa{0x1000});
  run_walk(state, m, paging::walker_pae(mmu, {}, *pd), mmu, (1u << 30) | (1u << 21) | (1u << 12) | 0x123);
}
void walk_4level(benchmark::State& state) {
  arena m;
  const auto w = setup_4level(m);
  run_walk(state, m, w, mmu_4level(), va_4level);
}
void walk_5level(benchmark::State& state) {
  arena m;
  chain(m, 0x1000, 5, 0x9000);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp,
                                             x86::cr4::pae | x86::cr4::la57, x86::efer::lme | x86::efer::lma,
                                             x86::gpa{0x1000});
  run_walk(state, m, paging::walker_5level(mmu, {}), mmu, va_ia32e);
}
void walk_ept4(benchmark::State& state) {
  arena m;
  const auto w = setup_ept4(m);
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  const uint64_t gpa = va_4level;
  paging::ept_request req{};
  req.access = paging::ept_access::read;
  uint64_t acc = 0;
  for (auto _ : state) {
    req.address = x86::gpa{gpa + (acc & zero)};
    const auto r = w.walk(mem, req);
    acc = r ? r->address.value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}
void walk_nested(benchmark::State& state) {
  arena m;
  const auto n = setup_nested(m);
  const auto mmu = mmu_4level();
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  const uint64_t va = va_4level;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (auto _ : state) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = n.walk(mem, mmu, req);
    acc = r ? r->l1_address().value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}

// The same nested 4x4 walk with AMD's NPT as the second stage (setup_nested_npt).
void walk_nested_npt(benchmark::State& state) {
  arena m;
  const auto n = setup_nested_npt(m);
  const auto mmu = mmu_4level();
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  const uint64_t va = va_4level;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (auto _ : state) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = n.walk(mem, mmu, req);
    acc = r ? r->l1_address().value() : 1;
    benchmark::DoNotOptimize(acc);
  }
  if (acc == 1) state.SkipWithError("walk faulted");
}

// n dependent loads over page-table memory: the entry at each step gives the next table,
// plus a fixed index offset (what a walk must do at the least). For n = 24 the chain runs
// through the nested benchmark's tables (6 rounds of 4).
void pointer_chase(benchmark::State& state) {
  const unsigned n = static_cast<unsigned>(state.range(0));
  arena m;
  chain(m, 0x1000, 5, 0x1000);  // a cycle of 5 tables, entry 1 of each points to the next
  const std::uint8_t* base = m.bytes.data();
  const uint64_t zero = zero_source;
  uint64_t acc = 0;
  for (auto _ : state) {
    uint64_t table = 0x1000 + (acc & zero);
    for (unsigned i = 0; i < n; ++i) {
      uint64_t v;
      __builtin_memcpy(&v, base + (table & 0x000f'ffff'ffff'f000u) + 8, 8);
      table = v;
    }
    acc = table;
    benchmark::DoNotOptimize(acc);
  }
}

// Registered by name so that the rows read BM_walk/<mode> and BM_pointer_chase/<n>.
const bool registered = [] {
  benchmark::RegisterBenchmark("BM_walk/32-bit", walk_32bit);
  benchmark::RegisterBenchmark("BM_walk/PAE", walk_pae);
  benchmark::RegisterBenchmark("BM_walk/4-level", walk_4level);
  benchmark::RegisterBenchmark("BM_walk/5-level", walk_5level);
  benchmark::RegisterBenchmark("BM_walk/EPT-4-level", walk_ept4);
  benchmark::RegisterBenchmark("BM_walk/nested-4x4", walk_nested);
  benchmark::RegisterBenchmark("BM_walk/nested-NPT-4x4", walk_nested_npt);
  for (int n : {2, 3, 4, 5, 24}) benchmark::RegisterBenchmark("BM_pointer_chase", pointer_chase)->Arg(n);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
