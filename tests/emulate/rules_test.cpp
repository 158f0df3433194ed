// SPDX-License-Identifier: MIT
// The emulator's CR writes go through vmx/cr_access.hpp (one definition); MMIO read-modify-
// writes complete in two steps; LOCKed read-modify-writes on RAM are compare-exchanges; the
// 82 alias of 80. Every expected value is typed by hand from the SDM, never computed by the
// code under test.
#include <gtest/gtest.h>

#include <cstdint>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;
using hvkit::test::mmio_base;

constexpr std::uint64_t data_lin = 0x60'0000;
constexpr std::uint64_t data_phys = 0x12'0000;
constexpr std::uint64_t mmio_lin = 0x70'0000;
constexpr std::uint64_t flags_mask = 0x8d5;  // OF SF ZF AF PF CF

struct Rules : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.map(data_lin, data_phys);
    g.map(mmio_lin, mmio_base);
  }
};

// ---------------------------------------------------------------------------- CR writes
// SDM 2.5: CR0 bits other than PE MP EM TS ET NE WP AM NW CD PG are reserved; a MOV leaves
// them 0 and ET reads as 1. Bit 8 and ET=0 in the source: CR0 = 0x80010033.
TEST_F(Rules, MovToCr0DropsUndefinedLowBitsAndSetsEt) {
  g.ctx.gpr[0] = 0x8001'0123;
  const auto o = g.exec({0x0f, 0x22, 0xc0});  // mov cr0, rax
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::cr_write);
  EXPECT_EQ(o.reg, 0);
  EXPECT_EQ(g.ctx.cr0.raw(), 0x8001'0033u);
}

