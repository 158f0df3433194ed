// SPDX-License-Identifier: MIT
// cpu_role, ept_role and page_role: hand-written expectations from SDM 4.1 (paging modes and
// modifiers), 4.6.2 (keys only with IA-32e paging) and the role layout documented in role.hpp.
#include <cstdint>
#include <type_traits>

#include <gtest/gtest.h>

#include <hvkit/paging/permission.hpp>
#include <hvkit/paging/role.hpp>

#include "runtime.hpp"

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
using paging::cpu_role;
using paging::make_cpu_role;

constexpr std::uint64_t PG = 1ull << 31, WP = 1ull << 16, PE = 1;
constexpr std::uint64_t PSE = 1ull << 4, PAE = 1ull << 5, PGE = 1ull << 7, LA57 = 1ull << 12,
                        SMEP = 1ull << 20, SMAP = 1ull << 21, PKE = 1ull << 22, PKS = 1ull << 24;
constexpr std::uint64_t LME = 1ull << 8, LMA = 1ull << 10, NXE = 1ull << 11;

constexpr cpu_role role(std::uint64_t cr0, std::uint64_t cr4, std::uint64_t efer, bool smm = false,
                        bool guest = false) {
  return make_cpu_role(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer}, smm, guest);
}
// Run-time twin: operands laundered so the call is not folded.
cpu_role role_rt(std::uint64_t cr0, std::uint64_t cr4, std::uint64_t efer, bool smm = false, bool guest = false) {
  using hvkit::test::rt;
  return role(rt(cr0), rt(cr4), rt(efer), rt(smm), rt(guest));
}
// `pred` is an expression over `r`, checked for role(...) at compile time and at run time.
#define ROLE_BOTH(pred, ...)                                    \
  do {                                                          \
    constexpr auto p_ = [](cpu_role r) { return pred; };        \
    static_assert(p_(role(__VA_ARGS__)));                       \
    EXPECT_TRUE(p_(role_rt(__VA_ARGS__))) << #pred;             \
  } while (0)

static_assert(std::is_trivially_copyable_v<cpu_role> && sizeof(cpu_role) == 4, "one 32-bit word");
static_assert(sizeof(paging::page_role) == 4 && sizeof(paging::ept_role) == 1);

TEST(CpuRole, FourLevelLinuxLikeGuest) {
  // CR0 0x80050033 (PG|AM|WP|NE|ET|MP|PE), CR4 PAE|PGE|SMEP|SMAP|PKE, EFER SCE|LME|LMA|NXE.
  constexpr std::uint64_t cr0 = 0x80050033, cr4 = PAE | PGE | SMEP | SMAP | PKE, efer = 0xd01;
  ROLE_BOTH(r.mode() == x86::paging_mode::four_level, cr0, cr4, efer);
  ROLE_BOTH(r.level() == 4, cr0, cr4, efer);
  ROLE_BOTH(r.cr0_wp() && r.smep() && r.smap() && r.pke() && r.efer_nx() && r.lma() && r.pae(), cr0, cr4, efer);
  ROLE_BOTH(!r.pks() && !r.pse() && !r.la57() && !r.has_4byte_gpte() && !r.smm() && !r.guest_mode(), cr0, cr4, efer);
  // Layout from role.hpp: level 4 | WP<<3 | SMEP<<4 | SMAP<<5 | NX<<6 | PKE<<7 = 0xfc.
  ROLE_BOTH(r.raw() == 0xfcu, cr0, cr4, efer);
  ROLE_BOTH(r.permission_index() == 0x1fu, cr0, cr4, efer);
}

TEST(CpuRole, ModesFromControlRegisters) {
  ROLE_BOTH(r.mode() == x86::paging_mode::none, PE, PAE, LME);
  ROLE_BOTH(r.mode() == x86::paging_mode::two_level && r.has_4byte_gpte(), PE | PG, 0, 0);
  ROLE_BOTH(r.mode() == x86::paging_mode::pae && r.pae() && !r.lma(), PE | PG, PAE, 0);
  ROLE_BOTH(r.mode() == x86::paging_mode::five_level && r.la57() && r.lma(), PE | PG, PAE | LA57, LME | LMA);
  ROLE_BOTH(r.level() == 5, PE | PG, PAE | LA57, LME | LMA);
  // LA57 outside IA-32e mode does nothing.
  ROLE_BOTH(r.mode() == x86::paging_mode::pae && !r.la57(), PE | PG, PAE | LA57, 0);
}

