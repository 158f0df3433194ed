// SPDX-License-Identifier: MIT
// Golden policies for the CPUID tables Bochs 2.7 reports for its tigerlake,
// corei7_icelake_u and corei7_skylake_x models (bochs_fixtures.hpp says how they were
// recorded), and the per-component XSAVE enumeration check.
//
// Every expected value is worked out by hand from the fixture and the SDM:
//  - SDM Vol. 2A, CPUID leaf 0DH, sub-leaf n > 1: a sub-leaf reads as all zeros only if bit n
//    is clear in both 0xD.0 EDX:EAX (XCR0) and 0xD.1 EDX:ECX (IA32_XSS); otherwise EAX =
//    size, EBX = standard-format offset (0 for an IA32_XSS bit), ECX[0] = 1 for an IA32_XSS
//    bit, 0 for an XCR0 bit. Bochs' tigerlake and icelake enumerate PKRU (0xD.0 EAX = 0x2e7,
//    bit 9) but answer 0xD.9 with zeros: that component is withheld, the rest is kept.
//  - SDM Vol. 1 13.4.2 (standard format): size = end of the highest component;
//    13.4.3 (compacted format): components packed from byte 576 in bit order (none of
//    Bochs' components sets the 64-byte alignment bit ECX[1]).
//  - SDM Vol. 1 13.3 / 14.3 / 15.2: features need their state components (AVX-512 needs
//    opmask, ZMM_Hi256, Hi16_ZMM; CET needs CET_U/CET_S in IA32_XSS, which Bochs does not
//    enumerate).
#include <gtest/gtest.h>

#include <hvkit/cpuid/policy.hpp>
#include <hvkit/cpuid/xsave.hpp>

#include "bochs_fixtures.hpp"
#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;
using cpuid::regs;
using cpuid::xsave_enumeration;
using hvkit::test::rt;
using namespace helpers;

namespace {
constexpr auto tigerlake_host = host_of(fixtures::bochs_tigerlake);
constexpr auto icelake_host = host_of(fixtures::bochs_icelake_u);
constexpr auto skylake_x_host = host_of(fixtures::bochs_skylake_x);

constexpr cpuid::policy tigerlake = build(tigerlake_host, everything(), config(1, 1));
constexpr cpuid::policy icelake = build(icelake_host, everything(), config(1, 1));
constexpr cpuid::policy skylake_x = build(skylake_x_host, everything(), config(1, 1));

// x87 | SSE | AVX | opmask | ZMM_Hi256 | Hi16_ZMM: Bochs' XCR0 bitmap 0x2e7 without PKRU (bit 9).
constexpr x86::xfeatures avx512_xcr0{0xe7};

// The leaf-0xD sub-leaves a guest of these models sees: Bochs' own values for components
// 2, 5, 6, 7 (their enumeration is consistent), nothing for PKRU.
constexpr bool xsave_subleaves_as_recorded(const cpuid::policy& p) {
  const auto& t = p.leaves();
  return t.get(0xd, 2) == regs{0x100, 0x240, 0, 0} && t.get(0xd, 5) == regs{0x40, 0x440, 0, 0} &&
         t.get(0xd, 6) == regs{0x200, 0x480, 0, 0} && t.get(0xd, 7) == regs{0x400, 0x680, 0, 0} &&
         t.find(0xd, 3) == nullptr && t.find(0xd, 4) == nullptr && t.find(0xd, 8) == nullptr &&
         t.find(0xd, 9) == nullptr;
}
}  // namespace

TEST(cpuid_xsave_enumeration, sdm_rules_per_component) {
  using cpuid::check_enumeration;
  using cpuid::xsave_component;
  // Bochs tigerlake 0xD.9 (PKRU, an XCR0 bit): all zeros.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0, 0, 0, 0}), false) == xsave_enumeration::no_size);
  // Bochs 0xD.2 (AVX): 256 bytes at 576.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x100, 0x240, 0, 0}), false) == xsave_enumeration::consistent);
  // AMD EPYC 0xD.11 (CET_U, an IA32_XSS bit): 16 bytes, EBX 0, ECX[0] = 1.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x10, 0, 1, 0}), true) == xsave_enumeration::consistent);
  // The same sub-leaf for a component enumerated in the XCR0 bitmap, and the reverse.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x10, 0, 1, 0}), false) == xsave_enumeration::wrong_register);
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x100, 0x240, 0, 0}), true) == xsave_enumeration::wrong_register);
  // A user component inside the legacy region/header (< 576) and one just after it.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x100, 0x23f, 0, 0}), false) == xsave_enumeration::bad_offset);
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x100, 0x0, 0, 0}), false) == xsave_enumeration::bad_offset);
  // A supervisor component with a standard-format offset (EBX must be 0).
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x80, 0xa80, 1, 0}), true) == xsave_enumeration::bad_offset);
  // Ending exactly at 4 GiB does not fit a 32-bit size; 16 bytes lower does.
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x10, 0xfffffff0u, 0, 0}), false) == xsave_enumeration::too_large);
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x10, 0xffffffe0u, 0, 0}), false) == xsave_enumeration::consistent);
  // ECX[1] (64-byte alignment in the compacted format) is allowed either way (AMX on SPR).
  HVKIT_BOTH(check_enumeration(xsave_component::from({0x2000, 0xb00, 2, 0}), false) == xsave_enumeration::consistent);
  EXPECT_EQ(check_enumeration(xsave_component::from({rt(0u), 0, 0, 0}), rt(false)), xsave_enumeration::no_size);
}