// SDM Vol. 2B MOV CR: setting a bit of CR0[63:32] is #GP(0).
TEST_F(Rules, MovToCr0HighBitIsGp) {
  g.ctx.gpr[0] = 0x1'8001'0033;
  const auto o = g.exec({0x0f, 0x22, 0xc0});
  ASSERT_TRUE(o.is_exception());
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
  EXPECT_EQ(g.ctx.cr0.raw(), 0x8001'0033u);
  EXPECT_EQ(g.ctx.rip, guest::code);
}

// MOV CR0 that activates IA-32e mode (PG 0->1, EFER.LME=1, CR4.PAE=1) from 32-bit protected
// mode: fine with CS.L=0, #GP(0) with CS.L=1 (SDM 10.8.5; AMD APM Vol. 2 "Enabling and
// Activating Long Mode"). The rule lives in vmx::check_cr0_write; the emulator must reach it.
TEST(RulesIa32e, MovToCr0ActivatingIa32eModeWithCsLFaults) {
  for (const bool cs_l : {false, true}) {
    guest g;
    g.protected32();
    g.ctx.cr4 = x86::cr4::pae;
    g.ctx.efer = x86::efer::lme;
    g.ctx.cr3 = x86::cr3{guest::pml4};
    if (cs_l) g.ctx[emulate::sreg::cs].ar = emulate::segment_ar{0xc09b | 0x2000};  // L=1
    g.ctx.gpr[0] = 0x8000'0011;                                                      // PG|ET|PE
    const auto o = g.exec({0x0f, 0x22, 0xc0});                                       // mov cr0, eax
    if (cs_l) {
      ASSERT_TRUE(o.is_exception());
      EXPECT_EQ(o.vector, x86::vector::gp);
      EXPECT_EQ(o.error_code, 0u);
      EXPECT_EQ(g.ctx.cr0.raw(), 0x11u);
      EXPECT_EQ(g.ctx.rip, guest::code_phys);
    } else {
      ASSERT_TRUE(o.is_done());
      EXPECT_EQ(g.ctx.cr0.raw(), 0x8000'0011u);
      EXPECT_TRUE(g.ctx.efer.test(x86::efer::lma));
    }
  }
}

// SDM 4.5 / Table 4-12: in IA-32e mode CR3 bits 63:MAXPHYADDR are reserved.
TEST_F(Rules, MovToCr3ReservedBitsFollowMaxphyaddr) {
  g.ctx.maxphyaddr = 36;
  g.ctx.gpr[0] = 0x10'0000'5000;  // bit 36
  EXPECT_EQ(g.exec({0x0f, 0x22, 0xd8}).vector, x86::vector::gp);  // mov cr3, rax
  g.ctx.gpr[0] = 0x8'0000'5000;   // bit 35: inside MAXPHYADDR 36
  ASSERT_TRUE(g.exec({0x0f, 0x22, 0xd8}).is_done());
  EXPECT_EQ(g.ctx.cr3.raw(), 0x8'0000'5000u);
}

// SDM 4.10.4.1: with CR4.PCIDE=1 source bit 63 asks not to flush and is not stored.
TEST_F(Rules, MovToCr3NoFlushBitWithPcide) {
  g.ctx.cr4.set(x86::cr4::pcide);
  g.ctx.gpr[0] = 0x8000'0000'0000'5001;
  const auto o = g.exec({0x0f, 0x22, 0xd8});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.reg, 3);
  EXPECT_TRUE(o.cr3_noflush);
  EXPECT_EQ(g.ctx.cr3.raw(), 0x5001u);
}

// SDM 4.4 (LAM): CR3 bit 62 (LAM_U48) is allowed only when the guest has LAM.
TEST_F(Rules, MovToCr3LamBitNeedsLam) {
  g.ctx.gpr[0] = 0x4000'0000'0000'5000;
  EXPECT_EQ(g.exec({0x0f, 0x22, 0xd8}).vector, x86::vector::gp);
  g.ctx.lam = true;
  ASSERT_TRUE(g.exec({0x0f, 0x22, 0xd8}).is_done());
  EXPECT_EQ(g.ctx.cr3.raw(), 0x4000'0000'0000'5000u);
}

TEST_F(Rules, MovToCr3WithMaxphyaddrOutOfRangeIsInvalidContext) {
  g.ctx.maxphyaddr = 0;
  g.ctx.gpr[0] = 0x5000;
  const auto o = g.exec({0x0f, 0x22, 0xd8});
  EXPECT_EQ(o.kind, outcome_kind::unsupported);
  EXPECT_EQ(o.why, unsupported_reason::invalid_context);
  EXPECT_EQ(g.ctx.cr3.raw(), guest::pml4);
}

// CR4 bits the guest's CPUID does not allow are reserved for it (#GP, SDM Vol. 2B MOV CR).
// FSGSBASE is CR4 bit 16 (SDM 2.5); PAE is bit 5.
TEST_F(Rules, MovToCr4BitNotAllowedByTheCallerIsGp) {
  g.ctx.cr4_allowed = x86::cr4::pae | x86::cr4::pge;
  g.ctx.gpr[0] = 0x1'0020;  // PAE | FSGSBASE
  const auto o = g.exec({0x0f, 0x22, 0xe0});  // mov cr4, rax
  ASSERT_TRUE(o.is_exception());
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(g.ctx.cr4.raw(), 0x20u);
  g.ctx.cr4_allowed = x86::cr4::pae | x86::cr4::pge | x86::cr4::fsgsbase;
  ASSERT_TRUE(g.exec({0x0f, 0x22, 0xe0}).is_done());
  EXPECT_EQ(g.ctx.cr4.raw(), 0x1'0020u);
}

// SDM Vol. 2B MOV CR: CR8 bits 63:4 reserved.
TEST_F(Rules, MovToCr8) {
  g.ctx.gpr[0] = 0x9;
  ASSERT_TRUE(g.exec({0x44, 0x0f, 0x22, 0xc0}).is_done());  // mov cr8, rax
  EXPECT_EQ(g.ctx.cr8, 0x9u);
  g.ctx.gpr[0] = 0x10;
  EXPECT_EQ(g.exec({0x44, 0x0f, 0x22, 0xc0}).vector, x86::vector::gp);
  EXPECT_EQ(g.ctx.cr8, 0x9u);
}

// SDM Vol. 2A LMSW: loads CR0[3:0] from the source, never clears PE. CLTS clears TS (bit 3).
TEST(Rules32, LmswAndCltsIn32BitMode) {
  guest g;
  g.protected32();
  g.ctx.cr0 = x86::cr0{0x19};  // PE TS ET
  g.ctx.gpr[0] = 0xfff6;       // PE=0 MP=1 EM=1 TS=0
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0xf0}).is_done());  // lmsw ax
  EXPECT_EQ(g.ctx.cr0.raw(), 0x17u);                   // PE kept, MP EM set, TS cleared, ET
  g.ctx.cr0 = x86::cr0{0x19};
  ASSERT_TRUE(g.exec({0x0f, 0x06}).is_done());  // clts
  EXPECT_EQ(g.ctx.cr0.raw(), 0x11u);
}

