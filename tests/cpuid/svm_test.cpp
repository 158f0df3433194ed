// SPDX-License-Identifier: MIT
// CPUID Fn8000_000A (AMD APM Vol. 3 Appendix E) decoded from values measured on Bochs 2.7's
// AMD models and on kvm_amd's nested SVM inside Bochs (the oracle: those emulators, not this
// code), and the guest leaf a hypervisor offers.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/cpuid/svm.hpp>

namespace cpuid = hvkit::cpuid;
using F = cpuid::svm_features;

namespace {

// Bochs zambezi / trinity_apu: revision 1, 64 ASIDs, EDX 0x44f; ryzen: 32768 ASIDs.
constexpr cpuid::regs bochs_zambezi{1, 64, 0, 0x44f};
constexpr cpuid::regs bochs_ryzen{1, 32768, 0, 0x44f};
// kvm_amd nested=1 npt=1 (QEMU -cpu host inside Bochs), and npt=0.
constexpr std::uint32_t kvm_nested_edx = 0x1000042b;
constexpr std::uint32_t kvm_nested_edx_no_npt = 0x1000042a;

TEST(CpuidSvm, BochsModels) {
  const auto z = cpuid::decode_svm(bochs_zambezi);
  EXPECT_EQ(z.revision, 1);
  EXPECT_EQ(z.nasid, 64u);
  const F expected = F::np | F::lbr_virt | F::svm_lock | F::nrip_save | F::flush_by_asid | F::pause_filter;
  EXPECT_EQ(z.features, expected);
  EXPECT_FALSE(z.features.any(F::decode_assists | F::vmcb_clean | F::tsc_rate_msr | F::avic | F::vgif | F::vmsave_virt));
  const auto r = cpuid::decode_svm(bochs_ryzen);
  EXPECT_EQ(r.nasid, 32768u);
  EXPECT_EQ(r.features, z.features);
  EXPECT_EQ(cpuid::encode_svm(z), bochs_zambezi);
}

TEST(CpuidSvm, KvmNested) {
  const auto k = cpuid::decode_svm({1, 8, 0, kvm_nested_edx});
  EXPECT_EQ(k.features, F::np | F::lbr_virt | F::nrip_save | F::vmcb_clean | F::pause_filter | F::nested_vmcb_addr_check);
  EXPECT_FALSE(k.features.any(F::svm_lock | F::flush_by_asid | F::decode_assists));
  const auto no_npt = cpuid::decode_svm({1, 8, 0, kvm_nested_edx_no_npt});
  EXPECT_FALSE(no_npt.features.test(F::np));
  EXPECT_EQ(no_npt.features, k.features.without(F::np));
}

TEST(CpuidSvm, GuestLeafOffersOnlyWhatTheHypervisorImplements) {
  // Nothing implemented: revision 1, the host's ASIDs, no feature.
  EXPECT_EQ(cpuid::svm_guest_leaf(bochs_zambezi, {}), (cpuid::regs{1, 64, 0, 0}));
  // KVM's choice on the Bochs host: NP, LbrVirt, NRIPS, PauseFilter passed through, VMCB clean
  // bits and the nested VMCB address check emulated -> the EDX kvm_amd showed its guest.
  cpuid::svm_nested_caps kvm_like{};
  kvm_like.passthrough = F::np | F::lbr_virt | F::nrip_save | F::pause_filter;
  kvm_like.emulated = F::vmcb_clean | F::nested_vmcb_addr_check;
  kvm_like.nasid = 8;
  EXPECT_EQ(cpuid::svm_guest_leaf(bochs_zambezi, kvm_like), (cpuid::regs{1, 8, 0, kvm_nested_edx}));
  kvm_like.passthrough = kvm_like.passthrough.without(F::np);  // npt=0
  EXPECT_EQ(cpuid::svm_guest_leaf(bochs_zambezi, kvm_like).edx, kvm_nested_edx_no_npt);
  // A passed-through feature the host lacks is not offered (decode assists on Bochs).
  cpuid::svm_nested_caps da{};
  da.passthrough = F::decode_assists;
  EXPECT_EQ(cpuid::svm_guest_leaf(bochs_ryzen, da).edx, 0u);
}

}  // namespace
