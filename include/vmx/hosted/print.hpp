// SPDX-License-Identifier: MIT
/// @file
/// @brief Hosted: names and printers for vmx/: basic exit reasons (the core's
/// exit_reason_name()), the exit-reason field, VM-instruction errors, which VMX instruction
/// failed and how (vm_fail), EPT-entry builder errors, event injection and
/// guest-state errors, interruption types, activity states, VM-entry verdicts.
///
/// See x86/hosted/format.hpp for the conventions (`name()`, `to_string()`, `operator<<`,
/// `std::formatter`).
/// @code
///   std::cout << exit.basic() << '\n';     // "ept_violation"
///   std::cout << fail << '\n';             // "VMfailValid in vmwrite: error 12 (unsupported_vmcs_component), field 0x4000"
/// @endcode
#pragma once

// A hosted header in a freestanding build (-ffreestanding) is refused here, by name, rather
// than at link time (operator new, std::__throw_*, memcpy). Core headers never include it.
#if defined(__STDC_HOSTED__) && __STDC_HOSTED__ == 0
#error "<hvkit/vmx/hosted/print.hpp> is a hosted header (it needs libc and the C++ library): it cannot be used in a freestanding build (-ffreestanding); include only the core headers outside include/*/hosted/ there"
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "../cr_access.hpp"
#include "../cr_write_apply.hpp"
#include "../ept_entry.hpp"
#include "../event_injection.hpp"
#include "../exit_reason.hpp"
#include "../fields.hpp"
#include "../interruptibility.hpp"
#include "../interruption_info.hpp"
#include "../vm_entry_rule.hpp"
#include "../vm_entry_state.hpp"
#include "../vm_fail.hpp"
#include "../../x86/hosted/format.hpp"

