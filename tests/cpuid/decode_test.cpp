// SPDX-License-Identifier: MIT
// Decoding: vendor strings, family/model/stepping (SDM Vol. 2A CPUID leaf 01H, APM vol. 3
// E.3.2), address widths, and the enumeration of a recorded processor.
#include <gtest/gtest.h>

#include <hvkit/cpuid/decode.hpp>
#include <hvkit/cpuid/host.hpp>

#include <set>
#include <string>

#include "fixtures.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace feat = cpuid::feat;
using cpuid::signature;
using cpuid::vendor;
using hvkit::test::rt;

TEST(cpuid_decode, vendor) {
  HVKIT_BOTH(cpuid::decode_vendor({0, 0x756e6547, 0x6c65746e, 0x49656e69}) == vendor::intel);
  HVKIT_BOTH(cpuid::decode_vendor({0, 0x68747541, 0x444d4163, 0x69746e65}) == vendor::amd);
  HVKIT_BOTH(cpuid::decode_vendor({0, 0x6f677948, 0x656e6975, 0x6e65476e}) == vendor::hygon);
  HVKIT_BOTH(cpuid::decode_vendor({0, 0x68747541, 0x444d4163, 0}) == vendor::unknown);
  constexpr auto s = cpuid::vendor_string({0, 0x756e6547, 0x6c65746e, 0x49656e69});
  EXPECT_EQ(std::string(s.data(), s.size()), "GenuineIntel");
}

TEST(cpuid_decode, signature) {
  // AMD EPYC (Zen 4): family 0xF + 0xA = 0x19, model 0x1 << 4 | 1 = 0x11, stepping 1.
  HVKIT_BOTH(cpuid::decode_signature(0x00a10f11, vendor::amd) == (signature{0x19, 0x11, 1}));
  // AMD Zen+: 0x00800f82 -> family 0x17, model 0x08, stepping 2.
  HVKIT_BOTH(cpuid::decode_signature(0x00800f82, vendor::amd) == (signature{0x17, 0x08, 2}));
  // Intel Coffee Lake 0x000906ea -> family 6, model 0x9e, stepping 10.
  HVKIT_BOTH(cpuid::decode_signature(0x000906ea, vendor::intel) == (signature{6, 0x9e, 10}));
  // Intel Sapphire Rapids 0x000806f8 -> family 6, model 0x8f, stepping 8.
  HVKIT_BOTH(cpuid::decode_signature(0x000806f8, vendor::intel) == (signature{6, 0x8f, 8}));
  // Pentium 4 (family 0xF, ext family 0): 0x00000f29 -> family 0xf, model 2, stepping 9.
  HVKIT_BOTH(cpuid::decode_signature(0x00000f29, vendor::intel) == (signature{0xf, 2, 9}));
  // Extended model ignored below family 6 on Intel, and for AMD family 6 (K7): 0x00010662.
  HVKIT_BOTH(cpuid::decode_signature(0x00010562, vendor::intel) == (signature{5, 6, 2}));
  HVKIT_BOTH(cpuid::decode_signature(0x00010662, vendor::amd) == (signature{6, 6, 2}));
  EXPECT_EQ(cpuid::decode_signature(rt(0x00a10f11u), vendor::amd).family, 0x19u);
}

