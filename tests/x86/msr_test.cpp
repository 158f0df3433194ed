// SPDX-License-Identifier: MIT
// MSR indices typed by hand from SDM Vol. 4, Table 2-2.
#include <gtest/gtest.h>

#include <hvkit/x86/msr.hpp>
#include <hvkit/x86/pat.hpp>

#include "runtime.hpp"

namespace msr = hvkit::x86::msr;
using hvkit::test::rt;

TEST(msr, indices) {
  HVKIT_BOTH(msr::ia32_feature_control == 0x3a && msr::ia32_apic_base == 0x1b);
  HVKIT_BOTH(msr::ia32_spec_ctrl == 0x48 && msr::ia32_pred_cmd == 0x49);
  HVKIT_BOTH(msr::ia32_arch_capabilities == 0x10a && msr::ia32_flush_cmd == 0x10b);
  HVKIT_BOTH(msr::ia32_sysenter_cs == 0x174 && msr::ia32_sysenter_esp == 0x175 && msr::ia32_sysenter_eip == 0x176);
  HVKIT_BOTH(msr::ia32_debugctl == 0x1d9 && msr::ia32_pat == 0x277);
  HVKIT_BOTH(msr::ia32_vmx_basic == 0x480 && msr::ia32_vmx_procbased_ctls2 == 0x48b);
  HVKIT_BOTH(msr::ia32_vmx_ept_vpid_cap == 0x48c && msr::ia32_vmx_true_entry_ctls == 0x490);
  HVKIT_BOTH(msr::ia32_vmx_vmfunc == 0x491 && msr::ia32_vmx_procbased_ctls3 == 0x492);
  HVKIT_BOTH(msr::ia32_u_cet == 0x6a0 && msr::ia32_s_cet == 0x6a2 && msr::ia32_pkrs == 0x6e1);
  HVKIT_BOTH(msr::ia32_xss == 0xda0);
  HVKIT_BOTH(msr::ia32_efer == 0xc000'0080 && msr::ia32_star == 0xc000'0081 && msr::ia32_lstar == 0xc000'0082);
  HVKIT_BOTH(msr::ia32_cstar == 0xc000'0083 && msr::ia32_fmask == 0xc000'0084);
  HVKIT_BOTH(msr::ia32_fs_base == 0xc000'0100 && msr::ia32_gs_base == 0xc000'0101);
  HVKIT_BOTH(msr::ia32_kernel_gs_base == 0xc000'0102 && msr::ia32_tsc_aux == 0xc000'0103);
  HVKIT_BOTH(msr::pred_cmd::ibpb == 1 && msr::flush_cmd::l1d_flush == 1);
}

TEST(msr, x2apic_range) {
  // SDM 11.12.1.2: MSRs 0x800 through 0xBFF are reserved for the x2APIC (unlisted ones
  // #GP); VMX's "virtualize x2APIC mode" covers 0x800 through 0x8FF (SDM 30.5).
  EXPECT_FALSE(msr::is_x2apic(rt(0x7ffu)));
  EXPECT_TRUE(msr::is_x2apic(rt(0x800u)));
  EXPECT_TRUE(msr::is_x2apic(rt(0x8ffu)));
  EXPECT_TRUE(msr::is_x2apic(rt(0x900u)));
  EXPECT_TRUE(msr::is_x2apic(rt(0xbffu)));
  EXPECT_FALSE(msr::is_x2apic(rt(0xc00u)));
  HVKIT_BOTH(msr::x2apic_virtualized_last == 0x8ff);
  HVKIT_BOTH(msr::x2apic_icr == 0x830 && msr::x2apic_eoi == 0x80b && msr::x2apic_self_ipi == 0x83f);
}

// IA32_PAT memory types (SDM Vol. 3A 13.12.2, Table 13-10; APM Vol. 2 7.8.1): 0, 1, 4, 5, 6,
// 7 are types; 2, 3 and 8-255 are reserved, in any of the eight fields.
TEST(Pat, ValidMemoryTypesPerField) {
  EXPECT_TRUE(hvkit::x86::valid_pat(0x0007040600070406ull));  // the power-on value
  EXPECT_TRUE(hvkit::x86::valid_pat(0x0706050401000100ull));
  for (unsigned field = 0; field < 8; ++field) {
    for (unsigned t : {2u, 3u, 8u, 0x80u, 0xffu})
      EXPECT_FALSE(hvkit::x86::valid_pat((0x0606060606060606ull & ~(0xffull << (8 * field))) |
                                         std::uint64_t{t} << (8 * field)))
          << "field " << field << " type " << t;
  }
}
