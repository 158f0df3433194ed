// SPDX-License-Identifier: MIT
// permission_fault against the SDM: exhaustive comparison with the rule-by-rule model in
// permission_model.hpp, golden error codes typed by hand, and the CR0.WP refresh path.
#include <cstdint>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include <hvkit/paging/mmu.hpp>
#include <hvkit/paging/permission.hpp>
#include <hvkit/paging/pkru.hpp>

#include "permission_model.hpp"
#include "runtime.hpp"

namespace {

namespace x86 = hvkit::x86;
namespace paging = hvkit::paging;
namespace model = hvkit::test::model;
using hvkit::test::rt;
using paging::pte_access;

// Control-register values typed from the SDM bit positions.
constexpr std::uint64_t PG = 1ull << 31, WP = 1ull << 16, PE = 1;
constexpr std::uint64_t PSE = 1ull << 4, PAE = 1ull << 5, LA57 = 1ull << 12, SMEP = 1ull << 20,
                        SMAP = 1ull << 21, PKE = 1ull << 22, PKS = 1ull << 24;
constexpr std::uint64_t LME = 1ull << 8, LMA = 1ull << 10, NXE = 1ull << 11;
constexpr std::uint64_t AC = 1ull << 18, FIXED1 = 2;

// The full #PF error code a walker would push: permission_fault's P/PK plus the access's
// W and U, and I/D when NXE or SMEP is on (SDM 4.7).
constexpr std::uint32_t error_code(x86::pfec fault, x86::pfec access, std::uint64_t cr4, std::uint64_t efer) {
  if (fault.none()) return 0;
  std::uint64_t v = fault.raw() | (access.raw() & (x86::pfec::write | x86::pfec::user | x86::pfec::ss).raw());
  if (access.test(x86::pfec::fetch) && ((efer & NXE) || (cr4 & SMEP))) v |= x86::pfec::fetch.raw();
  return static_cast<std::uint32_t>(v);
}

constexpr std::uint32_t check(std::uint64_t cr0, std::uint64_t cr4, std::uint64_t efer, pte_access rights,
                              std::uint8_t pkey, x86::pfec access, std::uint64_t rflags, std::uint32_t pkru,
                              std::uint32_t pkrs = 0) {
  const auto ctx = paging::mmu_context::make(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer}, x86::gpa{0});
  const auto f = ctx.permission_fault(rights, pkey, access, x86::rflags{rflags},
                                      paging::pk_register_for(rights, pkru, pkrs));
  return error_code(f, access, cr4, efer);
}

constexpr std::uint64_t long_mode = LME | LMA;

// Checked twice: in a static_assert, and at run time with every operand laundered through
// rt() so that the compiler cannot fold the call.
#define BOTH_EQ(expected, fn, ...)                 \
  static_assert((fn)(__VA_ARGS__) == (expected)); \
  EXPECT_EQ([](auto... a) { return (fn)(hvkit::test::rt(a)...); }(__VA_ARGS__), (expected))
#define GOLDEN(expected, ...) BOTH_EQ(std::uint32_t{expected}, check, __VA_ARGS__)

constexpr std::uint64_t ept_q(paging::ept_role role, pte_access rights, paging::ept_access access) {
  return paging::ept_permission_fault(role, rights, access).raw();
}
constexpr auto W = x86::pfec::write, U = x86::pfec::user, F = x86::pfec::fetch;
constexpr auto IMPLICIT = x86::pfec::implicit_access;
constexpr auto RO_USER = pte_access::user | pte_access::exec;
constexpr auto RW_USER = pte_access::user | pte_access::write | pte_access::exec;
constexpr auto RO_SUP = pte_access::exec;
constexpr auto RW_SUP = pte_access::write | pte_access::exec;

// ---- Golden cases: expected error codes typed by hand from SDM 4.6 / 4.7 ----

// permission_fault() sets index bit 7 from AC and the implicit flag alone: every table must
// give the same entry with and without it for a user-mode access (checked here once rather
// than in every translation unit that includes paging/permission.hpp).
static_assert(paging::detail::smap_bit_ignored_for_user_accesses());

TEST(PermissionGolden, SupervisorWriteToReadOnlyUserPageFollowsWp) {
  // WP=0: supervisor writes ignore R/W (SDM 4.6.1); WP=1: #PF, P|W = 0x3.
  GOLDEN(0x0, PE | PG, PAE, long_mode, RO_USER, 0, W, FIXED1, 0);
  GOLDEN(0x3, PE | PG | WP, PAE, long_mode, RO_USER, 0, W, FIXED1, 0);
}

