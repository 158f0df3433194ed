// SPDX-License-Identifier: MIT
// The emulation context's CPUID-derived fields come from cpuid::guest_cpu_model
// (emulate::apply_cpu_model, read_emulation_context), and the one MAXPHYADDR default (36,
// SDM 4.1.4) holds for every context type. The CR4 rule is the SDM's: "#GP(0) If an attempt
// is made to write a 1 to any reserved bit in CR4" (Vol. 2B MOV CR), a bit being reserved
// for a guest whose CPUID does not enumerate its feature (CPUID.(EAX=07H,ECX=0):EBX[7] SMEP
// for CR4.SMEP, bit 20).
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/cpuid/guest_cpu_model.hpp>
#include <hvkit/emulate/cpu_model.hpp>
#include <hvkit/vmx/guest_context.hpp>

#include "guest.hpp"

namespace {

using namespace hvkit;

TEST(emulate_cpu_model, one_default) {
  EXPECT_EQ(emulate::context{}.maxphyaddr, 36u);
  EXPECT_EQ(x86::cr_context{}.maxphyaddr, 36u);
  EXPECT_EQ(vmx::guest_cpu_config{}.maxphyaddr, 36u);  // the alias kept for one release
  EXPECT_EQ(cpuid::guest_cpu_model{}.maxphyaddr, 36u);
}

TEST(emulate_cpu_model, apply_sets_the_cpuid_fields_only) {
  cpuid::feature_set f;
  f.put(cpuid::word::leaf7_1_eax, 1u << 26);  // LAM
  const auto m = cpuid::make_guest_cpu_model(f, cpuid::vendor::intel, 39);
  emulate::context c{};
  c.rip = 0x1234;
  emulate::apply_cpu_model(c, m);
  EXPECT_EQ(c.maxphyaddr, 39u);
  EXPECT_TRUE(c.lam);
  EXPECT_EQ(c.cr4_allowed.raw(), (1u << 8) | (1u << 28));  // PCE, LAM_SUP
  EXPECT_FALSE(c.cx8);   // CPUID.01H:EDX.CX8[bit 8] = 0 in this model
  EXPECT_FALSE(c.cx16);  // CPUID.01H:ECX.CX16[bit 13] = 0
  EXPECT_EQ(c.rip, 0x1234u);
}

TEST(emulate_cpu_model, mov_to_cr4_reserved_bit_from_the_model) {
  constexpr std::uint64_t pae = 1u << 5, smep = 1u << 20;
  cpuid::feature_set f;
  f.put(cpuid::word::leaf1_edx, 1u << 6);  // PAE
  for (bool has_smep : {false, true}) {
    auto g = test::guest{};
    g.long_mode();
    if (has_smep) f.put(cpuid::word::leaf7_0_ebx, 1u << 7);
    emulate::apply_cpu_model(g.ctx, cpuid::make_guest_cpu_model(f, cpuid::vendor::intel, 36));
    g.ctx.gpr[0] = pae | smep;
    const auto o = g.exec({0x0f, 0x22, 0xe0});  // mov cr4, rax
    if (has_smep) {
      ASSERT_TRUE(o.is_done());
      EXPECT_EQ(g.ctx.cr4.raw(), pae | smep);
    } else {
      EXPECT_EQ(o.kind, emulate::outcome_kind::exception);
      EXPECT_EQ(o.vector, x86::vector::gp);
      EXPECT_EQ(g.ctx.cr4.raw(), pae);
    }
  }
}

}  // namespace
