// SPDX-License-Identifier: MIT
/// @file
/// @brief Reserved-bit masks of IA-32 paging-structure entries per mode, level and page
/// size, from MAXPHYADDR, EFER.NXE, CR4.PSE, PSE-36 and 1 GiB-page support, and the vendor.
///
/// Levels are numbered as in the SDM walk: 1 = PTE, 2 = PDE, 3 = PDPTE, 4 = PML4E,
/// 5 = PML5E. A present entry with a reserved bit set makes the walk fault with
/// PFEC.RSVD (SDM 4.7). For every level the masks say:
///  - `table[l]`: reserved bits of an entry that references another table (or of a PTE);
///  - `large[l]`: reserved bits of an entry that maps a large page (PS = 1);
///  - `large_ok[l]`: whether PS = 1 maps a page at that level. Where PS is reserved (PML4E,
///    PML5E, a PDPTE without 1 GiB pages) bit 7 is in `table[l]`; where PS is ignored (a
///    32-bit PDE with CR4.PSE = 0) it is in neither, and the entry references a page table.
#pragma once

#include <array>
#include <cstdint>

#include "../x86/bitfield.hpp"
#include "../x86/contract.hpp"
#include "../x86/paging_mode.hpp"

namespace hvkit::paging {

/// The processor properties that decide which bits are reserved.
struct reserved_params {
  unsigned maxphyaddr = 52;  ///< CPUID.80000008H:EAX[7:0], 32..52
  bool nxe = false;          ///< IA32_EFER.NXE: bit 63 is XD, not reserved
  bool pse = false;          ///< CR4.PSE: a 32-bit PDE with PS = 1 maps a 4 MiB page
  bool gbpages = true;       ///< CPUID.80000001H:EDX.Page1GB[26]: 1 GiB pages exist
  /// AMD: bit 8 of a PML4E/PML5E is reserved (AMD APM vol. 2, 5.3.3, "MBZ"); Intel ignores it.
  bool amd_nonleaf_bit8 = false;
  /// CPUID.01H:EDX.PSE-36[17]: a 4 MiB page of 32-bit paging takes physical-address bits
  /// above 31 from PDE bits 20:13. Without it bits 21:13 of such a PDE are reserved.
  bool pse36 = true;
};

/// Reserved-bit masks of one paging mode.
struct reserved_masks {
  std::array<std::uint64_t, 6> table{};  ///< by level (index 0 unused)
  std::array<std::uint64_t, 6> large{};  ///< by level (index 0 unused)
  std::array<bool, 6> large_ok{};        ///< by level (index 0 unused)
};

/// Reserved bits of a PAE PDPTE (SDM 4.4.1, Table 4-8): 2:1, 8:5 and 63:MAXPHYADDR.
/// Checked when the PDPTEs are loaded (MOV to CR3/CR0/CR4); a violation is #GP(0).
[[nodiscard]] constexpr std::uint64_t pae_pdpte_reserved(unsigned maxphyaddr) noexcept {
  HVKIT_EXPECTS(maxphyaddr >= 32 && maxphyaddr <= 52);
  return x86::bit_range(63, maxphyaddr) | x86::bit_range(8, 5) | x86::bit_range(2, 1);
}

/// The masks for `mode` (paging_mode::none has no entries: all zero).
[[nodiscard]] constexpr reserved_masks reserved_bits(x86::paging_mode mode, reserved_params p) noexcept {
  HVKIT_EXPECTS(p.maxphyaddr >= 32 && p.maxphyaddr <= 52);
  reserved_masks r{};
  constexpr std::uint64_t bit7 = std::uint64_t{1} << 7;
  constexpr std::uint64_t bit8 = std::uint64_t{1} << 8;
  constexpr std::uint64_t bit63 = std::uint64_t{1} << 63;
  const std::uint64_t xd = p.nxe ? 0 : bit63;
  switch (mode) {
    case x86::paging_mode::none: break;
    case x86::paging_mode::two_level: {
      // SDM 4.3, Table 4-4 and its notes: a 4 MiB PDE holds physical-address bits (M-1):32
      // in bits 20:13, M = min(MAXPHYADDR, 40) with PSE-36 and M = 32 without it (no high
      // bits: 21:13 all reserved); bits 21:(M-19) are reserved. Nothing else is reserved in
      // 32-bit paging (no XD bit; PS of a PDE is ignored with CR4.PSE = 0).
      const unsigned m = !p.pse36 ? 32u : p.maxphyaddr < 40 ? p.maxphyaddr : 40u;
      r.large[2] = x86::bit_range(21, m - 19);
      r.large_ok[2] = p.pse;
      break;
    }
    case x86::paging_mode::pae: {
      // SDM 4.4.2, Tables 4-9 to 4-11: bits 62:M are reserved in PDEs and PTEs (unlike
      // 4-level paging, where 62:52 are ignored), bit 63 too unless NXE; a 2 MiB PDE also
      // reserves 20:13. CR4.PSE does not matter: PS in a PDE always maps 2 MiB.
      const std::uint64_t high = x86::bit_range(62, p.maxphyaddr) | xd;
      r.table[3] = pae_pdpte_reserved(p.maxphyaddr);
      r.table[2] = high;
      r.large[2] = high | x86::bit_range(20, 13);
      r.large_ok[2] = true;
      r.table[1] = high;
      break;
    }
    case x86::paging_mode::four_level:
    case x86::paging_mode::five_level: {
      // SDM 4.5.4, Tables 4-14 to 4-20: bits 51:M reserved (62:52 ignored, 62:59 the
      // protection key of a leaf), bit 63 unless NXE; PS reserved in PML5E/PML4E (the
      // PS-in-PML4E case of Xen XSA-176) and in a PDPTE without 1 GiB pages.
      const std::uint64_t high = (p.maxphyaddr < 52 ? x86::bit_range(51, p.maxphyaddr) : 0) | xd;
      const std::uint64_t upper = high | bit7 | (p.amd_nonleaf_bit8 ? bit8 : 0);
      r.table[5] = upper;
      r.table[4] = upper;
      r.table[3] = high | (p.gbpages ? 0 : bit7);
      r.large[3] = high | x86::bit_range(29, 13);
      r.large_ok[3] = p.gbpages;
      r.table[2] = high;
      r.large[2] = high | x86::bit_range(20, 13);
      r.large_ok[2] = true;
      r.table[1] = high;
      break;
    }
  }
  return r;
}

}  // namespace hvkit::paging
