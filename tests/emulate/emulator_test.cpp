// SPDX-License-Identifier: MIT
// Golden emulation cases: every expected value is typed by hand from the SDM (instruction
// pages, flag definitions, #PF error-code layout), never computed by the code under test.
#include <gtest/gtest.h>

#include <cstdint>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;
using hvkit::test::mmio_base;
using hvkit::test::pte_p;
using hvkit::test::pte_rw;
using hvkit::test::pte_us;

constexpr std::uint64_t data_lin = 0x60'0000;   // a RAM data page
constexpr std::uint64_t data_phys = 0x12'0000;
constexpr std::uint64_t mmio_lin = 0x70'0000;   // a page mapped to MMIO
constexpr std::uint64_t flags_mask = 0x8d5;     // OF SF ZF AF PF CF

struct Emulator : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.map(data_lin, data_phys);
    g.map(data_lin + 0x1000, data_phys + 0x1000);
    g.map(mmio_lin, mmio_base);
    g.map(mmio_lin + 0x1000, mmio_base + 0x1000);
  }
};

// ---------------------------------------------------------------------------- MMIO moves
TEST_F(Emulator, MmioStoreIsByteExactIncludingPageOffset) {
  g.ctx.gpr[0] = mmio_lin + 0x30;  // rax
  g.ctx.gpr[3] = 0x1122'3344'1234'5678;  // rbx
  const auto o = g.exec({0x89, 0x18});  // mov [rax], ebx
  ASSERT_TRUE(o.is_done());
  ASSERT_EQ(g.plat.mmio.size(), 1u);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0x30);
  EXPECT_EQ(g.plat.mmio[0].size, 4u);
  EXPECT_TRUE(g.plat.mmio[0].write);
  EXPECT_EQ(g.plat.mmio[0].value, 0x1234'5678u);
  EXPECT_EQ(g.ctx.rip, guest::code + 2);
}

TEST_F(Emulator, MmioLoadZeroExtends32BitDestination) {
  g.ctx.gpr[0] = mmio_lin + 0x40;
  g.ctx.gpr[1] = ~0ull;
  const auto o = g.exec({0x8b, 0x48, 0x08});  // mov ecx, [rax+8]
  ASSERT_TRUE(o.is_done());
  ASSERT_EQ(g.plat.mmio.size(), 1u);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0x48);
  // bytes 0x48+0x11 .. 0x4b+0x11 = 59 5a 5b 5c
  EXPECT_EQ(g.ctx.gpr[1], 0x5c5b'5a59u);
  EXPECT_EQ(g.ctx.rip, guest::code + 3);
}

TEST_F(Emulator, MmioAccessCrossingAPageIsSplitAtTheBoundary) {
  g.ctx.gpr[0] = mmio_lin + 0xffe;
  g.ctx.gpr[3] = 0xaabb'ccdd;
  ASSERT_TRUE(g.exec({0x89, 0x18}).is_done());  // mov [rax], ebx
  ASSERT_EQ(g.plat.mmio.size(), 2u);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0xffe);
  EXPECT_EQ(g.plat.mmio[0].size, 2u);
  EXPECT_EQ(g.plat.mmio[0].value, 0xccddu);
  EXPECT_EQ(g.plat.mmio[1].gpa, mmio_base + 0x1000);
  EXPECT_EQ(g.plat.mmio[1].size, 2u);
  EXPECT_EQ(g.plat.mmio[1].value, 0xaabbu);
}

TEST_F(Emulator, MovzxFromMmioByte) {
  g.ctx.gpr[6] = mmio_lin + 0x7;  // rsi
  g.ctx.gpr[2] = ~0ull;
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xb6, 0x16}).is_done());  // movzx rdx, byte [rsi]
  EXPECT_EQ(g.ctx.gpr[2], 0x18u);
}

