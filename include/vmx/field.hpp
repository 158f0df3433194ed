// SPDX-License-Identifier: MIT
/// @file
/// @brief A VMCS field as a type: `field<Encoding>` derives its width, group, value type and
/// writability from the encoding bits (SDM Vol. 3C 25.11.2, Vol. 3D Appendix B).
///
/// Encoding layout (SDM 25.11.2, Table 25-21):
/// - bit 0: access type (0 = full, 1 = high 32 bits of a 64-bit field);
/// - bits 9:1: index;
/// - bits 11:10: type (0 control, 1 VM-exit information (read-only), 2 guest state, 3 host state);
/// - bit 12: reserved (0);
/// - bits 14:13: width (0 16-bit, 1 64-bit, 2 32-bit, 3 natural width);
/// - bits 31:15: reserved (0).
///
/// The caller never chooses a value type: it follows from bits 14:13 (and bit 0 for the HIGH
/// half). HIGH-half encodings are derived with high_half(), not listed. Fields that hold an
/// architectural register also name its typed value (`field<E>::typed_type`: x86::cr0 for
/// GUEST_CR0, x86::selector for the selector fields, paging::ept_pointer for the EPT pointer,
/// ...), which vmwrite()/vmread() accept.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "../paging/ept_entry.hpp"
#include "../x86/bitfield.hpp"
#include "../x86/cr.hpp"
#include "../x86/cr3.hpp"
#include "../x86/efer.hpp"
#include "../x86/rflags.hpp"
#include "../x86/selector.hpp"

namespace hvkit::vmx {

/// VMCS field width, bits 14:13 of the encoding.
enum class field_width : std::uint8_t { w16 = 0, w64 = 1, w32 = 2, natural = 3 };

/// VMCS field type (group), bits 11:10 of the encoding.
enum class field_type : std::uint8_t { control = 0, exit_info = 1, guest = 2, host = 3 };

/// The encoding's bit fields (SDM 25.11.2, Table 25-21).
namespace encoding_bits {
using access_high = x86::bitflag<std::uint32_t, 0>;
using index = x86::bitfield<std::uint32_t, 1, 9>;
using type = x86::bitfield<std::uint32_t, 10, 2, field_type>;
using width = x86::bitfield<std::uint32_t, 13, 2, field_width>;
/// Bit 12 and bits 31:15 are reserved and must be zero.
inline constexpr std::uint32_t reserved = (1u << 12) | 0xffff'8000u;
static_assert(x86::fields_disjoint<access_high, index, type, width>());
static_assert((x86::fields_mask<access_high, index, type, width> & reserved) == 0);
}  // namespace encoding_bits

[[nodiscard]] constexpr field_width width_of(std::uint32_t encoding) noexcept {
  return encoding_bits::width::get(encoding);
}
[[nodiscard]] constexpr field_type type_of(std::uint32_t encoding) noexcept {
  return encoding_bits::type::get(encoding);
}
[[nodiscard]] constexpr unsigned index_of(std::uint32_t encoding) noexcept {
  return encoding_bits::index::get(encoding);
}
[[nodiscard]] constexpr bool is_high_access(std::uint32_t encoding) noexcept {
  return encoding_bits::access_high::get(encoding);
}

/// True if `encoding` is well formed: reserved bits clear, and the HIGH access type is used
/// only with 64-bit fields (SDM 25.11.2: 16-bit, 32-bit and natural-width fields use full access only).
[[nodiscard]] constexpr bool is_well_formed(std::uint32_t encoding) noexcept {
  if ((encoding & encoding_bits::reserved) != 0) return false;
  if (is_high_access(encoding) && width_of(encoding) != field_width::w64) return false;
  return true;
}

/// The number of bits a VMREAD/VMWRITE of `encoding` transfers on x86-64 (a HIGH access
/// transfers 32 bits).
[[nodiscard]] constexpr unsigned bits_of(std::uint32_t encoding) noexcept {
  if (is_high_access(encoding)) return 32;
  switch (width_of(encoding)) {
    case field_width::w16: return 16;
    case field_width::w32: return 32;
    case field_width::w64: return 64;
    case field_width::natural: return 64;  // x86-64 only
  }
  return 64;
}

/// Mask of the bits a field of `encoding` holds.
[[nodiscard]] constexpr std::uint64_t value_mask(std::uint32_t encoding) noexcept {
  const unsigned b = bits_of(encoding);
  return b == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << b) - 1);
}

/// Natural-width fields are 64 bits wide on x86-64 (the only mode hvkit supports for VMX).
using natural_t = std::uint64_t;

