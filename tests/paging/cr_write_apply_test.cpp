// SPDX-License-Identifier: MIT
// paging::apply_mmu_actions (the vendor-neutral executor of a CR write's MMU actions) and
// its SVM adapter: expected values typed from SDM 4.4.1 ("If PAE paging would be in use
// following an execution of MOV to CR0 or MOV to CR4 ... the PDPTEs are loaded ...; if a
// PDPTE is present and a reserved bit is set, a #GP(0) occurs"), SDM 4.10.4.1 (the flushes
// of MOV to CR0/CR4) and AMD APM Vol. 2 15.16 ("01h: flush entire TLB ... 03h: flush this
// guest's TLB entries"; 03h needs FlushByAsid, CPUID Fn8000_000A EDX[6]).
#include <array>
#include <cstdint>

#include <gtest/gtest.h>

#include <hvkit/paging/cr_write_apply.hpp>
#include <hvkit/svm/cr_write_apply.hpp>

namespace {

namespace x86 = hvkit::x86;
namespace pg = hvkit::paging;
namespace svm = hvkit::svm;
using A = pg::mmu_actions;

constexpr std::uint64_t PE = 1, WP = 1ull << 16, PG = 1ull << 31;
constexpr std::uint64_t PAE = 1ull << 5, PGE = 1ull << 7, SMEP = 1ull << 20;
constexpr std::uint64_t LME = 1ull << 8;

struct image {
  alignas(8) std::array<std::uint8_t, 0x4000> ram{};
  void put(std::uint64_t a, std::uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) ram[a + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  pg::flat_memory mem() { return pg::flat_memory{ram.data(), ram.size(), x86::gpa{0}}; }
};

// A store that records what it got, and can refuse.
struct recording_store {
  struct error {
    int code = 0;
  };
  int calls = 0;
  std::array<std::uint64_t, 4> got{};
  bool refuse = false;
  hvkit::result<void, error> operator()(const pg::pdpte_snapshot& p) {
    ++calls;
    if (refuse) return hvkit::unexpected(error{7});
    got = p.entries;
    return {};
  }
};

TEST(apply_mmu_actions, flush_scope_golden) {
  // SDM 4.10.4.1: "If CR4.PGE is changed, all TLB entries ... including global" -> all;
  // "If CR4.SMEP is changed from 0 to 1 ... current PCID" -> current; both -> all.
  EXPECT_EQ(pg::tlb_flush_scope_for(A{}), pg::tlb_flush_scope::none);
  EXPECT_EQ(pg::tlb_flush_scope_for(A::refresh_permissions | A::reset_mmu | A::reload_pdptrs), pg::tlb_flush_scope::none);
  EXPECT_EQ(pg::tlb_flush_scope_for(A::flush_tlb_current), pg::tlb_flush_scope::current);
  EXPECT_EQ(pg::tlb_flush_scope_for(A::flush_tlb_all), pg::tlb_flush_scope::all);
  EXPECT_EQ(pg::tlb_flush_scope_for(A::flush_tlb_all | A::flush_tlb_current), pg::tlb_flush_scope::all);
  const pg::cr_state b{x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{0x500}};
  pg::cr_state pge = b, smep = b;
  pge.cr4 = x86::cr4{PAE | PGE};
  smep.cr4 = x86::cr4{PAE | SMEP};
  EXPECT_EQ(pg::tlb_flush_scope_for(pg::cr_write_actions(b, pge, pg::paging_kind::two_dimensional)), pg::tlb_flush_scope::all);
  EXPECT_EQ(pg::tlb_flush_scope_for(pg::cr_write_actions(b, smep, pg::paging_kind::two_dimensional)),
            pg::tlb_flush_scope::current);
}

TEST(apply_mmu_actions, pae_pdptes_loaded_checked_and_stored) {
  image m;
  // PDPT at 0x1020 (CR3 bits 31:5): entries 0 and 2 present.
  m.put(0x1020, 0x2001);
  m.put(0x1030, 0x3001);
  // Paging off -> PAE paging (CR0.PG 0->1 with CR4.PAE = 1, EFER.LME = 0): PDPTEs loaded
  // (SDM 4.4.1), the paging mode changes: reset (root from CR3 bits 31:5).
  const pg::cr_state before{x86::cr0{PE}, x86::cr4{PAE}, x86::efer{0}};
  const pg::cr_state after{x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{0}};
  const auto actions = pg::cr_write_actions(before, after, pg::paging_kind::two_dimensional);
  ASSERT_TRUE(actions.test(A::reload_pdptrs));
  ASSERT_TRUE(actions.test(A::reset_mmu));
  pg::mmu_context mmu;
  recording_store st;
  const auto mem = m.mem();
  auto r = pg::apply_mmu_actions(mmu, actions, after, x86::cr3{0x1020}, mem, 36, st);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->pdptes_loaded);
  EXPECT_TRUE(r->mmu_rebuilt);
  EXPECT_EQ(st.calls, 1);
  EXPECT_EQ(st.got[0], 0x2001u);
  EXPECT_EQ(st.got[1], 0u);
  EXPECT_EQ(st.got[2], 0x3001u);
  EXPECT_EQ(r->pdptes.entries[2], 0x3001u);
  EXPECT_EQ(mmu.role().mode(), x86::paging_mode::pae);
  EXPECT_EQ(mmu.root().value(), 0x1020u);
  EXPECT_EQ(r->flush, pg::tlb_flush_scope::none);  // PG 0->1 is not among 4.10.4.1's flushes

