// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <type_traits>
#include <hvkit/x86/address.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;

static_assert(!std::is_convertible_v<x86::gpa, x86::hpa>);
static_assert(!std::is_convertible_v<x86::gva, x86::gpa>);
static_assert(!std::is_convertible_v<std::uint64_t, x86::gpa>, "construction from a raw number is explicit");
static_assert(!std::is_same_v<x86::gfn, x86::hfn>);
static_assert(sizeof(x86::gpa) == 8 && std::is_trivially_copyable_v<x86::gpa>);

TEST(address, frame_numbers_and_offsets) {
  HVKIT_BOTH(x86::gpa_to_gfn(x86::gpa{0x1234'5678}).value() == 0x12345);
  HVKIT_BOTH(x86::gfn_to_gpa(x86::gfn{0x12345}).value() == 0x1234'5000);
  HVKIT_BOTH(x86::offset_in_page(x86::gpa{0x1234'5678}) == 0x678);
  HVKIT_BOTH(x86::page_base(x86::gva{0xffff'8000'0000'1fffull}).value() == 0xffff'8000'0000'1000ull);
  HVKIT_BOTH((x86::gpa{0x2000} - x86::gpa{0x1000}) == 0x1000);
  HVKIT_BOTH((x86::hpa{0x1000} + 0x10).value() == 0x1010);
  EXPECT_EQ(x86::gpa_to_gfn(rt(x86::gpa{0xfff})).value(), 0u);
  EXPECT_EQ(x86::hpa_to_hfn(rt(x86::hpa{0x7000})).value(), 7u);
}

TEST(address, canonical_48_and_57) {
  // SDM 3.3.7.1: bits 63:47 equal (48-bit) or 63:56 equal (57-bit).
  using x86::gva, x86::linear_width;
  HVKIT_BOTH(x86::is_canonical(gva{0x0000'7fff'ffff'ffffull}, linear_width::la48));
  HVKIT_BOTH(!x86::is_canonical(gva{0x0000'8000'0000'0000ull}, linear_width::la48));
  HVKIT_BOTH(x86::is_canonical(gva{0xffff'8000'0000'0000ull}, linear_width::la48));
  HVKIT_BOTH(!x86::is_canonical(gva{0xfffe'8000'0000'0000ull}, linear_width::la48));
  HVKIT_BOTH(x86::is_canonical(gva{0x0000'8000'0000'0000ull}, linear_width::la57));
  HVKIT_BOTH(x86::is_canonical(gva{0x00ff'ffff'ffff'ffffull}, linear_width::la57));
  HVKIT_BOTH(!x86::is_canonical(gva{0x0100'0000'0000'0000ull}, linear_width::la57));
  HVKIT_BOTH(x86::is_canonical(gva{0xff00'0000'0000'0000ull}, linear_width::la57));
  HVKIT_BOTH(!x86::is_canonical(gva{0xfeff'ffff'ffff'ffffull}, linear_width::la57));
  HVKIT_BOTH(x86::canonicalize(gva{0x0000'8000'0000'0000ull}, linear_width::la48).value() == 0xffff'8000'0000'0000ull);
  EXPECT_FALSE(x86::is_canonical(rt(gva{0x0000'8000'0000'0000ull}), rt(linear_width::la48)));
  EXPECT_TRUE(x86::is_canonical(rt(gva{0x0000'8000'0000'0000ull}), rt(linear_width::la57)));
}

TEST(address, physical_address_mask) {
  // MAXPHYADDR 32..52 (SDM 4.1.4: at most 52; 32 without CPUID.80000008H and PAE).
  HVKIT_BOTH(!x86::is_valid_maxphyaddr(31) && x86::is_valid_maxphyaddr(32) && x86::is_valid_maxphyaddr(52));
  HVKIT_BOTH(!x86::is_valid_maxphyaddr(53) && !x86::is_valid_maxphyaddr(0));
  HVKIT_BOTH(x86::physical_address_mask(40) == 0xff'ffff'ffffull);
  HVKIT_BOTH(x86::physical_address_mask(52) == 0xf'ffff'ffff'ffffull);
  EXPECT_EQ(x86::physical_address_mask(rt(46u)), 0x3fff'ffff'ffffull);
}

TEST(address, bogus_linear_width_is_not_ub) {
  // Only 48 and 57 exist; any other value of the enum's storage is treated as 48 bits
  // (never a shift by 64, which UBSan would report).
  const auto bogus = static_cast<x86::linear_width>(hvkit::test::rt<std::uint8_t>(64));
  EXPECT_TRUE(x86::is_canonical(x86::gva{0xffff'8000'0000'0000ull}, bogus));
  EXPECT_FALSE(x86::is_canonical(x86::gva{0x0000'8000'0000'0000ull}, bogus));
  EXPECT_EQ(x86::canonicalize(x86::gva{0x0000'8000'0000'0000ull}, bogus).value(), 0xffff'8000'0000'0000ull);
}
