// SPDX-License-Identifier: MIT
// Exhaustive small-space equivalence of the shadow MMU with the guest walker: for every
// combination of a guest PDE and PTE (P, R/W, U/S, A, D, XD, PS), every role (CR0.WP,
// CR4.SMEP, CR4.SMAP, EFER.NXE) and every access (read, write, fetch; user, supervisor with
// AC=0 and AC=1, implicit supervisor), on 32-bit, PAE, 4-level and 5-level guests, an access made by
// the "hardware" (the walker of the host format over the shadow tables: PAE for the 32-bit
// and PAE guests, with its PDPTEs loaded from the shadow root; 4-level; 5-level; checked
// with the host role) and
// the shadow MMU's #PF answers gives exactly what the guest walker gives on the guest's own
// tables: verdict, vector, error code, CR2, host frame, and the guest's A/D flags byte for
// byte. Each case runs its accesses in a forward and a backward order on one MMU, so entries
// built by one access are checked against the next (the CR0.WP = 0 variants, D tracking).
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include <hvkit/paging/shadow/spte.hpp>

#include "shadow_harness.hpp"

namespace {

using namespace shadow_harness;

constexpr std::uint64_t P = 1, RW = 2, US = 4, A = 32, D = 64, PS = 128, XD = 1ull << 63;
constexpr std::uint64_t CR0_PE = 1, CR0_WP = 1ull << 16, CR0_PG = 1ull << 31;
constexpr std::uint64_t CR4_LA57 = 1ull << 12;
constexpr std::uint64_t CR4_PSE = 1ull << 4, CR4_PAE = 1ull << 5, CR4_SMEP = 1ull << 20, CR4_SMAP = 1ull << 21;
constexpr std::uint64_t EFER_LME = 1ull << 8, EFER_LMA = 1ull << 10, EFER_NXE = 1ull << 11;

enum class gmode { m32, pae, l4, l5 };

// Frames: 1 = top table (PML4 / PDPT / PD), 2 = PDPT (4-level), 3 = PD, 4 = PT, 8 = data,
// 0x400000-aligned large pages map frames 0.. (only the 4 KiB page we touch matters).
constexpr std::uint64_t va32 = 0x4060'3a88;  // PD quadrant 1, PT half 1 for a 32-bit guest
// A 5-level guest's address has a PML5 index (bits 56:48) of 0x12 and is canonical (bit 56 = 0).
constexpr std::uint64_t va57 = 0x0012'0000'4060'3a88;
constexpr std::uint64_t va_of(gmode g) { return g == gmode::l5 ? va57 : va32; }

struct access_case {
  std::uint64_t pfec;
  bool ac;
};
std::vector<access_case> accesses() {
  std::vector<access_case> v;
  for (std::uint64_t kind : {0ull, 2ull, 16ull})  // read, write, fetch
    for (int m = 0; m < 4; ++m) {                  // user, sup AC0, sup AC1, implicit
      const std::uint64_t mode = m == 0 ? 4u : m == 3 ? (1ull << 48) : 0u;
      v.push_back({kind | mode, m >= 2});
    }
  return v;
}

// Sets up the guest tables for (pde, pte) in `mc`, returns the role.
paging::cpu_role setup(machine& mc, gmode g, std::uint64_t pde, std::uint64_t pte, unsigned roleb, x86::gpa& root) {
  const std::uint64_t va = va_of(g);
  for (std::uint64_t f : {1u, 2u, 3u, 4u, 5u}) {  // the table frames (data frames are never written)
    std::fill(mc.sut.begin() + f * 4096, mc.sut.begin() + f * 4096 + 4096, 0);
    std::fill(mc.oracle.begin() + f * 4096, mc.oracle.begin() + f * 4096 + 4096, 0);
  }
  const bool wp = roleb & 1, smep = roleb & 2, smap = roleb & 4, nxe = roleb & 8;
  std::uint64_t cr0 = CR0_PE | CR0_PG | (wp ? CR0_WP : 0);
  std::uint64_t cr4 = (smep ? CR4_SMEP : 0) | (smap ? CR4_SMAP : 0);
  std::uint64_t efer = nxe ? EFER_NXE : 0;
  if (g == gmode::m32) {
    cr4 |= CR4_PSE;
    // 4-byte entries: no XD.
    const std::uint64_t pde32 = (pde & PS) ? ((pde & 0xff) | 0) : ((pde & 0xff) | (4ull << 12));
    mc.write(0x1000 + 4 * ((va >> 22) & 1023), 4, pde32);
    mc.write(0x4000 + 4 * ((va >> 12) & 1023), 4, (pte & 0xff) | (8ull << 12));
    root = x86::gpa{0x1000};
  } else {
    const std::uint64_t xdmask = nxe ? XD : 0;
    const std::uint64_t pde64 = (pde & PS) ? ((pde & (0xff | xdmask)) | 0) : ((pde & (0xff | xdmask)) | (4ull << 12));
    const std::uint64_t pte64 = (pte & (0xff | xdmask)) | (8ull << 12);
    mc.write(0x3000 + 8 * ((va >> 21) & 511), 8, pde64);
    mc.write(0x4000 + 8 * ((va >> 12) & 511), 8, pte64);
    if (g == gmode::pae) {
      cr4 |= CR4_PAE;
      mc.write(0x1000 + 8 * ((va >> 30) & 3), 8, P | (3ull << 12));
      root = x86::gpa{0x1000};
    } else {
      cr4 |= CR4_PAE;
      efer |= EFER_LME | EFER_LMA;
      mc.write(0x1000 + 8 * ((va >> 39) & 511), 8, P | RW | US | A | (2ull << 12));
      mc.write(0x2000 + 8 * ((va >> 30) & 511), 8, P | RW | US | A | (3ull << 12));
      root = x86::gpa{0x1000};
      if (g == gmode::l5) {  // PML5 in frame 5 over the PML4 in frame 1 (SDM 4.5.1)
        cr4 |= CR4_LA57;
        mc.write(0x5000 + 8 * ((va >> 48) & 511), 8, P | RW | US | A | (1ull << 12));
        root = x86::gpa{0x5000};
      }
    }
  }
  return paging::make_cpu_role(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer});
}