TEST_F(Emulator, UnclaimedMmioNeedsCompletionAndCommitsNothing) {
  g.plat.claim_mmio = false;
  g.ctx.gpr[0] = mmio_lin + 0x10;
  g.ctx.gpr[1] = 0x55;
  const auto o = g.exec({0x8b, 0x08});  // mov ecx, [rax]
  ASSERT_EQ(o.kind, outcome_kind::needs_mmio);
  EXPECT_EQ(o.address, mmio_base + 0x10);
  EXPECT_EQ(o.size, 4);
  EXPECT_FALSE(o.write);
  EXPECT_EQ(g.ctx.rip, guest::code);
  EXPECT_EQ(g.ctx.gpr[1], 0x55u);
  // Completion: the caller supplies the value and re-runs.
  g.ctx.pending = completion{completion::kind::mmio, mmio_base + 0x10, 4, false, 0xcafe'f00d};
  ASSERT_TRUE(g.run().is_done());
  EXPECT_EQ(g.ctx.gpr[1], 0xcafe'f00du);
  EXPECT_EQ(g.ctx.rip, guest::code + 2);
  EXPECT_EQ(g.ctx.pending.what, completion::kind::none);
}


// A platform with device regions of 0x10 bytes: accesses split at region boundaries too.
struct regioned_platform : hvkit::test::recording_platform {
  std::uint64_t mmio_region_bytes(x86::gpa a) const { return 0x10 - (a.value() & 0xf); }
};

TEST_F(Emulator, MmioAccessesSplitAtDeviceRegionBoundaries) {
  regioned_platform dev;
  auto mmu = g.make_mmu(g.ctx.cr0);
  walker_translator tr{mmu, g.ram};
  g.ctx.gpr[0] = mmio_lin + 0x10e;
  g.ctx.gpr[3] = 0x4433'2211;
  g.code_bytes({0x89, 0x18});  // mov [rax], ebx: bytes 0x10e-0x111 span two 16-byte regions
  ASSERT_TRUE(emulate::emulate(g.ctx, tr, g.ram, dev).is_done());
  ASSERT_EQ(dev.mmio.size(), 2u);
  EXPECT_EQ(dev.mmio[0].gpa, mmio_base + 0x10e);
  EXPECT_EQ(dev.mmio[0].size, 2u);
  EXPECT_EQ(dev.mmio[0].value, 0x2211u);
  EXPECT_EQ(dev.mmio[1].gpa, mmio_base + 0x110);
  EXPECT_EQ(dev.mmio[1].size, 2u);
  EXPECT_EQ(dev.mmio[1].value, 0x4433u);
  // A rep movsb from RAM into one region: one byte access per element, byte-exact.
  g.put_data({1, 2, 3});
  g.ctx.rip = guest::code;
  g.ctx.gpr[6] = data_lin;
  g.ctx.gpr[7] = mmio_lin + 0x20f;
  g.ctx.gpr[1] = 3;
  g.code_bytes({0xf3, 0xa4});
  dev.mmio.clear();
  ASSERT_TRUE(emulate::emulate(g.ctx, tr, g.ram, dev).is_done());
  ASSERT_EQ(dev.mmio.size(), 3u);
  EXPECT_EQ(dev.mmio[0].gpa, mmio_base + 0x20f);
  EXPECT_EQ(dev.mmio[1].gpa, mmio_base + 0x210);
  EXPECT_EQ(dev.mmio[2].value, 3u);
}


TEST_F(Emulator, TrapFlagRequestsSingleStepAndMovSsSetsTheShadow) {
  g.ctx.rflags.set(x86::rflags::tf);
  g.ctx.gpr[0] = mmio_lin;
  auto o = g.exec({0x89, 0x18});
  ASSERT_TRUE(o.is_done());
  EXPECT_TRUE(o.single_step);
  EXPECT_FALSE(o.mov_ss_shadow);
  g.ctx.rflags.reset(x86::rflags::tf);
  g.ctx.rip = guest::code;
  o = g.exec({0x89, 0x18});
  EXPECT_FALSE(o.single_step);
}

TEST(RealModeShadow, MovSsInhibitsInterrupts) {
  guest g;
  g.ctx.cr0 = x86::cr0{0x10};
  for (auto& s : g.ctx.seg) s = segment{0, 0, 0xffff, segment_ar{0x93}};
  g.ctx[sreg::cs].ar = segment_ar{0x9b};
  g.ctx.rip = 0x7c00;
  const auto o = g.exec({0x8e, 0xd0});  // mov ss, ax
  ASSERT_TRUE(o.is_done());
  EXPECT_TRUE(o.mov_ss_shadow);
}

// ---------------------------------------------------------------------------- ALU
TEST_F(Emulator, AddByteOverflowFlags) {
  g.ctx.gpr[0] = data_lin;
  g.mem[data_phys] = 0x7f;
  ASSERT_TRUE(g.exec({0x80, 0x00, 0x01}).is_done());  // add byte [rax], 1
  EXPECT_EQ(g.mem[data_phys], 0x80);
  // 0x7f + 1 = 0x80: OF=1 SF=1 AF=1 ZF=0 CF=0 PF=0 (one bit set: odd parity)
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x800u | 0x80u | 0x10u);
}

TEST_F(Emulator, SubBorrowFlags) {
  g.ctx.gpr[0] = 0;
  ASSERT_TRUE(g.exec({0x48, 0x83, 0xe8, 0x01}).is_done());  // sub rax, 1
  EXPECT_EQ(g.ctx.gpr[0], ~0ull);
  // 0 - 1: CF=1 SF=1 AF=1 PF=1 (0xff has 8 bits) ZF=0 OF=0
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x1u | 0x80u | 0x10u | 0x4u);
}

