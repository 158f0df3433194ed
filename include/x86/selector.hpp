// SPDX-License-Identifier: MIT
/// @file
/// @brief `x86::selector`: a segment selector (SDM 3.4.2, Figure 3-6), shared by the VMCS
/// selector fields (vmx/) and the emulator's segment loads (emulate/).
#pragma once

#include <cstdint>

#include "bitfield.hpp"

namespace hvkit::x86 {

/// A segment selector (SDM 3.4.2, Figure 3-6): RPL in bits 1:0, TI in bit 2, index in 15:3.
struct selector {
  using rpl_field = bitfield<std::uint16_t, 0, 2, std::uint8_t>;
  using ti_field = bitflag<std::uint16_t, 2>;
  using index_field = bitfield<std::uint16_t, 3, 13, std::uint16_t>;

  std::uint16_t value = 0;

  /// The 16 bits as stored in a segment register or a VMCS selector field.
  [[nodiscard]] constexpr std::uint16_t raw() const noexcept { return value; }
  [[nodiscard]] constexpr std::uint8_t rpl() const noexcept { return rpl_field::get(value); }
  /// True if the selector refers to the LDT.
  [[nodiscard]] constexpr bool ldt() const noexcept { return ti_field::get(value); }
  [[nodiscard]] constexpr std::uint16_t index() const noexcept { return index_field::get(value); }
  /// A null selector: index 0 in the GDT (any RPL).
  [[nodiscard]] constexpr bool null() const noexcept { return (value & 0xfffcu) == 0; }
  /// The error code of a #GP/#NP/#TS/#SS caused by this selector (SDM 6.13): index and TI.
  [[nodiscard]] constexpr std::uint16_t error_code() const noexcept { return static_cast<std::uint16_t>(value & 0xfffcu); }
  /// The selector of GDT (or, with `ldt`, LDT) entry `index` at privilege `rpl`.
  [[nodiscard]] static constexpr selector make(std::uint16_t index, std::uint8_t rpl = 0, bool ldt = false) noexcept {
    return selector{static_cast<std::uint16_t>(index_field::set(0, index) | ti_field::set(0, ldt) | rpl_field::set(0, rpl))};
  }

  friend constexpr bool operator==(const selector&, const selector&) noexcept = default;
};

}  // namespace hvkit::x86
