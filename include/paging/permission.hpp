/// @file
/// @brief Precomputed permission tables for every role, and the branch-free
/// `permission_fault` / `ept_permission_fault` checks built on them (SDM 4.6, 4.7, 29.3.3.2).
///
/// Nothing is computed at run time when a control register changes: the tables for all 64
/// combinations of (CR0.WP, CR4.SMEP, CR4.SMAP, EFER.NXE, CR4.PKE, CR4.PKS) and all 4 EPT
/// combinations (execute-only, MBEC) are constexpr data, and a role selects its table with
/// one shift and mask (cpu_role::permission_index()).
///
/// Guest-paging table layout (one `permission_table` per role, 16 x uint16_t = 32 bytes):
/// - index = access class, 4 bits: bit 0 W (write), bit 1 U (user-mode access), bit 2 SMAP
///   override (explicit supervisor access with RFLAGS.AC=1), bit 3 F (instruction fetch).
///   This is the #PF error code shifted right by one with the RSVD position reused for the
///   override, so it is computed with a shift, a mask and one OR.
/// - entry bits 7:0: bit r is 1 if an access of that class to a page with accumulated
///   rights r (pte_access exec|write|user, 0-7) violates paging rights;
/// - entry bits 9:8: protection-key mask for user-mode addresses (bit 8 AD applies, bit 9 WD
///   applies) and bits 11:10 the same for supervisor-mode addresses (PKS).
#pragma once

#include <array>
#include <cstdint>

#include <paging/access.hpp>
#include <paging/role.hpp>
#include <x86/pfec.hpp>
#include <x86/rflags.hpp>

namespace hvkit::paging {

/// The permission table of one cpu_role (see the file comment for the layout).
struct permission_table {
  std::array<std::uint16_t, 16> entries{};

  static constexpr unsigned idx_write = 1;     ///< access-class bit: write
  static constexpr unsigned idx_user = 2;      ///< access-class bit: user-mode access
  static constexpr unsigned idx_smap_ok = 4;   ///< access-class bit: SMAP overridden (explicit, AC=1)
  static constexpr unsigned idx_fetch = 8;     ///< access-class bit: instruction fetch
  static constexpr unsigned pk_user_shift = 8;        ///< entry bits 9:8: PK mask, user-mode address
  static constexpr unsigned pk_supervisor_shift = 10; ///< entry bits 11:10: PK mask, supervisor-mode address

  friend constexpr bool operator==(const permission_table&, const permission_table&) noexcept = default;
};

namespace detail {

/// One table: the SDM 4.6.1 / 4.6.2 rules evaluated for each access class and each of the
/// 8 rights combinations. `p` holds WP, SMEP, SMAP, NX, PKE, PKS in bits 0-5.
consteval permission_table make_permission_table(unsigned p) {
  const bool wp = p & 1u, smep = p & 2u, smap = p & 4u, nx = p & 8u, pke = p & 16u, pks = p & 32u;
  permission_table t{};
  for (unsigned a = 0; a < 16; ++a) {
    const bool w = a & permission_table::idx_write, u = a & permission_table::idx_user;
    const bool smap_ok = a & permission_table::idx_smap_ok, f = a & permission_table::idx_fetch;
    std::uint16_t e = 0;
    for (unsigned r = 0; r < 8; ++r) {
      const bool x = r & pte_access::exec.raw(), rw = r & pte_access::write.raw();
      const bool uaddr = r & pte_access::user.raw();
      bool fault = false;
      fault |= u && !uaddr;                   // user access to a supervisor-mode address
      fault |= w && !rw && (u || wp);         // read-only: user writes always, supervisor with WP
      fault |= f && nx && !x;                 // XD=1 somewhere, with EFER.NXE
      fault |= f && !u && uaddr && smep;      // SMEP: supervisor fetch from a user-mode address
      fault |= !f && !u && uaddr && smap && !smap_ok;  // SMAP: supervisor data access, AC=0 or implicit
      if (fault) e = static_cast<std::uint16_t>(e | (1u << r));
    }
    // SDM 4.6.2 / 4.7 (PK): keys govern data accesses only; AD blocks every data access, WD
    // blocks writes by user-mode accesses, and supervisor writes only with CR0.WP=1.
    const unsigned pk = f ? 0u : (1u | ((w && (u || wp)) ? 2u : 0u));
    if (pke) e = static_cast<std::uint16_t>(e | (pk << permission_table::pk_user_shift));
    if (pks) e = static_cast<std::uint16_t>(e | (pk << permission_table::pk_supervisor_shift));
    t.entries[a] = e;
  }
  return t;
}

consteval std::array<permission_table, 64> make_permission_tables() {
  std::array<permission_table, 64> all{};
  for (unsigned p = 0; p < 64; ++p) all[p] = make_permission_table(p);
  return all;
}

}  // namespace detail

/// Every guest-paging permission table, indexed by cpu_role::permission_index().
inline constexpr std::array<permission_table, 64> permission_tables = detail::make_permission_tables();

/// The permission table of `role`: O(1), no computation.
[[nodiscard]] constexpr const permission_table& permission_table_for(cpu_role role) noexcept {
  return permission_tables[role.permission_index()];
}

/// The permission check of one access against a table (see mmu_context::permission_fault,
/// which documents the arguments and the result). Branch-free.
[[nodiscard]] constexpr x86::pfec permission_fault(const permission_table& table, pte_access rights,
                                                   std::uint8_t pkey, x86::pfec access, x86::rflags rflags,
                                                   std::uint32_t pkr) noexcept {
  const std::uint64_t a = access.raw();
  // SMAP override: RFLAGS.AC=1 for an explicit supervisor-mode access (SDM 4.6.1). The
  // override bit sits where the #PF RSVD bit would be after the shift below.
  const std::uint64_t explicit_sup = ~((a >> 2) | (a >> 48)) & 1u;  // !U && !implicit
  const std::uint64_t smap_ok = (rflags.raw() >> 18) & explicit_sup;
  static_assert(x86::pfec::user.raw() == 1u << 2 && x86::pfec::implicit_access.raw() == std::uint64_t{1} << 48 &&
                    x86::rflags::ac.raw() == 1u << 18,
                "permission_fault() hard-codes the U, implicit and AC bit positions");
  const unsigned idx = static_cast<unsigned>(((a >> 1) & 0xbu) | ((smap_ok & 1u) << 2));
  const unsigned e = table.entries[idx];
  const unsigned r = rights.raw();
  const unsigned fault = (e >> (r & 7u)) & 1u;
  // PK: the mask for the address's kind (user-mode: PKRU bits, supervisor-mode: PKRS bits).
  const unsigned pk_shift = permission_table::pk_supervisor_shift - 2u * ((r >> 2) & 1u);
  const unsigned pk_bits = (pkr >> (2u * (pkey & 15u))) & (e >> pk_shift) & 3u;
  const unsigned pk = (pk_bits | (pk_bits >> 1)) & 1u;
  return x86::pfec{static_cast<std::uint64_t>((fault | pk) | (pk << 5))};
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