TEST_F(Emulator, CmpDoesNotWriteAndSetsZf) {
  g.ctx.gpr[0] = data_lin;
  g.wr_data32(0x1234);
  g.ctx.gpr[3] = 0x1234;
  ASSERT_TRUE(g.exec({0x39, 0x18}).is_done());  // cmp [rax], ebx
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x40u | 0x4u);  // ZF PF
  EXPECT_EQ(g.mem[data_phys], 0x34);
}

TEST_F(Emulator, AdcUsesCarryIn) {
  g.ctx.gpr[0] = 0xffff'ffff;
  g.ctx.rflags.set(x86::rflags::cf);
  ASSERT_TRUE(g.exec({0x83, 0xd0, 0x00}).is_done());  // adc eax, 0
  EXPECT_EQ(g.ctx.gpr[0], 0u);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x1u | 0x40u | 0x10u | 0x4u);  // CF ZF AF PF
}

TEST_F(Emulator, IncKeepsCarryNegSetsIt) {
  g.ctx.gpr[1] = 0xff;
  g.ctx.rflags.set(x86::rflags::cf);
  ASSERT_TRUE(g.exec({0xfe, 0xc1}).is_done());  // inc cl
  EXPECT_EQ(g.ctx.gpr[1], 0u);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x1u | 0x40u | 0x10u | 0x4u);  // CF kept, ZF AF PF
  g.ctx.rip = guest::code;
  g.ctx.gpr[1] = 5;
  ASSERT_TRUE(g.exec({0xf7, 0xd9}).is_done());  // neg ecx
  EXPECT_EQ(g.ctx.gpr[1], 0xffff'fffbu);
  // -5 = 0xfffffffb: CF=1 SF=1 AF=1 (0 - 5 borrows from bit 4) PF: 0xfb has 7 bits -> 0
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x1u | 0x80u | 0x10u);
}

TEST_F(Emulator, NotAndXorOnMemory) {
  g.ctx.gpr[0] = data_lin;
  g.mem[data_phys] = 0x0f;
  ASSERT_TRUE(g.exec({0xf6, 0x10}).is_done());  // not byte [rax]
  EXPECT_EQ(g.mem[data_phys], 0xf0);
  g.ctx.rip = guest::code;
  g.ctx.gpr[2] = 0xf0;
  ASSERT_TRUE(g.exec({0x30, 0x10}).is_done());  // xor [rax], dl
  EXPECT_EQ(g.mem[data_phys], 0x00);
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x40u | 0x4u);
}

TEST_F(Emulator, HighByteRegistersWithoutRex) {
  g.ctx.gpr[0] = 0x1122;  // ah = 0x11
  g.ctx.gpr[3] = 0x3344;  // bh = 0x33
  ASSERT_TRUE(g.exec({0x00, 0xfc}).is_done());  // add ah, bh
  EXPECT_EQ(g.ctx.gpr[0], 0x4422u);
}

TEST_F(Emulator, XchgMemoryAndRegister) {
  g.ctx.gpr[0] = data_lin;
  g.wr_data32(0xaaaa'aaaa);
  g.ctx.gpr[1] = 0x1'0000'0001;
  ASSERT_TRUE(g.exec({0x87, 0x08}).is_done());  // xchg [rax], ecx
  EXPECT_EQ(g.rd_data32(), 0x1u);
  EXPECT_EQ(g.ctx.gpr[1], 0xaaaa'aaaau);  // 32-bit write zero-extends
}

TEST_F(Emulator, MovsxAndMovsxd) {
  g.ctx.gpr[0] = 0x80;
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xbe, 0xc8}).is_done());  // movsx rcx, al
  EXPECT_EQ(g.ctx.gpr[1], 0xffff'ffff'ffff'ff80u);
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x8000'0000;
  ASSERT_TRUE(g.exec({0x48, 0x63, 0xd0}).is_done());  // movsxd rdx, eax
  EXPECT_EQ(g.ctx.gpr[2], 0xffff'ffff'8000'0000u);
}

TEST_F(Emulator, BitStringWithNegativeRegisterOffset) {
  // bts [rax], rcx with rcx = -1: bit 63 of the qword at rax-8 (SDM BT: bit-string addressing).
  g.ctx.gpr[0] = data_lin + 0x10;
  g.ctx.gpr[1] = ~0ull;
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xab, 0x08}).is_done());
  EXPECT_EQ(g.mem[data_phys + 0xf], 0x80);
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::cf));
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0xba, 0x30, 0x3f}).is_done());  // btr dword [rax], 63 -> bit 31
  g.ctx.rip = guest::code;
  g.wr_data32(0);
  g.mem[data_phys + 3] = 0x80;
  g.ctx.gpr[0] = data_lin;
  ASSERT_TRUE(g.exec({0x0f, 0xba, 0x20, 0x1f}).is_done());  // bt dword [rax], 31
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::cf));
}

