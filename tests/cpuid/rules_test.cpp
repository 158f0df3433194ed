// SPDX-License-Identifier: MIT
// One test per normalization rule (rules.hpp), each against hand-worked expected values.
#include <gtest/gtest.h>

#include <hvkit/cpuid/policy.hpp>
#include <hvkit/cpuid/rules.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;
using cpuid::regs;
using cpuid::rule_id;
using hvkit::test::rt;
using namespace helpers;

namespace {
constexpr cpuid::vcpu_state reset{};

template <class F>
constexpr cpuid::policy with_config(const cpuid::table<>& host, F edit, std::uint32_t threads = 1, std::uint32_t cores = 1) {
  auto c = config(threads, cores);
  edit(c);
  return build(host, everything(), c);
}
template <class F>
constexpr cpuid::policy with_caps(const cpuid::table<>& host, F edit) {
  auto hv = everything();
  edit(hv);
  return build(host, hv, config(1, 1));
}
}  // namespace

TEST(cpuid_rules, table_is_well_formed) {
  constexpr auto ok = [] {
    for (std::size_t i = 0; i < cpuid::normalization_rules.size(); ++i) {
      const auto& r = cpuid::normalization_rules[i];
      if (static_cast<std::size_t>(r.id) != i) return false;
      if (r.name[0] == '\0' || r.what[0] == '\0' || r.why[0] == '\0' || r.reference[0] == '\0') return false;
    }
    return true;
  }();
  HVKIT_BOTH(ok);
  HVKIT_BOTH(cpuid::rule_for(rule_id::osxsave_ospke).dynamic && cpuid::rule_for(rule_id::apic_id).dynamic &&
             cpuid::rule_for(rule_id::xsave_sizes).dynamic);
  HVKIT_BOTH(!cpuid::rule_for(rule_id::hypervisor_bit).dynamic && !cpuid::rule_for(rule_id::topology).dynamic);
  int dynamic = 0;
  for (const auto& r : cpuid::normalization_rules) {
    dynamic += r.dynamic;
    EXPECT_NE(std::string(r.reference).find_first_of("SAL"), std::string::npos) << r.name;  // SDM / APM / Linux
  }
  EXPECT_EQ(dynamic, 3);
}

TEST(cpuid_rules, nested_virtualization) {
  // Host (Intel fixture) has VMX; hidden unless both hypervisor and config offer nesting.
  constexpr auto off = build(intel_host, everything(), config(1, 1));
  constexpr auto on = with_config(intel_host, [](auto& c) { c.nested_virtualization = true; });
  constexpr auto cannot = [] {
    auto hv = everything();
    hv.nested_virtualization = false;
    auto c = config(1, 1);
    c.nested_virtualization = true;
    return build(intel_host, hv, c);
  }();
  HVKIT_BOTH(!off.has(feat::vmx) && on.has(feat::vmx) && !cannot.has(feat::vmx));
  HVKIT_BOTH(((on.leaves().get(0x1).ecx >> 5) & 1) == 1 && ((off.leaves().get(0x1).ecx >> 5) & 1) == 0);
  // AMD: SVM and its leaf 0x8000000A.
  constexpr auto svm_host = [] {
    auto t = amd_host;
    auto e1 = t.get(0x80000001);
    e1.ecx |= 1u << 2;
    (void)t.set(0x80000001, 0, e1);
    (void)t.set(0x8000000a, 0, {1, 0x8000, 0, 0x0001b6ff});
    return t;
  }();
  constexpr auto svm_off = build(svm_host, everything(), config(1, 1));
  constexpr auto svm_on = with_config(svm_host, [](auto& c) { c.nested_virtualization = true; });
  HVKIT_BOTH(!svm_off.has(feat::svm) && !svm_off.leaves().has_leaf(0x8000000a));
  // With no nested SVM feature implemented the leaf keeps revision and NASID but no EDX bit.
  HVKIT_BOTH(svm_on.has(feat::svm) && svm_on.leaves().get(0x8000000a) == (regs{1, 0x8000, 0, 0}));
  // Features reach the guest only as the hypervisor implements them: NP and NRIPS passed
  // through (host has both), VMCB clean bits emulated; decode assists (host has them) not.
  constexpr auto svm_impl = [h = svm_host] {
    auto hv = everything();
    hv.svm.passthrough = hvkit::cpuid::svm_features::np | hvkit::cpuid::svm_features::nrip_save |
                         hvkit::cpuid::svm_features::avic;
    hv.svm.emulated = hvkit::cpuid::svm_features::vmcb_clean | hvkit::cpuid::svm_features::nested_vmcb_addr_check;
    hv.svm.nasid = 8;
    auto c = config(1, 1);
    c.nested_virtualization = true;
    return build(h, hv, c);
  }();
  // 0x1b6ff has bits 0-7, 9, 10, 12, 13, 15, 16: NP, NRIPS, AVIC (bit 13) from the host; bits 5 and 28 emulated.
  HVKIT_BOTH(svm_impl.leaves().get(0x8000000a) == (regs{1, 8, 0, (1u << 0) | (1u << 3) | (1u << 13) | (1u << 5) | (1u << 28)}));
}

