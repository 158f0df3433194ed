// SPDX-License-Identifier: MIT
// Golden policies: the whole composition for a recorded AMD host and a hand-composed Intel
// host. Every expected register was worked out by hand from the fixture and the rules.
#include <gtest/gtest.h>

#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>
#include <hvkit/cpuid/presets.hpp>

#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;
using cpuid::regs;
using hvkit::test::rt;
using namespace helpers;

namespace {
constexpr cpuid::policy amd = build(amd_host, everything(), config(1, 2));
constexpr cpuid::policy intel = build(intel_host, everything(), config(2, 4));
constexpr cpuid::vcpu_state reset{};
// The Intel host with AMX tiles of 2 GiB each: every sub-leaf is consistent on its own
// (offset + size below 4 GiB, the two overlap in the standard format), but the compacted
// area for XCR0 would be 576 + ... + 4 GiB, which no 32-bit size can describe.
constexpr cpuid::table<> huge_amx_host() {
  auto t = intel_host;
  (void)t.set(0xd, 17, regs{0x80000000u, 0xac0, 2, 0});
  (void)t.set(0xd, 18, regs{0x80000000u, 0xb00, 2, 0});
  return t;
}
}  // namespace

TEST(cpuid_policy_golden, amd_static_leaves) {
  const auto& t = amd.leaves();
  HVKIT_BOTH(amd.cpu_vendor() == cpuid::vendor::amd);
  // Highest basic leaf present: 0xD (0x10-0x1C were zero, reserved on AMD, and dropped).
  HVKIT_BOTH(t.get(0x0) == (regs{0xd, 0x68747541, 0x444d4163, 0x69746e65}));
  // OSXSAVE cleared (dynamic), hypervisor bit kept, 1 x 2 topology -> 2 IDs, HTT set.
  HVKIT_BOTH(t.get(0x1) == (regs{0x00a10f11, 0x00020800, 0xf7fa3203, 0x178bfbff}));
  HVKIT_BOTH(t.get(0x6) == (regs{0x4, 0, 0, 0}));
  HVKIT_BOTH(t.get(0x7, 0) == (regs{0x1, 0xf1bf07ab, 0x00405fc6, 0x10}));
  HVKIT_BOTH(t.get(0x7, 1) == (regs{0x20, 0, 0, 0}));
  HVKIT_BOTH(t.get(0xb, 0) == (regs{0, 1, 0x100, 0}));
  HVKIT_BOTH(t.get(0xb, 1) == (regs{1, 2, 0x201, 0}));
  HVKIT_BOTH(t.get(0xd, 0) == (regs{0xe7, 0x240, 0x980, 0}));
  HVKIT_BOTH(t.get(0xd, 1) == (regs{0xf, 0x240, 0x1800, 0}));
  HVKIT_BOTH(t.get(0xd, 11) == (regs{0x10, 0, 1, 0}));
  HVKIT_BOTH(t.get(0x40000000) == (regs{0x40000001, 0x4b4d564b, 0x564b4d56, 0x4d}));
  // clocksource2 (3) | pv_eoi (6) | pv_send_ipi (11); no hints.
  HVKIT_BOTH(t.get(0x40000001) == (regs{0x848, 0, 0, 0}));
  HVKIT_BOTH(t.get(0x80000000) == (regs{0x80000021, 0x68747541, 0x444d4163, 0x69746e65}));
  // TOPOEXT (ECX[22]) hidden.
  HVKIT_BOTH(t.get(0x80000001) == (regs{0x00a10f11, 0x40000000, 0x000003f3, 0x2fd3fbff}));
  HVKIT_BOTH(t.get(0x80000007) == (regs{0, 0, 0, 0x100}));
  // NC = 1 (2 threads), ApicIdCoreIdSize = 1.
  HVKIT_BOTH(t.get(0x80000008) == (regs{0x3030, 0x50020005, 0x1001, 0}));
  HVKIT_BOTH(t.get(0x80000021) == (regs{0x204, 0, 0, 0}));
  HVKIT_BOTH(!t.has_leaf(0x8000001d) && !t.has_leaf(0x8000001e) && !t.has_leaf(0x8000001a));
  HVKIT_BOTH(!t.has_leaf(0x2) || t.get(0x2) == regs{});
}

