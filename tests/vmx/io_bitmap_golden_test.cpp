// SPDX-License-Identifier: MIT
// vmx::io_bitmaps against SDM Vol. 3C 26.1.3 and 25.6.4, typed by hand:
//   25.6.4: "I/O bitmap A contains one bit for each I/O port in the range 0000H through 7FFFH;
//   I/O bitmap B contains bits for ports in the range 8000H through FFFFH."
//   26.1.3: "If the “use I/O bitmaps” VM-execution control is 1, the instruction causes a VM
//   exit if it attempts to access an I/O port corresponding to a bit set to 1 in the
//   appropriate I/O bitmap ... If an I/O operation “wraps around” the 16-bit I/O-port space
//   (accesses ports FFFFH and 0000H), the I/O instruction causes a VM exit (the “unconditional
//   I/O exiting” VM-execution control is ignored if the “use I/O bitmaps” VM-execution
//   control is 1)."
// IN and OUT access 1, 2 or 4 bytes (bitmaps_test.cpp checks every port at those sizes).
// exits() also answers for other sizes (the header's rule: any bit of ports p .. p+N-1, or a
// wrap): a 3-byte access and sizes 5-16 are checked here against the same rule, port by port.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include <hvkit/vmx/io_bitmap.hpp>

namespace vmx = hvkit::vmx;

namespace {

unsigned rt(unsigned v) {
  volatile unsigned x = v;
  return x;
}

TEST(vmx_io_bitmap_golden, bitmap_a_and_b_bit_positions) {
  // Port p's bit: bitmap A bit p for p < 8000H, bitmap B bit p - 8000H otherwise (25.6.4).
  for (std::uint32_t p : {0x0000u, 0x0007u, 0x0008u, 0x03f8u, 0x7fffu, 0x8000u, 0x8001u, 0xcf8u, 0xfffeu, 0xffffu}) {
    auto b = vmx::io_bitmaps::none_exit();
    b.set_intercept(static_cast<std::uint16_t>(p), true);
    const auto& map = p < 0x8000 ? b.a() : b.b();
    const std::uint32_t bit = p & 0x7fff;
    EXPECT_EQ(map[bit / 8], 1u << (bit % 8)) << std::hex << p;
    EXPECT_TRUE(b.port_bit(static_cast<std::uint16_t>(p)));
    EXPECT_EQ(b.port_byte(static_cast<std::uint16_t>(p)), 1u << (bit % 8));
    // No other byte of either bitmap is touched.
    unsigned set = 0;
    for (auto x : b.a()) set += x != 0;
    for (auto x : b.b()) set += x != 0;
    EXPECT_EQ(set, 1u) << std::hex << p;
    b.set_intercept(static_cast<std::uint16_t>(p), false);
    EXPECT_FALSE(b.port_bit(static_cast<std::uint16_t>(p)));
    EXPECT_EQ(map[bit / 8], 0u);
  }
  // set_intercept_range stops at FFFFH (no wrap to 0000H).
  auto r = vmx::io_bitmaps::none_exit();
  r.set_intercept_range(0xfffe, 4, true);
  EXPECT_TRUE(r.port_bit(0xfffe));
  EXPECT_TRUE(r.port_bit(0xffff));
  EXPECT_FALSE(r.port_bit(0x0000));
  EXPECT_FALSE(r.port_bit(0x0001));
  // all_exit: every bit of both bitmaps is 1.
  const auto all = vmx::io_bitmaps::all_exit();
  for (std::uint32_t p = 0; p <= 0xffff; p += 0x101) EXPECT_TRUE(all.exits(static_cast<std::uint16_t>(p), 1));
}

TEST(vmx_io_bitmap_golden, any_size_is_any_bit_or_a_wrap) {
  std::mt19937 rng(25);
  auto b = vmx::io_bitmaps::none_exit();
  static bool model[0x10000];
  for (int i = 0; i < 2000; ++i) {
    const auto p = static_cast<std::uint16_t>(rng());
    b.set_intercept(p, true);
    model[p] = true;
  }
  for (unsigned p : {0x7ffcu, 0x8003u, 0xfff0u}) {
    b.set_intercept(static_cast<std::uint16_t>(p), true);
    model[p] = true;
  }
  unsigned checked = 0;
  for (std::uint32_t p = 0; p <= 0xffff; ++p) {
    for (unsigned size : {3u, 5u, 6u, 7u, 8u, 16u}) {
      bool want = p + size - 1 > 0xffff;  // accesses FFFFH and 0000H: wraps, exits
      for (unsigned i = 0; i < size && p + i <= 0xffff; ++i) want = want || model[p + i];
      ASSERT_EQ(b.exits(static_cast<std::uint16_t>(p), rt(size)), want) << std::hex << p << " size " << size;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6u * 0x10000u);
  // An empty bitmap: only a wrap exits, whatever the size.
  const auto none = vmx::io_bitmaps::none_exit();
  EXPECT_FALSE(none.exits(0xfff8, rt(8)));
  EXPECT_TRUE(none.exits(0xfff9, rt(8)));
  EXPECT_FALSE(none.exits(0xfffd, rt(3)));
  EXPECT_TRUE(none.exits(0xfffe, rt(3)));
}

}  // namespace
