// SPDX-License-Identifier: MIT
/// @file
/// @brief The checks on the VM-execution, VM-exit and VM-entry control fields (SDM Vol. 3C
/// 27.2.1.1-27.2.1.3). Failing any of them: VMfailValid, VM-instruction error 7.
#pragma once

#include <array>
#include <cstdint>

#include "ept_entry.hpp"
#include "event_injection.hpp"
#include "vm_entry_rule.hpp"

namespace hvkit::vmx {

namespace entry_rules {

inline constexpr const char* sec_exec = "27.2.1.1";
inline constexpr const char* sec_exit = "27.2.1.2";
inline constexpr const char* sec_entry = "27.2.1.3";
inline constexpr auto ctl = vm_entry_phase::controls;

/// The VM-entry event-injection fields of the snapshot as one value.
[[nodiscard]] constexpr injected_event injection_of(const S& s) noexcept {
  return {entry_interruption_info{s.entry_interruption_info}, s.entry_exception_error_code, s.entry_instruction_length};
}
/// What the injection rules (event_injection.hpp, injection_rules) need from the processor
/// and the guest: CR0.PE from the guest-state area (or, with the older wording, "unrestricted
/// guest" = 0 as well), MTF support, IA32_VMX_MISC[30], IA32_VMX_BASIC[56].
[[nodiscard]] constexpr injection_environment injection_env_of(const S& s, const E& e) noexcept {
  injection_environment env;
  env.protected_mode = s.guest_cr0.test(x86::cr0::pe) || (e.error_code_older_wording && !s.unrestricted_guest());
  env.mtf_supported = (e.caps.primary_caps().may_be_one & p1::monitor_trap_flag.raw()) != 0;
  env.zero_length_allowed = (e.caps.misc >> 30) & 1u;
  env.any_error_code = (e.caps.basic >> 56) & 1u;
  return env;
}

/// The rules of SDM 27.2.1, in the order the SDM lists them.
inline constexpr std::array control_rules{
    // ---- 27.2.1.1 VM-execution control fields ----
    vm_entry_rule{{"pin_based_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.pin.raw(), e.caps.pin_caps()) ? entry_fail(f::pin_based_controls, s.pin.raw()) : entry_pass();
    }},
    vm_entry_rule{{"primary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.proc.raw(), e.caps.primary_caps()) ? entry_fail(f::primary_processor_based_controls, s.proc.raw())
                                                           : entry_pass();
    }},
    vm_entry_rule{{"secondary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.proc.test(p1::activate_secondary_controls)) return entry_pass();
      return violates(s.proc2_raw.raw(), e.caps.secondary_caps())
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"tertiary_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.proc.test(p1::activate_tertiary_controls)) return entry_pass();
      return (s.proc3_raw & ~e.caps.tertiary_allowed1()).none()
                 ? entry_pass()
                 : entry_fail(f::tertiary_processor_based_controls, s.proc3_raw.raw());
    }},
    // The CR3-target count is at most the number of CR3-target values the CPU supports
    // (IA32_VMX_MISC bits 24:16, SDM A.6).
    vm_entry_rule{{"cr3_target_count_too_large", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto max = static_cast<std::uint32_t>((e.caps.misc >> 16) & 0x1ffu);
      return s.cr3_target_count > max ? entry_fail(f::cr3_target_count, s.cr3_target_count) : entry_pass();
    }},
    vm_entry_rule{{"io_bitmap_a_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_io_bitmaps) && bad_page_address(s.io_bitmap_a, e) ? entry_fail(f::io_bitmap_a, s.io_bitmap_a)
                                                                                   : entry_pass();
    }},
    vm_entry_rule{{"io_bitmap_b_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_io_bitmaps) && bad_page_address(s.io_bitmap_b, e) ? entry_fail(f::io_bitmap_b, s.io_bitmap_b)
                                                                                   : entry_pass();
    }},
    vm_entry_rule{{"msr_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_msr_bitmaps) && bad_page_address(s.msr_bitmap, e) ? entry_fail(f::msr_bitmap, s.msr_bitmap)
                                                                                    : entry_pass();
    }},
    vm_entry_rule{{"virtual_apic_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.proc.test(p1::use_tpr_shadow) && bad_page_address(s.virtual_apic_address, e)
                 ? entry_fail(f::virtual_apic_page_address, s.virtual_apic_address)
                 : entry_pass();
    }},
    // With "use TPR shadow" and without "virtual-interrupt delivery": TPR threshold bits
    // 31:4 are 0 ...
    vm_entry_rule{{"tpr_threshold_reserved", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.proc.test(p1::use_tpr_shadow) && !s.secondary().test(p2::virtual_interrupt_delivery) &&
                     (s.tpr_threshold >> 4) != 0
                 ? entry_fail(f::tpr_threshold, s.tpr_threshold)
                 : entry_pass();
    }},
    // ... and, also without "virtualize APIC accesses", bits 3:0 are not greater than VTPR
    // bits 7:4 (byte 80H of the virtual-APIC page; needs the memory view).
    vm_entry_rule{{"tpr_threshold_above_vtpr", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      const auto p = s.secondary();
      return s.proc.test(p1::use_tpr_shadow) && s.vtpr_known && !p.test(p2::virtual_interrupt_delivery) &&
                     !p.test(p2::virtualize_apic_accesses) && (s.tpr_threshold & 0xfu) > (s.vtpr >> 4)
                 ? entry_fail(f::tpr_threshold, s.tpr_threshold)
                 : entry_pass();
    }},
    // Without "use TPR shadow": "virtualize x2APIC mode", "APIC-register virtualization" and
    // "virtual-interrupt delivery" are 0.
    vm_entry_rule{{"apic_virtualization_without_tpr_shadow", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return !s.proc.test(p1::use_tpr_shadow) &&
                     s.secondary().any(p2::virtualize_x2apic_mode | p2::apic_register_virtualization |
                                       p2::virtual_interrupt_delivery)
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"x2apic_mode_with_apic_access_virtualization", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::virtualize_x2apic_mode | p2::virtualize_apic_accesses)
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"virtual_interrupt_delivery_without_external_interrupt_exiting", sec_exec, ctl},
                  [](const S& s, const E&) noexcept -> H {
                    return s.secondary().test(p2::virtual_interrupt_delivery) &&
                                   !s.pin.test(pin_based::external_interrupt_exiting)
                               ? entry_fail(f::pin_based_controls, s.pin.raw())
                               : entry_pass();
                  }},
    vm_entry_rule{{"posted_interrupts_without_virtual_interrupt_delivery", sec_exec, ctl},
                  [](const S& s, const E&) noexcept -> H {
                    return s.pin.test(pin_based::process_posted_interrupts) &&
                                   !s.secondary().test(p2::virtual_interrupt_delivery)
                               ? entry_fail(f::pin_based_controls, s.pin.raw())
                               : entry_pass();
                  }},
    vm_entry_rule{{"posted_interrupts_without_acknowledge_on_exit", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) && !s.exit.test(exit_controls::acknowledge_interrupt_on_exit)
                 ? entry_fail(f::primary_vm_exit_controls, s.exit.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"posted_interrupt_vector_reserved", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) && (s.posted_interrupt_vector >> 8) != 0
                 ? entry_fail(f::posted_interrupt_notification_vector, s.posted_interrupt_vector)
                 : entry_pass();
    }},
    vm_entry_rule{{"posted_interrupt_descriptor_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.pin.test(pin_based::process_posted_interrupts) &&
                     ((s.posted_interrupt_descriptor & 0x3fu) != 0 || beyond_maxphyaddr(s.posted_interrupt_descriptor, e))
                 ? entry_fail(f::posted_interrupt_descriptor_address, s.posted_interrupt_descriptor)
                 : entry_pass();
    }},
    vm_entry_rule{{"virtual_nmis_without_nmi_exiting", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.pin.test(pin_based::virtual_nmis) && !s.pin.test(pin_based::nmi_exiting)
                 ? entry_fail(f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"nmi_window_exiting_without_virtual_nmis", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.proc.test(p1::nmi_window_exiting) && !s.pin.test(pin_based::virtual_nmis)
                 ? entry_fail(f::primary_processor_based_controls, s.proc.raw(), f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"apic_access_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::virtualize_apic_accesses) && bad_page_address(s.apic_access_address, e)
                 ? entry_fail(f::apic_access_address, s.apic_access_address)
                 : entry_pass();
    }},
    vm_entry_rule{{"vpid_zero", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_vpid) && s.vpid == 0 ? entry_fail(f::virtual_processor_id, s.vpid) : entry_pass();
    }},
    // The EPTP: vmx::check_eptp (memory type, page-walk length, A/D, reserved bits, width).
    vm_entry_rule{{"eptp_invalid", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      if (!s.ept()) return entry_pass();
      return check_eptp(s.eptp, ept_capabilities_from(e.caps.ept_vpid_cap, e.maxphyaddr)).has_value()
                 ? entry_pass()
                 : entry_fail(f::ept_pointer, s.eptp.raw());
    }},
    vm_entry_rule{{"pml_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_pml) && !s.ept() ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                                                            : entry_pass();
    }},
    vm_entry_rule{{"pml_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_pml) && bad_page_address(s.pml_address, e) ? entry_fail(f::pml_address, s.pml_address)
                                                                                      : entry_pass();
    }},
    vm_entry_rule{{"unrestricted_guest_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.unrestricted_guest() && !s.ept() ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                                                : entry_pass();
    }},
    vm_entry_rule{{"mode_based_execute_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::mode_based_execute_control) && !s.ept()
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"sub_page_permissions_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::sub_page_write_permissions) && !s.ept()
                 ? entry_fail(f::secondary_processor_based_controls, s.proc2_raw.raw())
                 : entry_pass();
    }},
    // VM functions: only bits IA32_VMX_VMFUNC allows (SDM A.11); EPTP switching needs EPT
    // and a valid EPTP-list address.
    vm_entry_rule{{"vm_function_controls_reserved", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & ~e.caps.vmfunc) != 0
                 ? entry_fail(f::vm_function_controls, s.vm_function_controls)
                 : entry_pass();
    }},
    vm_entry_rule{{"eptp_switching_without_ept", sec_exec, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & 1u) && !s.ept()
                 ? entry_fail(f::vm_function_controls, s.vm_function_controls)
                 : entry_pass();
    }},
    vm_entry_rule{{"eptp_list_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::enable_vm_functions) && (s.vm_function_controls & 1u) &&
                     bad_page_address(s.eptp_list_address, e)
                 ? entry_fail(f::eptp_list_address, s.eptp_list_address)
                 : entry_pass();
    }},
    vm_entry_rule{{"vmread_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::vmcs_shadowing) && bad_page_address(s.vmread_bitmap, e)
                 ? entry_fail(f::vmread_bitmap_address, s.vmread_bitmap)
                 : entry_pass();
    }},
    vm_entry_rule{{"vmwrite_bitmap_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::vmcs_shadowing) && bad_page_address(s.vmwrite_bitmap, e)
                 ? entry_fail(f::vmwrite_bitmap_address, s.vmwrite_bitmap)
                 : entry_pass();
    }},
    vm_entry_rule{{"ve_information_address", sec_exec, ctl}, [](const S& s, const E& e) noexcept -> H {
      return s.secondary().test(p2::ept_violation_ve) && bad_page_address(s.ve_information_address, e)
                 ? entry_fail(f::ve_information_address, s.ve_information_address)
                 : entry_pass();
    }},

    // ---- 27.2.1.2 VM-exit control fields ----
    vm_entry_rule{{"exit_controls_reserved", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.exit.raw(), e.caps.exit_caps()) ? entry_fail(f::primary_vm_exit_controls, s.exit.raw()) : entry_pass();
    }},
    vm_entry_rule{{"save_preemption_timer_without_activate", sec_exit, ctl}, [](const S& s, const E&) noexcept -> H {
      return s.exit.test(exit_controls::save_preemption_timer) && !s.pin.test(pin_based::activate_preemption_timer)
                 ? entry_fail(f::primary_vm_exit_controls, s.exit.raw(), f::pin_based_controls, s.pin.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"exit_msr_store_area", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.exit_msr_store_address, s.exit_msr_store_count, e)
                 ? entry_fail(f::vm_exit_msr_store_address, s.exit_msr_store_address, f::vm_exit_msr_store_count,
                              s.exit_msr_store_count)
                 : entry_pass();
    }},
    vm_entry_rule{{"exit_msr_load_area", sec_exit, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.exit_msr_load_address, s.exit_msr_load_count, e)
                 ? entry_fail(f::vm_exit_msr_load_address, s.exit_msr_load_address, f::vm_exit_msr_load_count,
                              s.exit_msr_load_count)
                 : entry_pass();
    }},

    // ---- 27.2.1.3 VM-entry control fields ----
    vm_entry_rule{{"entry_controls_reserved", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return violates(s.entry.raw(), e.caps.entry_caps()) ? entry_fail(f::vm_entry_controls, s.entry.raw()) : entry_pass();
    }},
    // Event injection (valid bit set), one rule per predicate of injection_rules
    // (event_injection.hpp), which check_injection_fields runs too. Type 1 is reserved;
    // type 7 (other event) only if the monitor trap flag is supported.
    vm_entry_rule{{"injection_type_reserved", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      const auto i = injection_of(s);
      return injection_rules::reserved_type(i) || injection_rules::mtf_unsupported(i, injection_env_of(s, e))
                 ? entry_fail(f::vm_entry_interruption_info, s.entry_interruption_info)
                 : entry_pass();
    }},
    // NMI: vector 2; hardware exception: vector at most 31; other event: vector 0.
    vm_entry_rule{{"injection_vector", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      return injection_rules::vector_error(injection_of(s)) != injection_error::none
                 ? entry_fail(f::vm_entry_interruption_info, s.entry_interruption_info)
                 : entry_pass();
    }},
    // Deliver-error-code (bit 11), the current SDM text: 1 for #DF, #TS, #NP, #SS, #GP, #PF,
    // #AC injected as hardware exceptions with guest CR0.PE = 1 and IA32_VMX_BASIC[56] = 0;
    // 0 for every other event, with CR0.PE = 0, and (BASIC[56] = 0) for the other vectors,
    // #CP included (injection_rules::error_code_missing / error_code_unexpected).
    vm_entry_rule{{"injection_error_code_missing", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return injection_rules::error_code_missing(injection_of(s), injection_env_of(s, e))
                 ? entry_fail(f::vm_entry_interruption_info, s.entry_interruption_info, f::guest_cr0, s.guest_cr0.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"injection_error_code_unexpected", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return injection_rules::error_code_unexpected(injection_of(s), injection_env_of(s, e))
                 ? entry_fail(f::vm_entry_interruption_info, s.entry_interruption_info, f::guest_cr0, s.guest_cr0.raw())
                 : entry_pass();
    }},
    vm_entry_rule{{"injection_info_reserved", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      return injection_rules::reserved_bits(injection_of(s)) ? entry_fail(f::vm_entry_interruption_info, s.entry_interruption_info)
                                                             : entry_pass();
    }},
    vm_entry_rule{{"injection_error_code_reserved", sec_entry, ctl}, [](const S& s, const E&) noexcept -> H {
      return injection_rules::error_code_reserved(injection_of(s))
                 ? entry_fail(f::vm_entry_exception_error_code, s.entry_exception_error_code)
                 : entry_pass();
    }},
    // Software interrupts and exceptions: instruction length 1-15 (0 allowed if
    // IA32_VMX_MISC bit 30).
    vm_entry_rule{{"injection_instruction_length", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return injection_rules::instruction_length_invalid(injection_of(s), injection_env_of(s, e))
                 ? entry_fail(f::vm_entry_instruction_length, s.entry_instruction_length)
                 : entry_pass();
    }},
    vm_entry_rule{{"entry_msr_load_area", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return bad_msr_area(s.entry_msr_load_address, s.entry_msr_load_count, e)
                 ? entry_fail(f::vm_entry_msr_load_address, s.entry_msr_load_address, f::vm_entry_msr_load_count,
                              s.entry_msr_load_count)
                 : entry_pass();
    }},
    // Outside SMM, "entry to SMM" and "deactivate dual-monitor treatment" are 0.
    vm_entry_rule{{"smm_controls_outside_smm", sec_entry, ctl}, [](const S& s, const E& e) noexcept -> H {
      return !e.in_smm && s.entry.any(entry_controls::entry_to_smm | entry_controls::deactivate_dual_monitor)
                 ? entry_fail(f::vm_entry_controls, s.entry.raw())
                 : entry_pass();
    }},
};
}  // namespace entry_rules

}  // namespace hvkit::vmx
