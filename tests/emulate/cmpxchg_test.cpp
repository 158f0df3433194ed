// SPDX-License-Identifier: MIT
// Golden CMPXCHG / CMPXCHG8B / CMPXCHG16B cases: the exception rules and the write-back,
// with every expected value typed from the SDM (Vol. 2A "CMPXCHG" and "CMPXCHG8B/CMPXCHG16B",
// quoted at each case), never computed by the code under test. The data paths of every form
// are compared with the host CPU in cmpxchg_host_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include <hvkit/cpuid/guest_cpu_model.hpp>
#include <hvkit/emulate/cpu_model.hpp>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;
using hvkit::test::mmio_base;

constexpr std::uint64_t data_lin = 0x60'0000, data_phys = 0x12'0000;
constexpr std::uint64_t mmio_lin = 0x70'0000;
constexpr std::uint64_t flags_mask = 0x8d5;  // OF SF ZF AF PF CF

struct Cmpxchg : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.map(data_lin, data_phys);
    g.map(mmio_lin, mmio_base);
  }
};

TEST_F(Cmpxchg, Cmpxchg8bWithARegisterOperandIsUd) {
  // SDM CMPXCHG8B/CMPXCHG16B, Protected Mode Exceptions: "#UD If the destination operand is
  // not a memory location." 0F C7 C9: ModRM mod = 11, reg = 1, rm = ECX.
  const auto o = g.exec({0x0f, 0xc7, 0xc9});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ud);
  EXPECT_EQ(g.ctx.rip, guest::code);
  // and with REX.W (CMPXCHG16B): 48 0F C7 C9
  const auto o16 = g.exec({0x48, 0x0f, 0xc7, 0xc9});
  ASSERT_EQ(o16.kind, outcome_kind::exception);
  EXPECT_EQ(o16.vector, x86::vector::ud);
}

TEST_F(Cmpxchg, MisalignedCmpxchg16bIsGp0AndWritesNothing) {
  // SDM CMPXCHG16B, 64-Bit Mode Exceptions: "#GP(0) ... If memory operand for CMPXCHG16B is
  // not aligned on a 16-byte boundary." RDI = data + 8: 8-byte aligned, not 16. The values
  // are equal, so a missed check would store RCX:RBX.
  g.wr64(data_phys + 8, 0x1111);
  g.wr64(data_phys + 16, 0x2222);
  g.ctx.gpr[7] = data_lin + 8;
  g.ctx.gpr[0] = 0x1111;
  g.ctx.gpr[2] = 0x2222;
  g.ctx.gpr[3] = 0x3333;
  g.ctx.gpr[1] = 0x4444;
  const auto o = g.exec({0xf0, 0x48, 0x0f, 0xc7, 0x0f});  // lock cmpxchg16b [rdi]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
  EXPECT_EQ(g.ctx.rip, guest::code);
  EXPECT_EQ(g.rd64(data_phys + 8), 0x1111u);
  EXPECT_EQ(g.rd64(data_phys + 16), 0x2222u);
  // CMPXCHG8B has no such rule: the same operand at data + 8 is fine (ZF = 1, stored).
  g.ctx.gpr[2] = 0;
  g.ctx.gpr[1] = 0;
  const auto o8 = g.exec({0xf0, 0x0f, 0xc7, 0x0f});  // lock cmpxchg8b [rdi]
  ASSERT_TRUE(o8.is_done());
  EXPECT_EQ(g.rd64(data_phys + 8), 0x3333u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
}

TEST_F(Cmpxchg, AlignedCmpxchg16bSucceedsAndFails) {
  // "Compare RDX:RAX with m128. If equal, set ZF and load RCX:RBX into m128. Else, clear ZF
  // and load m128 into RDX:RAX."
  g.wr64(data_phys + 0x10, 0xaaaa);
  g.wr64(data_phys + 0x18, 0xbbbb);
  g.ctx.gpr[7] = data_lin + 0x10;
  g.ctx.gpr[0] = 0xaaaa;
  g.ctx.gpr[2] = 0xbbbb;
  g.ctx.gpr[3] = 0x1234'5678'9abc'def0;
  g.ctx.gpr[1] = 0x0fed'cba9'8765'4321;
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xc7, 0x0f}).is_done());
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.rd64(data_phys + 0x10), 0x1234'5678'9abc'def0u);
  EXPECT_EQ(g.rd64(data_phys + 0x18), 0x0fed'cba9'8765'4321u);
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xc7, 0x0f}).is_done());  // RDX:RAX still the old value
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.ctx.gpr[0], 0x1234'5678'9abc'def0u);
  EXPECT_EQ(g.ctx.gpr[2], 0x0fed'cba9'8765'4321u);
}

TEST_F(Cmpxchg, WithoutCx8OrCx16InCpuidTheyAreUd) {
  // SDM CMPXCHG8B/CMPXCHG16B: "#UD If CPUID.01H:ECX.CMPXCHG16B[bit 13] = 0" and (CMPXCHG8B)
  // "#UD If CPUID.01H:EDX.CX8[bit 8] = 0" (the flag of the guest CPU model, not the host's).
  cpuid::feature_set f{};
  f.set(cpuid::feat::cx8);  // CX8 without CX16
  apply_cpu_model(g.ctx, cpuid::make_guest_cpu_model(f, cpuid::vendor::intel, 36));
  EXPECT_TRUE(g.ctx.cx8);
  EXPECT_FALSE(g.ctx.cx16);
  g.ctx.gpr[7] = data_lin;
  const auto o = g.exec({0x48, 0x0f, 0xc7, 0x0f});  // cmpxchg16b [rdi]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ud);
  EXPECT_TRUE(g.exec({0x0f, 0xc7, 0x0f}).is_done());  // cmpxchg8b [rdi] is enumerated
  g.ctx.rip = guest::code;
  g.ctx.cx8 = false;
  const auto o8 = g.exec({0x0f, 0xc7, 0x0f});
  ASSERT_EQ(o8.kind, outcome_kind::exception);
  EXPECT_EQ(o8.vector, x86::vector::ud);
}