  // A present PDPTE with a reserved bit (bit 1 of a PAE PDPTE is reserved): #GP(0), the
  // store not called, the MMU untouched.
  m.put(0x1028, 0x4003);
  pg::mmu_context mmu2 = pg::mmu_context::make(before.cr0, before.cr4, before.efer, x86::gpa{0x9000});
  recording_store st2;
  auto bad = pg::apply_mmu_actions(mmu2, actions, after, x86::cr3{0x1020}, mem, 36, st2);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, pg::mmu_apply_error<recording_store::error>::kind_type::pdpte);
  EXPECT_EQ(bad.error().pdpte.index, 1u);
  EXPECT_EQ(bad.error().pdpte.vector, x86::vector::gp);
  EXPECT_EQ(st2.calls, 0);
  EXPECT_EQ(mmu2.role().mode(), x86::paging_mode::none);
  EXPECT_EQ(mmu2.root().value(), 0x9000u);

  // The store refuses: its error, the MMU untouched.
  m.put(0x1028, 0);
  recording_store st3;
  st3.refuse = true;
  pg::mmu_context mmu3 = pg::mmu_context::make(before.cr0, before.cr4, before.efer, x86::gpa{0x9000});
  auto refused = pg::apply_mmu_actions(mmu3, actions, after, x86::cr3{0x1020}, mem, 36, st3);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, pg::mmu_apply_error<recording_store::error>::kind_type::store);
  EXPECT_EQ(refused.error().store.code, 7);
  EXPECT_EQ(mmu3.root().value(), 0x9000u);
}

TEST(apply_mmu_actions, wp_toggle_refreshes_keeps_root) {
  // docs/background.md: a CR0.WP toggle under EPT/NPT refreshes the permissions only.
  const pg::cr_state b{x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{0x500}};
  pg::cr_state wp = b;
  wp.cr0 = x86::cr0{PE | PG | WP};
  const auto act = pg::cr_write_actions(b, wp, pg::paging_kind::two_dimensional);
  ASSERT_EQ(act, A::refresh_permissions);
  pg::mmu_context mmu = pg::mmu_context::make(b.cr0, b.cr4, b.efer, x86::gpa{0x5000});
  image m;
  const auto mem = m.mem();
  auto r = pg::apply_mmu_actions(mmu, act, wp, x86::cr3{0x7000}, mem, 36);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->mmu_rebuilt);
  EXPECT_FALSE(r->pdptes_loaded);
  EXPECT_EQ(mmu.root().value(), 0x5000u);  // not reset: the old root stays
  EXPECT_TRUE(mmu.role().cr0_wp());
  EXPECT_EQ(mmu.role().mode(), x86::paging_mode::four_level);  // EFER.LMA from LME and PG
}

TEST(svm_cr_write_apply, tlb_control_verdicts) {
  // APM 15.16: 03h flushes this guest's ASID (needs FlushByAsid), 01h the entire TLB.
  EXPECT_EQ(svm::tlb_control_for(A::flush_tlb_all, true), svm::tlb_control::flush_asid);
  EXPECT_EQ(svm::tlb_control_for(A::flush_tlb_current, true), svm::tlb_control::flush_asid);
  EXPECT_EQ(svm::tlb_control_for(A::flush_tlb_all, false), svm::tlb_control::flush_all);
  EXPECT_EQ(svm::tlb_control_for(A::flush_tlb_current, false), svm::tlb_control::flush_all);
  EXPECT_EQ(svm::tlb_control_for(A::refresh_permissions | A::reset_mmu, true), svm::tlb_control::do_nothing);
  EXPECT_EQ(svm::tlb_control_for(A{}, false), svm::tlb_control::do_nothing);
  EXPECT_EQ(static_cast<unsigned>(svm::tlb_control_for(A::flush_tlb_all, true)), 0x03u);
  EXPECT_EQ(static_cast<unsigned>(svm::tlb_control_for(A::flush_tlb_all, false)), 0x01u);
}

TEST(svm_cr_write_apply, pdptes_checked_mmu_rebuilt) {
  image m;
  m.put(0x1020, 0x2001);
  m.put(0x1028, 0x4003);  // reserved bit 1
  const pg::cr_state before{x86::cr0{PE}, x86::cr4{PAE}, x86::efer{0}};
  const pg::cr_state after{x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{0}};
  const auto actions = pg::cr_write_actions(before, after, pg::paging_kind::two_dimensional);
  const auto mem = m.mem();
  pg::mmu_context mmu;
  auto bad = svm::apply_cr_write_actions(mmu, actions, after, x86::cr3{0x1020}, mem, 36, true);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, pg::pdptr_error::kind_type::reserved_bit);
  EXPECT_EQ(bad.error().index, 1u);
  m.put(0x1028, 0);
  auto r = svm::apply_cr_write_actions(mmu, actions, after, x86::cr3{0x1020}, mem, 36, true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->pdptes_loaded);
  EXPECT_TRUE(r->mmu_rebuilt);
  EXPECT_EQ(mmu.root().value(), 0x1020u);
  EXPECT_EQ(r->flush, svm::tlb_control::do_nothing);
  // Long mode, CR4.PGE set: flush everything -> 03h with FlushByAsid, 01h without.
  const pg::cr_state lb{x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{LME}};
  pg::cr_state la = lb;
  la.cr4 = x86::cr4{PAE | PGE};
  const auto pge = pg::cr_write_actions(lb, la, pg::paging_kind::two_dimensional);
  auto f = svm::apply_cr_write_actions(mmu, pge, la, x86::cr3{0x1000}, mem, 52, false);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->flush, svm::tlb_control::flush_all);
}

}  // namespace
