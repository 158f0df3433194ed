// SPDX-License-Identifier: MIT
/// @file
/// @brief IA32_EFER (MSR 0xC0000080) as a typed flag set (SDM 2.2.1, AMD APM vol. 2 3.1.7).
#pragma once

#include "flags.hpp"

namespace hvkit::x86 {

class efer : public flags<efer> {
 public:
  using flags::flags;
  static const efer sce;      ///< 0: SYSCALL enable
  static const efer lme;      ///< 8: IA-32e (long) mode enable
  static const efer lma;      ///< 10: IA-32e mode active (read-only to software)
  static const efer nxe;      ///< 11: execute-disable bit enable
  static const efer svme;     ///< 12: AMD SVM enable
  static const efer lmsle;    ///< 13: AMD long-mode segment limit enable
  static const efer ffxsr;    ///< 14: AMD fast FXSAVE/FXRSTOR
  static const efer tce;      ///< 15: AMD translation cache extension
  static const efer autoibrs; ///< 21: AMD automatic IBRS
  static const efer defined;
};
inline constexpr efer efer::sce = efer::bit(0);
inline constexpr efer efer::lme = efer::bit(8);
inline constexpr efer efer::lma = efer::bit(10);
inline constexpr efer efer::nxe = efer::bit(11);
inline constexpr efer efer::svme = efer::bit(12);
inline constexpr efer efer::lmsle = efer::bit(13);
inline constexpr efer efer::ffxsr = efer::bit(14);
inline constexpr efer efer::tce = efer::bit(15);
inline constexpr efer efer::autoibrs = efer::bit(21);
inline constexpr efer efer::defined = efer::sce | efer::lme | efer::lma | efer::nxe | efer::svme |
                                      efer::lmsle | efer::ffxsr | efer::tce | efer::autoibrs;

}  // namespace hvkit::x86