TEST(cpuid_rules, emulated_only) {
  // x2APIC is on the host but the hypervisor does not emulate it: hidden.
  constexpr auto no_x2apic = with_caps(intel_host, [](auto& hv) { hv.emulated.reset(feat::x2apic); });
  HVKIT_BOTH(!no_x2apic.has(feat::x2apic) && no_x2apic.has(feat::tsc_deadline));
  HVKIT_BOTH(no_x2apic.leaves().get(0x1).ecx == (0xf7fefbdfu & ~(1u << 21)));
  // TSC-deadline absent on the host but emulated: offered.
  constexpr auto host_without = [] {
    auto t = intel_host;
    auto l1 = t.get(0x1);
    l1.ecx &= ~(1u << 24);
    (void)t.set(1, 0, l1);
    return t;
  }();
  constexpr auto emulated = build(host_without, everything(), config(1, 1));
  HVKIT_BOTH(emulated.has(feat::tsc_deadline));
  // Denied by the user: hidden even though emulated. Passing through is not enough either.
  constexpr auto denied = with_config(intel_host, [](auto& c) { c.deny.set(feat::arat); });
  HVKIT_BOTH(!denied.has(feat::arat) && denied.leaves().get(0x6).eax == 0x000df7f3);
  constexpr auto passthrough_only = with_caps(intel_host, [](auto& hv) { hv.emulated = {}; });
  HVKIT_BOTH(!passthrough_only.has(feat::x2apic) && !passthrough_only.has(feat::tsc_deadline) &&
             !passthrough_only.has(feat::arat));
}

TEST(cpuid_rules, feature_dependencies) {
  // AVX denied: everything VEX/EVEX-encoded goes, and so does the AVX/AVX-512 state.
  constexpr auto no_avx = with_config(intel_host, [](auto& c) { c.deny.set(feat::avx); });
  constexpr auto t = no_avx.leaves();
  HVKIT_BOTH(t.get(0x1).ecx == 0xc7feebdf);                 // AVX, FMA, F16C gone
  HVKIT_BOTH(t.get(0x7, 0).ebx == 0x239cb7cb);              // AVX2 and AVX-512 gone
  HVKIT_BOTH(t.get(0x7, 0).ecx == 0xbb41210c);              // VAES, VPCLMULQDQ, AVX-512 gone
  HVKIT_BOTH(t.get(0x7, 0).edx == 0xff4d4410);              // AVX512_FP16 gone, AMX stays
  HVKIT_BOTH(t.get(0x7, 1).eax == 0x00200000);              // AVX-VNNI, AVX512_BF16 gone
  HVKIT_BOTH(no_avx.xcr0_components() == x86::xfeatures{0x60203});  // x87 SSE PKRU AMX
  HVKIT_BOTH(t.get(0xd, 0) == (regs{0x60203, 0x240, 0x2b00, 0}));
  HVKIT_BOTH(t.find(0xd, 2) == nullptr && t.find(0xd, 5) == nullptr && t.find(0xd, 17) != nullptr);
  // XSAVE denied: no leaf 0xD, no XSAVE-family bits, no state-using features; PKU stays.
  constexpr auto no_xsave = with_config(intel_host, [](auto& c) { c.deny.set(feat::xsave); });
  HVKIT_BOTH(!no_xsave.leaves().has_leaf(0xd) && !no_xsave.has(feat::xsaveopt) && !no_xsave.has(feat::avx));
  HVKIT_BOTH(!no_xsave.has(feat::amx_tile) && no_xsave.has(feat::pku) && no_xsave.has(feat::sse4_2));
  HVKIT_BOTH(no_xsave.xcr0_components() == x86::xfeatures{});
  // CET needs its supervisor state: the AMD host has it, unless the hypervisor cannot
  // context-switch it.
  constexpr auto amd_cet = build(amd_host, everything(), config(1, 1));
  constexpr auto amd_no_cet = with_caps(amd_host, [](auto& hv) {
    hv.xsave_components.reset(x86::xfeatures::cet_u | x86::xfeatures::cet_s);
  });
  HVKIT_BOTH(amd_cet.has(feat::shstk) && amd_cet.xss_components() == x86::xfeatures{0x1800});
  HVKIT_BOTH(!amd_no_cet.has(feat::shstk) && amd_no_cet.xss_components() == x86::xfeatures{});
  HVKIT_BOTH(amd_no_cet.leaves().get(0xd, 1) == (regs{0xf, 0x240, 0, 0}) && amd_no_cet.leaves().find(0xd, 11) == nullptr);
}

