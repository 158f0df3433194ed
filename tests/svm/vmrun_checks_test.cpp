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

}  // namespace