TEST_F(Emulator, TestAndMovImmediate) {
  g.ctx.gpr[0] = data_lin;
  ASSERT_TRUE(g.exec({0x48, 0xc7, 0x00, 0xff, 0xff, 0xff, 0xff}).is_done());  // mov qword [rax], -1
  EXPECT_EQ(g.rd64(data_phys), ~0ull);
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0xf6, 0x00, 0x00}).is_done());  // test byte [rax], 0
  EXPECT_EQ(g.ctx.rflags.raw() & flags_mask, 0x40u | 0x4u);
}

TEST_F(Emulator, MoffsLoad) {
  // mov eax, [moffs64] (A1 + 8-byte offset)
  g.wr_data32(0x0bad'cafe);
  const std::uint64_t a = data_lin;
  g.code_bytes({0xa1, static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(a >> 8), static_cast<std::uint8_t>(a >> 16),
                0, 0, 0, 0, 0});
  ASSERT_TRUE(g.run().is_done());
  EXPECT_EQ(g.ctx.gpr[0], 0x0bad'cafeu);
  EXPECT_EQ(g.ctx.rip, guest::code + 9);
}

// ---------------------------------------------------------------------------- strings
TEST_F(Emulator, RepMovsdFromRamToMmioSplitsAtPageAndRegionBoundaries) {
  // 3 dwords from RAM to MMIO starting 4 bytes before an MMIO page boundary + 2:
  // destination mmio_lin + 0xffa .. 0x1005: the second dword straddles the page.
  for (unsigned i = 0; i < 12; ++i) g.mem[data_phys + i] = static_cast<std::uint8_t>(0xa0 + i);
  g.ctx.gpr[6] = data_lin;         // rsi
  g.ctx.gpr[7] = mmio_lin + 0xffa; // rdi
  g.ctx.gpr[1] = 3;                // rcx
  ASSERT_TRUE(g.exec({0xf3, 0xa5}).is_done());  // rep movsd
  ASSERT_EQ(g.plat.mmio.size(), 4u);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0xffa);
  EXPECT_EQ(g.plat.mmio[0].size, 4u);
  EXPECT_EQ(g.plat.mmio[0].value, 0xa3a2'a1a0u);
  EXPECT_EQ(g.plat.mmio[1].gpa, mmio_base + 0xffe);
  EXPECT_EQ(g.plat.mmio[1].size, 2u);
  EXPECT_EQ(g.plat.mmio[1].value, 0xa5a4u);
  EXPECT_EQ(g.plat.mmio[2].gpa, mmio_base + 0x1000);
  EXPECT_EQ(g.plat.mmio[2].size, 2u);
  EXPECT_EQ(g.plat.mmio[2].value, 0xa7a6u);
  EXPECT_EQ(g.plat.mmio[3].gpa, mmio_base + 0x1002);
  EXPECT_EQ(g.plat.mmio[3].value, 0xabaa'a9a8u);
  EXPECT_EQ(g.ctx.gpr[1], 0u);
  EXPECT_EQ(g.ctx.gpr[6], data_lin + 12);
  EXPECT_EQ(g.ctx.gpr[7], mmio_lin + 0xffa + 12);
  EXPECT_EQ(g.ctx.rip, guest::code + 2);
}

TEST_F(Emulator, StosbBackwardsWithDf) {
  g.ctx.rflags.set(x86::rflags::df);
  g.ctx.gpr[0] = 0x5a;
  g.ctx.gpr[7] = data_lin + 2;
  g.ctx.gpr[1] = 3;
  ASSERT_TRUE(g.exec({0xf3, 0xaa}).is_done());  // rep stosb
  EXPECT_EQ(g.mem[data_phys], 0x5a);
  EXPECT_EQ(g.mem[data_phys + 2], 0x5a);
  EXPECT_EQ(g.ctx.gpr[7], data_lin - 1);
}

TEST_F(Emulator, RepeCmpsStopsAtFirstDifference) {
  g.put_data({1, 2, 3, 4});
  g.mem[data_phys + 0x800] = 1;
  g.mem[data_phys + 0x801] = 2;
  g.mem[data_phys + 0x802] = 9;
  g.ctx.gpr[6] = data_lin;
  g.ctx.gpr[7] = data_lin + 0x800;
  g.ctx.gpr[1] = 4;
  ASSERT_TRUE(g.exec({0xf3, 0xa6}).is_done());  // repe cmpsb
  EXPECT_EQ(g.ctx.gpr[1], 1u);  // stopped after the third comparison
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::cf));  // 3 < 9
}

TEST_F(Emulator, LodsFromMmio) {
  g.ctx.gpr[6] = mmio_lin + 0x20;
  ASSERT_TRUE(g.exec({0x66, 0xad}).is_done());  // lodsw
  EXPECT_EQ(g.ctx.gpr[0] & 0xffff, 0x3231u);
  EXPECT_EQ(g.ctx.gpr[6], mmio_lin + 0x22);
}

TEST_F(Emulator, RepStringFaultMidwayKeepsCompletedIterations) {
  // rep stosd over the end of the mapped data pages: the third page is not mapped.
  g.ctx.gpr[7] = data_lin + 0x2000 - 8;
  g.ctx.gpr[1] = 4;
  g.ctx.gpr[0] = 0x01020304;
  const auto o = g.exec({0xf3, 0xab});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x2u);  // not present, write, supervisor
  EXPECT_TRUE(o.is_page_fault());
  EXPECT_EQ(o.page_fault_error_code(), x86::pfec::write);  // typed: SDM 4.7 bit 1
  EXPECT_EQ(o.cr2, data_lin + 0x2000);
  EXPECT_EQ(g.ctx.gpr[1], 2u);  // two iterations completed
  EXPECT_EQ(g.ctx.gpr[7], data_lin + 0x2000);
  EXPECT_EQ(g.ctx.rip, guest::code);  // restarts at the instruction
}