// A de Bruijn sequence B(k, 2) made cyclic: every ordered pair of the k accesses appears
// consecutively, so every access is checked right after every other one (the entry the
// first one built is what the second one meets).
std::vector<int> every_pair(int k) {
  std::vector<int> a(3, 0), seq;
  auto db = [&](auto& self, int t, int p) -> void {
    if (t > 2) {
      if (2 % p == 0)
        for (int j = 1; j <= p; ++j) seq.push_back(a[j]);
    } else {
      a[t] = a[t - p];
      self(self, t + 1, p);
      for (int j = a[t - p] + 1; j < k; ++j) {
        a[t] = j;
        self(self, t + 1, t);
      }
    }
  };
  db(db, 1, 1);
  seq.push_back(seq.front());
  return seq;
}

struct totals {
  unsigned long cases = 0, accesses = 0, faults = 0, emulated = 0, ok = 0;
};

void run_mode(gmode g, totals& tot) {
  machine mc;
  const auto acc = accesses();
  const auto order = every_pair(static_cast<int>(acc.size()));
  EXPECT_EQ(order.size(), acc.size() * acc.size() + 1);
  // PDE: P, RW, US, A, PS, D (large), XD; PTE: P, RW, US, A, D, XD.
  for (unsigned pdeb = 0; pdeb < 128; ++pdeb) {
    std::uint64_t pde = ((pdeb & 1) ? P : 0) | ((pdeb & 2) ? RW : 0) | ((pdeb & 4) ? US : 0) | ((pdeb & 8) ? A : 0) |
                        ((pdeb & 16) ? PS : 0) | ((pdeb & 32) ? D : 0) | ((pdeb & 64) ? XD : 0);
    if (!(pde & P) && pdeb != 0) continue;  // one not-present PDE is enough
    if (!(pde & PS) && (pde & D)) continue;  // D is ignored in a non-leaf PDE
    const unsigned pte_count = (pde & PS) || !(pde & P) ? 1 : 64;
    for (unsigned pteb = 0; pteb < pte_count; ++pteb) {
      const std::uint64_t pte = ((pteb & 1) ? P : 0) | ((pteb & 2) ? RW : 0) | ((pteb & 4) ? US : 0) |
                                ((pteb & 8) ? A : 0) | ((pteb & 16) ? D : 0) | ((pteb & 32) ? XD : 0);
      for (unsigned roleb = 0; roleb < 16; ++roleb) {
        if (g == gmode::m32 && (roleb & 8)) continue;  // no NX in 32-bit paging
        x86::gpa root{};
        const paging::cpu_role r = setup(mc, g, pde, pte, roleb, root);
        mc.cache.zap_all();
        ASSERT_TRUE(mc.load(r, root).supported);
        ++tot.cases;
        {
          for (std::size_t k = 0; k < order.size(); ++k) {
            const int pass = 0;
            const auto& a = acc[static_cast<std::size_t>(order[k])];
            paging::walk_request req{};
            req.linear = x86::gva{va_of(g)};
            req.access = x86::pfec{a.pfec};
            req.rflags = x86::rflags{a.ac ? (1ull << 18) : 0};
            const outcome s = mc.via_shadow(req);
            const outcome o = mc.via_walker(req);
            ++tot.accesses;
            tot.emulated += s.emulated;
            tot.ok += o.ok;
            if (!same(s, o) || !mc.memories_equal()) {
              ADD_FAILURE() << "mode " << static_cast<int>(g) << " pde=" << std::hex << pde << " pte=" << pte
                            << " role(wp,smep,smap,nxe)=" << roleb << " access=" << a.pfec << " ac=" << a.ac
                            << " pass=" << pass << " k=" << std::dec << k << "\n shadow: " << describe(s)
                            << "\n walker: " << describe(o) << "\n memories equal: " << mc.memories_equal();
              return;
            }
          }
        }
      }
    }
  }
  tot.faults += mc.faults_taken;
}

void run_and_report(gmode g, const char* name) {
  totals t;
  run_mode(g, t);
  std::printf("%s: %lu cases, %lu accesses (%lu allowed, %lu emulated), %lu host faults\n", name, t.cases, t.accesses,
              t.ok, t.emulated, t.faults);
  EXPECT_GT(t.accesses, 100000u);
}

TEST(shadow_fold, exhaustive_32bit) { run_and_report(gmode::m32, "32-bit"); }
TEST(shadow_fold, exhaustive_pae) { run_and_report(gmode::pae, "PAE"); }
TEST(shadow_fold, exhaustive_4level) { run_and_report(gmode::l4, "4-level"); }
TEST(shadow_fold, exhaustive_5level) { run_and_report(gmode::l5, "5-level"); }

}  // namespace