TEST(PermissionGolden, LtrBusyBitWriteToReadOnlyGdt) {
  // docs/background.md §1: LTR writes the TSS busy bit in a read-only GDT (an implicit
  // supervisor write to a supervisor page): allowed with WP=0, 0x3 with WP=1.
  GOLDEN(0x0, PE | PG, PAE | SMAP, long_mode | NXE, RO_SUP, 0, W | IMPLICIT, FIXED1, 0);
  GOLDEN(0x3, PE | PG | WP, PAE | SMAP, long_mode | NXE, RO_SUP, 0, W | IMPLICIT, FIXED1, 0);
}

TEST(PermissionGolden, ImplicitSupervisorWriteIgnoresAcUnderSmap) {
  // SMAP (SDM 4.6.1): AC=1 lets an explicit supervisor write reach a user page, never an
  // implicit one. Writable user page, WP=1.
  GOLDEN(0x0, PE | PG | WP, PAE | SMAP, long_mode, RW_USER, 0, W, AC | FIXED1, 0);
  GOLDEN(0x3, PE | PG | WP, PAE | SMAP, long_mode, RW_USER, 0, W | IMPLICIT, AC | FIXED1, 0);
  GOLDEN(0x3, PE | PG | WP, PAE | SMAP, long_mode, RW_USER, 0, W, FIXED1, 0);
  // Reads alike: P = 0x1.
  GOLDEN(0x1, PE | PG | WP, PAE | SMAP, long_mode, RO_USER, 0, IMPLICIT, AC | FIXED1, 0);
  GOLDEN(0x0, PE | PG | WP, PAE | SMAP, long_mode, RO_USER, 0, x86::pfec{}, AC | FIXED1, 0);
  // SMAP off: the implicit write goes through.
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, RW_USER, 0, W | IMPLICIT, FIXED1, 0);
}

// CET shadow stacks (SDM 4.6.1; SS is error-code bit 6, 0x40, SDM 4.7). A shadow-stack
// page has the leaf R/W=0 (so no `write` right) and pte_access::shadow_stack.
constexpr auto SS = x86::pfec::ss;
constexpr auto SS_SUP = pte_access::shadow_stack | pte_access::exec;
constexpr auto SS_USER = pte_access::shadow_stack | pte_access::user | pte_access::exec;

TEST(PermissionGolden, ShadowStackAccessesNeedAShadowStackPageOfTheirMode) {
  // Supervisor shadow-stack write (CALL at CPL 0) to a supervisor shadow-stack page: allowed
  // although the leaf is read-only and CR0.WP=1; read (RET) alike.
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, SS_SUP, 0, SS | W, FIXED1, 0);
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, SS_SUP, 0, SS, FIXED1, 0);
  // User shadow-stack write to a user shadow-stack page: allowed.
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, SS_USER, 0, SS | W | U, FIXED1, 0);
  // Shadow-stack accesses to ordinary pages fault, writable or not: P|W|SS = 0x43,
  // P|SS = 0x41, P|W|U|SS = 0x47.
  GOLDEN(0x43, PE | PG | WP, PAE, long_mode, RW_SUP, 0, SS | W, FIXED1, 0);
  GOLDEN(0x41, PE | PG | WP, PAE, long_mode, RO_SUP, 0, SS, FIXED1, 0);
  GOLDEN(0x47, PE | PG | WP, PAE, long_mode, RW_USER, 0, SS | W | U, FIXED1, 0);
  // Mode mismatch: a supervisor shadow-stack access to a user shadow-stack page faults even
  // without SMAP and with AC=1 (0x43); a user one (or WRUSS) to a supervisor page: 0x47.
  GOLDEN(0x43, PE | PG | WP, PAE, long_mode, SS_USER, 0, SS | W, AC | FIXED1, 0);
  GOLDEN(0x47, PE | PG | WP, PAE, long_mode, SS_SUP, 0, SS | W | U, FIXED1, 0);
  // 32-bit and PAE paging have shadow-stack pages too.
  GOLDEN(0x0, PE | PG | WP, 0, 0, SS_SUP, 0, SS | W, FIXED1, 0);
  GOLDEN(0x41, PE | PG | WP, PAE, 0, RW_SUP, 0, SS, FIXED1, 0);
}