// ---------------------------------------------------------------------------- port I/O
TEST_F(Emulator, InAndOut) {
  g.plat.pio_value = 0xabcd'1234;
  g.ctx.gpr[0] = ~0ull;
  ASSERT_TRUE(g.exec({0xe5, 0x71}).is_done());  // in eax, 0x71
  EXPECT_EQ(g.ctx.gpr[0], 0xabcd'1234u);
  ASSERT_EQ(g.plat.pio.size(), 1u);
  EXPECT_EQ(g.plat.pio[0].gpa, 0x71u);
  EXPECT_EQ(g.plat.pio[0].size, 4u);
  g.ctx.rip = guest::code;
  g.ctx.gpr[2] = 0x3f8;
  g.ctx.gpr[0] = 0x41;
  ASSERT_TRUE(g.exec({0xee}).is_done());  // out dx, al
  EXPECT_EQ(g.plat.pio[1].gpa, 0x3f8u);
  EXPECT_EQ(g.plat.pio[1].value, 0x41u);
}

TEST_F(Emulator, UnclaimedPortNeedsIo) {
  g.plat.claim_pio = false;
  g.ctx.gpr[2] = 0xcf8;
  g.ctx.gpr[0] = 0x8000'0000;
  const auto o = g.exec({0xef});  // out dx, eax
  ASSERT_EQ(o.kind, outcome_kind::needs_io);
  EXPECT_EQ(o.address, 0xcf8u);
  EXPECT_EQ(o.size, 4);
  EXPECT_TRUE(o.write);
  EXPECT_EQ(o.value, 0x8000'0000u);
  EXPECT_EQ(g.ctx.rip, guest::code);
}

TEST_F(Emulator, InAtCpl3AboveIoplChecksTheTssBitmap) {
  // TSS at linear 0x60'0100 (data page), I/O map base 0x68, port 0x71 denied (bit set).
  const std::uint64_t tss = data_lin + 0x100;
  g.ctx.tr = segment{0x28, tss, 0x68 + 0x20, segment_ar{0x8b}};
  g.mem[data_phys + 0x100 + 0x66] = 0x68;
  g.mem[data_phys + 0x100 + 0x68 + 0x71 / 8] = 1u << (0x71 % 8);
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  const auto o = g.exec({0xe4, 0x71});  // in al, 0x71
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
  // Port 0x70 is allowed by the bitmap.
  const auto o2 = g.exec({0xe4, 0x70});
  EXPECT_TRUE(o2.is_done());
}

// ---------------------------------------------------------------------------- faults
TEST_F(Emulator, NonCanonicalDataAccessIsGp) {
  g.ctx.gpr[0] = 0x0000'8000'0000'0000;
  const auto o = g.exec({0x8b, 0x08});  // mov ecx, [rax]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
}

TEST_F(Emulator, NonCanonicalStackAccessIsSs) {
  g.ctx.gpr[4] = 0x0000'8000'0000'0000;
  const auto o = g.exec({0x8b, 0x0c, 0x24});  // mov ecx, [rsp]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ss);
  EXPECT_EQ(o.error_code, 0u);
}

TEST_F(Emulator, AccessEndingInNonCanonicalSpaceIsGp) {
  g.ctx.gpr[0] = 0x0000'7fff'ffff'fffe;  // first byte canonical, last byte not
  const auto o = g.exec({0x8b, 0x08});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
}

TEST_F(Emulator, WriteToReadOnlyPageIsPfWithErrorCode) {
  g.map(data_lin + 0x3000, data_phys + 0x3000, pte_p);  // read-only
  g.ctx.gpr[0] = data_lin + 0x3000;
  const auto o = g.exec({0x89, 0x18});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x3u);  // P | W
  EXPECT_EQ(o.page_fault_error_code(), x86::pfec::present | x86::pfec::write);
  EXPECT_EQ(o.cr2, data_lin + 0x3000);
}

TEST_F(Emulator, UserAccessToSupervisorPage) {
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  g.ctx.gpr[0] = data_lin;  // supervisor page
  const auto o = g.exec({0x8b, 0x08});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.error_code, 0x5u);  // P | U
  EXPECT_EQ(o.page_fault_error_code(), x86::pfec::present | x86::pfec::user);
}

