// SPDX-License-Identifier: MIT
// The state after RESET, INIT and SIPI (SDM Vol. 3A 10.1.1 Table 10-1; 10.1; 10.4), golden
// values typed from the table.
#include <gtest/gtest.h>

#include <hvkit/x86/init_sipi.hpp>

namespace x86 = hvkit::x86;

namespace {

TEST(InitSipi, ResetTable) {
  const x86::reset_state s = x86::state_after_reset(0x000906ea);
  EXPECT_EQ(s.rip, 0xfff0u);                     // EIP 0000FFF0H
  EXPECT_EQ(s.rflags, 0x2u);                     // EFLAGS 00000002H
  EXPECT_EQ(s.rdx, 0x000906eau);                 // EDX 000n06xxH: the signature
  EXPECT_EQ(s.cr0_value.raw(), 0x6000'0010u);    // CR0 60000010H
  EXPECT_EQ(s.cr2, 0u);
  EXPECT_EQ(s.cr3, 0u);
  EXPECT_EQ(s.cr4_value.raw(), 0u);
  // CS: selector F000H, base FFFF0000H, limit FFFFH, AR present, R/W, accessed.
  EXPECT_EQ(s.cs, (x86::segment_value{0xf000, 0xffff'0000u, 0xffff, 0x93}));
  for (const auto* seg : {&s.ds, &s.es, &s.fs, &s.gs, &s.ss}) EXPECT_EQ(*seg, (x86::segment_value{0, 0, 0xffff, 0x93}));
  EXPECT_EQ(s.gdtr, (x86::table_register{0, 0xffff}));
  EXPECT_EQ(s.idtr, (x86::table_register{0, 0xffff}));
  EXPECT_EQ(s.ldtr, (x86::segment_value{0, 0, 0xffff, 0x82}));
  EXPECT_EQ(s.tr, (x86::segment_value{0, 0, 0xffff, 0x83}));
  EXPECT_EQ(s.dr6, 0xffff'0ff0u);                // DR6 FFFF0FF0H
  EXPECT_EQ(s.dr7, 0x400u);                      // DR7 00000400H
  // The first instruction: CS.base + EIP = FFFFFFF0H (10.1.4).
  EXPECT_EQ(s.cs.base + s.rip, 0xffff'fff0u);
}

TEST(InitSipi, InitColumn) {
  // CR0: "The CD and NW flags are unchanged, bit 4 is set to 1, all other bits are cleared."
  const x86::cr0 before{0xe005'003bu};  // PG, CD, NW, WP, NE, ET, TS, MP, PE
  const x86::reset_state s = x86::state_after_init(0x000906ea, before, x86::efer{0xd01});
  EXPECT_EQ(s.cr0_value.raw(), 0x6000'0010u);
  EXPECT_EQ(x86::state_after_init(0, x86::cr0{0x8000'0031u}, {}).cr0_value.raw(), 0x10u);
  EXPECT_EQ(x86::state_after_init(0, x86::cr0{0x4000'0000u}, {}).cr0_value.raw(), 0x4000'0010u);
  // EFER: MSRs unchanged, LMA follows CR0.PG = 0.
  EXPECT_EQ(s.efer_value.raw(), 0x901u);
  // Everything else as at RESET.
  x86::reset_state r = x86::state_after_reset(0x000906ea);
  r.cr0_value = s.cr0_value;
  r.efer_value = s.efer_value;
  EXPECT_EQ(s, r);
  static_assert(x86::init_preserves::x87_state && x86::init_preserves::sse_state && x86::init_preserves::msrs);
  static_assert(!x86::init_preserves::tlbs);
}

TEST(InitSipi, Sipi) {
  // Vector VV: execution starts at 000VV000H with CS = VV00H, IP = 0.
  x86::reset_state s = x86::state_after_init(0, x86::cr0{}, {});
  x86::apply_sipi(s, 0x9a);
  EXPECT_EQ(s.cs.selector, 0x9a00u);
  EXPECT_EQ(s.cs.base, 0x9a000u);
  EXPECT_EQ(s.rip, 0u);
  EXPECT_EQ(s.cs.base + s.rip, 0x0009'a000u);
  EXPECT_EQ(s.cs.limit, 0xffffu);
  EXPECT_EQ(s.cs.base, std::uint64_t{s.cs.selector} * 16);  // real-mode consistent
  x86::apply_sipi(s, 0xff);
  EXPECT_EQ(s.cs.base, 0xff000u);
}

TEST(InitSipi, MpProtocol) {
  EXPECT_EQ(x86::on_init(true), x86::mp_state::running);
  EXPECT_EQ(x86::on_init(false), x86::mp_state::wait_for_sipi);
  EXPECT_TRUE(x86::sipi_starts(x86::mp_state::wait_for_sipi));
  EXPECT_FALSE(x86::sipi_starts(x86::mp_state::running));  // discarded
}

}  // namespace
