// SPDX-License-Identifier: MIT
// LOCK CMPXCHG16B is atomic (SDM Vol. 2A CMPXCHG8B/CMPXCHG16B: "This instruction can be used
// with a LOCK prefix to allow the instruction to be executed atomically"; SDM 9.1.2.2): on
// guest RAM that offers a 16-byte compare-exchange (emulate::guest_ram_cmpxchg16, flat_ram)
// the emulator's read and write are one compare-exchange, retried when another agent wins.
// Oracles: expected values typed from the SDM's description of the instruction, and a plain
// 16-byte model of compare-and-store for flat_ram::cmpxchg16 (whose aligned path is the
// host's LOCK CMPXCHG16B).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;

constexpr std::uint64_t data_lin = 0x60'0000, data_phys = 0x12'0000;
// lock cmpxchg16b [rdi]: F0 (LOCK) 48 (REX.W) 0F C7 /1, ModRM 0x0f (mod 00, reg 1, rm rdi).
constexpr std::initializer_list<std::uint8_t> lock_cmpxchg16b_rdi = {0xf0, 0x48, 0x0f, 0xc7, 0x0f};

// Guest RAM where another agent stores `racer` into the 16 bytes at `target` right after the
// emulator's first 16-byte read of them: between the read and the write of the instruction.
struct racing_ram16 {
  flat_ram& inner;
  std::vector<std::uint8_t>& mem;
  std::uint64_t target = 0;
  u128 racer{};
  unsigned races = 1;
  unsigned cmpxchg16_calls = 0;
  bool read(x86::gpa a, std::uint8_t* out, std::size_t n) {
    const bool ok = inner.read(a, out, n);
    if (ok && a.value() == target && n == 16 && races != 0) {
      --races;
      for (unsigned i = 0; i < 8; ++i) {
        mem[target + i] = static_cast<std::uint8_t>(racer.lo >> (8 * i));
        mem[target + 8 + i] = static_cast<std::uint8_t>(racer.hi >> (8 * i));
      }
    }
    return ok;
  }
  bool write(x86::gpa a, const std::uint8_t* in, std::size_t n) { return inner.write(a, in, n); }
  result<bool, paging::memory_error> cmpxchg(x86::gpa a, unsigned bytes, std::uint64_t e, std::uint64_t d) {
    return inner.cmpxchg(a, bytes, e, d);
  }
  result<bool, paging::memory_error> cmpxchg16(x86::gpa a, u128 e, u128 d) {
    ++cmpxchg16_calls;
    return inner.cmpxchg16(a, e, d);
  }
};
static_assert(guest_ram_cmpxchg16<racing_ram16>);

// The same RAM without the 16-byte compare-exchange: the documented non-atomic fallback.
struct racing_ram8 : racing_ram16 {
  result<bool, paging::memory_error> cmpxchg16(x86::gpa, u128, u128) = delete;
};
static_assert(guest_ram<racing_ram8> && !guest_ram_cmpxchg16<racing_ram8>);

struct Cmpxchg16Atomic : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.map(data_lin, data_phys);
  }
  template <class Ram>
  outcome run(Ram& ram) {
    auto mmu = g.make_mmu(g.ctx.cr0);
    walker_translator tr{mmu, g.ram};
    return emulate::emulate(g.ctx, tr, ram, g.plat);
  }
  // m128 = {0xaaaa, 0xbbbb}; RDX:RAX equal to it; RCX:RBX the new value.
  void set_up_success_case() {
    g.wr64(data_phys + 0x10, 0xaaaa);
    g.wr64(data_phys + 0x18, 0xbbbb);
    g.ctx.gpr[7] = data_lin + 0x10;
    g.ctx.gpr[0] = 0xaaaa;
    g.ctx.gpr[2] = 0xbbbb;
    g.ctx.gpr[3] = 0x1111;
    g.ctx.gpr[1] = 0x2222;
    g.code_bytes(lock_cmpxchg16b_rdi);
  }
};

// Another agent stores {0xeeee, 0xffff} between the read and the write. The instruction is
// atomic, so it runs wholly after that store: "Compare RDX:RAX with m128 ... Else, clear ZF
// and load m128 into RDX:RAX": ZF = 0, RAX = 0xeeee, RDX = 0xffff, and m128 keeps the other
// agent's value (written back with its own value). The first compare-exchange loses, the
// retry wins: two calls.
TEST_F(Cmpxchg16Atomic, AnotherAgentsStoreBetweenReadAndWriteIsNotLost) {
  set_up_success_case();
  racing_ram16 ram{g.ram, g.mem, data_phys + 0x10, u128{0xeeee, 0xffff}};
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg16_calls, 2u);
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.ctx.gpr[0], 0xeeeeu);
  EXPECT_EQ(g.ctx.gpr[2], 0xffffu);
  EXPECT_EQ(g.rd64(data_phys + 0x10), 0xeeeeu);
  EXPECT_EQ(g.rd64(data_phys + 0x18), 0xffffu);
  EXPECT_EQ(g.ctx.rip, guest::code + 5);
}

