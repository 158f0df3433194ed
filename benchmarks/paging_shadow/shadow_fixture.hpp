// SPDX-License-Identifier: MIT
// The shadow benchmarks' guest (shadow_bench.cpp, shadow_count.cpp): a 4-level guest with two
// PML4s (frames 1 and 5) over one PDPT (2), PD (3) and PT (4); PTE i -> frame 16 + i, A/D
// set; a shuffled permutation of its 512 pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <hvkit/paging/shadow/shadow_mmu.hpp>

namespace shadow_fixture {

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

}  // namespace shadow_fixture