TEST(cpuid_policy_golden, amd_dynamic_answers) {
  constexpr cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pae, x86::xfeatures{0xe7}, x86::xfeatures{0x1800}, 1};
  // The XSAVE sizes the real CPU reported for XCR0 = 0xe7, XSS = 0x1800.
  HVKIT_BOTH(amd.answer(0xd, 0, v).ebx == 0x980 && amd.answer(0xd, 1, v).ebx == 0x9a8);
  HVKIT_BOTH(amd.answer(0x1, 0, v) == (regs{0x00a10f11, 0x01020800, 0xfffa3203, 0x178bfbff}));
  HVKIT_BOTH(amd.answer(0xb, 1, v) == (regs{1, 2, 0x201, 1}));
  // Past the last topology level: ECX echoes the level, EDX the x2APIC ID.
  HVKIT_BOTH(amd.answer(0xb, 2, v) == (regs{0, 0, 2, 1}));
  // AMD: out-of-range and undefined leaves read as zero.
  HVKIT_BOTH(amd.answer(0x1c, 0, v) == regs{} && amd.answer(0x80000022, 0, v) == regs{});
  HVKIT_BOTH(amd.answer(0x40000002, 0, v) == regs{} && amd.answer(0xc0000000, 0, v) == regs{});
  EXPECT_EQ(amd.answer(rt(0xdu), rt(1u), v).ebx, 0x9a8u);
}

TEST(cpuid_policy_golden, intel_static_leaves) {
  const auto& t = intel.leaves();
  HVKIT_BOTH(intel.cpu_vendor() == cpuid::vendor::intel);
  // Leaf 0x20 is not exposed, so the highest basic leaf is 0x1F.
  HVKIT_BOTH(t.get(0x0) == (regs{0x1f, 0x756e6547, 0x6c65746e, 0x49656e69}));
  // The configuration does not offer nesting: VMX cleared; OSXSAVE cleared (dynamic);
  // hypervisor bit set; 2 x 4 topology -> 8 addressable IDs.
  HVKIT_BOTH(t.get(0x1) == (regs{0x000806f8, 0x00080800, 0xf7fefbdf, 0xbfebfbff}));
  // Cache leaves: L1/L2 shared by the 2 threads of a core, L3 by the package of 8;
  // 4 addressable cores -> EAX[31:26] = 3.
  HVKIT_BOTH(t.get(0x4, 0).eax == 0x0c004121 && t.get(0x4, 2).eax == 0x0c004143);
  HVKIT_BOTH(t.get(0x4, 3).eax == 0x0c01c163 && t.get(0x4, 3).ebx == 0x0380003f);
  HVKIT_BOTH(t.get(0x6) == (regs{0x000df7f7, 0, 0, 0}));  // EAX passed through; EBX-EDX dropped
  // MPX (EBX[14]) hidden: no MPX state; OSPKE (ECX[4]) dynamic; CET (shadow stack ECX[7],
  // IBT EDX[20]) hidden: the host's XSS has no CET state.
  HVKIT_BOTH(t.get(0x7, 0) == (regs{0x2, 0xf3bfb7eb, 0xbb417f4e, 0xffcd4410}));
  HVKIT_BOTH(t.get(0x7, 1) == (regs{0x00200030, 0, 0, 0}));
  HVKIT_BOTH(t.get(0x7, 2) == (regs{0, 0, 0, 0x17}));
  HVKIT_BOTH(!t.has_leaf(0xa) && !t.has_leaf(0x5) && !t.has_leaf(0x20));
  HVKIT_BOTH(t.get(0xb, 0) == (regs{1, 2, 0x100, 0}) && t.get(0xb, 1) == (regs{3, 8, 0x201, 0}));
  HVKIT_BOTH(t.get(0x1f, 0) == (regs{1, 2, 0x100, 0}) && t.get(0x1f, 1) == (regs{3, 8, 0x201, 0}));
  // XSAVE: all user components exposed (0x602e7, 11008 bytes); PT state (XSS bit 8) has no
  // exposed owner, so XSS is empty and subleaf 8 is gone.
  HVKIT_BOTH(t.get(0xd, 0) == (regs{0x602e7, 0x240, 0x2b00, 0}));
  HVKIT_BOTH(t.get(0xd, 1) == (regs{0xf, 0x240, 0, 0}));
  HVKIT_BOTH(t.find(0xd, 8) == nullptr && t.get(0xd, 18) == (regs{0x2000, 0xb00, 2, 0}));
  HVKIT_BOTH(t.get(0x14, 0) == (regs{1, 0x5f, 7, 0}) && t.get(0x14, 1) == (regs{0x02490002, 0x003f3fff, 0, 0}));
  HVKIT_BOTH(t.get(0x80000000).eax == 0x80000008);
  HVKIT_BOTH(t.get(0x80000001) == (regs{0, 0, 0x121, 0x2c100800}));
  HVKIT_BOTH(t.get(0x80000008) == (regs{0x302e, 0x200, 0, 0}));  // Intel: ECX untouched (0)
}

