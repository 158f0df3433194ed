// SPDX-License-Identifier: MIT
// Shadow-MMU benchmarks, each beside its baseline in this binary:
//  BM_shadow_fault/fixup        shadow_mmu::page_fault() for a host #PF on a not-present
//                               shadow leaf (the guest walk with A/D, the shadow path found
//                               in the cache, the folded leaf written): the common fix-up
//  BM_shadow_fault/walk_only    the guest walk alone over the same addresses (the floor)
//  BM_cr3_switch/cached         shadow_mmu::load() alternating between two address spaces
//                               whose roots are cached
//  BM_cr3_switch/rebuild_root   the same switch without a root cache: zap the shadow pages,
//                               build the root again
// The addresses are a shuffled permutation of 512 pages (all mapped, A/D set).
#include <cstddef>
#include <cstdint>

#include <benchmark/benchmark.h>

#include "shadow_fixture.hpp"

namespace {

using namespace shadow_fixture;

void BM_shadow_fault_fixup(benchmark::State& st) {
  setup s;
  paging::flat_memory mem(s.ram.data(), s.ram.size());
  paging::walk_request req{};
  req.access = x86::pfec::user;
  // Warm: build the path once, then find the shadow page table's leaves.
  req.linear = x86::gva{0};
  if (s.mmu.page_fault(mem, req).action != shadow::fault_action::fixed) st.SkipWithError("no fix-up");
  const auto pt = s.cache.lookup(x86::gfn{4}, paging::make_page_role(s.role, {.level = 1}));
  if (pt == shadow::page_cache::npos) st.SkipWithError("no shadow PT");
  std::uint64_t* leaves = s.cache.table(pt);
  std::size_t i = 0;
  std::uint64_t sum = 0;
  for (auto _ : st) {
    const std::uint64_t va = s.order[i++ & 511];
    leaves[va >> 12] = 0;  // the host leaf is not present: the #PF the guest takes
    req.linear = x86::gva{va};
    const auto a = s.mmu.page_fault(mem, req);
    sum += static_cast<std::uint64_t>(a.action);
    benchmark::DoNotOptimize(a);
  }
  if (sum != 0) st.SkipWithError("a fix-up was not 'fixed'");
}

void BM_shadow_fault_walk_only(benchmark::State& st) {
  setup s;
  paging::flat_memory mem(s.ram.data(), s.ram.size());
  const paging::guest_walker w = s.mmu.walker();
  paging::walk_request req{};
  req.access = x86::pfec::user;
  std::size_t i = 0;
  for (auto _ : st) {
    req.linear = x86::gva{s.order[i++ & 511]};
    auto r = w.walk(mem, s.mmu.guest_context(), req);
    benchmark::DoNotOptimize(r);
  }
}

void BM_cr3_switch_cached(benchmark::State& st) {
  setup s;
  s.mmu.load(s.role, x86::gpa{0x5000});
  std::uint64_t cr3 = 0x1000;
  for (auto _ : st) {
    const auto a = s.mmu.load(s.role, x86::gpa{cr3});
    benchmark::DoNotOptimize(a);
    cr3 ^= 0x4000;
  }
  if (s.mmu.rebuilds() != 0) st.SkipWithError("rebuilt");
}

void BM_cr3_switch_rebuild_root(benchmark::State& st) {
  setup s;
  std::uint64_t cr3 = 0x1000;
  for (auto _ : st) {
    s.cache.zap_all();
    const auto a = s.mmu.load(s.role, x86::gpa{cr3});
    benchmark::DoNotOptimize(a);
    cr3 ^= 0x4000;
  }
}

}  // namespace

BENCHMARK(BM_shadow_fault_fixup)->Name("BM_shadow_fault/fixup");
BENCHMARK(BM_shadow_fault_walk_only)->Name("BM_shadow_fault/walk_only");
BENCHMARK(BM_cr3_switch_cached)->Name("BM_cr3_switch/cached");
BENCHMARK(BM_cr3_switch_rebuild_root)->Name("BM_cr3_switch/rebuild_root");
BENCHMARK_MAIN();
