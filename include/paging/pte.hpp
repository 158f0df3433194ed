// SPDX-License-Identifier: MIT
/// @file
/// @brief IA-32 paging-structure entries (32-bit, PAE, 4-level and 5-level paging): the
/// named bits and fields of one entry (SDM 4.3, 4.4.2, 4.5.4; Tables 4-4 to 4-20).
///
/// One type serves all four modes; 32-bit paging entries are 4 bytes and are held
/// zero-extended. Which bits are reserved depends on the mode, the level, MAXPHYADDR, NXE
/// and the vendor: see paging/reserved.hpp.
#pragma once

#include <cstdint>

#include "../x86/address.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/contract.hpp"
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

  /// The physical address in a non-leaf entry or a 4 KiB PTE: bits MAXPHYADDR-1:12 (SDM
  /// Tables 4-5, 4-6, 4-8 to 4-11, 4-15 to 4-20; a 32-bit paging entry is 4 bytes, so 31:12).
  [[nodiscard]] constexpr x86::gpa address(unsigned maxphyaddr) const noexcept {
    return x86::gpa{raw() & x86::physical_address_mask(maxphyaddr) & ~(x86::page_size_4k - 1)};
  }
  /// The frame of address().
  [[nodiscard]] constexpr x86::gfn frame(unsigned maxphyaddr) const noexcept { return x86::gpa_to_gfn(address(maxphyaddr)); }
  /// The base of the page a leaf entry maps in PAE or 4/5-level paging: bits MAXPHYADDR-1:12
  /// of a 4 KiB PTE, MAXPHYADDR-1:21 of a 2 MiB PDE, MAXPHYADDR-1:30 of a 1 GiB PDPTE (SDM
  /// Tables 4-9, 4-11, 4-17, 4-19, 4-20; bit 12 of a large leaf is PAT, not address).
  [[nodiscard]] constexpr x86::gpa page_address(std::uint64_t size, unsigned maxphyaddr) const noexcept {
    HVKIT_EXPECTS(size == x86::page_size_4k || size == x86::page_size_2m || size == x86::page_size_1g);
    return x86::gpa{raw() & x86::physical_address_mask(maxphyaddr) & ~(size - 1)};
  }
  /// The base of a 4 MiB page in 32-bit paging (PDE with PS=1): bits 31:22 from the entry and,
  /// with PSE-36, physical bits MAXPHYADDR-1:32 from entry bits 20:13 (SDM 4.3, Table 4-4;
  /// at most 40 address bits).
  [[nodiscard]] constexpr x86::gpa page_address_4m(unsigned maxphyaddr) const noexcept {
    const std::uint64_t a = (raw() & 0xffc0'0000u) | (pse36_field::get(raw()) << 32);
    return x86::gpa{a & x86::physical_address_mask(maxphyaddr < 40 ? maxphyaddr : 40)};
  }

  /// The builder: an entry referencing the table or 4 KiB page at `a` with the bits of `f`
  /// (pte::present | pte::writable ...). `a` must be 4 KiB aligned and below 2^52, and `f`
  /// must hold no address bits (contract).
  [[nodiscard]] static constexpr pte make(x86::gpa a, pte f) noexcept {
    HVKIT_EXPECTS((a.value() & ~address_bits) == 0 && (f.raw() & address_bits) == 0);
    return pte{a.value() | f.raw()};
  }
  /// A leaf mapping the 2 MiB or 1 GiB page at `a` (PS set; PAE and 4/5-level paging).
  [[nodiscard]] static constexpr pte make_large(x86::gpa a, std::uint64_t size, pte f) noexcept {
    HVKIT_EXPECTS((size == x86::page_size_2m || size == x86::page_size_1g) && (a.value() & (size - 1)) == 0);
    return make(a, f.with(page_size_bit()));
  }
  /// A copy with bits 51:12 replaced by `a` (4 KiB aligned, below 2^52).
  [[nodiscard]] constexpr pte with_address(x86::gpa a) const noexcept {
    HVKIT_EXPECTS((a.value() & ~address_bits) == 0);
    return pte{(raw() & ~address_bits) | a.value()};
  }
  /// A copy with protection key `k` (0..15) in bits 62:59.
  [[nodiscard]] constexpr pte with_pkey(std::uint8_t k) const noexcept { return pte{pkey_field::set(raw(), k)}; }

  /// Bits 51:12, the widest address field of any entry (MAXPHYADDR at most 52).
  static constexpr std::uint64_t address_bits = 0x000f'ffff'ffff'f000ull;

 private:
  static constexpr pte page_size_bit() noexcept { return pte::bit(7); }
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
