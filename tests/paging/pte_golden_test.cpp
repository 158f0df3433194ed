// SPDX-License-Identifier: MIT
// Every named bit and field of paging::pte and paging::pdpte at run time, against the SDM's
// entry formats typed by hand: Vol. 3A Table 4-20 "Format of a Page-Table Entry that Maps a
// 4-KByte Page" (bit 0 P, 1 R/W, 2 U/S, 3 PWT, 4 PCD, 5 A, 6 D, 7 PAT, 8 G, M-1:12 address,
// 62:59 protection key, 63 XD), Table 4-18 / 4-15 (2 MiB PDE / 1 GiB PDPTE: 7 PS, 12 PAT,
// M-1:21 / M-1:30 address), Table 4-4 "Format of a 32-Bit Page-Directory Entry that Maps a
// 4-MByte Page" (20:13 "Bits (M-1):32 of physical address of the 4-MByte page referenced by
// this entry", 31:22 "Bits 31:22 of physical address"), Table 4-8 "Format of a PAE
// Page-Directory-Pointer-Table Entry (PDPTE)" (0 P, 3 PWT, 4 PCD).
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/paging/ept_entry.hpp>
#include <hvkit/paging/pte.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;
using paging::pte;

namespace {

std::uint64_t rt(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

TEST(pte_golden, named_bits) {
  const struct {
    pte bit;
    unsigned position;
  } bits[] = {{pte::present, 0}, {pte::writable, 1}, {pte::user, 2},      {pte::pwt, 3},
              {pte::pcd, 4},     {pte::accessed, 5}, {pte::dirty, 6},     {pte::page_size, 7},
              {pte::global, 8},  {pte::pat_large, 12}, {pte::xd, 63}};
  for (const auto& b : bits) {
    EXPECT_EQ(b.bit.raw(), std::uint64_t{1} << b.position) << b.position;
    EXPECT_TRUE(pte{rt(std::uint64_t{1} << b.position)}.test(b.bit)) << b.position;
    EXPECT_FALSE(pte{rt(~(std::uint64_t{1} << b.position))}.test(b.bit)) << b.position;
  }
  EXPECT_EQ(paging::pdpte::present.raw(), 0x1u);
  EXPECT_EQ(paging::pdpte::pwt.raw(), 0x8u);
  EXPECT_EQ(paging::pdpte::pcd.raw(), 0x10u);
  EXPECT_TRUE(paging::pdpte{rt(0x1000 | 0x19)}.test(paging::pdpte::pcd));
}

TEST(pte_golden, protection_key_62_59) {
  for (std::uint64_t k = 0; k < 16; ++k) {
    EXPECT_EQ(pte{rt(k << 59)}.pkey(), k);
    EXPECT_EQ(pte{rt((k << 59) | ~(std::uint64_t{0xf} << 59))}.pkey(), k);
    // with_pkey replaces bits 62:59 only.
    EXPECT_EQ(pte{rt(~std::uint64_t{0})}.with_pkey(static_cast<std::uint8_t>(k)).raw(),
              ~(std::uint64_t{0xf} << 59) | (k << 59));
  }
}

TEST(pte_golden, addresses) {
  // A 4 KiB PTE with every bit set: the address is bits M-1:12.
  const pte all{rt(~std::uint64_t{0})};
  EXPECT_EQ(all.address(52).value(), 0x000f'ffff'ffff'f000ull);
  EXPECT_EQ(all.address(46).value(), 0x0000'3fff'ffff'f000ull);
  EXPECT_EQ(all.address(36).value(), 0x0000'000f'ffff'f000ull);
  EXPECT_EQ(all.frame(40).value(), 0xff'ffff'full);
  // Large leaves: M-1:21 (2 MiB), M-1:30 (1 GiB); bit 12 (PAT) and the bits below the page
  // size are not address.
  EXPECT_EQ(all.page_address(x86::page_size_2m, 52).value(), 0x000f'ffff'ffe0'0000ull);
  EXPECT_EQ(all.page_address(x86::page_size_1g, 48).value(), 0x0000'ffff'c000'0000ull);
  EXPECT_EQ(all.page_address(x86::page_size_4k, 39).value(), 0x0000'007f'ffff'f000ull);
  // 32-bit 4 MiB PDE: 31:22 and, from 20:13, physical bits M-1:32 (at most 40 bits).
  const pte pde32{rt(0x0000'0000'ffff'e000ull)};  // 31:22 all ones, 20:13 = 0xff
  EXPECT_EQ(pde32.page_address_4m(40).value(), 0xff'ffc0'0000ull);
  EXPECT_EQ(pde32.page_address_4m(52).value(), 0xff'ffc0'0000ull);  // PSE-36 reaches bit 39 only
  EXPECT_EQ(pde32.page_address_4m(36).value(), 0x0f'ffc0'0000ull);
  EXPECT_EQ(pde32.page_address_4m(32).value(), 0x00'ffc0'0000ull);
  // Bit 21 of such a PDE is reserved, not address; bits 12 (PAT) and 7 (PS) neither.
  EXPECT_EQ(pte{rt(0x0020'1080ull)}.page_address_4m(40).value(), 0u);
}

TEST(pte_golden, builders) {
  // A non-leaf entry at 0x12'3456'7000 with P, R/W, U/S, A: 0x12'3456'7027.
  EXPECT_EQ(pte::make(x86::gpa{rt(0x12'3456'7000ull)}, pte::present | pte::writable | pte::user | pte::accessed).raw(),
            0x12'3456'7027ull);
  // A 2 MiB leaf at 0x4060'0000 with P, R/W, G: PS added: 0x4060'0183.
  EXPECT_EQ(pte::make_large(x86::gpa{rt(0x4060'0000ull)}, x86::page_size_2m, pte::present | pte::writable | pte::global)
                .raw(),
            0x4060'0183ull);
  // A 1 GiB leaf at 0x80'4000'0000 with P and XD: 0x8000'0080'4000'0081.
  EXPECT_EQ(pte::make_large(x86::gpa{rt(0x80'4000'0000ull)}, x86::page_size_1g, pte::present | pte::xd).raw(),
            0x8000'0080'4000'0081ull);
  // with_address replaces bits 51:12 only (flags, PKEY and XD kept).
  const pte e{rt(0xf800'0000'0000'0fffull)};
  EXPECT_EQ(e.with_address(x86::gpa{rt(0x000f'ffff'ffff'f000ull)}).raw(), 0xf80f'ffff'ffff'ffffull);
  EXPECT_EQ(pte{rt(0x000a'bcde'f012'3007ull)}.with_address(x86::gpa{0x5000}).raw(), 0x0000'0000'0000'5007ull);
  EXPECT_EQ(pte::address_bits, 0x000f'ffff'ffff'f000ull);
}

// The EPTP (SDM 25.6.11, Table 25-9): bits 2:0 memory type (0 UC, 6 WB), 5:3 page-walk length
// minus 1, 6 EPT A/D enable, 7 supervisor shadow-stack control, MAXPHYADDR-1:12 the PML4
// (PML5) address. Every field alone and all together, at run time.
TEST(EptPointerGolden, EveryFieldAtItsBit) {
  volatile std::uint64_t raw = 0x0000'0012'3456'7000u | 6u | (3u << 3) | (1u << 6) | (1u << 7);
  const paging::ept_pointer p{raw};
  EXPECT_EQ(p.memory_type(), paging::ept_memory_type::wb);
  EXPECT_EQ(p.walk_length(), 3u);
  EXPECT_EQ(p.levels(), 4u);
  EXPECT_TRUE(p.accessed_dirty());
  EXPECT_TRUE(p.supervisor_shadow_stack_control());
  EXPECT_EQ(p.root(40).value(), 0x12'3456'7000u);
  EXPECT_EQ(p.root(36).value(), 0x2'3456'7000u);
  raw = 4u << 3;  // UC, 5 levels, no A/D, no SSS
  const paging::ept_pointer q{raw};
  EXPECT_EQ(q.memory_type(), paging::ept_memory_type::uc);
  EXPECT_EQ(q.walk_length(), 4u);
  EXPECT_EQ(q.levels(), 5u);
  EXPECT_FALSE(q.accessed_dirty());
  EXPECT_FALSE(q.supervisor_shadow_stack_control());
  EXPECT_EQ(q.root(52).value(), 0u);
}

}  // namespace
