// SPDX-License-Identifier: MIT
/// @file
/// @brief Exception vectors and their properties (SDM 6.3.1, Table 6-1; 6.15).
#pragma once

#include <cstdint>

namespace hvkit::x86 {

enum class vector : std::uint8_t {
  de = 0,   ///< divide error
  db = 1,   ///< debug
  nmi = 2,  ///< non-maskable interrupt
  bp = 3,   ///< breakpoint
  of = 4,   ///< overflow
  br = 5,   ///< BOUND range exceeded
  ud = 6,   ///< invalid opcode
  nm = 7,   ///< device not available
  df = 8,   ///< double fault
  cso = 9,  ///< coprocessor segment overrun (reserved since the i486)
  ts = 10,  ///< invalid TSS
  np = 11,  ///< segment not present
  ss = 12,  ///< stack-segment fault
  gp = 13,  ///< general protection
  pf = 14,  ///< page fault
  mf = 16,  ///< x87 floating-point error
  ac = 17,  ///< alignment check
  mc = 18,  ///< machine check
  xm = 19,  ///< SIMD floating-point
  ve = 20,  ///< virtualization exception
  cp = 21,  ///< control protection
  hv = 28,  ///< AMD hypervisor injection
  vc = 29,  ///< AMD VMM communication
  sx = 30,  ///< AMD security exception
};

/// Whose exception table applies: the vectors above 21 differ. Intel reserves 22-31 (SDM
/// Table 6-1: "Intel reserved. Do not use."); AMD defines #HV (28), #VC (29, with an error
/// code) and #SX (30, with an error code) (APM Vol. 2, 8.2, Table 8-1). The VMX layer asks
/// for Intel's, the SVM layer for AMD's.
enum class vendor : std::uint8_t { intel, amd };

/// True if delivering the exception pushes an error code on a processor of vendor `cpu`
/// (SDM Table 6-1: #DF, #TS, #NP, #SS, #GP, #PF, #AC, #CP; APM Table 8-1: the same, plus #VC
/// and #SX). A vector the vendor reserves pushes none.
[[nodiscard]] constexpr bool has_error_code(vector v, vendor cpu) noexcept {
  switch (v) {
    case vector::df:
    case vector::ts:
    case vector::np:
    case vector::ss:
    case vector::gp:
    case vector::pf:
    case vector::ac:
    case vector::cp: return true;
    case vector::vc:
    case vector::sx: return cpu == vendor::amd;
    default: return false;
  }
}

/// Classes for the double-fault rules (SDM 6.15, Table 6-4 and 6-5).
enum class exception_class : std::uint8_t { benign, contributory, page_fault, double_fault };

[[nodiscard]] constexpr exception_class class_of(vector v) noexcept {
  switch (v) {
    case vector::de:
    case vector::ts:
    case vector::np:
    case vector::ss:
    case vector::gp:
    case vector::cp: return exception_class::contributory;
    case vector::pf:
    case vector::ve: return exception_class::page_fault;
    case vector::df: return exception_class::double_fault;
    default: return exception_class::benign;
  }
}

/// What delivering `second` while delivering `first` produces (SDM Table 6-5):
/// the second exception itself, a double fault, or (for a fault during #DF) a triple fault.
enum class delivery_outcome : std::uint8_t { deliver_second, double_fault, triple_fault };

[[nodiscard]] constexpr delivery_outcome combine_exceptions(vector first, vector second) noexcept {
  const auto a = class_of(first);
  const auto b = class_of(second);
  // SDM 6.15, interrupt 8: a contributory or page-fault class exception while calling the
  // double-fault handler means shutdown; a benign one is delivered.
  if (a == exception_class::double_fault)
    return b == exception_class::contributory || b == exception_class::page_fault ? delivery_outcome::triple_fault
                                                                                  : delivery_outcome::deliver_second;
  if (a == exception_class::contributory && b == exception_class::contributory) return delivery_outcome::double_fault;
  if (a == exception_class::page_fault &&
      (b == exception_class::contributory || b == exception_class::page_fault))
    return delivery_outcome::double_fault;
  return delivery_outcome::deliver_second;
}

}  // namespace hvkit::x86