TEST(cpuid_policy_golden, intel_dynamic_answers) {
  constexpr cpuid::vcpu_state v{x86::cr4::osxsave | x86::cr4::pke, x86::xfeatures{0x602e7}, {}, 5};
  HVKIT_BOTH(intel.answer(0x1, 0, v) == (regs{0x000806f8, 0x05080800, 0xfffefbdf, 0xbfebfbff}));
  HVKIT_BOTH(intel.answer(0x7, 0, v).ecx == 0xbb417f5e);  // OSPKE from CR4.PKE
  HVKIT_BOTH(intel.answer(0xd, 0, v).ebx == 11008 && intel.answer(0xd, 1, v).ebx == 10752);
  constexpr cpuid::vcpu_state avx_only{x86::cr4::osxsave, x86::xfeatures{0x7}, {}, 0};
  HVKIT_BOTH(intel.answer(0xd, 0, avx_only).ebx == 832 && intel.answer(0xd, 1, avx_only).ebx == 832);
  // XCR0 bits the policy does not expose do not count (a hypervisor rejects such an XSETBV
  // anyway; the size stays that of the exposed part).
  constexpr cpuid::vcpu_state bogus{x86::cr4::osxsave, x86::xfeatures{0x1f}, x86::xfeatures{0x100}, 0};
  HVKIT_BOTH(intel.answer(0xd, 0, bogus).ebx == 832 && intel.answer(0xd, 1, bogus).ebx == 832);
  // Intel: a leaf above the maximum answers as the highest basic leaf (0x1F) with the same
  // subleaf (SDM Vol. 2A CPUID); an undefined leaf in range reads as zero.
  HVKIT_BOTH(intel.answer(0x21, 1, v) == (regs{3, 8, 0x201, 5}));
  HVKIT_BOTH(intel.answer(0x80000009, 0, v) == (regs{1, 2, 0x100, 5}));
  HVKIT_BOTH(intel.answer(0x40000002, 7, v) == (regs{0, 0, 7, 5}));
  HVKIT_BOTH(intel.answer(0x5, 0, v) == regs{} && intel.answer(0x8, 0, v) == regs{});
  HVKIT_BOTH(intel.answer(0x7, 3, v) == regs{});
  EXPECT_EQ(intel.answer(rt(0x1u), 0, v).ebx >> 24, 5u);
}

TEST(cpuid_policy_golden, reset_state) {
  // At reset CR4 = 0, XCR0 = 1, XSS = 0: no OSXSAVE/OSPKE, XSAVE sizes of the legacy area.
  HVKIT_BOTH(!((intel.answer(0x1, 0, reset).ecx >> 27) & 1) && !((intel.answer(0x7, 0, reset).ecx >> 4) & 1));
  HVKIT_BOTH(intel.answer(0xd, 0, reset).ebx == 576 && intel.answer(0xd, 1, reset).ebx == 576);
}

