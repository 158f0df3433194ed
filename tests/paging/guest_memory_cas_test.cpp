// SPDX-License-Identifier: MIT
// The compare-exchange of paging/guest_memory.hpp (the walkers' accessed/dirty update) on a
// flat view whose host buffer is not aligned to the entry size (the byte path), and through
// callback_memory. The rule: "compare the value at the address with the expected one; if
// equal, store the desired value and answer true, else leave memory as it is and answer
// false" (SDM Vol. 2A, CMPXCHG: "Compares the value in the AL, AX, EAX, or RAX register with
// the first operand (destination operand). If the two values are equal, the second operand
// (source operand) is loaded into the destination operand."), little-endian (SDM Vol. 1,
// 1.3.1: "the IA-32 and Intel 64 architectures are little endian"); an access outside the
// view is unbacked.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>

namespace paging = hvkit::paging;
namespace x86 = hvkit::x86;

namespace {

TEST(paging_guest_memory_cas, unaligned_host_buffer_byte_path) {
  std::vector<std::uint8_t> raw(64 + 1, 0);
  std::uint8_t* odd = raw.data() + 1;  // never 4- or 8-byte aligned
  if ((reinterpret_cast<std::uintptr_t>(odd) % 4) == 0) odd = raw.data() + 2;
  paging::flat_memory m{odd, 32, x86::gpa{0x1000}};
  // Little endian: 0x11223344 at 1000H is the bytes 44 33 22 11.
  const std::uint8_t bytes[] = {0x44, 0x33, 0x22, 0x11, 0x88, 0x77, 0x66, 0x55};
  for (unsigned i = 0; i < 8; ++i) odd[i] = bytes[i];
  auto r = m.cmpxchg32(x86::gpa{0x1000}, 0x11223344, 0x11223364);  // sets bit 5 (A)
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r.value());
  EXPECT_EQ(odd[0], 0x64);
  EXPECT_EQ(odd[1], 0x33);
  // Not equal: memory unchanged, false.
  r = m.cmpxchg32(x86::gpa{0x1000}, 0x11223344, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r.value());
  EXPECT_EQ(odd[0], 0x64);
  // 64-bit: the 8 bytes at 1000H are 0x5566778811223364.
  auto r64 = m.cmpxchg64(x86::gpa{0x1000}, 0x5566778811223364ull, 0x8000000000000000ull | 0x5566778811223364ull);
  ASSERT_TRUE(r64.has_value());
  EXPECT_TRUE(r64.value());
  EXPECT_EQ(odd[7], 0xd5);
  r64 = m.cmpxchg64(x86::gpa{0x1000}, 0, 1);
  ASSERT_TRUE(r64.has_value());
  EXPECT_FALSE(r64.value());
  EXPECT_EQ(odd[7], 0xd5);
  // The last whole entry of the view, and one byte past it.
  EXPECT_TRUE(m.cmpxchg64(x86::gpa{0x1018}, 0, 7).value());
  EXPECT_EQ(odd[0x18], 7);
  EXPECT_FALSE(m.cmpxchg64(x86::gpa{0x1019}, 0, 7).has_value());
  EXPECT_EQ(m.cmpxchg32(x86::gpa{0x101d}, 0, 7).error(), paging::memory_error::unbacked);
  EXPECT_EQ(m.cmpxchg32(x86::gpa{0xffc}, 0, 7).error(), paging::memory_error::unbacked);
}

TEST(paging_guest_memory_cas, callback_memory_passes_size_and_values) {
  struct call {
    std::uint64_t a;
    unsigned bytes;
    std::uint64_t e, d;
  };
  std::vector<call> calls;
  auto read = [](x86::gpa, unsigned, std::uint64_t& out) {
    out = 0;
    return true;
  };
  auto cas = [&](x86::gpa a, unsigned bytes, std::uint64_t e, std::uint64_t d) -> hvkit::result<bool, paging::memory_error> {
    calls.push_back({a.value(), bytes, e, d});
    if (a.value() >= 0x10000) return hvkit::unexpected(paging::memory_error::unbacked);
    return e == 1;
  };
  paging::callback_memory m{read, cas};
  EXPECT_TRUE(m.cmpxchg32(x86::gpa{0x2000}, 1, 0x21).value());
  EXPECT_FALSE(m.cmpxchg64(x86::gpa{0x2008}, 2, 0x61).value());
  EXPECT_EQ(m.cmpxchg32(x86::gpa{0x20000}, 1, 0x21).error(), paging::memory_error::unbacked);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].a, 0x2000u);
  EXPECT_EQ(calls[0].bytes, 4u);
  EXPECT_EQ(calls[0].e, 1u);
  EXPECT_EQ(calls[0].d, 0x21u);
  EXPECT_EQ(calls[1].bytes, 8u);
  EXPECT_EQ(calls[1].e, 2u);
  EXPECT_EQ(calls[1].d, 0x61u);
}

}  // namespace
