// SPDX-License-Identifier: MIT
// Randomised nested walks over NPT compared with the rule model of npt_model.hpp: every host
// format (legacy 32-bit, PAE, 4-level, 5-level) under every guest format, random nested and
// guest entries (present or not, R/W, U/S, NX, large pages, reserved bits, tables outside
// memory), random host controls (EFER.NXE, CR4.PSE, MAXPHYADDR, 1 GiB pages, PSE-36) and
// random guest controls and accesses. Compared per walk: the outcome (translation, guest
// fault with its #PF error code, #NPF with EXITINFO1/EXITINFO2 built by svm::npf_from_fault,
// unbacked) and every A/D flag written (guest and nested), nothing else written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <hvkit/paging/guest_memory.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/nested.hpp>
#include <hvkit/paging/npt.hpp>
#include <hvkit/paging/walker.hpp>
#include <hvkit/svm/npf.hpp>
#include <hvkit/x86/cr3.hpp>

#include "npt_model.hpp"
#include "walk_kind.hpp"

namespace {

using namespace hvkit;
using npt_model::u64;
using walk_model::mode;

// Host memory: the guest's memory (its page tables) at 0-7FFFFh, the nested tables at
// 200000h-23FFFFh (four pages per level), nothing else backed.
constexpr u64 guest_area = 0x80000;
constexpr u64 npt_area = 0x200000;
constexpr u64 mem_size = 0x240000;
constexpr unsigned trees = 9;
constexpr unsigned walks_per_tree = 2500;

struct rng_t {
  std::mt19937_64 g;
  explicit rng_t(u64 seed) : g(seed) {}
  u64 next() { return g(); }
  unsigned below(unsigned n) { return static_cast<unsigned>(g() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }
};

// A page of nested tables for `level` (1 = PT).
u64 npt_page(unsigned level, unsigned k) { return npt_area + 0x1000 * (4 * (level - 1) + k); }

// A random nested entry of the host format at `level`. `noise` (0-2) scales how often an
// entry is broken (not present, read-only, supervisor, NX, a reserved bit, a table outside
// memory): trees with noise 0 translate most addresses, the others fault in every way.
u64 npt_entry(rng_t& r, npt_model::host_mode hm, unsigned level, unsigned maxphy, unsigned noise) {
  const bool legacy = hm == npt_model::host_mode::legacy;
  const auto bad = [&](unsigned percent) { return r.chance(percent * noise); };
  if (bad(2)) return 0;
  if (bad(1)) return r.next() & ~u64{1} & (legacy ? 0xffffffffu : ~u64{0});
  if (hm == npt_model::host_mode::pae && level == 3) {
    // A PAE PDPTE: P, PWT, PCD and the page directory; sometimes a reserved bit.
    u64 e = 1 | (r.next() & 0x18) | (bad(2) ? 0x400000 + 0x1000 * r.below(8) : npt_page(2, r.below(4)));
    if (bad(3)) {
      const unsigned rb[] = {1, 2, 5, 6, 7, 8, maxphy + r.below(64 - maxphy)};
      e |= u64{1} << rb[r.below(7)];
    }
    return e;
  }
  u64 e = 1;
  if (!bad(3)) e |= 2;
  if (!bad(3)) e |= 4;
  e |= r.next() & 0x178;  // PWT, PCD, A, D, G
  const bool can_large = level == 2 || (level == 3 && !legacy && hm != npt_model::host_mode::pae);
  if (level > 1 && (can_large ? r.chance(15) : bad(1))) e |= 0x80;  // PS (reserved where no large page)
  u64 target = 0;
  if (level == 1 || (e & 0x80)) {
    if (e & 0x80) {
      target = !bad(6) ? 0 : (u64{1} << (30 + r.below(legacy ? 2 : 12)));  // base 0, or high
      if (legacy && r.chance(30)) target |= (r.next() & 0xff) << 13;        // PSE-36 bits
      if (bad(3)) target |= u64{1} << (13 + r.below(17));                 // reserved in some sizes
    } else {
      target = !bad(2) ? 0x1000 * r.below(guest_area / 0x1000) : 0x400000 + 0x1000 * r.below(8);
    }
  } else {
    target = !bad(2) ? npt_page(level - 1, r.below(4)) : 0x400000 + 0x1000 * r.below(8);  // outside memory
  }
  e |= target;
  if (legacy) return e & 0xffffffffu;
  if (bad(3)) e |= u64{1} << 63;                                  // NX
  if (bad(1)) e |= u64{1} << (maxphy + r.below(63 - maxphy));      // above MAXPHYADDR
  if (bad(1)) e |= u64{1} << 8;                                   // AMD: MBZ in PML4E/PML5E
  return e;
}

// A random guest entry (guest format `m`): tables and pages in the guest's memory 0-FFFFFh.
u64 guest_entry(rng_t& r, mode m, unsigned maxphy) {
  if (r.chance(3)) return 0;
  if (r.chance(2)) return r.next() & ~u64{1} & (m == mode::m32 ? 0xffffffffu : ~u64{0});
  u64 e = 1;
  if (r.chance(85)) e |= 2;
  if (r.chance(80)) e |= 4;
  e |= r.next() & 0x178;
  if (r.chance(8)) e |= 0x80;
  const u64 page = r.chance(93) ? 0x1000 * (1 + r.below(guest_area / 0x1000 - 1)) : 0x1000 * r.below(0x400);
  if (m == mode::m32) {
    e |= page;
    if ((e & 0x80) && r.chance(20)) e |= (r.next() & 0x3) << 13;
    return e & 0xffffffffu;
  }
  e |= page;
  if ((e & 0x80) && r.chance(5)) e |= u64{1} << (13 + r.below(17));
  if (r.chance(10)) e |= u64{1} << 63;
  if (r.chance(2)) e |= u64{1} << (maxphy + r.below(63 - maxphy));
  return e;
}

u64 random_va(rng_t& r, mode m) {
  u64 v = r.next();
  if (m == mode::m32 || m == mode::pae) return v & 0xffffffffu;
  const unsigned top = m == mode::l4 ? 47 : 56;
  if (r.chance(97)) {
    const bool high = v >> 63;
    v = high ? (v | (~u64{0} << top)) : (v & ~(~u64{0} << top));
  }
  return v;
}

// flat_memory that logs every successful compare-exchange (the A/D writes).
struct logged_memory {
  paging::flat_memory inner;
  std::vector<std::pair<u64, unsigned>>* log;
  [[nodiscard]] result<std::uint32_t, paging::memory_error> read32(x86::gpa a) const { return inner.read32(a); }
  [[nodiscard]] result<std::uint64_t, paging::memory_error> read64(x86::gpa a) const { return inner.read64(a); }
  [[nodiscard]] result<bool, paging::memory_error> cmpxchg32(x86::gpa a, std::uint32_t e, std::uint32_t d) {
    const auto r = inner.cmpxchg32(a, e, d);
    if (r && *r) log->push_back({a.value(), 4});
    return r;
  }
  [[nodiscard]] result<bool, paging::memory_error> cmpxchg64(x86::gpa a, std::uint64_t e, std::uint64_t d) {
    const auto r = inner.cmpxchg64(a, e, d);
    if (r && *r) log->push_back({a.value(), 8});
    return r;
  }
};
static_assert(paging::writable_guest_memory<logged_memory>);

struct counts {
  u64 compared = 0, ok = 0, guest = 0, npf_table = 0, npf_final = 0, unbacked = 0, failures = 0;
};

template <class F>
constexpr npt_model::host_mode host_mode_of() {
  if constexpr (F::mode == x86::paging_mode::two_level) return npt_model::host_mode::legacy;
  else if constexpr (F::mode == x86::paging_mode::pae) return npt_model::host_mode::pae;
  else if constexpr (F::mode == x86::paging_mode::four_level) return npt_model::host_mode::long4;
  else return npt_model::host_mode::long5;
}
template <class F>
constexpr mode guest_mode_of() {
  if constexpr (F::mode == x86::paging_mode::two_level) return mode::m32;
  else if constexpr (F::mode == x86::paging_mode::pae) return mode::pae;
  else if constexpr (F::mode == x86::paging_mode::four_level) return mode::l4;
  else return mode::l5;
}

template <class GuestFormat, class HostFormat>
counts run(u64 seed) {
  constexpr npt_model::host_mode hm = host_mode_of<HostFormat>();
  constexpr mode gm = guest_mode_of<GuestFormat>();
  constexpr unsigned host_levels = HostFormat::levels;
  counts n;
  rng_t r(seed);
  for (unsigned t = 0; t < trees && n.failures < 10; ++t) {
    npt_model::memory mm;
    mm.bytes.assign(mem_size, 0);
    const unsigned maxphy = hm == npt_model::host_mode::legacy ? (r.chance(50) ? 36 : 40)
                                                               : (r.chance(50) ? 40 + r.below(9) : 52);
    // Nested tables: four pages per level, each entry for its level.
    const unsigned es = hm == npt_model::host_mode::legacy ? 4 : 8;
    const unsigned noise = t % 3;
    for (unsigned level = 1; level <= host_levels; ++level)
      for (unsigned k = 0; k < 4; ++k)
        for (u64 a = 0; a < 0x1000; a += es)
          mm.write(npt_page(level, k) + a, es, npt_entry(r, hm, level, maxphy, noise));
    // Guest tables: the guest's memory, every entry random.
    const unsigned ges = gm == mode::m32 ? 4 : 8;
    for (u64 a = 0x1000; a < guest_area; a += ges) mm.write(a, ges, guest_entry(r, gm, maxphy));
    for (unsigned i = 0; i < walks_per_tree && n.failures < 10; ++i) {
      // nCR3: a top-level page (PAE: a 32-byte PDPT in it).
      u64 ncr3 = npt_page(host_levels, r.below(4));
      if (hm == npt_model::host_mode::pae) ncr3 += 32 * r.below(128);
      npt_model::host h;
      h.m = hm;
      h.nxe = r.chance(70);
      h.pse = r.chance(70);
      h.maxphyaddr = maxphy;
      h.gbpages = r.chance(70);
      h.amd_bit8 = r.chance(50);
      h.id_without_nxe = r.chance(50);
      h.pse36 = r.chance(80);

      walk_model::controls c;
      c.wp = r.chance(50), c.smep = r.chance(30), c.smap = r.chance(30), c.nxe = r.chance(60);
      c.pke = r.chance(20), c.pse = r.chance(70), c.ac = r.chance(30);
      c.cpl = r.chance(50) ? 3 : 0;
      c.acc = static_cast<walk_model::access>(r.below(3));
      c.implicit = c.acc != walk_model::access::fetch && r.chance(5);
      c.pkru = static_cast<std::uint32_t>(r.next());
      c.maxphyaddr = maxphy;
      c.gbpages = h.gbpages;
      c.amd = h.amd_bit8;
      c.pse36 = h.pse36;
      const u64 gcr3 = gm == mode::pae ? 0x1000 * (1 + r.below(127)) + 32 * r.below(128)
                                       : 0x1000 * (1 + r.below(127)) | (r.next() & 0xfe7);
      u64 pdpte[4] = {};
      for (auto& p : pdpte) p = r.chance(90) ? (1 | 0x1000 * (1 + r.below(127)) | (r.next() & 0xe18)) : 0;
      const u64 va = random_va(r, gm);

      // The model first (it does not write).
      const auto model = npt_model::nested_walk(mm, h, ncr3, gm, gcr3, pdpte, va, c);
      std::vector<std::pair<u64, u64>> before;  // expected writes: address, value before
      for (const auto& [a, w] : model.writes) {
        u64 v = 0;
        mm.read(a, w.first, v);
        before.push_back({a, v});
      }

      // hvkit.
      const x86::cr0 cr0 = x86::cr0::pg | x86::cr0::pe | (c.wp ? x86::cr0::wp : x86::cr0{});
      x86::cr4 cr4 = (c.smep ? x86::cr4::smep : x86::cr4{}) | (c.smap ? x86::cr4::smap : x86::cr4{}) |
                     (c.pke ? x86::cr4::pke : x86::cr4{}) | (c.pse ? x86::cr4::pse : x86::cr4{});
      x86::efer efer = c.nxe ? x86::efer::nxe : x86::efer{};
      if (gm != mode::m32) cr4 = cr4 | x86::cr4::pae;
      if (gm == mode::l4 || gm == mode::l5) efer = efer | x86::efer::lme | x86::efer::lma;
      if (gm == mode::l5) cr4 = cr4 | x86::cr4::la57;
      const auto root = x86::cr3_root(x86::cr3{gcr3}, GuestFormat::mode, maxphy);
      const auto mmu = paging::mmu_context::make(cr0, cr4, efer, root);
      const paging::cpu_properties props{.maxphyaddr = maxphy, .gbpages = h.gbpages, .amd_nonleaf_bit8 = h.amd_bit8, .pse36 = h.pse36,
                                         .npf_fetch_id_without_nxe = h.id_without_nxe};
      paging::pdpte_snapshot snap{};
      for (unsigned k = 0; k < 4; ++k) snap.entries[k] = pdpte[k];
      snap.pdpt = x86::gpa{gcr3 & 0xffffffe0u};
      snap.loaded = true;  // the PDPTE registers as a MOV to CR3 left them (pdpte[] above)
      const paging::basic_walker<GuestFormat> g(mmu, props, snap);
      const paging::npt_walker<HostFormat> npt(x86::hpa{ncr3}, paging::npt_host{h.nxe, h.pse}, props);
      const paging::nested_walker<GuestFormat, paging::npt_walker<HostFormat>> nw(g, npt);
      paging::walk_request req{};
      req.linear = x86::gva{va};
      if (c.acc == walk_model::access::write) req.access = req.access | x86::pfec::write;
      if (c.acc == walk_model::access::fetch) req.access = req.access | x86::pfec::fetch;
      if (c.cpl == 3 && !c.implicit) req.access = req.access | x86::pfec::user;
      if (c.implicit) req.access = req.access | x86::pfec::implicit_access;
      req.rflags = c.ac ? x86::rflags::ac : x86::rflags{};
      req.pkru = c.pkru;
      std::vector<std::pair<u64, unsigned>> log;
      logged_memory mem{paging::flat_memory(mm.bytes.data(), mm.bytes.size()), &log};
      const auto lib = nw.walk(mem, mmu, req);

      ++n.compared;
      std::string why;
      switch (model.k) {
        case npt_model::nested_kind::ok:
          ++n.ok;
          if (!lib) why = "walk faulted (kind " + std::to_string(int(lib.error().kind)) + " stage " +
                          std::to_string(int(lib.error().stage)) + ")";
          else if (lib->l2_gpa().value() != model.l2) why = "l2 address";
          else if (lib->l1_address().value() != model.l1) why = "l1 address";
          break;
        case npt_model::nested_kind::guest_fault:
          ++n.guest;
          if (lib) why = "walk succeeded, model: guest fault";
          else if (lib.error().stage != paging::walk_stage::guest) why = "stage " + std::to_string(int(lib.error().stage));
          else if (lib.error().kind != walk_test::to_kind(model.guest.k)) why = "kind " + std::to_string(int(lib.error().kind));
          else if (lib.error().error_code.raw() != model.guest.error_code)
            why = "#PF error code " + std::to_string(lib.error().error_code.raw());
          break;
        case npt_model::nested_kind::npf: {
          ((model.info1 >> 32) & 1 ? n.npf_final : n.npf_table) += 1;
          if (lib) {
            why = "walk succeeded, model: #NPF";
            break;
          }
          const auto e = svm::npf_from_fault(lib.error());
          if (!e) why = "no #NPF (kind " + std::to_string(int(lib.error().kind)) + " stage " +
                        std::to_string(int(lib.error().stage)) + ")";
          else if (e->error.raw() != model.info1) why = "EXITINFO1 " + std::to_string(e->error.raw());
          else if (e->address.value() != model.info2) why = "EXITINFO2 " + std::to_string(e->address.value());
          break;
        }
        case npt_model::nested_kind::unbacked:
          ++n.unbacked;
          if (lib) why = "walk succeeded, model: unbacked";
          else if (lib.error().kind != paging::fault_kind::unbacked) why = "kind " + std::to_string(int(lib.error().kind));
          break;
      }
      // Writes: exactly the model's A/D flags.
      if (why.empty()) {
        for (const auto& [a, v] : before) {
          u64 now = 0;
          mm.read(a, model.writes.at(a).first, now);
          if (now != (v | model.writes.at(a).second)) why = "A/D at " + std::to_string(a);
        }
        for (const auto& [a, size] : log)
          if (!model.writes.count(a)) why = "unexpected write at " + std::to_string(a);
      }
      if (!why.empty()) {
        ++n.failures;
        ADD_FAILURE() << "host " << int(hm) << " guest " << int(gm) << " seed " << seed << " tree " << t << " walk "
                      << i << std::hex << " va " << va << " gcr3 " << gcr3 << " ncr3 " << ncr3 << std::dec << ": "
                      << why << " (model kind " << int(model.k) << " guest kind " << int(model.guest.k) << " info1 "
                      << std::hex << model.info1 << " info2 " << model.info2 << std::dec << ")";
      }
    }
  }
  return n;
}

counts total{};

void report(const char* name, const counts& n) {
  std::printf("npt random %s: %llu nested walks compared (%llu translations, %llu guest faults, %llu #NPF on guest "
              "tables, %llu #NPF on the final access, %llu unbacked)\n",
              name, static_cast<unsigned long long>(n.compared), static_cast<unsigned long long>(n.ok),
              static_cast<unsigned long long>(n.guest), static_cast<unsigned long long>(n.npf_table),
              static_cast<unsigned long long>(n.npf_final), static_cast<unsigned long long>(n.unbacked));
  total.compared += n.compared, total.ok += n.ok, total.guest += n.guest, total.npf_table += n.npf_table;
  total.npf_final += n.npf_final, total.unbacked += n.unbacked;
}

template <class Host>
void run_host(const char* host_name, u64 seed) {
  const std::string h(host_name);
  const auto a = run<paging::format::ia32, Host>(seed + 1);
  report((h + " host, 32-bit guest").c_str(), a);
  const auto b = run<paging::format::pae, Host>(seed + 2);
  report((h + " host, PAE guest").c_str(), b);
  const auto c = run<paging::format::ia32e<4>, Host>(seed + 3);
  report((h + " host, 4-level guest").c_str(), c);
  const auto d = run<paging::format::ia32e<5>, Host>(seed + 4);
  report((h + " host, 5-level guest").c_str(), d);
  EXPECT_EQ(a.failures + b.failures + c.failures + d.failures, 0u);
  // Every outcome class occurs (else the generator lost a case).
  for (const counts* x : {&a, &b, &c, &d}) {
    EXPECT_GT(x->ok, 0u);
    EXPECT_GT(x->guest, 0u);
    EXPECT_GT(x->npf_table, 0u);
    EXPECT_GT(x->npf_final, 0u);
  }
}

TEST(NptRandom, LegacyHost) { run_host<paging::format::ia32>("32-bit", 0x1000); }
TEST(NptRandom, PaeHost) { run_host<paging::format::pae>("PAE", 0x2000); }
TEST(NptRandom, FourLevelHost) { run_host<paging::format::ia32e<4>>("4-level", 0x3000); }
TEST(NptRandom, FiveLevelHost) { run_host<paging::format::ia32e<5>>("5-level", 0x4000); }

}  // namespace
