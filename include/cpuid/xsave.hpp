// SPDX-License-Identifier: MIT
/// @file
/// @brief XSAVE state-component layout (CPUID.0xD.i) and XSAVE-area sizes in the standard
/// and compacted formats (SDM Vol. 1, 13.2 and 13.4).
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "leaf.hpp"
#include "../x86/result.hpp"
#include "../x86/xcr0.hpp"

namespace hvkit::cpuid {

/// The legacy region (512 bytes) plus the XSAVE header (64 bytes): components 0 and 1 live
/// in the legacy region, and the extended region starts at byte 576 (SDM Vol. 1, 13.4).
inline constexpr std::uint32_t xsave_legacy_and_header_size = 576;
/// hvkit tracks components 0..31 (the highest defined today is 19, APX).
inline constexpr unsigned xsave_max_components = 32;

/// One state component as CPUID.(EAX=0DH, ECX=i) describes it (SDM Vol. 2A, CPUID leaf 0DH).
struct xsave_component {
  std::uint32_t size = 0;    ///< EAX: size in bytes
  std::uint32_t offset = 0;  ///< EBX: offset in the standard format (0 for supervisor state)
  bool supervisor = false;   ///< ECX[0]: managed through IA32_XSS
  bool align64 = false;      ///< ECX[1]: 64-byte aligned in the compacted format

  [[nodiscard]] static constexpr xsave_component from(const regs& r) noexcept {
    return {r.eax, r.ebx, (r.ecx & 1u) != 0, (r.ecx & 2u) != 0};
  }
  [[nodiscard]] constexpr regs to_regs() const noexcept {
    return {size, offset, (supervisor ? 1u : 0u) | (align64 ? 2u : 0u), 0};
  }
  friend constexpr bool operator==(const xsave_component&, const xsave_component&) noexcept = default;
};

/// Whether a host's CPUID.(EAX=0DH, ECX=i) (i >= 2) is a usable description of a component
/// that CPUID.(EAX=0DH, ECX=0) EDX:EAX (XCR0) or CPUID.(EAX=0DH, ECX=1) EDX:ECX (IA32_XSS)
/// enumerates as supported. SDM Vol. 2A, CPUID leaf 0DH, "Processor Extended State
/// Enumeration Sub-leaf (EAX = 0DH, ECX = n, n > 1)": sub-leaf n is invalid (all four
/// registers 0) only if bit n is clear in both bitmaps; otherwise EAX is the component's
/// size, EBX its offset in the standard format (0 when n is not an XCR0 bit), and ECX[0]
/// is set if bit n is an IA32_XSS bit and clear if it is an XCR0 bit.
enum class xsave_enumeration : std::uint8_t {
  consistent,
  no_size,         ///< EAX = 0: the sub-leaf of a supported component reads as invalid
  wrong_register,  ///< ECX[0] contradicts the bitmap that enumerates the component
  bad_offset,      ///< a user component whose offset lies inside the legacy region or the
                   ///< XSAVE header (< 576, SDM Vol. 1 13.4), or a supervisor one with EBX != 0
  too_large,       ///< offset + size past 4 GiB
};

/// Checks one enumerated component against the rules above. `xss` says which bitmap
/// enumerates it: IA32_XSS (true) or XCR0 (false).
[[nodiscard]] constexpr xsave_enumeration check_enumeration(const xsave_component& c, bool xss) noexcept {
  if (c.size == 0) return xsave_enumeration::no_size;
  if (c.supervisor != xss) return xsave_enumeration::wrong_register;
  if (xss ? c.offset != 0 : c.offset < xsave_legacy_and_header_size) return xsave_enumeration::bad_offset;
  if (std::uint64_t{c.offset} + c.size > 0xffffffffu) return xsave_enumeration::too_large;
  return xsave_enumeration::consistent;
}

/// Why a size could not be computed.
enum class xsave_error : std::uint8_t {
  none,
  unknown_component,  ///< a requested component >= 2 has size 0 (not enumerated)
  out_of_range,       ///< a requested component number >= xsave_max_components
  too_large,          ///< the enumerated offsets/sizes add up past 4 GiB (a corrupt table)
};

/// The layout of components 2..31 (0 and 1 are the legacy region).
struct xsave_layout {
  std::array<xsave_component, xsave_max_components> components{};

  /// Size of an XSAVE area in the standard (non-compacted) format holding `mask`: the end
  /// of the highest-ending component, at least 576 (this is CPUID.0xD.0 EBX for mask = XCR0
  /// and ECX for mask = all supported user components).
  [[nodiscard]] constexpr result<std::uint32_t, xsave_error> standard_size(x86::xfeatures mask) const noexcept {
    if ((mask.raw() >> xsave_max_components) != 0) return unexpected(xsave_error::out_of_range);
    std::uint64_t size = xsave_legacy_and_header_size;  // 64-bit: corrupt inputs cannot wrap
    // Visit only the set bits >= 2 (components 0 and 1 live in the legacy region).
    for (std::uint64_t m = mask.raw() & ~std::uint64_t{3}; m != 0; m &= m - 1) {
      const xsave_component& c = components[static_cast<unsigned>(std::countr_zero(m))];
      if (c.size == 0) return unexpected(xsave_error::unknown_component);
      const std::uint64_t end = std::uint64_t{c.offset} + c.size;
      if (end > size) size = end;
    }
    if (size > 0xffffffffu) return unexpected(xsave_error::too_large);
    return static_cast<std::uint32_t>(size);
  }
  /// Size of an XSAVE area in the compacted format (XSAVEC/XSAVES) holding `mask`: the
  /// components follow each other in bit order from byte 576, each one 64-byte aligned when
  /// its align64 bit is set (SDM Vol. 1, 13.4.3). For mask = XCR0 | IA32_XSS this is
  /// CPUID.0xD.1 EBX.
  [[nodiscard]] constexpr result<std::uint32_t, xsave_error> compacted_size(x86::xfeatures mask) const noexcept {
    if ((mask.raw() >> xsave_max_components) != 0) return unexpected(xsave_error::out_of_range);
    std::uint64_t size = xsave_legacy_and_header_size;  // at most 30 x 4 GiB: no 64-bit wrap
    for (std::uint64_t m = mask.raw() & ~std::uint64_t{3}; m != 0; m &= m - 1) {
      const xsave_component& c = components[static_cast<unsigned>(std::countr_zero(m))];
      if (c.size == 0) return unexpected(xsave_error::unknown_component);
      if (c.align64) size = (size + 63u) & ~std::uint64_t{63};
      size += c.size;
    }
    if (size > 0xffffffffu) return unexpected(xsave_error::too_large);
    return static_cast<std::uint32_t>(size);
  }
};

}  // namespace hvkit::cpuid
