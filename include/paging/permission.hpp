// SPDX-License-Identifier: MIT
/// @file
/// @brief Precomputed permission tables for every role, and the branch-free
/// `permission_fault` / `ept_permission_fault` checks built on them (SDM 4.6, 4.7, 29.3.3.2).
///
/// Nothing is computed at run time when a control register changes: the tables for all 64
/// combinations of (CR0.WP, CR4.SMEP, CR4.SMAP, EFER.NXE, CR4.PKE, CR4.PKS) and all 4 EPT
/// combinations (execute-only, MBEC) are constexpr data, and a role selects its table with
/// one shift and mask (cpu_role::permission_index()).
///
/// Guest-paging table layout (one `permission_table` per role, 512 bytes; 32 KiB in all):
/// - index, 9 bits: bits 2:0 the page's accumulated rights (pte_access exec, write, user),
///   bit 3 W (write access), bit 4 U (user-mode access), bit 5 the derived
///   pte_access::shadow_stack right, bit 6 I/D (instruction fetch), bit 7 SMAP override
///   (RFLAGS.AC=1 and not an implicit access; it matters only with bit 4 clear, i.e. for an
///   explicit supervisor-mode access), bit 8 SS (a CET shadow-stack access). Bits 3, 4, 6 and 8 are the #PF error-code bits W, U, I/D and SS shifted left by
///   two, and bits 2:0 and 5 are the pte_access bits where they are, so the index is two
///   masks, a shift and the SMAP term away from the inputs;
/// - entry bits 1:0: which bits of the protection key apply, in the PKRU/PKRS layout: bit 0
///   AD, bit 1 WD (SDM 4.6.2: data accesses only; WD for user-mode writes, and for
///   supervisor writes only with CR0.WP=1; user-mode addresses under CR4.PKE, supervisor-mode
///   addresses under CR4.PKS);
/// - entry bit 2: paging rights deny the access (SDM 4.6.1).
/// The check is then one table load, one variable shift of the PK register, a 32-entry
/// result lookup (entry x the key's AD/WD bits -> P, PK) and a few ALU operations, with no
/// branch. Shadow-stack accesses have their own half of each table (index bit 8), so their
/// rule costs nothing on the path of ordinary accesses.
#pragma once

#include <array>
#include <cstdint>

#include "access.hpp"
#include "role.hpp"
#include "../x86/pfec.hpp"
#include "../x86/rflags.hpp"

namespace hvkit::paging {

/// The permission table of one cpu_role (see the file comment for the layout).
struct permission_table {
  std::array<std::uint8_t, 512> entries{};

  static constexpr unsigned idx_rights = 0x27u;     ///< index bits: pte_access exec, write, user, shadow_stack
  static constexpr unsigned idx_write = 1u << 3;    ///< index bit: write access
  static constexpr unsigned idx_user = 1u << 4;     ///< index bit: user-mode access
  static constexpr unsigned idx_fetch = 1u << 6;    ///< index bit: instruction fetch
  static constexpr unsigned idx_smap_ok = 1u << 7;  ///< index bit: AC=1, not implicit (overrides SMAP if U=0)
  static constexpr unsigned idx_ss = 1u << 8;       ///< index bit: shadow-stack access
  static constexpr std::uint8_t pk_ad = 1u;         ///< entry bit: the key's AD bit applies
  static constexpr std::uint8_t pk_wd = 2u;         ///< entry bit: the key's WD bit applies
  static constexpr std::uint8_t deny = 4u;          ///< entry bit: paging rights deny

