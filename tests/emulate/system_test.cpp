// SPDX-License-Identifier: MIT
// System instructions: LTR and the CR0.WP seed bug (docs/background.md §1) in both directions,
// including a WP toggled after the MMU context was built; descriptor tables, control and
// debug registers, CPUID/MSRs, privilege checks. Expected values typed from the SDM.
#include <gtest/gtest.h>

#include <cstdint>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;
using hvkit::test::pte_p;
using hvkit::test::pte_rw;
using hvkit::test::pte_us;

constexpr std::uint64_t gdt_lin = 0x50'0000;   // the GDT's linear address
constexpr std::uint64_t gdt_phys = 0x13'0000;
constexpr std::uint16_t tss_sel = 0x28;         // GDT index 5
constexpr std::uint64_t data_lin = 0x60'0000;
constexpr std::uint64_t data_phys = 0x12'0000;

// A 64-bit available TSS descriptor (16 bytes, SDM 8.2.3 Figure 8-4): base 0x0000'0001'2345'6000,
// limit 0x67, type 9, P=1, DPL 0.
constexpr std::uint64_t tss_lo = 0x2300'8945'6000'0067;
constexpr std::uint64_t tss_hi = 0x0000'0000'0000'0001;

struct System : ::testing::Test {
  guest g;
  void SetUp() override {
    g.long_mode();
    g.map(data_lin, data_phys);
    g.ctx.gdtr = descriptor_table{gdt_lin, 0x7f};
    g.wr64(gdt_phys + 0x08, 0x00af'9b00'0000'ffff);  // 64-bit code
    g.wr64(gdt_phys + 0x10, 0x00cf'9300'0000'ffff);  // data
    g.wr64(gdt_phys + 0x28, tss_lo);
    g.wr64(gdt_phys + 0x30, tss_hi);
    g.wr64(gdt_phys + 0x38, 0x0000'8200'1000'0fff);  // LDT at 0x1000, limit 0xfff (and high half 0)
    g.wr64(gdt_phys + 0x40, 0);
  }
  void read_only_gdt() { g.map(gdt_lin, gdt_phys, pte_p); }
  void writable_gdt() { g.map(gdt_lin, gdt_phys, pte_p | pte_rw); }
  outcome ltr_with(paging::mmu_context& mmu) {
    g.ctx.gpr[0] = tss_sel;
    g.code_bytes({0x0f, 0x00, 0xd8});  // ltr ax
    return g.run_with(mmu);
  }
};

// ---------------------------------------------------------------------------- LTR and CR0.WP
TEST_F(System, LtrReadOnlyGdtWithWp0Succeeds) {
  read_only_gdt();
  g.ctx.cr0.reset(x86::cr0::wp);
  auto mmu = g.make_mmu(g.ctx.cr0);
  const auto o = ltr_with(mmu);
  ASSERT_TRUE(o.is_done()) << int(o.kind) << " vector " << int(o.vector) << " ec " << o.error_code;
  EXPECT_EQ(o.what, event::descriptor_table_load);
  // The busy bit (type 9 -> 11, byte 5 0x89 -> 0x8b) is set in the GDT...
  EXPECT_EQ(g.rd64(gdt_phys + 0x28), 0x2300'8b45'6000'0067u);
  // ...and TR holds the busy TSS.
  EXPECT_EQ(g.ctx.tr.selector, tss_sel);
  EXPECT_EQ(g.ctx.tr.base, 0x1'2345'6000u);
  EXPECT_EQ(g.ctx.tr.limit, 0x67u);
  EXPECT_EQ(g.ctx.tr.ar.type(), 11);
  EXPECT_EQ(g.ctx.rip, guest::code + 3);
}

TEST_F(System, LtrReadOnlyGdtWithWp1FaultsWithErrorCode3) {
  read_only_gdt();
  auto mmu = g.make_mmu(g.ctx.cr0);  // WP = 1
  const segment tr_before = g.ctx.tr;
  const auto o = ltr_with(mmu);
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x3u);  // P | W, supervisor (implicit access)
  EXPECT_EQ(o.cr2, gdt_lin + 0x28 + 5);  // the type byte of the descriptor
  EXPECT_EQ(g.rd64(gdt_phys + 0x28), tss_lo);  // nothing written
  EXPECT_EQ(g.ctx.tr, tr_before);
  EXPECT_EQ(g.ctx.rip, guest::code);
}

// THE SEED BUG: the guest owns CR0.WP and cleared it without an exit; the hypervisor's MMU
// context still says WP=1. The emulator must use the live CR0 and succeed.
TEST_F(System, LtrWithWpClearedAfterTheMmuContextWasBuiltSucceeds) {
  read_only_gdt();
  auto mmu = g.make_mmu(g.ctx.cr0);  // built with WP=1
  ASSERT_TRUE(mmu.role().cr0_wp());
  g.ctx.cr0.reset(x86::cr0::wp);  // guest-owned toggle, no exit
  const auto o = ltr_with(mmu);
  ASSERT_TRUE(o.is_done()) << "stale WP used: vector " << int(o.vector) << " error code " << o.error_code;
  EXPECT_EQ(g.rd64(gdt_phys + 0x28), 0x2300'8b45'6000'0067u);
  EXPECT_FALSE(mmu.role().cr0_wp());  // the context was refreshed in place
}

// The opposite direction: WP set by the guest after a context built with WP=0.
TEST_F(System, LtrWithWpSetAfterTheMmuContextWasBuiltFaults) {
  read_only_gdt();
  auto mmu = g.make_mmu(g.ctx.cr0.without(x86::cr0::wp));  // built with WP=0
  ASSERT_FALSE(mmu.role().cr0_wp());
  const auto o = ltr_with(mmu);  // live CR0.WP = 1
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x3u);
  EXPECT_EQ(g.rd64(gdt_phys + 0x28), tss_lo);
}

TEST_F(System, LtrAtCpl3AgainstReadOnlyGdtIsStillSupervisor) {
  // CPL 3 LTR is #GP(0) before any access (SDM LTR), so the implicit write is never tried.
  read_only_gdt();
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  auto mmu = g.make_mmu(g.ctx.cr0);
  const auto o = ltr_with(mmu);
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
}

TEST_F(System, LtrChecksComeBeforeTheBusyWrite) {
  writable_gdt();
  auto mmu = g.make_mmu(g.ctx.cr0);
  // Busy TSS: #GP(selector).
  g.wr64(gdt_phys + 0x28, 0x2300'8b45'6000'0067);
  auto o = ltr_with(mmu);
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, tss_sel);
  // Not present: #NP(selector), nothing written.
  g.wr64(gdt_phys + 0x28, 0x0000'0945'6000'0067);
  o = ltr_with(mmu);
  EXPECT_EQ(o.vector, x86::vector::np);
  EXPECT_EQ(o.error_code, tss_sel);
  EXPECT_EQ(g.rd64(gdt_phys + 0x28), 0x0000'0945'6000'0067u);
  // Beyond the GDT limit: #GP(selector).
  g.ctx.gdtr.limit = 0x2f;
  o = ltr_with(mmu);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, tss_sel);
  // Null selector: #GP(0).
  g.ctx.gdtr.limit = 0x7f;
  g.ctx.gpr[0] = 0;
  g.code_bytes({0x0f, 0x00, 0xd8});
  o = g.run_with(mmu);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
  // The upper half of a 16-byte descriptor must have type 0 (SDM 8.2.3).
  g.wr64(gdt_phys + 0x28, tss_lo);
  g.wr64(gdt_phys + 0x30, 0x0000'0100'0000'0001);
  o = ltr_with(mmu);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, tss_sel);
}

TEST_F(System, LtrGdtNotMappedIsPfOnTheRead) {
  auto mmu = g.make_mmu(g.ctx.cr0);
  const auto o = ltr_with(mmu);
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::pf);
  EXPECT_EQ(o.error_code, 0x0u);  // not present, read, supervisor
  EXPECT_EQ(o.cr2, gdt_lin + 0x28);
}

TEST_F(System, LldtLoadsLdtr) {
  writable_gdt();
  g.ctx.gpr[1] = 0x38;
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xd1}).is_done());  // lldt cx
  EXPECT_EQ(g.ctx.ldtr.selector, 0x38u);
  EXPECT_EQ(g.ctx.ldtr.base, 0x1000u);
  EXPECT_EQ(g.ctx.ldtr.limit, 0xfffu);
  EXPECT_FALSE(g.ctx.ldtr.ar.test(segment_ar::unusable));
  g.ctx.rip = guest::code;
  g.ctx.gpr[1] = 0x28;  // a TSS is not an LDT
  const auto o = g.exec({0x0f, 0x00, 0xd1});
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0x28u);
}

