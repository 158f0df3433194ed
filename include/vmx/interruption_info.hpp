// SPDX-License-Identifier: MIT
/// @file
/// @brief The interruption-information layout shared by three VMCS fields: VM-entry
/// interruption information (SDM Vol. 3C 25.8.3, Table 25-17), VM-exit interruption
/// information (25.9.2, Table 25-19) and IDT-vectoring information (25.9.3, Table 25-20).
///
/// Bits 7:0 vector, 10:8 interruption type, 11 error code valid / deliver error code,
/// 12 NMI unblocking due to IRET (VM-exit interruption information only; reserved in the
/// entry field and undefined in IDT-vectoring information), 30:13 reserved, 31 valid.
/// Each field is its own type, so exit information cannot be written into the entry field
/// without the conversion that drops bit 12 (SDM 28.2.4: copying it set fails VM entry).
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"
#include "../x86/vector.hpp"

namespace hvkit::vmx {

/// Interruption type, bits 10:8 (Tables 25-17, 25-19, 25-20).
enum class interruption_type : std::uint8_t {
  external_interrupt = 0,
  reserved = 1,
  nmi = 2,
  hardware_exception = 3,
  software_interrupt = 4,             ///< INT n
  privileged_software_exception = 5,  ///< INT1 (ICEBP)
  software_exception = 6,             ///< INT3, INTO
  other_event = 7,                    ///< entry only: vector 0 = pending MTF VM exit
};

/// Software events: delivery depends on the instruction, whose length VM entry needs
/// (SDM 27.6.1.1; 25.8.3 "VM-entry instruction length").
[[nodiscard]] constexpr bool is_software_event(interruption_type t) noexcept {
  return t == interruption_type::software_interrupt || t == interruption_type::privileged_software_exception ||
         t == interruption_type::software_exception;
}

namespace interruption_bits {
using vector = x86::bitfield<std::uint32_t, 0, 8>;
using type = x86::bitfield<std::uint32_t, 8, 3, interruption_type>;
using error_code = x86::bitflag<std::uint32_t, 11>;
using nmi_unblocking = x86::bitflag<std::uint32_t, 12>;
using valid = x86::bitflag<std::uint32_t, 31>;
/// Bits 30:12 of the VM-entry field must be 0 (SDM 27.2.1.3).
inline constexpr std::uint32_t entry_reserved = 0x7fff'f000u;
static_assert(x86::fields_disjoint<vector, type, error_code, nmi_unblocking, valid>());
}  // namespace interruption_bits

namespace detail {
/// The common read side of the three fields.
template <class Derived>
class interruption_view {
 public:
  constexpr interruption_view() noexcept = default;
  constexpr explicit interruption_view(std::uint32_t raw) noexcept : raw_(raw) {}
  [[nodiscard]] constexpr std::uint32_t raw() const noexcept { return raw_; }
  [[nodiscard]] constexpr bool valid() const noexcept { return interruption_bits::valid::get(raw_); }
  [[nodiscard]] constexpr std::uint8_t vector() const noexcept {
    return static_cast<std::uint8_t>(interruption_bits::vector::get(raw_));
  }
  [[nodiscard]] constexpr interruption_type type() const noexcept { return interruption_bits::type::get(raw_); }
  /// Bit 11: an error code is delivered (entry) / was delivered or pushed (exit, IDT vectoring).
  [[nodiscard]] constexpr bool has_error_code() const noexcept { return interruption_bits::error_code::get(raw_); }
  friend constexpr bool operator==(Derived a, Derived b) noexcept { return a.raw() == b.raw(); }

 protected:
  std::uint32_t raw_ = 0;
};
}  // namespace detail

/// VM-entry interruption information (Table 25-17): what VM entry injects.
class entry_interruption_info : public detail::interruption_view<entry_interruption_info> {
 public:
  using interruption_view::interruption_view;
  /// A valid event: vector, type, deliver-error-code.
  [[nodiscard]] static constexpr entry_interruption_info make(std::uint8_t vector, interruption_type t,
                                                              bool deliver_error_code) noexcept {
    std::uint32_t r = 0;
    r = interruption_bits::vector::set(r, vector);
    r = interruption_bits::type::set(r, t);
    r = interruption_bits::error_code::set(r, deliver_error_code);
    r = interruption_bits::valid::set(r, true);
    return entry_interruption_info{r};
  }
};

/// VM-exit interruption information (Table 25-19), for exits caused by vectored events.
class exit_interruption_info : public detail::interruption_view<exit_interruption_info> {
 public:
  using interruption_view::interruption_view;
  /// Bit 12: NMI unblocking due to IRET (SDM 28.2.3). Meaningful only when the exit did not
  /// occur during event delivery and the vector is not #DF; see nmi_unblocked_by_iret().
  [[nodiscard]] constexpr bool nmi_unblocking() const noexcept { return interruption_bits::nmi_unblocking::get(raw_); }
};

/// IDT-vectoring information (Table 25-20): the event whose delivery the VM exit interrupted.
class idt_vectoring_info : public detail::interruption_view<idt_vectoring_info> {
 public:
  using interruption_view::interruption_view;
  /// The same event as a VM-entry injection: bits 30:12 cleared (bit 12 is undefined
  /// here and reserved there, SDM 28.2.4), vector, type, error-code bit and valid kept.
  [[nodiscard]] constexpr entry_interruption_info to_entry() const noexcept {
    return entry_interruption_info{raw_ & ~interruption_bits::entry_reserved};
  }
};

}  // namespace hvkit::vmx
