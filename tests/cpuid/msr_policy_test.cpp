// SPDX-License-Identifier: MIT
// The MSR policy derived from CPUID, and the consistency check (docs/background.md §2):
// IBPB enumerated => IA32_PRED_CMD writable, for Intel and AMD enumerations alike.
#include <gtest/gtest.h>

#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>

#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;
using cpuid::feature_set;
using cpuid::msr_verdict;
using hvkit::test::rt;
using namespace helpers;

namespace {
constexpr std::uint32_t pred_cmd = 0x49, spec_ctrl = 0x48, arch_caps = 0x10a, flush_cmd = 0x10b;
}

TEST(cpuid_msr_policy, intel_ibpb_via_spec_ctrl) {
  constexpr auto p = build(intel_host, everything(), config(1, 1));
  constexpr auto m = cpuid::derive_msr_policy(p.features(), p.xss_components());
  HVKIT_BOTH(m.write(pred_cmd, 1) == msr_verdict::allow && m.write(pred_cmd, 0) == msr_verdict::allow);
  HVKIT_BOTH(m.write(pred_cmd, 0x80) == msr_verdict::gp);  // SBPB is AMD's, not enumerated
  HVKIT_BOTH(m.write(pred_cmd, 2) == msr_verdict::gp && m.read(pred_cmd) == msr_verdict::gp);
  // SPEC_CTRL: IBRS, STIBP, SSBD (7.0:EDX 26, 27, 31), IPRED_DIS_U/S, RRSBA_DIS_U/S, PSFD,
  // BHI_DIS_S (7.2:EDX 1, 2, 0, 4) = bits 0-7 and 10.
  HVKIT_BOTH(m.spec_ctrl && m.spec_ctrl_bits == 0x4ff);
  HVKIT_BOTH(m.write(spec_ctrl, 0x4ff) == msr_verdict::allow && m.write(spec_ctrl, 0x100) == msr_verdict::gp);
  HVKIT_BOTH(m.read(spec_ctrl) == msr_verdict::allow);
  HVKIT_BOTH(m.read(arch_caps) == msr_verdict::allow && m.write(arch_caps, 0) == msr_verdict::gp);
  HVKIT_BOTH(m.write(flush_cmd, 1) == msr_verdict::allow && m.write(flush_cmd, 2) == msr_verdict::gp);
  HVKIT_BOTH(m.read(flush_cmd) == msr_verdict::gp);
  HVKIT_BOTH(m.read(0xc0000080) == msr_verdict::not_covered);
  HVKIT_BOTH(cpuid::check_consistency(p.features(), m).has_value());
  EXPECT_EQ(m.write(rt(pred_cmd), rt(std::uint64_t{1})), msr_verdict::allow);
}

TEST(cpuid_msr_policy, amd_ibpb_and_sbpb) {
  // The recorded AMD vCPU does not enumerate IBPB (0x80000008:EBX[12] = 0): PRED_CMD #GPs.
  constexpr auto p = build(amd_host, everything(), config(1, 1));
  constexpr auto m = cpuid::derive_msr_policy(p.features(), p.xss_components());
  HVKIT_BOTH(!p.has(feat::amd_ibpb) && m.write(pred_cmd, 1) == msr_verdict::gp);
  // It does enumerate PSFD (EBX[28]): SPEC_CTRL exists with bit 7 only.
  HVKIT_BOTH(m.spec_ctrl && m.spec_ctrl_bits == 0x80 && m.write(spec_ctrl, 0x80) == msr_verdict::allow);
  HVKIT_BOTH(m.write(spec_ctrl, 1) == msr_verdict::gp);
  // CET and XSAVES: IA32_XSS takes exactly the exposed CET bits.
  HVKIT_BOTH(m.xss && m.write(0xda0, 0x1800) == msr_verdict::allow && m.write(0xda0, 0x100) == msr_verdict::gp);
  HVKIT_BOTH(cpuid::check_consistency(p.features(), m).has_value());
  // With IBPB (EBX[12]) and SBPB (0x80000021:EAX[27]).
  constexpr feature_set f{feat::amd_ibpb, feat::sbpb};
  constexpr auto n = cpuid::derive_msr_policy(f);
  HVKIT_BOTH(n.pred_cmd_bits == 0x81 && n.write(pred_cmd, 0x81) == msr_verdict::allow);
  HVKIT_BOTH(n.write(pred_cmd, 0x80) == msr_verdict::allow && n.write(pred_cmd, 0x100) == msr_verdict::gp);
  constexpr auto sbpb_only = cpuid::derive_msr_policy(feature_set{feat::sbpb});
  HVKIT_BOTH(sbpb_only.write(pred_cmd, 0x80) == msr_verdict::allow && sbpb_only.write(pred_cmd, 1) == msr_verdict::gp);
  // AMD VIRT_SPEC_CTRL from VIRT_SSBD (EBX[25]).
  constexpr auto v = cpuid::derive_msr_policy(feature_set{feat::virt_ssbd});
  HVKIT_BOTH(v.write(0xc001011f, 4) == msr_verdict::allow && v.write(0xc001011f, 1) == msr_verdict::gp);
}

