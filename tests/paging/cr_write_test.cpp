// cr_write_actions: one row per rule, expected actions typed by hand from SDM 4.4.1 (PDPTE
// loading), 4.10.4.1 (TLB invalidation by MOV to CR0/CR4) and background.md §1 (what the
// MMU must do on a WP toggle with EPT/NPT versus shadow paging).
#include <cstdint>
#include <cstdio>

#include <gtest/gtest.h>

#include <paging/cr_write.hpp>

#include "runtime.hpp"

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
using paging::mmu_actions;
using paging::paging_kind;

constexpr std::uint64_t PE = 1, TS = 1ull << 3, WP = 1ull << 16, NW = 1ull << 29, CD = 1ull << 30, PG = 1ull << 31;
constexpr std::uint64_t PSE = 1ull << 4, PAE = 1ull << 5, PGE = 1ull << 7, PCIDE = 1ull << 17, SMEP = 1ull << 20,
                        SMAP = 1ull << 21, PKE = 1ull << 22, LA57 = 1ull << 12;
constexpr std::uint64_t LME = 1ull << 8, LMA = 1ull << 10, NXE = 1ull << 11;

// Action bits, spelled out: R refresh permissions, X reset MMU, P reload PDPTRs,
// C flush current PCID, A flush all.
constexpr std::uint8_t N = 0, R = 1, X = 2, P = 4, C = 8, A = 16;

struct row {
  const char* what;
  std::uint64_t cr0_before, cr4_before, efer_before;
  std::uint64_t cr0_after, cr4_after, efer_after;
  std::uint8_t tdp;     // expected with two-dimensional paging
  std::uint8_t shadow;  // expected with shadow paging
};

constexpr std::uint64_t LM = LME | LMA;
constexpr std::uint64_t c0 = PE | PG | WP;  // a paging CR0

constexpr row rows[] = {
    // --- CR0.WP (background.md §1) ---
    {"WP toggle with paging off", PE, PAE, 0, PE | WP, PAE, 0, N, N},
    {"WP set, 4-level", PE | PG, PAE, LM, c0, PAE, LM, R, R | X},
    {"WP cleared, 4-level", c0, PAE, LM, PE | PG, PAE, LM, R, R | X},
    {"WP cleared, PAE (WP is not a PDPTE bit)", c0, PAE, 0, PE | PG, PAE, 0, R, R | X},
    {"WP cleared, 32-bit", c0, 0, 0, PE | PG, 0, 0, R, R | X},
    // --- CR0.PG (mode change; SDM 4.10.4.1: flush all on 1->0; SDM 4.4.1 PDPTEs) ---
    {"PG 0->1 into 4-level", PE | WP, PAE, LME, c0, PAE, LME, R | X, R | X},
    {"PG 0->1 into PAE", PE | WP, PAE, 0, c0, PAE, 0, R | X | P, R | X | P},
    {"PG 0->1 into 32-bit", PE | WP, 0, 0, c0, 0, 0, R | X, R | X},
    {"PG 1->0 from 4-level", c0, PAE, LM, PE | WP, PAE, LME, R | X | A, R | X | A},
    {"PG 1->0 from PAE", c0, PAE, 0, PE | WP, PAE, 0, R | X | A, R | X | A},
    // --- CR0 bits that are not role bits ---
    {"TS toggle", c0, PAE, LM, c0 | TS, PAE, LM, N, N},
    {"CD set, PAE: PDPTE reload", c0, PAE, 0, c0 | CD, PAE, 0, P, P},
    {"NW|CD set, 4-level: nothing", c0, PAE, LM, c0 | CD | NW, PAE, LM, N, N},
    // --- CR4 ---
    {"PGE toggle, 4-level: flush all", c0, PAE, LM, c0, PAE | PGE, LM, A, A},
    {"PGE toggle, PAE: flush all + PDPTEs", c0, PAE | PGE, 0, c0, PAE, 0, A | P, A | P},
    {"PGE toggle, paging off: flush all", PE, PGE, 0, PE, 0, 0, A, A},
    {"PCIDE 1->0: flush all", c0, PAE | PCIDE, LM, c0, PAE, LM, A, A},
    {"PCIDE 0->1: nothing", c0, PAE, LM, c0, PAE | PCIDE, LM, N, N},
    {"SMEP 0->1, 4-level: flush current", c0, PAE, LM, c0, PAE | SMEP, LM, R | C, R | X | C},
    {"SMEP 1->0, 4-level: no flush", c0, PAE | SMEP, LM, c0, PAE, LM, R, R | X},
    {"SMEP 0->1, PAE: + PDPTEs", c0, PAE, 0, c0, PAE | SMEP, 0, R | P | C, R | X | P | C},
    {"SMEP 0->1, paging off: flush current only", PE, PAE, 0, PE, PAE | SMEP, 0, C, C},
    {"SMAP toggle, PAE (not a PDPTE bit)", c0, PAE, 0, c0, PAE | SMAP, 0, R, R | X},
    {"PKE set, 4-level", c0, PAE, LM, c0, PAE | PKE, LM, R, R | X},
    {"PKE set, PAE: keys do not exist", c0, PAE, 0, c0, PAE | PKE, 0, N, N},
    {"PSE set, 32-bit", c0, 0, 0, c0, PSE, 0, R, R | X},
    {"PSE set, PAE: PDPTEs only", c0, PAE, 0, c0, PAE | PSE, 0, P, P},
    {"PAE 0->1 with paging: 32-bit -> PAE", c0, 0, 0, c0, PAE, 0, R | X | P | C, R | X | P | C},
    {"PAE 1->0 with paging: PAE -> 32-bit", c0, PAE, 0, c0, 0, 0, R | X | C, R | X | C},
    {"PAE 0->1 with paging off", PE, 0, 0, PE, PAE, 0, C, C},
    // --- EFER ---
    {"NXE set, 4-level", c0, PAE, LM, c0, PAE, LM | NXE, R, R | X},
    {"NXE set, 32-bit: no XD bit", c0, 0, 0, c0, 0, NXE, N, N},
    {"NXE set, paging off", PE, PAE, 0, PE, PAE, NXE, N, N},
    {"LME set, paging off", PE, PAE, 0, PE, PAE, LME, N, N},
    // --- several at once (VM entry / RSM) ---
    {"4-level -> 5-level", c0, PAE, LM, c0, PAE | LA57, LM, R | X, R | X},
    {"PAE -> 4-level", c0, PAE, 0, c0, PAE, LM, R | X, R | X},
};

