// SPDX-License-Identifier: MIT
// Guest-owned CR bits as SVM intercepts (AMD APM Vol. 2 15.9, 15.9.1), the SVM form of the
// passthrough-refresh contract, and IBPB across VMCB switches with hand-worked counts.
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/svm/cr_intercepts.hpp>
#include <hvkit/svm/ibpb.hpp>
#include <hvkit/vmx/cr_mask.hpp>

namespace svm = hvkit::svm;
namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
using svm::cr0_write_intercept;

namespace {

// The invariant, stated again from the APM text rather than from the header's helpers: with
// no CR0 write intercept the guest may write every CR0 bit; the role bits among them are PG
// and WP; with the selective intercept only TS and MP pass, and no role bit is among them.
static_assert((x86::cr0_mmu_role_bits & x86::cr0::defined) == (x86::cr0::pg | x86::cr0::wp));
static_assert((x86::cr0_mmu_role_bits & (x86::cr0::ts | x86::cr0::mp)).none());
static_assert(svm::cr0_passthrough_role_bits(cr0_write_intercept::none) == (x86::cr0::pg | x86::cr0::wp));

TEST(SvmCrIntercepts, WidestPolicyWithNpt) {
  constexpr auto c = svm::make_cr_intercepts<x86::max_guest_owned>({true});
  static_assert(c.cr0_write == cr0_write_intercept::none);
  EXPECT_FALSE(c.cr0_read);
  EXPECT_EQ(c.cr0_owned, x86::cr0::ts | x86::cr0::wp);
  EXPECT_EQ(c.cr0_writable, x86::cr0::defined);
  EXPECT_TRUE(c.cr4_write);
  EXPECT_TRUE(c.cr4_owned.none());
  svm::intercept_set s;
  s.set(svm::cr_write(0)).set(svm::intercept::cr0_selective_write).set(svm::cr_read(0));
  c.apply(s);
  EXPECT_FALSE(s.test(svm::cr_write(0)));
  EXPECT_FALSE(s.test(svm::intercept::cr0_selective_write));
  EXPECT_FALSE(s.test(svm::cr_read(0)));
  EXPECT_TRUE(s.test(svm::cr_write(4)));
  EXPECT_EQ(s.word(0), 1u << 20);  // only the CR4 write intercept remains in word 0
}

TEST(SvmCrIntercepts, ShadowPagingKeepsWpIntercepted) {
  // APM 15.9.1: the selective intercept exits on a CR0 write "that changes" a bit other than
  // TS or MP, against the real CR0; shadow paging forces the real CR0.WP to 1, so a guest
  // whose WP is 0 setting it again (with a TS change or not) would not exit. Every CR0 write
  // is intercepted, TS is not guest-owned on SVM under shadow paging.
  constexpr auto c = svm::make_cr_intercepts<x86::max_guest_owned>({false});
  EXPECT_EQ(c.cr0_write, cr0_write_intercept::all);
  EXPECT_TRUE(c.cr0_read);  // real CR0.PG/WP forced to 1
  EXPECT_TRUE(c.cr0_owned.none());
  EXPECT_TRUE(c.cr0_writable.none());
  svm::soft_vmcb v;
  c.apply(v);
  EXPECT_FALSE(svm::intercepted(v, svm::intercept::cr0_selective_write));
  EXPECT_TRUE(svm::intercepted(v, svm::cr_write(0)));
  EXPECT_TRUE(svm::intercepted(v, svm::cr_read(0)));
}

TEST(SvmCrIntercepts, NothingOwnedAndWpOnly) {
  constexpr auto none = svm::make_cr_intercepts<x86::guest_owned_set<x86::cr0{}, x86::cr4{}>>({true});
  EXPECT_EQ(none.cr0_write, cr0_write_intercept::all);
  EXPECT_TRUE(none.cr0_writable.none());
  constexpr auto wp = svm::make_cr_intercepts<x86::guest_owned_set<x86::cr0::wp, x86::cr4{}>>({true});
  EXPECT_EQ(wp.cr0_write, cr0_write_intercept::none);
  EXPECT_EQ(wp.cr0_owned, x86::cr0::wp);
  constexpr auto wp_shadow = svm::make_cr_intercepts<x86::guest_owned_set<x86::cr0::wp, x86::cr4{}>>({false});
  EXPECT_EQ(wp_shadow.cr0_write, cr0_write_intercept::all);
  // The same policy on VMX owns the same CR0 bits (the masks differ, the policy does not).
  constexpr auto vmx_wp = hvkit::vmx::make_guest_owned<x86::guest_owned_set<x86::cr0::wp, x86::cr4{}>>({true, {}});
  EXPECT_EQ(vmx_wp.cr0, wp.cr0_owned);
  constexpr auto vmx_max = hvkit::vmx::make_guest_owned<x86::max_guest_owned>({true, x86::cr4::defined});
  EXPECT_EQ(vmx_max.cr0, svm::make_cr_intercepts<x86::max_guest_owned>({true}).cr0_owned);
}

constexpr x86::cr0 long_cr0 = x86::cr0::pe | x86::cr0::pg | x86::cr0::wp | x86::cr0::et;
constexpr x86::cr4 long_cr4 = x86::cr4::pae;
constexpr x86::efer long_efer = x86::efer::lme | x86::efer::lma | x86::efer::nxe;

TEST(SvmCrIntercepts, SyncCr0RoleRefreshesWpAndRebuildsOnPg) {
  auto ctx = paging::mmu_context::make(long_cr0, long_cr4, long_efer, x86::gpa{0x1000});
  ASSERT_TRUE(ctx.role().cr0_wp());
  ASSERT_EQ(ctx.role().level(), 4u);
  const auto* table_wp1 = &ctx.permissions();
  // Same registers: nothing to do.
  EXPECT_EQ(svm::sync_cr0_role(ctx, long_cr0, long_cr4, long_efer, x86::gpa{0x1000}), svm::role_sync::unchanged);
  // The guest cleared WP without an exit.
  EXPECT_EQ(svm::sync_cr0_role(ctx, long_cr0.without(x86::cr0::wp), long_cr4, long_efer, x86::gpa{0x1000}),
            svm::role_sync::wp_refreshed);
  EXPECT_FALSE(ctx.role().cr0_wp());
  EXPECT_NE(&ctx.permissions(), table_wp1);
  EXPECT_EQ(ctx.role(), paging::make_cpu_role(long_cr0.without(x86::cr0::wp), long_cr4, long_efer));
  // The guest left long mode and turned paging off (PG=0, so LMA=0) without an exit.
  const x86::cr0 off = x86::cr0::pe | x86::cr0::et;
  EXPECT_EQ(svm::sync_cr0_role(ctx, off, long_cr4, x86::efer::lme, x86::gpa{0}), svm::role_sync::rebuilt);
  EXPECT_FALSE(ctx.role().paging());
  // And back on, in PAE mode: rebuilt with the new root.
  EXPECT_EQ(svm::sync_cr0_role(ctx, off | x86::cr0::pg, long_cr4, x86::efer{}, x86::gpa{0x2000}), svm::role_sync::rebuilt);
  EXPECT_EQ(ctx.role().level(), 3u);
  EXPECT_EQ(ctx.root().value(), 0x2000u);
}

struct counting_barrier {
  int* count;
  void operator()() const noexcept { ++*count; }
};
// vCPU A of VM 1: vmcb01 and vmcb02 (a nested guest); A' = VM 1 vCPU 1; B = VM 2 vCPU 0.
constexpr svm::vmcb_identity a01{0x1000, 1, 0}, a02{0x2000, 1, 0}, a1_01{0x3000, 1, 1}, b01{0x4000, 2, 0};

TEST(SvmIbpb, EveryPolicyOnOneVmrunSequence) {
  // VMRUNs of A01, A02, A01, A'01, B01, B01, A01. Counted by hand:
  // every change: first + A02 + A01 + A'01 + B01 + A01 = 6; skip_same_guest: first + B01 + A01 = 3;
  // other_vcpu_only: first + A'01 + B01 + A01 = 4; deferred_to_entry: the same 4.
  const svm::vmcb_identity seq[] = {a01, a02, a01, a1_01, b01, b01, a01};
  const std::pair<svm::ibpb_policy, int> cases[] = {{svm::ibpb_policy::every_vmcb_change, 6},
                                                    {svm::ibpb_policy::skip_same_guest, 3},
                                                    {svm::ibpb_policy::other_vcpu_only, 4},
                                                    {svm::ibpb_policy::deferred_to_entry, 4}};
  for (const auto& [p, expected] : cases) {
    int n = 0;
    svm::ibpb_tracker<counting_barrier> t(p, counting_barrier{&n});
    for (const auto& id : seq) t.on_vmrun(id);
    EXPECT_EQ(n, expected) << static_cast<int>(p);
  }
}

TEST(SvmIbpb, NestedRoundTripsCostNothingUnderSkipSameGuest) {
  int n = 0;
  svm::ibpb_tracker<counting_barrier> t(svm::ibpb_policy::skip_same_guest, counting_barrier{&n});
  t.on_vmrun(a01);
  for (int i = 0; i < 100; ++i) {  // L2 vmmcall round trips: vmcb02 run, exit to L1 on vmcb01
    t.on_vmrun(a02);
    t.on_vmrun(a01);
  }
  EXPECT_EQ(n, 1);
  t.on_vmrun(b01);
  EXPECT_EQ(n, 2);
}

TEST(SvmIbpb, DeferredCoalescesSwitchesBeforeVmrun) {
  int n = 0;
  svm::ibpb_tracker<counting_barrier> t(svm::ibpb_policy::deferred_to_entry, counting_barrier{&n});
  t.on_vmrun(a01);
  EXPECT_EQ(n, 1);
  t.on_vmcb_switch(b01);  // scheduled B, then changed our mind before VMRUN
  t.on_vmcb_switch(a01);
  t.on_vmrun();
  EXPECT_EQ(n, 1);
}

}  // namespace