// Without a race: one compare-exchange, ZF = 1, m128 = RCX:RBX.
TEST_F(Cmpxchg16Atomic, UncontendedIsOneCompareExchange) {
  set_up_success_case();
  racing_ram16 ram{g.ram, g.mem, data_phys + 0x10, u128{}, 0};
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg16_calls, 1u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.rd64(data_phys + 0x10), 0x1111u);
  EXPECT_EQ(g.rd64(data_phys + 0x18), 0x2222u);
}

// Without LOCK no compare-exchange is used (only the LOCK prefix asks for atomicity).
TEST_F(Cmpxchg16Atomic, WithoutLockNoCompareExchange) {
  set_up_success_case();
  g.code_bytes({0x48, 0x0f, 0xc7, 0x0f});
  racing_ram16 ram{g.ram, g.mem, data_phys + 0x10, u128{}, 0};
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg16_calls, 0u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.rd64(data_phys + 0x18), 0x2222u);
}

// Guest RAM without cmpxchg16: LOCK CMPXCHG16B is a read then a write (docs: a limitation of
// such RAM), so the other agent's store is overwritten. Shown so that the difference above
// is the compare-exchange's.
TEST_F(Cmpxchg16Atomic, RamWithoutCmpxchg16FallsBackToReadThenWrite) {
  set_up_success_case();
  racing_ram8 ram{{g.ram, g.mem, data_phys + 0x10, u128{0xeeee, 0xffff}}};
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.rd64(data_phys + 0x10), 0x1111u);
  EXPECT_EQ(g.rd64(data_phys + 0x18), 0x2222u);
}

// flat_ram::cmpxchg16 against a plain model of a 16-byte compare-and-store, on a 16-byte
// aligned host location (the host's LOCK CMPXCHG16B) and an unaligned one (the plain path).
TEST(FlatRamCmpxchg16, MatchesAModel) {
  alignas(16) std::array<std::uint8_t, 64> buf{};
  std::array<std::uint8_t, 64> model{};
  std::mt19937_64 rng(23);
  for (unsigned offset : {0u, 16u, 8u, 1u}) {  // 0, 16: aligned (atomic path); 8, 1: plain
    flat_ram ram(buf.data() + offset, 32, x86::gpa{0x1000});
    for (unsigned i = 0; i < 2000; ++i) {
      auto cur = [&] {
        u128 v;
        for (unsigned k = 0; k < 8; ++k) {
          v.lo |= std::uint64_t{model[offset + k]} << (8 * k);
          v.hi |= std::uint64_t{model[offset + 8 + k]} << (8 * k);
        }
        return v;
      }();
      // Half of the tries expect the current value (or one half of it), half random values.
      u128 expected{rng(), rng()};
      if (rng() % 2) expected = cur;
      if (rng() % 4 == 0) expected.hi = cur.hi + 1;
      const u128 desired{rng(), rng()};
      const bool equal = expected == cur;
      const auto r = ram.cmpxchg16(x86::gpa{0x1000}, expected, desired);
      ASSERT_TRUE(r);
      ASSERT_EQ(*r, equal) << offset << " " << i;
      if (equal) {
        for (unsigned k = 0; k < 8; ++k) {
          model[offset + k] = static_cast<std::uint8_t>(desired.lo >> (8 * k));
          model[offset + 8 + k] = static_cast<std::uint8_t>(desired.hi >> (8 * k));
        }
      }
      ASSERT_EQ(buf, model) << offset << " " << i;
    }
  }
  // Outside the buffer (or crossing its end): not RAM.
  flat_ram ram(buf.data(), 32, x86::gpa{0x1000});
  EXPECT_FALSE(ram.cmpxchg16(x86::gpa{0x1000 + 24}, u128{}, u128{}));
  EXPECT_EQ(ram.cmpxchg16(x86::gpa{0x2000}, u128{}, u128{}).error(), paging::memory_error::unbacked);
}

// In constant evaluation (no host instruction): the plain path.
constexpr bool constexpr_cmpxchg16() {
  std::array<std::uint8_t, 16> b{};
  flat_ram ram(b.data(), b.size());
  const bool first = *ram.cmpxchg16(x86::gpa{0}, u128{0, 0}, u128{0x0807'0605'0403'0201, 0x100f'0e0d'0c0b'0a09});
  const bool again = *ram.cmpxchg16(x86::gpa{0}, u128{0, 0}, u128{1, 1});
  return first && !again && b[0] == 1 && b[7] == 8 && b[8] == 9 && b[15] == 0x10;
}
static_assert(constexpr_cmpxchg16());

}  // namespace