TEST(CrWrite, TableFromTheSdm) {
  int compared = 0;
  for (const auto& r : rows) {
    for (auto kind : {paging_kind::two_dimensional, paging_kind::shadow}) {
      const paging::cr_state before{x86::cr0{hvkit::test::rt(r.cr0_before)}, x86::cr4{r.cr4_before},
                                    x86::efer{r.efer_before}};
      const paging::cr_state after{x86::cr0{r.cr0_after}, x86::cr4{r.cr4_after}, x86::efer{r.efer_after}};
      const auto want = kind == paging_kind::shadow ? r.shadow : r.tdp;
      EXPECT_EQ(paging::cr_write_actions(before, after, kind).raw(), want)
          << r.what << (kind == paging_kind::shadow ? " (shadow)" : " (EPT/NPT)");
      ++compared;
    }
  }
  std::printf("cr_write_actions: %d table rows compared\n", compared);
}

// The same table, evaluated at compile time.
consteval bool table_holds_at_compile_time() {
  for (const auto& r : rows) {
    const paging::cr_state before{x86::cr0{r.cr0_before}, x86::cr4{r.cr4_before}, x86::efer{r.efer_before}};
    const paging::cr_state after{x86::cr0{r.cr0_after}, x86::cr4{r.cr4_after}, x86::efer{r.efer_after}};
    if (paging::cr_write_actions(before, after, paging_kind::two_dimensional).raw() != r.tdp) return false;
    if (paging::cr_write_actions(before, after, paging_kind::shadow).raw() != r.shadow) return false;
  }
  return true;
}
static_assert(table_holds_at_compile_time());

TEST(CrWrite, ActionBitsAreTheDocumentedOnes) {
  static_assert(mmu_actions::refresh_permissions.raw() == R && mmu_actions::reset_mmu.raw() == X &&
                mmu_actions::reload_pdptrs.raw() == P && mmu_actions::flush_tlb_current.raw() == C &&
                mmu_actions::flush_tlb_all.raw() == A);
  // Every reset comes with a refresh, in every row.
  for (const auto& r : rows) {
    EXPECT_TRUE(!(r.tdp & X) || (r.tdp & R)) << r.what;
    EXPECT_TRUE(!(r.shadow & X) || (r.shadow & R)) << r.what;
  }
}

TEST(CrWrite, LmaIsDerivedFromLmeAndPg) {
  // A caller that passes the pre-write EFER (LMA still 0) gets the IA-32e answer anyway:
  // no PDPTE load when paging turns on with LME=1.
  const paging::cr_state before{x86::cr0{PE}, x86::cr4{PAE}, x86::efer{LME}};
  const paging::cr_state after{x86::cr0{hvkit::test::rt(PE | PG)}, x86::cr4{PAE}, x86::efer{LME}};
  EXPECT_EQ(paging::cr_write_actions(before, after, paging_kind::two_dimensional).raw(), R | X);
  static_assert(paging::efer_with_lma(x86::cr0{PE | PG}, x86::efer{LME}) == x86::efer{LME | LMA});
  static_assert(paging::efer_with_lma(x86::cr0{PE}, x86::efer{LME | LMA}) == x86::efer{LME});
}

}  // namespace
