// SPDX-License-Identifier: MIT
/// @file
/// @brief CR0 and CR4 as typed flag sets, every architectural bit named (SDM 2.5).
#pragma once

#include <cstdint>

#include "flags.hpp"

namespace hvkit::x86 {

/// Control register 0 (SDM 2.5, Figure 2-7).
class cr0 : public flags<cr0> {
 public:
  using flags::flags;
  static const cr0 pe;  ///< 0: protection enable
  static const cr0 mp;  ///< 1: monitor coprocessor
  static const cr0 em;  ///< 2: emulation
  static const cr0 ts;  ///< 3: task switched
  static const cr0 et;  ///< 4: extension type (hardwired 1 since the i486)
  static const cr0 ne;  ///< 5: numeric error
  static const cr0 wp;  ///< 16: write protect (supervisor writes to read-only pages)
  static const cr0 am;  ///< 18: alignment mask
  static const cr0 nw;  ///< 29: not write-through
  static const cr0 cd;  ///< 30: cache disable
  static const cr0 pg;  ///< 31: paging
  /// Every bit the architecture defines; the rest of the low 32 bits are reserved and
  /// bits 63:32 must be zero in 64-bit mode (SDM 2.5, MOV CR0 raises #GP otherwise).
  static const cr0 defined;
};
inline constexpr cr0 cr0::pe = cr0::bit(0);
inline constexpr cr0 cr0::mp = cr0::bit(1);
inline constexpr cr0 cr0::em = cr0::bit(2);
inline constexpr cr0 cr0::ts = cr0::bit(3);
inline constexpr cr0 cr0::et = cr0::bit(4);
inline constexpr cr0 cr0::ne = cr0::bit(5);
inline constexpr cr0 cr0::wp = cr0::bit(16);
inline constexpr cr0 cr0::am = cr0::bit(18);
inline constexpr cr0 cr0::nw = cr0::bit(29);
inline constexpr cr0 cr0::cd = cr0::bit(30);
inline constexpr cr0 cr0::pg = cr0::bit(31);
inline constexpr cr0 cr0::defined = cr0::pe | cr0::mp | cr0::em | cr0::ts | cr0::et | cr0::ne |
                                    cr0::wp | cr0::am | cr0::nw | cr0::cd | cr0::pg;

/// Control register 4 (SDM 2.5, Figure 2-7).
class cr4 : public flags<cr4> {
 public:
  using flags::flags;
  static const cr4 vme;         ///< 0: virtual-8086 mode extensions
  static const cr4 pvi;         ///< 1: protected-mode virtual interrupts
  static const cr4 tsd;         ///< 2: time stamp disable
  static const cr4 de;          ///< 3: debugging extensions
  static const cr4 pse;         ///< 4: page size extensions (4 MiB pages in 32-bit paging)
  static const cr4 pae;         ///< 5: physical address extension
  static const cr4 mce;         ///< 6: machine-check enable
  static const cr4 pge;         ///< 7: page global enable
  static const cr4 pce;         ///< 8: performance-monitoring counter enable
  static const cr4 osfxsr;      ///< 9: FXSAVE/FXRSTOR support
  static const cr4 osxmmexcpt;  ///< 10: unmasked SIMD FP exceptions
  static const cr4 umip;        ///< 11: user-mode instruction prevention
  static const cr4 la57;        ///< 12: 57-bit linear addresses (5-level paging)
  static const cr4 vmxe;        ///< 13: VMX enable
  static const cr4 smxe;        ///< 14: SMX enable
  static const cr4 fsgsbase;    ///< 16: RDFSBASE & co.
  static const cr4 pcide;       ///< 17: PCID enable
  static const cr4 osxsave;     ///< 18: XSAVE and processor extended states
  static const cr4 kl;          ///< 19: Key Locker
  static const cr4 smep;        ///< 20: supervisor-mode execution prevention
  static const cr4 smap;        ///< 21: supervisor-mode access prevention
  static const cr4 pke;         ///< 22: protection keys for user-mode pages
  static const cr4 cet;         ///< 23: control-flow enforcement technology
  static const cr4 pks;         ///< 24: protection keys for supervisor-mode pages
  static const cr4 uintr;       ///< 25: user interrupts
  static const cr4 lass;        ///< 27: linear-address space separation
  static const cr4 lam_sup;     ///< 28: linear-address masking for supervisor pointers
  static const cr4 fred;        ///< 32: flexible return and event delivery
  static const cr4 defined;
};
inline constexpr cr4 cr4::vme = cr4::bit(0);
inline constexpr cr4 cr4::pvi = cr4::bit(1);
inline constexpr cr4 cr4::tsd = cr4::bit(2);
inline constexpr cr4 cr4::de = cr4::bit(3);
inline constexpr cr4 cr4::pse = cr4::bit(4);
inline constexpr cr4 cr4::pae = cr4::bit(5);
inline constexpr cr4 cr4::mce = cr4::bit(6);
inline constexpr cr4 cr4::pge = cr4::bit(7);
inline constexpr cr4 cr4::pce = cr4::bit(8);
inline constexpr cr4 cr4::osfxsr = cr4::bit(9);
inline constexpr cr4 cr4::osxmmexcpt = cr4::bit(10);
inline constexpr cr4 cr4::umip = cr4::bit(11);
inline constexpr cr4 cr4::la57 = cr4::bit(12);
inline constexpr cr4 cr4::vmxe = cr4::bit(13);
inline constexpr cr4 cr4::smxe = cr4::bit(14);
inline constexpr cr4 cr4::fsgsbase = cr4::bit(16);
inline constexpr cr4 cr4::pcide = cr4::bit(17);
inline constexpr cr4 cr4::osxsave = cr4::bit(18);
inline constexpr cr4 cr4::kl = cr4::bit(19);
inline constexpr cr4 cr4::smep = cr4::bit(20);
inline constexpr cr4 cr4::smap = cr4::bit(21);
inline constexpr cr4 cr4::pke = cr4::bit(22);
inline constexpr cr4 cr4::cet = cr4::bit(23);
inline constexpr cr4 cr4::pks = cr4::bit(24);
inline constexpr cr4 cr4::uintr = cr4::bit(25);
inline constexpr cr4 cr4::lass = cr4::bit(27);
inline constexpr cr4 cr4::lam_sup = cr4::bit(28);
inline constexpr cr4 cr4::fred = cr4::bit(32);
inline constexpr cr4 cr4::defined =
    cr4::vme | cr4::pvi | cr4::tsd | cr4::de | cr4::pse | cr4::pae | cr4::mce | cr4::pge | cr4::pce |
    cr4::osfxsr | cr4::osxmmexcpt | cr4::umip | cr4::la57 | cr4::vmxe | cr4::smxe | cr4::fsgsbase |
    cr4::pcide | cr4::osxsave | cr4::kl | cr4::smep | cr4::smap | cr4::pke | cr4::cet | cr4::pks |
    cr4::uintr | cr4::lass | cr4::lam_sup | cr4::fred;

}  // namespace hvkit::x86
