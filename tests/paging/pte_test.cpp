// SPDX-License-Identifier: MIT
// paging::pte address accessors and builder against entries typed by hand from the SDM:
// 4-level PTE/PDE/PDPTE formats (Tables 4-15 to 4-20: address in bits M-1:12, M-1:21 for a
// 2 MiB PDE, M-1:30 for a 1 GiB PDPTE, PAT of a large page in bit 12, PKEY in 62:59, XD 63)
// and 32-bit paging's 4 MiB PDE with PSE-36 (Table 4-4: bits 31:22, and 20:13 -> 39:32).
#include <gtest/gtest.h>

#include <hvkit/paging/pte.hpp>

#include "runtime.hpp"

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;
using paging::pte;

TEST(pte, address_and_frame) {
  // A PTE for 0xf1'2345'6000 with P, RW, A, D, PKEY 5 and XD; MAXPHYADDR 52 and 36.
  constexpr pte e{0xa800'00f1'2345'6063ull};
  HVKIT_BOTH(e.address(52) == x86::gpa{0xf1'2345'6000ull});
  HVKIT_BOTH(e.frame(52) == x86::gfn{0xf1'2345'6ull});
  HVKIT_BOTH(e.address(36) == x86::gpa{0x1'2345'6000ull});  // bits 35:12 only
  HVKIT_BOTH(e.pkey() == 5 && e.test(pte::xd) && e.test(pte::dirty));
  // A 2 MiB PDE: PS (bit 7) and PAT (bit 12) set; the page base ignores bit 12.
  constexpr pte pde{0x0000'0001'4020'1083ull};
  HVKIT_BOTH(pde.page_address(x86::page_size_2m, 52) == x86::gpa{0x1'4020'0000ull});
  HVKIT_BOTH(pde.test(pte::pat_large));
  // A 1 GiB PDPTE at 0x40'c000'0000.
  constexpr pte pdpte{0x0000'0040'c000'0083ull};
  HVKIT_BOTH(pdpte.page_address(x86::page_size_1g, 52) == x86::gpa{0x40'c000'0000ull});
  // 32-bit paging, 4 MiB PDE: bits 31:22 = 0x3fc00000 >> 22, PSE-36 bits 20:13 = 0x12.
  constexpr pte pde32{0xffc2'4083ull};
  HVKIT_BOTH(pde32.page_address_4m(40) == x86::gpa{0x12'ffc0'0000ull});
  HVKIT_BOTH(pde32.page_address_4m(36) == x86::gpa{0x2'ffc0'0000ull});  // bits 35:32 only
  EXPECT_EQ(hvkit::test::rt(e).address(52).value(), 0xf1'2345'6000ull);
}

TEST(pte, builder) {
  constexpr pte table = pte::make(x86::gpa{0x0012'3000}, pte::present | pte::writable | pte::user);
  HVKIT_BOTH(table.raw() == 0x0012'3007ull);
  constexpr pte big = pte::make_large(x86::gpa{0x4000'0000}, x86::page_size_1g, pte::present | pte::writable);
  HVKIT_BOTH(big.raw() == 0x4000'0083ull);
  constexpr pte keyed = pte::make(x86::gpa{0x5000}, pte::present | pte::xd).with_pkey(3);
  HVKIT_BOTH(keyed.raw() == 0x9800'0000'0000'5001ull);
  constexpr pte moved = keyed.with_address(x86::gpa{0xf'ffff'f000});
  HVKIT_BOTH(moved.raw() == 0x9800'000f'ffff'f001ull);
  HVKIT_BOTH(moved.address(52) == x86::gpa{0xf'ffff'f000} && moved.pkey() == 3);
  EXPECT_EQ(hvkit::test::rt(table).address(52), x86::gpa{0x0012'3000});
}