TEST(cpuid_policy_bochs, recorded_tables_read_back) {
  // read_all over the recording gives Bochs' 0xD.0/0xD.1 and reads sub-leaf 9 because
  // 0xD.0 EAX bit 9 is set, which comes back as zeros.
  HVKIT_BOTH(tigerlake_host.get(0xd, 0) == (regs{0x2e7, 0x240, 0xac0, 0}));
  HVKIT_BOTH(tigerlake_host.get(0xd, 1) == (regs{0xf, 0, 0, 0}));
  HVKIT_BOTH(tigerlake_host.find(0xd, 9) != nullptr && tigerlake_host.get(0xd, 9) == (regs{0, 0, 0, 0}));
  HVKIT_BOTH(icelake_host.get(0xd, 0) == (regs{0x2e7, 0x240, 0xac0, 0}));
  HVKIT_BOTH(skylake_x_host.get(0xd, 0) == (regs{0xe7, 0x240, 0xa80, 0}));
  HVKIT_BOTH(skylake_x_host.find(0xd, 9) == nullptr);
}

TEST(cpuid_policy_bochs, tigerlake_withholds_only_pkru) {
  // The build succeeds (it used to fail with policy_error::xsave_layout).
  HVKIT_BOTH(cpuid::build_policy(tigerlake_host, everything(), config(1, 1)).has_value());
  // Only PKRU is withheld, because its sub-leaf reads as invalid.
  HVKIT_BOTH(tigerlake.xsave_withheld() == x86::xfeatures::pkru);
  HVKIT_BOTH(tigerlake.xsave_issue(9) == xsave_enumeration::no_size);
  constexpr bool others_consistent = [] {
    for (unsigned i = 0; i < cpuid::xsave_max_components; ++i)
      if (i != 9 && tigerlake.xsave_issue(i) != xsave_enumeration::consistent) return false;
    return tigerlake.xsave_issue(1000) == xsave_enumeration::consistent;
  }();
  HVKIT_BOTH(others_consistent);
  // Everything else is offered: AVX-512 with its three components.
  HVKIT_BOTH(tigerlake.xcr0_components() == avx512_xcr0);
  HVKIT_BOTH(tigerlake.xss_components() == x86::xfeatures{});
  const auto& t = tigerlake.leaves();
  // 0xD.0: EAX = 0xe7; EBX = 576 for XCR0 = x87 at reset; ECX = end of Hi16_ZMM
  // (0x680 + 0x400 = 0xa80), not Bochs' 0xac0, which counted PKRU.
  HVKIT_BOTH(t.get(0xd, 0) == (regs{0xe7, 0x240, 0xa80, 0}));
  // 0xD.1: XSAVEOPT, XSAVEC, XGETBV1, XSAVES passed through; no supervisor component;
  // EBX = 576 at reset (Bochs reports 0 there).
  HVKIT_BOTH(t.get(0xd, 1) == (regs{0xf, 0x240, 0, 0}));
  HVKIT_BOTH(xsave_subleaves_as_recorded(tigerlake));
  // 1:ECX: host 0x77faf3bf, VMX (bit 5) hidden without nesting, hypervisor bit (31) set;
  // XSAVE (26), AVX (28), x2APIC (21), TSC-deadline (24) stay; OSXSAVE (27) is dynamic.
  HVKIT_BOTH(t.get(0x1).ecx == 0xf7faf39f);
  // 7.0:EBX as recorded: AVX2 (5) and AVX-512 F/DQ/IFMA/CD/BW/VL (16, 17, 21, 28, 30, 31).
  HVKIT_BOTH(t.get(0x7, 0).ebx == 0xf1bf27eb);
  // 7.0:ECX: host 0x00405fce minus CET_SS (7): shadow stacks need CET_U/CET_S, which are
  // not enumerated in IA32_XSS. PKU (3) stays: protection keys do not need XSAVE state.
  HVKIT_BOTH(t.get(0x7, 0).ecx == 0x00405f4e);
  // 7.0:EDX: host 0xfc100510 minus CET_IBT (20), for the same reason.
  HVKIT_BOTH(t.get(0x7, 0).edx == 0xfc000510);
  HVKIT_BOTH(tigerlake.has(feat::avx512f) && tigerlake.has(feat::avx2) && tigerlake.has(feat::pku));
  HVKIT_BOTH(!tigerlake.has(feat::shstk) && !tigerlake.has(feat::ibt));
  // Highest basic leaf left: 0xD (leaves 0xE-0x1B are not offered).
  HVKIT_BOTH(t.get(0x0).eax == 0xd);
}