namespace detail {
template <field_width W, bool High>
struct value_type_of;
template <> struct value_type_of<field_width::w16, false> { using type = std::uint16_t; };
template <> struct value_type_of<field_width::w32, false> { using type = std::uint32_t; };
template <> struct value_type_of<field_width::w64, false> { using type = std::uint64_t; };
template <> struct value_type_of<field_width::w64, true> { using type = std::uint32_t; };
template <> struct value_type_of<field_width::natural, false> { using type = natural_t; };

/// The architectural register a field holds, by full encoding (SDM Vol. 3D Appendix B);
/// void for fields that hold plain numbers, addresses or controls. fields.hpp checks each
/// entry against the field's name.
template <std::uint32_t FullEncoding>
struct typed_value_of { using type = void; };
// B.1.2, B.1.3: 16-bit guest and host selector fields (ES, CS, SS, DS, FS, GS, LDTR, TR).
template <std::uint32_t E>
  requires((E >= 0x0800 && E <= 0x080e && E % 2 == 0) || (E >= 0x0c00 && E <= 0x0c0c && E % 2 == 0))
struct typed_value_of<E> { using type = x86::selector; };
// B.2.3, B.2.4: guest and host IA32_EFER.
template <> struct typed_value_of<0x2806> { using type = x86::efer; };
template <> struct typed_value_of<0x2c02> { using type = x86::efer; };
// B.2.1: the EPT pointer (SDM 25.6.11): memory type, page-walk length, A/D and supervisor
// shadow-stack controls, and the host-physical address of the EPT PML4 (or PML5) table.
template <> struct typed_value_of<0x201a> { using type = paging::ept_pointer; };
// B.4.1: CR0/CR4 guest/host masks and read shadows hold CR0/CR4 bit sets (SDM 25.6.6).
template <> struct typed_value_of<0x6000> { using type = x86::cr0; };
template <> struct typed_value_of<0x6002> { using type = x86::cr4; };
template <> struct typed_value_of<0x6004> { using type = x86::cr0; };
template <> struct typed_value_of<0x6006> { using type = x86::cr4; };
// B.4.1: CR3-target values (SDM 25.6.7).
template <> struct typed_value_of<0x6008> { using type = x86::cr3; };
template <> struct typed_value_of<0x600a> { using type = x86::cr3; };
template <> struct typed_value_of<0x600c> { using type = x86::cr3; };
template <> struct typed_value_of<0x600e> { using type = x86::cr3; };
// B.4.3: guest CR0, CR3, CR4 and RFLAGS.
template <> struct typed_value_of<0x6800> { using type = x86::cr0; };
template <> struct typed_value_of<0x6802> { using type = x86::cr3; };
template <> struct typed_value_of<0x6804> { using type = x86::cr4; };
template <> struct typed_value_of<0x6820> { using type = x86::rflags; };
// B.4.4: host CR0, CR3, CR4.
template <> struct typed_value_of<0x6c00> { using type = x86::cr0; };
template <> struct typed_value_of<0x6c02> { using type = x86::cr3; };
template <> struct typed_value_of<0x6c04> { using type = x86::cr4; };
}  // namespace detail

/// A VMCS field. Everything about it follows from its encoding.
template <std::uint32_t Encoding>
struct field {
  static_assert(is_well_formed(Encoding), "malformed VMCS field encoding (SDM 25.11.2)");
  static constexpr std::uint32_t encoding = Encoding;
  static constexpr field_width width = width_of(Encoding);
  static constexpr field_type type = type_of(Encoding);
  static constexpr bool high = is_high_access(Encoding);
  /// The VM-exit information fields are read-only (SDM 25.9; VMWRITE to them fails with
  /// VM-instruction error 13 unless IA32_VMX_MISC bit 29 is set).
  static constexpr bool read_only = type == field_type::exit_info;
  /// The unsigned type VMREAD/VMWRITE transfer (from bits 14:13, and bit 0 for HIGH).
  using value_type = typename detail::value_type_of<width, high>::type;
  /// The architectural register type the field holds (x86::cr0, x86::selector, ...), or
  /// void. A HIGH half holds no whole register.
  using typed_type = std::conditional_t<high, void, typename detail::typed_value_of<Encoding>::type>;
};

/// Is `T` a field<>?
template <class T>
inline constexpr bool is_field_v = false;
template <std::uint32_t E>
inline constexpr bool is_field_v<field<E>> = true;
template <class T>
concept vmcs_field = is_field_v<std::remove_cvref_t<T>>;

/// The HIGH half of a 64-bit field (access type 1): a 32-bit view of bits 63:32.
template <std::uint32_t E>
  requires(width_of(E) == field_width::w64 && !is_high_access(E))
[[nodiscard]] constexpr field<E | 1u> high_half(field<E>) noexcept {
  return {};
}

}  // namespace hvkit::vmx