TEST_F(System, SldtStrSmswToRegisterAndMemory) {
  g.ctx.ldtr.selector = 0x38;
  g.ctx.tr.selector = 0x28;
  g.ctx.gpr[1] = ~0ull;
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xc1}).is_done());  // sldt ecx
  EXPECT_EQ(g.ctx.gpr[1], 0x38u);
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = data_lin;
  g.put(data_phys, {0xee, 0xee, 0xee});
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0x08}).is_done());  // str [rax]
  EXPECT_EQ(g.mem[data_phys], 0x28);
  EXPECT_EQ(g.mem[data_phys + 1], 0x00);
  EXPECT_EQ(g.mem[data_phys + 2], 0xee);  // exactly 16 bits stored
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0x20}).is_done());  // smsw [rax]
  EXPECT_EQ(g.mem[data_phys], 0x33);  // CR0 = 0x80010033
  EXPECT_EQ(g.mem[data_phys + 1], 0x00);
}

TEST_F(System, UmipBlocksStoresAtCpl3) {
  g.ctx.cr4.set(x86::cr4::umip);
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  g.ctx.gpr[0] = data_lin;
  const auto o = g.exec({0x0f, 0x01, 0x00});  // sgdt [rax]
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
}

TEST_F(System, SgdtAndLidtIn64BitMode) {
  g.ctx.gdtr = descriptor_table{0xffff'8000'1234'5000, 0x57};
  g.ctx.gpr[0] = data_lin;
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0x00}).is_done());  // sgdt [rax]: 10 bytes
  EXPECT_EQ(g.mem[data_phys], 0x57);
  EXPECT_EQ(g.mem[data_phys + 1], 0x00);
  EXPECT_EQ(g.rd64(data_phys + 2), 0xffff'8000'1234'5000u);
  g.ctx.rip = guest::code;
  g.put(data_phys + 0x20, {0xff, 0x0f, 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70});
  g.ctx.gpr[3] = data_lin + 0x20;
  const auto o = g.exec({0x0f, 0x01, 0x1b});  // lidt [rbx]
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::descriptor_table_load);
  EXPECT_EQ(g.ctx.idtr.limit, 0x0fffu);
  EXPECT_EQ(g.ctx.idtr.base, 0x7060'5040'3020'1000u);
}

