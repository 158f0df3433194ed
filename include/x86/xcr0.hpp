// SPDX-License-Identifier: MIT
/// @file
/// @brief XSAVE feature bits as used in XCR0 and IA32_XSS (SDM 13.1, Vol. 1).
#pragma once

#include "flags.hpp"

namespace hvkit::x86 {

/// A set of XSAVE state components. XCR0 holds the user components, IA32_XSS the
/// supervisor ones (SDM 13.2, 13.3); both use the same bit numbers.
class xfeatures : public flags<xfeatures> {
 public:
  using flags::flags;
  static const xfeatures x87;        ///< 0
  static const xfeatures sse;        ///< 1
  static const xfeatures avx;        ///< 2
  static const xfeatures bndregs;    ///< 3: MPX
  static const xfeatures bndcsr;     ///< 4: MPX
  static const xfeatures opmask;     ///< 5: AVX-512
  static const xfeatures zmm_hi256;  ///< 6: AVX-512
  static const xfeatures hi16_zmm;   ///< 7: AVX-512
  static const xfeatures pt;         ///< 8: processor trace (XSS)
  static const xfeatures pkru;       ///< 9: protection keys
  static const xfeatures pasid;      ///< 10: (XSS)
  static const xfeatures cet_u;      ///< 11: user CET (XSS)
  static const xfeatures cet_s;      ///< 12: supervisor CET (XSS)
  static const xfeatures hdc;        ///< 13: (XSS)
  static const xfeatures uintr;      ///< 14: (XSS)
  static const xfeatures lbr;        ///< 15: (XSS)
  static const xfeatures hwp;        ///< 16: (XSS)
  static const xfeatures xtilecfg;   ///< 17: AMX
  static const xfeatures xtiledata;  ///< 18: AMX
  static const xfeatures apx;        ///< 19: APX extended GPRs
  /// Components that are managed through XCR0 (user state).
  static const xfeatures user_components;
  /// Components that are managed through IA32_XSS (supervisor state).
  static const xfeatures supervisor_components;
};
inline constexpr xfeatures xfeatures::x87 = xfeatures::bit(0);
inline constexpr xfeatures xfeatures::sse = xfeatures::bit(1);
inline constexpr xfeatures xfeatures::avx = xfeatures::bit(2);
inline constexpr xfeatures xfeatures::bndregs = xfeatures::bit(3);
inline constexpr xfeatures xfeatures::bndcsr = xfeatures::bit(4);
inline constexpr xfeatures xfeatures::opmask = xfeatures::bit(5);
inline constexpr xfeatures xfeatures::zmm_hi256 = xfeatures::bit(6);
inline constexpr xfeatures xfeatures::hi16_zmm = xfeatures::bit(7);
inline constexpr xfeatures xfeatures::pt = xfeatures::bit(8);
inline constexpr xfeatures xfeatures::pkru = xfeatures::bit(9);
inline constexpr xfeatures xfeatures::pasid = xfeatures::bit(10);
inline constexpr xfeatures xfeatures::cet_u = xfeatures::bit(11);
inline constexpr xfeatures xfeatures::cet_s = xfeatures::bit(12);
inline constexpr xfeatures xfeatures::hdc = xfeatures::bit(13);
inline constexpr xfeatures xfeatures::uintr = xfeatures::bit(14);
inline constexpr xfeatures xfeatures::lbr = xfeatures::bit(15);
inline constexpr xfeatures xfeatures::hwp = xfeatures::bit(16);
inline constexpr xfeatures xfeatures::xtilecfg = xfeatures::bit(17);
inline constexpr xfeatures xfeatures::xtiledata = xfeatures::bit(18);
inline constexpr xfeatures xfeatures::apx = xfeatures::bit(19);
inline constexpr xfeatures xfeatures::user_components =
    xfeatures::x87 | xfeatures::sse | xfeatures::avx | xfeatures::bndregs | xfeatures::bndcsr |
    xfeatures::opmask | xfeatures::zmm_hi256 | xfeatures::hi16_zmm | xfeatures::pkru |
    xfeatures::xtilecfg | xfeatures::xtiledata | xfeatures::apx;
inline constexpr xfeatures xfeatures::supervisor_components =
    xfeatures::pt | xfeatures::pasid | xfeatures::cet_u | xfeatures::cet_s | xfeatures::hdc |
    xfeatures::uintr | xfeatures::lbr | xfeatures::hwp;

/// XCR0 (XFEATURE_ENABLED_MASK) has the same layout as a set of xfeatures.
using xcr0 = xfeatures;

/// The architectural rules for a valid XCR0 value (SDM 13.3, XSETBV #GP conditions).
[[nodiscard]] constexpr bool is_valid_xcr0(xfeatures v) noexcept {
  if (!v.test(xfeatures::x87)) return false;                                   // bit 0 must be 1
  if (v.any(xfeatures::supervisor_components)) return false;                  // XSS-only bits
  if (v.test(xfeatures::avx) && !v.test(xfeatures::sse)) return false;        // AVX needs SSE
  const auto mpx = xfeatures::bndregs | xfeatures::bndcsr;
  if (v.any(mpx) && !v.test(mpx)) return false;                               // both MPX bits or none
  const auto avx512 = xfeatures::opmask | xfeatures::zmm_hi256 | xfeatures::hi16_zmm;
  if (v.any(avx512) && !(v.test(avx512) && v.test(xfeatures::avx))) return false;
  const auto amx = xfeatures::xtilecfg | xfeatures::xtiledata;
  if (v.any(amx) && !v.test(amx)) return false;                                // both AMX bits or none
  return true;
}

}  // namespace hvkit::x86
