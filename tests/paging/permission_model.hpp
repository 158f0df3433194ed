// SPDX-License-Identifier: MIT
// The oracle for the permission tests and the rule_by_rule benchmark baseline: the access
// rules of SDM 4.6.1 (paging rights), 4.6.2 (protection keys), 4.7 (#PF error code) and
// 29.3.3.2 (EPT), written one rule per branch from the SDM text, straight from raw CR0 /
// CR4 / EFER values. It uses no hvkit header and no table: it must stay independent of the
// code under test.
#pragma once

#include <cstdint>

namespace hvkit::test::model {

// Raw architectural bit positions, typed from the SDM (not taken from hvkit).
inline constexpr std::uint64_t cr0_pg = 1ull << 31, cr0_wp = 1ull << 16;
inline constexpr std::uint64_t cr4_pse = 1ull << 4, cr4_pae = 1ull << 5, cr4_la57 = 1ull << 12;
inline constexpr std::uint64_t cr4_smep = 1ull << 20, cr4_smap = 1ull << 21, cr4_pke = 1ull << 22,
                               cr4_pks = 1ull << 24;
inline constexpr std::uint64_t efer_lma = 1ull << 10, efer_nxe = 1ull << 11;
inline constexpr std::uint64_t rflags_ac = 1ull << 18;

struct regs {
  std::uint64_t cr0, cr4, efer;
};

// ss_read / ss_write: shadow-stack accesses (CET), e.g. RET / CALL on the shadow stack.
enum class kind : std::uint8_t { read, write, fetch, ss_read, ss_write };
enum class mode : std::uint8_t { user, supervisor_explicit, supervisor_implicit };

struct access {
  kind k;
  mode m;
};

// What the walker found: the rights ANDed over every level.
struct page {
  bool writable;     // R/W=1 at every level
  bool user;         // U/S=1 at every level (a user-mode address)
  bool executable;   // XD=0 at every level
  std::uint8_t key;  // protection key of the leaf
  // SDM 4.6.1 (CET): R/W=1 in every paging-structure entry above the leaf, R/W=0 and D=1
  // in the leaf. (Implies !writable.)
  bool shadow_stack = false;
};

struct verdict {
  bool fault;  // #PF (P=1)
  bool pk;     // PK bit of the error code
};

constexpr bool ia32e(const regs& r) { return (r.cr0 & cr0_pg) && (r.efer & efer_lma); }
constexpr bool pae_or_ia32e(const regs& r) { return (r.cr0 & cr0_pg) && (r.cr4 & cr4_pae); }

// SDM 4.6.1, "Determination of Access Rights": does paging (without protection keys) deny it?
constexpr bool paging_denies(const regs& r, access a, page p, std::uint64_t rflags) {
  // "For 32-bit paging or if IA32_EFER.NXE = 0, instructions may be fetched from any ...
  // address"; with PAE or IA-32e paging and NXE=1 only with XD=0 at every level.
  const bool xd_applies = pae_or_ia32e(r) && (r.efer & efer_nxe);
  if (a.k == kind::ss_read || a.k == kind::ss_write) {
    // Shadow-stack accesses (SDM 4.6.1, CET): only to shadow-stack pages, user-mode ones
    // only to user-mode addresses and supervisor-mode ones only to supervisor-mode
    // addresses; CR0.WP, SMAP and EFLAGS.AC play no part.
    if (!p.shadow_stack) return true;
    if (a.m == mode::user) return !p.user;
    return p.user;
  }
  if (a.m == mode::user) {
    // User-mode accesses: only user-mode addresses are accessible at all.
    if (!p.user) return true;
    if (a.k == kind::read) return false;
    if (a.k == kind::write) return !p.writable;  // regardless of CR0.WP
    if (xd_applies && !p.executable) return true;  // fetch
    return false;
  }
  // Supervisor-mode accesses.
  if (a.k == kind::fetch) {
    if (p.user && (r.cr4 & cr4_smep)) return true;  // SMEP: never from user-mode addresses
    if (xd_applies && !p.executable) return true;
    return false;
  }
  if (p.user && (r.cr4 & cr4_smap)) {
    // SMAP: data accesses to user-mode addresses only if explicit and EFLAGS.AC=1.
    const bool explicit_with_ac = a.m == mode::supervisor_explicit && (rflags & rflags_ac);
    if (!explicit_with_ac) return true;
  }
  if (a.k == kind::read) return false;
  // Supervisor data writes: CR0.WP=0 allows writes to read-only addresses.
  if (!(r.cr0 & cr0_wp)) return false;
  return !p.writable;
}

// SDM 4.6.2 and 4.7 (PK flag): does the protection key deny it? `pkru` and `pkrs` are the
// two registers; the rule picks the one for the address.
constexpr bool key_denies(const regs& r, access a, page p, std::uint32_t pkru, std::uint32_t pkrs) {
  if (!ia32e(r)) return false;          // keys exist only with IA-32e paging
  if (a.k == kind::fetch) return false;  // keys govern data accesses only
  std::uint32_t reg = 0;
  if (p.user) {
    if (!(r.cr4 & cr4_pke)) return false;
    reg = pkru;
  } else {
    if (!(r.cr4 & cr4_pks)) return false;
    reg = pkrs;
  }
  const bool ad = (reg >> (2 * p.key)) & 1;
  const bool wd = (reg >> (2 * p.key + 1)) & 1;
  if (ad) return true;  // "no data accesses are permitted"
  // Shadow-stack accesses are data accesses; a shadow-stack write is a write (SDM 4.6.2).
  const bool write = a.k == kind::write || a.k == kind::ss_write;
  if (!write || !wd) return false;
  // WD stops user-mode writes, and supervisor-mode writes only if CR0.WP=1.
  if (a.m == mode::user) return true;
  return (r.cr0 & cr0_wp) != 0;
}

constexpr verdict check(const regs& r, access a, page p, std::uint64_t rflags, std::uint32_t pkru,
                        std::uint32_t pkrs) {
  const bool paging = paging_denies(r, a, p, rflags);
  const bool key = key_denies(r, a, p, pkru, pkrs);
  return {paging || key, key};
}

// EPT (SDM 29.3.3.2): an EPT violation if the access is not allowed by the rights ANDed
// over the EPT walk.
struct ept_page {
  bool read, write, exec_supervisor, exec_user;  // R, W, X (XS with MBEC), XU
};
constexpr bool ept_denies(bool mbec, kind k, bool user_linear_address, ept_page p) {
  if (k == kind::read) return !p.read;
  if (k == kind::write) return !p.write;
  if (!mbec) return !p.exec_supervisor;  // bit 2 (X) controls every fetch
  if (user_linear_address) return !p.exec_user;
  return !p.exec_supervisor;
}

}  // namespace hvkit::test::model
