// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <cstdint>
#include <hvkit/x86/bitfield.hpp>

#include "runtime.hpp"

namespace x86 = hvkit::x86;
using hvkit::test::rt;

// The IA32_VMX_BASIC layout (SDM Appendix A.1) as a worked example: revision id 30:0,
// VMCS region size 44:32, memory type 53:50.
using revision = x86::bitfield<std::uint64_t, 0, 31, std::uint32_t>;
using region_size = x86::bitfield<std::uint64_t, 32, 13, std::uint16_t>;
using memory_type = x86::bitfield<std::uint64_t, 50, 4, std::uint8_t>;
using true_ctls = x86::bitflag<std::uint64_t, 55>;
static_assert(x86::fields_disjoint<revision, region_size, memory_type, true_ctls>());
static_assert(!x86::fields_disjoint<revision, x86::bitfield<std::uint64_t, 30, 2>>());

TEST(bitfield, decodes_bochs_vmx_basic) {
  // Bochs corei7_skylake_x IA32_VMX_BASIC = 0x00d810000000002b (docs/bochs-and-qemu-facts.md).
  constexpr std::uint64_t basic = 0x00d8'1000'0000'002bull;
  HVKIT_BOTH(revision::get(basic) == 0x2b);
  HVKIT_BOTH(region_size::get(basic) == 0x1000);
  HVKIT_BOTH(memory_type::get(basic) == 6);  // write-back
  HVKIT_BOTH(true_ctls::get(basic));
  EXPECT_EQ(revision::get(rt(basic)), 0x2bu);
  EXPECT_EQ(region_size::get(rt(basic)), 0x1000u);
  EXPECT_EQ(memory_type::get(rt(basic)), 6u);
  EXPECT_TRUE(true_ctls::get(rt(basic)));
}

TEST(bitfield, set_replaces_only_its_bits) {
  HVKIT_BOTH(memory_type::set(~0ull, 0) == 0xffc3'ffff'ffff'ffffull);
  HVKIT_BOTH(region_size::set(0, 0x1fff) == 0x0000'1fff'0000'0000ull);
  EXPECT_EQ(memory_type::set(rt(~0ull), rt<std::uint8_t>(0)), 0xffc3'ffff'ffff'ffffull);
  EXPECT_EQ(memory_type::mask, 0x003c'0000'0000'0000ull);
}

TEST(bitfield, too_wide_values_are_reported_not_truncated) {
  std::uint64_t w = 0x1234;
  EXPECT_FALSE(memory_type::try_set(w, rt<std::uint8_t>(16)));
  EXPECT_EQ(w, 0x1234u);
  EXPECT_TRUE(memory_type::try_set(w, rt<std::uint8_t>(15)));
  EXPECT_EQ(w, 0x003c'0000'0000'1234ull);
  static_assert(!memory_type::fits(16) && memory_type::fits(15));
}

TEST(bitfield, full_width_field) {
  using all = x86::bitfield<std::uint64_t, 0, 64>;
  HVKIT_BOTH(all::max_raw == ~0ull && all::mask == ~0ull);
  EXPECT_EQ(all::get(rt(0x8000'0000'0000'0001ull)), 0x8000'0000'0000'0001ull);
}

TEST(bitfield, bit_range) {
  HVKIT_BOTH(x86::bit_range(51, 12) == 0x000f'ffff'ffff'f000ull);
  HVKIT_BOTH(x86::bit_range(63, 63) == 0x8000'0000'0000'0000ull);
  HVKIT_BOTH(x86::bit_range(63, 0) == ~0ull);
  EXPECT_EQ(x86::bit_range(rt(8u), rt(7u)), 0x180u);
}
