// SPDX-License-Identifier: MIT
/// @file
/// @brief IA32_APIC_BASE (MSR 1BH): its fields, the local APIC's mode, and which WRMSR values
/// the processor accepts (SDM Vol. 3A 11.4.4 "Local APIC Status and Location", 11.12.1
/// "Detecting and Enabling x2APIC Mode", 11.12.5 "x2APIC State Transitions"; APM Vol. 2
/// 16.3.1 "Local APIC Enable"). One rule for both vendors: a hypervisor that intercepts the
/// guest's writes decides with it whether the WRMSR #GPs, before touching any state.
#pragma once

#include <cstdint>

#include "result.hpp"

namespace hvkit::x86 {

/// An IA32_APIC_BASE value. Bits 7:0 and 9 are reserved; bit 8 BSP (read/write: the processor
/// is the bootstrap processor); bit 10 EXTD (x2APIC mode; reserved without x2APIC, CPUID.1:
/// ECX[21]); bit 11 EN (the APIC is globally enabled); bits MAXPHYADDR-1:12 the APIC page's
/// physical address; bits 63:MAXPHYADDR reserved (SDM 11.4.4, Figure 11-5; 11.12.1).
class apic_base {
 public:
  static constexpr std::uint64_t bsp_bit = 1ull << 8;
  static constexpr std::uint64_t extd_bit = 1ull << 10;
  static constexpr std::uint64_t enable_bit = 1ull << 11;

  constexpr apic_base() noexcept = default;
  constexpr explicit apic_base(std::uint64_t raw) noexcept : raw_(raw) {}

  [[nodiscard]] constexpr std::uint64_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr bool bsp() const noexcept { return (raw_ & bsp_bit) != 0; }
  [[nodiscard]] constexpr bool extd() const noexcept { return (raw_ & extd_bit) != 0; }
  [[nodiscard]] constexpr bool enabled() const noexcept { return (raw_ & enable_bit) != 0; }
  /// Bits 63:12: the APIC page's physical address as the value holds it (reserved bits above
  /// MAXPHYADDR included, which a valid value has clear).
  [[nodiscard]] constexpr std::uint64_t page() const noexcept { return raw_ & ~0xfffull; }

  friend constexpr bool operator==(apic_base, apic_base) noexcept = default;

 private:
  std::uint64_t raw_ = 0;
};

/// The APIC page after power-up and reset (SDM 11.4.1: FEE00000H).
inline constexpr std::uint64_t apic_base_default_page = 0xfee0'0000ull;

/// The local APIC's mode as EN and EXTD give it (SDM 11.12.5): EN=0 EXTD=0 disabled, EN=1
/// EXTD=0 xAPIC, EN=1 EXTD=1 x2APIC; EN=0 EXTD=1 is not a state ("invalid": no WRMSR enters it).
enum class apic_mode : std::uint8_t { disabled, invalid, xapic, x2apic };

[[nodiscard]] constexpr apic_mode mode_of(apic_base v) noexcept {
  if (v.enabled()) return v.extd() ? apic_mode::x2apic : apic_mode::xapic;
  return v.extd() ? apic_mode::invalid : apic_mode::disabled;
}

/// The reserved bits of IA32_APIC_BASE for a processor with MAXPHYADDR `maxphyaddr` (clamped
/// to 52) and, if `x2apic`, EXTD: bits 7:0, 9, 63:MAXPHYADDR, and bit 10 without x2APIC.
[[nodiscard]] constexpr std::uint64_t apic_base_reserved_bits(unsigned maxphyaddr, bool x2apic) noexcept {
  const unsigned width = maxphyaddr > 52 ? 52 : maxphyaddr;
  std::uint64_t r = 0xffull | (1ull << 9) | (~0ull << width);
  if (!x2apic) r |= apic_base::extd_bit;
  return r;
}

/// Why a WRMSR of IA32_APIC_BASE #GPs.
enum class apic_base_fault : std::uint8_t {
  reserved_bit,        ///< a reserved bit set (SDM 11.4.4; EXTD without x2APIC, 11.12.1)
  invalid_state,       ///< EN=0 with EXTD=1 (SDM 11.12.5: "causes a general-protection exception")
  x2apic_to_xapic,     ///< x2APIC to xAPIC without passing through disabled (SDM 11.12.5)
  disabled_to_x2apic,  ///< disabled straight to x2APIC (SDM 11.12.5: only xAPIC is reached from disabled)
};

/// The processor's verdict on WRMSR IA32_APIC_BASE of `value` while it holds `current` (a
/// value the processor holds: never the invalid state): the
/// new mode, or why the write #GPs (and nothing changes). Writing the current mode again is
/// always a valid transition (the page or BSP may change); SDM 11.12.5's valid transitions
/// are xAPIC <-> disabled, xAPIC -> x2APIC and x2APIC -> disabled.
[[nodiscard]] constexpr result<apic_mode, apic_base_fault> check_apic_base_write(apic_base current, apic_base value,
                                                                                 unsigned maxphyaddr,
                                                                                 bool x2apic) noexcept {
  if ((value.raw() & apic_base_reserved_bits(maxphyaddr, x2apic)) != 0) return unexpected(apic_base_fault::reserved_bit);
  const apic_mode from = mode_of(current);
  const apic_mode to = mode_of(value);
  if (to == apic_mode::invalid) return unexpected(apic_base_fault::invalid_state);
  if (from == apic_mode::x2apic && to == apic_mode::xapic) return unexpected(apic_base_fault::x2apic_to_xapic);
  if (from == apic_mode::disabled && to == apic_mode::x2apic) return unexpected(apic_base_fault::disabled_to_x2apic);
  return to;
}

}  // namespace hvkit::x86
