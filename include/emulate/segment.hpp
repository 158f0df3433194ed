// SPDX-License-Identifier: MIT
/// @file
/// @brief Segment registers as the emulator sees them (hidden part in VMX access-rights
/// format), descriptor-table registers, and segment descriptors read from the GDT/LDT.
///
/// A segment register's hidden part is kept in the layout hypervisors already have: the
/// VMCS guest access-rights format (SDM 25.4.1, Table 25-2), with the limit expanded to
/// bytes. Descriptors (SDM 3.4.5, Figure 3-8; 64-bit system descriptors: 8.2.3, Figure 8-4)
/// are parsed with typed bitfields over the raw 8-byte words.
#pragma once

#include <cstdint>

#include "../x86/bitfield.hpp"
#include "../x86/flags.hpp"
#include "../x86/selector.hpp"

namespace hvkit::emulate {

/// Segment access rights in the VMCS guest access-rights format (SDM 25.4.1, Table 25-2).
class segment_ar : public x86::flags<segment_ar, std::uint32_t> {
 public:
  using flags::flags;
  using type_field = x86::bitfield<std::uint32_t, 0, 4, std::uint8_t>;  ///< 3:0 segment type
  using dpl_field = x86::bitfield<std::uint32_t, 5, 2, std::uint8_t>;   ///< 6:5 DPL
  static const segment_ar accessed;  ///< 0 (type bit 0): accessed / TSS busy is type bit 1
  static const segment_ar s;         ///< 4: 1 = code/data, 0 = system
  static const segment_ar p;         ///< 7: present
  static const segment_ar avl;       ///< 12
  static const segment_ar l;         ///< 13: 64-bit code segment
  static const segment_ar db;        ///< 14: default operation size / big
  static const segment_ar g;         ///< 15: granularity
  static const segment_ar unusable;  ///< 16: the register holds no usable segment (null selector)

  [[nodiscard]] constexpr std::uint8_t type() const noexcept { return type_field::get(raw()); }
  [[nodiscard]] constexpr std::uint8_t dpl() const noexcept { return dpl_field::get(raw()); }
  [[nodiscard]] constexpr segment_ar with_type(std::uint8_t t) const noexcept {
    return segment_ar{type_field::set(raw(), t)};
  }
  /// Code/data type bits (SDM 3.4.5.1, Table 3-1), meaningful when `s` is set.
  [[nodiscard]] constexpr bool code() const noexcept { return (type() & 8) != 0; }
  /// Data: writable. Code: readable.
  [[nodiscard]] constexpr bool writable_or_readable() const noexcept { return (type() & 2) != 0; }
  /// Data: expand-down. Code: conforming.
  [[nodiscard]] constexpr bool expand_down_or_conforming() const noexcept { return (type() & 4) != 0; }
};
inline constexpr segment_ar segment_ar::accessed = segment_ar::bit(0);
inline constexpr segment_ar segment_ar::s = segment_ar::bit(4);
inline constexpr segment_ar segment_ar::p = segment_ar::bit(7);
inline constexpr segment_ar segment_ar::avl = segment_ar::bit(12);
inline constexpr segment_ar segment_ar::l = segment_ar::bit(13);
inline constexpr segment_ar segment_ar::db = segment_ar::bit(14);
inline constexpr segment_ar segment_ar::g = segment_ar::bit(15);
inline constexpr segment_ar segment_ar::unusable = segment_ar::bit(16);

/// System-descriptor types (S = 0) in IA-32 and IA-32e mode (SDM 3.5, Table 3-2).
namespace system_type {
inline constexpr std::uint8_t tss16_available = 1;
inline constexpr std::uint8_t ldt = 2;
inline constexpr std::uint8_t tss16_busy = 3;
inline constexpr std::uint8_t tss_available = 9;  ///< 32-bit TSS; 64-bit TSS in IA-32e mode
inline constexpr std::uint8_t tss_busy = 11;
inline constexpr std::uint8_t busy_bit = 2;       ///< type bit 1 marks a TSS busy
}  // namespace system_type

/// A segment register: visible selector and hidden base, byte limit and access rights.
struct segment {
  std::uint16_t selector = 0;
  std::uint64_t base = 0;
  std::uint32_t limit = 0xffff;  ///< in bytes (already scaled by G)
  segment_ar ar{0x93};           ///< default: present, writable, accessed data segment

