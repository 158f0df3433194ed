// SPDX-License-Identifier: MIT
// CR3 formats: SDM Table 4-3 (32-bit), 4-7 (PAE), 4-12 and 4-13 (4/5-level, PCIDE 0/1).
#include <gtest/gtest.h>

#include <hvkit/x86/cr3.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;
using x86::cr3, x86::cr4, x86::paging_mode;

TEST(cr3, root_per_mode) {
  constexpr cr3 v{0xdead'beef'1234'5678ull};
  HVKIT_BOTH(x86::cr3_root(v, paging_mode::none, 46).value() == 0);
  HVKIT_BOTH(x86::cr3_root(v, paging_mode::two_level, 46).value() == 0x1234'5000);
  HVKIT_BOTH(x86::cr3_root(v, paging_mode::pae, 46).value() == 0x1234'5660);
  // 4-level, MAXPHYADDR 46: bits 45:12.
  HVKIT_BOTH(x86::cr3_root(cr3{0x8000'1234'5678'9018ull}, paging_mode::four_level, 46).value() == 0x1234'5678'9000ull);
  // MAXPHYADDR 40 (Bochs): bits 39:12.
  HVKIT_BOTH(x86::cr3_root(cr3{0x0000'ff12'3456'7fffull}, paging_mode::five_level, 40).value() == 0x12'3456'7000ull);
  EXPECT_EQ(x86::cr3_root(rt(cr3{0x1018}), rt(paging_mode::four_level), rt(52u)).value(), 0x1000u);
}

TEST(cr3, pcid_and_cache_bits) {
  constexpr cr3 v{0x1234'5018};  // PCD=1, PWT=1, bits 11:0 = 0x018
  HVKIT_BOTH(x86::cr3_pcid(v, cr4::pcide, paging_mode::four_level) == 0x18);
  HVKIT_BOTH(x86::cr3_pcid(v, cr4{}, paging_mode::four_level) == 0);
  HVKIT_BOTH(x86::cr3_pcid(v, cr4::pcide, paging_mode::pae) == 0);
  HVKIT_BOTH(x86::cr3_cache_bits(v, cr4{}, paging_mode::four_level).pwt);
  HVKIT_BOTH(x86::cr3_cache_bits(v, cr4{}, paging_mode::four_level).pcd);
  HVKIT_BOTH(!x86::cr3_cache_bits(v, cr4::pcide, paging_mode::four_level).pwt);
  HVKIT_BOTH(!x86::cr3_cache_bits(v, cr4{}, paging_mode::pae).pcd);
  HVKIT_BOTH(x86::cr3_cache_bits(v, cr4{}, paging_mode::two_level).pcd);
  EXPECT_EQ(x86::cr3_pcid(rt(cr3{0xfff}), rt(cr4::pcide), rt(paging_mode::five_level)), 0xfff);
}
