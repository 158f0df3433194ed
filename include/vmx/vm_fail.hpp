// SPDX-License-Identifier: MIT
/// @file
/// @brief How a VMX instruction fails: VMfailInvalid or VMfailValid with the
/// VM-instruction error number (SDM Vol. 3C 31.2 "Conventions", 31.4 "VM Instruction Error Numbers").
#pragma once

#include <cstdint>

namespace hvkit::vmx {

/// VM-instruction error numbers (SDM 31.4, Table 31-1). Stored in the VM-instruction error
/// field of the current VMCS on VMfailValid.
enum class vm_instruction_error : std::uint32_t {
  none = 0,
  vmcall_in_vmx_root = 1,
  vmclear_invalid_address = 2,
  vmclear_vmxon_pointer = 3,
  vmlaunch_non_clear_vmcs = 4,
  vmresume_non_launched_vmcs = 5,
  vmresume_after_vmxoff = 6,
  entry_invalid_control_fields = 7,
  entry_invalid_host_state = 8,
  vmptrld_invalid_address = 9,
  vmptrld_vmxon_pointer = 10,
  vmptrld_bad_revision = 11,
  unsupported_vmcs_component = 12,
  vmwrite_read_only_component = 13,
  vmxon_in_vmx_root = 15,
  entry_invalid_executive_vmcs_pointer = 16,
  entry_non_launched_executive_vmcs = 17,
  entry_executive_vmcs_not_vmxon = 18,
  vmcall_non_clear_vmcs = 19,
  vmcall_invalid_exit_controls = 20,
  vmcall_bad_mseg_revision = 22,
  vmxoff_dual_monitor = 23,
  vmcall_invalid_smm_monitor_features = 24,
  entry_invalid_executive_controls = 25,
  entry_events_blocked_by_mov_ss = 26,
  invalid_invept_invvpid_operand = 28,
};

/// Which VMX instruction failed.
enum class vmx_instruction : std::uint8_t {
  vmxon, vmxoff, vmclear, vmptrld, vmptrst, vmread, vmwrite, vmlaunch, vmresume, invept, invvpid,
};

/// A VMX instruction's failure (SDM 31.2): VMfailInvalid sets RFLAGS.CF (no current VMCS, so
/// no error number); VMfailValid sets RFLAGS.ZF and stores an error number in the current VMCS.
struct vm_fail {
  enum class kind : std::uint8_t { invalid, valid };
  kind how = kind::invalid;
  /// The VM-instruction error number (VMfailValid only; `none` for VMfailInvalid).
  vm_instruction_error error = vm_instruction_error::none;
  vmx_instruction instruction = vmx_instruction::vmread;
  /// The field encoding involved (VMREAD/VMWRITE), else ~0.
  std::uint32_t field_encoding = ~0u;

  [[nodiscard]] static constexpr vm_fail fail_invalid(vmx_instruction i, std::uint32_t enc = ~0u) noexcept {
    return {kind::invalid, vm_instruction_error::none, i, enc};
  }
  [[nodiscard]] static constexpr vm_fail fail_valid(vmx_instruction i, vm_instruction_error e,
                                                    std::uint32_t enc = ~0u) noexcept {
    return {kind::valid, e, i, enc};
  }
  friend constexpr bool operator==(const vm_fail&, const vm_fail&) noexcept = default;
};

}  // namespace hvkit::vmx