TEST(cpuid_policy_golden, errors) {
  constexpr auto bad_base = [] {
    auto c = config(1, 1);
    c.kvm_base = 0x40000080;
    return cpuid::build_policy(amd_host, everything(), c).error();
  }();
  HVKIT_BOTH(bad_base == cpuid::policy_error::bad_kvm_base);
  constexpr auto bad_topo = cpuid::build_policy(amd_host, everything(), config(0, 1)).error();
  HVKIT_BOTH(bad_topo == cpuid::policy_error::bad_topology);
  constexpr auto no_leaf1 = [] {
    auto c = config(1, 1);
    c.max_basic_leaf = 0;
    return cpuid::build_policy(amd_host, everything(), c).error();
  }();
  HVKIT_BOTH(no_leaf1 == cpuid::policy_error::bad_max_leaf);
  // XSAVE enumerated but the host's XCR0 mask lacks x87: XSAVE is hidden, not half-offered.
  constexpr auto no_x87 = [] {
    auto t = amd_host;
    auto d0 = t.get(0xd, 0);
    d0.eax &= ~1u;
    (void)t.set(0xd, 0, d0);
    return build(t, everything(), config(1, 1));
  }();
  HVKIT_BOTH(!no_x87.has(feat::xsave) && !no_x87.has(feat::avx) && !no_x87.leaves().has_leaf(0xd));
  constexpr auto empty = cpuid::build_policy(cpuid::table<4>{}, everything(), config(1, 1)).error();
  HVKIT_BOTH(empty == cpuid::policy_error::no_basic_leaves);
  // Components whose enumeration no XSAVE area can hold (4 GiB each in the compacted
  // format) are a typed error.
  constexpr auto huge = cpuid::build_policy(huge_amx_host(), everything(), config(1, 1)).error();
  HVKIT_BOTH(huge == cpuid::policy_error::xsave_layout);
}

// A host table claiming an XSAVE component whose sub-leaf is missing (reads as zero, SDM
// Vol. 2A CPUID leaf 0DH: only an unsupported component's sub-leaf may): that component is
// withheld with the reason, the policy is still built.
TEST(cpuid_policy_golden, inconsistent_xsave_component_is_withheld) {
  constexpr auto no_pkru = [] {
    auto t = intel_host;
    (void)t.erase(0xd, 9);
    return build(t, everything(), config(1, 1));
  }();
  HVKIT_BOTH(no_pkru.xsave_withheld() == x86::xfeatures::pkru);
  HVKIT_BOTH(no_pkru.xsave_issue(9) == cpuid::xsave_enumeration::no_size);
  // Host XCR0 bitmap 0x602e7 without PKRU; MPX has no state on this host (not enumerated).
  HVKIT_BOTH(no_pkru.xcr0_components() == x86::xfeatures{0x600e7});
  // The highest end is still AMX tile data: 0xb00 + 0x2000.
  HVKIT_BOTH(no_pkru.leaves().get(0xd, 0) == (regs{0x600e7, 0x240, 0x2b00, 0}));
  HVKIT_BOTH(no_pkru.leaves().find(0xd, 9) == nullptr && no_pkru.has(feat::pku) && no_pkru.has(feat::avx512f));

  // AVX's sub-leaf without a size: AVX and everything built on it goes (SDM Vol. 1 14.3,
  // 15.2), so do the AVX-512 components no remaining feature needs; AMX and PKRU stay.
  constexpr auto no_avx = [] {
    auto t = intel_host;
    (void)t.set(0xd, 2, regs{0, 0x240, 0, 0});
    return build(t, everything(), config(1, 1));
  }();
  HVKIT_BOTH(no_avx.xsave_withheld() == x86::xfeatures::avx && no_avx.xsave_issue(2) == cpuid::xsave_enumeration::no_size);
  HVKIT_BOTH(no_avx.xcr0_components() == x86::xfeatures{0x60203});
  HVKIT_BOTH(!no_avx.has(feat::avx) && !no_avx.has(feat::avx2) && !no_avx.has(feat::fma) && !no_avx.has(feat::avx512f));
  HVKIT_BOTH(no_avx.has(feat::xsave) && no_avx.has(feat::amx_tile) && no_avx.has(feat::pku));
  HVKIT_BOTH(no_avx.leaves().get(0xd, 0) == (regs{0x60203, 0x240, 0x2b00, 0}));
  HVKIT_BOTH(no_avx.leaves().find(0xd, 2) == nullptr && no_avx.leaves().find(0xd, 5) == nullptr);

  // AMX tile data described as an IA32_XSS component (ECX[0] = 1) although the XCR0 bitmap
  // enumerates it: AMX goes (it needs both tile components), tile config with it.
  constexpr auto amx_wrong = [] {
    auto t = intel_host;
    (void)t.set(0xd, 18, regs{0x2000, 0xb00, 3, 0});
    return build(t, everything(), config(1, 1));
  }();
  HVKIT_BOTH(amx_wrong.xsave_withheld() == x86::xfeatures::xtiledata);
  HVKIT_BOTH(amx_wrong.xsave_issue(18) == cpuid::xsave_enumeration::wrong_register);
  HVKIT_BOTH(amx_wrong.xcr0_components() == x86::xfeatures{0x2e7} && !amx_wrong.has(feat::amx_tile));
  // Standard size: PKRU ends last (0xa80 + 8).
  HVKIT_BOTH(amx_wrong.leaves().get(0xd, 0) == (regs{0x2e7, 0x240, 0xa88, 0}));
}

