// SPDX-License-Identifier: MIT
// Instruction counts of the shadow #PF fix-up and of the guest walk alone, for callgrind
// (deterministic, unlike timings):
//   shadow_count <fixup|walk_only> <iterations>
// runs the loop body of BM_shadow_fault/fixup or BM_shadow_fault/walk_only (shadow_bench.cpp,
// same fixture) `iterations` times. count_instructions.sh runs it under
// `valgrind --tool=callgrind` for two counts and prints the difference per iteration, which
// leaves out start-up and set-up.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shadow_fixture.hpp"

using namespace shadow_fixture;

namespace {

[[gnu::noinline]] std::uint64_t fixups(unsigned long n) {
  setup s;
  paging::flat_memory mem(s.ram.data(), s.ram.size());
  paging::walk_request req{};
  req.access = x86::pfec::user;
  req.linear = x86::gva{0};
  if (s.mmu.page_fault(mem, req).action != shadow::fault_action::fixed) return ~0ull;
  const auto pt = s.cache.lookup(x86::gfn{4}, paging::make_page_role(s.role, {.level = 1}));
  if (pt == shadow::page_cache::npos) return ~0ull;
  std::uint64_t* leaves = s.cache.table(pt);
  std::uint64_t sum = 0;
  for (unsigned long i = 0; i < n; ++i) {
    const std::uint64_t va = s.order[i & 511];
    leaves[va >> 12] = 0;
    req.linear = x86::gva{va};
    sum += static_cast<std::uint64_t>(s.mmu.page_fault(mem, req).action);
  }
  return sum;
}

[[gnu::noinline]] std::uint64_t walks(unsigned long n) {
  setup s;
  paging::flat_memory mem(s.ram.data(), s.ram.size());
  const paging::guest_walker w = s.mmu.walker();
  paging::walk_request req{};
  req.access = x86::pfec::user;
  std::uint64_t sum = 0;
  for (unsigned long i = 0; i < n; ++i) {
    req.linear = x86::gva{s.order[i & 511]};
    const auto r = w.walk(mem, s.mmu.guest_context(), req);
    sum += r ? r->address.value() : 1;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: shadow_count <fixup|walk_only> <iterations>\n");
    return 2;
  }
  const unsigned long n = std::strtoul(argv[2], nullptr, 10);
  std::uint64_t r = 0;
  if (std::strcmp(argv[1], "fixup") == 0) {
    r = fixups(n);
    if (r != 0) {
      std::fprintf(stderr, "shadow_count: a fix-up was not 'fixed'\n");
      return 1;
    }
  } else if (std::strcmp(argv[1], "walk_only") == 0) {
    r = walks(n);
  } else {
    return 2;
  }
  std::printf("%llu\n", static_cast<unsigned long long>(r));
  return 0;
}
