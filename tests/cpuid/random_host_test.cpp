// SPDX-License-Identifier: MIT
// Randomized host tables (fixed seeds): whatever the host reports, build_policy returns a
// policy or a typed error, never UB (this runs under ASan/UBSan too), and a built policy
// keeps its invariants. The invariants are cross-checks between independent views (the
// stored leaves, the features, the MSR policy), not recomputations of expected values.
#include <gtest/gtest.h>

#include <hvkit/cpuid/decode.hpp>
#include <hvkit/cpuid/msr_policy.hpp>
#include <hvkit/cpuid/policy.hpp>

#include <cstdint>
#include <cstdio>
#include <random>

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
namespace x86 = hvkit::x86;
using cpuid::regs;

namespace {
// std::mt19937's result_type is wider than 32 bits on LP64; this hands out uint32_t.
struct rng {
  std::mt19937 e;
  std::uint32_t operator()() { return static_cast<std::uint32_t>(e()); }
};

regs random_regs(rng& g) { return {static_cast<std::uint32_t>(g()), static_cast<std::uint32_t>(g()),
                                            static_cast<std::uint32_t>(g()), static_cast<std::uint32_t>(g())}; }

// Where each feature word lives, typed from SDM Vol. 2A CPUID and APM vol. 3 Appendix E.
struct word_at {
  cpuid::word w;
  std::uint32_t leaf, subleaf;
  char r;  // 'a', 'b', 'c', 'd'
};
constexpr word_at stored_words[] = {
    {cpuid::word::leaf1_ecx, 0x1, 0, 'c'},         {cpuid::word::leaf1_edx, 0x1, 0, 'd'},
    {cpuid::word::leaf6_eax, 0x6, 0, 'a'},         {cpuid::word::leaf7_0_ebx, 0x7, 0, 'b'},
    {cpuid::word::leaf7_0_ecx, 0x7, 0, 'c'},       {cpuid::word::leaf7_0_edx, 0x7, 0, 'd'},
    {cpuid::word::leaf7_1_eax, 0x7, 1, 'a'},       {cpuid::word::leaf7_1_edx, 0x7, 1, 'd'},
    {cpuid::word::leaf7_2_edx, 0x7, 2, 'd'},       {cpuid::word::leafd_1_eax, 0xd, 1, 'a'},
    {cpuid::word::leaf14_0_ebx, 0x14, 0, 'b'},     {cpuid::word::leaf19_ebx, 0x19, 0, 'b'},
    {cpuid::word::ext1_ecx, 0x80000001, 0, 'c'},   {cpuid::word::ext1_edx, 0x80000001, 0, 'd'},
    {cpuid::word::ext7_edx, 0x80000007, 0, 'd'},   {cpuid::word::ext8_ebx, 0x80000008, 0, 'b'},
    {cpuid::word::ext1f_eax, 0x8000001f, 0, 'a'},  {cpuid::word::ext21_eax, 0x80000021, 0, 'a'},
};
std::uint32_t reg_of(const cpuid::regs& r, char c) {
  return c == 'a' ? r.eax : c == 'b' ? r.ebx : c == 'c' ? r.ecx : r.edx;
}

cpuid::table<> random_host(rng& g) {
  cpuid::table<> t;
  const std::uint32_t max_basic = g() % 0x24;
  const bool intel = g() & 1;
  regs l0 = intel ? regs{max_basic, 0x756e6547, 0x6c65746e, 0x49656e69} : regs{max_basic, 0x68747541, 0x444d4163, 0x69746e65};
  (void)t.set(0, 0, l0);
  for (std::uint32_t leaf = 1; leaf <= max_basic; ++leaf) {
    if (g() % 4 == 0) continue;  // holes
    const std::uint32_t subs = cpuid::is_indexed(leaf) ? 1 + g() % 5 : 1;
    for (std::uint32_t s = 0; s < subs; ++s) (void)t.set(leaf, s, random_regs(g));
  }
  if (max_basic >= 0xd && (g() & 1)) {  // a plausible XSAVE leaf with random components
    const std::uint32_t comps = 0x3 | (g() & 0x000e02fcu);
    (void)t.set(0xd, 0, {comps, 0, 0, 0});
    (void)t.set(0xd, 1, {g() & 0xf, 0, g() & 0x1900u, 0});
    for (std::uint32_t i = 2; i < 20; ++i)
      if (g() % 3) (void)t.set(0xd, i, {g() % 0x3000, g() % 0x3000, g() & 3, 0});
  }
  if (g() % 4) {
    const std::uint32_t max_ext = 0x80000000 + g() % 0x24;
    (void)t.set(0x80000000, 0, {max_ext, 0, 0, 0});
    for (std::uint32_t leaf = 0x80000001; leaf <= max_ext; ++leaf)
      if (g() % 3) (void)t.set(leaf, 0, random_regs(g));
  }
  if (g() & 1) (void)t.set(0x40000000, 0, {0x40000005, 1, 2, 3});
  return t;
}
}  // namespace

