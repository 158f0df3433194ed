// SPDX-License-Identifier: MIT
/// @file
/// @brief CR3: root address, PCID and PWT/PCD for each paging mode (SDM 4.2, 4.3, 4.4.1, 4.5).
#pragma once

#include <cstdint>

#include "address.hpp"
#include "cr.hpp"
#include "flags.hpp"
#include "paging_mode.hpp"

namespace hvkit::x86 {

class cr3 : public flags<cr3> {
 public:
  using flags::flags;
  static const cr3 pwt;      ///< 3: page-level write-through (not with PAE or CR4.PCIDE=1)
  static const cr3 pcd;      ///< 4: page-level cache disable (not with PAE or CR4.PCIDE=1)
  static const cr3 lam_u57;  ///< 61: LAM for user pointers, 57-bit
  static const cr3 lam_u48;  ///< 62: LAM for user pointers, 48-bit
  static const cr3 noflush;  ///< 63: on MOV to CR3 with CR4.PCIDE=1, keep the PCID's TLB entries (SDM 4.10.4.1)
};
inline constexpr cr3 cr3::pwt = cr3::bit(3);
inline constexpr cr3 cr3::pcd = cr3::bit(4);
inline constexpr cr3 cr3::lam_u57 = cr3::bit(61);
inline constexpr cr3 cr3::lam_u48 = cr3::bit(62);
inline constexpr cr3 cr3::noflush = cr3::bit(63);

/// Physical address of the top-level paging structure.
/// - 32-bit paging: bits 31:12 (SDM Table 4-3);
/// - PAE paging: bits 31:5, the 32-byte aligned PDPT (SDM Table 4-7);
/// - 4/5-level: bits MAXPHYADDR-1:12 (SDM Table 4-12, 4-13); control bits, PCID,
///   LAM bits and the no-flush bit are stripped.
/// With paging off, 0.
[[nodiscard]] constexpr gpa cr3_root(cr3 v, paging_mode m, unsigned maxphyaddr) noexcept {
  switch (m) {
    case paging_mode::none: return gpa{0};
    case paging_mode::two_level: return gpa{v.raw() & 0xffff'f000u};
    case paging_mode::pae: return gpa{v.raw() & 0xffff'ffe0u};
    case paging_mode::four_level:
    case paging_mode::five_level: break;
  }
  return gpa{v.raw() & physical_address_mask(maxphyaddr) & ~(page_size_4k - 1)};
}

/// The current PCID: CR3 bits 11:0 when CR4.PCIDE=1 in IA-32e mode, else 0 (SDM 4.10.1).
[[nodiscard]] constexpr std::uint16_t cr3_pcid(cr3 v, cr4 c4, paging_mode m) noexcept {
  const bool ia32e = m == paging_mode::four_level || m == paging_mode::five_level;
  return ia32e && c4.test(cr4::pcide) ? static_cast<std::uint16_t>(v.raw() & 0xfffu) : 0;
}

/// PWT and PCD used for the access to the top-level structure (SDM 4.9.2): taken from CR3
/// for 32-bit paging and for 4/5-level paging with CR4.PCIDE=0; PAE paging and PCIDE=1
/// use 0 for both.
struct cr3_cache_control {
  bool pwt;
  bool pcd;
};
[[nodiscard]] constexpr cr3_cache_control cr3_cache_bits(cr3 v, cr4 c4, paging_mode m) noexcept {
  switch (m) {
    case paging_mode::none:
    case paging_mode::pae: return {false, false};
    case paging_mode::two_level: return {v.test(cr3::pwt), v.test(cr3::pcd)};
    case paging_mode::four_level:
    case paging_mode::five_level: break;
  }
  if (c4.test(cr4::pcide)) return {false, false};
  return {v.test(cr3::pwt), v.test(cr3::pcd)};
}

}  // namespace hvkit::x86
