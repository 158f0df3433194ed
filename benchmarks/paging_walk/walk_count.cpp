// SPDX-License-Identifier: MIT
// Instruction counts per walk, for callgrind (deterministic, unlike timings):
//   walk_count <4-level|EPT-4-level|nested-4x4|nested-NPT-4x4> <walks>
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
    std::fprintf(stderr, "usage: walk_count <4-level|EPT-4-level|nested-4x4|nested-NPT-4x4> <walks>\n");
    return 2;
  }
  const char* mode = argv[1];
  const unsigned long walks = std::strtoul(argv[2], nullptr, 10);
  uint64_t acc = 0;
  if (std::strcmp(mode, "4-level") == 0) {
    acc = walks_4level(walks);
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
