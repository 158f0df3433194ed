// SPDX-License-Identifier: MIT
// The shadow MMU against the guest walker on random guest tables under random edits: 32-bit
// (with and without CR4.PSE: 4 MiB pages mapped by direct shadow pages), PAE and 4-level
// guests, edits of every width and alignment (1 to 8 bytes, across entries and across the end
// of a table page, in every quadrant of a 32-bit table), MOV to CR3 between two address
// spaces. Every access must give the walker's verdict, error code, CR2 and host frame, and
// guest memory (A/D flags) must stay equal (shadow_harness.hpp). Seeded: the same cases on
// every run.
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include <hvkit/paging/cr_write.hpp>
#include <hvkit/paging/shadow/invalidate.hpp>

#include "shadow_harness.hpp"

namespace {

using namespace shadow_harness;

constexpr std::uint64_t P = 1, RW = 2, US = 4, A = 32, D = 64, PS = 128;
constexpr std::uint64_t CR0_PE = 1, CR0_WP = 1ull << 16, CR0_PG = 1ull << 31;
constexpr std::uint64_t CR4_PSE = 1ull << 4, CR4_PAE = 1ull << 5;
constexpr std::uint64_t EFER_LME = 1ull << 8, EFER_LMA = 1ull << 10, EFER_NXE = 1ull << 11;

enum class gmode { m32, m32_pse, pae, l4 };

struct random_guest {
  gmode mode;
  std::mt19937_64 rng;
  machine mc;
  std::uint64_t cr3 = 0x1000;
  unsigned accesses = 0, allowed = 0, faulted = 0, emulated = 0, edits = 0, switches = 0;

  unsigned flood = 0;  // write-flooding threshold (0: off)

  random_guest(gmode m, std::uint64_t seed, unsigned flood_threshold = 0)
      : mode(m), rng(seed), flood(flood_threshold) {}

