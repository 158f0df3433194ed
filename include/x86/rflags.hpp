// SPDX-License-Identifier: MIT
/// @file
/// @brief RFLAGS as a typed flag set, with the IOPL field (SDM 3.4.3).
#pragma once

#include <cstdint>

#include "bitfield.hpp"
#include "flags.hpp"

namespace hvkit::x86 {

class rflags : public flags<rflags> {
 public:
  using flags::flags;
  static const rflags cf;     ///< 0: carry
  static const rflags fixed1; ///< 1: reserved, always 1
  static const rflags pf;     ///< 2: parity
  static const rflags af;     ///< 4: auxiliary carry
  static const rflags zf;     ///< 6: zero
  static const rflags sf;     ///< 7: sign
  static const rflags tf;     ///< 8: trap
  static const rflags if_;    ///< 9: interrupt enable
  static const rflags df;     ///< 10: direction
  static const rflags of;     ///< 11: overflow
  static const rflags iopl;   ///< 13:12: I/O privilege level (both bits)
  static const rflags nt;     ///< 14: nested task
  static const rflags rf;     ///< 16: resume
  static const rflags vm;     ///< 17: virtual-8086 mode
  static const rflags ac;     ///< 18: alignment check / SMAP override
  static const rflags vif;    ///< 19: virtual interrupt
  static const rflags vip;    ///< 20: virtual interrupt pending
  static const rflags id;     ///< 21: CPUID available
  /// The arithmetic status flags (CF, PF, AF, ZF, SF, OF).
  static const rflags status;
  static const rflags defined;

  using iopl_field = bitfield<std::uint64_t, 12, 2, std::uint8_t>;
  [[nodiscard]] constexpr std::uint8_t iopl_value() const noexcept { return iopl_field::get(raw()); }
};
inline constexpr rflags rflags::cf = rflags::bit(0);
inline constexpr rflags rflags::fixed1 = rflags::bit(1);
inline constexpr rflags rflags::pf = rflags::bit(2);
inline constexpr rflags rflags::af = rflags::bit(4);
inline constexpr rflags rflags::zf = rflags::bit(6);
inline constexpr rflags rflags::sf = rflags::bit(7);
inline constexpr rflags rflags::tf = rflags::bit(8);
inline constexpr rflags rflags::if_ = rflags::bit(9);
inline constexpr rflags rflags::df = rflags::bit(10);
inline constexpr rflags rflags::of = rflags::bit(11);
inline constexpr rflags rflags::iopl = rflags{rflags::iopl_field::mask};
inline constexpr rflags rflags::nt = rflags::bit(14);
inline constexpr rflags rflags::rf = rflags::bit(16);
inline constexpr rflags rflags::vm = rflags::bit(17);
inline constexpr rflags rflags::ac = rflags::bit(18);
inline constexpr rflags rflags::vif = rflags::bit(19);
inline constexpr rflags rflags::vip = rflags::bit(20);
inline constexpr rflags rflags::id = rflags::bit(21);
inline constexpr rflags rflags::status = rflags::cf | rflags::pf | rflags::af | rflags::zf | rflags::sf | rflags::of;
inline constexpr rflags rflags::defined = rflags::status | rflags::fixed1 | rflags::tf | rflags::if_ | rflags::df |
                                          rflags::iopl | rflags::nt | rflags::rf | rflags::vm | rflags::ac |
                                          rflags::vif | rflags::vip | rflags::id;

}  // namespace hvkit::x86
