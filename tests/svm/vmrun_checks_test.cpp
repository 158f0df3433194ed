// SPDX-License-Identifier: MIT
// VMRUN's consistency checks (AMD APM Vol. 2 15.5.1): a legal 64-bit guest state passes, and
// each illegal combination of the APM's list, made from it one at a time, is reported.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/svm/vmrun_checks.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace f = hvkit::svm::fields;
using E = svm::vmrun_error;

namespace {

svm::soft_vmcb legal() {
  svm::soft_vmcb v;
  svm::write(v, f::efer, x86::efer::svme | x86::efer::lme | x86::efer::lma);
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::et | x86::cr0::wp);
  svm::write(v, f::cr4, x86::cr4::pae);
  svm::write(v, f::cr3, std::uint64_t{0x1000});
  svm::write(v, f::cs_attrib, std::uint16_t{0x029b});  // L=1, D=0
  svm::write(v, f::dr6, std::uint64_t{0xffff0ff0});
  svm::write(v, f::dr7, std::uint64_t{0x400});
  svm::set_intercept(v, svm::intercept::vmrun);
  svm::write(v, f::msrpm_base_pa, std::uint64_t{0x10000});
  svm::write(v, f::iopm_base_pa, std::uint64_t{0x20000});
  svm::write(v, f::guest_asid, std::uint32_t{1});
  return v;
}

TEST(VmrunChecks, LegalStatePasses) {
  const auto v = legal();
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
}

