// SPDX-License-Identifier: MIT
// Instruction counts per walk, for callgrind (deterministic, unlike timings):
//   walk_count <4-level|EPT-4-level|nested-4x4|nested-NPT-4x4|32-bit|PAE|5-level> <walks>
// runs the benchmark's walk (walk_fixtures.hpp) `walks` times, each address depending on the
// previous result as in walk_bench.cpp. count_instructions.sh runs it under
// `valgrind --tool=callgrind` for two counts and prints the difference per walk, which
// leaves out start-up and set-up. Each walk kind has its own function, as each benchmark
// does in walk_bench.cpp, so that the compiler inlines the walk the same way in both.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "walk_fixtures.hpp"

using namespace walk_fixtures;

namespace {

volatile uint64_t zero_source = 0;

[[gnu::noinline]] uint64_t walks_4level(unsigned long walks) {
  arena m;
  const auto w = setup_4level(m);
  const auto mmu = mmu_4level();
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (unsigned long i = 0; i < walks; ++i) {
    req.linear = x86::gva{va_4level + (acc & zero)};
    const auto r = w.walk(mem, mmu, req);
    acc = r ? r->address.value() : 1;
  }
  return acc;
}

// The other guest formats, set up as walk_bench.cpp's walk_32bit, walk_pae and walk_5level.
template <class Walker>
[[gnu::noinline]] uint64_t walks_guest(arena& m, const Walker& walker, const paging::mmu_context& context, uint64_t va,
                                       unsigned long walks) {
  const Walker w = walker;
  const paging::mmu_context mmu = context;
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (unsigned long i = 0; i < walks; ++i) {
    req.linear = x86::gva{va + (acc & zero)};
    const auto r = w.walk(mem, mmu, req);
    acc = r ? r->address.value() : 1;
  }
  return acc;
}
uint64_t walks_32bit(unsigned long walks) {
  arena m;
  m.put32(0x1000 + 4, 0x2000 | 0x63);
  m.put32(0x2000 + 4, 0x9000 | 0x63);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, {}, {}, x86::gpa{0x1000});
  return walks_guest(m, paging::walker_32bit(mmu, {}), mmu, (1u << 22) | (1u << 12) | 0x123, walks);
}
uint64_t walks_pae(unsigned long walks) {
  arena m;
  m.put64(0x1000 + 8, 0x2000 | P);
  m.put64(0x2000 + 8, 0x3000 | ad);
  m.put64(0x3000 + 8, 0x9000 | ad);
  const auto pd = paging::load_pdptrs(x86::cr3{0x1000}, paging::flat_view(m.bytes.data(), m.bytes.size()), 52);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe, x86::cr4::pae, {}, x86::gpa{0x1000});
  return walks_guest(m, paging::walker_pae(mmu, {}, *pd), mmu, (1u << 30) | (1u << 21) | (1u << 12) | 0x123, walks);
}
uint64_t walks_5level(unsigned long walks) {
  arena m;
  chain(m, 0x1000, 5, 0x9000);
  const auto mmu = paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp,
                                             x86::cr4::pae | x86::cr4::la57, x86::efer::lme | x86::efer::lma,
                                             x86::gpa{0x1000});
  return walks_guest(m, paging::walker_5level(mmu, {}), mmu, va_ia32e, walks);
}

[[gnu::noinline]] uint64_t walks_ept4(unsigned long walks) {
  arena m;
  const auto w = setup_ept4(m);
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  paging::ept_request req{};
  uint64_t acc = 0;
  for (unsigned long i = 0; i < walks; ++i) {
    req.address = x86::gpa{va_4level + (acc & zero)};
    const auto r = w.walk(mem, req);
    acc = r ? r->address.value() : 1;
  }
  return acc;
}

[[gnu::noinline]] uint64_t walks_nested(unsigned long walks) {
  arena m;
  const auto n = setup_nested(m);
  const auto mmu = mmu_4level();
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (unsigned long i = 0; i < walks; ++i) {
    req.linear = x86::gva{va_4level + (acc & zero)};
    const auto r = n.walk(mem, mmu, req);
    acc = r ? r->l1_address().value() : 1;
  }
  return acc;
}

[[gnu::noinline]] uint64_t walks_nested_npt(unsigned long walks) {
  arena m;
  const auto n = setup_nested_npt(m);
  const auto mmu = mmu_4level();
  paging::flat_memory mem = m.memory();
  const uint64_t zero = zero_source;
  paging::walk_request req{};
  uint64_t acc = 0;
  for (unsigned long i = 0; i < walks; ++i) {
    req.linear = x86::gva{va_4level + (acc & zero)};
    const auto r = n.walk(mem, mmu, req);
    acc = r ? r->l1_address().value() : 1;
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: walk_count <4-level|EPT-4-level|nested-4x4|nested-NPT-4x4|32-bit|PAE|5-level> <walks>\n");
    return 2;
  }
  const char* mode = argv[1];
  const unsigned long walks = std::strtoul(argv[2], nullptr, 10);
  uint64_t acc = 0;
  if (std::strcmp(mode, "4-level") == 0) {
    acc = walks_4level(walks);
  } else if (std::strcmp(mode, "32-bit") == 0) {
    acc = walks_32bit(walks);
  } else if (std::strcmp(mode, "PAE") == 0) {
    acc = walks_pae(walks);
  } else if (std::strcmp(mode, "5-level") == 0) {
    acc = walks_5level(walks);
  } else if (std::strcmp(mode, "EPT-4-level") == 0) {
    acc = walks_ept4(walks);
  } else if (std::strcmp(mode, "nested-4x4") == 0) {
    acc = walks_nested(walks);
  } else if (std::strcmp(mode, "nested-NPT-4x4") == 0) {
    acc = walks_nested_npt(walks);
  } else {
    std::fprintf(stderr, "walk_count: unknown walk %s\n", mode);
    return 2;
  }
  if (acc == 1) {
    std::fprintf(stderr, "walk_count: the walk faulted\n");
    return 1;
  }
  return 0;
}
