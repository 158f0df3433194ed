// SPDX-License-Identifier: MIT
// Exhaustive flag matrix for 4-level paging against the rule model of walk_model.hpp:
// every combination of P/RW/US/NX/A/D/PS and a reserved bit in one entry (each level in
// turn) with CR0.WP, CR4.SMEP/SMAP/PKE, EFER.NXE, CPL, RFLAGS.AC, the access kind,
// implicit and shadow-stack accesses and PKRU; and every combination of RW/US/NX across all
// four levels, plus every combination of RW/US with the leaf's D set for shadow-stack
// accesses (shadow-stack pages).
// Checks outcome kind, #PF error code, address, page size and the A/D flags in memory.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdint>
#include <vector>

#include <hvkit/paging/ept_entry.hpp>
#include <hvkit/paging/ept_walker.hpp>
#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/walker.hpp>

#include "walk_kind.hpp"
#include "walk_model.hpp"

namespace {

using namespace hvkit;
using walk_model::u64;

constexpr unsigned maxphy = 46;
constexpr u64 rsvd_bit = u64{1} << 48;  // in 51:MAXPHYADDR
constexpr u64 pml4 = 0x1000, pdpt = 0x2000, pd = 0x3000, pt = 0x4000;
// Indices 3, 5, 7, 9 and offset 0xabc.
constexpr u64 va = (u64{3} << 39) | (u64{5} << 30) | (u64{7} << 21) | (u64{9} << 12) | 0xabc;
constexpr u64 page_4k = 0x2345'6789'a000, page_2m = 0x1234'5660'0000, page_1g = 0x1240'0000'0000;
constexpr u64 leaf_key = 1;  // protection key of the leaf

struct fixture {
  walk_model::memory model_mem;
  std::vector<std::uint8_t> buf;
  fixture() : buf(0x6000) { model_mem.bytes.resize(0x6000); }

