// SPDX-License-Identifier: MIT
// SVM side of issue 26: per-vCPU ASIDs across processors with generations (APM Vol. 2 15.16),
// clean bits after a move (15.15.3), IBPB per physical CPU, INIT under SVM (15.17, VM_CR).
#include <gtest/gtest.h>

#include <hvkit/svm/init_sipi.hpp>
#include <hvkit/svm/vcpu_asid.hpp>
#include <hvkit/svm/npt_invalidation.hpp>
#include <hvkit/svm/apic_msrpm.hpp>

namespace svm = hvkit::svm;

namespace {

struct counting_barrier {
  int* n;
  void operator()() const noexcept { ++*n; }
};
using cpu = svm::physical_cpu<counting_barrier>;

TEST(SvmVcpuAsid, KeepsAsidOnOneCpu) {
  int n = 0;
  cpu c(0, 4, true, svm::ibpb_policy::skip_same_guest, {&n});
  svm::vcpu_asid v;
  const auto first = c.prepare_vmrun(v, {0x1000, 1, 0});
  EXPECT_EQ(first.asid, 1u);
  EXPECT_TRUE(first.clear_clean_bits);  // never ran here
  EXPECT_EQ(first.control, svm::tlb_control::flush_all);  // first VMRUN on this processor
  const auto again = c.prepare_vmrun(v, {0x1000, 1, 0});
  EXPECT_EQ(again, (svm::vmrun_setup{1, svm::tlb_control::do_nothing, false}));
  EXPECT_EQ(n, 1);
}

TEST(SvmVcpuAsid, GenerationWrapFlushesEverything) {
  // NASID = 3: guest ASIDs 1 and 2. The third vCPU starts a new generation: TLB_CONTROL 01h.
  int n = 0;
  cpu c(0, 3, true, svm::ibpb_policy::skip_same_guest, {&n});
  svm::vcpu_asid a, b, d;
  EXPECT_EQ(c.prepare_vmrun(a, {0x1000, 1, 0}).asid, 1u);
  EXPECT_EQ(c.prepare_vmrun(b, {0x2000, 1, 1}).asid, 2u);
  const auto s = c.prepare_vmrun(d, {0x3000, 1, 2});
  EXPECT_EQ(s.asid, 1u);
  EXPECT_EQ(s.control, svm::tlb_control::flush_all);
  // a's ASID 1 is from the old generation: it gets a new one (2), no further flush.
  const auto sa = c.prepare_vmrun(a, {0x1000, 1, 0});
  EXPECT_EQ(sa.asid, 2u);
  EXPECT_EQ(sa.control, svm::tlb_control::do_nothing);
}

TEST(SvmVcpuAsid, MoveToAnotherCpu) {
  int n0 = 0, n1 = 0;
  cpu c0(0, 16, true, svm::ibpb_policy::skip_same_guest, {&n0});
  cpu c1(1, 16, true, svm::ibpb_policy::skip_same_guest, {&n1});
  svm::vcpu_asid x, y;
  EXPECT_EQ(c0.prepare_vmrun(x, {0x1000, 1, 0}).asid, 1u);
  EXPECT_EQ(c1.prepare_vmrun(y, {0x2000, 2, 0}).asid, 1u);  // ASID 1 on c1 is y's
  // x moves to c1: same generation number there, but its ASID 1 is y's on c1.
  const auto s = c1.prepare_vmrun(x, {0x1000, 1, 0});
  EXPECT_EQ(s.asid, 2u);
  EXPECT_TRUE(s.clear_clean_bits);
  EXPECT_EQ(x.cpu, 1u);
  // IBPB: c1 switched from guest 2 to guest 1.
  EXPECT_EQ(n1, 2);
  EXPECT_EQ(n0, 1);
}

TEST(SvmVcpuAsid, FlushRequest) {
  int n = 0;
  cpu c(0, 16, true, svm::ibpb_policy::skip_same_guest, {&n});
  svm::vcpu_asid v;
  (void)c.prepare_vmrun(v, {0x1000, 1, 0});
  v.flush_requested = true;
  EXPECT_EQ(c.prepare_vmrun(v, {0x1000, 1, 0}).control, svm::tlb_control::flush_asid);
  EXPECT_FALSE(v.flush_requested);
  EXPECT_EQ(c.prepare_vmrun(v, {0x1000, 1, 0}).control, svm::tlb_control::do_nothing);
  // Without FlushByAsid only the entire TLB can be flushed (TLB_CONTROL 01h).
  cpu old(1, 16, false, svm::ibpb_policy::skip_same_guest, {&n});
  svm::vcpu_asid w;
  (void)old.prepare_vmrun(w, {0x2000, 1, 1});
  w.flush_requested = true;
  EXPECT_EQ(old.prepare_vmrun(w, {0x2000, 1, 1}).control, svm::tlb_control::flush_all);
  // A fresh ASID needs no flush for the request.
  svm::vcpu_asid fresh;
  fresh.flush_requested = true;
  EXPECT_EQ(c.prepare_vmrun(fresh, {0x3000, 1, 2}).control, svm::tlb_control::do_nothing);
}

TEST(SvmInit, PhysicalInit) {
  using o = svm::physical_init_outcome;
  EXPECT_EQ(svm::on_physical_init(false, true, svm::vm_cr::r_init), o::held_pending);
  EXPECT_EQ(svm::on_physical_init(true, true, 0), o::vmexit_init);
  EXPECT_EQ(svm::on_physical_init(true, false, svm::vm_cr::r_init), o::redirected_to_sx);
  EXPECT_EQ(svm::on_physical_init(true, false, 0), o::processor_init);
  // VM_CR bit 1 is R_INIT; the INIT intercept is bit 3 of the vector at 00Ch (bit 99), exit 63h.
  EXPECT_EQ(svm::vm_cr::r_init, 2u);
  EXPECT_EQ(static_cast<unsigned>(svm::init_intercept), 99u);
  EXPECT_EQ(static_cast<std::uint64_t>(svm::vmexit_init), 0x63u);
  EXPECT_EQ(svm::sx_vector, 30u);
}

}  // namespace

