// SPDX-License-Identifier: MIT
// CR4.UMIP and the store-descriptor-table instructions, golden from the SDM: Vol. 3A 2.5
// "UMIP ... When set, the following instructions cannot be executed if CPL > 0: SGDT, SIDT,
// SLDT, SMSW, and STR. An attempt at such execution causes a general-protection exception
// (#GP)." (Vol. 2B SGDT: "#GP(0) If CR4.UMIP = 1 and CPL > 0."); and Vol. 2B SGDT/SIDT
// outside 64-bit mode: "the 16-bit limit field of the register is stored in the low 2 bytes
// of the memory location and the 32-bit base address is stored in the high 4 bytes".
#include <gtest/gtest.h>

#include <cstdint>

#include "guest.hpp"

namespace {
using namespace hvkit;
using namespace hvkit::emulate;
using hvkit::test::guest;

TEST(Umip, StoreInstructionsAtEachCplWithAndWithoutUmip) {
  struct insn {
    const char* name;
    std::uint8_t b[3];
  };
  // [eax] memory forms (mod 00, rm 000): SGDT 0F 01 /0, SIDT /1, SMSW /4; SLDT 0F 00 /0, STR /1.
  const insn insns[] = {{"sgdt", {0x0f, 0x01, 0x00}}, {"sidt", {0x0f, 0x01, 0x08}}, {"smsw", {0x0f, 0x01, 0x20}},
                        {"sldt", {0x0f, 0x00, 0x00}}, {"str", {0x0f, 0x00, 0x08}}};
  for (bool umip : {false, true})
    for (unsigned cpl = 0; cpl < 4; ++cpl)
      for (const auto& i : insns) {
        guest g;
        g.protected32();
        g.ctx.cpl = static_cast<std::uint8_t>(cpl);
        if (umip) g.ctx.cr4 = g.ctx.cr4 | x86::cr4::umip;
        g.ctx.gpr[0] = 0x7000;
        const auto o = g.exec({i.b[0], i.b[1], i.b[2]});
        if (umip && cpl > 0) {
          EXPECT_EQ(o.kind, outcome_kind::exception) << i.name << " cpl " << cpl;
          EXPECT_EQ(o.vector, x86::vector::gp) << i.name << " cpl " << cpl;
          EXPECT_EQ(o.error_code, 0u) << i.name << " cpl " << cpl;
        } else {
          EXPECT_TRUE(o.is_done()) << i.name << " cpl " << cpl << " umip " << umip;
        }
      }
}

TEST(Umip, SgdtIn32BitModeStoresSixBytes) {
  guest g;
  g.protected32();
  g.ctx.gdtr = descriptor_table{0x1234'5678, 0xabcd};
  for (unsigned i = 0; i < 10; ++i) g.mem[0x7000 + i] = 0xee;
  g.ctx.gpr[0] = 0x7000;
  ASSERT_TRUE(g.exec({0x0f, 0x01, 0x00}).is_done());  // sgdt [eax]
  const std::uint8_t want[] = {0xcd, 0xab, 0x78, 0x56, 0x34, 0x12, 0xee, 0xee};
  for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(g.mem[0x7000 + i], want[i]) << i;
}

}  // namespace