// ---------------------------------------------------------------------------- 82 alias
// SDM Vol. 2 Table A-2: 82 = Grp 1 Eb,Ib, i64. 82 /0 C0 05 in 32-bit mode: add al, 5.
// 0xfb + 5 = 0x100: AL = 0, CF=1, ZF=1, AF=1 (carry out of bit 3), PF=1 (0 has even parity).
TEST(Rules32, Opcode82IsAnAliasOf80) {
  guest g;
  g.protected32();
  g.ctx.gpr[0] = 0x1234'56fb;
  const auto o = g.exec({0x82, 0xc0, 0x05});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.gpr[0], 0x1234'5600u);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x55u);
  EXPECT_EQ(g.ctx.rip, guest::code_phys + 3);
}

TEST(Rules32, Opcode82DecodesIn16And32BitModeOnly) {
  const std::uint8_t cmp[] = {0x82, 0x3d, 0x00, 0x10, 0x00, 0x00, 0x7f};  // cmp byte [0x1000], 0x7f (32-bit)
  const auto d32 = decode(cmp, sizeof cmp, code_size::c32);
  ASSERT_TRUE(d32.has_value());
  EXPECT_EQ(d32->op, mnemonic::cmp);
  EXPECT_EQ(d32->length, 7);
  EXPECT_EQ(d32->imm, 0x7fu);
  EXPECT_EQ(d32->dst.size, 1);
  const auto d64 = decode(cmp, sizeof cmp, code_size::c64);
  ASSERT_FALSE(d64.has_value());
  EXPECT_EQ(d64.error(), decode_error::invalid);
}

TEST_F(Rules, Opcode82In64BitModeIsUd) {
  g.ctx.gpr[0] = 0xfb;
  const auto o = g.exec({0x82, 0xc0, 0x05});
  ASSERT_TRUE(o.is_exception());
  EXPECT_EQ(o.vector, x86::vector::ud);
  EXPECT_EQ(g.ctx.gpr[0], 0xfbu);
}

// ---------------------------------------------------------------------------- MMIO RMW
// add [rax], ecx on MMIO nobody claims: the read, then the write, each completed by the
// caller; the third run commits. 0x10 + 0x5 = 0x15: CF=OF=SF=ZF=AF=0, PF=0 (three 1 bits).
TEST_F(Rules, ReadModifyWriteOfUnclaimedMmioCompletesInTwoSteps) {
  g.plat.claim_mmio = false;
  g.ctx.gpr[0] = mmio_lin + 0x20;
  g.ctx.gpr[1] = 0x5;
  g.ctx.rflags = x86::rflags{0x2 | 0x8d5};
  g.code_bytes({0x01, 0x08});  // add [rax], ecx
  auto o = g.run();
  ASSERT_EQ(o.kind, outcome_kind::needs_mmio);
  EXPECT_EQ(o.address, mmio_base + 0x20);
  EXPECT_EQ(o.size, 4);
  EXPECT_FALSE(o.write);
  g.ctx.pending = completion{completion::kind::mmio, mmio_base + 0x20, 4, false, 0x10};
  o = g.run();
  ASSERT_EQ(o.kind, outcome_kind::needs_mmio);
  EXPECT_EQ(o.address, mmio_base + 0x20);
  EXPECT_EQ(o.size, 4);
  EXPECT_TRUE(o.write);
  EXPECT_EQ(o.value, 0x15u);
  EXPECT_EQ(g.ctx.rip, guest::code);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x8d5u);
  g.ctx.pending = completion{completion::kind::mmio, mmio_base + 0x20, 4, true, 0x15};
  o = g.run();
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.rip, guest::code + 2);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0u);
  EXPECT_EQ(g.ctx.pending.what, completion::kind::none);
  EXPECT_EQ(g.ctx.completed[0].what, completion::kind::none);
  EXPECT_TRUE(g.plat.mmio.empty());
}

