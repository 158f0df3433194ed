// SPDX-License-Identifier: MIT
// cpuid::guest_cpu_model: the CR4 and EFER bits a guest may set, and its MAXPHYADDR, from its
// CPUID features. Every expected value is typed from the manuals, not from the code's gate
// tables: the feature's CPUID position (SDM Vol. 2A CPUID, Tables 3-8 "Feature Information
// Returned in the ECX Register", 3-10 "... EDX Register", the leaf 07H and 80000001H/
// 80000008H rows; AMD APM Vol. 3 Appendix E, CPUID Fn8000_0001, Fn8000_0008, Fn8000_0021) and
// the control bit it makes settable (SDM Vol. 3A 2.5 Figure 2-7 "Control Registers" for CR4,
// Vol. 4 Table 2-2 / APM Vol. 2 3.1.7 for EFER). A bit whose feature is not enumerated is
// reserved: "#GP(0) If an attempt is made to write a 1 to any reserved bit in CR4"
// (SDM Vol. 2B MOV CR).
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/cpuid/guest_cpu_model.hpp>
#include <hvkit/x86/cr_rules.hpp>

#include "policy_helpers.hpp"

namespace {

namespace cpuid = hvkit::cpuid;
namespace x86 = hvkit::x86;
using cpuid::word;
using namespace helpers;

constexpr std::uint64_t bit(unsigned n) { return std::uint64_t{1} << n; }
constexpr std::uint64_t PCE = bit(8);  // CR4.PCE: no CPUID gate (RDPMC at CPL > 0)

struct gate_row {
  const char* what;
  word w;
  unsigned cpuid_bit;
  std::uint64_t cr4_bits;  // CR4 bits (SDM Figure 2-7) the feature makes settable
};

// One row per CPUID feature, each quoted from the SDM CPUID tables.
constexpr gate_row cr4_rows[] = {
    {"01H:EDX[1] VME: CR4.VME (0), CR4.PVI (1)", word::leaf1_edx, 1, bit(0) | bit(1)},
    {"01H:EDX[2] DE: CR4.DE (3)", word::leaf1_edx, 2, bit(3)},
    {"01H:EDX[3] PSE: CR4.PSE (4)", word::leaf1_edx, 3, bit(4)},
    {"01H:EDX[4] TSC: CR4.TSD (2)", word::leaf1_edx, 4, bit(2)},
    {"01H:EDX[6] PAE: CR4.PAE (5)", word::leaf1_edx, 6, bit(5)},
    {"01H:EDX[7] MCE: CR4.MCE (6)", word::leaf1_edx, 7, bit(6)},
    {"01H:EDX[13] PGE: CR4.PGE (7)", word::leaf1_edx, 13, bit(7)},
    {"01H:EDX[24] FXSR: CR4.OSFXSR (9)", word::leaf1_edx, 24, bit(9)},
    {"01H:EDX[25] SSE: CR4.OSXMMEXCPT (10)", word::leaf1_edx, 25, bit(10)},
    {"01H:ECX[5] VMX: CR4.VMXE (13)", word::leaf1_ecx, 5, bit(13)},
    {"01H:ECX[6] SMX: CR4.SMXE (14)", word::leaf1_ecx, 6, bit(14)},
    {"01H:ECX[17] PCID: CR4.PCIDE (17)", word::leaf1_ecx, 17, bit(17)},
    {"01H:ECX[26] XSAVE: CR4.OSXSAVE (18)", word::leaf1_ecx, 26, bit(18)},
    {"07H.0:EBX[0] FSGSBASE: CR4.FSGSBASE (16)", word::leaf7_0_ebx, 0, bit(16)},
    {"07H.0:EBX[7] SMEP: CR4.SMEP (20)", word::leaf7_0_ebx, 7, bit(20)},
    {"07H.0:EBX[20] SMAP: CR4.SMAP (21)", word::leaf7_0_ebx, 20, bit(21)},
    {"07H.0:ECX[2] UMIP: CR4.UMIP (11)", word::leaf7_0_ecx, 2, bit(11)},
    {"07H.0:ECX[3] PKU: CR4.PKE (22)", word::leaf7_0_ecx, 3, bit(22)},
    {"07H.0:ECX[7] CET_SS: CR4.CET (23)", word::leaf7_0_ecx, 7, bit(23)},
    {"07H.0:EDX[20] CET_IBT: CR4.CET (23)", word::leaf7_0_edx, 20, bit(23)},
    {"07H.0:ECX[16] LA57: CR4.LA57 (12)", word::leaf7_0_ecx, 16, bit(12)},
    {"07H.0:ECX[23] KL: CR4.KL (19)", word::leaf7_0_ecx, 23, bit(19)},
    {"07H.0:ECX[31] PKS: CR4.PKS (24)", word::leaf7_0_ecx, 31, bit(24)},
    {"07H.0:EDX[5] UINTR: CR4.UINTR (25)", word::leaf7_0_edx, 5, bit(25)},
    {"07H.1:EAX[6] LASS: CR4.LASS (27)", word::leaf7_1_eax, 6, bit(27)},
    {"07H.1:EAX[17] FRED: CR4.FRED (32)", word::leaf7_1_eax, 17, bit(32)},
    {"07H.1:EAX[26] LAM: CR4.LAM_SUP (28)", word::leaf7_1_eax, 26, bit(28)},
};

cpuid::feature_set one(word w, unsigned b) {
  cpuid::feature_set f;
  f.put(w, std::uint32_t{1} << b);
  return f;
}

TEST(guest_cpu_model_golden, no_features_only_pce) {
  const auto m = cpuid::make_guest_cpu_model(cpuid::feature_set{}, cpuid::vendor::intel, 36);
  EXPECT_EQ(m.cr4_allowed.raw(), PCE);
  EXPECT_EQ(m.efer_allowed.raw(), 0u);
  EXPECT_FALSE(m.lam);
}

TEST(guest_cpu_model_golden, each_cr4_gate_alone) {
  for (const auto& r : cr4_rows) {
    const auto m = cpuid::make_guest_cpu_model(one(r.w, r.cpuid_bit), cpuid::vendor::intel, 36);
    EXPECT_EQ(m.cr4_allowed.raw(), PCE | r.cr4_bits) << r.what;
    // A MOV to CR4 with the bit: allowed with the feature, #GP(0) (reserved) without it.
    EXPECT_TRUE(m.cr4_write_allowed(x86::cr4{r.cr4_bits})) << r.what;
    const auto none = cpuid::make_guest_cpu_model(cpuid::feature_set{}, cpuid::vendor::intel, 36);
    EXPECT_FALSE(none.cr4_write_allowed(x86::cr4{r.cr4_bits})) << r.what;
  }
}

TEST(guest_cpu_model_golden, all_cr4_gates_give_every_defined_bit) {
  cpuid::feature_set f;
  for (const auto& r : cr4_rows) f.put(r.w, f.get(r.w) | (std::uint32_t{1} << r.cpuid_bit));
  const auto m = cpuid::make_guest_cpu_model(f, cpuid::vendor::intel, 36);
  // SDM Figure 2-7: bits 0-14, 16-25, 27, 28 and 32 are defined.
  EXPECT_EQ(m.cr4_allowed.raw(), 0x1'1bff'7fffu);
}

TEST(guest_cpu_model_golden, efer_gates) {
  using cpuid::vendor;
  struct row {
    const char* what;
    word w;
    unsigned cpuid_bit;
    vendor v;
    std::uint64_t efer_bits;
  } const rows[] = {
      {"80000001H:EDX[11] SYSCALL: EFER.SCE (0)", word::ext1_edx, 11, vendor::intel, bit(0)},
      {"80000001H:EDX[29] Intel 64: EFER.LME (8), LMA (10)", word::ext1_edx, 29, vendor::intel, bit(8) | bit(10)},
      {"80000001H:EDX[20] XD: EFER.NXE (11)", word::ext1_edx, 20, vendor::intel, bit(11)},
      {"Fn8000_0001 ECX[2] SVM: EFER.SVME (12)", word::ext1_ecx, 2, vendor::amd, bit(12)},
      {"Fn8000_0001 EDX[25] FFXSR: EFER.FFXSR (14)", word::ext1_edx, 25, vendor::amd, bit(14)},
      {"Fn8000_0001 ECX[17] TCE: EFER.TCE (15)", word::ext1_ecx, 17, vendor::amd, bit(15)},
      {"Fn8000_0021 EAX[8] AutomaticIBRS: EFER.AIBRSE (21)", word::ext21_eax, 8, vendor::amd, bit(21)},
  };
  for (const auto& r : rows) {
    const auto m = cpuid::make_guest_cpu_model(one(r.w, r.cpuid_bit), r.v, 36);
    EXPECT_EQ(m.efer_allowed.raw(), r.efer_bits) << r.what;
    EXPECT_TRUE(m.efer_write_allowed(x86::efer{r.efer_bits})) << r.what;
  }
  // EFER.LMSLE (13): AMD long mode only; reserved when Fn8000_0008 EBX[20]
  // (EferLmsleUnsupported) is 1, and on Intel (SDM Vol. 4 Table 2-2: bits 13-63 reserved,
  // bit 12 too).
  const auto lm = one(word::ext1_edx, 29);
  EXPECT_EQ(cpuid::make_guest_cpu_model(lm, vendor::amd, 36).efer_allowed.raw(), bit(8) | bit(10) | bit(13));
  EXPECT_EQ(cpuid::make_guest_cpu_model(lm, vendor::intel, 36).efer_allowed.raw(), bit(8) | bit(10));
  auto gone = lm;
  gone.put(word::ext8_ebx, std::uint32_t{1} << 20);
  EXPECT_EQ(cpuid::make_guest_cpu_model(gone, vendor::amd, 36).efer_allowed.raw(), bit(8) | bit(10));
  // NXE without XD: WRMSR #GP.
  EXPECT_FALSE(cpuid::make_guest_cpu_model(lm, vendor::intel, 36).efer_write_allowed(x86::efer{bit(11)}));
}

TEST(guest_cpu_model_golden, maxphyaddr_and_lam) {
  // The model keeps the MAXPHYADDR it is given (decode_address_widths' value for a policy).
  EXPECT_EQ(cpuid::make_guest_cpu_model(cpuid::feature_set{}, cpuid::vendor::intel, 39).maxphyaddr, 39u);
  // LAM: 07H.1:EAX[26].
  EXPECT_TRUE(cpuid::make_guest_cpu_model(one(word::leaf7_1_eax, 26), cpuid::vendor::intel, 36).lam);
  EXPECT_FALSE(cpuid::make_guest_cpu_model(one(word::leaf7_1_eax, 25), cpuid::vendor::intel, 36).lam);
}

TEST(guest_cpu_model_golden, one_default_and_cr_context) {
  // The one default (SDM 4.1.4, a PAE processor without leaf 80000008H): 36, for the model
  // and for the context types built without one.
  EXPECT_EQ(cpuid::guest_cpu_model{}.maxphyaddr, 36u);
  EXPECT_EQ(x86::cr_context{}.maxphyaddr, 36u);
  EXPECT_EQ(x86::default_maxphyaddr, 36u);
  // apply_to: the CPUID-derived fields of an x86::cr_context, nothing else.
  const auto m = cpuid::make_guest_cpu_model(one(word::leaf7_1_eax, 26), cpuid::vendor::intel, 48);
  x86::cr_context c{};
  c.cr3 = 0x5000;
  c.cs_l = true;
  m.apply_to(c);
  EXPECT_EQ(c.maxphyaddr, 48u);
  EXPECT_TRUE(c.lam);
  EXPECT_EQ(c.cr4_allowed.raw(), PCE | bit(28));
  EXPECT_EQ(c.cr3, 0x5000u);
  EXPECT_TRUE(c.cs_l);
  // The rule uses it: CR4.LA57 is reserved for this guest, CR4.LAM_SUP is not.
  c.cr0 = x86::cr0{0x8000'0011};
  c.cr4 = x86::cr4{bit(5)};
  EXPECT_EQ(x86::check_cr4_write(c, x86::cr4{bit(5) | bit(12)}), x86::cr_write_fault::reserved_bit);
}

TEST(guest_cpu_model_golden, from_a_recorded_amd_policy) {
  // The recorded AMD EPYC vCPU (tests/cpuid/fixtures.hpp): 80000008H EAX 0x3030 (48 bits),
  // 07H.0 ECX 0x00405fc6 (no LA57, bit 16; no PKU, bit 3), 80000001H ECX 0x004003f3 (no
  // SVM, bit 2), EDX 0x2fd3fbff (LM, bit 29; NX, bit 20), 80000008H EBX 0x50020005
  // (EferLmsleUnsupported, bit 20, clear).
  constexpr cpuid::policy amd = build(amd_host, everything(), config(1, 2));
  constexpr auto m = cpuid::make_guest_cpu_model(amd);
  static_assert(m.maxphyaddr == 48);
  EXPECT_EQ(m.maxphyaddr, 48u);
  EXPECT_FALSE(m.cr4_allowed.test(x86::cr4::la57));
  EXPECT_FALSE(m.cr4_allowed.test(x86::cr4::pke));
  EXPECT_FALSE(m.efer_allowed.test(x86::efer::svme));
  EXPECT_TRUE(m.efer_allowed.test(x86::efer::lme));
  EXPECT_TRUE(m.efer_allowed.test(x86::efer::nxe));
  EXPECT_TRUE(m.efer_allowed.test(x86::efer::lmsle));
  EXPECT_EQ(m.cpu_vendor, cpuid::vendor::amd);
}

}  // namespace
