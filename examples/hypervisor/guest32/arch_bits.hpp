// SPDX-License-Identifier: MIT
/// @file
/// @brief The control-register, EFER and paging-entry bits the 32-bit conformance guest
/// writes. The guest builds without the C++ library headers hvkit's typed flags need
/// (-m32 -nostdinc++, guest32/shim), so it names the bits here as plain numbers; boot.cpp,
/// which has the library, checks every one against hvkit::x86's typed values.
#pragma once

#include <cstdint>

namespace hv::guest32_bits {

inline constexpr std::uint32_t cr0_wp = 1u << 16;    // SDM Vol. 3A 2.5
inline constexpr std::uint32_t cr4_pse = 1u << 4;    // SDM Vol. 3A 2.5
inline constexpr std::uint32_t cr4_pae = 1u << 5;
inline constexpr std::uint32_t cr4_smep = 1u << 20;
inline constexpr std::uint32_t cr4_smap = 1u << 21;
inline constexpr std::uint32_t msr_efer = 0xC0000080;  // IA32_EFER, SDM Vol. 4 Table 2-2
inline constexpr std::uint64_t efer_nxe = 1u << 11;
// Paging-structure entry bits (SDM Vol. 3A Tables 4-4 to 4-10).
inline constexpr std::uint64_t p_bit = 1, rw_bit = 2, us_bit = 4, ps_bit = 0x80;

}  // namespace hv::guest32_bits