TEST(cpuid_msr_policy, advertised_but_refused_is_inconsistent) {
  // Intel: IBPB enumerated through 7.0:EDX[26], the hypervisor refuses PRED_CMD.
  constexpr feature_set intel{feat::spec_ctrl};
  constexpr auto bad_intel = [] {
    auto m = cpuid::derive_msr_policy(feature_set{feat::spec_ctrl});
    m.pred_cmd_bits = 0;
    return cpuid::check_consistency(feature_set{feat::spec_ctrl}, m);
  }();
  HVKIT_BOTH(!bad_intel.has_value() && bad_intel.error().f == feat::spec_ctrl &&
             bad_intel.error().index == 0x49 && bad_intel.error().write && bad_intel.error().value == 1);
  // AMD: IBPB through 0x80000008:EBX[12], an empty MSR policy.
  constexpr auto bad_amd = cpuid::check_consistency(feature_set{feat::amd_ibpb}, cpuid::msr_policy{});
  HVKIT_BOTH(!bad_amd.has_value() && bad_amd.error().f == feat::amd_ibpb && bad_amd.error().index == 0x49);
  // Not advertised and refused: consistent (the guest never tries).
  HVKIT_BOTH(cpuid::check_consistency(feature_set{}, cpuid::msr_policy{}).has_value());
  HVKIT_BOTH(cpuid::check_consistency(intel, cpuid::derive_msr_policy(intel)).has_value());
}

TEST(cpuid_msr_policy, every_obligation) {
  // The obligations, typed by hand from the enumeration each MSR's SDM Vol. 4 Table 2-2 entry
  // (and AMD's speculation-control documents) gives: feature, MSR, write?, value written.
  struct row {
    cpuid::feature f;
    std::uint32_t index;
    bool write;
    std::uint64_t value;
  };
  const row sdm[] = {
      {feat::spec_ctrl, 0x49, true, 0x1},         {feat::amd_ibpb, 0x49, true, 0x1},
      {feat::sbpb, 0x49, true, 0x80},             {feat::spec_ctrl, 0x48, false, 0},
      {feat::spec_ctrl, 0x48, true, 0x1},         {feat::amd_ibrs, 0x48, true, 0x1},
      {feat::intel_stibp, 0x48, true, 0x2},       {feat::amd_stibp, 0x48, true, 0x2},
      {feat::spec_ctrl_ssbd, 0x48, true, 0x4},    {feat::amd_ssbd, 0x48, true, 0x4},
      {feat::ipred_ctrl, 0x48, true, 0x18},       {feat::rrsba_ctrl, 0x48, true, 0x60},
      {feat::psfd, 0x48, true, 0x80},             {feat::amd_psfd, 0x48, true, 0x80},
      {feat::ddpd_u, 0x48, true, 0x100},          {feat::bhi_ctrl, 0x48, true, 0x400},
      {feat::virt_ssbd, 0xc001011f, true, 0x4},   {feat::flush_l1d, 0x10b, true, 0x1},
      {feat::arch_capabilities, 0x10a, false, 0}, {feat::tsc_deadline, 0x6e0, false, 0},
      {feat::tsc_deadline, 0x6e0, true, 0},       {feat::tsc_adjust, 0x3b, false, 0},
      {feat::xsaves, 0xda0, false, 0},            {feat::xsaves, 0xda0, true, 0},
      {feat::rdtscp, 0xc0000103, false, 0},       {feat::rdpid, 0xc0000103, false, 0},
      {feat::pks, 0x6e1, false, 0},               {feat::shstk, 0x6a0, false, 0},
      {feat::shstk, 0x6a4, false, 0},             {feat::shstk, 0x6a8, false, 0},
      {feat::ibt, 0x6a0, false, 0},
  };
  ASSERT_EQ(std::size(cpuid::msr_obligations), std::size(sdm));
  for (const row& r : sdm) {
    std::size_t found = 0;
    for (const auto& o : cpuid::msr_obligations)
      found += o.f == r.f && o.index == r.index && o.write == r.write && o.value == r.value;
    EXPECT_EQ(found, 1u) << "msr " << std::hex << r.index << " value " << r.value;
    // The policy derived from the lone feature allows that exact access.
    const auto m = cpuid::derive_msr_policy(feature_set{r.f}, x86::xfeatures{0x1800});
    EXPECT_EQ(r.write ? m.write(r.index, r.value) : m.read(r.index), msr_verdict::allow) << std::hex << r.index;
  }
  // For each obligation: the derived policy of the lone feature satisfies the check, and an
  // empty MSR policy fails it on exactly that feature.
  for (const auto& o : cpuid::msr_obligations) {
    const feature_set only{o.f};
    const auto m = cpuid::derive_msr_policy(only, x86::xfeatures{0x1800});
    EXPECT_TRUE(cpuid::check_consistency(only, m).has_value()) << "msr " << std::hex << o.index;
    const auto bad = cpuid::check_consistency(only, cpuid::msr_policy{});
    ASSERT_FALSE(bad.has_value()) << "msr " << std::hex << o.index;
    EXPECT_TRUE(bad.error().f == o.f);
  }
}

