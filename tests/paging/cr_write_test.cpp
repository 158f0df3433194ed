// SPDX-License-Identifier: MIT
// cr_write_actions: one row per rule, expected actions typed by hand from SDM 4.4.1 (PDPTE
// loading), 4.10.4.1 (TLB invalidation by MOV to CR0/CR4) and docs/background.md §1 (what the
// MMU must do on a WP toggle with EPT/NPT versus shadow paging).
#include <cstdint>
#include <cstdio>

#include <gtest/gtest.h>

#include <hvkit/paging/cr_write.hpp>

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
    // --- CR0.WP (docs/background.md §1) ---
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

// Every single-bit change of the bits that matter (one MOV to CR0/CR4 or WRMSR changes one
// register; here one bit at a time), from every state of those bits, against a model
// written from the SDM text: SDM 4.1.1 for the mode, 4.1.3/4.6 for the modifiers, 4.4.1 for
// PDPTEs, 4.10.4.1 for the TLB.
namespace cr_model {
struct state {
  std::uint64_t cr0, cr4, efer;
};
constexpr unsigned mode(const state& s) {
  if (!(s.cr0 & PG)) return 0;
  if (!(s.cr4 & PAE)) return 2;
  if (!(s.efer & LME)) return 3;  // LMA = LME && PG
  return (s.cr4 & LA57) ? 5 : 4;
}
// The modifiers that take effect in the state's mode, as one comparable value.
constexpr std::uint64_t modifiers(const state& s) {
  const unsigned m = mode(s);
  if (m == 0) return 0;
  std::uint64_t v = s.cr0 & WP;
  v |= s.cr4 & (SMEP | SMAP);
  if (m >= 3) v |= s.efer & NXE;              // XD exists with PAE and IA-32e paging
  if (m >= 4) v |= s.cr4 & (PKE | (1ull << 24));  // keys with IA-32e paging only
  if (m == 2) v |= s.cr4 & PSE;              // PSE matters for 32-bit paging only
  return v;
}
constexpr std::uint8_t actions(const state& b, const state& a, bool shadow) {
  std::uint8_t out = 0;
  if (mode(b) != mode(a)) {
    out |= R | X;
  } else if (modifiers(b) != modifiers(a)) {
    out |= shadow ? (R | X) : R;
  }
  const bool pdpte_bit = ((b.cr0 ^ a.cr0) & (CD | NW | PG)) || ((b.cr4 ^ a.cr4) & (PAE | PGE | PSE | SMEP));
  if (mode(a) == 3 && pdpte_bit) out |= P;
  const bool all = ((b.cr0 & PG) && !(a.cr0 & PG)) || ((b.cr4 ^ a.cr4) & PGE) ||
                   ((b.cr4 & PCIDE) && !(a.cr4 & PCIDE));
  const bool current = ((b.cr4 ^ a.cr4) & PAE) || (!(b.cr4 & SMEP) && (a.cr4 & SMEP));
  if (all) out |= A;
  else if (current) out |= C;
  return out;
}
}  // namespace cr_model

TEST(CrWrite, EverySingleBitChangeMatchesModel) {
  constexpr std::uint64_t PKS = 1ull << 24;
  constexpr std::uint64_t bits[] = {PG, WP, CD, NW, TS,                                // CR0
                                    PSE, PAE, PGE, PCIDE, SMEP, SMAP, PKE, PKS, LA57,  // CR4
                                    LME, NXE};                                         // EFER
  constexpr unsigned n = sizeof(bits) / sizeof(bits[0]);
  auto to_state = [&](unsigned mask) {
    cr_model::state s{PE, 0, 0};
    for (unsigned i = 0; i < n; ++i) {
      if (!(mask & (1u << i))) continue;
      if (i < 5) s.cr0 |= bits[i];
      else if (i < 14) s.cr4 |= bits[i];
      else s.efer |= bits[i];
    }
    return s;
  };
  std::uint64_t compared = 0, with_actions = 0;
  for (unsigned m = 0; m < (1u << n); ++m) {
    const auto b = to_state(m);
    for (unsigned i = 0; i < n; ++i) {
      const auto a = to_state(m ^ (1u << i));
      for (bool shadow : {false, true}) {
        const auto want = cr_model::actions(b, a, shadow);
        const auto got = paging::cr_write_actions({x86::cr0{b.cr0}, x86::cr4{b.cr4}, x86::efer{b.efer}},
                                                  {x86::cr0{a.cr0}, x86::cr4{a.cr4}, x86::efer{a.efer}},
                                                  shadow ? paging_kind::shadow : paging_kind::two_dimensional);
        ++compared;
        with_actions += want != 0;
        if (got.raw() != want) {
          ADD_FAILURE() << std::hex << "cr0 " << b.cr0 << "->" << a.cr0 << " cr4 " << b.cr4 << "->" << a.cr4
                        << " efer " << b.efer << "->" << a.efer << " shadow=" << shadow << " got=" << +got.raw()
                        << " want=" << +want;
          return;
        }
      }
    }
  }
  std::printf("cr_write_actions vs model: %llu single-bit transitions compared (%llu with actions)\n",
              static_cast<unsigned long long>(compared), static_cast<unsigned long long>(with_actions));
  EXPECT_EQ(compared, (1ull << n) * n * 2);
}

}  // namespace
