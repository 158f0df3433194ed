// SPDX-License-Identifier: MIT
// paging/read_virtual.hpp: reading a guest-virtual range across pages. The oracle is the
// test's own list of which virtual page maps to which physical page (the tables below are
// built from it, by hand, per SDM 4.5 Tables 4-15 to 4-19), and the byte pattern of the
// physical memory; the helper's output must equal those bytes, and a failure must name the
// first byte it could not read.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/read_virtual.hpp>
#include <hvkit/paging/walker.hpp>

namespace {

using namespace hvkit;
using std::uint64_t;

constexpr uint64_t P = 1, RW = 2, PS = 0x80;
// The physical memory: 4 MiB + 4 bytes, so the page at 0x400000 has only 4 bytes backed.
constexpr uint64_t mem_size = 0x400004;

std::uint8_t pattern(uint64_t pa) { return static_cast<std::uint8_t>(pa * 7 + (pa >> 8) + (pa >> 16)); }

struct fixture {
  std::vector<std::uint8_t> bytes = std::vector<std::uint8_t>(mem_size);
  void put64(uint64_t a, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) bytes[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  fixture() {
    for (uint64_t a = 0; a < mem_size; ++a) bytes[a] = pattern(a);
    // 4-level tables: PML4 0x1000, PDPT 0x2000, PD 0x3000, PT 0x4000 (the pattern stays
    // elsewhere in those pages; only the entries below are used).
    for (uint64_t t = 0x1000; t < 0x5000; ++t) bytes[t] = 0;
    put64(0x1000, 0x2000 | P | RW);
    put64(0x2000, 0x3000 | P | RW);
    put64(0x3000 + 1 * 8, 0x200000 | P | RW | PS);  // VA 0x200000: a 2 MiB page at PA 0x200000
    put64(0x3000 + 2 * 8, 0x4000 | P | RW);         // VA 0x400000: the page table
    put64(0x4000 + 0 * 8, 0x10000 | P);             // VA 0x400000 -> PA 0x10000
    put64(0x4000 + 1 * 8, 0x7000 | P);              // VA 0x401000 -> PA 0x7000
    // VA 0x402000: not present
    put64(0x4000 + 3 * 8, 0x8000 | P);              // VA 0x403000 -> PA 0x8000
    put64(0x4000 + 4 * 8, 0x50000000 | P);          // VA 0x404000 -> PA 0x50000000: not backed
    put64(0x4000 + 5 * 8, 0x400000 | P);            // VA 0x405000 -> PA 0x400000: 4 bytes backed
  }
  paging::flat_view view() const { return paging::flat_view(bytes.data(), bytes.size()); }
};

// The oracle: the physical address of a virtual one, from the list above (not the walker).
uint64_t oracle_pa(uint64_t va) {
  if (va >= 0x200000 && va < 0x400000) return va;
  const uint64_t pages[] = {0x10000, 0x7000, 0, 0x8000, 0x50000000, 0x400000};
  return pages[(va - 0x400000) >> 12] + (va & 0xfff);
}

paging::guest_walker walker() {
  const auto mmu = paging::mmu_context::make(x86::cr0{0x80000011}, x86::cr4{x86::cr4::pae}, x86::efer{0x500},
                                             x86::gpa{0x1000});
  return paging::guest_walker(mmu, paging::cpu_properties{.maxphyaddr = 46});
}

TEST(ReadVirtual, CrossesALargePageAndSmallPagesWithTheOraclesBytes) {
  const fixture f;
  const auto mem = f.view();
  // 0x3ffff0 (the 2 MiB page's last 16 bytes) to 0x402000: three pages, two page sizes.
  std::vector<std::uint8_t> out(0x2010, 0xee);
  const auto r = paging::read_virtual(walker(), mem, x86::gva{0x3ffff0}, out.data(), out.size());
  ASSERT_TRUE(r) << std::hex << r.error().address.value() << " kind " << int(r.error().walk.kind) << " level " << int(r.error().walk.level) << " what " << int(r.error().what) << " pa " << r.error().physical.value();
  EXPECT_EQ(*r, out.size());
  for (uint64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], pattern(oracle_pa(0x3ffff0 + i))) << std::hex << i;
}

TEST(ReadVirtual, UnalignedStartAndEndInsideOneWord) {
  const fixture f;
  std::uint8_t out[5];
  const auto r = paging::read_virtual(walker(), f.view(), x86::gva{0x401003}, out, sizeof out);
  ASSERT_TRUE(r);
  for (unsigned i = 0; i < sizeof out; ++i) EXPECT_EQ(out[i], pattern(0x7003 + i));
  EXPECT_EQ(*paging::read_virtual(walker(), f.view(), x86::gva{0x401003}, out, 0), 0u);
}

TEST(ReadVirtual, NotPresentPageStopsAtItsFirstByte) {
  const fixture f;
  std::vector<std::uint8_t> out(16, 0xee);
  const auto r = paging::read_virtual(walker(), f.view(), x86::gva{0x401ff8}, out.data(), out.size());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().what, paging::read_failure::translation);
  EXPECT_EQ(r.error().address.value(), 0x402000u);
  EXPECT_EQ(r.error().bytes_read, 8u);
  EXPECT_EQ(r.error().walk.kind, paging::fault_kind::not_present);
  EXPECT_EQ(r.error().walk.level, 1u);
  EXPECT_EQ(r.error().walk.guest_entry_address(), x86::gpa{0x4010});  // PT[2]
  for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(out[i], pattern(0x7ff8 + i));
  for (unsigned i = 8; i < 16; ++i) EXPECT_EQ(out[i], 0xee) << "bytes past the fault are left alone";
}

TEST(ReadVirtual, UnbackedPhysicalPageNamesBothAddresses) {
  const fixture f;
  std::uint8_t out[8];
  const auto r = paging::read_virtual(walker(), f.view(), x86::gva{0x403ffc}, out, sizeof out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().what, paging::read_failure::memory);
  EXPECT_EQ(r.error().address.value(), 0x404000u);
  EXPECT_EQ(r.error().physical.value(), 0x50000000u);
  EXPECT_EQ(r.error().bytes_read, 4u);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(out[i], pattern(0x8ffc + i));
}

TEST(ReadVirtual, MemoryEndingInsideAWordIsReadUpToItsLastByte) {
  const fixture f;
  std::uint8_t out[16];
  const auto r = paging::read_virtual(walker(), f.view(), x86::gva{0x405000}, out, sizeof out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().what, paging::read_failure::memory);
  EXPECT_EQ(r.error().address.value(), 0x405004u);
  EXPECT_EQ(r.error().physical.value(), 0x400004u);
  EXPECT_EQ(r.error().bytes_read, 4u);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(out[i], pattern(0x400000 + i));
}

TEST(ReadVirtual, NonCanonicalAddressIsATranslationFaultAtIt) {
  const fixture f;
  std::uint8_t out[8];
  const auto r = paging::read_virtual(walker(), f.view(), x86::gva{0x0000800000000000}, out, sizeof out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().what, paging::read_failure::translation);
  EXPECT_EQ(r.error().address.value(), 0x0000800000000000u);
  EXPECT_EQ(r.error().bytes_read, 0u);
  EXPECT_EQ(r.error().walk.kind, paging::fault_kind::non_canonical);
}

}  // namespace
