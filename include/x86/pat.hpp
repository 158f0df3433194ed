// SPDX-License-Identifier: MIT
/// @file
/// @brief IA32_PAT values: which memory types a PAT entry may hold. One rule for both vendors:
/// VMX checks it on the guest/host PAT fields at VM entry, SVM on G_PAT at VMRUN.
#pragma once

#include <cstdint>

namespace hvkit::x86 {

/// Every PA field of an IA32_PAT value holds a supported memory type: 0 UC, 1 WC, 4 WT, 5 WP,
/// 6 WB or 7 UC-; 2 and 3 are reserved, and so are bits 7:3 of each field (SDM Vol. 3A 13.12.2;
/// APM Vol. 2 7.8.1 "PAT Register"). A WRMSR of another value #GPs; VM entry (SDM 27.2.2,
/// 27.3.1.1) and VMRUN with nested paging (APM 15.25.4) refuse it.
[[nodiscard]] constexpr bool valid_pat(std::uint64_t pat) noexcept {
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned t = static_cast<unsigned>(pat >> (8 * i)) & 0xffu;
    if (t == 2 || t == 3 || t > 7) return false;
  }
  return true;
}

}  // namespace hvkit::x86