  unsigned below(unsigned n) { return static_cast<unsigned>(rng() % n); }
  unsigned esz() const { return mode == gmode::m32 || mode == gmode::m32_pse ? 4 : 8; }
  paging::cpu_role role() const {
    switch (mode) {
      case gmode::m32: return paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{}, x86::efer{});
      case gmode::m32_pse:
        return paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PSE}, x86::efer{});
      case gmode::pae: return paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PAE}, x86::efer{});
      case gmode::l4:
        return paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PAE},
                                     x86::efer{EFER_LME | EFER_LMA | EFER_NXE});
    }
    return {};
  }
  // Table indexes the accesses use: for 4-byte entries both halves of a page table (VA bit
  // 21: the quadrant of a host table) and all four quarters of a page directory (VA bits
  // 31:30).
  unsigned index() {
    static constexpr unsigned i32[] = {0, 1, 0xff, 0x100, 0x1ff, 0x200, 0x301, 0x3ff};
    static constexpr unsigned i64[] = {0, 1, 2, 3, 0x1ff};
    return esz() == 4 ? i32[below(8)] : i64[below(5)];
  }
  std::uint64_t linear() {
    const std::uint64_t off = below(4) * 0x408;
    switch (mode) {
      case gmode::m32:
      case gmode::m32_pse: return (std::uint64_t{index()} << 22) | (std::uint64_t{index()} << 12) | off;
      case gmode::pae: return (std::uint64_t{below(4)} << 30) | (std::uint64_t{index()} << 21) | (std::uint64_t{index()} << 12) | off;
      case gmode::l4:
        return (std::uint64_t{below(2)} << 30) | (std::uint64_t{index()} << 21) | (std::uint64_t{index()} << 12) | off;
    }
    return 0;
  }
  // A random entry: mostly present, mostly pointing at a table frame (1-7), else a data frame
  // (8-27) or an MMIO frame (28-31); random R/W and U/S (mostly set), A, D, sometimes PS (and
  // XD for the 8-byte formats).
  std::uint64_t entry() {
    std::uint64_t v = (rng() & (A | D)) | (below(8) ? P : 0) | (below(4) ? RW : 0) | (below(4) ? US : 0) |
                      (below(6) ? 0 : PS);
    const std::uint64_t frame = below(4) ? 1 + below(7) : 8 + below(24);
    v |= frame << 12;
    if (esz() == 8 && below(6) == 0) v |= 1ull << 63;
    return v;
  }
  bool pdpte_ok(std::uint64_t root) const {
    paging::flat_view v(mc.oracle.data(), mc.oracle.size());
    return paging::load_pdptrs(x86::cr3{root}, v, mc.props.maxphyaddr).has_value();
  }
  void store_entry(std::uint64_t frame, unsigned idx, std::uint64_t v) {
    if (mode == gmode::pae && (frame == 1 || frame == 5) && idx < 4) v = (v & ~(0x1e6ull | (1ull << 63))) | P;
    if (mode == gmode::l4 && (frame == 1 || frame == 5)) v &= ~PS;  // PML4E: PS is reserved
    mc.write(frame * 4096 + esz() * idx, esz(), v);
  }

  void setup() {
    // Skeleton: roots at frames 1 and 5, then random entries in every table frame (1-7).
    for (std::uint64_t f = 1; f <= 7; ++f)
      for (unsigned n = 0; n < 12; ++n) store_entry(f, index(), entry());
    if (mode == gmode::pae)
      for (std::uint64_t root : {1u, 5u})
        for (unsigned i = 0; i < 4; ++i) store_entry(root, i, (std::uint64_t{2 + below(6)} << 12) | P);
    mc.mmu.set_write_flood_threshold(flood);
    mc.load(role(), x86::gpa{cr3});
  }

  void access() {
    static constexpr std::uint64_t kinds[] = {0, 2, 4, 6, 16, 20};
    paging::walk_request q{};
    q.linear = x86::gva{linear()};
    q.access = x86::pfec{kinds[below(6)]};
    const outcome s = mc.via_shadow(q), o = mc.via_walker(q);
    ++accesses;
    allowed += o.ok;
    faulted += !o.ok;
    emulated += s.emulated;
    ASSERT_TRUE(same(s, o)) << "va " << std::hex << q.linear.value() << " access " << q.access.raw() << "\n shadow "
                            << describe(s) << "\n walker " << describe(o);
    ASSERT_TRUE(mc.memories_equal());
  }

  // An emulated guest write to its tables: an entry, or 1-8 bytes anywhere in a table frame
  // (also across its end into the next frame), reported with table_written().
  void edit() {
    ++edits;
    const std::uint64_t frame = 1 + below(7);
    if (below(3) == 0) {
      const unsigned bytes = 1 + below(8);
      const std::uint64_t at = below(4) == 0 ? 4096 - below(bytes) - 1 : esz() * index() + below(8);
      std::uint64_t v = entry();
      mc.guest_store(frame * 4096 + at, bytes, v);
      return;
    }
    const unsigned idx = index();
    std::uint64_t v = entry();
    if (mode == gmode::pae && (frame == 1 || frame == 5) && idx < 4) v = (v & ~(0x1e6ull | (1ull << 63))) | P;
    if (mode == gmode::l4 && (frame == 1 || frame == 5)) v &= ~PS;
    mc.guest_store(frame * 4096 + esz() * idx, esz(), v);
  }

  void switch_cr3() {
    const std::uint64_t next = cr3 == 0x1000 ? 0x5000 : 0x1000;
    if (mode == gmode::pae && !pdpte_ok(next)) return;  // MOV to CR3 would #GP
    cr3 = next;
    ++switches;
    mc.load(role(), x86::gpa{cr3});
  }

  void run(unsigned ops) {
    setup();
    for (unsigned i = 0; i < ops && !::testing::Test::HasFatalFailure(); ++i) {
      const unsigned r = below(20);
      if (r < 11) {
        access();
      } else if (r < 19) {
        edit();
      } else {
        switch_cr3();
      }
    }
  }
};