TEST(cpuid_msr_policy, reserved_halves) {
  constexpr auto m = cpuid::derive_msr_policy(feature_set{feat::rdpid, feat::pks});
  HVKIT_BOTH(m.write(0xc0000103, 0xffffffff) == msr_verdict::allow);
  HVKIT_BOTH(m.write(0xc0000103, 0x100000000) == msr_verdict::gp);  // TSC_AUX[63:32] reserved
  HVKIT_BOTH(m.write(0x6e1, 0x100000000) == msr_verdict::gp && m.read(0x6e1) == msr_verdict::allow);
}

// CET MSRs (SDM Vol. 4 Table 2-2): IA32_U_CET (0x6A0) and IA32_S_CET (0x6A2) exist with
// CET_SS (CPUID.7.0:ECX[7]) or CET_IBT (CPUID.7.0:EDX[20]); IA32_PL0_SSP..IA32_PL3_SSP
// (0x6A4-0x6A7) and IA32_INTERRUPT_SSP_TABLE_ADDR (0x6A8) with CET_SS only. An IBT-only
// guest must get #GP on the SSP MSRs, as on an IBT-only CPU (KVM's CET MSR checks agree).
TEST(cpuid_msr_policy, cet_ssp_msrs_need_shadow_stack) {
  constexpr auto ibt_only = cpuid::derive_msr_policy(feature_set{feat::ibt});
  HVKIT_BOTH(ibt_only.read(0x6a0) == msr_verdict::allow && ibt_only.read(0x6a2) == msr_verdict::allow);
  HVKIT_BOTH(ibt_only.write(0x6a2, 0) == msr_verdict::allow);
  for (std::uint32_t index : {0x6a4u, 0x6a5u, 0x6a6u, 0x6a7u, 0x6a8u}) {
    EXPECT_EQ(ibt_only.read(rt(index)), msr_verdict::gp) << std::hex << index;
    EXPECT_EQ(ibt_only.write(rt(index), 0), msr_verdict::gp) << std::hex << index;
  }
  constexpr auto shstk = cpuid::derive_msr_policy(feature_set{feat::shstk});
  for (std::uint32_t index : {0x6a0u, 0x6a2u, 0x6a4u, 0x6a5u, 0x6a6u, 0x6a7u, 0x6a8u}) {
    EXPECT_EQ(shstk.read(rt(index)), msr_verdict::allow) << std::hex << index;
    EXPECT_EQ(shstk.write(rt(index), 0), msr_verdict::allow) << std::hex << index;
  }
  constexpr auto none = cpuid::derive_msr_policy(feature_set{});
  HVKIT_BOTH(none.read(0x6a0) == msr_verdict::gp && none.read(0x6a4) == msr_verdict::gp);
  // A shadow-stack guest whose hypervisor refuses IA32_PL0_SSP is inconsistent.
  constexpr auto refused = [] {
    auto m = cpuid::derive_msr_policy(feature_set{feat::shstk});
    m.cet_ssp = false;
    return cpuid::check_consistency(feature_set{feat::shstk}, m);
  }();
  HVKIT_BOTH(!refused.has_value() && refused.error().index == 0x6a4);
}
