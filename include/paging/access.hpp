// SPDX-License-Identifier: MIT
/// @file
/// @brief Accumulated page rights (`pte_access`) and the EPT access / violation bit sets.
///
/// A page walk ANDs the rights of every paging-structure entry it uses (SDM 4.6.1: an
/// address is writable only if R/W=1 in every entry, a user-mode address only if U/S=1 in
/// every entry, executable only if XD=0 in every entry). `pte_access` is that accumulated
/// result, the input of the permission check. For EPT the same type carries R, W, X (XS with
/// mode-based execute control) and XU (SDM 29.3.2, 29.3.3.2).
#pragma once

#include <cstdint>

#include "../x86/flags.hpp"

namespace hvkit::paging {

/// Accumulated rights of a translation, ANDed over every level of the walk.
///
/// Guest paging (SDM 4.6.1) uses `exec`, `write` and `user` (bits 0-2; the permission
/// tables are indexed by exactly these three bits). EPT (SDM 29.3.3.2) uses `read`,
/// `write`, `exec` (X, or XS when mode-based execute control is on) and `user_exec` (XU).
/// Guest paging also derives `shadow_stack` (CET, SDM 4.6.1): R/W=1 in every
/// paging-structure entry controlling the translation except the one that maps the page,
/// and R/W=0 with D=1 in that one. It is not an AND of a bit but computed by the walker.
class pte_access : public x86::flags<pte_access, std::uint8_t> {
 public:
  using flags::flags;
  static const pte_access exec;       ///< bit 0: executable (XD=0 at every level; EPT X / XS)
  static const pte_access write;      ///< bit 1: writable (R/W=1 at every level; EPT W)
  static const pte_access user;       ///< bit 2: user-mode address (U/S=1 at every level)
  static const pte_access read;       ///< bit 3: EPT only: readable (R=1 at every level)
  static const pte_access user_exec;  ///< bit 4: EPT with MBEC only: XU=1 at every level
  /// bit 5: guest paging only: a shadow-stack page (CET, SDM 4.6.1; see the class comment).
  static const pte_access shadow_stack;
  /// The three rights guest paging uses (exec, write, user).
  static const pte_access paging_rights;
  /// The four rights EPT uses (read, write, exec, user_exec).
  static const pte_access ept_rights;
  /// Every right that is an AND over the walk (not `shadow_stack`, a derived property).
  static const pte_access all;
};
inline constexpr pte_access pte_access::exec = pte_access::bit(0);
inline constexpr pte_access pte_access::write = pte_access::bit(1);
inline constexpr pte_access pte_access::user = pte_access::bit(2);
inline constexpr pte_access pte_access::read = pte_access::bit(3);
inline constexpr pte_access pte_access::user_exec = pte_access::bit(4);
inline constexpr pte_access pte_access::shadow_stack = pte_access::bit(5);
inline constexpr pte_access pte_access::paging_rights = pte_access::exec | pte_access::write | pte_access::user;
inline constexpr pte_access pte_access::ept_rights =
    pte_access::read | pte_access::write | pte_access::exec | pte_access::user_exec;
inline constexpr pte_access pte_access::all = pte_access::paging_rights | pte_access::ept_rights;

/// The kind of a guest-physical access checked against EPT rights. Bits 2:0 use the
/// layout of the EPT-violation exit qualification (SDM 28.2.1, Table 28-7).
class ept_access : public x86::flags<ept_access> {
 public:
  using flags::flags;
  static const ept_access read;   ///< bit 0: data read
  static const ept_access write;  ///< bit 1: data write
  static const ept_access fetch;  ///< bit 2: instruction fetch
  /// Software: the guest-linear address of a fetch is a user-mode address (U/S=1 at every
  /// level of the guest walk). Selects XU instead of XS under MBEC (SDM 29.3.3.2).
  static const ept_access user_address;
};
inline constexpr ept_access ept_access::read = ept_access::bit(0);
inline constexpr ept_access ept_access::write = ept_access::bit(1);
inline constexpr ept_access ept_access::fetch = ept_access::bit(2);
inline constexpr ept_access ept_access::user_address = ept_access::bit(48);

/// The permission part of an EPT-violation exit qualification (SDM 28.2.1, Table 28-7,
/// bits 6:0). Empty means "no violation".
class ept_violation : public x86::flags<ept_violation> {
 public:
  using flags::flags;
  static const ept_violation read;            ///< bit 0: the access was a data read
  static const ept_violation write;           ///< bit 1: the access was a data write
  static const ept_violation fetch;           ///< bit 2: the access was an instruction fetch
  static const ept_violation readable;        ///< bit 3: AND of the R bits of the translation
  static const ept_violation writable;        ///< bit 4: AND of the W bits
  static const ept_violation executable;      ///< bit 5: AND of X (XS with MBEC)
  /// bit 6: AND of XU with MBEC; hvkit reports 0 without MBEC, where the SDM leaves it undefined.
  static const ept_violation user_executable;
};
inline constexpr ept_violation ept_violation::read = ept_violation::bit(0);
inline constexpr ept_violation ept_violation::write = ept_violation::bit(1);
inline constexpr ept_violation ept_violation::fetch = ept_violation::bit(2);
inline constexpr ept_violation ept_violation::readable = ept_violation::bit(3);
inline constexpr ept_violation ept_violation::writable = ept_violation::bit(4);
inline constexpr ept_violation ept_violation::executable = ept_violation::bit(5);
inline constexpr ept_violation ept_violation::user_executable = ept_violation::bit(6);

}  // namespace hvkit::paging
