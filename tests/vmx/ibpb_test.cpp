// SPDX-License-Identifier: MIT
// IBPB policies with a counting barrier (docs/background.md §2): the scenarios of the issue and
// every policy on one switch sequence, with expected counts worked out by hand.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

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

// The compile-time policy (x86::static_ibpb_tracker) against the same hand-worked counts as
// every_policy_on_one_sequence, and against the run-time tracker on a long random sequence
// of loads and entries (every policy; the run-time tracker's counts are checked above).
namespace {
template <hvkit::x86::ibpb_policy P>
int static_count(const vmx::vmcs_identity* seq, std::size_t n, bool entries) {
  int c = 0;
  hvkit::x86::static_ibpb_tracker<P, counting_barrier> t(counting_barrier{&c});
  for (std::size_t i = 0; i < n; ++i) {
    t.on_switch({seq[i].vmcs, seq[i].vm, seq[i].vcpu});
    if (entries) t.on_vm_entry();
  }
  return c;
}
}  // namespace

TEST(vmx_ibpb, static_policy_on_one_sequence) {
  using P = hvkit::x86::ibpb_policy;
  const vmx::vmcs_identity seq[] = {a01, a02, a01, a1_01, b01, b01, a01};
  EXPECT_EQ(static_count<P::every_switch>(seq, 7, true), 6);
  EXPECT_EQ(static_count<P::skip_same_guest>(seq, 7, true), 3);
  EXPECT_EQ(static_count<P::other_vcpu_only>(seq, 7, true), 4);
  EXPECT_EQ(static_count<P::deferred_to_entry>(seq, 7, true), 4);
  static_assert(hvkit::x86::static_ibpb_tracker<P::skip_same_guest, counting_barrier>::policy() == P::skip_same_guest);
}

TEST(vmx_ibpb, static_policy_matches_run_time_policy) {
  using P = hvkit::x86::ibpb_policy;
  const vmx::vmcs_identity blocks[] = {a01, a02, a1_01, b01, {0x5000, 2, 1}};
  std::uint32_t x = 12345;
  std::vector<std::pair<vmx::vmcs_identity, bool>> seq;  // a load, and whether an entry follows
  for (int i = 0; i < 4000; ++i) {
    x = x * 1103515245u + 12345u;
    seq.push_back({blocks[(x >> 16) % 5], ((x >> 8) & 3) != 0});
  }
  auto run = [&](auto&& t) {
    for (const auto& [id, entry] : seq) {
      t.on_switch({id.vmcs, id.vm, id.vcpu});
      if (entry) t.on_vm_entry();
    }
  };
  auto check = [&]<P Policy>() {
    int a = 0, b = 0;
    hvkit::x86::ibpb_tracker<counting_barrier> rt(Policy, counting_barrier{&a});
    hvkit::x86::static_ibpb_tracker<Policy, counting_barrier> st(counting_barrier{&b});
    run(rt);
    run(st);
    EXPECT_EQ(a, b) << static_cast<int>(Policy);
    EXPECT_GT(a, 1);
  };
  check.template operator()<P::every_switch>();
  check.template operator()<P::skip_same_guest>();
  check.template operator()<P::other_vcpu_only>();
  check.template operator()<P::deferred_to_entry>();
}