  friend constexpr bool operator==(const permission_table&, const permission_table&) noexcept = default;
};
static_assert(permission_table::idx_rights == (pte_access::paging_rights | pte_access::shadow_stack).raw());

namespace detail {

/// One table: the SDM 4.6.1 / 4.6.2 rules evaluated for every index. `p` holds WP, SMEP,
/// SMAP, NX, PKE, PKS in bits 0-5 (cpu_role::permission_index()).
consteval permission_table make_permission_table(unsigned p) {
  const bool wp = p & 1u, smep = p & 2u, smap = p & 4u, nx = p & 8u, pke = p & 16u, pks = p & 32u;
  permission_table t{};
  // The bit masks hoisted out of the loop: constant evaluation of a member call per entry
  // made this table most of the compile time of every translation unit that includes it.
  constexpr unsigned m_x = pte_access::exec.raw(), m_rw = pte_access::write.raw(), m_u = pte_access::user.raw();
  constexpr unsigned m_ss_page = pte_access::shadow_stack.raw();
  constexpr unsigned n = std::tuple_size_v<decltype(t.entries)>;
  for (unsigned i = 0; i < n; ++i) {
    const bool x = i & m_x, rw = i & m_rw;
    const bool uaddr = i & m_u, ss_page = i & m_ss_page;
    const bool w = i & permission_table::idx_write, u = i & permission_table::idx_user;
    const bool smap_ok = i & permission_table::idx_smap_ok, f = i & permission_table::idx_fetch;
    const bool ss = i & permission_table::idx_ss;
    bool fault = false;
    if (ss) {
      // Shadow-stack accesses (CET, SDM 4.6.1): allowed only to shadow-stack pages whose
      // mode matches the access's: a user-mode shadow-stack access (CPL 3, or WRUSS) needs
      // a user-mode address, a supervisor-mode one a supervisor-mode address, whatever
      // CR0.WP, CR4.SMAP and RFLAGS.AC say (the leaf has R/W=0, so the ordinary write rule
      // would deny every shadow-stack write).
      fault = !ss_page || u != uaddr;
    } else {
      // Ordinary accesses; the shadow-stack right plays no part (the page is read-only).
      fault |= u && !uaddr;                            // user access to a supervisor-mode address
      fault |= w && !rw && (u || wp);                  // read-only: user writes always, supervisor with WP
      fault |= f && nx && !x;                          // XD=1 somewhere, with EFER.NXE
      fault |= f && !u && uaddr && smep;               // SMEP: supervisor fetch from a user-mode address
      fault |= !f && !u && uaddr && smap && !smap_ok;  // SMAP: supervisor data access, AC=0 or implicit
    }
    // SDM 4.6.2 / 4.7 (PK): keys govern data accesses only, PKRU for user-mode addresses
    // (CR4.PKE), IA32_PKRS for supervisor-mode ones (CR4.PKS). AD blocks every data access;
    // WD blocks user-mode writes, and supervisor-mode writes only with CR0.WP=1. A
    // shadow-stack access is a data access and a shadow-stack write a write.
    const bool keyed = !f && (uaddr ? pke : pks);
    unsigned e = fault ? permission_table::deny : 0u;
    if (keyed) e |= permission_table::pk_ad | ((w && (u || wp)) ? permission_table::pk_wd : 0u);
    t.entries.data()[i] = static_cast<std::uint8_t>(e);
  }
  return t;
}

consteval std::array<permission_table, 64> make_permission_tables() {
  std::array<permission_table, 64> all{};
  for (unsigned p = 0; p < 64; ++p) all[p] = make_permission_table(p);
  return all;
}

/// The #PF bits of a check, indexed by (table entry << 2) | (the key's AD, WD bits): P if
/// paging rights deny or an applicable key bit is set, PK if an applicable key bit is set
/// (SDM 4.7: PK is reported even when paging rights deny as well).
consteval std::array<std::uint8_t, 32> make_permission_result() {
  std::array<std::uint8_t, 32> r{};
  for (unsigned i = 0; i < 32; ++i) {
    const unsigned key_bits = i & 3u, applies = (i >> 2) & 3u;
    const bool deny = (i >> 2) & permission_table::deny;
    const bool pk = (key_bits & applies) != 0;
    r[i] = static_cast<std::uint8_t>(((deny || pk) ? x86::pfec::present.raw() : 0u) | (pk ? x86::pfec::pk.raw() : 0u));
  }
  return r;
}
inline constexpr std::array<std::uint8_t, 32> permission_result = make_permission_result();

}  // namespace detail

/// Every guest-paging permission table, indexed by cpu_role::permission_index().
inline constexpr std::array<permission_table, 64> permission_tables = detail::make_permission_tables();

namespace detail {
/// permission_fault() sets index bit 7 from AC and the implicit flag alone: every table must
/// then give the same entry with and without bit 7 for a user-mode access (bit 4 set).
consteval bool smap_bit_ignored_for_user_accesses() {
  for (const auto& t : permission_tables)
    for (unsigned i = 0; i < t.entries.size(); ++i)
      if ((i & permission_table::idx_user) && t.entries[i] != t.entries[i ^ permission_table::idx_smap_ok]) return false;
  return true;
}
}  // namespace detail
// (Checked by a static_assert in tests/paging/permission_test.cpp, not here: evaluating it
// in every translation unit that includes this header cost about 0.5 s of compile CPU.)

/// The permission table of `role`: O(1), no computation.
[[nodiscard]] constexpr const permission_table& permission_table_for(cpu_role role) noexcept {
  return permission_tables[role.permission_index()];
}

/// The permission check of one access against a table (see mmu_context::permission_fault,
/// which documents the arguments and the result). Branch-free.
[[nodiscard]] constexpr x86::pfec permission_fault(const permission_table& table, pte_access rights,
                                                   std::uint8_t pkey, x86::pfec access, x86::rflags rflags,
                                                   std::uint32_t pkr) noexcept {
  static_assert(x86::pfec::write.raw() << 2 == permission_table::idx_write &&
                    x86::pfec::user.raw() << 2 == permission_table::idx_user &&
                    x86::pfec::fetch.raw() << 2 == permission_table::idx_fetch &&
                    x86::pfec::ss.raw() << 2 == permission_table::idx_ss &&
                    x86::pfec::implicit_access.raw() >> 41 == permission_table::idx_smap_ok &&
                    x86::rflags::ac.raw() >> 11 == permission_table::idx_smap_ok,
                "permission_fault() hard-codes the W, U, I/D, SS, implicit and AC bit positions");
  const std::uint64_t a = access.raw();
  // SMAP override (SDM 4.6.1): RFLAGS.AC=1 and an explicit supervisor-mode access, i.e.
  // neither U nor implicit. AC and the implicit flag line up at index bit 7; U is index
  // bit 4 already, and the tables ignore bit 7 when it is set (SMAP governs supervisor-mode
  // accesses only), so the index bit needs no U term.
  const std::uint64_t smap_ok = (rflags.raw() >> 11) & ~(a >> 41) & permission_table::idx_smap_ok;
  const unsigned idx = static_cast<unsigned>(((a << 2) & (permission_table::idx_write | permission_table::idx_user |
                                                          permission_table::idx_fetch | permission_table::idx_ss)) |
                                             smap_ok | (rights.raw() & permission_table::idx_rights));
  const unsigned e = table.entries[idx];
  // The key's AD and WD bits from the PK register; the entry says which of them apply.
  const unsigned key_bits = (pkr >> (2u * (pkey & 15u))) & 3u;
  return x86::pfec{detail::permission_result[(e << 2) | key_bits]};
}
static_assert(x86::pfec::present.raw() == 1 && x86::pfec::pk.raw() == 1u << 5);

/// The permission check for `role`: selects the precomputed table and checks. Branch-free.
[[nodiscard]] constexpr x86::pfec permission_fault(cpu_role role, pte_access rights, std::uint8_t pkey,
                                                   x86::pfec access, x86::rflags rflags,
                                                   std::uint32_t pkr) noexcept {
  return permission_fault(permission_table_for(role), rights, pkey, access, rflags, pkr);
}

/// The EPT permission table of one ept_role: bit r of entries[a] is 1 if an access of class
/// a (bit 0 read, bit 1 write, bit 2 fetch, bit 3 user-mode linear address) to a
/// guest-physical page with accumulated EPT rights r (pte_access bits, 0-31) is an EPT
/// violation (SDM 29.3.3.2).
struct ept_permission_table {
  std::array<std::uint32_t, 16> entries{};
  friend constexpr bool operator==(const ept_permission_table&, const ept_permission_table&) noexcept = default;
};

namespace detail {
consteval ept_permission_table make_ept_permission_table(unsigned p) {
  const bool mbec = p & 2u;  // bit 0 (execute-only) does not change violations, only misconfigurations
  ept_permission_table t{};
  for (unsigned a = 0; a < 16; ++a) {
    const bool rd = a & 1u, wr = a & 2u, fe = a & 4u, uaddr = a & 8u;
    std::uint32_t e = 0;
    for (unsigned r = 0; r < 32; ++r) {
      const bool can_read = r & pte_access::read.raw(), can_write = r & pte_access::write.raw();
      const bool xs = r & pte_access::exec.raw(), xu = r & pte_access::user_exec.raw();
      // Without MBEC, X governs every fetch; with it, XU for user-mode linear addresses and
      // XS for supervisor-mode ones (SDM 29.3.3.2).
      const bool can_exec = mbec ? (uaddr ? xu : xs) : xs;
      const bool fault = (rd && !can_read) || (wr && !can_write) || (fe && !can_exec);
      if (fault) e |= 1u << r;
    }
    t.entries[a] = e;
  }
  return t;
}
consteval std::array<ept_permission_table, 4> make_ept_permission_tables() {
  std::array<ept_permission_table, 4> all{};
  for (unsigned p = 0; p < 4; ++p) all[p] = make_ept_permission_table(p);
  return all;
}
}  // namespace detail

/// Every EPT permission table, indexed by ept_role::permission_index().
inline constexpr std::array<ept_permission_table, 4> ept_permission_tables = detail::make_ept_permission_tables();

/// The EPT permission table of `role`: O(1).
[[nodiscard]] constexpr const ept_permission_table& permission_table_for(ept_role role) noexcept {
  return ept_permission_tables[role.permission_index()];
}

/// EPT permission check (SDM 29.3.3.2). Returns an empty set if the access is allowed,
/// otherwise bits 6:0 of the EPT-violation exit qualification: the access kind (bits 2:0,
/// copied from `access`) and the translation's rights (bits 6:3: R, W, X or XS, and XU
/// under MBEC, 0 otherwise). The caller adds the other qualification bits (guest-linear
/// address valid, ...). `rights` are the EPT rights ANDed over the EPT walk; the
/// ept_access::user_address flag says whether the guest-linear address is user-mode.
/// Branch-free.
[[nodiscard]] constexpr ept_violation ept_permission_fault(ept_role role, pte_access rights,
                                                           ept_access access) noexcept {
  const std::uint64_t a = access.raw();
  const unsigned idx = static_cast<unsigned>((a & 7u) | ((a >> 45) & 8u));
  static_assert(ept_access::user_address.raw() == std::uint64_t{1} << 48);
  const unsigned r = rights.raw() & 31u;
  const std::uint64_t fault = (permission_table_for(role).entries[idx] >> r) & 1u;
  const std::uint64_t mbec = role.mbec() ? 1u : 0u;
  const std::uint64_t q = (a & 7u) | (((r >> 3) & 1u) << 3) | (((r >> 1) & 1u) << 4) | ((r & 1u) << 5) |
                          ((((r >> 4) & mbec) & 1u) << 6);
  return ept_violation{q & (0u - fault)};
}

}  // namespace hvkit::paging
