// SPDX-License-Identifier: MIT
/// @file
/// @brief Protection-key registers (PKRU, IA32_PKRS): per-key AD/WD bits and which register
/// governs an address (SDM 4.6.2).
///
/// Both registers have the same layout: for key i, bit 2i is AD (access disable) and bit
/// 2i+1 is WD (write disable). PKRU governs user-mode addresses when CR4.PKE=1; IA32_PKRS
/// governs supervisor-mode addresses when CR4.PKS=1 (both only with IA-32e paging).
#pragma once

#include <cstdint>

#include "access.hpp"

namespace hvkit::paging {

/// Number of protection keys (4-bit key in bits 62:59 of the leaf entry, SDM 4.5).
inline constexpr unsigned pkey_count = 16;

/// AD (access disable) of key `pkey` (only the low 4 bits of pkey are used).
[[nodiscard]] constexpr bool pkr_access_disabled(std::uint32_t pkr, std::uint8_t pkey) noexcept {
  return ((pkr >> (2u * (pkey & 15u))) & 1u) != 0;
}
/// WD (write disable) of key `pkey` (only the low 4 bits of pkey are used).
[[nodiscard]] constexpr bool pkr_write_disabled(std::uint32_t pkr, std::uint8_t pkey) noexcept {
  return ((pkr >> (2u * (pkey & 15u) + 1u)) & 1u) != 0;
}
/// `pkr` with key `pkey`'s AD and WD bits replaced.
[[nodiscard]] constexpr std::uint32_t pkr_with(std::uint32_t pkr, std::uint8_t pkey, bool access_disable,
                                               bool write_disable) noexcept {
  const unsigned shift = 2u * (pkey & 15u);
  const std::uint32_t bits = (access_disable ? 1u : 0u) | (write_disable ? 2u : 0u);
  return (pkr & ~(3u << shift)) | (bits << shift);
}

/// The protection-key register that applies to an address with accumulated rights
/// `rights`: PKRU for a user-mode address (U/S=1 at every level), IA32_PKRS otherwise
/// (SDM 4.6.2). This is the `pkr` argument of permission_fault().
[[nodiscard]] constexpr std::uint32_t pk_register_for(pte_access rights, std::uint32_t pkru,
                                                      std::uint32_t pkrs) noexcept {
  // GCC emits a branch here when both registers come from memory; on the permission_fault
  // benchmark's random mix it measured faster than a branch-free mask-and-or form.
  return rights.any(pte_access::user) ? pkru : pkrs;
}

}  // namespace hvkit::paging