TEST(cpuid_rules, topoext_hidden) {
  constexpr auto p = build(amd_host, everything(), config(1, 2));
  HVKIT_BOTH(cpuid::has(amd_host, feat::topoext) && !p.has(feat::topoext));
  HVKIT_BOTH(amd_host.has_leaf(0x8000001d) && !p.leaves().has_leaf(0x8000001d) && !p.leaves().has_leaf(0x8000001e));
}

TEST(cpuid_rules, hypervisor_bit_and_leaves_can_be_withheld) {
  constexpr auto hidden = with_config(intel_host, [](auto& c) { c.announce_hypervisor = false; });
  HVKIT_BOTH(!hidden.has(feat::hypervisor) && (hidden.leaves().get(0x1).ecx >> 31) == 0);
  HVKIT_BOTH(hidden.leaves().highest_leaf(0x40000000, 0x4fffffff, 0) == 0 && !hidden.has_kvm_leaves());
  // Without hypervisor leaves 0x40000000 is out of range: Intel answers the highest basic leaf.
  HVKIT_BOTH(hidden.answer(0x40000000, 0, reset) == (regs{0, 1, 0x100, 0}));
  constexpr auto shown = build(intel_host, everything(), config(1, 1));
  HVKIT_BOTH(shown.has(feat::hypervisor) && (shown.leaves().get(0x1).ecx >> 31) == 1);
}

TEST(cpuid_rules, xsave_leaf) {
  // The VM may not use AVX-512: XCR0 0x60207, and the AVX-512 subleaves are removed.
  constexpr auto p = with_config(intel_host, [](auto& c) {
    c.xsave_components = x86::xfeatures{~std::uint64_t{0}}.without(x86::xfeatures{0xe0});
  });
  HVKIT_BOTH(p.xcr0_components() == x86::xfeatures{0x60207} && !p.has(feat::avx512f) && p.has(feat::avx2));
  HVKIT_BOTH(p.leaves().get(0xd, 0) == (regs{0x60207, 0x240, 0x2b00, 0}));
  HVKIT_BOTH(p.leaves().find(0xd, 5) == nullptr && p.leaves().find(0xd, 7) == nullptr);
  // AMD without AVX-512 state: the standard size shrinks to the end of AVX (832).
  constexpr auto a = with_config(amd_host, [](auto& c) {
    c.xsave_components = x86::xfeatures{~std::uint64_t{0}}.without(x86::xfeatures{0xe0});
  });
  HVKIT_BOTH(a.leaves().get(0xd, 0) == (regs{0x7, 0x240, 0x340, 0}));
}

TEST(cpuid_rules, topology) {
  constexpr auto p = build(amd_host, everything(), config(2, 3));
  // SMT shift 1, package shift 1 + 2 = 3; 6 threads; 8 addressable IDs.
  HVKIT_BOTH(p.leaves().get(0xb, 0) == (regs{1, 2, 0x100, 0}) && p.leaves().get(0xb, 1) == (regs{3, 6, 0x201, 0}));
  HVKIT_BOTH(((p.leaves().get(0x1).ebx >> 16) & 0xff) == 8 && ((p.leaves().get(0x1).edx >> 28) & 1) == 1);
  HVKIT_BOTH(p.leaves().get(0x80000008).ecx == 0x3005);  // NC = 5, ApicIdCoreIdSize = 3
  HVKIT_BOTH(!p.leaves().has_leaf(0x1f));                 // the host has no leaf 0x1F
  constexpr auto uni = build(intel_host, everything(), config(1, 1));
  HVKIT_BOTH(uni.leaves().get(0xb, 0) == (regs{0, 1, 0x100, 0}) && uni.leaves().get(0xb, 1) == (regs{0, 1, 0x201, 0}));
  HVKIT_BOTH(((uni.leaves().get(0x1).ebx >> 16) & 0xff) == 1 && ((uni.leaves().get(0x1).edx >> 28) & 1) == 0);
  HVKIT_BOTH(!uni.has(feat::htt));
  HVKIT_BOTH(uni.leaves().get(0x4, 0).eax == 0x00000121 && uni.leaves().get(0x4, 3).eax == 0x00000163);
  HVKIT_BOTH((cpuid::topology{2, 3}.x2apic_id(1, 2, 1) == 0x0d));
}