TEST(cpuid_decode, recorded_amd_host) {
  constexpr auto t = [] {
    cpuid::table<> x;
    (void)cpuid::read_all(fixtures::amd_epyc_kvm, x);
    return x;
  }();
  constexpr auto h = cpuid::decode(t);
  HVKIT_BOTH(h.v == vendor::amd);
  HVKIT_BOTH(h.sig == (signature{0x19, 0x11, 1}));
  HVKIT_BOTH(h.widths == (cpuid::address_widths{48, 48}));
  HVKIT_BOTH(h.max_basic == 0x1c && h.max_extended == 0x80000021);
  HVKIT_BOTH(h.features.test(feat::avx512f) && h.features.test(feat::hypervisor) && !h.features.test(feat::vmx));
  HVKIT_BOTH(h.features.test(feat::xsaves) && h.features.test(feat::clzero) && h.features.test(feat::lm));
  HVKIT_BOTH(!h.features.test(feat::amd_ibpb) && h.features.test(feat::amd_psfd));
  // Enumeration: 0xB stops at the first invalid level, 0xD reads one subleaf per component
  // of 0xD.0 EDX:EAX | 0xD.1 EDX:ECX, 0x8000001D stops at cache type 0, the KVM leaves
  // are read because CPUID.1:ECX[31] is set.
  HVKIT_BOTH(t.find(0xb, 1) != nullptr && t.find(0xb, 2) == nullptr);
  HVKIT_BOTH(t.find(0xd, 12) != nullptr && t.find(0xd, 3) == nullptr && t.find(0xd, 8) == nullptr);
  HVKIT_BOTH(t.find(0x8000001d, 3) != nullptr && t.find(0x8000001d, 4) == nullptr);
  HVKIT_BOTH(t.get(0x40000000).ebx == 0x4b4d564b && t.get(0x40000001).eax == 0x01007efb);
  HVKIT_BOTH(t.find(0x7, 1) != nullptr && t.find(0x7, 2) == nullptr);
}

TEST(cpuid_decode, address_widths_without_leaf) {
  // No 0x80000008: MAXPHYADDR 36 with PAE (SDM Vol. 3A 4.1.4), 32 without.
  constexpr auto with_pae = [] {
    cpuid::table<4> t;
    (void)t.set(0, 0, {1, 0, 0, 0});
    (void)t.set(1, 0, {0, 0, 0, 1u << 6});
    return cpuid::decode_address_widths(t);
  }();
  HVKIT_BOTH(with_pae == (cpuid::address_widths{36, 32}));
  constexpr auto without = [] {
    cpuid::table<4> t;
    (void)t.set(1, 0, {0, 0, 0, 0});
    return cpuid::decode_address_widths(t);
  }();
  HVKIT_BOTH(without == (cpuid::address_widths{32, 32}));
  constexpr auto la57 = [] {
    cpuid::table<4> t;
    (void)t.set(0x80000000, 0, {0x80000008, 0, 0, 0});
    (void)t.set(0x80000008, 0, {0x00003934, 0, 0, 0});  // 52 physical, 57 linear
    return cpuid::decode_address_widths(t);
  }();
  HVKIT_BOTH(la57 == (cpuid::address_widths{52, 57}));
}

TEST(cpuid_decode, table_too_small_is_an_error) {
  cpuid::table<8> t;
  auto r = cpuid::read_all(fixtures::amd_epyc_kvm, t);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), cpuid::table_error::full);
  EXPECT_EQ(t.size(), 8u);
}

TEST(cpuid_features, names_unique_and_bits_distinct) {
  constexpr auto bits_distinct = [] {
    cpuid::feature_set seen;
    for (const auto& n : cpuid::named_features) {
      if (seen.test(n.f)) return false;
      seen.set(n.f);
    }
    return true;
  }();
  HVKIT_BOTH(bits_distinct);
  std::set<std::string> names;
  for (const auto& n : cpuid::named_features) {
    EXPECT_TRUE(names.insert(n.name).second) << n.name;
    EXPECT_EQ(cpuid::find_named(n.name), &n) << n.name;
  }
  HVKIT_BOTH(cpuid::find_named("avx512f") != nullptr && cpuid::find_named("avx512f")->f == feat::avx512f);
  HVKIT_BOTH(cpuid::find_named("no_such_flag") == nullptr);
}

