// SPDX-License-Identifier: MIT
/// @file
/// @brief The paging mode selected by CR0, CR4 and EFER (SDM 4.1.1, Table 4-1).
#pragma once

#include <cstdint>

#include "cr.hpp"
#include "efer.hpp"

namespace hvkit::x86 {

enum class paging_mode : std::uint8_t {
  none = 0,       ///< CR0.PG = 0: linear addresses are physical
  two_level = 2,  ///< 32-bit paging (CR4.PAE = 0), 4-byte entries
  pae = 3,        ///< PAE paging (CR4.PAE = 1, EFER.LMA = 0)
  four_level = 4, ///< 4-level paging (EFER.LMA = 1, CR4.LA57 = 0)
  five_level = 5, ///< 5-level paging (EFER.LMA = 1, CR4.LA57 = 1)
};

/// Number of paging-structure levels of a mode (0 when paging is off).
[[nodiscard]] constexpr unsigned paging_levels(paging_mode m) noexcept { return static_cast<unsigned>(m); }

/// SDM 4.1.1: PG selects paging; PAE selects PAE vs 32-bit; LMA (= LME && PG) selects
/// 4/5-level; LA57 selects 5-level within IA-32e mode.
[[nodiscard]] constexpr paging_mode paging_mode_of(cr0 c0, cr4 c4, efer e) noexcept {
  if (!c0.test(cr0::pg)) return paging_mode::none;
  if (!c4.test(cr4::pae)) return paging_mode::two_level;
  if (!e.test(efer::lma)) return paging_mode::pae;
  return c4.test(cr4::la57) ? paging_mode::five_level : paging_mode::four_level;
}

}  // namespace hvkit::x86
