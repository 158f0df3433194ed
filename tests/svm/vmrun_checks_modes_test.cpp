// SPDX-License-Identifier: MIT
// VMRUN's consistency checks (AMD APM Vol. 2, 15.5.1 "Basic Operation", the list of illegal
// guest states) on the guests vmrun_checks_test.cpp does not build: legacy-mode (EFER.LME = 0)
// guests, paging off, CR0.CD with NW. Each row names the APM's condition; a state that does
// not meet it passes that check:
//   "CR0.CD is zero and CR0.NW is set."
//   "EFER.LME and CR0.PG are both set and CR4.PAE is zero."
//   "EFER.LME and CR0.PG are both non-zero and CR0.PE is zero."
//   "EFER.LME, CR0.PG, CR4.PAE, CS.L, and CS.D are all non-zero."
//   "EVENTINJ field is illegal" (#BR and #OF cannot be injected in 64-bit mode: APM 15.20).
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/svm/vmrun_checks.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace f = hvkit::svm::fields;
using E = svm::vmrun_error;

namespace {

// A legal 32-bit protected-mode guest with PAE paging (EFER.LME = 0).
svm::soft_vmcb legacy() {
  svm::soft_vmcb v;
  svm::write(v, f::efer, x86::efer::svme);
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::et);
  svm::write(v, f::cr4, x86::cr4::pae);
  svm::write(v, f::cr3, std::uint64_t{0x1000});
  svm::write(v, f::cs_attrib, std::uint16_t{0x0c9b});  // G=1, D=1, L=0
  svm::write(v, f::dr6, std::uint64_t{0xffff0ff0});
  svm::write(v, f::dr7, std::uint64_t{0x400});
  svm::set_intercept(v, svm::intercept::vmrun);
  svm::write(v, f::msrpm_base_pa, std::uint64_t{0x10000});
  svm::write(v, f::iopm_base_pa, std::uint64_t{0x20000});
  svm::write(v, f::guest_asid, std::uint32_t{1});
  return v;
}

TEST(VmrunChecksModes, LegacyGuests) {
  auto v = legacy();
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  // No long mode on the processor: a guest that does not use it still runs.
  EXPECT_EQ(svm::check_vmrun(v, {36, false}), E::none);
  // CR4.PAE = 0 with paging: 32-bit paging, legal without EFER.LME.
  svm::write(v, f::cr4, x86::cr4{});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  // CS.L and CS.D both set: the rule needs EFER.LME, CR0.PG and CR4.PAE too.
  svm::write(v, f::cs_attrib, std::uint16_t{0x0e9b});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::write(v, f::cr4, x86::cr4::pae);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  // #BR (vector 5) and #OF (4) injected into a guest outside 64-bit mode: legal.
  svm::write(v, f::event_injection, std::uint64_t{0x8000'0305});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::write(v, f::event_injection, std::uint64_t{0x8000'0304});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
}

TEST(VmrunChecksModes, PagingOffAndCaching) {
  // Real mode: PE = 0, PG = 0, even with EFER.LME = 1 (long mode enabled, not active).
  auto v = legacy();
  svm::write(v, f::cr0, x86::cr0::et);
  svm::write(v, f::cr4, x86::cr4{});
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::write(v, f::efer, x86::efer::svme | x86::efer::lme);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  // ... but not on a processor without long mode.
  EXPECT_EQ(svm::check_vmrun(v, {36, false}), E::long_mode_unsupported);
  // EFER.LME with paging on and PE clear: illegal.
  svm::write(v, f::cr0, x86::cr0::pg | x86::cr0::et);
  svm::write(v, f::cr4, x86::cr4::pae);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::lme_pg_without_pe);
  // CR0.CD = 1 with NW = 1 (caching off, no write-through): legal; CD = 0 with NW = 1 is not.
  v = legacy();
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::et | x86::cr0::cd | x86::cr0::nw);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::none);
  svm::write(v, f::cr0, x86::cr0::pe | x86::cr0::pg | x86::cr0::et | x86::cr0::nw);
  EXPECT_EQ(svm::check_vmrun(v, {36}), E::nw_without_cd);
}

TEST(VmrunChecksModes, ErrorNames) {
  EXPECT_STREQ(svm::name(E::none), "none");
  EXPECT_STREQ(svm::name(E::lme_pg_without_pe), "lme_pg_without_pe");
  EXPECT_STREQ(svm::name(E::g_pat_invalid), "g_pat_invalid");
  EXPECT_STREQ(svm::name(static_cast<E>(svm::vmrun_error_count)), "?");
}

}  // namespace