TEST_F(System, LgdtAtCpl3IsGp) {
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  g.ctx.gpr[0] = data_lin;
  const auto o = g.exec({0x0f, 0x01, 0x10});  // lgdt [rax]
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, 0u);
}

TEST(System32, LgdtWith16BitOperandSizeLoads24BitBase) {
  guest g;
  g.protected32();
  g.put(0x3000, {0x27, 0x00, 0x11, 0x22, 0x33, 0x44});
  g.ctx.gpr[0] = 0x3000;
  ASSERT_TRUE(g.exec({0x66, 0x0f, 0x01, 0x10}).is_done());  // o16 lgdt [eax]
  EXPECT_EQ(g.ctx.gdtr.limit, 0x27u);
  EXPECT_EQ(g.ctx.gdtr.base, 0x33'2211u);
  g.ctx.rip = guest::code_phys;
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0x10}).is_done());  // lgdt [eax]
  EXPECT_EQ(g.ctx.gdtr.base, 0x4433'2211u);
}

TEST_F(System, LmswCannotClearPe) {
  g.ctx.cr0 = x86::cr0{0x8001'003b};  // TS set
  g.ctx.gpr[0] = 0x0;
  const auto o = g.exec({0x0f, 0x01, 0xf0});  // lmsw ax
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::cr_write);
  EXPECT_EQ(g.ctx.cr0.raw(), 0x8001'0031u);  // MP, EM, TS cleared; PE kept
}

TEST_F(System, CltsClearsTs) {
  g.ctx.cr0 = x86::cr0{0x8001'003b};
  ASSERT_TRUE(g.exec({0x0f, 0x06}).is_done());
  EXPECT_EQ(g.ctx.cr0.raw(), 0x8001'0033u);
}

TEST_F(System, MovFromAndToControlRegisters) {
  g.ctx.cr4 = x86::cr4{0x20};
  ASSERT_TRUE(g.exec({0x0f, 0x20, 0xe1}).is_done());  // mov rcx, cr4
  EXPECT_EQ(g.ctx.gpr[1], 0x20u);
  g.ctx.rip = guest::code;
  g.ctx.gpr[1] = 0x80'0020;  // CR4.PAE | bit 23 (CET) while WP=1: allowed
  ASSERT_TRUE(g.exec({0x0f, 0x22, 0xe1}).is_done());  // mov cr4, rcx
  EXPECT_EQ(g.ctx.cr4.raw(), 0x80'0020u);
  // Clearing CR0.WP with CR4.CET set is #GP(0) (SDM MOV CR).
  g.ctx.rip = guest::code;
  g.ctx.gpr[2] = 0x8000'0033;
  auto o = g.exec({0x0f, 0x22, 0xc2});  // mov cr0, rdx
  EXPECT_EQ(o.vector, x86::vector::gp);
  // CR4.PAE cannot be cleared in IA-32e mode.
  g.ctx.gpr[1] = 0;
  o = g.exec({0x0f, 0x22, 0xe1});
  EXPECT_EQ(o.vector, x86::vector::gp);
  // Bits 63:32 of CR0 are reserved.
  g.ctx.gpr[2] = 0x1'8001'0033;
  o = g.exec({0x0f, 0x22, 0xc2});
  EXPECT_EQ(o.vector, x86::vector::gp);
  // CR8 (REX.R): TPR, bits 63:4 reserved.
  g.ctx.gpr[0] = 0x9;
  ASSERT_TRUE(g.exec({0x44, 0x0f, 0x22, 0xc0}).is_done());  // mov cr8, rax
  EXPECT_EQ(g.ctx.cr8, 0x9u);
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x10;
  EXPECT_EQ(g.exec({0x44, 0x0f, 0x22, 0xc0}).vector, x86::vector::gp);
}

TEST_F(System, MovToCr0TogglesWpAndReportsIt) {
  g.ctx.gpr[0] = 0x8000'0033;  // clear WP
  const auto o = g.exec({0x0f, 0x22, 0xc0});
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::cr_write);
  EXPECT_EQ(o.reg, 0);
  EXPECT_EQ(g.ctx.cr0.raw(), 0x8000'0033u);
  // Clearing PG in 64-bit mode is #GP(0).
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x33;
  EXPECT_EQ(g.exec({0x0f, 0x22, 0xc0}).vector, x86::vector::gp);
}

TEST(System32, MovToCr0EnablesLongModeWithLme) {
  guest g;
  g.protected32();
  g.ctx.cr4 = x86::cr4::pae;
  g.ctx.efer = x86::efer::lme;
  g.ctx.gpr[0] = 0x8000'0011;
  ASSERT_TRUE(g.exec({0x0f, 0x22, 0xc0}).is_done());
  EXPECT_TRUE(g.ctx.efer.test(x86::efer::lma));
  // Without PAE it is #GP(0).
  guest h;
  h.protected32();
  h.ctx.efer = x86::efer::lme;
  h.ctx.gpr[0] = 0x8000'0011;
  EXPECT_EQ(h.exec({0x0f, 0x22, 0xc0}).vector, x86::vector::gp);
  // PG without PE is #GP(0).
  guest k;
  k.protected32();
  k.ctx.gpr[0] = 0x8000'0000;
  EXPECT_EQ(k.exec({0x0f, 0x22, 0xc0}).vector, x86::vector::gp);
}

TEST_F(System, MovDebugRegisters) {
  g.ctx.gpr[0] = 0x1234;
  ASSERT_TRUE(g.exec({0x0f, 0x23, 0xc0}).is_done());  // mov dr0, rax
  EXPECT_EQ(g.ctx.dr[0], 0x1234u);
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0x21, 0xf1}).is_done());  // mov rcx, dr6
  EXPECT_EQ(g.ctx.gpr[1], 0xffff'0ff0u);
  // DR4 aliases DR6 with CR4.DE = 0; #UD with CR4.DE = 1.
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0x21, 0xe2}).is_done());  // mov rdx, dr4
  EXPECT_EQ(g.ctx.gpr[2], 0xffff'0ff0u);
  g.ctx.cr4.set(x86::cr4::de);
  EXPECT_EQ(g.exec({0x0f, 0x21, 0xe2}).vector, x86::vector::ud);
  // DR7.GD: #DB.
  g.ctx.cr4.reset(x86::cr4::de);
  g.ctx.dr[7] = 0x2400;
  EXPECT_EQ(g.exec({0x0f, 0x21, 0xc0}).vector, x86::vector::db);
}

