// SPDX-License-Identifier: MIT
// The Hana field lists: group sizes counted by hand from SDM Appendix B, copy and diff
// between two software VMCSes, the compile-time VMCS-shadowing bitmaps (SDM 25.6.15:
// bit n <-> encoding bits 14:0 = n, 1 = exit), and the hosted dump.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <hvkit/vmx/field_lists.hpp>
#include <hvkit/vmx/hosted/dump.hpp>
#include <hvkit/vmx/soft_vmcs.hpp>

#include "runtime.hpp"

namespace vmx = hvkit::vmx;
namespace lists = hvkit::vmx::lists;
namespace f = hvkit::vmx::fields;

// Counted by hand from Appendix B: guest 11 + 13 + 23 + 23; host 7 + 4 + 1 + 15;
// exit information 1 + 8 + 6; controls 5 + 35 + 19 + 8; plus the newer fields: guest 8
// (IA32_FRED_*), host 8 (IA32_FRED_*), exit information 1 (original event data), controls 3
// (IA32_SPEC_CTRL mask and shadow, injected event data).
static_assert(lists::size_v<decltype(lists::guest_state)> == 70 + 8);
static_assert(lists::size_v<decltype(lists::host_state)> == 27 + 8);
static_assert(lists::size_v<decltype(lists::exit_info)> == 15 + 1);
static_assert(lists::size_v<decltype(lists::controls)> == 67 + 3);
static_assert(lists::size_v<decltype(lists::all)> == 179 + 20);

namespace {
constexpr auto guest_read_bitmap = lists::make_vmread_bitmap(lists::guest_state);
constexpr auto exit_write_bitmap = lists::make_vmwrite_bitmap(lists::exit_info);
constexpr auto exit_read_bitmap = lists::make_vmread_bitmap(lists::exit_info);
constexpr bool bit(const lists::shadow_bitmap& b, std::uint32_t n) { return (b[n / 8] >> (n % 8)) & 1; }
std::size_t clear_bits(const lists::shadow_bitmap& b) {
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < 4096 * 8; ++i) n += !bit(b, i);
  return n;
}
}  // namespace

TEST(vmx_field_lists, shadow_bitmaps) {
  // GUEST_RIP 0x681e: byte 0xd03, bit 6 -> clear (read from the shadow VMCS).
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x681e) && (guest_read_bitmap[0xd03] & 0x40) == 0);
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x2800) && !bit(guest_read_bitmap, 0x2801));  // link pointer, full and HIGH
  HVKIT_BOTH(bit(guest_read_bitmap, 0x6c16));  // HOST_RIP still exits
  HVKIT_BOTH(bit(guest_read_bitmap, 0x6801));  // not an encoding
  // 78 guest fields + 21 HIGH halves of the 64-bit ones (13 of Appendix B + 8 IA32_FRED_*).
  EXPECT_EQ(clear_bits(guest_read_bitmap), 78u + 21u);
  // Exit information: readable from the shadow (16 + 2 HIGH: guest-physical address and
  // original event data), never writable.
  EXPECT_EQ(clear_bits(exit_read_bitmap), 16u + 2u);
  EXPECT_EQ(clear_bits(exit_write_bitmap), 0u);
  const auto guest_write = lists::make_vmwrite_bitmap(lists::guest_state);
  EXPECT_EQ(clear_bits(guest_write), 78u + 21u);
  HVKIT_BOTH(!bit(guest_read_bitmap, 0x281a) && !bit(guest_read_bitmap, 0x281b));  // IA32_FRED_CONFIG, full and HIGH
}

TEST(vmx_field_lists, copy_and_diff) {
  vmx::soft_vmcs a, b;
  std::size_t i = 0;
  lists::for_each_field(lists::all, [&](auto fld) {
    using F = decltype(fld);
    a.store(F::encoding, 0x0101'0101'0101'0101ull * (++i));
  });
  ASSERT_TRUE(lists::copy(lists::guest_state, a, b));
  // Guest fields equal, host fields untouched.
  EXPECT_EQ(b.peek(f::guest_rip), a.peek(f::guest_rip));
  EXPECT_EQ(b.peek(f::guest_cs_selector), a.peek(f::guest_cs_selector));
  EXPECT_EQ(b.peek(f::host_rip), 0u);
  auto d = lists::diff(lists::all, a, b, [](auto, auto, auto) {});
  ASSERT_TRUE(d);
  EXPECT_EQ(d.value(), 199u - 78u);
  // Exit information goes through store() on a software destination.
  ASSERT_TRUE(lists::copy(lists::exit_info, a, b));
  EXPECT_EQ(b.peek(f::exit_qualification), a.peek(f::exit_qualification));
  std::size_t host_diffs = 0;
  auto d2 = lists::diff(lists::host_state, a, b, [&](auto fld, auto va, auto vb) {
    ++host_diffs;
    EXPECT_NE(va, vb);
    EXPECT_EQ(decltype(fld)::type, vmx::field_type::host);
  });
  EXPECT_EQ(d2.value(), 35u);
  EXPECT_EQ(host_diffs, 35u);
}

TEST(vmx_field_lists, hosted_dump) {
  vmx::soft_vmcs v;
  v.store(f::guest_rip, std::uint64_t{0xfff0});
  v.store(f::guest_cs_selector, std::uint16_t{0xf000});
  std::FILE* tmp = std::tmpfile();
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(vmx::hosted::dump(tmp, lists::guest_state, v), 78u);
  std::rewind(tmp);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, tmp)) text += buf;
  std::fclose(tmp);
  EXPECT_NE(text.find("guest_rip"), std::string::npos);
  EXPECT_NE(text.find("(0x681e) = 0x000000000000fff0"), std::string::npos);
  EXPECT_NE(text.find("(0x0802) = 0xf000"), std::string::npos);
}