void run_seeds(gmode m, unsigned flood = 0) {
  unsigned accesses = 0, allowed = 0, faulted = 0, emulated = 0;
  std::uint64_t unprotects = 0;
  for (std::uint64_t seed = 1; seed <= 100 && !::testing::Test::HasFatalFailure(); ++seed) {
    random_guest g(m, seed * 0x9e37'79b9'7f4a'7c15ull, flood);
    g.run(400);
    accesses += g.accesses;
    allowed += g.allowed;
    faulted += g.faulted;
    emulated += g.emulated;
    unprotects += g.mc.mmu.flood_unprotects();
  }
  // Not vacuous: both verdicts and the emulated paths occur; with write flooding, frames
  // are unprotected (and the accesses after it still agree with the walker).
  EXPECT_GT(allowed, accesses / 50);
  EXPECT_GT(faulted, accesses / 20);
  EXPECT_GT(emulated, 0u);
  if (flood != 0) EXPECT_GT(unprotects, 10u);
  else EXPECT_EQ(unprotects, 0u);
}

TEST(shadow_random, guest_32bit) { run_seeds(gmode::m32); }
TEST(shadow_random, guest_32bit_pse) { run_seeds(gmode::m32_pse); }
TEST(shadow_random, guest_pae) { run_seeds(gmode::pae); }
TEST(shadow_random, guest_4level) { run_seeds(gmode::l4); }
// The same with write flooding (shadow_mmu::set_write_flood_threshold()): frames the guest
// keeps writing are unprotected; what the guest sees must not change.
TEST(shadow_random, guest_32bit_write_flooding) { run_seeds(gmode::m32, 2); }
TEST(shadow_random, guest_32bit_pse_write_flooding) { run_seeds(gmode::m32_pse, 1); }
TEST(shadow_random, guest_pae_write_flooding) { run_seeds(gmode::pae, 3); }
TEST(shadow_random, guest_4level_write_flooding) { run_seeds(gmode::l4, 4); }
TEST(shadow_random, guest_4level_write_flooding_at_every_write) { run_seeds(gmode::l4, 1); }

// A 4-level guest with PML4 at frame 1 (and a second PML4 at frame 5), PDPT 2, PD 3 whose
// entries 0..63 lead to page tables (frames 10..25, 4 per frame with different rights above
// them: 64 distinct shadow pages, more than the cache's 48), each PTE -> data frame 8.
struct crowded_guest {
  machine mc;
  paging::cpu_role role = paging::make_cpu_role(x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PAE},
                                                x86::efer{EFER_LME | EFER_LMA | EFER_NXE});
  crowded_guest() {
    mc.write(0x1000, 8, P | RW | US | A | 0x2000);
    mc.write(0x5000, 8, P | RW | US | A | 0x2000);
    mc.write(0x2000, 8, P | RW | US | A | 0x3000);
    for (unsigned i = 0; i < 64; ++i) {
      const std::uint64_t ptf = 10 + (i / 4) % 16;
      mc.write(0x3000 + 8 * i, 8, P | A | ((i & 1) ? RW : 0) | ((i & 2) ? US : 0) | (ptf << 12));
      mc.write((ptf << 12) + 8 * (i % 4), 8, P | RW | US | (8ull << 12));
    }
    mc.load(role, x86::gpa{0x1000});
  }
  outcome access(unsigned i) {
    paging::walk_request q{};
    q.linear = x86::gva{(std::uint64_t{i} << 21) + ((i % 4) << 12)};
    const outcome s = mc.via_shadow(q), o = mc.via_walker(q);
    EXPECT_TRUE(same(s, o)) << describe(s) << " vs " << describe(o);
    EXPECT_TRUE(mc.memories_equal());
    return s;
  }
};

// MOV to CR3 when the cache is full and the new root is not in it: the MMU starts over
// (one rebuild) and the new address space is exact.
TEST(shadow_random, cr3_load_into_a_full_cache_rebuilds) {
  crowded_guest g;
  unsigned i = 0;
  while (g.mc.cache.used() < g.mc.cache.capacity() && i < 1000) g.access(i++ % 64);
  ASSERT_EQ(g.mc.cache.used(), g.mc.cache.capacity()) << "the cache never filled";
  const std::uint32_t before = g.mc.mmu.rebuilds();
  const auto a = g.mc.load(g.role, x86::gpa{0x5000});
  EXPECT_EQ(g.mc.mmu.rebuilds(), before + 1);
  EXPECT_EQ(a.flush, shadow::host_flush::all);
  EXPECT_EQ(a.root, g.mc.mmu.root());
  EXPECT_LT(g.mc.cache.used(), g.mc.cache.capacity());
  for (unsigned k = 0; k < 64; ++k) EXPECT_TRUE(g.access(k).ok);
}

// CR4.PSE changes what a 32-bit guest's PDE means (SDM 4.3: PS is ignored without it) and is
// not in page_role: the MMU throws every shadow page away. The host root may come back in the
// same cache page, but what it maps changed: the host's cached translations must go
// (host_flush::all), whatever page the new root is.
TEST(shadow_random, cr4_pse_toggle_flushes_the_host_even_on_the_same_root_page) {
  machine mc;
  mc.write(0x1000, 4, P | RW | US | A | D | PS);            // PDE 0: a 4 MiB page at 0 with PSE
  mc.write(0x0000 + 4 * 8, 4, P | RW | US | (9ull << 12));  // PTE 8 if PDE 0 is a page table
  const x86::cr0 cr0{CR0_PE | CR0_PG | CR0_WP};
  mc.load(paging::make_cpu_role(cr0, x86::cr4{CR4_PSE}, x86::efer{}), x86::gpa{0x1000});
  paging::walk_request q{};
  q.linear = x86::gva{0x8010};
  q.access = x86::pfec::user;
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x8010);
  const auto a = mc.load(paging::make_cpu_role(cr0, x86::cr4{}, x86::efer{}), x86::gpa{0x1000});
  EXPECT_EQ(a.flush, shadow::host_flush::all);
  EXPECT_EQ(mc.via_shadow(q).host, host_ram + 0x9010);
  EXPECT_TRUE(same(mc.via_shadow(q), mc.via_walker(q)));
}

