// SPDX-License-Identifier: MIT
// policy::set_leaf and policy::set_hints at run time (the constexpr tests of kvm_test.cpp run
// them only in the compiler): which leaves a hypervisor may add, and the KVM hints word.
//   SDM Vol. 2A, CPUID: "No existing or future CPU will return processor identification or
//   feature information if the initial EAX value is in the range 40000000H to 4FFFFFFFH."
//   Linux Documentation/virt/kvm/x86/cpuid.rst: KVM's leaves sit at 0x40000000 "or at an
//   offset of 0x100" (0x40000100, ...) when another hypervisor's leaves come first (Hyper-V
//   emulation); "function: KVM_CPUID_FEATURES (0x40000001) ... returns: edx = an OR'ed group
//   of (1 << flag)" with "KVM_HINTS_REALTIME 0".
#include <gtest/gtest.h>

#include <hvkit/cpuid/kvm.hpp>
#include <hvkit/cpuid/policy.hpp>

#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace kvm = cpuid::kvm;
using cpuid::feature_set;
using cpuid::regs;
using hvkit::test::rt;
using namespace helpers;

namespace {

cpuid::policy build_at(std::uint32_t kvm_base, bool announce = true) {
  auto c = config(1, 1);
  c.kvm_base = rt(kvm_base);
  c.announce_hypervisor = announce;
  auto p = cpuid::build_policy(amd_host, everything(), c);
  EXPECT_TRUE(p.has_value());
  return p.value();
}

// The error of `r`, or none for a success (reading error() of a success is a contract violation).
template <class R>
cpuid::policy_error error_of(const R& r) {
  return r ? cpuid::policy_error::none : r.error();
}

TEST(cpuid_hypervisor_leaves, set_leaf_below_a_shifted_kvm_block) {
  auto p = build_at(0x40000100);
  ASSERT_TRUE(p.has_kvm_leaves());
  // A Hyper-V signature leaf at 0x40000000 ("Microsoft Hv"), below the KVM block.
  const regs hv{0x40000105, 0x7263694d, 0x666f736f, 0x76482074};
  ASSERT_TRUE(p.set_leaf(rt(0x40000000u), 0, hv).has_value());
  const regs* r = p.find(rt(0x40000000u), 0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(*r, hv);
  // KVM's own block 0x40000100-0x400001FF stays the policy's.
  for (std::uint32_t leaf : {0x40000100u, 0x40000101u, 0x400001ffu})
    EXPECT_EQ(error_of(p.set_leaf(rt(leaf), 0, hv)), cpuid::policy_error::not_hypervisor_leaf) << std::hex << leaf;
  // Leaves outside 40000000H-4FFFFFFFH are the processor's (basic, extended): refused.
  for (std::uint32_t leaf : {0x0u, 0x1u, 0xdu, 0x3fffffffu, 0x80000000u, 0x80000001u, 0xc0000000u})
    EXPECT_EQ(error_of(p.set_leaf(rt(leaf), 0, hv)), cpuid::policy_error::not_hypervisor_leaf) << std::hex << leaf;
  // Just above the KVM block is free again.
  EXPECT_TRUE(p.set_leaf(rt(0x40000200u), 0, hv).has_value());
  // Without KVM leaves the whole range is free, 0x40000000 included.
  auto bare = build_at(0x40000000, false);
  ASSERT_FALSE(bare.has_kvm_leaves());
  EXPECT_TRUE(bare.set_leaf(rt(0x40000001u), 0, hv).has_value());
  // A replaced leaf keeps one entry.
  const regs hv2{1, 2, 3, 4};
  ASSERT_TRUE(p.set_leaf(rt(0x40000000u), 0, hv2).has_value());
  EXPECT_EQ(*p.find(0x40000000, 0), hv2);
}

TEST(cpuid_hypervisor_leaves, set_leaf_until_the_table_is_full) {
  auto p = build_at(0x40000100);
  const std::size_t before = p.leaves().size();
  std::uint32_t added = 0;
  cpuid::policy_error last = cpuid::policy_error::none;
  for (std::uint32_t k = 0; k < 0x100; ++k) {
    auto r = p.set_leaf(rt(0x40000000u + k), 0, regs{k, k, k, k});
    if (!r) {
      last = r.error();
      break;
    }
    ++added;
  }
  EXPECT_EQ(last, cpuid::policy_error::table_full);
  EXPECT_EQ(before + added, cpuid::policy_capacity);
  // Every leaf added before the table filled is answered.
  for (std::uint32_t k = 0; k < added; ++k) {
    const regs* r = p.find(rt(0x40000000u + k), 0);
    ASSERT_NE(r, nullptr) << k;
    EXPECT_EQ(r->eax, k);
  }
}

TEST(cpuid_hypervisor_leaves, set_hints_writes_edx_of_kvm_features) {
  for (std::uint32_t base : {0x40000000u, 0x40000100u}) {
    auto p = build_at(base);
    EXPECT_EQ(p.hints(), 0u);
    ASSERT_TRUE(p.set_hints(feature_set{kvm::hints::realtime}).has_value());
    // KVM_HINTS_REALTIME is bit 0 of EDX of KVM_CPUID_FEATURES (base + 1).
    EXPECT_EQ(p.hints(), 0x1u);
    EXPECT_EQ(p.find(rt(base + 1), 0)->edx, 0x1u);
    ASSERT_TRUE(p.set_hints(feature_set{}).has_value());
    EXPECT_EQ(p.find(rt(base + 1), 0)->edx, 0x0u);
  }
  auto bare = build_at(0x40000000, false);
  EXPECT_EQ(bare.hints(), 0u);
  EXPECT_EQ(error_of(bare.set_hints(feature_set{kvm::hints::realtime})), cpuid::policy_error::no_kvm_leaves);
}

}  // namespace