TEST(cpuid_policy_bochs, tigerlake_sizes_follow_xcr0) {
  constexpr cpuid::vcpu_state avx512{{}, x86::xfeatures{0xe7}, {}, 0};
  // Standard format: end of Hi16_ZMM = 0xa80. Compacted: 576 + 256 + 64 + 512 + 1024 = 0x980.
  HVKIT_BOTH(tigerlake.answer(0xd, 0, avx512).ebx == 0xa80 && tigerlake.answer(0xd, 1, avx512).ebx == 0x980);
  EXPECT_EQ(tigerlake.answer(rt(0xdu), rt(0u), avx512).ebx, 0xa80u);
  // A guest XCR0 naming PKRU (which XSETBV would refuse) is sized without it.
  constexpr cpuid::vcpu_state with_pkru{{}, x86::xfeatures{0x2e7}, {}, 0};
  HVKIT_BOTH(tigerlake.answer(0xd, 0, with_pkru).ebx == 0xa80 && tigerlake.answer(0xd, 1, with_pkru).ebx == 0x980);
  // x87 | SSE | AVX: 576 + 256 = 832 in both formats.
  constexpr cpuid::vcpu_state avx{{}, x86::xfeatures{0x7}, {}, 0};
  HVKIT_BOTH(tigerlake.answer(0xd, 0, avx).ebx == 832 && tigerlake.answer(0xd, 1, avx).ebx == 832);
  // Sub-leaf 9 is not offered: it reads as zero, like any invalid sub-leaf.
  HVKIT_BOTH(tigerlake.answer(0xd, 9, avx512) == (regs{0, 0, 0, 0}));
}

TEST(cpuid_policy_bochs, icelake_same_xsave_as_tigerlake) {
  HVKIT_BOTH(icelake.xsave_withheld() == x86::xfeatures::pkru && icelake.xsave_issue(9) == xsave_enumeration::no_size);
  HVKIT_BOTH(icelake.xcr0_components() == avx512_xcr0);
  HVKIT_BOTH(icelake.leaves().get(0xd, 0) == (regs{0xe7, 0x240, 0xa80, 0}));
  HVKIT_BOTH(icelake.leaves().get(0xd, 1) == (regs{0xf, 0x240, 0, 0}));
  HVKIT_BOTH(xsave_subleaves_as_recorded(icelake));
  // 7.0:ECX host 0x00405f4e (no CET_SS here), PKU kept; 7.0:EDX host 0xbc000110 (no IBT).
  HVKIT_BOTH(icelake.leaves().get(0x7, 0).ecx == 0x00405f4e && icelake.leaves().get(0x7, 0).edx == 0xbc000110);
  HVKIT_BOTH(icelake.has(feat::avx512f) && icelake.has(feat::pku));
}

TEST(cpuid_policy_bochs, skylake_x_is_consistent) {
  // No PKRU in the bitmap: nothing withheld, the same AVX-512 layout.
  HVKIT_BOTH(skylake_x.xsave_withheld() == x86::xfeatures{});
  HVKIT_BOTH(skylake_x.xcr0_components() == avx512_xcr0);
  HVKIT_BOTH(skylake_x.leaves().get(0xd, 0) == (regs{0xe7, 0x240, 0xa80, 0}));
  HVKIT_BOTH(skylake_x.leaves().get(0xd, 1) == (regs{0xf, 0x240, 0, 0}));
  HVKIT_BOTH(xsave_subleaves_as_recorded(skylake_x));
  HVKIT_BOTH(skylake_x.has(feat::avx512f) && !skylake_x.has(feat::pku));
}

TEST(cpuid_policy_bochs, the_old_workaround_loses_avx512) {
  // What the hypervisor's x87/SSE/AVX limit cost: AVX-512 hidden with its components.
  constexpr auto limited = [] {
    auto c = config(1, 1);
    c.xsave_components = x86::xfeatures{0x7};
    return build(tigerlake_host, everything(), c);
  }();
  HVKIT_BOTH(limited.xcr0_components() == x86::xfeatures{0x7});
  HVKIT_BOTH(limited.leaves().get(0xd, 0) == (regs{0x7, 0x240, 0x340, 0}));
  HVKIT_BOTH(!limited.has(feat::avx512f) && limited.has(feat::avx2));
}