  // flags: bit0 P, 1 RW, 2 US, 3 NX, 4 A, 5 D, 6 PS, 7 reserved bit.
  static u64 entry(unsigned level, unsigned flags) {
    u64 e = 0;
    if (flags & 1) e |= 1;
    if (flags & 2) e |= 2;
    if (flags & 4) e |= 4;
    if (flags & 8) e |= u64{1} << 63;
    if (flags & 16) e |= 0x20;
    if (flags & 32) e |= 0x40;
    const bool ps = flags & 64;
    if (ps) e |= 0x80;
    if (flags & 128) e |= rsvd_bit;
    switch (level) {
      case 4: e |= pdpt; break;
      case 3: e |= ps ? (page_1g | 0x1000) : pd; break;  // PAT (bit 12) set on the large page
      case 2: e |= ps ? (page_2m | 0x1000) : pt; break;
      default: e |= page_4k | (leaf_key << 59); break;
    }
    if (level == 3 && ps) e |= leaf_key << 59;
    if (level == 2 && ps) e |= leaf_key << 59;
    return e;
  }
  void store(u64 addr, u64 v) {
    for (unsigned i = 0; i < 8; ++i) buf[addr + i] = static_cast<std::uint8_t>(v >> (8 * i));
    model_mem.write(addr, 8, v);
  }
  u64 before[5] = {};
  static constexpr u64 slot[5] = {0, pt + 9 * 8, pd + 7 * 8, pdpt + 5 * 8, pml4 + 3 * 8};
  u64 load(u64 addr) const {
    u64 v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= u64{buf[addr + i]} << (8 * i);
    return v;
  }
  void set_tables(const unsigned flags[5]) {
    for (unsigned l = 1; l <= 4; ++l) {
      before[l] = entry(l, flags[l]);
      store(slot[l], before[l]);
    }
  }
};

struct case_controls {
  walk_model::controls c;
  x86::cr0 cr0;
  x86::cr4 cr4;
  x86::efer efer;
  x86::pfec access;
  x86::rflags rflags;
};

// Every control combination: WP, SMEP, SMAP, NXE, PKE, CPL, AC, access, implicit, PKRU.
std::vector<case_controls> all_controls(bool with_pke_and_implicit) {
  std::vector<case_controls> out;
  for (unsigned m = 0; m < 32; ++m) {
    const bool wp = m & 1, smep = m & 2, smap = m & 4, nxe = m & 8, pke = m & 16;
    if (pke && !with_pke_and_implicit) continue;
    for (unsigned cpl : {0u, 3u})
      for (bool ac : {false, true})
        for (auto acc : {walk_model::access::read, walk_model::access::write, walk_model::access::fetch})
          for (unsigned variant = 0; variant < 3; ++variant) {
            // 0 plain, 1 implicit supervisor, 2 shadow-stack access (CET) for reads/writes.
            const bool implicit = variant == 1, shadow_stack = variant == 2;
            if (implicit && (acc == walk_model::access::fetch || !with_pke_and_implicit)) continue;
            if (shadow_stack && acc == walk_model::access::fetch) continue;
            const unsigned npkru = pke ? 3 : 1;
            for (unsigned p = 0; p < npkru; ++p) {
              case_controls k{};
              k.c.wp = wp, k.c.smep = smep, k.c.smap = smap, k.c.nxe = nxe, k.c.pke = pke;
              k.c.cpl = cpl, k.c.ac = ac, k.c.acc = acc, k.c.implicit = implicit, k.c.shadow_stack = shadow_stack;
              k.c.pkru = p == 0 ? 0u : (p == 1 ? 1u << (2 * leaf_key) : 2u << (2 * leaf_key));
              k.c.maxphyaddr = maxphy;
              k.cr0 = x86::cr0::pg | x86::cr0::pe | (wp ? x86::cr0::wp : x86::cr0{});
              k.cr4 = x86::cr4::pae | (smep ? x86::cr4::smep : x86::cr4{}) | (smap ? x86::cr4::smap : x86::cr4{}) |
                      (pke ? x86::cr4::pke : x86::cr4{});
              k.efer = x86::efer::lme | x86::efer::lma | (nxe ? x86::efer::nxe : x86::efer{});
              x86::pfec a{};
              if (acc == walk_model::access::write) a = a | x86::pfec::write;
              if (acc == walk_model::access::fetch) a = a | x86::pfec::fetch;
              if (cpl == 3 && !implicit) a = a | x86::pfec::user;
              if (implicit) a = a | x86::pfec::implicit_access;
              if (shadow_stack) a = a | x86::pfec::ss;
              k.access = a;
              k.rflags = ac ? x86::rflags::ac | x86::rflags::fixed1 : x86::rflags::fixed1;
              out.push_back(k);
            }
          }
  }
  return out;
}

using walk_test::to_kind;

// Runs one case; returns false (after recording a failure) on mismatch.
bool run_case(fixture& fx, const unsigned flags[5], const case_controls& k, bool update_ad) {
  fx.set_tables(flags);
  const auto model = walk_model::guest_walk(walk_model::mode::l4, fx.model_mem, pml4, nullptr, va, k.c);

  auto mmu = paging::mmu_context::make(k.cr0, k.cr4, k.efer, x86::gpa{pml4});
  paging::cpu_properties props{};
  props.maxphyaddr = maxphy;
  const paging::walker_4level w(mmu, props);
  paging::flat_memory mem(fx.buf.data(), fx.buf.size());
  paging::walk_request req{};
  req.linear = x86::gva{va};
  req.access = k.access;
  req.rflags = k.rflags;
  req.pkru = k.c.pkru;
  req.update_ad = update_ad;
  const auto r = w.walk(mem, mmu, req);

  bool ok = true;
  auto fail = [&](const char* what) {
    if (ok)
      ADD_FAILURE() << what << ": flags " << flags[4] << "/" << flags[3] << "/" << flags[2] << "/" << flags[1]
                    << " wp" << k.c.wp << " smep" << k.c.smep << " smap" << k.c.smap << " nxe" << k.c.nxe << " pke"
                    << k.c.pke << " cpl" << k.c.cpl << " ac" << k.c.ac << " acc" << int(k.c.acc) << " impl"
                    << k.c.implicit << " ss" << k.c.shadow_stack << " pkru" << k.c.pkru << " model kind " << int(model.k) << " ec "
                    << model.error_code << " lib "
                    << (r ? std::string("ok") : std::to_string(int(r.error().kind)) + " ec " +
                                                     std::to_string(r.error().error_code.raw()));
    ok = false;
  };
  if (model.k == walk_model::kind::ok) {
    if (!r) {
      fail("model ok, walker faulted");
      return false;
    }
    if (r->address.value() != model.phys) fail("address");
    if (r->page_size() != model.page_size) fail("page size");
    if (r->path.count != model.entries) fail("entries walked");
    // A/D: A on every entry used, D on the leaf of a write; nothing without update_ad.
    for (unsigned i = 0; i < model.entries; ++i) {
      const u64 before = r->path.values[i];
      const u64 now = fx.load(model.entry_addr[i]);
      u64 expect = before;
      if (update_ad) {
        expect |= 0x20;
        if (model.entry_addr[i] == model.leaf_addr && k.c.acc == walk_model::access::write) expect |= 0x40;
      }
      if (now != expect) fail("A/D flags");
    }
  } else {
    if (r) {
      fail("model faulted, walker ok");
      return false;
    }
    if (r.error().kind != to_kind(model.k)) fail("kind");
    if (r.error().error_code.raw() != model.error_code) fail("error code");
    if ((model.k == walk_model::kind::not_present || model.k == walk_model::kind::reserved) &&
        r.error().level != model.level)
      fail("level");
    // The entry that maps the page, for protection faults (the model stops there); 0 otherwise.
    const bool protection = model.k == walk_model::kind::permission || model.k == walk_model::kind::pkey;
    if (r.error().leaf_level != (protection ? model.level : 0u)) fail("leaf level");
    // Nothing is written on a faulting walk.
    for (unsigned l = 1; l <= 4; ++l)
      if (fx.load(fixture::slot[l]) != fx.before[l]) fail("a faulting walk wrote memory");
  }
  return ok;
}

constexpr unsigned benign = 1 | 2 | 4 | 16;  // P, RW, US, A

TEST(WalkMatrix, OneEntryAllFlagsEveryLevelAllControls) {
  fixture fx;
  const auto controls = all_controls(true);
  std::uint64_t compared = 0, failures = 0;
  for (unsigned level = 1; level <= 4; ++level) {
    for (unsigned fl = 0; fl < 256; ++fl) {
      unsigned flags[5] = {0, benign, benign, benign, benign};
      flags[level] = fl;
      for (const auto& k : controls) {
        if (!run_case(fx, flags, k, (fl & 1) != 0)) ++failures;
        ++compared;
        if (failures > 20) break;
      }
    }
  }
  std::printf("walk matrix (one entry x controls): %llu combinations compared\n",
              static_cast<unsigned long long>(compared));
  RecordProperty("combinations", static_cast<int>(compared));
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(compared, 4u * 256u * controls.size());
}

TEST(WalkMatrix, RightsAcrossAllLevels) {
  fixture fx;
  const auto controls = all_controls(false);
  std::uint64_t compared = 0, failures = 0;
  for (unsigned combo = 0; combo < 8192; ++combo) {
    unsigned flags[5] = {0, 0, 0, 0, 0};
    for (unsigned l = 1; l <= 4; ++l) {
      const unsigned b = (combo >> (3 * (l - 1))) & 7u;  // RW, US, NX
      flags[l] = 1u | ((b & 1) ? 2u : 0u) | ((b & 2) ? 4u : 0u) | ((b & 4) ? 8u : 0u);
    }
    // The second half sets the leaf's D (with leaf R/W=0: a shadow-stack page) and runs the
    // shadow-stack accesses only, without XD anywhere (XD plays no part in data accesses;
    // the one-entry matrix covers it); the first half runs every other access.
    const bool ss_half = combo & 4096;
    if (ss_half && (combo & 0x924u)) continue;  // an NX bit (bit 2 of each level's triple)
    if (ss_half) flags[1] |= 32u;
    for (const auto& k : controls) {
      if (k.c.shadow_stack != ss_half) continue;
      if (!run_case(fx, flags, k, true)) ++failures;
      ++compared;
      if (failures > 20) break;
    }
  }
  std::printf("walk matrix (RW/US/NX at every level x controls): %llu combinations compared\n",
              static_cast<unsigned long long>(compared));
  RecordProperty("combinations", static_cast<int>(compared));
  EXPECT_EQ(failures, 0u);
}

// The EPTP check of ept_walker::make against the model, over bits 11:0 of the EPTP, one
// address bit below and one above MAXPHYADDR, and every combination of the capabilities
// that matter (4/5-level walks, A/D, supervisor shadow-stack control, two MAXPHYADDRs).
TEST(EptMatrix, EptpCheckMatchesModel) {
  u64 compared = 0, accepted = 0, mismatches = 0;
  for (unsigned capbits = 0; capbits < 32; ++capbits) {
    walk_model::eptp_caps mc{};
    mc.walk4 = capbits & 1, mc.walk5 = capbits & 2, mc.ad = capbits & 4, mc.sss = capbits & 8;
    mc.maxphyaddr = (capbits & 16) ? 39 : 52;
    paging::ept_capabilities caps{};
    caps.walk4 = mc.walk4, caps.walk5 = mc.walk5, caps.ad = mc.ad, caps.supervisor_shadow_stack = mc.sss;
    caps.maxphyaddr = mc.maxphyaddr;
    for (u64 low = 0; low < 0x1000; ++low) {
      for (u64 high : {u64{0x5000}, u64{1} << 38, u64{1} << 39, u64{1} << 51, u64{1} << 63}) {
        const u64 eptp = low | high;
        const bool want = walk_model::eptp_ok(eptp, mc);
        const bool got = paging::ept_walker::make(paging::ept_pointer{eptp}, caps).has_value();
        ++compared;
        accepted += want;
        if (got != want && ++mismatches < 10)
          ADD_FAILURE() << std::hex << "eptp " << eptp << " caps " << capbits << " model " << want << " walker " << got;
      }
    }
  }
  std::printf("EPTP check vs model: %llu EPTPs compared (%llu usable)\n", static_cast<unsigned long long>(compared),
              static_cast<unsigned long long>(accepted));
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(accepted, 400u);  // 432: every usable combination of type, length, A/D and bit 7
}

// The one EPT misconfiguration predicate (shared by the walker and vmx's builders) against
// the rule model, over bits 0-12 of an entry (R, W, X, memory type, IPAT, PS, A, D, XU,
// bit 11, the lowest large-page reserved bit), a high reserved bit, every level and every
// capability combination.
TEST(EptMatrix, MisconfigurationPredicateMatchesModel) {
  u64 compared = 0, misconfigured = 0, mismatches = 0;
  for (unsigned capbits = 0; capbits < 16; ++capbits) {
    paging::ept_capabilities caps{};
    caps.execute_only = capbits & 1, caps.mbec = capbits & 2, caps.page_2m = capbits & 4, caps.page_1g = capbits & 8;
    caps.maxphyaddr = 46;
    walk_model::ept_controls mc{};
    mc.execute_only = caps.execute_only, mc.mbec = caps.mbec, mc.page_2m = caps.page_2m, mc.page_1g = caps.page_1g;
    mc.maxphyaddr = 46;
    const auto rules = paging::ept_entry_rules::make(caps);
    for (unsigned level = 1; level <= 5; ++level) {
      for (u64 low = 0; low < (1u << 13); ++low) {
        for (u64 high : {u64{0}, u64{1} << 47}) {
          const u64 e = low | high;
          if (!(e & rules.present_mask())) continue;  // the rules apply to present entries
          const bool want = walk_model::ept_entry_misconfigured(e, level, mc);
          const bool got = paging::ept_misconfigured(paging::ept_entry{e}, level, caps);
          const bool fast = rules.misconfigured(e, level, rules.maps_page(e, level));
          ++compared;
          misconfigured += want;
          if (got != want || fast != want) {
            if (++mismatches < 10)
              ADD_FAILURE() << std::hex << "entry " << e << " level " << level << " caps " << capbits << " model " << want
                            << " classify " << got << " fast " << fast;
          }
        }
      }
    }
  }
  std::printf("EPT misconfiguration predicate vs model: %llu entries compared (%llu misconfigured)\n",
              static_cast<unsigned long long>(compared), static_cast<unsigned long long>(misconfigured));
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(misconfigured, compared / 4);
}

}  // namespace