TEST_F(System, CpuidAndMsrsThroughThePlatform) {
  g.ctx.gpr[0] = 7;
  g.ctx.gpr[1] = 1;
  ASSERT_TRUE(g.exec({0x0f, 0xa2}).is_done());
  EXPECT_EQ(g.ctx.gpr[0], 8u);
  EXPECT_EQ(g.ctx.gpr[3], 3u);
  EXPECT_EQ(g.ctx.gpr[1], 0x6c65746eu);
  g.ctx.rip = guest::code;
  g.plat.msr_value = 0x1122'3344'5566'7788;
  g.ctx.gpr[1] = 0x10;
  ASSERT_TRUE(g.exec({0x0f, 0x32}).is_done());  // rdmsr
  EXPECT_EQ(g.ctx.gpr[0], 0x5566'7788u);
  EXPECT_EQ(g.ctx.gpr[2], 0x1122'3344u);
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0x30}).is_done());  // wrmsr
  EXPECT_EQ(g.plat.last_msr_write, 0x1122'3344'5566'7788u);
  g.ctx.gpr[1] = 0x11;  // refused by the platform: #GP(0)
  g.ctx.rip = guest::code;
  EXPECT_EQ(g.exec({0x0f, 0x32}).vector, x86::vector::gp);
}

TEST_F(System, HltInvdWbinvdInvlpg) {
  auto o = g.exec({0xf4});
  EXPECT_EQ(o.what, event::halt);
  g.ctx.rip = guest::code;
  o = g.exec({0x0f, 0x09});
  EXPECT_EQ(o.what, event::cache_flush);
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x1234'5000;
  o = g.exec({0x0f, 0x01, 0x78, 0x10});  // invlpg [rax+0x10]
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(o.what, event::invlpg);
  EXPECT_EQ(o.address, 0x1234'5010u);
  EXPECT_EQ(g.ctx.rip, guest::code + 4);
}

TEST_F(System, PrivilegedInstructionsAtCpl3AreGp) {
  g.ctx.cpl = 3;
  g.ctx[sreg::cs].ar = segment_ar{0xa0fb};
  g.map(guest::code, guest::code_phys, pte_p | pte_rw | pte_us);
  for (auto bytes : {std::initializer_list<std::uint8_t>{0xf4}, {0x0f, 0x06}, {0x0f, 0x08}, {0x0f, 0x09},
                     {0x0f, 0x30}, {0x0f, 0x32}, {0x0f, 0x20, 0xc0}, {0x0f, 0x22, 0xc0}, {0x0f, 0x21, 0xc0},
                     {0x0f, 0x01, 0xf0}, {0x0f, 0x00, 0xd0}, {0x0f, 0x01, 0x38}}) {
    const auto o = g.exec(bytes);
    EXPECT_EQ(o.kind, outcome_kind::exception);
    EXPECT_EQ(o.vector, x86::vector::gp);
    EXPECT_EQ(g.ctx.rip, guest::code);
  }
}

TEST_F(System, VerrVerw) {
  writable_gdt();
  g.ctx.gpr[0] = 0x10;  // writable data
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xe8}).is_done());  // verw ax
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x08;  // code: readable, not writable
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xe8}).is_done());
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
  g.ctx.rip = guest::code;
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xe0}).is_done());  // verr ax
  EXPECT_TRUE(g.ctx.rflags.test(x86::rflags::zf));
  g.ctx.rip = guest::code;
  g.ctx.gpr[0] = 0x78;  // beyond the limit: ZF = 0, no fault
  ASSERT_TRUE(g.exec({0x0f, 0x00, 0xe0}).is_done());
  EXPECT_FALSE(g.ctx.rflags.test(x86::rflags::zf));
}