// ------------------------------------------------------------ the NPT flush rule ---------

namespace {
using mc = hvkit::paging::mapping_change;

TEST(NptInvalidation, TlbControlForChange) {
  // APM 15.16: TLB_CONTROL 03h flushes this guest's ASID (FlushByAsid), 01h everything.
  EXPECT_EQ(svm::npt_change_flush(mc::made_present, true), svm::tlb_control::do_nothing);
  EXPECT_EQ(svm::npt_change_flush(mc::permission_increased, true), svm::tlb_control::do_nothing);
  EXPECT_EQ(svm::npt_change_flush(mc::permission_reduced, true), svm::tlb_control::flush_asid);
  EXPECT_EQ(svm::npt_change_flush(mc::made_not_present, false), svm::tlb_control::flush_all);
  EXPECT_EQ(static_cast<unsigned>(svm::tlb_control::flush_asid), 3u);
  EXPECT_EQ(static_cast<unsigned>(svm::tlb_control::flush_all), 1u);
}

TEST(NptInvalidation, EveryVcpuOnItsNextVmrun) {
  int n = 0;
  cpu c0(0, 16, true, svm::ibpb_policy::skip_same_guest, {&n});
  cpu c1(1, 16, true, svm::ibpb_policy::skip_same_guest, {&n});
  svm::vcpu_asid v0, v1;
  (void)c0.prepare_vmrun(v0, {0x1000, 1, 0});
  (void)c1.prepare_vmrun(v1, {0x2000, 1, 1});
  for (auto* v : {&v0, &v1}) svm::note_npt_change(*v, mc::frame_changed);
  EXPECT_EQ(c0.prepare_vmrun(v0, {0x1000, 1, 0}).control, svm::tlb_control::flush_asid);
  EXPECT_EQ(c1.prepare_vmrun(v1, {0x2000, 1, 1}).control, svm::tlb_control::flush_asid);
  svm::note_npt_change(v0, mc::permission_increased);
  EXPECT_EQ(c0.prepare_vmrun(v0, {0x1000, 1, 0}).control, svm::tlb_control::do_nothing);
}
}  // namespace

// ------------------------------------------------------------ x2APIC MSRPM policy ---------

namespace {
TEST(SvmApicMsrpm, EveryX2apicMsrIntercepted) {
  auto m = svm::msr_permission_map::intercept_none();
  svm::apply_x2apic_policy(m);
  for (std::uint32_t i = 0x800; i <= 0x8ff; ++i)
    for (auto a : {hvkit::x86::msr_access::read, hvkit::x86::msr_access::write}) EXPECT_TRUE(m.intercepts(i, a));
  EXPECT_FALSE(m.intercepts(0x7ff, hvkit::x86::msr_access::read));
  EXPECT_FALSE(m.intercepts(0x900, hvkit::x86::msr_access::write));
}
}  // namespace
