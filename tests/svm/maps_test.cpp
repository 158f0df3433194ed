// SPDX-License-Identifier: MIT
// MSR and I/O permission maps: bit positions typed from AMD APM Vol. 2 15.11 (three MSR
// ranges at byte offsets 000h, 800h, 1000h; two bits per MSR, read = even, write = odd) and
// 15.10.1 (one bit per port; an n-byte access checks n consecutive bits).
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <hvkit/svm/io_permission_map.hpp>
#include <hvkit/svm/msr_permission_map.hpp>

namespace svm = hvkit::svm;
using hvkit::x86::msr_access;

namespace {

struct msr_row {
  std::uint32_t msr;
  msr_access access;
  std::size_t byte;
  unsigned bit;
};
// Byte = range base + (msr & 1FFFh) * 2 / 8, bit = ((msr & 1FFFh) * 2) % 8 (+1 for write): worked by hand.
constexpr msr_row msr_rows[] = {
    {0x0000'0000, msr_access::read, 0x000, 0},  {0x0000'0000, msr_access::write, 0x000, 1},
    {0x0000'0001, msr_access::read, 0x000, 2},  {0x0000'0003, msr_access::write, 0x000, 7},
    {0x0000'0010, msr_access::read, 0x004, 0},  // IA32_TIME_STAMP_COUNTER
    {0x0000'0174, msr_access::write, 0x05d, 1},  // IA32_SYSENTER_CS
    {0x0000'0277, msr_access::read, 0x09d, 6},  // IA32_PAT
    {0x0000'1fff, msr_access::read, 0x7ff, 6},  {0x0000'1fff, msr_access::write, 0x7ff, 7},
    {0xc000'0080, msr_access::read, 0x820, 0},  {0xc000'0080, msr_access::write, 0x820, 1},  // EFER
    {0xc000'0102, msr_access::write, 0x840, 5},  // KERNEL_GS_BASE
    {0xc000'1fff, msr_access::write, 0xfff, 7},
    {0xc001'0000, msr_access::read, 0x1000, 0},  // first MSR of the third range
    {0xc001'0117, msr_access::write, 0x1045, 7},  // VM_HSAVE_PA
    {0xc001'1fff, msr_access::write, 0x17ff, 7},
};

TEST(MsrPermissionMap, PositionsMatchTheApm) {
  for (const auto& r : msr_rows) {
    auto p = svm::msr_permission_map::position(r.msr, r.access);
    ASSERT_TRUE(p.has_value()) << std::hex << r.msr;
    EXPECT_EQ(p.value().byte, r.byte) << std::hex << r.msr;
    EXPECT_EQ(p.value().bit, r.bit) << std::hex << r.msr;
    // Setting exactly that bit in an empty map intercepts exactly that access.
    auto m = svm::msr_permission_map::intercept_none();
    ASSERT_TRUE(m.set_intercept(r.msr, r.access, true).has_value());
    EXPECT_EQ(m.bytes()[r.byte], 1u << r.bit);
    EXPECT_TRUE(m.intercepts(r.msr, r.access));
    const auto other = r.access == msr_access::read ? msr_access::write : msr_access::read;
    EXPECT_FALSE(m.intercepts(r.msr, other));
  }
}

TEST(MsrPermissionMap, OutsideTheRangesAlwaysIntercepted) {
  constexpr std::uint32_t outside[] = {0x0000'2000, 0x4000'0000, 0xbfff'ffff, 0xc000'2000, 0xc000'ffff,
                                       0xc001'2000, 0xc002'0000, 0xffff'ffff};
  const auto none = svm::msr_permission_map::intercept_none();
  for (auto msr : outside) {
    EXPECT_FALSE(svm::msr_permission_map::position(msr, msr_access::read).has_value()) << std::hex << msr;
    EXPECT_TRUE(none.intercepts(msr, msr_access::read)) << std::hex << msr;
    EXPECT_TRUE(none.intercepts(msr, msr_access::write)) << std::hex << msr;
    auto m = none;
    EXPECT_FALSE(m.set_intercept(msr, msr_access::read, false).has_value());
  }
}

TEST(MsrPermissionMap, InterceptAllLeavesTheReservedQuarterClear) {
  const auto all = svm::msr_permission_map::intercept_all();
  EXPECT_EQ(all.bytes()[0x17ff], 0xff);
  EXPECT_EQ(all.bytes()[0x1800], 0x00);
  auto m = all;
  ASSERT_TRUE(m.pass_through(0xc000'0100).has_value());  // FS_BASE
  EXPECT_FALSE(m.intercepts(0xc000'0100, msr_access::read));
  EXPECT_FALSE(m.intercepts(0xc000'0100, msr_access::write));
  EXPECT_TRUE(m.intercepts(0xc000'0101, msr_access::read));
  EXPECT_EQ(m.bytes()[0x840], 0xfc);  // C000_0100h-C000_0103h share byte 840h; FS_BASE is bits 1:0
}

TEST(IoPermissionMap, OneBitPerPort) {
  struct row {
    std::uint16_t port;
    std::size_t byte;
    unsigned bit;
  };
  constexpr row rows[] = {{0x0000, 0x0000, 0}, {0x0060, 0x000c, 0}, {0x0064, 0x000c, 4},
                          {0x03f8, 0x007f, 0}, {0x0cf8, 0x019f, 0}, {0xffff, 0x1fff, 7}};
  for (const auto& r : rows) {
    auto m = svm::io_permission_map::intercept_none();
    m.set_intercept(r.port, true);
    EXPECT_EQ(m.bytes()[r.byte], 1u << r.bit) << r.port;
    EXPECT_TRUE(m.intercepts(r.port, 1));
  }
}

TEST(IoPermissionMap, MultiByteAccessesCheckEveryPort) {
  auto m = svm::io_permission_map::intercept_none();
  m.set_intercept(0x71, true);
  EXPECT_TRUE(m.intercepts(0x70, 2));   // 70h-71h
  EXPECT_FALSE(m.intercepts(0x70, 1));
  EXPECT_TRUE(m.intercepts(0x6e, 4));   // 6Eh-71h
  EXPECT_FALSE(m.intercepts(0x6d, 4));  // 6Dh-70h
  EXPECT_FALSE(m.intercepts(0x72, 4));
}

TEST(IoPermissionMap, AccessesAtTheTopReachTheThirdPage) {
  auto m = svm::io_permission_map::intercept_none();
  EXPECT_FALSE(m.intercepts(0xfffe, 4));
  // Bits 10000h-10002h live in byte 2000h, the first byte of the third 4 KiB page.
  auto all = svm::io_permission_map::intercept_all();
  EXPECT_EQ(all.bytes()[0x2000], 0xff);
  all.set_intercept(0xfffc, 0xffff, false);
  EXPECT_FALSE(all.intercepts(0xfffc, 4));
  EXPECT_TRUE(all.intercepts(0xfffe, 4));  // FFFEh-10001h: the bits past FFFFh are set
  EXPECT_TRUE(all.intercepts(0xffff, 2));
  EXPECT_FALSE(all.intercepts(0xffff, 1));
}

}  // namespace

// Every port and size against a rule model written from APM 15.10.1 ("the processor checks
// the bits for every port the access touches"): a random map plus the top ports.
TEST(IoPermissionMap, EveryPortAndSizeAgainstRuleModel) {
  std::mt19937 rng(27);
  auto m = svm::io_permission_map::intercept_none();
  std::vector<bool> model(0x10000 + 3, false);
  for (int i = 0; i < 300; ++i) {
    const auto p = static_cast<std::uint16_t>(rng());
    m.set_intercept(p, true);
    model[p] = true;
  }
  for (unsigned p : {0x7u, 0x8u, 0xfffeu, 0xffffu}) {
    m.set_intercept(static_cast<std::uint16_t>(p), true);
    model[p] = true;
  }
  // Sizes 0 and 3 (no IN/OUT has them) are answered bit by bit as well.
  for (std::uint32_t p = 0; p <= 0xffff; ++p)
    for (unsigned size : {0u, 1u, 2u, 3u, 4u}) {
      bool expect = false;
      for (unsigned i = 0; i < size; ++i) expect = expect || model[p + i];  // bits past FFFFh are clear here
      ASSERT_EQ(m.intercepts(static_cast<std::uint16_t>(p), size), expect) << p << " " << size;
    }
}