TEST(PermissionGolden, OrdinaryWritesToShadowStackPagesFollowTheNormalRules) {
  // The leaf has R/W=0: an ordinary write faults (0x3 supervisor with WP=1, 0x7 user); an
  // ordinary read is allowed.
  GOLDEN(0x3, PE | PG | WP, PAE, long_mode, SS_SUP, 0, W, FIXED1, 0);
  GOLDEN(0x7, PE | PG | WP, PAE, long_mode, SS_USER, 0, W | U, FIXED1, 0);
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, SS_USER, 0, U, FIXED1, 0);
  // CR0.WP=0 (which CR4.CET forbids): a supervisor write goes through as for any read-only
  // page; the shadow-stack rules do not depend on WP.
  GOLDEN(0x0, PE | PG, PAE, long_mode, SS_SUP, 0, W, FIXED1, 0);
  GOLDEN(0x0, PE | PG, PAE, long_mode, SS_SUP, 0, SS | W, FIXED1, 0);
  GOLDEN(0x43, PE | PG, PAE, long_mode, RW_SUP, 0, SS | W, FIXED1, 0);
}

TEST(PermissionGolden, ProtectionKeysApplyToShadowStackAccesses) {
  // PKRU key 3: AD (bit 6) denies a user shadow-stack read, P|U|PK|SS = 0x65; WD (bit 7)
  // denies a user shadow-stack write, P|W|U|PK|SS = 0x67, not a read.
  GOLDEN(0x65, PE | PG | WP, PAE | PKE, long_mode, SS_USER, 3, SS | U, FIXED1, 1u << 6);
  GOLDEN(0x67, PE | PG | WP, PAE | PKE, long_mode, SS_USER, 3, SS | W | U, FIXED1, 1u << 7);
  GOLDEN(0x0, PE | PG | WP, PAE | PKE, long_mode, SS_USER, 3, SS | U, FIXED1, 1u << 7);
  // PKRS key 3 WD on a supervisor shadow-stack write with WP=1: P|W|PK|SS = 0x63.
  GOLDEN(0x63, PE | PG | WP, PAE | PKS, long_mode, SS_SUP, 3, SS | W, FIXED1, 0, 1u << 7);
}

TEST(PermissionGolden, SmepFetchFromUserPage) {
  // SMEP: supervisor fetch from a user-mode address faults, P|I/D = 0x11 (AC does not matter).
  GOLDEN(0x11, PE | PG | WP, PAE | SMEP, long_mode, RW_USER, 0, F, FIXED1, 0);
  GOLDEN(0x11, PE | PG | WP, PAE | SMEP, long_mode, RW_USER, 0, F, AC | FIXED1, 0);
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, RW_USER, 0, F, FIXED1, 0);
  // The user itself may fetch there.
  GOLDEN(0x0, PE | PG | WP, PAE | SMEP, long_mode, RW_USER, 0, F | U, FIXED1, 0);
}

TEST(PermissionGolden, NxOnlyWithEferNxe) {
  // XD=1 somewhere (exec clear) with NXE=1: P|I/D = 0x11; user: P|U|I/D = 0x15.
  GOLDEN(0x11, PE | PG, PAE, long_mode | NXE, pte_access::write, 0, F, FIXED1, 0);
  GOLDEN(0x15, PE | PG, PAE, long_mode | NXE, pte_access::user, 0, F | U, FIXED1, 0);
  // NXE=0: XD is not in effect (the walker would report a reserved bit instead).
  GOLDEN(0x0, PE | PG, PAE, long_mode, pte_access::write, 0, F, FIXED1, 0);
  // 32-bit paging has no XD bit even with NXE=1.
  GOLDEN(0x0, PE | PG, 0, NXE, pte_access::write, 0, F, FIXED1, 0);
}

TEST(PermissionGolden, ProtectionKeyWriteDisable) {
  constexpr std::uint32_t wd_key5 = 2u << 10;  // PKRU: key 5 WD=1
  // Supervisor write to a writable user page with WD=1: WP=0 ignores WD (allowed);
  // WP=1 faults with P|W|PK = 0x23. AC=1 so that SMAP (off here anyway) is no factor.
  GOLDEN(0x0, PE | PG, PAE | PKE, long_mode, RW_USER, 5, W, AC | FIXED1, wd_key5);
  GOLDEN(0x23, PE | PG | WP, PAE | PKE, long_mode, RW_USER, 5, W, AC | FIXED1, wd_key5);
  // User write to a read-only page with WD=1: paging denies and the key denies: P|W|U|PK = 0x27.
  GOLDEN(0x27, PE | PG | WP, PAE | PKE, long_mode, RO_USER, 5, W | U, FIXED1, wd_key5);
  GOLDEN(0x27, PE | PG, PAE | PKE, long_mode, RO_USER, 5, W | U, FIXED1, wd_key5);
  // Same with key 4 (not write-disabled): only P|W|U = 0x7.
  GOLDEN(0x7, PE | PG | WP, PAE | PKE, long_mode, RO_USER, 4, W | U, FIXED1, wd_key5);
  // Reads are not affected by WD.
  GOLDEN(0x0, PE | PG | WP, PAE | PKE, long_mode, RW_USER, 5, U, FIXED1, wd_key5);
}

