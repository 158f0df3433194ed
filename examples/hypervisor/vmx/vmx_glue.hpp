// SPDX-License-Identifier: MIT
/// @file
/// @brief What the example still keeps beside hvkit::vmx: the typed VMREAD wrapper, the
/// name of the guest register block the entry/exit stubs use (hvkit::vmx::gpr_block).
#pragma once

#include <cstdint>

#include <hvkit/vmx/backend.hpp>
#include <hvkit/vmx/fields.hpp>
#include <hvkit/vmx/hardware.hpp>
#include <hvkit/vmx/register_file.hpp>

#include "../core/cpu.hpp"

namespace hv::vmx {

// ---- VMCS access: hvkit::vmx (typed fields, hardware VMREAD/VMWRITE backend) -------
namespace fields = hvkit::vmx::fields;

/// VMREAD of a typed field, widened to 64 bits for the arithmetic in the exit handlers.
/// A failing VMREAD (no current VMCS, bad encoding) reads as 0; the handlers only run
/// with a current VMCS, and every encoding is checked at compile time by vmx/fields.hpp.
template <std::uint32_t E>
inline std::uint64_t vmread(hvkit::vmx::field<E> f) {
  hvkit::vmx::hw::current_vmcs vmcs;
  auto r = hvkit::vmx::vmread(vmcs, f);
  return r.has_value() ? static_cast<std::uint64_t>(r.value()) : 0;
}

/// Counter slots for basic exit reasons (Appendix C numbers them below 80).
inline constexpr unsigned exit_reason_slots = 80;
const char* reason_name(std::uint32_t basic_reason);

/// IA32_FEATURE_CONTROL bits (SDM Vol. 4, Table 2-2).
inline constexpr std::uint64_t feature_control_lock = 1u << 0;
inline constexpr std::uint64_t feature_control_vmxon_outside_smx = 1u << 2;

// ---- guest registers saved by vmx_exit_stub (boot.cpp) -------------------------------
/// 16 slots in register-number order, 8 * n bytes for register n (slot 4 unused: RSP is in
/// the VMCS); boot.cpp's vmx_enter/vmx_exit_stub use these offsets.
using guest_regs = hvkit::vmx::gpr_block;
static_assert(hvkit::vmx::gpr_block::offset(hvkit::x86::gpr::r15) == 0x78);

}  // namespace hv::vmx
