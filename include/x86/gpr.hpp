/// @file
/// @brief General-purpose register numbers as instructions encode them (ModRM.reg/rm with
/// REX.R/B, SDM Vol. 2A 2.1.5, Table 2-2 and 2.2.1) and as VMX exit qualifications and the
/// VM-exit instruction-information field report them (0 = RAX ... 4 = RSP ... 15 = R15).
#pragma once

#include <cstdint>

namespace hvkit::x86 {

enum class gpr : std::uint8_t {
  rax = 0, rcx = 1, rdx = 2, rbx = 3, rsp = 4, rbp = 5, rsi = 6, rdi = 7,
  r8 = 8, r9 = 9, r10 = 10, r11 = 11, r12 = 12, r13 = 13, r14 = 14, r15 = 15,
};

/// The register a 4-bit field names (bits above 3 are ignored).
[[nodiscard]] constexpr gpr gpr_from_index(unsigned n) noexcept { return static_cast<gpr>(n & 15u); }

}  // namespace hvkit::x86
