// SPDX-License-Identifier: MIT
// emulate::flat_ram, the guest RAM of the emulator and the walker, against a model written
// here: read/write/cmpxchg of every size 0..16 at every offset around both ends of the buffer
// (guest-physical base 0x10'0000), aligned and not, with the expected value equal to the
// memory, different in one byte, or equal in its low `bytes` bytes only. The model: an access
// is backed when it lies inside [base, base + size); cmpxchg takes sizes 1, 2, 4 and 8
// (the operand sizes of CMPXCHG and of a paging-entry update), compares the low `bytes` bytes
// of `expected` with memory (little-endian) and, if equal, stores the low `bytes` bytes of
// `desired`; any other size is unbacked.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <hvkit/emulate/platform.hpp>

namespace {
using namespace hvkit;

constexpr std::uint64_t base = 0x10'0000;
constexpr std::size_t size = 64;

std::uint64_t le(const std::vector<std::uint8_t>& m, std::size_t at, unsigned n) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= std::uint64_t{m[at + i]} << (8 * i);
  return v;
}
std::uint64_t low(std::uint64_t v, unsigned n) { return n >= 8 ? v : v & ((std::uint64_t{1} << (8 * n)) - 1); }

TEST(flat_ram, read_write_cmpxchg_against_the_model) {
  unsigned long long n = 0;
  for (unsigned bytes = 0; bytes <= 16; ++bytes)
    for (std::uint64_t gpa = base - 10; gpa <= base + size + 2; ++gpa)
      for (int how = 0; how < 3; ++how) {
        std::vector<std::uint8_t> mem(size), model(size);
        for (std::size_t i = 0; i < size; ++i) mem[i] = model[i] = static_cast<std::uint8_t>(0x31 * i + 7);
        emulate::flat_ram ram(mem.data(), mem.size(), x86::gpa{base});
        const bool inside = gpa >= base && gpa + bytes <= base + size;
        const std::size_t off = static_cast<std::size_t>(gpa - base);
        // the expected value: equal to memory, one byte off, or equal with high garbage
        std::uint64_t current = inside ? le(model, off, bytes < 8 ? bytes : 8) : 0;
        std::uint64_t expected = current;
        if (how == 1) expected ^= 0x40;
        if (how == 2 && bytes < 8) expected |= ~std::uint64_t{0} << (8 * bytes);
        const std::uint64_t desired = 0x8877'6655'4433'2211ull;
        const bool size_ok = bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8;
        const auto r = ram.cmpxchg(x86::gpa{gpa}, bytes, expected, desired);
        ++n;
        SCOPED_TRACE(testing::Message() << "bytes " << bytes << " gpa " << std::hex << gpa << " how " << how);
        if (!size_ok || !inside) {
          ASSERT_FALSE(r);
          EXPECT_EQ(r.error(), paging::memory_error::unbacked);
        } else {
          const bool equal = low(expected, bytes) == current;
          ASSERT_TRUE(r);
          EXPECT_EQ(*r, equal);
          if (equal)
            for (unsigned i = 0; i < bytes; ++i) model[off + i] = static_cast<std::uint8_t>(desired >> (8 * i));
        }
        EXPECT_EQ(mem, model);
        // read/write of any length from 1: backed exactly when inside.
        if (bytes == 0) continue;
        std::uint8_t buf[16] = {};
        EXPECT_EQ(ram.read(x86::gpa{gpa}, buf, bytes), inside);
        if (inside) {
          for (unsigned i = 0; i < bytes; ++i) EXPECT_EQ(buf[i], model[off + i]);
        }
        const std::uint8_t in[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
        EXPECT_EQ(ram.write(x86::gpa{gpa}, in, bytes), inside);
        if (inside)
          for (unsigned i = 0; i < bytes; ++i) model[off + i] = in[i];
        EXPECT_EQ(mem, model);
        EXPECT_EQ(ram.contains(x86::gpa{gpa}, bytes), inside);
      }
  EXPECT_GT(n, 1000u);
}

// The walker's view of flat_ram (paging::writable_guest_memory): 4- and 8-byte reads and
// compare-exchanges of paging entries, little-endian like the bytes (SDM Vol. 1, 1.3.1), and
// unbacked outside the buffer.
TEST(flat_ram, paging_entry_accesses) {
  std::vector<std::uint8_t> mem(size);
  for (std::size_t i = 0; i < size; ++i) mem[i] = static_cast<std::uint8_t>(0x10 + i);
  emulate::flat_ram ram(mem.data(), mem.size(), x86::gpa{base});
  EXPECT_EQ(ram.read32(x86::gpa{base + 4}).value(), 0x17161514u);
  EXPECT_EQ(ram.read64(x86::gpa{base + 8}).value(), 0x1f1e1d1c1b1a1918u);
  EXPECT_FALSE(ram.read32(x86::gpa{base + size - 2}));
  EXPECT_FALSE(ram.read32(x86::gpa{base - 4}));
  const auto lost = ram.cmpxchg32(x86::gpa{base + 4}, 0x17161515u, 0xa5a5a5a5u);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(*lost);
  EXPECT_EQ(le(mem, 4, 4), 0x17161514u);
  const auto won = ram.cmpxchg32(x86::gpa{base + 4}, 0x17161514u, 0x17161534u);  // A set (bit 5)
  ASSERT_TRUE(won);
  EXPECT_TRUE(*won);
  EXPECT_EQ(le(mem, 4, 4), 0x17161534u);
  EXPECT_EQ(mem[8], 0x18) << "nothing written past the 4 bytes";
  EXPECT_FALSE(ram.cmpxchg32(x86::gpa{base + size}, 0, 1));
}

// null_platform has no device, port, CPUID source or MSR: every access is refused and leaves
// the output as it was.
TEST(null_platform, refuses_everything) {
  emulate::null_platform p;
  std::uint64_t v = 0x5a;
  emulate::cpuid_regs r{1, 2, 3, 4};
  EXPECT_FALSE(p.mmio_read(x86::gpa{0xfee0'0000}, 4, v));
  EXPECT_FALSE(p.mmio_write(x86::gpa{0xfee0'0000}, 4, v));
  EXPECT_FALSE(p.pio_in(0x3f8, 1, v));
  EXPECT_FALSE(p.pio_out(0x3f8, 1, v));
  EXPECT_FALSE(p.cpuid(0, 0, r));
  EXPECT_FALSE(p.rdmsr(0x10, v));
  EXPECT_FALSE(p.wrmsr(0x10, v));
  EXPECT_EQ(v, 0x5au);
  EXPECT_EQ(r.eax + r.ebx + r.ecx + r.edx, 10u);
}

}  // namespace
