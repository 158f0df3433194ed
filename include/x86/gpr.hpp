// SPDX-License-Identifier: MIT
/// @file
/// @brief General-purpose register numbers as instructions encode them (ModRM.reg/rm with
/// REX.R/B, SDM Vol. 2A 2.1.5, Table 2-2 and 2.2.1) and as VMX exit qualifications and the
/// VM-exit instruction-information field report them (0 = RAX ... 4 = RSP ... 15 = R15), and
/// the in-memory block of a guest's GPRs both backends' register files use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hvkit::x86 {

enum class gpr : std::uint8_t {
  rax = 0, rcx = 1, rdx = 2, rbx = 3, rsp = 4, rbp = 5, rsi = 6, rdi = 7,
  r8 = 8, r9 = 9, r10 = 10, r11 = 11, r12 = 12, r13 = 13, r14 = 14, r15 = 15,
};

/// The register a 4-bit field names (bits above 3 are ignored).
[[nodiscard]] constexpr gpr gpr_from_index(unsigned n) noexcept { return static_cast<gpr>(n & 15u); }

/// The guest's general-purpose registers in memory, 16 slots in gpr order, where a
/// hypervisor's entry/exit stub saves and loads them (register n at byte offset 8 * n). The
/// registers the processor keeps in the VMCS/VMCB instead (VMX: RSP; SVM: RSP and RAX) have
/// unused slots here; vmx::register_file and svm::register_file know which.
struct gpr_block {
  std::array<std::uint64_t, 16> slot{};
  [[nodiscard]] constexpr std::uint64_t& operator[](gpr r) noexcept { return slot[static_cast<unsigned>(r)]; }
  [[nodiscard]] constexpr std::uint64_t operator[](gpr r) const noexcept { return slot[static_cast<unsigned>(r)]; }
  [[nodiscard]] static constexpr std::size_t offset(gpr r) noexcept { return 8u * static_cast<unsigned>(r); }
};
static_assert(sizeof(gpr_block) == 16 * 8);

}  // namespace hvkit::x86