TEST_F(Cmpxchg, LockOnARegisterDestinationIsUd) {
  // SDM LOCK: "An undefined opcode exception will also be generated if the LOCK prefix is
  // used with any instruction not in the above list" / when the destination operand is not
  // memory. F0 0F B1 C8: lock cmpxchg eax, ecx.
  const auto o = g.exec({0xf0, 0x0f, 0xb1, 0xc8});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ud);
}

TEST_F(Cmpxchg, FailedCompareSetsFlagsAsCmpAndLoadsTheAccumulator) {
  // "The destination operand is loaded into the AL, AX, EAX or RAX register"; "The ZF flag is
  // set if the values in the destination operand and register AL, AX, or EAX are equal;
  // otherwise it is cleared. The CF, PF, AF, SF, and OF flags are set according to the
  // results of the comparison operation." EAX = 1, [rdi] = 2: 1 - 2 = 0xffffffff: CF = 1
  // (borrow), PF = 1 (low byte 0xff: 8 ones), AF = 1 (borrow out of bit 3), SF = 1, ZF = 0,
  // OF = 0. In 64-bit mode the 32-bit EAX load zero-extends RAX (SDM 3.4.1.1).
  g.wr64(data_phys, 2);
  g.ctx.gpr[7] = data_lin;
  g.ctx.gpr[0] = 0xffff'ffff'0000'0001;
  g.ctx.gpr[1] = 0x77;
  ASSERT_TRUE(g.exec({0x0f, 0xb1, 0x0f}).is_done());  // cmpxchg [rdi], ecx
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x95u);  // SF AF PF CF
  EXPECT_EQ(g.ctx.gpr[0], 2u);
  EXPECT_EQ(g.rd64(data_phys), 2u);
  EXPECT_EQ(g.ctx.rip, guest::code + 3);
}

TEST_F(Cmpxchg, AFailedCompareWritesTheDeviceBack) {
  // "The destination operand is written back if the comparison fails. (If the comparison
  // fails, the processor never produces a locked read without also producing a locked
  // write.)" On a device register the write is visible: one read, then one write of the
  // value read. MMIO byte i at gpa g reads (g & 0xff) + 0x11: [mmio + 0x30] = 0x44434241.
  g.ctx.gpr[7] = mmio_lin + 0x30;
  g.ctx.gpr[0] = 0;
  g.ctx.gpr[1] = 0x5555'5555;
  const auto o = g.exec({0xf0, 0x0f, 0xb1, 0x0f});  // lock cmpxchg [rdi], ecx
  ASSERT_TRUE(o.is_done());
  ASSERT_EQ(g.plat.mmio.size(), 2u);
  EXPECT_FALSE(g.plat.mmio[0].write);
  EXPECT_TRUE(g.plat.mmio[1].write);
  EXPECT_EQ(g.plat.mmio[1].gpa, mmio_base + 0x30);
  EXPECT_EQ(g.plat.mmio[1].size, 4u);
  EXPECT_EQ(g.plat.mmio[1].value, 0x4443'4241u);
  EXPECT_EQ(g.ctx.gpr[0], 0x4443'4241u);
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
}

TEST_F(Cmpxchg, AFailedCmpxchg8bWritesTheDeviceBack) {
  // The same sentence for CMPXCHG8B: "The destination operand is written back if the
  // comparison fails." [mmio + 0x40] = 58 57 56 55 54 53 52 51 (little-endian from 0x51).
  g.ctx.gpr[7] = mmio_lin + 0x40;
  const auto o = g.exec({0x0f, 0xc7, 0x0f});  // cmpxchg8b [rdi]
  ASSERT_TRUE(o.is_done());
  ASSERT_EQ(g.plat.mmio.size(), 2u);
  EXPECT_TRUE(g.plat.mmio[1].write);
  EXPECT_EQ(g.plat.mmio[1].size, 8u);
  EXPECT_EQ(g.plat.mmio[1].value, 0x5857'5655'5453'5251u);
  EXPECT_EQ(g.ctx.gpr[0], 0x5453'5251u);  // EDX:EAX := m64
  EXPECT_EQ(g.ctx.gpr[2], 0x5857'5655u);
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
}

TEST_F(Cmpxchg, Cmpxchg8bIn32BitProtectedMode) {
  // A 32-bit kernel: F0 0F C7 0F = lock cmpxchg8b [edi]; EDX:EAX equal, ECX:EBX stored.
  g.protected32();
  g.wr64(data_phys, 0x0000'0001'8000'0063);
  g.ctx.gpr[7] = data_phys;
  g.ctx.gpr[0] = 0x8000'0063;
  g.ctx.gpr[2] = 1;
  g.ctx.gpr[3] = 0x0020'0067;
  g.ctx.gpr[1] = 0x8000'0000;
  ASSERT_TRUE(g.exec({0xf0, 0x0f, 0xc7, 0x0f}).is_done());
  EXPECT_EQ(g.rd64(data_phys), 0x8000'0000'0020'0067u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_EQ(g.ctx.rip, guest::code_phys + 4);
}

}  // namespace