TEST_F(Emulator, StraddlingWriteChecksBothPagesBeforeWriting) {
  g.map(data_lin + 0x3000, data_phys + 0x3000);
  g.map(data_lin + 0x4000, data_phys + 0x4000, pte_p);  // second page read-only
  g.ctx.gpr[0] = data_lin + 0x3ffe;
  g.ctx.gpr[3] = 0xffff'ffff;
  const auto o = g.exec({0x89, 0x18});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.error_code, 0x3u);
  EXPECT_EQ(o.cr2, data_lin + 0x4000);
  EXPECT_EQ(g.mem[data_phys + 0x3ffe], 0);  // nothing written on the first page
}

// ---------------------------------------------------------------------------- fetch
TEST_F(Emulator, PageStraddlingFetch) {
  g.map(guest::code + 0x1000, guest::code_phys + 0x1000);
  g.ctx.rip = guest::code + 0xfff;
  g.mem[guest::code_phys + 0xfff] = 0x89;   // mov [rax], ebx: opcode on the first page,
  g.mem[guest::code_phys + 0x1000] = 0x18;  // ModRM on the second
  g.ctx.gpr[0] = data_lin;
  g.ctx.gpr[3] = 0x7777;
  const auto o = g.run();
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.rd_data32(), 0x7777u);
  EXPECT_EQ(g.ctx.rip, guest::code + 0x1001);
}

TEST_F(Emulator, FetchFaultsOnTheSecondPageOnlyWhenTheInstructionReachesIt) {
  g.ctx.rip = guest::code + 0xfff;
  g.mem[guest::code_phys + 0xfff] = 0x89;  // the ModRM byte would be on the unmapped page
  const auto o = g.run();
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x10u);  // not present, instruction fetch (EFER.NXE=1), supervisor
  EXPECT_EQ(o.cr2, guest::code + 0x1000);
  // A one-byte instruction at the same place needs no byte of the next page.
  g.mem[guest::code_phys + 0xfff] = 0xf4;  // hlt
  const auto h = g.run();
  ASSERT_TRUE(h.is_done());
  EXPECT_EQ(h.what, event::halt);
}

TEST_F(Emulator, FetchFromNonExecutablePage) {
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | hvkit::test::pte_xd);
  const auto o = g.exec({0xf4});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.error_code, 0x11u);  // P | I/D
}

TEST_F(Emulator, InvalidAndUnsupportedInstructions) {
  auto o = g.exec({0x8e, 0xc8});  // mov cs, ax: #UD
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ud);
  o = g.exec({0xff, 0xd0});  // call rax: valid, not emulated
  EXPECT_EQ(o.kind, outcome_kind::unsupported);
  EXPECT_EQ(o.why, unsupported_reason::instruction);
  o = g.exec({0xf0, 0x8b, 0x08});  // lock mov: #UD
  EXPECT_EQ(o.vector, x86::vector::ud);
  EXPECT_EQ(g.ctx.rip, guest::code);
}

TEST_F(Emulator, FifteenByteLimitIsGp) {
  g.code_bytes({0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
                0x48, 0x81, 0x00, 0x01, 0x00, 0x00, 0x00});  // 18 bytes
  const auto o = g.run();
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
}