TEST(CpuRole, NormalisedBitsWithoutEffect) {
  // Paging off: only SMM and guest mode remain, so WP/SMEP/... toggles do not change the role.
  ROLE_BOTH(r.raw() == 0u, PE | WP, SMEP | SMAP | PKE | PKS | PSE, NXE);
  ROLE_BOTH(r.raw() == ((1u << 10) | (1u << 11)), PE | WP, SMEP, NXE, true, true);
  // 32-bit paging has no XD bit: NXE is not part of the role there; PSE is.
  ROLE_BOTH(!r.efer_nx() && r.pse(), PE | PG, PSE, NXE);
  // PAE paging: NXE counts, PSE does not (PS is always honoured), keys do not exist.
  ROLE_BOTH(r.efer_nx() && !r.pse() && !r.pke() && !r.pks(), PE | PG, PAE | PSE | PKE | PKS, NXE);
  // IA-32e: keys count.
  ROLE_BOTH(r.pke() && r.pks(), PE | PG, PAE | PKE | PKS, LME | LMA);
  // Bits that never feed the role (PGE, TS, CD) do not change it.
  static_assert(role(PE | PG | WP | (1ull << 3) | (1ull << 30), PAE | PGE, LME | LMA) == role(PE | PG | WP, PAE, LME | LMA));
  EXPECT_EQ(role_rt(PE | PG | WP | (1ull << 3), PAE | PGE, LME | LMA), role_rt(PE | PG | WP, PAE, LME | LMA));
  static_assert(role(PE | PG, PAE, LME | LMA) != role(PE | PG | WP, PAE, LME | LMA));
  EXPECT_NE(role_rt(PE | PG, PAE, LME | LMA), role_rt(PE | PG | WP, PAE, LME | LMA));
}

TEST(CpuRole, WithCr0WpTouchesOnlyWp) {
  constexpr auto r = role(PE | PG, PAE | SMEP, LME | LMA | NXE);
  static_assert(r.with_cr0_wp(true).raw() == (r.raw() | 8u));
  static_assert(r.with_cr0_wp(true).with_cr0_wp(false) == r);
  static_assert(role(PE, 0, 0).with_cr0_wp(true) == role(PE, 0, 0), "no WP with paging off");
  EXPECT_EQ(role_rt(PE | PG, PAE | SMEP, LME | LMA | NXE).with_cr0_wp(hvkit::test::rt(true)),
            role_rt(PE | PG | WP, PAE | SMEP, LME | LMA | NXE));
}

TEST(CpuRole, PermissionIndexSelectsTheMatchingTable) {
  // Each role's table index must be the bits WP, SMEP, SMAP, NX, PKE, PKS in that order.
  int checked = 0;
  for (unsigned bits = 0; bits < 64; ++bits) {
    const std::uint64_t cr0 = PE | PG | ((bits & 1) ? WP : 0);
    const std::uint64_t cr4 = PAE | ((bits & 2) ? SMEP : 0) | ((bits & 4) ? SMAP : 0) | ((bits & 16) ? PKE : 0) |
                              ((bits & 32) ? PKS : 0);
    const std::uint64_t efer = LME | LMA | ((bits & 8) ? NXE : 0);
    const auto r = role_rt(cr0, cr4, efer);
    EXPECT_EQ(r.permission_index(), bits);
    EXPECT_EQ(&paging::permission_table_for(r), &paging::permission_tables[bits]);
    // SMM and guest mode select another address space, not other rights.
    EXPECT_EQ(role_rt(cr0, cr4, efer, true, true).permission_index(), bits);
    EXPECT_NE(role_rt(cr0, cr4, efer, true, false), r);
    ++checked;
  }
  EXPECT_EQ(checked, 64);
}