TEST(cpuid_random_host, policies_keep_their_invariants) {
  int built = 0, refused = 0;
  for (std::uint32_t seed = 1; seed <= 400; ++seed) {
    rng g{std::mt19937(seed)};
    const auto host = random_host(g);
    cpuid::hypervisor_caps hv;
    hv.passthrough = cpuid::feature_set::all();
    hv.emulated = cpuid::feature_set{feat::x2apic, feat::arat, cpuid::kvm::features::pv_send_ipi};
    hv.nested_virtualization = g() & 1;
    cpuid::policy_config cfg;
    cfg.topo = {1 + g() % 4, 1 + g() % 64};
    cfg.max_basic_leaf = g() % 0x24;
    cfg.deny.put(static_cast<cpuid::word>(g() % cpuid::word_count), static_cast<std::uint32_t>(g()));
    auto r = cpuid::build_policy(host, hv, cfg);
    if (!r) {
      ++refused;
      EXPECT_NE(r.error(), cpuid::policy_error::none) << "seed " << seed;
      continue;
    }
    ++built;
    const auto& p = r.value();
    const auto& t = p.leaves();
    SCOPED_TRACE(seed);
    // Max leaves describe exactly what is stored.
    EXPECT_EQ(t.get(0).eax, t.highest_leaf(0, 0x3fffffff, 0));
    EXPECT_LE(t.get(0).eax, cfg.max_basic_leaf);
    if (t.has_leaf(0x80000000)) {
      EXPECT_EQ(t.get(0x80000000).eax, t.highest_leaf(0x80000000, 0xbfffffff, 0));
    }
    if (t.has_leaf(7)) {
      EXPECT_EQ(t.get(7, 0).eax, t.highest_subleaf(7));
    }
    // Dynamic bits are never stored; the hypervisor bit is; VMX only with nesting.
    EXPECT_FALSE(p.has(feat::osxsave) || p.has(feat::ospke));
    EXPECT_TRUE(p.has(feat::hypervisor));
    if (!(hv.nested_virtualization && cfg.nested_virtualization)) {
      EXPECT_FALSE(p.has(feat::vmx) || p.has(feat::svm));
    }
    // features() is what the stored leaves say, read back at register locations typed here
    // (not through cpuid::read_features/locate, which build_policy itself uses).
    for (const auto& w : stored_words) {
      const cpuid::regs* r = t.find(w.leaf, w.subleaf);
      const std::uint32_t stored = r == nullptr ? 0u : reg_of(*r, w.r);
      EXPECT_EQ(p.features().get(w.w), stored) << std::hex << w.leaf << "." << w.subleaf;
    }
    const cpuid::regs* kvm1 = t.find(p.kvm_base() + 1);
    EXPECT_EQ(p.features().get(cpuid::word::kvm_features), kvm1 == nullptr ? 0u : kvm1->eax);
    EXPECT_EQ(p.features().get(cpuid::word::kvm_hints), 0u);  // hints never enter features()
    // XSAVE enumerated <=> leaf 0xD present; AVX needs its state.
    EXPECT_EQ(p.has(feat::xsave), t.has_leaf(0xd));
    if (p.has(feat::avx)) {
      EXPECT_TRUE(p.xcr0_components().test(x86::xfeatures{0x7}));
    }
    if (p.has(feat::xsave)) {
      EXPECT_TRUE(x86::is_valid_xcr0(p.xcr0_components()));
    }
    // The derived MSR policy never contradicts the features.
    EXPECT_TRUE(cpuid::check_consistency(p.features(), cpuid::derive_msr_policy(p.features(), p.xss_components())));
    // Answers for arbitrary queries and vCPU states are total.
    for (int q = 0; q < 64; ++q) {
      const std::uint32_t base = (g() % 3) * 0x40000000u;
      const cpuid::vcpu_state v{x86::cr4{g()}, x86::xfeatures{g()}, x86::xfeatures{g()}, static_cast<std::uint32_t>(g())};
      const regs a = p.answer(base + g() % 0x30, g() % 8, v);
      (void)a;
    }
  }
  EXPECT_GT(built, 200);
  std::printf("[   NOTE   ] %d random hosts built, %d refused with a typed error\n", built, refused);
}
