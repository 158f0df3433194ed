// SPDX-License-Identifier: MIT
// The page tables and walkers of the walk benchmarks (walk_bench.cpp) and of the
// instruction counter (walk_count.cpp), so that both measure the same walks. Tables are in
// one arena; A/D flags are already set (the steady state: no writes).
#pragma once

#include <cstdint>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>

namespace walk_fixtures {

using namespace hvkit;
using std::uint64_t;

struct arena {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(0x80000);
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  void put32(uint64_t a, std::uint32_t v) {
    for (unsigned i = 0; i < 4; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  paging::flat_memory memory() { return paging::flat_memory(bytes.data(), bytes.size()); }
};

constexpr uint64_t P = 1, RW = 2, A = 0x20, D = 0x40;
constexpr uint64_t ad = P | RW | A | D;

// VA with index 1 at every 9-bit level (and LA57 level 5 index 1).
constexpr uint64_t va_ia32e = (uint64_t{1} << 48) | (uint64_t{1} << 39) | (uint64_t{1} << 30) | (uint64_t{1} << 21) |
                              (uint64_t{1} << 12) | 0x123;
constexpr uint64_t va_4level = va_ia32e & ((uint64_t{1} << 48) - 1);

// Tables at first, first + 0x1000, ... each pointing at the next with index 1.
inline void chain(arena& m, uint64_t first, unsigned levels, uint64_t leaf) {
  for (unsigned i = 0; i < levels; ++i) {
    const uint64_t table = first + 0x1000 * i;
    const uint64_t next = i + 1 == levels ? leaf : table + 0x1000;
    m.put64(table + 8, next | ad);
  }
}

inline paging::mmu_context mmu_4level() {
  return paging::mmu_context::make(x86::cr0::pg | x86::cr0::pe | x86::cr0::wp, x86::cr4::pae,
                                   x86::efer::lme | x86::efer::lma, x86::gpa{0x1000});
}

/// 4-level guest tables at 0x1000.. mapping va_4level to 0x9123.
inline paging::walker_4level setup_4level(arena& m) {
  chain(m, 0x1000, 4, 0x9000);
  return paging::walker_4level(mmu_4level(), {});
}

/// 4-level EPT at 0x10000.. (A/D on) mapping gpa va_4level to 0x9123.
inline paging::ept_walker setup_ept4(arena& m) {
  for (unsigned i = 0; i < 4; ++i)
    m.put64(0x10000 + 0x1000 * i + 8, i == 3 ? (0x9000 | 7 | (6u << 3) | 0x300) : ((0x11000 + 0x1000 * i) | 7 | 0x100));
  return *paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x10000}, 4, true), {});
}

/// The nested 4x4 walk: EPT (A/D on) identity-maps gpa 0..256 KiB with 4 KiB pages
/// (PML4 0x40000 -> PDPT 0x41000 -> PD 0x42000 -> PT 0x43000, index 0 above the PT); the
/// guest's 4-level tables at gpa 0x1000.. map va_4level to gpa 0x9123.
inline paging::nested_walker<paging::format::ia32e<4>> setup_nested(arena& m) {
  const uint64_t e = 7 | (6u << 3) | 0x300, upper = 7 | 0x100;  // leaf: WB, A, D; non-leaf: A
  m.put64(0x40000, 0x41000 | upper);
  m.put64(0x41000, 0x42000 | upper);
  m.put64(0x42000, 0x43000 | upper);
  for (uint64_t p = 0; p < 0x40; ++p) m.put64(0x43000 + 8 * p, (p << 12) | e);
  chain(m, 0x1000, 4, 0x9000);
  const auto ept = *paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{0x40000}, 4, true), {});
  return paging::nested_walker<paging::format::ia32e<4>>(paging::walker_4level(mmu_4level(), {}), ept);
}

/// The nested 4x4 walk over AMD nested paging: a 4-level NPT (long-mode host, EFER.NXE)
/// identity-maps gpa 0..256 KiB with 4 KiB pages (PML4 0x50000 -> PDPT 0x51000 -> PD 0x52000
/// -> PT 0x53000), every entry P, RW, US (nested accesses are user accesses, APM 15.25.5)
/// with A set and D set in the leaves (guest table reads are nested writes: no A/D update in
/// the steady state); the guest's tables as in setup_nested. The same 24 loads as the EPT one.
using nested_npt_walker = paging::nested_walker<paging::format::ia32e<4>, paging::npt_walker_4level>;
inline nested_npt_walker setup_nested_npt(arena& m) {
  const uint64_t upper = P | RW | 4 | A, leaf = upper | D;
  m.put64(0x50000, 0x51000 | upper);
  m.put64(0x51000, 0x52000 | upper);
  m.put64(0x52000, 0x53000 | upper);
  for (uint64_t p = 0; p < 0x40; ++p) m.put64(0x53000 + 8 * p, (p << 12) | leaf);
  chain(m, 0x1000, 4, 0x9000);
  const paging::npt_walker_4level npt(x86::hpa{0x50000}, paging::npt_host{true, false}, {});
  return nested_npt_walker(paging::walker_4level(mmu_4level(), {}), npt);
}

}  // namespace walk_fixtures
