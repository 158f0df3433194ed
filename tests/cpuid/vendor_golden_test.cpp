// SPDX-License-Identifier: MIT
// cpuid::decode_vendor and the MAXPHYADDR fallback of decode_address_widths, against the
// manuals:
//   SDM Vol. 2A, CPUID leaf 0: "EBX ← “Genu”, EDX ← “ineI”, ECX ← “ntel”" (the vendor string
//   is EBX, EDX, ECX, four ASCII characters each, first character in the low byte); AMD APM
//   Vol. 3, CPUID Fn0000_0000: "AuthenticAMD". The other vendors' strings: "HygonGenuine",
//   "  Shanghai  " (Zhaoxin), "CentaurHauls". The register values are built here from the
//   strings, not copied from the header.
//   SDM Vol. 3A 4.1.4: without CPUID leaf 80000008H, "MAXPHYADDR is 36 if CPUID.01H:EDX.PAE
//   [bit 6] = 1 and 32 otherwise", and linear addresses are 32 bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include <hvkit/cpuid/decode.hpp>
#include <hvkit/cpuid/table.hpp>

namespace cpuid = hvkit::cpuid;
using cpuid::regs;
using cpuid::vendor;

namespace {

// Leaf 0 with `s` (12 characters) in EBX, EDX, ECX.
regs leaf0(const char* s) {
  auto word = [s](int i) {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= std::uint32_t{static_cast<unsigned char>(s[4 * i + k])} << (8 * k);
    return v;
  };
  volatile std::uint32_t max = 0x16;
  return regs{max, word(0), word(2), word(1)};  // eax, ebx, ecx, edx
}

TEST(cpuid_vendor_golden, every_vendor_string_and_one_register_off) {
  const struct {
    const char* s;
    vendor v;
  } rows[] = {{"GenuineIntel", vendor::intel},
              {"AuthenticAMD", vendor::amd},
              {"HygonGenuine", vendor::hygon},
              {"  Shanghai  ", vendor::zhaoxin},
              {"CentaurHauls", vendor::centaur}};
  for (const auto& r : rows) {
    const regs l = leaf0(r.s);
    EXPECT_EQ(cpuid::decode_vendor(l), r.v) << r.s;
    // Any one register different: not that vendor (and no other).
    for (int reg = 0; reg < 3; ++reg) {
      regs m = l;
      (reg == 0 ? m.ebx : reg == 1 ? m.edx : m.ecx) ^= 0x20;  // one letter's case
      EXPECT_EQ(cpuid::decode_vendor(m), vendor::unknown) << r.s << " register " << reg;
    }
  }
  EXPECT_EQ(cpuid::decode_vendor(leaf0("GenuineIotel")), vendor::unknown);
  // AMD's CPUID conventions: AMD and Hygon (a licensed AMD design), not the others.
  EXPECT_TRUE(cpuid::is_amd_like(cpuid::decode_vendor(leaf0("AuthenticAMD"))));
  EXPECT_TRUE(cpuid::is_amd_like(cpuid::decode_vendor(leaf0("HygonGenuine"))));
  EXPECT_FALSE(cpuid::is_amd_like(cpuid::decode_vendor(leaf0("GenuineIntel"))));
  EXPECT_FALSE(cpuid::is_amd_like(cpuid::decode_vendor(leaf0("CentaurHauls"))));
  EXPECT_FALSE(cpuid::is_amd_like(cpuid::decode_vendor(leaf0("  Shanghai  "))));
}

TEST(cpuid_vendor_golden, maxphyaddr_without_leaf_80000008) {
  for (bool pae : {false, true}) {
    cpuid::table<> t;
    ASSERT_TRUE(t.set(0, 0, leaf0("GenuineIntel")));
    volatile std::uint32_t edx = pae ? (1u << 6) : 0u;
    ASSERT_TRUE(t.set(1, 0, regs{0x306a9, 0, 0, edx}));
    ASSERT_TRUE(t.set(0x80000000, 0, regs{0x80000004, 0, 0, 0}));  // no 80000008H
    const auto w = cpuid::decode_address_widths(t);
    EXPECT_EQ(w.physical, pae ? 36u : 32u);
    EXPECT_EQ(w.linear, 32u);
  }
}

}  // namespace