TEST(EptRole, Bits) {
  constexpr paging::ept_role r{true, false, true};
  static_assert(r.execute_only_allowed() && !r.mbec() && r.ad_enabled() && r.raw() == 0b101);
  static_assert(paging::ept_role{false, true, false}.permission_index() == 2);
  EXPECT_EQ((paging::ept_role{hvkit::test::rt(false), hvkit::test::rt(true), hvkit::test::rt(true)}.raw()), 0b110u);
  // Execute-only support changes misconfigurations, not violations: same table.
  static_assert(paging::ept_permission_tables[0] == paging::ept_permission_tables[1]);
  static_assert(paging::ept_permission_tables[2] == paging::ept_permission_tables[3]);
  static_assert(!(paging::ept_permission_tables[0] == paging::ept_permission_tables[2]));
}

TEST(PageRole, FromCpuRole) {
  // WP=0 with SMEP and SMAP: the *_andnot_wp bits are set.
  constexpr auto cr = role(PE | PG, PAE | SMEP | SMAP, LME | LMA | NXE, false, true);
  constexpr paging::shadow_page_params p{.level = 4, .direct = false,
                                         .access = paging::pte_access::write | paging::pte_access::user,
                                         .quadrant = 0, .ad_disabled = true, .passthrough = false};
  constexpr auto pr = paging::make_page_role(cr, p);
  static_assert(pr.level() == 4 && !pr.direct() && !pr.cr0_wp() && pr.smep_andnot_wp() && pr.smap_andnot_wp());
  static_assert(pr.efer_nx() && pr.ad_disabled() && pr.guest_mode() && !pr.smm() && !pr.has_4byte_gpte());
  static_assert(pr.access() == (paging::pte_access::write | paging::pte_access::user));
  // Layout: 4 | access 6<<8 | smep_andnot_wp<<12 | smap_andnot_wp<<13 | nx<<14 | ad_disabled<<15 | guest<<16.
  static_assert(pr.raw() == (4u | (6u << 8) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15) | (1u << 16)));
  // WP=1 clears the *_andnot_wp bits and sets cr0_wp.
  constexpr auto pr_wp = paging::make_page_role(role(PE | PG | WP, PAE | SMEP | SMAP, LME | LMA), p);
  static_assert(pr_wp.cr0_wp() && !pr_wp.smep_andnot_wp() && !pr_wp.smap_andnot_wp() && !pr_wp.efer_nx());
  // 32-bit guest: 4-byte entries, quadrant kept.
  constexpr auto pr32 = paging::make_page_role(role(PE | PG, 0, 0), {.level = 1, .quadrant = 3});
  static_assert(pr32.has_4byte_gpte() && pr32.quadrant() == 3 && pr32.level() == 1);

  const auto pr_rt = paging::make_page_role(role_rt(PE | PG, PAE | SMEP | SMAP, LME | LMA | NXE, false, true),
                                            hvkit::test::rt(p));
  EXPECT_EQ(pr_rt, pr);
  EXPECT_NE(pr_rt, pr_wp);
}