TEST(cpuid_policy_golden, direct_index_agrees_with_the_table) {
  auto agree = [](const cpuid::policy& p) {
    for (std::uint32_t base : {0x0u, 0x40000000u, 0x80000000u})
      for (std::uint32_t leaf = base; leaf < base + 0x48; ++leaf)
        for (std::uint32_t sub = 0; sub < 20; ++sub)
          if (p.find(leaf, sub) != p.leaves().find(leaf, sub)) return false;
    return true;
  };
  EXPECT_TRUE(agree(amd));
  EXPECT_TRUE(agree(intel));
  constexpr bool ct = [] {
    auto p = intel;
    (void)p.set_leaf(0x40000000, 0, {});  // hypervisor leaves shift nothing in the index...
    (void)p.set_leaf(0x4000000f, 0, {});  // ...but a reindex keeps every position right
    return p.find(0x80000008, 0) == p.leaves().find(0x80000008, 0) && p.find(0xd, 18) == p.leaves().find(0xd, 18) &&
           p.find(0x40000001, 0) == p.leaves().find(0x40000001, 0);
  }();
  HVKIT_BOTH(ct);
}

TEST(cpuid_policy_golden, amd_with_presets) {
  constexpr auto p = [] {
    cpuid::hypervisor_caps hv;
    hv.passthrough = cpuid::presets::instruction_set_passthrough;
    hv.emulated = cpuid::presets::virtual_apic;
    return build(amd_host, hv, config(1, 1));
  }();
  constexpr auto t = p.leaves();
  // PCID (ECX[17]) not passed through, OSXSAVE dynamic; x2APIC/TSC-deadline emulated.
  HVKIT_BOTH(t.get(0x1).ecx == 0xf7f83203);
  // TSC_ADJUST (EBX[1]) and INVPCID (EBX[10]) need VMCS support: not in the preset.
  HVKIT_BOTH(t.get(0x7, 0).ebx == 0xf1bf03a9);
  // UMIP (2), shadow stack (7), RDPID (22) not in the preset.
  HVKIT_BOTH(t.get(0x7, 0).ecx == 0x00005f42);
  // No XSAVES: no supervisor state.
  HVKIT_BOTH(t.get(0xd, 1) == (regs{0x7, 0x240, 0, 0}) && p.xss_components() == x86::xfeatures{});
  // The preset carries no MSR obligation: even an MSR policy that refuses everything is
  // consistent with it (only the virtual APIC's TSC-deadline MSR is owed).
  HVKIT_BOTH(cpuid::check_consistency(cpuid::presets::instruction_set_passthrough, cpuid::msr_policy{}).has_value());
  HVKIT_BOTH(!cpuid::check_consistency(p.features(), cpuid::msr_policy{}).has_value());
  HVKIT_BOTH(cpuid::check_consistency(p.features(), cpuid::derive_msr_policy(p.features(), p.xss_components())).has_value());
}

TEST(cpuid_policy_golden, build_in_place) {
  static cpuid::policy p;  // a freestanding caller keeps it in static storage
  ASSERT_TRUE(cpuid::build_policy_into(p, amd_host, everything(), config(1, 2)));
  EXPECT_TRUE(p.leaves().get(0x1) == amd.leaves().get(0x1));
  EXPECT_EQ(p.leaves().size(), amd.leaves().size());
  // A failure leaves an empty policy, never a half-built one.
  auto c = config(1, 1);
  c.kvm_base = 0x40000001;
  auto r = cpuid::build_policy_into(p, amd_host, everything(), c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), cpuid::policy_error::bad_kvm_base);
  EXPECT_EQ(p.leaves().size(), 0u);
  ASSERT_TRUE(cpuid::build_policy_into(p, amd_host, everything(), config(1, 2)));
  auto r2 = cpuid::build_policy_into(p, huge_amx_host(), everything(), config(1, 1));
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error(), cpuid::policy_error::xsave_layout);
  EXPECT_EQ(p.leaves().size(), 0u);
  EXPECT_EQ(p.xsave_withheld(), x86::xfeatures{});
}