  friend constexpr bool operator==(const segment&, const segment&) noexcept = default;
};

/// GDTR / IDTR (SDM 2.4.1, 2.4.3).
struct descriptor_table {
  std::uint64_t base = 0;
  std::uint16_t limit = 0;

  friend constexpr bool operator==(const descriptor_table&, const descriptor_table&) noexcept = default;
};

/// A segment selector (SDM 3.4.2): the x86/ type, shared with the VMCS selector fields.
using x86::selector;

/// The low 8 bytes of a segment descriptor (SDM 3.4.5, Figure 3-8).
struct descriptor {
  using limit_lo = x86::bitfield<std::uint64_t, 0, 16, std::uint32_t>;
  using base_lo = x86::bitfield<std::uint64_t, 16, 24, std::uint64_t>;
  using type_field = x86::bitfield<std::uint64_t, 40, 4, std::uint8_t>;
  using s_field = x86::bitflag<std::uint64_t, 44>;
  using dpl_field = x86::bitfield<std::uint64_t, 45, 2, std::uint8_t>;
  using p_field = x86::bitflag<std::uint64_t, 47>;
  using limit_hi = x86::bitfield<std::uint64_t, 48, 4, std::uint32_t>;
  using avl_field = x86::bitflag<std::uint64_t, 52>;
  using l_field = x86::bitflag<std::uint64_t, 53>;
  using db_field = x86::bitflag<std::uint64_t, 54>;
  using g_field = x86::bitflag<std::uint64_t, 55>;
  using base_hi = x86::bitfield<std::uint64_t, 56, 8, std::uint64_t>;
  static_assert(x86::fields_disjoint<limit_lo, base_lo, type_field, s_field, dpl_field, p_field, limit_hi,
                                     avl_field, l_field, db_field, g_field, base_hi>());

  std::uint64_t raw = 0;
  /// The upper 8 bytes of a 16-byte system descriptor in IA-32e mode (SDM 8.2.3).
  std::uint64_t high = 0;

  [[nodiscard]] constexpr std::uint8_t type() const noexcept { return type_field::get(raw); }
  [[nodiscard]] constexpr bool system() const noexcept { return !s_field::get(raw); }
  [[nodiscard]] constexpr std::uint8_t dpl() const noexcept { return dpl_field::get(raw); }
  [[nodiscard]] constexpr bool present() const noexcept { return p_field::get(raw); }
  /// Base address bits 31:0; with `wide`, bits 63:32 from the upper 8 bytes.
  [[nodiscard]] constexpr std::uint64_t base(bool wide) const noexcept {
    const std::uint64_t b = base_lo::get(raw) | (base_hi::get(raw) << 24);
    return wide ? b | ((high & 0xffff'ffffu) << 32) : b;
  }
  /// The limit in bytes: 20 bits, scaled by 4 KiB (low 12 bits ones) when G = 1 (SDM 3.4.5).
  [[nodiscard]] constexpr std::uint32_t limit() const noexcept {
    const std::uint32_t l = limit_lo::get(raw) | (limit_hi::get(raw) << 16);
    return g_field::get(raw) ? (l << 12) | 0xfffu : l;
  }
  /// The access rights in VMCS format (SDM 25.4.1): bits 15:8 of the second dword.
  [[nodiscard]] constexpr segment_ar access_rights() const noexcept {
    return segment_ar{static_cast<std::uint32_t>((raw >> 40) & 0xf0ffu)};
  }
  /// The hidden part a segment load produces.
  [[nodiscard]] constexpr segment to_segment(std::uint16_t sel, bool wide) const noexcept {
    return segment{sel, base(wide), limit(), access_rights()};
  }
  /// The type of the upper half of a 16-byte descriptor must be 0 (SDM 8.2.3, LTR/LLDT #GP).
  [[nodiscard]] constexpr bool high_type_valid() const noexcept { return ((high >> 40) & 0x1f) == 0; }
};

}  // namespace hvkit::emulate