TEST(cpuid_features, golden_bits) {
  // Hand-typed from the SDM/APM tables, checked against the feature constants.
  HVKIT_BOTH(feat::vmx.w == cpuid::word::leaf1_ecx && feat::vmx.bit == 5);
  HVKIT_BOTH(feat::x2apic.bit == 21 && feat::tsc_deadline.bit == 24 && feat::hypervisor.bit == 31);
  HVKIT_BOTH(feat::osxsave.bit == 27 && feat::ospke.w == cpuid::word::leaf7_0_ecx && feat::ospke.bit == 4);
  HVKIT_BOTH(feat::spec_ctrl.w == cpuid::word::leaf7_0_edx && feat::spec_ctrl.bit == 26);
  HVKIT_BOTH(feat::flush_l1d.bit == 28 && feat::arch_capabilities.bit == 29);
  HVKIT_BOTH(feat::amd_ibpb.w == cpuid::word::ext8_ebx && feat::amd_ibpb.bit == 12);
  HVKIT_BOTH(feat::sbpb.w == cpuid::word::ext21_eax && feat::sbpb.bit == 27);
  HVKIT_BOTH(feat::psfd.w == cpuid::word::leaf7_2_edx && feat::psfd.bit == 0 && feat::bhi_ctrl.bit == 4);
  HVKIT_BOTH(cpuid::locate(cpuid::word::kvm_features).leaf == 0x40000001);
  HVKIT_BOTH(cpuid::locate(cpuid::word::kvm_hints, 0x40000100).leaf == 0x40000101);
  HVKIT_BOTH(cpuid::locate(cpuid::word::kvm_hints).r == cpuid::reg::edx);
  HVKIT_BOTH(cpuid::locate(cpuid::word::ext8_ebx).leaf == 0x80000008);
}

// feature_set follows the x86::flags convention (std::bitset's): set/reset and the compound
// operators change the set and return it, with/without return changed copies. Word values
// are the SDM bit positions: CPUID.1:ECX VMX bit 5, X2APIC bit 21.
TEST(cpuid_features, set_reset_mutate_with_without_copy) {
  constexpr auto check = [] {
    cpuid::feature_set s{feat::vmx};
    const cpuid::feature_set copy = s.with(feat::x2apic);
    bool ok = s.get(cpuid::word::leaf1_ecx) == 0x20 && copy.get(cpuid::word::leaf1_ecx) == 0x20'0020;
    ok = ok && copy.without(feat::vmx).get(cpuid::word::leaf1_ecx) == 0x20'0000 && copy.test(feat::vmx);
    ok = ok && &s.set(feat::x2apic) == &s && s == copy;
    s.reset(feat::vmx);
    ok = ok && s.get(cpuid::word::leaf1_ecx) == 0x20'0000;
    s |= cpuid::feature_set{feat::vmx};
    ok = ok && s == copy;
    s &= cpuid::feature_set{feat::vmx};
    ok = ok && s == cpuid::feature_set{feat::vmx};
    s ^= cpuid::feature_set{feat::vmx, feat::x2apic};
    return ok && s == cpuid::feature_set{feat::x2apic};
  };
  HVKIT_BOTH(check());
}

// At run time: none() and the symmetric difference, word by word (CPUID.1:ECX VMX bit 5,
// X2APIC bit 21; CPUID.7.0:EBX AVX512F bit 16).
TEST(cpuid_features, none_and_xor_at_run_time) {
  cpuid::feature_set empty;
  EXPECT_TRUE(empty.none());
  const cpuid::feature_set a{feat::vmx, feat::x2apic}, b{feat::x2apic, feat::avx512f};
  const cpuid::feature_set x = a ^ b;
  EXPECT_FALSE(x.none());
  EXPECT_EQ(x.get(cpuid::word::leaf1_ecx), 0x20u);
  EXPECT_EQ(x.get(cpuid::word::leaf7_0_ebx), 1u << 16);
  EXPECT_TRUE((a ^ a).none());
  EXPECT_FALSE(cpuid::feature_set{feat::avx512f}.none()) << "a bit in a word other than the first";
}
