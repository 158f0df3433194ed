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
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include <hvkit/paging/shadow/shadow_mmu.hpp>

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
namespace shadow = hvkit::paging::shadow;

constexpr std::uint64_t frames = 1024;

struct setup {
  std::vector<std::uint8_t> ram = std::vector<std::uint8_t>(frames * 4096);
  std::unique_ptr<shadow::static_cache_storage<64>> storage = std::make_unique<shadow::static_cache_storage<64>>();
  shadow::page_cache cache{storage->view(x86::hpa{0x4000'0000})};
  shadow::linear_frame_map map{x86::hpa{0x1000'0000}, frames};
  shadow::shadow_mmu<shadow::linear_frame_map> mmu{cache, map};
  paging::cpu_role role = paging::make_cpu_role(x86::cr0{0x8001'0031}, x86::cr4{0x20}, x86::efer{0xd00});
  std::vector<std::uint64_t> order;

  void put(std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) ram[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  setup() {
    // Two PML4s (frames 1 and 5) over one PDPT (2), PD (3) and PT (4); PTE i -> frame 16 + i.
    put(0x1000, 0x2027);
    put(0x5000, 0x2027);
    put(0x2000, 0x3027);
    put(0x3000, 0x4027);
    for (std::uint64_t i = 0; i < 512; ++i) put(0x4000 + 8 * i, ((16 + i) << 12) | 0x67);
    for (std::uint64_t i = 0; i < 512; ++i) order.push_back(i << 12);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(0x5eed));
    mmu.load(role, x86::gpa{0x1000});
  }
};

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