// ---------------------------------------------------------------------------- remaining per-instruction cases
TEST_F(Emulator, OrAndSbbDecOnMemory) {
  g.ctx.gpr[0] = data_lin;
  g.wr_data32(0x0000'f0f0);
  g.ctx.gpr[3] = 0x0f0f'0000;
  ASSERT_TRUE(g.exec({0x09, 0x18}).is_done());  // or [rax], ebx
  EXPECT_EQ(g.rd_data32(), 0x0f0f'f0f0u);
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x81, 0x20, 0xff, 0x00, 0xff, 0x00}).is_done());  // and dword [rax], 0x00ff00ff
  EXPECT_EQ(g.rd_data32(), 0x000f'00f0u);
  g.ctx.rip = guest::code;
  g.ctx.rflags.set(x86::rflags::cf);
  ASSERT_TRUE(g.exec({0x83, 0x18, 0x01}).is_done());  // sbb dword [rax], 1: 0xf00f0 - 1 - 1
  EXPECT_EQ(g.rd_data32(), 0x000f'00eeu);
  g.ctx.rip = guest::code;
  g.wr_data32(1);
  ASSERT_TRUE(g.exec({0xff, 0x08}).is_done());  // dec dword [rax]
  EXPECT_EQ(g.rd_data32(), 0u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
}

TEST_F(Emulator, BtrAndBtcOnRegisters) {
  g.ctx.gpr[0] = 0xff;
  g.ctx.gpr[1] = 67;  // register operands: offset modulo 64
  ASSERT_TRUE(g.exec({0x48, 0x0f, 0xb3, 0xc8}).is_done());  // btr rax, rcx
  EXPECT_EQ(g.ctx.gpr[0], 0xf7u);
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::cf));
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0xba, 0xf8, 0x1f}).is_done());  // btc eax, 31
  EXPECT_EQ(g.ctx.gpr[0], 0x8000'00f7u);
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::cf));
}

TEST_F(Emulator, MovFromSegmentRegister) {
  g.ctx[sreg::fs].selector = 0x2b;
  g.ctx.gpr[1] = ~0ull;
  ASSERT_TRUE(g.exec({0x8c, 0xe1}).is_done());  // mov ecx, fs
  EXPECT_EQ(g.ctx.gpr[1], 0x2bu);
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = data_lin;
  g.put_data({0xee, 0xee, 0xee, 0xee});
  ASSERT_TRUE(g.exec({0x48, 0x8c, 0x20}).is_done());  // mov [rax], fs: always 16 bits
  EXPECT_EQ(g.rd_data32(), 0xeeee'002bu);
}

TEST_F(Emulator, InsAndOutsThroughPortsAndMmio) {
  g.plat.pio_value = 0x11223344;
  g.ctx.gpr[2] = 0x60;
  g.ctx.gpr[7] = mmio_lin + 0x100;
  ASSERT_TRUE(g.exec({0x6d}).is_done());  // insd
  ASSERT_EQ(g.plat.pio.size(), 1u);
  ASSERT_EQ(g.plat.mmio.size(), 1u);
  EXPECT_EQ(g.plat.mmio[0].gpa, mmio_base + 0x100);
  EXPECT_EQ(g.plat.mmio[0].value, 0x1122'3344u);
  EXPECT_EQ(g.ctx.gpr[7], mmio_lin + 0x104);
  g.ctx.rip = guest::code;
  g.put_data({0x61, 0x62});
  g.ctx.gpr[6] = data_lin;
  g.ctx.gpr[1] = 2;
  ASSERT_TRUE(g.exec({0xf3, 0x6e}).is_done());  // rep outsb
  ASSERT_EQ(g.plat.pio.size(), 3u);
  EXPECT_EQ(g.plat.pio[1].value, 0x61u);
  EXPECT_EQ(g.plat.pio[2].value, 0x62u);
  EXPECT_TRUE(g.plat.pio[2].write);
  EXPECT_EQ(g.ctx.gpr[6], data_lin + 2);
}

TEST_F(Emulator, SidtAndInvd) {
  g.ctx.idtr = descriptor_table{0x1000, 0xfff};
  g.ctx.gpr[0] = data_lin;
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0x08}).is_done());  // sidt [rax]
  EXPECT_EQ(g.mem[data_phys], 0xff);
  EXPECT_EQ(g.mem[data_phys + 1], 0x0f);
  EXPECT_EQ(g.rd64(data_phys + 2), 0x1000u);
  g.ctx.rip = guest::code;
  EXPECT_EQ(g.exec({0x0f, 0x08}).what, event::cache_flush);  // invd
}

// ---------------------------------------------------------------------------- segmentation (32-bit)
struct Protected32 : ::testing::Test {
  guest g;
  void SetUp() override { g.protected32(); }
};

