// SPDX-License-Identifier: MIT
// IBPB policies with a counting barrier (docs/background.md §2): the scenarios of the issue and
// every policy on one switch sequence, with expected counts worked out by hand.
#include <gtest/gtest.h>

#include <hvkit/vmx/ibpb.hpp>

namespace vmx = hvkit::vmx;

namespace {
struct counting_barrier {
  int* count;
  void operator()() const noexcept { ++*count; }
};
// VM 1 vCPU 0 (vCPU "A"): vmcs01 and vmcs02; VM 1 vCPU 1 ("A'", same guest, another vCPU);
// VM 2 vCPU 0 ("B").
constexpr vmx::vmcs_identity a01{0x1000, 1, 0}, a02{0x2000, 1, 0}, a1_01{0x3000, 1, 1}, b01{0x4000, 2, 0};
}  // namespace

TEST(vmx_ibpb, issue_scenarios_skip_same_guest) {
  int n = 0;
  vmx::ibpb_tracker<counting_barrier> t(vmx::ibpb_policy::skip_same_guest, counting_barrier{&n});
  t.on_vmcs_load(a01);
  EXPECT_EQ(n, 1);  // first load on this CPU: previous occupant unknown
  // vCPU A: vmcs01 -> vmcs02 -> vmcs01: 0 barriers.
  t.on_vmcs_load(a02);
  t.on_vmcs_load(a01);
  EXPECT_EQ(n - 1, 0);
  // A -> B: 1 barrier.
  t.on_vmcs_load(b01);
  EXPECT_EQ(n - 1, 1);
}

TEST(vmx_ibpb, every_policy_on_one_sequence) {
  // Sequence: A01, A02, A01, A'01, B01, B01, A01 (with a VM entry after each load).
  const vmx::vmcs_identity seq[] = {a01, a02, a01, a1_01, b01, b01, a01};
  struct expect {
    vmx::ibpb_policy p;
    int barriers;
  };
  // every_vmcs_change: 1 (first) + A02 + A01 + A'01 + B01 + A01 = 6 (B01->B01 is no change).
  // skip_same_guest: 1 + B01 + A01 = 3.  other_vcpu_only: 1 + A'01 + B01 + A01 = 4.
  // deferred_to_entry: barriers at entries whose vCPU differs from the last entered: same as other_vcpu_only = 4.
  const expect cases[] = {{vmx::ibpb_policy::every_vmcs_change, 6},
                          {vmx::ibpb_policy::skip_same_guest, 3},
                          {vmx::ibpb_policy::other_vcpu_only, 4},
                          {vmx::ibpb_policy::deferred_to_entry, 4}};
  for (const auto& c : cases) {
    int n = 0;
    vmx::ibpb_tracker<counting_barrier> t(c.p, counting_barrier{&n});
    for (const auto& id : seq) {
      t.on_vmcs_load(id);
      t.on_vm_entry();
    }
    EXPECT_EQ(n, c.barriers) << static_cast<int>(c.p);
  }
}

TEST(vmx_ibpb, deferred_coalesces_switches_without_entry) {
  int n = 0;
  vmx::ibpb_tracker<counting_barrier> t(vmx::ibpb_policy::deferred_to_entry, counting_barrier{&n});
  t.on_vmcs_load(a01);
  EXPECT_EQ(n, 0);  // nothing until the entry
  t.on_vm_entry();
  EXPECT_EQ(n, 1);
  // Load B (e.g. to sync its state), then back to A before any entry: no barrier.
  t.on_vmcs_load(b01);
  t.on_vmcs_load(a02);
  t.on_vm_entry();
  EXPECT_EQ(n, 1);
  t.on_vmcs_load(b01);
  t.on_vm_entry();
  EXPECT_EQ(n, 2);
  // Other policies ignore entries.
  int m = 0;
  vmx::ibpb_tracker<counting_barrier> e(vmx::ibpb_policy::every_vmcs_change, counting_barrier{&m});
  e.on_vm_entry();
  EXPECT_EQ(m, 0);
}