TEST(cpuid_rules, hypervisor_leaves_above_hyperv) {
  constexpr auto p = with_config(amd_host, [](auto& c) {
    c.kvm_base = cpuid::kvm::base_above_hyperv;
    c.hints.set(cpuid::kvm::hints::realtime);
  });
  HVKIT_BOTH(p.leaves().get(0x40000100) == (regs{0x40000101, 0x4b4d564b, 0x564b4d56, 0x4d}));
  HVKIT_BOTH(p.leaves().get(0x40000101) == (regs{0x848, 0, 0, 1}));
  HVKIT_BOTH(p.leaves().find(0x40000000) == nullptr && p.leaves().find(0x40000001) == nullptr);
  HVKIT_BOTH(p.answer(0x40000000, 0, reset) == regs{});  // AMD: out of range reads zero
  HVKIT_BOTH(p.has(cpuid::kvm::features::pv_send_ipi));
  // Hyper-V leaves below the KVM block may be added; the KVM block and other ranges not.
  constexpr auto edits = [] {
    auto q = with_config(amd_host, [](auto& c) { c.kvm_base = cpuid::kvm::base_above_hyperv; });
    const bool hv_ok = static_cast<bool>(q.set_leaf(0x40000000, 0, {0x4000000a, 0x7263694d, 0x666f736f, 0x76482074}));
    auto kvm_block = q.set_leaf(0x40000101, 0, {});
    auto basic = q.set_leaf(0x1, 0, {});
    const regs sig = q.answer(0x40000000, 0, {});
    return hv_ok && !kvm_block && kvm_block.error() == cpuid::policy_error::not_hypervisor_leaf && !basic &&
           sig.eax == 0x4000000a && q.answer(0x40000005, 0, {}) == regs{};
  }();
  HVKIT_BOTH(edits);
}

TEST(cpuid_rules, leaf7_max_subleaf) {
  constexpr auto host = [] {
    auto t = intel_host;
    auto l7 = t.get(0x7, 0);
    l7.eax = 3;
    (void)t.set(0x7, 0, l7);
    (void)t.set(0x7, 3, {0, 0, 0, 0xffffffff});
    return t;
  }();
  constexpr auto p = build(host, everything(), config(1, 1));
  HVKIT_BOTH(p.leaves().get(0x7, 0).eax == 2 && p.leaves().find(0x7, 3) == nullptr);
  constexpr auto amd = build(amd_host, everything(), config(1, 1));
  HVKIT_BOTH(amd.leaves().get(0x7, 0).eax == 1);
}

TEST(cpuid_rules, max_basic_leaf) {
  constexpr auto p = with_config(intel_host, [](auto& c) { c.max_basic_leaf = 0xd; });
  HVKIT_BOTH(p.leaves().get(0x0).eax == 0xd && !p.leaves().has_leaf(0x14) && !p.leaves().has_leaf(0x1f));
  // 0x14 is now out of range: Intel answers with leaf 0xD (same subleaf), sizes dynamic.
  HVKIT_BOTH(p.answer(0x14, 0, reset) == (regs{0x602e7, 0x240, 0x2b00, 0}));
  // Leaves above the cap disappear, and so do the features they carried.
  HVKIT_BOTH(!p.has(feat::pt_cr3_filter));
  constexpr auto low = with_config(intel_host, [](auto& c) { c.max_basic_leaf = 0x7; });
  HVKIT_BOTH(low.leaves().get(0x0).eax == 0x7 && !low.leaves().has_leaf(0xb) && !low.leaves().has_leaf(0xd));
  // Without leaf 0xD there is no XSAVE, hence no AVX, FMA, F16C either (and no XCR0 state).
  HVKIT_BOTH(low.leaves().get(0x1).ecx == 0xc3feebdf && low.xcr0_components() == x86::xfeatures{});
  HVKIT_BOTH(!low.has(feat::avx2) && !low.has(feat::avx512f) && low.has(feat::bmi2));
  // Below leaf 7, the leaf-7 words go too, and so do the components their features needed.
  constexpr auto six = with_config(intel_host, [](auto& c) { c.max_basic_leaf = 0x6; });
  HVKIT_BOTH(!six.leaves().has_leaf(0x7) && !six.has(feat::bmi2) && six.xcr0_components() == x86::xfeatures{});
}