TEST_F(Protected32, DataSegmentLimitIsGp) {
  g.ctx[sreg::ds] = segment{0x10, 0x20'0000 - 0x1000, 0xfff, segment_ar{0x4093}};
  g.ctx.gpr[0] = 0xffe;
  const auto o = g.exec({0x8b, 0x08});  // mov ecx, [eax]: bytes 0xffe..0x1001, limit 0xfff
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
  g.ctx.gpr[0] = 0xffc;
  EXPECT_TRUE(g.exec({0x8b, 0x08}).is_done());
}

TEST_F(Protected32, StackSegmentLimitIsSs) {
  g.ctx[sreg::ss] = segment{0x18, 0, 0xfff, segment_ar{0x4093}};
  g.ctx.gpr[5] = 0x1000;  // ebp
  const auto o = g.exec({0x8b, 0x45, 0x00});  // mov eax, [ebp]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::ss);
}

TEST_F(Protected32, ExpandDownSegment) {
  // Expand-down, B=1: valid offsets are (limit, 0xffffffff].
  g.ctx[sreg::es] = segment{0x20, 0, 0x0fff, segment_ar{0x4097}};
  g.ctx.gpr[0] = 0x800;
  auto o = g.exec({0x26, 0x8b, 0x08});  // mov ecx, es:[eax]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  g.ctx.gpr[0] = 0x1000;
  EXPECT_TRUE(g.exec({0x26, 0x8b, 0x08}).is_done());
}

TEST_F(Protected32, WriteToReadOnlyOrCodeSegmentIsGp) {
  g.ctx[sreg::ds].ar = segment_ar{0xc091};  // read-only data
  g.ctx.gpr[0] = 0x1000;
  auto o = g.exec({0x89, 0x08});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  o = g.exec({0x2e, 0x89, 0x08});  // cs: override, code segment
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_TRUE(g.exec({0x2e, 0x8b, 0x08}).is_done());  // reading readable code is fine
}

TEST_F(Protected32, NullSegmentIsGp) {
  g.ctx[sreg::fs] = segment{0, 0, 0, segment_ar{0x10000}};
  const auto o = g.exec({0x64, 0x8b, 0x08});
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
}

TEST_F(Protected32, FetchBeyondCsLimitIsGp) {
  g.ctx[sreg::cs].limit = static_cast<std::uint32_t>(g.ctx.rip + 1);  // two bytes of code
  g.code_bytes({0x8b, 0x48, 0x08});  // three-byte instruction
  const auto o = g.run();
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
}

TEST_F(Protected32, SixteenBitAddressingWithSegmentBase) {
  g.ctx[sreg::ds].base = 0x5'0000;
  g.ctx.gpr[3] = 0x10;  // bx
  g.ctx.gpr[6] = 0x4;   // si
  g.put(0x5'0014 + 0x20, {0x78, 0x56});
  ASSERT_TRUE(g.exec({0x67, 0x66, 0x8b, 0x40, 0x20}).is_done());  // mov ax, [bx+si+0x20]
  EXPECT_EQ(g.ctx.gpr[0] & 0xffff, 0x5678u);
}

TEST(RealMode, MovToSegmentRegisterSetsBase) {
  guest g;
  g.ctx.cr0 = x86::cr0{0x10};
  for (auto& s : g.ctx.seg) s = segment{0, 0, 0xffff, segment_ar{0x93}};
  g.ctx[sreg::cs].ar = segment_ar{0x9b};
  g.ctx.rip = 0x7c00;
  g.ctx.gpr[0] = 0x1234;
  ASSERT_TRUE(g.exec({0x8e, 0xd8}).is_done());  // mov ds, ax
  EXPECT_EQ(g.ctx[sreg::ds].selector, 0x1234u);
  EXPECT_EQ(g.ctx[sreg::ds].base, 0x12340u);
  EXPECT_EQ(g.ctx.rip, 0x7c02u);
  // SLDT is #UD in real mode (SDM SLDT).
  EXPECT_EQ(g.exec({0x0f, 0x00, 0xc0}).vector, x86::vector::ud);
}

}  // namespace

// make_page_fault() delivers only the architectural bits of a pfec (SDM 4.7, Figure 4-12:
// P bit 0, W/R bit 1, I/D bit 4); hvkit's software flag implicit_access (above bit 31) never
// reaches the guest.
TEST(Outcome, MakePageFaultKeepsOnlyHardwareBits) {
  constexpr auto o = hvkit::emulate::outcome::make_page_fault(
      hvkit::x86::pfec::present | hvkit::x86::pfec::write | hvkit::x86::pfec::implicit_access, hvkit::x86::gva{0x1234});
  static_assert(o.is_page_fault() && o.error_code == 0x3u && o.cr2 == 0x1234u);
  static_assert(o.page_fault_error_code() == (hvkit::x86::pfec::present | hvkit::x86::pfec::write));
  EXPECT_EQ(o.error_code, 0x3u);
  EXPECT_FALSE(hvkit::emulate::outcome::make_exception(hvkit::x86::vector::gp, 0).is_page_fault());
}