TEST(VmrunChecks, EachIllegalCombination) {
  struct step {
    E expected;
    void (*make)(svm::soft_vmcb&);
  };
  const step steps[] = {
      {E::svme_clear, [](svm::soft_vmcb& v) { svm::write(v, f::efer, x86::efer::lme | x86::efer::lma); }},
      {E::nw_without_cd, [](svm::soft_vmcb& v) { svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::nw); }},
      {E::cr0_high_bits, [](svm::soft_vmcb& v) { svm::write(v, f::cr0, x86::cr0{(1ull << 32) | 0x80000011}); }},
      {E::cr3_mbz, [](svm::soft_vmcb& v) { svm::write(v, f::cr3, std::uint64_t{1ull << 40}); }},  // MAXPHYADDR 36
      {E::cr4_mbz, [](svm::soft_vmcb& v) { svm::write(v, f::cr4, x86::cr4{(1ull << 15) | (1ull << 5)}); }},  // bit 15 reserved
      {E::dr6_high_bits, [](svm::soft_vmcb& v) { svm::write(v, f::dr6, std::uint64_t{1ull << 40}); }},
      {E::dr7_high_bits, [](svm::soft_vmcb& v) { svm::write(v, f::dr7, std::uint64_t{1ull << 33}); }},
      {E::efer_mbz, [](svm::soft_vmcb& v) {
         svm::write(v, f::efer, x86::efer::svme | x86::efer::lme | x86::efer::lma | x86::efer{1ull << 1});
       }},
      {E::lme_pg_without_pae, [](svm::soft_vmcb& v) { svm::write(v, f::cr4, x86::cr4{}); }},
      {E::lme_pg_without_pe, [](svm::soft_vmcb& v) { svm::write(v, f::cr0, x86::cr0::pg | x86::cr0::et); }},
      {E::lme_pg_pae_cs_l_and_d, [](svm::soft_vmcb& v) { svm::write(v, f::cs_attrib, std::uint16_t{0x069b}); }},
      {E::vmrun_intercept_clear, [](svm::soft_vmcb& v) { svm::set_intercept(v, svm::intercept::vmrun, false); }},
      {E::msrpm_address, [](svm::soft_vmcb& v) { svm::write(v, f::msrpm_base_pa, std::uint64_t{0xf'ffff'f000}); }},
      {E::iopm_address, [](svm::soft_vmcb& v) { svm::write(v, f::iopm_base_pa, std::uint64_t{0xf'ffff'e000}); }},
      {E::event_injection, [](svm::soft_vmcb& v) { svm::write(v, f::event_injection, std::uint64_t{0x8000'0105}); }},
      {E::event_injection, [](svm::soft_vmcb& v) { svm::write(v, f::event_injection, std::uint64_t{0x8000'0305}); }},  // #BR in 64-bit mode
      {E::asid_zero, [](svm::soft_vmcb& v) { svm::write(v, f::guest_asid, std::uint32_t{0}); }},
  };
  for (const auto& s : steps) {
    auto v = legal();
    s.make(v);
    EXPECT_EQ(svm::check_vmrun(v, {36}), s.expected) << static_cast<int>(s.expected);
  }
  auto v = legal();
  EXPECT_EQ(svm::check_vmrun(v, {36, false}), E::long_mode_unsupported);
  // Maps that end exactly at the last byte below 2^36 are fine; the IOPM is 3 pages.
  svm::write(v, f::msrpm_base_pa, std::uint64_t{0xf'ffff'e000});
  svm::write(v, f::iopm_base_pa, std::uint64_t{0xf'ffff'd000});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  // Compatibility mode (L=0) may have D=1; #BR is then injectable.
  svm::write(v, f::cs_attrib, std::uint16_t{0x049b});
  svm::write(v, f::event_injection, std::uint64_t{0x8000'0305});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
}

// 15.20: TYPE 3 (exception) with a vector that does not correspond to an exception is
// refused, "this includes vector 2, which is an NMI"; the exception vectors are APM Vol. 2
// Table 8-1's. #BR and #OF cannot arise in 64-bit mode (BOUND, INTO invalid there).
TEST(VmrunChecks, EventInjectionVectors) {
  const unsigned exceptions[] = {0, 1, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 16, 17, 18, 19, 21, 28, 29, 30};
  for (unsigned vec = 0; vec < 256; ++vec) {
    bool is_exception = false;
    for (unsigned e : exceptions) is_exception = is_exception || e == vec;
    const svm::event_info i{0x8000'0300ull | vec};
    EXPECT_EQ(svm::check_eventinj(i), is_exception ? svm::injection_error::none : svm::injection_error::not_an_exception)
        << vec;
    // The other types take any vector (an NMI's vector is ignored; INTn may use any).
    EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0000ull | vec}), svm::injection_error::none) << vec;
    EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0400ull | vec}), svm::injection_error::none) << vec;
  }
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0304ull}, true), svm::injection_error::impossible_in_mode);  // #OF
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0304ull}, false), svm::injection_error::none);
  EXPECT_EQ(svm::check_eventinj(svm::event_info{0x8000'0303ull}, true), svm::injection_error::none);  // #BP
  auto v = legal();
  svm::write(v, f::event_injection, std::uint64_t{0x8000'0302});  // "exception" vector 2
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::event_injection);
}

// 15.25.3: NP_ENABLE with host CR0.PG = 0; 15.25.4: with NP_ENABLE, an MBZ bit of nCR3 or
// an unsupported G_PAT type or reserved bit. Without NP_ENABLE none of them is checked.
TEST(VmrunChecks, NestedPagingChecks) {
  auto v = legal();
  svm::write(v, f::g_pat, std::uint64_t{0x0007'0406'0007'0406});  // the power-on PAT
  svm::write(v, f::n_cr3, std::uint64_t{0x3000});
  svm::write(v, f::nested_control, std::uint64_t{1});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::vmrun_environment env{36};
  env.host_paging = false;
  EXPECT_EQ(svm::check_vmrun(v, env), E::np_host_paging_off);
  svm::write(v, f::n_cr3, std::uint64_t{1ull << 36});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::ncr3_mbz);
  svm::write(v, f::n_cr3, std::uint64_t{(1ull << 36) - 0x1000});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  env = svm::vmrun_environment{36};
  env.host_long_mode = false;  // legacy PAE host: nCR3 bits 63:32
  svm::write(v, f::n_cr3, std::uint64_t{1ull << 32});
  EXPECT_EQ(svm::check_vmrun(v, env), E::ncr3_mbz);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::write(v, f::n_cr3, std::uint64_t{0x3000});
  for (unsigned byte = 0; byte < 8; ++byte)
    for (std::uint64_t t : {2ull, 3ull, 8ull, 0x10ull, 0x80ull}) {
      const std::uint64_t pat = (0x0007'0406'0007'0406ull & ~(0xffull << (8 * byte))) | (t << (8 * byte));
      svm::write(v, f::g_pat, pat);
      EXPECT_EQ(svm::check_vmrun(v, {36}), E::g_pat_invalid) << byte << " " << t;
    }
  for (std::uint64_t t : {0ull, 1ull, 4ull, 5ull, 6ull, 7ull}) {
    const std::uint64_t pat = t * 0x0101'0101'0101'0101ull;
    svm::write(v, f::g_pat, pat);
    EXPECT_EQ(svm::check_vmrun(v, {36}), E::none) << t;
  }
  svm::write(v, f::g_pat, std::uint64_t{2});
  svm::write(v, f::n_cr3, std::uint64_t{1ull << 40});
  svm::write(v, f::nested_control, std::uint64_t{0});  // no nested paging: neither is checked
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
}

// vmrun_violations reports every illegal combination; check_vmrun the first in APM order.
TEST(VmrunChecks, AllViolations) {
  auto v = legal();
  EXPECT_EQ(svm::vmrun_violations(v, {36}), 0u);
  svm::write(v, f::guest_asid, std::uint32_t{0});
  svm::write(v, f::dr7, std::uint64_t{1ull << 33});
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::nw);
  EXPECT_EQ(svm::vmrun_violations(v, {36}),
            svm::bit(E::asid_zero) | svm::bit(E::dr7_high_bits) | svm::bit(E::nw_without_cd));
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::nw_without_cd);
  EXPECT_STREQ(svm::name(E::lme_pg_pae_cs_l_and_d), "lme_pg_pae_cs_l_and_d");
  EXPECT_STREQ(svm::name(E::g_pat_invalid), "g_pat_invalid");
}

}  // namespace