namespace hvkit::vmx {

using ::hvkit::hosted::operator<<;

/// The basic exit reason's name (exit_reason_name(), SDM Appendix C); empty for an
/// undefined number.
[[nodiscard]] constexpr std::string_view name(exit_reason r) noexcept {
  const std::string_view n = exit_reason_name(r);
  return n == "?" ? std::string_view{} : n;
}
/// See name(exit_reason); an undefined number prints as "exit_reason(n)".
[[nodiscard]] inline std::string to_string(exit_reason r) { return ::hvkit::hosted::enum_string(name(r), "exit_reason", r); }

/// The exit-reason field: the basic reason, then "(VM-entry failure)" and the other flags
/// that are set (SDM 28.2.1).
[[nodiscard]] inline std::string to_string(exit_reason_field f) {
  std::string s = to_string(f.basic());
  if (f.entry_failure()) s += " (VM-entry failure)";
  if (f.bus_lock_detected()) s += " (bus lock)";
  if (f.enclave_mode()) s += " (enclave mode)";
  if (f.pending_mtf()) s += " (pending MTF)";
  if (f.from_vmx_root()) s += " (from VMX root)";
  return s;
}

/// The VM-instruction error's name (SDM 31.4, Table 31-1); empty for an unassigned number.
[[nodiscard]] constexpr std::string_view name(vm_instruction_error v) noexcept {
  switch (v) {
    case vm_instruction_error::none: return "none";
    case vm_instruction_error::vmcall_in_vmx_root: return "vmcall_in_vmx_root";
    case vm_instruction_error::vmclear_invalid_address: return "vmclear_invalid_address";
    case vm_instruction_error::vmclear_vmxon_pointer: return "vmclear_vmxon_pointer";
    case vm_instruction_error::vmlaunch_non_clear_vmcs: return "vmlaunch_non_clear_vmcs";
    case vm_instruction_error::vmresume_non_launched_vmcs: return "vmresume_non_launched_vmcs";
    case vm_instruction_error::vmresume_after_vmxoff: return "vmresume_after_vmxoff";
    case vm_instruction_error::entry_invalid_control_fields: return "entry_invalid_control_fields";
    case vm_instruction_error::entry_invalid_host_state: return "entry_invalid_host_state";
    case vm_instruction_error::vmptrld_invalid_address: return "vmptrld_invalid_address";
    case vm_instruction_error::vmptrld_vmxon_pointer: return "vmptrld_vmxon_pointer";
    case vm_instruction_error::vmptrld_bad_revision: return "vmptrld_bad_revision";
    case vm_instruction_error::unsupported_vmcs_component: return "unsupported_vmcs_component";
    case vm_instruction_error::vmwrite_read_only_component: return "vmwrite_read_only_component";
    case vm_instruction_error::vmxon_in_vmx_root: return "vmxon_in_vmx_root";
    case vm_instruction_error::entry_invalid_executive_vmcs_pointer: return "entry_invalid_executive_vmcs_pointer";
    case vm_instruction_error::entry_non_launched_executive_vmcs: return "entry_non_launched_executive_vmcs";
    case vm_instruction_error::entry_executive_vmcs_not_vmxon: return "entry_executive_vmcs_not_vmxon";
    case vm_instruction_error::vmcall_non_clear_vmcs: return "vmcall_non_clear_vmcs";
    case vm_instruction_error::vmcall_invalid_exit_controls: return "vmcall_invalid_exit_controls";
    case vm_instruction_error::vmcall_bad_mseg_revision: return "vmcall_bad_mseg_revision";
    case vm_instruction_error::vmxoff_dual_monitor: return "vmxoff_dual_monitor";
    case vm_instruction_error::vmcall_invalid_smm_monitor_features: return "vmcall_invalid_smm_monitor_features";
    case vm_instruction_error::entry_invalid_executive_controls: return "entry_invalid_executive_controls";
    case vm_instruction_error::entry_events_blocked_by_mov_ss: return "entry_events_blocked_by_mov_ss";
    case vm_instruction_error::invalid_invept_invvpid_operand: return "invalid_invept_invvpid_operand";
  }
  return {};
}
/// See name(vm_instruction_error).
[[nodiscard]] inline std::string to_string(vm_instruction_error v) { return ::hvkit::hosted::enum_string(name(v), "vm_instruction_error", v); }

/// The instruction's mnemonic in lower case ("vmwrite").
[[nodiscard]] constexpr std::string_view name(vmx_instruction v) noexcept {
  switch (v) {
    case vmx_instruction::vmxon: return "vmxon";
    case vmx_instruction::vmxoff: return "vmxoff";
    case vmx_instruction::vmclear: return "vmclear";
    case vmx_instruction::vmptrld: return "vmptrld";
    case vmx_instruction::vmptrst: return "vmptrst";
    case vmx_instruction::vmread: return "vmread";
    case vmx_instruction::vmwrite: return "vmwrite";
    case vmx_instruction::vmlaunch: return "vmlaunch";
    case vmx_instruction::vmresume: return "vmresume";
    case vmx_instruction::invept: return "invept";
    case vmx_instruction::invvpid: return "invvpid";
  }
  return {};
}
/// See name(vmx_instruction).
[[nodiscard]] inline std::string to_string(vmx_instruction v) { return ::hvkit::hosted::enum_string(name(v), "vmx_instruction", v); }

/// "VMfailInvalid" or "VMfailValid" (SDM 31.2).
[[nodiscard]] constexpr std::string_view name(vm_fail::kind k) noexcept {
  switch (k) {
    case vm_fail::kind::invalid: return "VMfailInvalid";
    case vm_fail::kind::valid: return "VMfailValid";
  }
  return {};
}
/// See name(vm_fail::kind).
[[nodiscard]] inline std::string to_string(vm_fail::kind k) { return ::hvkit::hosted::enum_string(name(k), "vm_fail::kind", k); }

/// "VMfailValid in vmwrite: error 12 (unsupported_vmcs_component), field 0x4000" (the
/// error only for VMfailValid, the field only when one is recorded).
[[nodiscard]] inline std::string to_string(const vm_fail& f) {
  std::string s = to_string(f.how) + " in " + to_string(f.instruction);
  if (f.how == vm_fail::kind::valid)
    s += ": error " + std::to_string(static_cast<std::uint32_t>(f.error)) + " (" + to_string(f.error) + ")";
  if (f.field_encoding != ~0u) s += ", field " + ::hvkit::hosted::hex(f.field_encoding);
  return s;
}

}  // namespace hvkit::vmx

// x86::cr_write_fault (vmx::cr_write_fault names it) is printed by x86/hosted/format.hpp.

