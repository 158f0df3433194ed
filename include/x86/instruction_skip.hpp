// SPDX-License-Identifier: MIT
/// @file
/// @brief The architectural part of completing an instruction a hypervisor emulated, shared
/// by VMX and SVM: the instruction pointer advanced in the width of the current code segment,
/// and whether the completed instruction raises a single-step trap.
///
/// - Width: 64-bit mode (long mode active and CS.L = 1) adds in 64 bits; otherwise the
///   instruction pointer is EIP (CS.D = 1) or IP (CS.D = 0, also real and virtual-8086 mode)
///   and wraps at 2^32 or 2^16 (SDM Vol. 1 3.5; AMD APM Vol. 1 2.5 "Instruction Pointer").
/// - Single step: with RFLAGS.TF = 1 and DEBUGCTL.BTF = 0 a completed instruction raises a
///   single-step #DB with DR6.BS (SDM Vol. 3B 18.3.1.4; APM Vol. 2 13.1.4). How the trap is
///   delivered differs: VMX records it in the pending debug exceptions (vmx/skip.hpp), SVM has
///   no such field and the hypervisor injects #DB itself (svm/skip.hpp).
#pragma once

#include <cstdint>

#include "rflags.hpp"

namespace hvkit::x86 {

/// The instruction-pointer width of the code the guest runs.
enum class ip_width : std::uint8_t { w16, w32, w64 };

/// From long mode (EFER.LMA) and the code segment's L and D/B bits.
[[nodiscard]] constexpr ip_width ip_width_of(bool long_mode, bool cs_l, bool cs_db) noexcept {
  if (long_mode && cs_l) return ip_width::w64;
  return cs_db ? ip_width::w32 : ip_width::w16;
}

/// `rip + length` in width `w`.
[[nodiscard]] constexpr std::uint64_t advance_ip(std::uint64_t rip, std::uint64_t length, ip_width w) noexcept {
  const std::uint64_t next = rip + length;
  switch (w) {
    case ip_width::w16: return next & 0xffffu;
    case ip_width::w32: return next & 0xffff'ffffu;
    case ip_width::w64: break;
  }
  return next;
}

/// IA32_DEBUGCTL.BTF (bit 1): single-step on branches only (SDM 18.4.1; APM Vol. 2 13.1.3).
inline constexpr std::uint64_t debugctl_btf = std::uint64_t{1} << 1;
/// DR6.BS (bit 14): the #DB was a single-step trap.
inline constexpr std::uint64_t dr6_bs = std::uint64_t{1} << 14;

/// True if completing an (emulated, non-branch) instruction raises a single-step trap.
[[nodiscard]] constexpr bool single_step_trap(rflags flags, std::uint64_t debugctl) noexcept {
  return flags.test(rflags::tf) && (debugctl & debugctl_btf) == 0;
}

}  // namespace hvkit::x86
