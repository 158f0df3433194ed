// SPDX-License-Identifier: MIT
/// @file
/// @brief The CPUID register model: leaf/subleaf keys, the four output registers, and the
/// leaf numbers hvkit knows (SDM Vol. 2A, CPUID; AMD APM vol. 3, Appendix E).
#pragma once

#include <cstdint>

namespace hvkit::cpuid {

/// One of the four CPUID output registers.
enum class reg : std::uint8_t { eax, ebx, ecx, edx };

/// The output of one CPUID query.
struct regs {
  std::uint32_t eax = 0;
  std::uint32_t ebx = 0;
  std::uint32_t ecx = 0;
  std::uint32_t edx = 0;

  /// The value of register `r`.
  [[nodiscard]] constexpr std::uint32_t get(reg r) const noexcept {
    switch (r) {
      case reg::eax: return eax;
      case reg::ebx: return ebx;
      case reg::ecx: return ecx;
      case reg::edx: return edx;
    }
    return 0;
  }
  /// Mutable access to register `r`.
  [[nodiscard]] constexpr std::uint32_t& at(reg r) noexcept {
    switch (r) {
      case reg::eax: return eax;
      case reg::ebx: return ebx;
      case reg::ecx: return ecx;
      case reg::edx: break;
    }
    return edx;
  }
  friend constexpr bool operator==(const regs&, const regs&) noexcept = default;
};

/// Leaf (EAX input) numbers.
namespace leaves {
inline constexpr std::uint32_t basic_max = 0x0;            ///< max basic leaf, vendor string
inline constexpr std::uint32_t version = 0x1;              ///< family/model/stepping, features
inline constexpr std::uint32_t cache_descriptors = 0x2;    ///< Intel TLB/cache descriptors
inline constexpr std::uint32_t cache_params = 0x4;         ///< deterministic cache parameters
inline constexpr std::uint32_t monitor_mwait = 0x5;
inline constexpr std::uint32_t thermal_power = 0x6;
inline constexpr std::uint32_t extended_features = 0x7;    ///< subleaves 0-2
inline constexpr std::uint32_t perfmon = 0xa;
inline constexpr std::uint32_t ext_topology = 0xb;         ///< x2APIC topology
inline constexpr std::uint32_t xsave = 0xd;                ///< XSAVE state components
inline constexpr std::uint32_t processor_trace = 0x14;
inline constexpr std::uint32_t key_locker = 0x19;
inline constexpr std::uint32_t v2_ext_topology = 0x1f;
inline constexpr std::uint32_t hypervisor_base = 0x40000000;  ///< start of the hypervisor range
inline constexpr std::uint32_t hypervisor_last = 0x4fffffff;
inline constexpr std::uint32_t ext_max = 0x80000000;       ///< max extended leaf
inline constexpr std::uint32_t ext_features = 0x80000001;
inline constexpr std::uint32_t brand_string_0 = 0x80000002;
inline constexpr std::uint32_t brand_string_2 = 0x80000004;
inline constexpr std::uint32_t ext_l1_cache = 0x80000005;  ///< AMD L1 cache/TLB
inline constexpr std::uint32_t ext_l2_cache = 0x80000006;
inline constexpr std::uint32_t ext_power = 0x80000007;     ///< advanced power management
inline constexpr std::uint32_t ext_address_sizes = 0x80000008;
inline constexpr std::uint32_t ext_svm = 0x8000000a;
inline constexpr std::uint32_t ext_cache_topology = 0x8000001d;  ///< AMD TOPOEXT
inline constexpr std::uint32_t ext_apic_id = 0x8000001e;         ///< AMD TOPOEXT
inline constexpr std::uint32_t ext_memory_encryption = 0x8000001f;
inline constexpr std::uint32_t ext_features_2 = 0x80000021;
}  // namespace leaves

/// True if the output of `leaf` depends on the subleaf in ECX (SDM Vol. 2A CPUID: "leaves
/// with sub-leaves"); for every other leaf ECX is ignored.
[[nodiscard]] constexpr bool is_indexed(std::uint32_t leaf) noexcept {
  switch (leaf) {
    case 0x4: case 0x7: case 0xb: case 0xd: case 0xf: case 0x10: case 0x12: case 0x14:
    case 0x17: case 0x18: case 0x1a: case 0x1b: case 0x1d: case 0x1e: case 0x1f: case 0x20:
    case 0x23: case 0x24: case 0x8000001d: case 0x80000020: case 0x80000026:
      return true;
    default:
      return false;
  }
}

/// The range ("class") a leaf belongs to: 0 (basic), 0x40000000 (hypervisor),
/// 0x80000000 (extended) or 0xc0000000 (Centaur).
[[nodiscard]] constexpr std::uint32_t leaf_class(std::uint32_t leaf) noexcept { return leaf & 0xc0000000u; }

/// One stored CPUID answer: the key (leaf, subleaf) and its registers. For a leaf that is
/// not indexed the subleaf is stored as 0 and ignored on lookup.
struct entry {
  std::uint32_t leaf = 0;
  std::uint32_t subleaf = 0;
  regs value{};

  /// The sort key: leaf in the high half, subleaf in the low half.
  [[nodiscard]] constexpr std::uint64_t key() const noexcept {
    return (std::uint64_t{leaf} << 32) | subleaf;
  }
};

/// The key of (leaf, subleaf) as stored (the subleaf of a non-indexed leaf is 0).
[[nodiscard]] constexpr std::uint64_t make_key(std::uint32_t leaf, std::uint32_t subleaf) noexcept {
  return (std::uint64_t{leaf} << 32) | (is_indexed(leaf) ? subleaf : 0u);
}

}  // namespace hvkit::cpuid