TEST(PermissionGolden, ProtectionKeyAccessDisable) {
  constexpr std::uint32_t ad_key3 = 1u << 6;
  GOLDEN(0x25, PE | PG | WP, PAE | PKE, long_mode, RW_USER, 3, U, FIXED1, ad_key3);
  // Supervisor read of that user page (AC=1, SMAP on): the key still applies: P|PK = 0x21.
  GOLDEN(0x21, PE | PG | WP, PAE | PKE | SMAP, long_mode, RW_USER, 3, x86::pfec{}, AC | FIXED1, ad_key3);
  // Fetches ignore keys.
  GOLDEN(0x0, PE | PG | WP, PAE | PKE, long_mode | NXE, RW_USER, 3, F | U, FIXED1, ad_key3);
  // CR4.PKE=0, or PAE paging (no keys outside IA-32e): nothing.
  GOLDEN(0x0, PE | PG | WP, PAE, long_mode, RW_USER, 3, U, FIXED1, ad_key3);
  GOLDEN(0x0, PE | PG | WP, PAE | PKE, 0, RW_USER, 3, U, FIXED1, ad_key3);
  // Keys govern user-mode addresses only: a supervisor page with the same key is not affected.
  GOLDEN(0x0, PE | PG | WP, PAE | PKE, long_mode, RW_SUP, 3, x86::pfec{}, FIXED1, ad_key3);
}

TEST(PermissionGolden, SupervisorKeysUseIa32Pkrs) {
  constexpr std::uint32_t pkrs_wd_key7 = 2u << 14;
  // CR4.PKS: IA32_PKRS governs supervisor-mode addresses; WD with WP=1: 0x23, WP=0: allowed.
  GOLDEN(0x23, PE | PG | WP, PAE | PKS, long_mode, RW_SUP, 7, W, FIXED1, 0, pkrs_wd_key7);
  GOLDEN(0x0, PE | PG, PAE | PKS, long_mode, RW_SUP, 7, W, FIXED1, 0, pkrs_wd_key7);
  // PKRU does not govern supervisor-mode addresses, PKRS does not govern user-mode ones.
  GOLDEN(0x0, PE | PG | WP, PAE | PKE | PKS, long_mode, RW_SUP, 7, W, FIXED1, pkrs_wd_key7, 0);
  GOLDEN(0x0, PE | PG | WP, PAE | PKE | PKS, long_mode, RW_USER, 7, W | U, FIXED1, 0, pkrs_wd_key7);
  // A user-mode access to a supervisor page with PKRS AD: U/S denies and PK is set (SDM 4.7): 0x25.
  GOLDEN(0x25, PE | PG | WP, PAE | PKS, long_mode, RW_SUP, 7, U, FIXED1, 0, 1u << 14);
}

TEST(PermissionGolden, UserAccessToSupervisorPage) {
  GOLDEN(0x5, PE | PG, 0, 0, RW_SUP, 0, U, FIXED1, 0);
  GOLDEN(0x7, PE | PG, 0, 0, RW_SUP, 0, U | W, FIXED1, 0);
  // User write to a read-only user page ignores WP: 0x7 both ways.
  GOLDEN(0x7, PE | PG, 0, 0, RO_USER, 0, U | W, FIXED1, 0);
  GOLDEN(0x7, PE | PG | WP, 0, 0, RO_USER, 0, U | W, FIXED1, 0);
}

TEST(PermissionGolden, IdentityRightsNeverFault) {
  // With paging off there are no paging rights: the walker reports pte_access::all.
  for (std::uint64_t a : {0ull, 2ull, 4ull, 6ull, 16ull, 20ull}) {
    EXPECT_EQ(check(rt(PE), 0, 0, pte_access::all, 0, x86::pfec{a}, FIXED1, ~0u), 0u);
  }
}

// ---- Exhaustive comparison with the rule-by-rule model ----

struct mode_case {
  const char* name;
  std::uint64_t cr0, cr4, efer;
};
constexpr mode_case modes[] = {
    {"32-bit", PE | PG, 0, 0},
    {"32-bit+PSE", PE | PG, PSE, 0},
    {"PAE", PE | PG, PAE, 0},
    {"4-level", PE | PG, PAE, LME | LMA},
    {"5-level", PE | PG, PAE | LA57, LME | LMA},
};