// xchg [rax], ecx on a claimed device: one read, then one write (SDM XCHG), synchronously.
// The device reads byte i of gpa g as (g + 0x11) & 0xff: offset 0x40 gives 51 52 53 54.
TEST_F(Rules, XchgWithAClaimedDevice) {
  g.ctx.gpr[0] = mmio_lin + 0x40;
  g.ctx.gpr[1] = 0x1122'3344;
  ASSERT_TRUE(g.exec({0x87, 0x08}).is_done());
  ASSERT_EQ(g.plat.mmio.size(), 2u);
  EXPECT_FALSE(g.plat.mmio[0].write);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0x40);
  EXPECT_TRUE(g.plat.mmio[1].write);
  EXPECT_EQ(g.plat.mmio[1].gpa, mmio_base + 0x40);
  EXPECT_EQ(g.plat.mmio[1].value, 0x1122'3344u);
  EXPECT_EQ(g.ctx.gpr[1], 0x5453'5251u);
}

// lock bts dword [rax], 3 on a claimed device: read 0x54535251, write it with bit 3 set
// (0x54535259); CF = old bit 3 = 0 (SDM BTS).
TEST_F(Rules, LockedBtsOnAClaimedDevice) {
  g.ctx.gpr[0] = mmio_lin + 0x40;
  g.ctx.rflags = x86::rflags{0x3};
  ASSERT_TRUE(g.exec({0xf0, 0x0f, 0xba, 0x28, 0x03}).is_done());
  ASSERT_EQ(g.plat.mmio.size(), 2u);
  EXPECT_EQ(g.plat.mmio[1].value, 0x5453'5259u);
  EXPECT_EQ(g.ctx.rflags.raw() & 1, 0u);
}

// A device that claims only the first 0x800 bytes of the MMIO page.
struct half_claimed : hvkit::test::recording_platform {
  bool mmio_read(x86::gpa a, unsigned size, std::uint64_t& out) {
    return a.value() < mmio_base + 0x800 && recording_platform::mmio_read(a, size, out);
  }
  bool mmio_write(x86::gpa a, unsigned size, std::uint64_t v) {
    return a.value() < mmio_base + 0x800 && recording_platform::mmio_write(a, size, v);
  }
};

// movsd from a claimed register to unclaimed MMIO: the device read happens once, although
// the instruction runs twice (the re-run replays it from ctx.completed).
TEST_F(Rules, ReRunDoesNotRepeatADeviceRead) {
  half_claimed dev;
  g.ctx.gpr[6] = mmio_lin + 0x40;   // rsi
  g.ctx.gpr[7] = mmio_lin + 0x900;  // rdi
  g.code_bytes({0xa5});             // movsd
  auto mmu = g.make_mmu(g.ctx.cr0);
  walker_translator tr{mmu, g.ram};
  auto o = emulate::emulate(g.ctx, tr, g.ram, dev);
  ASSERT_EQ(o.kind, outcome_kind::needs_mmio);
  EXPECT_TRUE(o.write);
  EXPECT_EQ(o.address, mmio_base + 0x900);
  EXPECT_EQ(o.value, 0x5453'5251u);
  ASSERT_EQ(dev.mmio.size(), 1u);
  g.ctx.pending = completion{completion::kind::mmio, mmio_base + 0x900, 4, true, 0x5453'5251};
  o = emulate::emulate(g.ctx, tr, g.ram, dev);
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(dev.mmio.size(), 1u);
  EXPECT_EQ(g.ctx.gpr[6], mmio_lin + 0x44);
  EXPECT_EQ(g.ctx.gpr[7], mmio_lin + 0x904);
}

// ---------------------------------------------------------------------------- LOCK on RAM
// Guest RAM whose compare-exchange first lets "another vCPU" store `racer_value` at the
// target, `races` times (the value grows by one after each store).
struct racing_ram {
  emulate::flat_ram& inner;
  std::vector<std::uint8_t>& mem;
  unsigned races = 0;
  std::uint32_t racer_value = 0;
  unsigned cmpxchg_calls = 0;
  bool read(x86::gpa a, std::uint8_t* out, std::size_t n) const { return inner.read(a, out, n); }
  bool write(x86::gpa a, const std::uint8_t* in, std::size_t n) { return inner.write(a, in, n); }
  result<bool, paging::memory_error> cmpxchg(x86::gpa a, unsigned bytes, std::uint64_t e, std::uint64_t d) {
    ++cmpxchg_calls;
    if (races != 0) {
      --races;
      for (unsigned i = 0; i < 4; ++i) mem[a.value() + i] = static_cast<std::uint8_t>(racer_value >> (8 * i));
      ++racer_value;
    }
    return inner.cmpxchg(a, bytes, e, d);
  }
};
static_assert(guest_ram<racing_ram>);

struct Locked : Rules {
  outcome run(racing_ram& ram) {
    auto mmu = g.make_mmu(g.ctx.cr0);
    walker_translator tr{mmu, g.ram};
    return emulate::emulate(g.ctx, tr, ram, g.plat);
  }
};

// lock add [rax], ecx: memory 1, ecx 2; another agent stores 100 between the read and the
// compare-exchange: the add is redone on 100: 102 = 0x66, PF=1 (four 1 bits), rest 0.
TEST_F(Locked, LockedAddRetriesAfterLosingTheRace) {
  g.wr_data32(1);
  racing_ram ram{g.ram, g.mem, 1, 100};
  g.ctx.gpr[0] = data_lin;
  g.ctx.gpr[1] = 2;
  g.code_bytes({0xf0, 0x01, 0x08});
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg_calls, 2u);
  EXPECT_EQ(g.rd_data32(), 102u);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x4u);
  EXPECT_EQ(g.ctx.rip, guest::code + 3);
}

// Without LOCK the RMW is a read and a write (no compare-exchange).
TEST_F(Locked, UnlockedAddDoesNotCompareExchange) {
  g.wr_data32(1);
  racing_ram ram{g.ram, g.mem, 1, 100};
  g.ctx.gpr[0] = data_lin;
  g.ctx.gpr[1] = 2;
  g.code_bytes({0x01, 0x08});
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg_calls, 0u);
  EXPECT_EQ(g.rd_data32(), 3u);
}

// XCHG with memory is locked without the prefix (SDM Vol. 2 XCHG).
TEST_F(Locked, XchgIsLockedWithoutThePrefix) {
  g.wr_data32(0xaaaa);
  racing_ram ram{g.ram, g.mem, 1, 0xbbbb};
  g.ctx.gpr[0] = data_lin;
  g.ctx.gpr[1] = 0xcccc;
  g.code_bytes({0x87, 0x08});
  ASSERT_TRUE(run(ram).is_done());
  EXPECT_EQ(ram.cmpxchg_calls, 2u);
  EXPECT_EQ(g.rd_data32(), 0xccccu);
  EXPECT_EQ(g.ctx.gpr[1], 0xbbbbu);  // the value it finally exchanged with
}

// An agent that wins every time: after 16 attempts (the emulator's lock_retries) it has
// stored 7 .. 22; nothing is written by us, RIP stays, flags unchanged.
TEST_F(Locked, LockedAddGivesUpAndReExecutes) {
  g.wr_data32(1);
  racing_ram ram{g.ram, g.mem, 1000, 7};
  g.ctx.gpr[0] = data_lin;
  g.ctx.gpr[1] = 2;
  g.ctx.rflags = x86::rflags{0x2 | 0x1};
  g.code_bytes({0xf0, 0x01, 0x08});
  const auto o = run(ram);
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.rip, guest::code);
  EXPECT_EQ(ram.cmpxchg_calls, 16u);
  EXPECT_EQ(g.rd_data32(), 22u);
  EXPECT_EQ(g.ctx.rflags.raw(), 0x3u);
}

// A 2-byte lock inc on flat_ram (the real compare-exchange): 0x00ff + 1 = 0x0100.
TEST_F(Rules, LockedWordIncOnFlatRam) {
  g.put_data({0xff, 0x00});
  g.ctx.gpr[0] = data_lin;
  ASSERT_TRUE(g.exec({0xf0, 0x66, 0xff, 0x00}).is_done());  // lock inc word [rax]
  EXPECT_EQ(g.mem[data_phys], 0x00);
  EXPECT_EQ(g.mem[data_phys + 1], 0x01);
}

}  // namespace