// Every combination of the inputs of make_page_role, at run time: each accessor and each bit of
// raw() against the layout documented in role.hpp (3:0 level, 4 has_4byte_gpte, 6:5 quadrant,
// 7 direct, 10:8 access, 11 cr0_wp, 12 smep_andnot_wp, 13 smap_andnot_wp, 14 efer_nx,
// 15 ad_disabled, 16 guest_mode, 17 passthrough, 18 smm) and the cpu_role it comes from.
TEST(PageRole, EveryInputAtItsBit) {
  using paging::pte_access;
  unsigned checked = 0;
  for (unsigned c = 0; c < 64 * 3; ++c) {
    const unsigned mode = c / 64;  // 32-bit, PAE, 4-level
    const bool wp = c & 1, smep = c & 2, smap = c & 4, nx = c & 8, smm = c & 16, guest = c & 32;
    const std::uint64_t cr4 = (mode ? PAE : 0) | (smep ? SMEP : 0) | (smap ? SMAP : 0);
    const std::uint64_t efer = (mode == 2 ? LME | LMA : 0) | (nx ? NXE : 0);
    const cpu_role cr = role_rt(PE | PG | (wp ? WP : 0), cr4, efer, smm, guest);
    ASSERT_EQ(cr.has_4byte_gpte(), mode == 0);
    ASSERT_EQ(cr.cr0_wp(), wp);
    for (unsigned level = 1; level <= 5; ++level)
      for (unsigned k = 0; k < 8 * 4 * 8; ++k) {
        const unsigned access = k & 7, quadrant = (k >> 3) & 3;
        const bool direct = k & 32, ad_off = k & 64, pass = k & 128;
        const auto pr = paging::make_page_role(
            cr, {.level = level, .direct = direct, .access = pte_access{static_cast<std::uint8_t>(access)},
                 .quadrant = quadrant, .ad_disabled = ad_off, .passthrough = pass});
        const bool smep_nwp = cr.smep() && !wp, smap_nwp = cr.smap() && !wp;
        const std::uint32_t want = level | (std::uint32_t{mode == 0} << 4) | (quadrant << 5) |
                                   (std::uint32_t{direct} << 7) | (access << 8) | (std::uint32_t{wp} << 11) |
                                   (std::uint32_t{smep_nwp} << 12) | (std::uint32_t{smap_nwp} << 13) |
                                   (std::uint32_t{cr.efer_nx()} << 14) | (std::uint32_t{ad_off} << 15) |
                                   (std::uint32_t{guest} << 16) | (std::uint32_t{pass} << 17) |
                                   (std::uint32_t{smm} << 18);
        ASSERT_EQ(pr.raw(), want) << c << " " << level << " " << k;
        ASSERT_EQ(pr.level(), level);
        ASSERT_EQ(pr.has_4byte_gpte(), mode == 0);
        ASSERT_EQ(pr.quadrant(), quadrant);
        ASSERT_EQ(pr.direct(), direct);
        ASSERT_EQ(pr.access(), pte_access{static_cast<std::uint8_t>(access)});
        ASSERT_EQ(pr.cr0_wp(), wp);
        ASSERT_EQ(pr.smep_andnot_wp(), smep_nwp);
        ASSERT_EQ(pr.smap_andnot_wp(), smap_nwp);
        ASSERT_EQ(pr.efer_nx(), cr.efer_nx());
        ASSERT_EQ(pr.ad_disabled(), ad_off);
        ASSERT_EQ(pr.guest_mode(), guest);
        ASSERT_EQ(pr.passthrough(), pass);
        ASSERT_EQ(pr.smm(), smm);
        ++checked;
      }
    // The *_andnot_wp bits exist only without WP, and SMEP/SMAP set one of them each.
    if (!wp) {
      const auto pr = paging::make_page_role(cr, {});
      EXPECT_EQ(pr.smep_andnot_wp(), smep);
      EXPECT_EQ(pr.smap_andnot_wp(), smap);
    }
  }
  EXPECT_EQ(checked, 64u * 3 * 5 * 256);
}

TEST(EptRole, EveryCombinationAtRunTime) {
  // ept_role: bit 0 execute-only allowed, bit 1 MBEC, bit 2 EPT A/D; the permission index is
  // bits 1:0.
  for (unsigned b = 0; b < 8; ++b) {
    const paging::ept_role r{hvkit::test::rt((b & 1) != 0), hvkit::test::rt((b & 2) != 0), hvkit::test::rt((b & 4) != 0)};
    EXPECT_EQ(r.raw(), b);
    EXPECT_EQ(r.execute_only_allowed(), (b & 1) != 0);
    EXPECT_EQ(r.mbec(), (b & 2) != 0);
    EXPECT_EQ(r.ad_enabled(), (b & 4) != 0);
    EXPECT_EQ(r.permission_index(), b & 3);
  }
}

}  // namespace
