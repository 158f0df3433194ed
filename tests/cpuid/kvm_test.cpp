// SPDX-License-Identifier: MIT
// KVM paravirtual leaves (Linux Documentation/virt/kvm/x86/cpuid.rst), and stable features
// versus migration-changeable hints (docs/background.md §3).
#include <gtest/gtest.h>

#include <hvkit/cpuid/kvm.hpp>
#include <hvkit/cpuid/policy.hpp>

#include <cstring>

#include "policy_helpers.hpp"
#include "runtime.hpp"

namespace cpuid = hvkit::cpuid;
namespace kvm = cpuid::kvm;
using cpuid::feature_set;
using cpuid::regs;
using hvkit::test::rt;
using namespace helpers;

TEST(cpuid_kvm, abi_bits) {
  HVKIT_BOTH(kvm::features::clocksource.mask() == 0x1 && kvm::features::nop_io_delay.mask() == 0x2);
  HVKIT_BOTH(kvm::features::mmu_op.mask() == 0x4 && kvm::features::clocksource2.mask() == 0x8);
  HVKIT_BOTH(kvm::features::async_pf.mask() == 0x10 && kvm::features::steal_time.mask() == 0x20);
  HVKIT_BOTH(kvm::features::pv_eoi.mask() == 0x40 && kvm::features::pv_unhalt.mask() == 0x80);
  HVKIT_BOTH(kvm::features::pv_tlb_flush.mask() == 0x200 && kvm::features::async_pf_vmexit.mask() == 0x400);
  HVKIT_BOTH(kvm::features::pv_send_ipi.mask() == 0x800 && kvm::features::poll_control.mask() == 0x1000);
  HVKIT_BOTH(kvm::features::pv_sched_yield.mask() == 0x2000 && kvm::features::async_pf_int.mask() == 0x4000);
  HVKIT_BOTH(kvm::features::msi_ext_dest_id.mask() == 0x8000 && kvm::features::hc_map_gpa_range.mask() == 0x10000);
  HVKIT_BOTH(kvm::features::migration_control.mask() == 0x20000);
  HVKIT_BOTH(kvm::features::clocksource_stable_bit.mask() == 0x1000000);
  HVKIT_BOTH(kvm::hints::realtime.mask() == 0x1 && kvm::hints::realtime.w == cpuid::word::kvm_hints);
  HVKIT_BOTH(kvm::all_features.get(cpuid::word::kvm_features) == 0x0103feff);
  HVKIT_BOTH(kvm::is_valid_base(0x40000000) && kvm::is_valid_base(0x40000100) && !kvm::is_valid_base(0x40000010));
  HVKIT_BOTH(!kvm::is_valid_base(0x3fffff00) && !kvm::is_valid_base(0x40010000));
}

TEST(cpuid_kvm, signature_bytes) {
  constexpr auto p = build(amd_host, everything(), config(1, 1));
  const regs r = p.answer(0x40000000, 0, {});
  char s[12];
  std::memcpy(s + 0, &r.ebx, 4);
  std::memcpy(s + 4, &r.ecx, 4);
  std::memcpy(s + 8, &r.edx, 4);
  EXPECT_EQ(std::memcmp(s, "KVMKVMKVM\0\0\0", 12), 0);
  EXPECT_EQ(r.eax, 0x40000001u);
}

namespace {
// The same VM configuration on a host with APIC IPI acceleration (APICv/AVIC) and on one
// without: the hint differs, the features do not.
constexpr cpuid::policy on_host(bool accelerated) {
  auto c = config(1, 2);
  c.hints.set(kvm::hints::hvkit_apic_accelerated_ipi, accelerated);
  return build(amd_host, everything(), c);
}
constexpr auto avic = on_host(true);
constexpr auto plain = on_host(false);
}  // namespace

TEST(cpuid_kvm, hints_are_not_features) {
  HVKIT_BOTH(avic.features() == plain.features());
  HVKIT_BOTH(avic.has(kvm::features::pv_send_ipi) && plain.has(kvm::features::pv_send_ipi));
  HVKIT_BOTH(!avic.has(kvm::hints::hvkit_apic_accelerated_ipi));  // hints never enter features()
  HVKIT_BOTH(avic.hints() == 0x2 && plain.hints() == 0x0);
  HVKIT_BOTH(avic.answer(0x40000001, 0, {}) == (regs{0x848, 0, 0, 0x2}));
  HVKIT_BOTH(plain.answer(0x40000001, 0, {}) == (regs{0x848, 0, 0, 0x0}));
  // Every other leaf is identical.
  constexpr bool same = [] {
    if (avic.leaves().size() != plain.leaves().size()) return false;
    for (std::size_t i = 0; i < avic.leaves().size(); ++i) {
      const auto& a = avic.leaves()[i];
      const auto& b = plain.leaves()[i];
      if (a.leaf != b.leaf || a.subleaf != b.subleaf) return false;
      if (a.leaf != 0x40000001 && !(a.value == b.value)) return false;
    }
    return true;
  }();
  HVKIT_BOTH(same);
}

TEST(cpuid_kvm, migration_changes_only_hints) {
  constexpr auto migrated = [] {
    auto p = avic;
    (void)p.set_hints(feature_set{kvm::hints::realtime});
    return p;
  }();
  HVKIT_BOTH(migrated.features() == avic.features() && migrated.hints() == 0x1);
  HVKIT_BOTH(migrated.answer(0x40000001, 0, {}) == (regs{0x848, 0, 0, 0x1}));
  // set_hints ignores every word but the hints: features cannot be smuggled in.
  constexpr auto smuggle = [] {
    auto p = plain;
    (void)p.set_hints(feature_set{kvm::features::steal_time, cpuid::feat::vmx});
    return p;
  }();
  HVKIT_BOTH(smuggle.features() == plain.features() && smuggle.hints() == 0);
  // Hints configured through features, or host KVM words, never leak into the hints word.
  constexpr auto leak = [] {
    auto hv = everything();
    hv.emulated.set(kvm::hints::realtime);
    return build(amd_host, hv, config(1, 1));
  }();
  HVKIT_BOTH(leak.hints() == 0);
  // Without KVM leaves there is nothing to hint.
  constexpr auto none = [] {
    auto c = config(1, 1);
    c.announce_hypervisor = false;
    auto p = build(amd_host, everything(), c);
    return p.set_hints(feature_set{kvm::hints::realtime}).error();
  }();
  HVKIT_BOTH(none == cpuid::policy_error::no_kvm_leaves);
}

TEST(cpuid_kvm, host_kvm_words_are_not_passed_through) {
  // The recorded host is a KVM guest with features 0x01007efb; the policy offers only what
  // this hypervisor emulates (0x848).
  constexpr auto p = build(amd_host, everything(), config(1, 1));
  HVKIT_BOTH(amd_host.get(0x40000001).eax == 0x01007efb && p.leaves().get(0x40000001).eax == 0x848);
  constexpr auto denied = [] {
    auto c = config(1, 1);
    c.deny.set(kvm::features::pv_send_ipi);
    return build(amd_host, everything(), c);
  }();
  HVKIT_BOTH(denied.leaves().get(0x40000001).eax == 0x48);
  EXPECT_EQ(rt(denied.leaves().get(0x40000001).eax), 0x48u);
}
