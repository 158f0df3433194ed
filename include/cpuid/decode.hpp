// SPDX-License-Identifier: MIT
/// @file
/// @brief Decoding what CPUID reports: vendor, family/model/stepping, address widths, and
/// the feature words of a table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "features.hpp"
#include "leaf.hpp"
#include "table.hpp"

namespace hvkit::cpuid {

enum class vendor : std::uint8_t { unknown, intel, amd, hygon, zhaoxin, centaur };

/// The vendor from the leaf-0 string (EBX, EDX, ECX in that order).
[[nodiscard]] constexpr vendor decode_vendor(const regs& leaf0) noexcept {
  // "GenuineIntel": EBX "Genu" EDX "ineI" ECX "ntel"
  if (leaf0.ebx == 0x756e6547 && leaf0.edx == 0x49656e69 && leaf0.ecx == 0x6c65746e) return vendor::intel;
  // "AuthenticAMD"
  if (leaf0.ebx == 0x68747541 && leaf0.edx == 0x69746e65 && leaf0.ecx == 0x444d4163) return vendor::amd;
  // "HygonGenuine"
  if (leaf0.ebx == 0x6f677948 && leaf0.edx == 0x6e65476e && leaf0.ecx == 0x656e6975) return vendor::hygon;
  // "  Shanghai  "
  if (leaf0.ebx == 0x68532020 && leaf0.edx == 0x68676e61 && leaf0.ecx == 0x20206961) return vendor::zhaoxin;
  // "CentaurHauls"
  if (leaf0.ebx == 0x746e6543 && leaf0.edx == 0x48727561 && leaf0.ecx == 0x736c7561) return vendor::centaur;
  return vendor::unknown;
}

/// True for vendors whose CPUID follows AMD's rules (out-of-range leaves read as zero,
/// 0x80000008 speculation bits).
[[nodiscard]] constexpr bool is_amd_like(vendor v) noexcept { return v == vendor::amd || v == vendor::hygon; }

/// The 12 vendor characters of leaf 0, in order.
[[nodiscard]] constexpr std::array<char, 12> vendor_string(const regs& leaf0) noexcept {
  std::array<char, 12> s{};
  const std::uint32_t w[3] = {leaf0.ebx, leaf0.edx, leaf0.ecx};
  for (int i = 0; i < 12; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((w[i / 4] >> (8 * (i % 4))) & 0xffu);
  return s;
}

/// Family, model and stepping as the OS displays them.
struct signature {
  std::uint32_t family = 0;
  std::uint32_t model = 0;
  std::uint32_t stepping = 0;
  friend constexpr bool operator==(const signature&, const signature&) noexcept = default;
};

/// Decodes CPUID.1:EAX. Family = base family (EAX[11:8]), plus the extended family
/// (EAX[27:20]) when the base family is 0xF. Model = base model (EAX[7:4]), with the
/// extended model (EAX[19:16]) as the high nibble when the base family is 0x6 or 0xF on
/// Intel (SDM Vol. 2A, CPUID, "Display Family / Display Model") and when it is 0xF on AMD
/// (APM vol. 3, E.3.2: Fn0000_0001_EAX).
[[nodiscard]] constexpr signature decode_signature(std::uint32_t eax, vendor v) noexcept {
  const std::uint32_t base_family = (eax >> 8) & 0xfu;
  const std::uint32_t ext_family = (eax >> 20) & 0xffu;
  const std::uint32_t base_model = (eax >> 4) & 0xfu;
  const std::uint32_t ext_model = (eax >> 16) & 0xfu;
  signature s;
  s.stepping = eax & 0xfu;
  s.family = base_family == 0xf ? base_family + ext_family : base_family;
  const bool use_ext_model = is_amd_like(v) ? base_family == 0xf : (base_family == 0x6 || base_family == 0xf);
  s.model = use_ext_model ? (ext_model << 4) | base_model : base_model;
  return s;
}

/// Physical- and linear-address widths.
struct address_widths {
  std::uint32_t physical = 0;  ///< MAXPHYADDR
  std::uint32_t linear = 0;
  friend constexpr bool operator==(const address_widths&, const address_widths&) noexcept = default;
};

/// From CPUID.0x80000008:EAX[7:0] (physical) and [15:8] (linear). Without that leaf
/// MAXPHYADDR is 36 when CPUID.1:EDX.PAE is set and 32 otherwise (SDM Vol. 3A, 4.1.4),
/// and linear addresses are 32 bits.
template <std::size_t N>
[[nodiscard]] constexpr address_widths decode_address_widths(const table<N>& t) noexcept {
  const std::uint32_t max_ext = t.get(leaves::ext_max).eax;
  if (max_ext >= leaves::ext_address_sizes && t.find(leaves::ext_address_sizes) != nullptr) {
    const std::uint32_t eax = t.get(leaves::ext_address_sizes).eax;
    return {eax & 0xffu, (eax >> 8) & 0xffu};
  }
  const bool pae = (t.get(leaves::version).edx >> 6) & 1u;
  return {pae ? 36u : 32u, 32u};
}

/// The value of one feature word in a table (0 if the leaf is absent). `hv_base` locates
/// the KVM words.
template <std::size_t N>
[[nodiscard]] constexpr std::uint32_t read_word(const table<N>& t, word w, std::uint32_t hv_base = leaves::hypervisor_base) noexcept {
  const word_location l = locate(w, hv_base);
  const regs* r = t.find(l.leaf, l.subleaf);
  return r ? r->get(l.r) : 0u;
}

/// Every feature word of a table.
template <std::size_t N>
[[nodiscard]] constexpr feature_set read_features(const table<N>& t, std::uint32_t hv_base = leaves::hypervisor_base) noexcept {
  feature_set s;
  for (std::size_t i = 0; i < word_count; ++i) s.put(static_cast<word>(i), read_word(t, static_cast<word>(i), hv_base));
  return s;
}

/// True if `f` is set in the table.
template <std::size_t N>
[[nodiscard]] constexpr bool has(const table<N>& t, feature f, std::uint32_t hv_base = leaves::hypervisor_base) noexcept {
  return (read_word(t, f.w, hv_base) & f.mask()) != 0;
}

/// Everything a host decoder reports in one value.
struct host_info {
  vendor v = vendor::unknown;
  signature sig{};
  address_widths widths{};
  std::uint32_t max_basic = 0;
  std::uint32_t max_extended = 0;
  feature_set features{};
};

template <std::size_t N>
[[nodiscard]] constexpr host_info decode(const table<N>& t) noexcept {
  host_info h;
  h.v = decode_vendor(t.get(leaves::basic_max));
  h.sig = decode_signature(t.get(leaves::version).eax, h.v);
  h.widths = decode_address_widths(t);
  h.max_basic = t.get(leaves::basic_max).eax;
  h.max_extended = t.get(leaves::ext_max).eax;
  h.features = read_features(t);
  return h;
}

}  // namespace hvkit::cpuid