TEST(cpuid_rules, max_extended_leaf) {
  // The host claims 0x80000020 as its maximum, but only leaves up to 0x80000008 exist.
  constexpr auto host = [] {
    auto t = intel_host;
    (void)t.set(0x80000000, 0, {0x80000020, 0, 0, 0});
    (void)t.set(0x80000019, 0, {1, 2, 3, 4});
    return t;
  }();
  constexpr auto p = build(host, everything(), config(1, 1));
  HVKIT_BOTH(p.leaves().get(0x80000000).eax == 0x80000008 && !p.leaves().has_leaf(0x80000019));
  HVKIT_BOTH(p.answer(0x80000019, 0, reset) == (regs{0, 1, 0x100, 0}));  // Intel: highest basic leaf
}

TEST(cpuid_rules, osxsave_ospke) {
  constexpr cpuid::vcpu_state on{x86::cr4::osxsave | x86::cr4::pke, x86::xfeatures{1}, {}, 0};
  constexpr auto p = build(intel_host, everything(), config(1, 1));
  HVKIT_BOTH(((p.answer(0x1, 0, on).ecx >> 27) & 1) == 1 && ((p.answer(0x7, 0, on).ecx >> 4) & 1) == 1);
  HVKIT_BOTH(((p.answer(0x1, 0, reset).ecx >> 27) & 1) == 0 && ((p.answer(0x7, 0, reset).ecx >> 4) & 1) == 0);
  // The host's OSXSAVE (set in the fixture: the host OS enabled XSAVE) never leaks.
  HVKIT_BOTH(((intel_host.get(0x1).ecx >> 27) & 1) == 1 && ((p.leaves().get(0x1).ecx >> 27) & 1) == 0);
  // Without XSAVE / PKU exposed, CR4 cannot turn the bits on.
  constexpr auto q = with_config(intel_host, [](auto& c) {
    c.deny.set(feat::xsave);
    c.deny.set(feat::pku);
  });
  HVKIT_BOTH(((q.answer(0x1, 0, on).ecx >> 27) & 1) == 0 && ((q.answer(0x7, 0, on).ecx >> 4) & 1) == 0);
  // Subleaf 1 of leaf 7 has no OSPKE.
  HVKIT_BOTH(p.answer(0x7, 1, on) == (regs{0x00200030, 0, 0, 0}));
}

TEST(cpuid_rules, apic_id) {
  constexpr cpuid::vcpu_state v{{}, x86::xfeatures{1}, {}, 0x1234};
  constexpr auto p = build(intel_host, everything(), config(2, 4));
  HVKIT_BOTH((p.answer(0x1, 0, v).ebx >> 24) == 0x34 && p.answer(0xb, 0, v).edx == 0x1234);
  HVKIT_BOTH(p.answer(0x1f, 1, v).edx == 0x1234 && p.answer(0x1f, 9, v) == (regs{0, 0, 9, 0x1234}));
  cpuid::vcpu_state w{};
  w.x2apic_id = rt(7u);
  EXPECT_EQ(p.answer(0xb, 1, w).edx, 7u);
}

TEST(cpuid_rules, documented_in_docs_cpuid_md) {
  std::ifstream f(HVKIT_SOURCE_DIR "/docs/cpuid.md");
  ASSERT_TRUE(f) << "docs/cpuid.md";
  std::stringstream s;
  s << f.rdbuf();
  const std::string doc = s.str();
  for (const auto& r : cpuid::normalization_rules)
    EXPECT_NE(doc.find(std::string("| ") + r.name + " |"), std::string::npos) << r.name << " missing from docs/cpuid.md";
}

TEST(cpuid_rules, pv_send_ipi_withheld_when_ipis_are_accelerated) {
  // Rule pv_send_ipi: KVM_FEATURE_PV_SEND_IPI is bit 11 of EAX of base+1 (cpuid.rst). With the
  // hypervisor offering it and IPIs not accelerated it reaches the guest; with AVIC or IPI
  // virtualization enabled for the guest it does not; nothing else in the word changes.
  constexpr auto plain = with_config(intel_host, [](cpuid::policy_config&) {});
  constexpr auto accel = with_config(intel_host, [](cpuid::policy_config& c) { c.ipi_accelerated = true; });
  const regs p = plain.answer(0x40000001, 0, reset);
  const regs a = accel.answer(0x40000001, 0, reset);
  EXPECT_EQ(p.eax & 0x800u, 0x800u);
  EXPECT_EQ(a.eax & 0x800u, 0u);
  EXPECT_EQ(a.eax, p.eax & ~0x800u);
  HVKIT_BOTH(accel.features().test(cpuid::kvm::features::pv_send_ipi) == false);
}