// A shadow-stack access is not expressed in host entries: the answer is to emulate it, at the
// guest-physical address of the guest's translation.
TEST(shadow_random, shadow_stack_access_is_emulated) {
  crowded_guest g;
  // SDM 4.6.1: a shadow-stack access needs a shadow-stack page, R/W = 0 and D = 1 in the leaf
  // (R/W = 1 above it): PTE 1 of the page table in frame 11 (PD entry 5: R/W = 1, U/S = 0).
  g.mc.write((11ull << 12) + 8, 8, P | D | (8ull << 12));
  paging::walk_request q{};
  q.linear = x86::gva{(std::uint64_t{5} << 21) + (1ull << 12) + 0x18};
  q.access = x86::pfec::ss;
  const auto w = g.mc.via_walker(q);
  ASSERT_TRUE(w.ok) << describe(w);
  paging::flat_memory m(g.mc.sut.data(), g.mc.sut.size());
  const auto a = g.mc.mmu.page_fault(m, q);
  EXPECT_EQ(a.action, shadow::fault_action::emulate_access);
  EXPECT_EQ(a.gpa.value(), 0x8018u);
  EXPECT_EQ(w.host, host_ram + 0x8018);
  EXPECT_EQ(a.root, g.mc.mmu.root());
}

// Paging off (SDM 2.5: CR0.PG = 0, linear = physical): reads, writes and fetches reach the
// frame at the address; no guest table, so nothing of guest memory changes.
TEST(shadow_random, paging_off_every_access_kind) {
  machine mc;
  mc.load(paging::make_cpu_role(x86::cr0{CR0_PE}, x86::cr4{}, x86::efer{}), x86::gpa{0});
  for (const std::uint64_t kind : {0ull, 2ull, 16ull})
    for (const std::uint64_t va : {0x0ull, 0x8123ull, 0x1b'ff8ull}) {
      paging::walk_request q{};
      q.linear = x86::gva{va};
      q.access = x86::pfec{kind};
      const outcome s = mc.via_shadow(q), o = mc.via_walker(q);
      EXPECT_TRUE(same(s, o)) << describe(s) << " vs " << describe(o);
      EXPECT_EQ(s.host, host_ram + va);
    }
  EXPECT_TRUE(mc.memories_equal());
}

// A leaf built by make_leaf() for rights r gives r back (SDM 4.6.1: the entry's R/W is write
// permission, U/S user access, XD (with EFER.NXE) no instruction fetch), and the bits are the
// SDM's: R/W bit 1, U/S bit 2, XD bit 63.
TEST(shadow_random, leaf_rights_round_trip) {
  for (unsigned r = 0; r < 8; ++r) {
    const paging::pte_access acc{static_cast<std::uint8_t>(r)};
    const std::uint64_t e = shadow::make_leaf(x86::hpa{0x1234'5000}, acc, 6, 0);
    EXPECT_EQ(shadow::leaf_rights(e), acc) << r;
    EXPECT_EQ((e >> 1) & 1, acc.test(paging::pte_access::write) ? 1u : 0u);
    EXPECT_EQ((e >> 2) & 1, acc.test(paging::pte_access::user) ? 1u : 0u);
    EXPECT_EQ(e >> 63, acc.test(paging::pte_access::exec) ? 0u : 1u);
  }
}

// INVPCID of every type after an emulated PTE write (SDM Vol. 2A INVPCID): the shadow tables
// never keep a translation the guest's tables do not give, so no host work, and the next
// access uses the new PTE.
TEST(shadow_random, invpcid_of_every_type_needs_no_shadow_work) {
  crowded_guest g;
  EXPECT_EQ(g.access(5).host, host_ram + 0x8000);
  for (unsigned t = 0; t < 4; ++t) {
    const std::uint64_t frame = 9 + t;
    g.mc.guest_store((11ull << 12) + 8, 8, P | RW | US | (frame << 12));
    EXPECT_EQ(shadow::invpcid(static_cast<shadow::invpcid_type>(t), 1, x86::gva{(5ull << 21) + 0x1000}),
              shadow::host_flush::none);
    EXPECT_EQ(g.access(5).host, host_ram + (frame << 12));
  }
}

// A control-register write that changes nothing the MMU depends on (no reset, no PDPTE
// reload, no permission refresh): the same root, no flush.
TEST(shadow_random, control_register_write_without_mmu_actions) {
  crowded_guest g;
  g.access(3);
  paging::cr_write_outcome o{};
  o.cr = 4;
  o.after = paging::cr_state{x86::cr0{CR0_PE | CR0_PG | CR0_WP}, x86::cr4{CR4_PAE | (1ull << 9)},
                             x86::efer{EFER_LME | EFER_LMA | EFER_NXE}};  // CR4.OSFXSR
  const auto root = g.mc.mmu.root();
  const auto a = shadow::control_registers_written(g.mc.mmu, o, x86::cr3{0x1000}, 52);
  EXPECT_EQ(a.root, root);
  EXPECT_EQ(a.flush, shadow::host_flush::none);
  EXPECT_TRUE(g.access(3).ok);
}

}  // namespace