TEST(System32, MovToDsLoadsDescriptorAndSetsAccessed) {
  guest g;
  g.protected32();
  g.ctx.gdtr = descriptor_table{0x8000, 0x2f};
  g.wr64(0x8000 + 0x20, 0x00cf'9200'0000'ffff);  // data, not accessed
  g.ctx.gpr[0] = 0x20;
  ASSERT_TRUE(g.exec({0x8e, 0xd8}).is_done());  // mov ds, ax
  EXPECT_EQ(g.ctx[sreg::ds].selector, 0x20u);
  EXPECT_EQ(g.ctx[sreg::ds].limit, 0xffff'ffffu);
  EXPECT_EQ(g.ctx[sreg::ds].ar.raw(), 0xc093u);
  EXPECT_EQ(g.mem[0x8000 + 0x25], 0x93);  // accessed bit written back
  // Not present: #NP(selector).
  g.wr64(0x8000 + 0x28, 0x00cf'1300'0000'ffff);
  g.ctx.rip = guest::code_phys;
  g.ctx.gpr[0] = 0x28;
  const auto o = g.exec({0x8e, 0xd8});
  EXPECT_EQ(o.vector, x86::vector::np);
  EXPECT_EQ(o.error_code, 0x28u);
}

}  // namespace

namespace {
// RAM whose next compare-exchange loses a race: another vCPU sets the same bits first.
struct racing_ram {
  hvkit::emulate::flat_ram* inner;
  int races = 1;
  bool read(hvkit::x86::gpa a, std::uint8_t* out, std::size_t n) { return inner->read(a, out, n); }
  bool write(hvkit::x86::gpa a, const std::uint8_t* in, std::size_t n) { return inner->write(a, in, n); }
  hvkit::result<bool, hvkit::paging::memory_error> cmpxchg(hvkit::x86::gpa a, unsigned bytes, std::uint64_t e,
                                                           std::uint64_t d) {
    if (races-- > 0) {
      static_cast<void>(inner->cmpxchg(a, bytes, e, d));  // the other vCPU wins
      return false;
    }
    return inner->cmpxchg(a, bytes, e, d);
  }
};
static_assert(hvkit::emulate::guest_ram<racing_ram>);

TEST_F(System, LtrLosingTheBusyBitRaceSeesABusyTss) {
  // Another vCPU marks the TSS busy between our descriptor read and our compare-exchange:
  // the re-check finds a busy TSS, #GP(selector), as if the other LTR had come first.
  writable_gdt();
  auto mmu = g.make_mmu(g.ctx.cr0);
  racing_ram rr{&g.ram};
  hvkit::emulate::walker_translator tr{mmu, g.ram};
  g.ctx.gpr[0] = tss_sel;
  g.code_bytes({0x0f, 0x00, 0xd8});
  const auto o = hvkit::emulate::emulate(g.ctx, tr, rr, g.plat);
  ASSERT_EQ(o.kind, outcome_kind::exception);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, tss_sel);
  EXPECT_EQ(rr.races, 0);  // exactly one compare-exchange (lost); the re-read stopped it
}
}  // namespace

namespace {
TEST_F(System, LtrInCompatibilityModeUses16ByteDescriptors) {
  // IA-32e compatibility mode (LMA=1, CS.L=0): system descriptors are still 16 bytes.
  writable_gdt();
  g.ctx[sreg::cs].ar = segment_ar{0xc09b};  // 32-bit code, L=0
  auto mmu = g.make_mmu(g.ctx.cr0);
  auto o = ltr_with(mmu);
  ASSERT_TRUE(o.is_done());
  EXPECT_EQ(g.ctx.tr.base, 0x1'2345'6000u);  // bits 63:32 from the upper half
  // A non-zero type in the upper half is #GP(selector) here too.
  g.ctx.rip = guest::code;
  g.wr64(gdt_phys + 0x28, tss_lo);
  g.wr64(gdt_phys + 0x30, 0x0000'0100'0000'0001);
  o = ltr_with(mmu);
  EXPECT_EQ(o.vector, x86::vector::gp);
  EXPECT_EQ(o.error_code, tss_sel);
}
}  // namespace
