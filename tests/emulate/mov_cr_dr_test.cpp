// SPDX-License-Identifier: MIT
// MOV to/from control and debug registers and INVLPG's linear address, golden values typed
// from the SDM: Vol. 2B "MOV—Move to/from Control Registers" ("#UD If an attempt is made to
// access CR1, CR5, CR6, or CR7"; CR8 holds the TPR in bits 3:0), "MOV—Move to/from Debug
// Registers" ("#UD If CR4.DE[bit 3] = 1 (debug extensions) and a MOV instruction is executed
// involving DR4 or DR5"; DR4/DR5 alias DR6/DR7 otherwise; 64-bit mode: "#GP(0) If an attempt is
// made to write a 1 to any of bits 63:32 in DR6 ... in DR7"), Vol. 3B 18.2.3/18.2.4 (the
// reserved bits of DR6 read as 1 in 31:16 and 11:4, bit 10 of DR7 reads as 1), and Vol. 2A
// "INVLPG" (the operand is a memory address: its segment's base applies, and in 64-bit mode
// only FS and GS have a base).
#include <gtest/gtest.h>

#include <cstdint>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;

struct MovCrDr : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.ctx.cr2 = 0xdead'beef'f000;
    g.ctx.cr8 = 0x7;
  }
  outcome run(std::initializer_list<std::uint8_t> bytes) {
    g.ctx.rip = guest::code;
    return g.exec(bytes);
  }
};

TEST_F(MovCrDr, ReadsEachControlRegister) {
  struct row {
    std::uint8_t rex, modrm;
    std::uint64_t want;
  };
  const row rows[] = {
      {0x00, 0xc0, 0x8001'0033},       // mov rax, cr0
      {0x00, 0xd0, 0xdead'beef'f000},  // mov rax, cr2
      {0x00, 0xd8, 0x1000},            // mov rax, cr3 (the PML4 of the test guest)
      {0x00, 0xe0, 0x20},              // mov rax, cr4 (PAE)
      {0x44, 0xc0, 0x7},               // mov rax, cr8 (REX.R): the TPR
  };
  for (const auto& r : rows) {
    g.ctx.gpr[0] = 0x5555;
    const auto o = r.rex ? run({r.rex, 0x0f, 0x20, r.modrm}) : run({0x0f, 0x20, r.modrm});
    ASSERT_TRUE(o.is_done()) << int(r.modrm);
    EXPECT_EQ(g.ctx.gpr[0], r.want) << int(r.modrm);
  }
}

TEST_F(MovCrDr, Cr1Cr5Cr6Cr7AndCr9UpAreUndefined) {
  // ModRM reg = 1, 5, 6, 7; with REX.R 9..15.
  for (std::uint8_t reg : {1, 5, 6, 7})
    for (std::uint8_t op : {0x20, 0x22}) {
      const auto o = run({0x0f, op, static_cast<std::uint8_t>(0xc0 | (reg << 3))});
      EXPECT_EQ(o.kind, outcome_kind::exception) << int(op) << " cr" << int(reg);
      EXPECT_EQ(o.vector, x86::vector::ud) << int(op) << " cr" << int(reg);
    }
  for (std::uint8_t reg = 1; reg < 8; ++reg)
    for (std::uint8_t op : {0x20, 0x22}) {
      const auto o = run({0x44, 0x0f, op, static_cast<std::uint8_t>(0xc0 | (reg << 3))});
      EXPECT_EQ(o.vector, x86::vector::ud) << int(op) << " cr" << 8 + reg;
    }
}

TEST_F(MovCrDr, WritesCr2WithoutConditions) {
  g.ctx.gpr[1] = 0xffff'8000'1234'5678;  // any value: CR2 has no reserved bits
  const auto o = run({0x0f, 0x22, 0xd1});  // mov cr2, rcx
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::cr_write);
  EXPECT_EQ(o.reg, 2u);
  EXPECT_EQ(g.ctx.cr2, 0xffff'8000'1234'5678u);
}

TEST_F(MovCrDr, DebugRegistersReservedBitsAndAliases) {
  // mov dr6, rax / mov dr7, rax with 0: the reserved bits read back as 1.
  g.ctx.gpr[0] = 0;
  auto o = run({0x0f, 0x23, 0xf0});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::dr_write);
  EXPECT_EQ(o.reg, 6u);
  EXPECT_EQ(g.ctx.dr[6], 0xffff'0ff0u);
  o = run({0x0f, 0x23, 0xf8});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.dr[7], 0x400u);
  // DR4/DR5 with CR4.DE = 0 are DR6/DR7: mov dr5, rax writes DR7; mov rax, dr4 reads DR6.
  g.ctx.gpr[0] = 0x3;  // L0 G0
  o = run({0x0f, 0x23, 0xe8});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.reg, 7u);
  EXPECT_EQ(g.ctx.dr[7], 0x403u);
  o = run({0x0f, 0x21, 0xe0});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.gpr[0], 0xffff'0ff0u);
  // With CR4.DE = 1: #UD for DR4 and DR5, both directions.
  g.ctx.cr4 = g.ctx.cr4 | x86::cr4::de;
  for (std::uint8_t op : {0x21, 0x23})
    for (std::uint8_t modrm : {0xe0, 0xe8}) {
      o = run({0x0f, op, modrm});
      EXPECT_EQ(o.vector, x86::vector::ud) << int(op) << " " << int(modrm);
    }
  // 64-bit mode: a 1 in bits 63:32 of DR6 or DR7 is #GP(0); DR0-DR3 take any address.
  g.ctx.gpr[0] = std::uint64_t{1} << 32;
  for (std::uint8_t modrm : {0xf0, 0xf8}) {
    o = run({0x0f, 0x23, modrm});
    EXPECT_EQ(o.kind, outcome_kind::exception);
    EXPECT_EQ(o.vector, x86::vector::gp);
    EXPECT_EQ(o.error_code, 0u);
  }
  o = run({0x0f, 0x23, 0xc0});  // mov dr0, rax
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.dr[0], std::uint64_t{1} << 32);
}

TEST(MovCrDr32, InvlpgAddsTheSegmentBaseAndWraps) {
  guest g;
  g.protected32();
  g.ctx[sreg::ds].base = 0xffff'f000;
  g.ctx.gpr[0] = 0x2345;
  const auto o = g.exec({0x0f, 0x01, 0x38});  // invlpg [eax]
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::invlpg);
  EXPECT_EQ(o.address, 0x1345u);  // (0xfffff000 + 0x2345) mod 2^32
}

TEST_F(MovCrDr, InvlpgIn64BitModeUsesOnlyFsAndGsBases) {
  g.ctx[sreg::ds].base = 0x10'0000;  // ignored in 64-bit mode
  g.ctx[sreg::gs].base = 0x7000'0000;
  g.ctx.gpr[0] = 0x2345;
  auto o = run({0x0f, 0x01, 0x38});  // invlpg [rax]
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.address, 0x2345u);
  o = run({0x65, 0x0f, 0x01, 0x38});  // invlpg gs:[rax]
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.address, 0x7000'2345u);
}

}  // namespace