constexpr x86::pfec to_pfec(model::access a) {
  std::uint64_t v = 0;
  if (a.k == model::kind::write || a.k == model::kind::ss_write) v |= 2;
  if (a.k == model::kind::fetch) v |= 16;
  if (a.k == model::kind::ss_read || a.k == model::kind::ss_write) v |= 64;
  if (a.m == model::mode::user) v |= 4;
  if (a.m == model::mode::supervisor_implicit) v |= 1ull << 48;
  return x86::pfec{v};
}

// Every role (mode x WP x SMEP x SMAP x NXE x PKE x PKS) x access kind x user/explicit/
// implicit x page rights (exec, write, user) x AC x PKRU (AD, WD) x PKRS (AD, WD) x key.
TEST(PermissionExhaustive, MatchesRuleByRuleModel) {
  constexpr model::kind kinds[] = {model::kind::read, model::kind::write, model::kind::fetch, model::kind::ss_read,
                                   model::kind::ss_write};
  constexpr model::mode access_modes[] = {model::mode::user, model::mode::supervisor_explicit,
                                          model::mode::supervisor_implicit};
  std::uint64_t compared = 0, faults = 0, pks = 0, mismatches = 0;
  for (const auto& m : modes) {
    for (unsigned bits = 0; bits < 64; ++bits) {
      const std::uint64_t cr0 = m.cr0 | ((bits & 1) ? WP : 0);
      const std::uint64_t cr4 = m.cr4 | ((bits & 2) ? SMEP : 0) | ((bits & 4) ? SMAP : 0) |
                                ((bits & 16) ? PKE : 0) | ((bits & 32) ? PKS : 0);
      const std::uint64_t efer = m.efer | ((bits & 8) ? NXE : 0);
      const model::regs regs{cr0, cr4, efer};
      const auto ctx = paging::mmu_context::make(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer}, x86::gpa{0});
      for (auto k : kinds) {
        for (auto am : access_modes) {
          const model::access acc{k, am};
          const x86::pfec pf = to_pfec(acc);
          // Rights bit 3 enumerates the shadow-stack right (pte_access bit 5); a
          // shadow-stack page is never writable (leaf R/W=0), so writable+ss is skipped.
          for (unsigned r = 0; r < 16; ++r) {
            const bool exec = r & 1, writable = r & 2, user = r & 4, ss_page = r & 8;
            if (writable && ss_page) continue;
            const pte_access rights{static_cast<std::uint8_t>((r & 7) | (ss_page ? 32 : 0))};
            for (std::uint64_t rflags : {FIXED1, FIXED1 | AC}) {
              for (unsigned key = 0; key < 16; key += 5) {  // keys 0, 5, 10, 15
                for (unsigned pkru_bits = 0; pkru_bits < 4; ++pkru_bits) {
                  for (unsigned pkrs_bits = 0; pkrs_bits < 4; ++pkrs_bits) {
                    // The tested key's AD/WD as enumerated, every other key the opposite,
                    // so that reading the wrong key changes the answer.
                    const std::uint32_t others_u = 0x55555555u * (3u - pkru_bits);
                    const std::uint32_t others_s = 0x55555555u * (3u - pkrs_bits);
                    const std::uint32_t pkru = paging::pkr_with(others_u, static_cast<std::uint8_t>(key),
                                                                pkru_bits & 1, pkru_bits & 2);
                    const std::uint32_t pkrs = paging::pkr_with(others_s, static_cast<std::uint8_t>(key),
                                                                pkrs_bits & 1, pkrs_bits & 2);
                    const model::page page{writable, user, exec, static_cast<std::uint8_t>(key), ss_page};
                    const auto want = model::check(regs, acc, page, rflags, pkru, pkrs);
                    const auto got = ctx.permission_fault(rights, static_cast<std::uint8_t>(key), pf,
                                                          x86::rflags{rflags},
                                                          paging::pk_register_for(rights, pkru, pkrs));
                    const std::uint64_t expect = (want.fault ? 1u : 0u) | (want.pk ? 0x20u : 0u);
                    ++compared;
                    faults += want.fault;
                    pks += want.pk;
                    if (got.raw() != expect) {
                      if (++mismatches < 10)
                        ADD_FAILURE() << m.name << " cr0=" << std::hex << cr0 << " cr4=" << cr4 << " efer=" << efer
                                      << " access=" << pf.raw() << " rights=" << r << " rflags=" << rflags
                                      << " key=" << key << " pkru=" << pkru << " pkrs=" << pkrs
                                      << " got=" << got.raw() << " want=" << expect;
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  std::printf("permission_fault vs rule-by-rule model: %llu combinations compared (%llu faults, %llu with PK)\n",
              static_cast<unsigned long long>(compared), static_cast<unsigned long long>(faults),
              static_cast<unsigned long long>(pks));
  RecordProperty("combinations", std::to_string(compared));
  EXPECT_EQ(compared, 5ull * 64 * 5 * 3 * 12 * 2 * 4 * 4 * 4);
  EXPECT_GT(faults, compared / 4);  // the space is not trivially "allowed"
  EXPECT_GT(pks, 0u);
}

// Bits permission_fault documents as ignored (P, RSVD, PK, HLAT, SGX in `access`; the
// EPT-only rights; key bits above 3; RFLAGS bits other than AC) change nothing.
TEST(PermissionExhaustive, IgnoredInputBitsChangeNothing) {
  const auto ctx = paging::mmu_context::make(x86::cr0{PE | PG | WP}, x86::cr4{PAE | SMEP | SMAP | PKE | PKS},
                                             x86::efer{LME | LMA | NXE}, x86::gpa{0});
  constexpr std::uint64_t noise_access = 0x1 | 0x8 | 0x20 | 0x80 | 0x8000 | (1ull << 40);
  std::uint64_t compared = 0;
  for (unsigned a = 0; a < 16; ++a) {
    const std::uint64_t acc = (a & 1 ? 2 : 0) | (a & 2 ? 4 : 0) | (a & 4 ? 16 : 0) | (a & 8 ? 1ull << 48 : 0);
    if ((acc & 2) && (acc & 16)) continue;  // not an access the processor makes
    for (unsigned r = 0; r < 32; ++r) {
      for (std::uint64_t ac : {std::uint64_t{0}, AC}) {
        for (unsigned key = 0; key < 16; ++key) {
          const std::uint32_t pkr = 0x9c3a5e71u;
          const auto plain = ctx.permission_fault(pte_access{static_cast<std::uint8_t>(r & 7)},
                                                  static_cast<std::uint8_t>(key), x86::pfec{acc},
                                                  x86::rflags{FIXED1 | ac}, pkr);
          const auto noisy = ctx.permission_fault(pte_access{static_cast<std::uint8_t>(r)},
                                                  static_cast<std::uint8_t>(key | 0xf0), x86::pfec{acc | noise_access},
                                                  x86::rflags{~AC | ac}, pkr);
          EXPECT_EQ(plain, noisy) << "access=" << acc << " r=" << r << " key=" << key;
          ++compared;
        }
      }
    }
  }
  std::printf("ignored-bit invariance: %llu combinations compared\n", static_cast<unsigned long long>(compared));
}

// A user-mode access flagged implicit is a user-mode access (U wins, AC never overrides).
TEST(PermissionExhaustive, UserWinsOverImplicit) {
  std::uint64_t compared = 0;
  for (unsigned p = 0; p < 64; ++p) {
    const auto& t = paging::permission_tables[p];
    for (std::uint64_t k : {0ull, 2ull, 16ull}) {
      for (unsigned r = 0; r < 8; ++r) {
        for (std::uint64_t ac : {std::uint64_t{0}, AC}) {
          const pte_access rights{static_cast<std::uint8_t>(r)};
          EXPECT_EQ(paging::permission_fault(t, rights, 1, x86::pfec{k | 4}, x86::rflags{ac}, 0xffffffffu),
                    paging::permission_fault(t, rights, 1, x86::pfec{k | 4 | (1ull << 48)}, x86::rflags{ac},
                                             0xffffffffu));
          ++compared;
        }
      }
    }
  }
  std::printf("user-over-implicit: %llu combinations compared\n", static_cast<unsigned long long>(compared));
}

// The model at compile time too, for one mode and every role without keys (constexpr
// evaluation budget): every access kind x mode x rights x AC.
consteval bool constexpr_matches_model() {
  for (unsigned bits = 0; bits < 16; ++bits) {
    const std::uint64_t cr0 = PE | PG | ((bits & 1) ? WP : 0);
    const std::uint64_t cr4 = PAE | ((bits & 2) ? SMEP : 0) | ((bits & 4) ? SMAP : 0);
    const std::uint64_t efer = LME | LMA | ((bits & 8) ? NXE : 0);
    const auto role = paging::make_cpu_role(x86::cr0{cr0}, x86::cr4{cr4}, x86::efer{efer});
    for (unsigned k = 0; k < 3; ++k) {
      for (unsigned am = 0; am < 3; ++am) {
        const model::access acc{static_cast<model::kind>(k), static_cast<model::mode>(am)};
        for (unsigned r = 0; r < 8; ++r) {
          for (std::uint64_t rflags : {FIXED1, FIXED1 | AC}) {
            const auto want = model::check({cr0, cr4, efer}, acc, {(r & 2) != 0, (r & 4) != 0, (r & 1) != 0, 0},
                                           rflags, 0, 0);
            const auto got = paging::permission_fault(role, pte_access{static_cast<std::uint8_t>(r)}, 0,
                                                      to_pfec(acc), x86::rflags{rflags}, 0);
            if (got.raw() != (want.fault ? 1u : 0u)) return false;
          }
        }
      }
    }
  }
  return true;
}
static_assert(constexpr_matches_model());

// ---- The CR0.WP passthrough refresh ----

TEST(PassthroughRefresh, WpToggleSwitchesTableWithoutRecompute) {
  auto ctx = paging::mmu_context::make(x86::cr0{PE | PG | WP}, x86::cr4{PAE | SMEP | SMAP},
                                       x86::efer{LME | LMA | NXE}, x86::gpa{0x5000});
  const auto before = ctx.role();
  const auto implicit_gdt_write = W | IMPLICIT;  // LTR's busy-bit write
  EXPECT_EQ(ctx.permission_fault(RO_SUP, 0, implicit_gdt_write, x86::rflags{FIXED1}, 0).raw(), 0x1u);

  // The guest clears WP without an exit; the emulator passes the live CR0.
  EXPECT_TRUE(ctx.refresh_passthrough_bits(x86::cr0{PE | PG}));
  EXPECT_EQ(ctx.role().raw() ^ before.raw(), 1u << 3) << "only the WP bit of the role changes";
  EXPECT_FALSE(ctx.role().cr0_wp());
  EXPECT_EQ(&ctx.permissions(), &paging::permission_tables[ctx.role().permission_index()]);
  EXPECT_EQ(ctx.root(), x86::gpa{0x5000});
  EXPECT_EQ(ctx.permission_fault(RO_SUP, 0, implicit_gdt_write, x86::rflags{FIXED1}, 0).raw(), 0x0u);
  EXPECT_FALSE(ctx.refresh_passthrough_bits(x86::cr0{PE | PG})) << "nothing changed";

  // And back: WP=1 denies again with P (the walker adds W: 0x3).
  EXPECT_TRUE(ctx.refresh_passthrough_bits(x86::cr0{PE | PG | WP}));
  EXPECT_EQ(ctx.role(), before);
  EXPECT_EQ(ctx.permission_fault(RO_SUP, 0, implicit_gdt_write, x86::rflags{FIXED1}, 0).raw(), 0x1u);
}

TEST(PassthroughRefresh, CheckedFormRefreshesFirst) {
  auto ctx = paging::mmu_context::make(x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{LME | LMA}, x86::gpa{0});
  // Stale role says WP=0; live CR0 says WP=1: denied.
  EXPECT_EQ(ctx.checked_permission_fault(x86::cr0{PE | PG | WP}, RO_USER, 0, W, x86::rflags{FIXED1}, 0).raw(), 1u);
  // Stale role says WP=1; live CR0 says WP=0: allowed.
  EXPECT_EQ(ctx.checked_permission_fault(x86::cr0{PE | PG}, RO_USER, 0, W, x86::rflags{FIXED1}, 0).raw(), 0u);
}

TEST(PassthroughRefresh, OnlyWpIsRefreshedAndNotWithPagingOff) {
  auto ctx = paging::mmu_context::make(x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{LME | LMA}, x86::gpa{0});
  const auto before = ctx.role();
  // Other CR0 bits (even PG) are never taken from the live value: they always exit.
  EXPECT_FALSE(ctx.refresh_passthrough_bits(x86::cr0{PE | (1ull << 3) | (1ull << 30)}));
  EXPECT_EQ(ctx.role(), before);
  auto off = paging::mmu_context::make(x86::cr0{PE}, x86::cr4{}, x86::efer{}, x86::gpa{0});
  EXPECT_FALSE(off.refresh_passthrough_bits(x86::cr0{PE | WP})) << "no permission bits to emulate with paging off";
  EXPECT_FALSE(off.role().cr0_wp());
}

constexpr bool refresh_is_constexpr() {
  auto ctx = paging::mmu_context::make(x86::cr0{PE | PG}, x86::cr4{PAE}, x86::efer{LME | LMA}, x86::gpa{0});
  const bool changed = ctx.refresh_passthrough_bits(x86::cr0{PE | PG | WP});
  return changed && ctx.role().cr0_wp() && ctx.permission_fault(RO_SUP, 0, W, x86::rflags{FIXED1}, 0).raw() == 1;
}
static_assert(refresh_is_constexpr());
TEST(PassthroughRefresh, ConstexprAtRunTime) { EXPECT_TRUE(rt(refresh_is_constexpr())); }

// ---- Protection-key register helpers ----

TEST(Pkru, Helpers) {
  BOTH_EQ(true, paging::pkr_access_disabled, 0x1u << 30, std::uint8_t{15});
  BOTH_EQ(false, paging::pkr_write_disabled, 0x1u << 30, std::uint8_t{15});
  BOTH_EQ(true, paging::pkr_write_disabled, 0x2u << 30, std::uint8_t{15});
  BOTH_EQ(0xfffffff3u, paging::pkr_with, 0xffffffffu, std::uint8_t{1}, false, false);
  BOTH_EQ(0x30u, paging::pkr_with, 0u, std::uint8_t{2}, true, true);
  BOTH_EQ(0x11111111u, paging::pk_register_for, pte_access::user, 0x11111111u, 0x22222222u);
  BOTH_EQ(0x22222222u, paging::pk_register_for, pte_access::write, 0x11111111u, 0x22222222u);
  // pkey above 15: only the low 4 bits count (no out-of-range shift).
  BOTH_EQ(true, paging::pkr_access_disabled, 0x1u, std::uint8_t{16});
}

// ---- EPT ----

TEST(EptPermission, ExhaustiveAgainstModel) {
  // Every role x every non-empty combination of read/write/fetch (a guest paging-structure
  // access with EPT A/D is a read and a write at once) x user/supervisor linear address x
  // all 32 rights combinations.
  std::uint64_t compared = 0;
  for (bool xo : {false, true}) {
    for (bool mbec : {false, true}) {
      const paging::ept_role role{xo, mbec, false};
      for (unsigned kinds = 1; kinds < 8; ++kinds) {
        for (bool uaddr : {false, true}) {
          for (unsigned r = 0; r < 32; ++r) {
            const bool rd = r & 8, wr = r & 2, xs = r & 1, xu = r & 16;
            bool want = false;
            for (unsigned k = 0; k < 3; ++k) {
              if (kinds & (1u << k))
                want = want || model::ept_denies(mbec, static_cast<model::kind>(k), uaddr, {rd, wr, xs, xu});
            }
            const auto acc = paging::ept_access{kinds | (uaddr ? 1ull << 48 : 0)};
            const auto got = paging::ept_permission_fault(role, pte_access{static_cast<std::uint8_t>(r)}, acc);
            // Qualification bits 6:0: access kinds, then R, W, X(S), XU (XU only under MBEC).
            const std::uint64_t q = kinds | (rd ? 8 : 0) | (wr ? 16 : 0) | (xs ? 32 : 0) | (mbec && xu ? 64 : 0);
            EXPECT_EQ(got.raw(), want ? q : 0) << "xo=" << xo << " mbec=" << mbec << " kinds=" << kinds << " r=" << r;
            ++compared;
          }
        }
      }
    }
  }
  std::printf("ept_permission_fault vs model: %llu combinations compared\n",
              static_cast<unsigned long long>(compared));
  EXPECT_EQ(compared, 4ull * 7 * 2 * 32);
}

TEST(EptPermission, Golden) {
  using paging::ept_access;
  constexpr paging::ept_role plain{true, false, true}, mbec{true, true, true};
  // Write to a read-only page: qualification 0x0a (write, readable), 0x2a with X.
  BOTH_EQ(std::uint64_t{0x0a}, ept_q, plain, pte_access::read, ept_access::write);
  BOTH_EQ(std::uint64_t{0x2a}, ept_q, plain, pte_access::read | pte_access::exec, ept_access::write);
  // Execute-only page: fetch allowed, read denied with 0x21.
  BOTH_EQ(std::uint64_t{0}, ept_q, plain, pte_access::exec, ept_access::fetch);
  BOTH_EQ(std::uint64_t{0x21}, ept_q, plain, pte_access::exec, ept_access::read);
  // MBEC: XS only; a user-mode linear address needs XU (0x3c = fetch|R|W|XS).
  constexpr auto rwxs = pte_access::read | pte_access::write | pte_access::exec;
  BOTH_EQ(std::uint64_t{0}, ept_q, mbec, rwxs, ept_access::fetch);
  BOTH_EQ(std::uint64_t{0x3c}, ept_q, mbec, rwxs, ept_access::fetch | ept_access::user_address);
  // Without MBEC, XU is ignored and X governs user-mode addresses too.
  BOTH_EQ(std::uint64_t{0}, ept_q, plain, rwxs, ept_access::fetch | ept_access::user_address);
}

}  // namespace
