// SPDX-License-Identifier: MIT
// Randomized page-table trees with fixed seeds, for 32-bit, PAE, 4-level and 5-level paging
// and EPT with 4 and 5 levels: random entries (present or not, every flag, large pages,
// reserved bits, tables outside memory) and random controls and accesses, each walk
// compared with the rule model of walk_model.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/pdptr.hpp>
#include <hvkit/paging/walker.hpp>

#include "walk_kind.hpp"
#include "walk_model.hpp"

namespace {

using namespace hvkit;
using walk_model::u64;

constexpr u64 mem_size = 0x80000;  // 512 KiB: 127 table pages
constexpr unsigned trees = 16;
constexpr unsigned walks_per_tree = 4000;

struct rng_t {
  std::mt19937_64 g;
  explicit rng_t(u64 seed) : g(seed) {}
  u64 next() { return g(); }
  unsigned below(unsigned n) { return static_cast<unsigned>(g() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }
};

u64 random_table(rng_t& r) {
  if (r.chance(4)) return mem_size + 0x1000 * r.below(16);  // outside memory: unbacked
  return 0x1000 * (1 + r.below(static_cast<unsigned>(mem_size / 0x1000) - 1));
}

// A random IA-32 paging entry for `m` (maxphyaddr bits of address).
u64 random_entry(rng_t& r, walk_model::mode m, unsigned maxphy) {
  if (r.chance(6)) return 0;
  if (r.chance(3)) return r.next() & ~u64{1};  // not present, garbage
  u64 e = 1;
  if (r.chance(80)) e |= 2;
  if (r.chance(80)) e |= 4;
  e |= r.next() & 0x178;  // PWT, PCD, A, D, G
  if (r.chance(m == walk_model::mode::m32 ? 20 : 12)) e |= 0x80;   // PS / PAT
  const bool large = e & 0x80;
  if (m == walk_model::mode::m32) {
    if (large) {
      e |= r.next() & 0xffc0'0000u;
      e |= (r.next() & 0xff) << 13;  // PSE-36 bits (some reserved beyond MAXPHYADDR)
      if (r.chance(5)) e |= 1u << 21;
      if (r.chance(50)) e &= ~u64{0x3fe000};  // often no high bits
      if (r.chance(30)) e = (e & ~u64{0xfffff000}) | random_table(r);  // may be read as a table (PSE=0)
    } else {
      e |= random_table(r);
    }
    return e & 0xffffffffu;
  }
  if (large) {
    e |= r.next() & 0x000f'ffff'ffe0'0000ull & ((u64{1} << (maxphy + 1)) - 1);
    if (r.chance(40)) e = (e & 0xfff) | random_table(r);  // large-page candidate that is really a table
    if (r.chance(10)) e |= 0x1000;                         // PAT
    if (r.chance(5)) e |= u64{1} << (13 + r.below(17));    // 13..29: reserved in some sizes
  } else {
    e |= random_table(r);
  }
  if (r.chance(12)) e |= u64{1} << 63;                     // XD
  if (r.chance(m == walk_model::mode::pae ? 3 : 40)) e |= (r.next() & 0xf) << 59;  // PK / ignored (reserved in PAE)
  if (r.chance(3)) e |= u64{1} << (maxphy + r.below(63 - maxphy));  // above MAXPHYADDR
  if (r.chance(3)) e |= r.next() & (u64{0x7ff} << 52);     // 62:52
  return e;
}

void fill(walk_model::memory& mm, rng_t& r, walk_model::mode m, unsigned maxphy) {
  const unsigned es = m == walk_model::mode::m32 ? 4 : 8;
  for (u64 a = 0x1000; a < mem_size; a += es) mm.write(a, es, random_entry(r, m, maxphy));
}

u64 random_va(rng_t& r, walk_model::mode m) {
  u64 v = r.next();
  if (m == walk_model::mode::m32 || m == walk_model::mode::pae) return v & 0xffffffffu;
  const unsigned top = m == walk_model::mode::l4 ? 47 : 56;
  if (r.chance(95)) {  // canonical
    const bool high = v >> 63;
    v = high ? (v | (~u64{0} << top)) : (v & ~(~u64{0} << top));
  }
  return v;
}

using walk_test::to_kind;

struct counts {
  u64 compared = 0, ok = 0, faults = 0, failures = 0, gp = 0;
};

counts run_guest_mode(walk_model::mode m, u64 seed) {
  counts n;
  rng_t r(seed);
  for (unsigned t = 0; t < trees && n.failures < 10; ++t) {
    walk_model::memory mm;
    mm.bytes.resize(mem_size);
    const unsigned maxphy = (m == walk_model::mode::m32) ? (r.chance(50) ? 36 : 40) : (r.chance(50) ? 46 : 52);
    fill(mm, r, m, maxphy);
    const u64 cr3 = m == walk_model::mode::pae ? (0x1000 * (1 + r.below(100)) + 32 * r.below(4)) : random_table(r) | (r.next() & 0xfff);
    if (m == walk_model::mode::pae) {
      // Mostly loadable PDPTEs: P + a table, sometimes not present or with a reserved bit.
      for (unsigned k = 0; k < 4; ++k) {
        u64 e = r.chance(10) ? (r.next() & ~u64{1}) : (1 | random_table(r) | (r.next() & 0xe18));
        if (r.chance(8)) e |= u64{1} << (1 + r.below(63));
        mm.write((cr3 & 0xffffffe0u) + 8 * k, 8, e);
      }
    }
    for (unsigned i = 0; i < walks_per_tree && n.failures < 10; ++i) {
      walk_model::controls c;
      c.wp = r.chance(50), c.smep = r.chance(50), c.smap = r.chance(50), c.nxe = r.chance(60);
      c.pke = r.chance(30), c.pse = r.chance(70), c.ac = r.chance(30);
      c.cpl = r.chance(50) ? 3 : 0;
      c.acc = static_cast<walk_model::access>(r.below(3));
      c.implicit = c.acc != walk_model::access::fetch && r.chance(10);
      c.shadow_stack = c.acc != walk_model::access::fetch && !c.implicit && r.chance(15);
      c.pkru = static_cast<std::uint32_t>(r.next());
      c.maxphyaddr = maxphy;
      c.gbpages = r.chance(70);
      c.amd = r.chance(20);
      c.pse36 = r.chance(60);
      const u64 va = random_va(r, m);

      const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::pe | (c.wp ? x86::cr0::wp : x86::cr0{});
      x86::cr4 cr4 = (c.smep ? x86::cr4::smep : x86::cr4{}) | (c.smap ? x86::cr4::smap : x86::cr4{}) |
                     (c.pke ? x86::cr4::pke : x86::cr4{}) | (c.pse ? x86::cr4::pse : x86::cr4{});
      x86::efer efer = c.nxe ? x86::efer::nxe : x86::efer{};
      x86::paging_mode pm = x86::paging_mode::two_level;
      if (m != walk_model::mode::m32) cr4 = cr4 | x86::cr4::pae;
      if (m == walk_model::mode::pae) pm = x86::paging_mode::pae;
      if (m == walk_model::mode::l4 || m == walk_model::mode::l5) {
        efer = efer | x86::efer::lme | x86::efer::lma;
        pm = m == walk_model::mode::l4 ? x86::paging_mode::four_level : x86::paging_mode::five_level;
      }
      if (m == walk_model::mode::l5) cr4 = cr4 | x86::cr4::la57;
      const auto root = x86::cr3_root(x86::cr3{cr3}, pm, maxphy);
      const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
      paging::cpu_properties props{.maxphyaddr = maxphy, .gbpages = c.gbpages, .amd_nonleaf_bit8 = c.amd, .pse36 = c.pse36};
      const paging::flat_view view(mm.bytes.data(), mm.bytes.size());

      u64 pdpte[4] = {};
      paging::pdpte_snapshot snap{};
      if (m == walk_model::mode::pae) {
        // Model of the PDPTE load (SDM 4.4.1): present entries must have 2:1, 8:5 and
        // 63:MAXPHYADDR clear, else #GP.
        bool gp = false;
        for (unsigned k = 0; k < 4; ++k) {
          mm.read((cr3 & 0xffffffe0u) + 8 * k, 8, pdpte[k]);
          const u64 e = pdpte[k];
          if ((e & 1) && (walk_model::any_bit_in(e, 2, 1) || walk_model::any_bit_in(e, 8, 5) ||
                          walk_model::any_bit_in(e, 63, maxphy)))
            gp = true;
        }
        const auto loaded = paging::load_pdptrs(x86::cr3{cr3}, view, maxphy);
        ++n.compared;
        if (gp != !loaded) {
          ++n.failures;
          ADD_FAILURE() << "PDPTE load: model #GP " << gp;
          continue;
        }
        if (gp) {
          ++n.gp;
          continue;
        }
        snap = *loaded;
      }

      paging::walk_request req{};
      req.linear = x86::gva{va};
      if (c.acc == walk_model::access::write) req.access = req.access | x86::pfec::write;
      if (c.acc == walk_model::access::fetch) req.access = req.access | x86::pfec::fetch;
      if (c.cpl == 3 && !c.implicit) req.access = req.access | x86::pfec::user;
      if (c.implicit) req.access = req.access | x86::pfec::implicit_access;
      if (c.shadow_stack) req.access = req.access | x86::pfec::ss;
      req.rflags = c.ac ? x86::rflags::ac : x86::rflags{};
      req.pkru = c.pkru;
      const paging::guest_walker w(mmu, props, snap);
      const auto model = walk_model::guest_walk(m, mm, cr3, pdpte, va, c);
      std::string why;
      // check(): the same checked walk without A/D writes (compared with the model below,
      // like walk()); translate(): the raw translation, which the model gives for a
      // supervisor read with no SMAP, SMEP or protection keys (no permission can fail).
      const auto checked = w.check(view, mmu, req);
      walk_model::controls raw = c;
      raw.cpl = 0, raw.acc = walk_model::access::read, raw.implicit = false, raw.shadow_stack = false;
      raw.smap = false, raw.smep = false, raw.pke = false;
      const auto raw_model = walk_model::guest_walk(m, mm, cr3, pdpte, va, raw);
      const auto translated = w.translate(view, x86::gva{va});
      ++n.compared;
      if (raw_model.k == walk_model::kind::ok) {
        if (!translated) why = "translate() faulted (kind " + std::to_string(int(translated.error().kind)) + ")";
        else if (translated->address.value() != raw_model.phys) why = "translate() address";
      } else if (translated) {
        why = "translate() succeeded";
      } else if (translated.error().kind != to_kind(raw_model.k)) {
        why = "translate() kind " + std::to_string(int(translated.error().kind));
      }
      auto v = view;
      const auto lib = w.walk(v, mmu, req);
      ++n.compared;
      if (checked.has_value() != lib.has_value() ||
          (checked && (checked->address.value() != lib->address.value() || checked->page_size() != lib->page_size())) ||
          (!checked && (checked.error().kind != lib.error().kind || checked.error().error_code.raw() != lib.error().error_code.raw())))
        why = "check() differs from walk()";
      if (!why.empty()) {
      } else if (model.k == walk_model::kind::ok) {
        ++n.ok;
        if (!lib) why = "walker faulted (kind " + std::to_string(int(lib.error().kind)) + ")";
        else if (lib->address.value() != model.phys) why = "address";
        else if (lib->page_size() != model.page_size) why = "page size";
      } else {
        ++n.faults;
        if (lib) why = "walker succeeded";
        else if (lib.error().kind != to_kind(model.k)) why = "kind " + std::to_string(int(lib.error().kind));
        else if (lib.error().error_code.raw() != model.error_code) why = "error code " + std::to_string(lib.error().error_code.raw());
        else if (model.k != walk_model::kind::permission && model.k != walk_model::kind::pkey &&
                 model.k != walk_model::kind::non_canonical && lib.error().level != model.level)
          why = "level";
        else if ((model.k == walk_model::kind::permission || model.k == walk_model::kind::pkey) &&
                 lib.error().leaf_level != model.level)
          why = "leaf level";
      }
      if (!why.empty()) {
        ++n.failures;
        ADD_FAILURE() << "mode " << int(m) << " seed " << seed << " tree " << t << " walk " << i << " va " << std::hex
                      << va << " cr3 " << cr3 << std::dec << ": " << why << " (model kind " << int(model.k)
                      << " level " << model.level << " ec " << model.error_code << ")";
      }
    }
  }
  return n;
}

void report(const char* name, const counts& n) {
  std::printf("random %s: %llu walks compared (%llu translations, %llu faults, %llu PDPTE #GP)\n", name,
              static_cast<unsigned long long>(n.compared), static_cast<unsigned long long>(n.ok),
              static_cast<unsigned long long>(n.faults), static_cast<unsigned long long>(n.gp));
}

TEST(WalkRandom, ThirtyTwoBit) {
  const auto n = run_guest_mode(walk_model::mode::m32, 0x3232);
  report("32-bit", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);  // the trees really translate
}
TEST(WalkRandom, Pae) {
  const auto n = run_guest_mode(walk_model::mode::pae, 0xae);
  report("PAE", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);
}
TEST(WalkRandom, FourLevel) {
  const auto n = run_guest_mode(walk_model::mode::l4, 0x4444);
  report("4-level", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);
}
TEST(WalkRandom, FiveLevel) {
  const auto n = run_guest_mode(walk_model::mode::l5, 0x5555);
  report("5-level", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);
}

// ---- EPT ----

u64 random_ept_entry(rng_t& r, unsigned maxphy) {
  if (r.chance(5)) return 0;
  u64 e = 0;
  const unsigned perm = r.below(100);
  if (perm < 70) e |= 7;
  else if (perm < 85) e |= 1 | (r.next() & 6);
  else e |= r.next() & 7;  // includes write-only and execute-only
  if (r.chance(30)) e |= 0x400;  // XU
  if (r.chance(12)) e |= 0x80;   // PS
  if (r.chance(90)) e |= 6u << 3;
  else e |= (r.next() & 7) << 3;  // memory type, some reserved
  if (r.chance(30)) e |= 0x40;    // ignore PAT
  e |= r.next() & 0x300;          // A, D
  if (e & 0x80) {
    e |= r.next() & 0x000f'ffff'ffe0'0000ull & ((u64{1} << (maxphy + 1)) - 1);
    if (r.chance(40)) e = (e & 0xfff) | random_table(r);
  } else {
    e |= random_table(r);
  }
  if (r.chance(90) && !(e & 0x80)) e &= ~u64{0x78};  // non-leaf entries usually have 6:3 clear
  if (r.chance(2)) e |= u64{1} << (maxphy + r.below(52 - maxphy + 1)) & 0x000f'ffff'ffff'ffffull;
  if (r.chance(10)) e |= u64{1} << 63;  // suppress #VE (ignored)
  return e;
}

counts run_ept(unsigned levels, u64 seed) {
  counts n;
  rng_t r(seed);
  for (unsigned t = 0; t < trees && n.failures < 10; ++t) {
    walk_model::memory mm;
    mm.bytes.resize(mem_size);
    const unsigned maxphy = r.chance(50) ? 39 : 52;
    for (u64 a = 0x1000; a < mem_size; a += 8) mm.write(a, 8, random_ept_entry(r, maxphy));
    const u64 root = 0x1000 * (1 + r.below(100));
    for (unsigned i = 0; i < walks_per_tree && n.failures < 10; ++i) {
      walk_model::ept_controls c;
      c.execute_only = r.chance(50), c.mbec = r.chance(40), c.ad = r.chance(50);
      c.page_2m = r.chance(90), c.page_1g = r.chance(70);
      c.maxphyaddr = maxphy;
      c.levels = levels;
      // The access class: the final access (any access), a guest paging-structure access
      // (a read, or the write of a guest A/D update) or a PDPTE load (a read).
      const unsigned origin = r.below(10);
      c.paging_structure = origin >= 6 && origin < 9;
      c.pdpte_load = origin == 9;
      // (A PDPTE load is a read without a linear address; a paging-structure access is no
      // fetch: anything else is fault_kind::invalid_request, tested in walk_adopt_test.)
      const unsigned a = c.pdpte_load ? 0 : r.below(c.paging_structure ? 2 : 3);
      c.read = a == 0, c.write = a == 1, c.fetch = a == 2;
      c.user_address = r.chance(50);
      c.linear_valid = !c.pdpte_load && r.chance(60);
      u64 gpa = r.next() & ((u64{1} << (levels == 4 ? 48 : 57)) - 1);

      paging::ept_capabilities caps{};
      caps.maxphyaddr = maxphy;
      caps.execute_only = c.execute_only;
      caps.mbec = c.mbec;
      caps.page_2m = c.page_2m;
      caps.page_1g = c.page_1g;
      const auto w = paging::ept_walker::make(paging::make_ept_pointer(x86::hpa{root}, levels, c.ad), caps);
      if (!w) {
        ++n.failures;
        ADD_FAILURE() << "EPTP rejected";
        continue;
      }
      paging::ept_request req{};
      req.address = x86::gpa{gpa};
      req.access = c.read ? paging::ept_access::read : c.write ? paging::ept_access::write : paging::ept_access::fetch;
      if (c.user_address) req.access = req.access | paging::ept_access::user_address;
      req.origin = c.paging_structure ? paging::ept_origin::paging_structure
                   : c.pdpte_load     ? paging::ept_origin::pdpte_load
                                      : paging::ept_origin::final_access;
      req.linear_valid = c.linear_valid;
      req.linear = x86::gva{0x7000'1234};
      const paging::flat_view view(mm.bytes.data(), mm.bytes.size());
      const auto lib = w->walk(view, req);
      const auto model = walk_model::ept_walk(mm, root, gpa, c);
      ++n.compared;
      std::string why;
      if (model.k == walk_model::ept_kind::ok) {
        ++n.ok;
        if (!lib) why = "walker faulted (kind " + std::to_string(int(lib.error().kind)) + ")";
        else if (lib->address.value() != model.phys) why = "address";
        else if (lib->page_size() != model.page_size) why = "page size";
        else if (lib->memory_type != model.memtype) why = "memory type";
      } else {
        ++n.faults;
        if (lib) {
          why = "walker succeeded";
        } else {
          const auto k = lib.error().kind;
          const bool kind_ok = model.k == walk_model::ept_kind::violation
                                   ? (k == paging::fault_kind::not_present || k == paging::fault_kind::permission)
                               : model.k == walk_model::ept_kind::misconfig ? k == paging::fault_kind::ept_misconfig
                                                                             : k == paging::fault_kind::unbacked;
          if (!kind_ok) why = "kind " + std::to_string(int(k));
          else if (model.k == walk_model::ept_kind::violation && lib.error().qualification.raw() != model.qual)
            why = "qualification " + std::to_string(lib.error().qualification.raw());
          else if (k != paging::fault_kind::permission && lib.error().level != model.level) why = "level";
          else if (k == paging::fault_kind::permission && lib.error().leaf_level != model.level) why = "leaf level";
        }
      }
      if (!why.empty()) {
        ++n.failures;
        ADD_FAILURE() << "EPT" << levels << " seed " << seed << " tree " << t << " walk " << i << " gpa " << std::hex
                      << gpa << std::dec << ": " << why << " (model kind " << int(model.k) << " level " << model.level
                      << " qual " << model.qual << ")";
      }
    }
  }
  return n;
}

TEST(WalkRandom, EptFourLevel) {
  const auto n = run_ept(4, 0xe474);
  report("EPT 4-level", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);
}
TEST(WalkRandom, EptFiveLevel) {
  const auto n = run_ept(5, 0xe575);
  report("EPT 5-level", n);
  EXPECT_EQ(n.failures, 0u);
  EXPECT_GT(n.ok, 1000u);
}

}  // namespace
