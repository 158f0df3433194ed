// SPDX-License-Identifier: MIT
/// @file
/// @brief A guest's CPU topology and the x2APIC-ID layout CPUID leaves 0xB/0x1F describe
/// (SDM Vol. 2A CPUID leaves 0BH and 1FH; SDM Vol. 3A, "Identifying Topology Levels").
#pragma once

#include <bit>
#include <cstdint>

namespace hvkit::cpuid {

/// Threads per core and cores per package. An x2APIC ID is
/// (package << package_shift) | (core << smt_shift) | thread.
struct topology {
  std::uint32_t threads_per_core = 1;
  std::uint32_t cores_per_package = 1;

  /// Both counts at least 1, and the package fits the 16-bit logical-processor count of
  /// leaf 0xB EBX[15:0].
  [[nodiscard]] constexpr bool valid() const noexcept {
    return threads_per_core >= 1 && cores_per_package >= 1 && threads_per_core <= 0xffff &&
           cores_per_package <= 0xffff && threads_per_core * cores_per_package <= 0xffff;
  }
  [[nodiscard]] constexpr std::uint32_t threads_per_package() const noexcept { return threads_per_core * cores_per_package; }
  /// Bits of the x2APIC ID that select the thread in a core: ceil(log2(threads_per_core)).
  [[nodiscard]] constexpr std::uint32_t smt_shift() const noexcept {
    return static_cast<std::uint32_t>(std::bit_width(threads_per_core - 1));
  }
  /// Bits that select the logical processor in a package (thread and core fields).
  [[nodiscard]] constexpr std::uint32_t package_shift() const noexcept {
    return smt_shift() + static_cast<std::uint32_t>(std::bit_width(cores_per_package - 1));
  }
  /// The x2APIC ID of (package, core, thread).
  [[nodiscard]] constexpr std::uint32_t x2apic_id(std::uint32_t package, std::uint32_t core, std::uint32_t thread) const noexcept {
    return (package << package_shift()) | (core << smt_shift()) | thread;
  }
  friend constexpr bool operator==(const topology&, const topology&) noexcept = default;
};

/// Topology level types in leaf 0xB/0x1F ECX[15:8].
namespace topology_level {
inline constexpr std::uint32_t invalid = 0;
inline constexpr std::uint32_t smt = 1;
inline constexpr std::uint32_t core = 2;
}  // namespace topology_level

}  // namespace hvkit::cpuid