namespace hvkit::vmx {

/// The EPT builder error's name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(ept_error v) noexcept {
  switch (v) {
    case ept_error::write_without_read: return "write_without_read";
    case ept_error::execute_only_unsupported: return "execute_only_unsupported";
    case ept_error::reserved_memory_type: return "reserved_memory_type";
    case ept_error::large_page_unsupported: return "large_page_unsupported";
    case ept_error::misaligned_address: return "misaligned_address";
    case ept_error::address_too_wide: return "address_too_wide";
    case ept_error::walk_length_unsupported: return "walk_length_unsupported";
    case ept_error::eptp_memory_type_unsupported: return "eptp_memory_type_unsupported";
    case ept_error::accessed_dirty_unsupported: return "accessed_dirty_unsupported";
    case ept_error::eptp_reserved_bits: return "eptp_reserved_bits";
    case ept_error::supervisor_shadow_stack_unsupported: return "supervisor_shadow_stack_unsupported";
    case ept_error::invalid_maxphyaddr: return "invalid_maxphyaddr";
  }
  return {};
}
/// See name(ept_error).
[[nodiscard]] inline std::string to_string(ept_error v) { return ::hvkit::hosted::enum_string(name(v), "ept_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(tlb_flush v) noexcept {
  switch (v) {
    case tlb_flush::none: return "none";
    case tlb_flush::invvpid_single_context: return "invvpid_single_context";
  }
  return {};
}
/// See name(tlb_flush).
[[nodiscard]] inline std::string to_string(tlb_flush v) { return ::hvkit::hosted::enum_string(name(v), "tlb_flush", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(injection_error v) noexcept {
  switch (v) {
    case injection_error::none: return "none";
    case injection_error::reserved_type: return "reserved_type";
    case injection_error::mtf_unsupported: return "mtf_unsupported";
    case injection_error::nmi_vector: return "nmi_vector";
    case injection_error::exception_vector: return "exception_vector";
    case injection_error::other_event_vector: return "other_event_vector";
    case injection_error::error_code_mismatch: return "error_code_mismatch";
    case injection_error::reserved_bits: return "reserved_bits";
    case injection_error::error_code_reserved: return "error_code_reserved";
    case injection_error::instruction_length: return "instruction_length";
  }
  return {};
}
/// See name(injection_error).
[[nodiscard]] inline std::string to_string(injection_error v) { return ::hvkit::hosted::enum_string(name(v), "injection_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(activity_state v) noexcept {
  switch (v) {
    case activity_state::active: return "active";
    case activity_state::hlt: return "hlt";
    case activity_state::shutdown: return "shutdown";
    case activity_state::wait_for_sipi: return "wait_for_sipi";
  }
  return {};
}
/// See name(activity_state).
[[nodiscard]] inline std::string to_string(activity_state v) { return ::hvkit::hosted::enum_string(name(v), "activity_state", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(entry_state_error v) noexcept {
  switch (v) {
    case entry_state_error::none: return "none";
    case entry_state_error::reserved_interruptibility_bits: return "reserved_interruptibility_bits";
    case entry_state_error::sti_and_mov_ss: return "sti_and_mov_ss";
    case entry_state_error::sti_with_if_clear: return "sti_with_if_clear";
    case entry_state_error::interrupt_under_shadow: return "interrupt_under_shadow";
    case entry_state_error::interrupt_with_if_clear: return "interrupt_with_if_clear";
    case entry_state_error::nmi_under_mov_ss: return "nmi_under_mov_ss";
    case entry_state_error::nmi_under_sti: return "nmi_under_sti";
    case entry_state_error::nmi_under_virtual_nmi_blocking: return "nmi_under_virtual_nmi_blocking";
    case entry_state_error::smi_blocking_outside_smm: return "smi_blocking_outside_smm";
    case entry_state_error::enclave_with_mov_ss: return "enclave_with_mov_ss";
    case entry_state_error::reserved_activity_state: return "reserved_activity_state";
    case entry_state_error::shadow_while_inactive: return "shadow_while_inactive";
    case entry_state_error::event_blocked_by_activity: return "event_blocked_by_activity";
  }
  return {};
}
/// See name(entry_state_error).
[[nodiscard]] inline std::string to_string(entry_state_error v) { return ::hvkit::hosted::enum_string(name(v), "entry_state_error", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(interruption_type v) noexcept {
  switch (v) {
    case interruption_type::external_interrupt: return "external_interrupt";
    case interruption_type::reserved: return "reserved";
    case interruption_type::nmi: return "nmi";
    case interruption_type::hardware_exception: return "hardware_exception";
    case interruption_type::software_interrupt: return "software_interrupt";
    case interruption_type::privileged_software_exception: return "privileged_software_exception";
    case interruption_type::software_exception: return "software_exception";
    case interruption_type::other_event: return "other_event";
  }
  return {};
}
/// See name(interruption_type).
[[nodiscard]] inline std::string to_string(interruption_type v) { return ::hvkit::hosted::enum_string(name(v), "interruption_type", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(vm_entry_phase v) noexcept {
  switch (v) {
    case vm_entry_phase::controls: return "controls";
    case vm_entry_phase::host_state: return "host_state";
    case vm_entry_phase::guest_state: return "guest_state";
    case vm_entry_phase::msr_load: return "msr_load";
  }
  return {};
}
/// See name(vm_entry_phase).
[[nodiscard]] inline std::string to_string(vm_entry_phase v) { return ::hvkit::hosted::enum_string(name(v), "vm_entry_phase", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(entry_failure_qualification v) noexcept {
  switch (v) {
    case entry_failure_qualification::none: return "none";
    case entry_failure_qualification::pdpte_load: return "pdpte_load";
    case entry_failure_qualification::nmi_injection_blocked_by_sti: return "nmi_injection_blocked_by_sti";
    case entry_failure_qualification::vmcs_link_pointer: return "vmcs_link_pointer";
  }
  return {};
}
/// See name(entry_failure_qualification).
[[nodiscard]] inline std::string to_string(entry_failure_qualification v) { return ::hvkit::hosted::enum_string(name(v), "entry_failure_qualification", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(vm_entry_outcome v) noexcept {
  switch (v) {
    case vm_entry_outcome::success: return "success";
    case vm_entry_outcome::vm_fail_valid: return "vm_fail_valid";
    case vm_entry_outcome::entry_failure: return "entry_failure";
  }
  return {};
}
/// See name(vm_entry_outcome).
[[nodiscard]] inline std::string to_string(vm_entry_outcome v) { return ::hvkit::hosted::enum_string(name(v), "vm_entry_outcome", v); }

/// The enumerator name; empty for a value that names none.
[[nodiscard]] constexpr std::string_view name(guest_segment v) noexcept {
  switch (v) {
    case guest_segment::es: return "es";
    case guest_segment::cs: return "cs";
    case guest_segment::ss: return "ss";
    case guest_segment::ds: return "ds";
    case guest_segment::fs: return "fs";
    case guest_segment::gs: return "gs";
    case guest_segment::ldtr: return "ldtr";
    case guest_segment::tr: return "tr";
  }
  return {};
}
/// See name(guest_segment).
[[nodiscard]] inline std::string to_string(guest_segment v) { return ::hvkit::hosted::enum_string(name(v), "guest_segment", v); }

/// A VM-entry verdict in one line: the outcome, the error or exit reason, the rule that
/// failed with its SDM section, and the fields involved, e.g. "vm_fail_valid: error 7
/// (entry_invalid_control_fields), rule <name> (SDM <section>), <field> (0x4012) = 0x...".
[[nodiscard]] inline std::string to_string(const vm_entry_verdict& v) {
  std::string s = to_string(v.outcome);
  if (v.outcome == vm_entry_outcome::vm_fail_valid)
    s += ": error " + std::to_string(static_cast<std::uint32_t>(v.error)) + " (" + to_string(v.error) + ")";
  if (v.outcome == vm_entry_outcome::entry_failure)
    s += ": " + to_string(exit_reason_field{v.exit_reason}) + ", qualification " + ::hvkit::hosted::hex(v.exit_qualification);
  if (v.rule != nullptr) {
    s += ", rule ";
    s += v.rule->name;
    s += " (SDM ";
    s += v.rule->section;
    s += ')';
  }
  auto field = [&](std::uint32_t enc, std::uint64_t value) {
    if (enc == ~0u) return;
    const field_info* f = find_field(enc);
    s += ", ";
    s += f != nullptr ? f->name : "field";
    s += " (" + ::hvkit::hosted::hex(enc) + ") = " + ::hvkit::hosted::hex(value);
  };
  if (v.hit.failed) {
    field(v.hit.field, v.hit.value);
    field(v.hit.field2, v.hit.value2);
  }
  return s;
}

}  // namespace hvkit::vmx

namespace hvkit::hosted {
template <>
inline constexpr bool enable_printing<vmx::exit_reason> = true;
template <>
inline constexpr bool enable_printing<vmx::exit_reason_field> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_instruction_error> = true;
template <>
inline constexpr bool enable_printing<vmx::vmx_instruction> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_fail::kind> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_fail> = true;
template <>
inline constexpr bool enable_printing<vmx::ept_error> = true;
template <>
inline constexpr bool enable_printing<vmx::tlb_flush> = true;
template <>
inline constexpr bool enable_printing<vmx::injection_error> = true;
template <>
inline constexpr bool enable_printing<vmx::activity_state> = true;
template <>
inline constexpr bool enable_printing<vmx::entry_state_error> = true;
template <>
inline constexpr bool enable_printing<vmx::interruption_type> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_entry_phase> = true;
template <>
inline constexpr bool enable_printing<vmx::entry_failure_qualification> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_entry_outcome> = true;
template <>
inline constexpr bool enable_printing<vmx::guest_segment> = true;
template <>
inline constexpr bool enable_printing<vmx::vm_entry_verdict> = true;
}  // namespace hvkit::hosted
