/// @file
/// @brief IA-32 paging-structure entries (32-bit, PAE, 4-level and 5-level paging): the
/// named bits and fields of one entry (SDM 4.3, 4.4.2, 4.5.4; Tables 4-4 to 4-20).
///
/// One type serves all four modes; 32-bit paging entries are 4 bytes and are held
/// zero-extended. Which bits are reserved depends on the mode, the level, MAXPHYADDR, NXE
/// and the vendor: see paging/reserved.hpp.
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"
#include "../x86/flags.hpp"

namespace hvkit::paging {

/// One IA-32 paging-structure entry (PML5E, PML4E, PDPTE, PDE or PTE).
class pte : public x86::flags<pte> {
 public:
  using flags::flags;
  static const pte present;    ///< 0: P
  static const pte writable;   ///< 1: R/W
  static const pte user;       ///< 2: U/S
  static const pte pwt;        ///< 3: page-level write-through
  static const pte pcd;        ///< 4: page-level cache disable
  static const pte accessed;   ///< 5: A
  static const pte dirty;      ///< 6: D (leaf entries only; ignored in non-leaf entries)
  static const pte page_size;  ///< 7: PS in a PDE/PDPTE (PAT in a 4 KiB PTE)
  static const pte global;     ///< 8: G (leaf entries only)
  static const pte pat_large;  ///< 12: PAT of a 2 MiB, 4 MiB or 1 GiB page
  static const pte xd;         ///< 63: execute-disable (PAE, 4/5-level, with EFER.NXE=1)

  /// Bits 62:59 of a leaf entry in 4/5-level paging: the protection key (SDM 4.6.2).
  using pkey_field = x86::bitfield<std::uint64_t, 59, 4, std::uint8_t>;
  /// Bits 20:13 of a 4 MiB PDE in 32-bit paging: physical-address bits 39:32 (PSE-36, SDM 4.3).
  using pse36_field = x86::bitfield<std::uint64_t, 13, 8, std::uint64_t>;

  [[nodiscard]] constexpr std::uint8_t pkey() const noexcept { return pkey_field::get(raw()); }
};
inline constexpr pte pte::present = pte::bit(0);
inline constexpr pte pte::writable = pte::bit(1);
inline constexpr pte pte::user = pte::bit(2);
inline constexpr pte pte::pwt = pte::bit(3);
inline constexpr pte pte::pcd = pte::bit(4);
inline constexpr pte pte::accessed = pte::bit(5);
inline constexpr pte pte::dirty = pte::bit(6);
inline constexpr pte pte::page_size = pte::bit(7);
inline constexpr pte pte::global = pte::bit(8);
inline constexpr pte pte::pat_large = pte::bit(12);
inline constexpr pte pte::xd = pte::bit(63);

/// One PAE page-directory-pointer-table entry as loaded into the PDPTE registers (SDM 4.4.1,
/// Table 4-8): only P, PWT, PCD and the address; there are no access-right or A/D bits.
class pdpte : public x86::flags<pdpte> {
 public:
  using flags::flags;
  static const pdpte present;  ///< 0: P
  static const pdpte pwt;      ///< 3
  static const pdpte pcd;      ///< 4
};
inline constexpr pdpte pdpte::present = pdpte::bit(0);
inline constexpr pdpte pdpte::pwt = pdpte::bit(3);
inline constexpr pdpte pdpte::pcd = pdpte::bit(4);

}  // namespace hvkit::paging
